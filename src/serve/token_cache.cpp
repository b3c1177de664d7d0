// TokenCache and the split rule (see token_cache.h).
#include "serve/token_cache.h"

#include <cstdint>

namespace frost::serve {

bool split_is_safe(std::string_view left, std::string_view right, const std::vector<SplitToken>& tokens) {
    if (left.empty()) return true;
    if (right.empty()) return true;
    const unsigned char first = static_cast<unsigned char>(right.front());
    // ASCII, not whitespace: the cut is a character boundary and no rstrip crosses it.
    constexpr unsigned char kAsciiEnd = 0x80;
    if (first >= kAsciiEnd || first == ' ' || first == '\t' || first == '\n' || first == '\r' || first == '\v' ||
        first == '\f')
        return false;
    const SplitToken* head = nullptr;  // the raw pass takes the longest match at a position
    for (const auto& t : tokens) {
        if (t.normalized || t.content.empty() || right.substr(0, t.content.size()) != t.content) continue;
        if (!head || t.content.size() > head->content.size()) head = &t;
    }
    if (!head || head->lstrip || head->single_word) return false;
    // A token starting in `left` and ending in `right` would be matched first in the whole text.
    for (const auto& t : tokens) {
        const std::string_view c = t.content;
        for (size_t k = 1; k < c.size(); ++k)
            if (left.size() >= k && left.substr(left.size() - k) == c.substr(0, k) && right.substr(0, c.size() - k) == c.substr(k))
                return false;
    }
    return true;
}

std::vector<int32_t> TokenCache::encode(const TextIface& t, const std::string& owner, const std::string& text) {
    std::vector<int32_t> ids;
    encode_at_most(t, owner, text, SIZE_MAX, &ids);
    return ids;
}

bool TokenCache::encode_at_most(const TextIface& t, const std::string& owner, const std::string& text, size_t max_ids,
                                std::vector<int32_t>* out) {
    std::vector<int32_t>& ids = *out;
    ids.clear();
    bool reused = false;
    size_t done = 0;  // bytes of `text` whose ids were reused
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto best = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->owner != owner || it->text.size() > text.size()) continue;
            if (best != entries_.end() && it->text.size() <= best->text.size()) continue;
            if (text.compare(0, it->text.size(), it->text) == 0) best = it;
        }
        if (best != entries_.end() && t.split_safe(best->text, std::string_view(text).substr(best->text.size()))) {
            ids = best->ids;
            reused = true;
            done = best->text.size();
            entries_.splice(entries_.begin(), entries_, best);
            hits_++;
        }
    }
    if (reused) {
        std::vector<int32_t> rest;
        if (ids.size() > max_ids ||
            !t.encode_at_most(std::string_view(text).substr(done), max_ids - ids.size(), &rest))
            return false;
        ids.insert(ids.end(), rest.begin(), rest.end());
    } else if (!t.encode_at_most(text, max_ids, &ids)) {
        return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Entry e{owner, text, ids};
    if (e.bytes() > max_bytes_) return true;
    bytes_ += e.bytes();
    entries_.push_front(std::move(e));
    while (bytes_ > max_bytes_ && !entries_.empty()) {
        bytes_ -= entries_.back().bytes();
        entries_.pop_back();
    }
    return true;
}

size_t TokenCache::hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
}

}  // namespace frost::serve
