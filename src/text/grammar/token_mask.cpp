// Vocabulary trie and token masks (see token_mask.h).
#include "text/grammar/token_mask.h"

#include <algorithm>
#include <numeric>

namespace frost::text::grammar {

TokenMasker::TokenMasker(const std::vector<std::string>& token_bytes, const std::vector<uint8_t>& skip,
                         std::vector<int32_t> end_ids, int32_t vocab_size)
    : vocab_(vocab_size), end_ids_(std::move(end_ids)), bytes_(token_bytes), skip_(skip) {
    std::vector<int32_t> order;
    const int32_t n = std::min<int32_t>(int32_t(token_bytes.size()), vocab_size);
    for (int32_t id = 0; id < n; ++id)
        if (!token_bytes[size_t(id)].empty() && (size_t(id) >= skip.size() || !skip[size_t(id)])) order.push_back(id);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        const int c = token_bytes[size_t(a)].compare(token_bytes[size_t(b)]);
        return c != 0 ? c < 0 : a < b;
    });
    // Sorted strings: each adds the nodes past its common prefix with the previous one, so
    // nodes are created in preorder and a node's subtree ends where the path leaves it.
    std::vector<uint32_t> path;  // node ids of the current string's prefix
    std::vector<uint32_t> tok_node;
    const std::string* prev = nullptr;
    for (int32_t id : order) {
        const std::string& s = token_bytes[size_t(id)];
        size_t lcp = 0;
        if (prev)
            while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
        while (path.size() > lcp) {
            end_[path.back()] = uint32_t(byte_.size());
            path.pop_back();
        }
        for (size_t i = lcp; i < s.size(); ++i) {
            path.push_back(uint32_t(byte_.size()));
            byte_.push_back(static_cast<uint8_t>(s[i]));
            depth_.push_back(uint16_t(std::min<size_t>(i + 1, 65535)));
            end_.push_back(0);
        }
        max_depth_ = std::max(max_depth_, s.size());
        tok_node.push_back(path.back());
        tok_.push_back(id);
        prev = &s;
    }
    while (!path.empty()) {
        end_[path.back()] = uint32_t(byte_.size());
        path.pop_back();
    }
    // tok_node is non-decreasing (tokens attach in creation order): CSR offsets.
    tok_begin_.assign(byte_.size() + 1, 0);
    for (uint32_t nd : tok_node) ++tok_begin_[nd + 1];
    std::partial_sum(tok_begin_.begin(), tok_begin_.end(), tok_begin_.begin());
}

bool TokenMasker::is_end(int32_t id) const {
    return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

std::vector<uint32_t> TokenMasker::compute(Machine& m, uint32_t frontier) const {
    std::vector<uint32_t> bits(words(), 0);
    auto set = [&](int32_t id) {
        if (id >= 0 && id < vocab_) bits[size_t(id) >> 5] |= 1u << (id & 31);
    };
    if (m.accepts(frontier))
        for (int32_t id : end_ids_) set(id);
    if (frontier == kDead || m.only_end(frontier)) return bits;
    std::vector<uint32_t> at(max_depth_ + 1, kDead);  // frontier after the first d bytes
    at[0] = frontier;
    const uint32_t n = uint32_t(byte_.size());
    for (uint32_t i = 0; i < n;) {
        const uint32_t f = m.step(at[depth_[i] - 1], byte_[i]);
        if (f == kDead) {
            i = end_[i];  // no token below this prefix can be allowed
            continue;
        }
        at[depth_[i]] = f;
        for (uint32_t t = tok_begin_[i]; t < tok_begin_[i + 1]; ++t) set(tok_[t]);
        ++i;
    }
    return bits;
}

const std::vector<uint32_t>& TokenMasker::mask(Machine& m, uint32_t frontier) const {
    if (const auto* c = m.cached_mask(frontier)) return *c;
    return m.store_mask(frontier, compute(m, frontier));
}

void Matcher::reset() {
    std::lock_guard<std::mutex> lock(m_->mu());
    f_ = m_->start();
    finished_ = false;
}

bool Matcher::accept(int32_t id) {
    if (finished_) return false;
    std::lock_guard<std::mutex> lock(m_->mu());
    if (k_->is_end(id)) {
        if (!m_->accepts(f_)) return false;
        finished_ = true;
        return true;
    }
    if (!k_->is_text(id)) return false;
    const std::string& b = k_->bytes(id);
    const uint32_t nf = m_->walk(f_, b.data(), b.size());
    if (nf == kDead) return false;
    f_ = nf;
    return true;
}

bool Matcher::accepts() const {
    std::lock_guard<std::mutex> lock(m_->mu());
    return m_->accepts(f_);
}

const std::vector<uint32_t>& Matcher::mask() {
    std::lock_guard<std::mutex> lock(m_->mu());
    if (finished_) {
        bits_.assign(k_->words(), 0);
        return bits_;
    }
    bits_ = k_->mask(*m_, f_);
    return bits_;
}

}  // namespace frost::text::grammar
