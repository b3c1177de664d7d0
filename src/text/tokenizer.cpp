// Encode and decode for the byte-level BPE tokenizer (loading lives in tokenizer_load.cpp).
// Encode mirrors tokenizers' pipeline: split out added tokens on the raw text, NFC-normalise
// what is left, split out "normalized" added tokens, pre-tokenize, ByteLevel-map, BPE each piece.
#include <algorithm>
#include <cstdint>
#include <queue>
#include <tuple>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace frost::text {

uint32_t byte_level_char(uint8_t b) {
    // GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
    // U+0100.. in byte order.
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (printable) return b;
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; ++x) {
        const bool p = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (!p) ++n;
    }
    return 0x100 + n;
}

int byte_level_byte(uint32_t cp) {
    static const std::vector<int> table = [] {
        std::vector<int> t(0x200, -1);
        for (int b = 0; b < 256; ++b) t[byte_level_char(static_cast<uint8_t>(b))] = b;
        return t;
    }();
    return cp < table.size() ? table[cp] : -1;
}

namespace {

// Start of the UTF-8 character that ends just before `pos` (text is valid UTF-8 here).
size_t prev_char_start(std::string_view text, size_t pos) {
    size_t i = pos - 1;
    while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    return i;
}

uint32_t char_at(std::string_view text, size_t pos, size_t* len) {
    const std::vector<uint32_t> one = utf8_decode(text.substr(pos, std::min<size_t>(4, text.size() - pos)));
    const std::string enc = one.empty() ? std::string() : utf8_encode({one[0]});
    *len = enc.empty() ? 1 : enc.size();
    return one.empty() ? 0 : one[0];
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    std::vector<int32_t> ids;
    encode_at_most(text, SIZE_MAX, &ids);
    return ids;
}

bool Tokenizer::encode_at_most(std::string_view text, size_t max_ids, std::vector<int32_t>* ids) const {
    ids->clear();
    if (utf8_valid(text)) return encode_segment(text, false, *ids, max_ids);
    return encode_segment(utf8_sanitize(text), false, *ids, max_ids);
}

bool Tokenizer::encode_segment(std::string_view text, bool normalized_pass, std::vector<int32_t>& ids,
                               size_t limit) const {
    const auto& buckets = added_by_first_byte_[normalized_pass ? 1 : 0];
    auto emit_plain = [&](size_t from, size_t to) {
        if (from >= to) return true;
        const std::string_view part = text.substr(from, to - from);
        if (normalized_pass) return encode_plain(part, ids, limit);
        if (has_nfc_) return encode_segment(nfc_normalize_utf8(part), true, ids, limit);
        return encode_segment(part, true, ids, limit);
    };
    size_t seg = 0;  // start of text not yet emitted
    for (size_t pos = 0; pos < text.size();) {
        const std::vector<int32_t>* bucket =
            buckets.empty() ? nullptr : &buckets[static_cast<unsigned char>(text[pos])];
        const AddedToken* hit = nullptr;
        if (bucket) {
            for (int32_t idx : *bucket) {  // longest first
                const AddedToken& t = added_[static_cast<size_t>(idx)];
                if (text.compare(pos, t.content.size(), t.content) != 0) continue;
                if (t.single_word) {
                    size_t len;
                    const bool word_before = pos > 0 && is_word_char(char_at(text, prev_char_start(text, pos), &len));
                    const size_t stop = pos + t.content.size();
                    const bool word_after = stop < text.size() && is_word_char(char_at(text, stop, &len));
                    if (word_before || word_after) continue;
                }
                hit = &t;
                break;
            }
        }
        if (!hit) { ++pos; continue; }
        size_t start = pos, stop = pos + hit->content.size();
        if (hit->lstrip) {
            while (start > seg) {
                const size_t p = prev_char_start(text, start);
                size_t len;
                if (!is_regex_space(char_at(text, p, &len))) break;
                start = p;
            }
        }
        if (hit->rstrip) {
            while (stop < text.size()) {
                size_t len;
                if (!is_regex_space(char_at(text, stop, &len))) break;
                stop += len;
            }
        }
        if (!emit_plain(seg, start)) return false;
        ids.push_back(hit->id);
        if (ids.size() > limit) return false;
        seg = pos = stop;
    }
    return emit_plain(seg, text.size());
}

bool Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& ids, size_t limit) const {
    // Every byte lands in some token: past the limit already by the bound, nothing is decoded.
    if (limit != SIZE_MAX && ids.size() + min_tokens(text.size()) > limit) return false;
    const std::vector<uint32_t> cps = utf8_decode(text);
    std::vector<std::pair<size_t, size_t>> pieces;
    split_pretokenize(cps.data(), 0, cps.size(), pattern_, pieces);
    std::string bytes;
    size_t left = text.size();  // bytes of the pieces not yet merged
    for (const auto& [a, b] : pieces) {
        bytes.clear();
        for (size_t i = a; i < b; ++i) utf8_append(bytes, cps[i]);
        bpe(bytes, ids);
        left -= std::min(left, bytes.size());
        if (limit != SIZE_MAX && ids.size() + min_tokens(left) > limit) return false;
    }
    return true;
}

void Tokenizer::bpe(const std::string& bytes, std::vector<int32_t>& ids) const {
    const size_t n = bytes.size();
    if (n == 0) return;
    if (n == 1) { ids.push_back(byte_to_id_[static_cast<unsigned char>(bytes[0])]); return; }
    if (ignore_merges_) {
        std::string word;
        for (char c : bytes) utf8_append(word, byte_level_char(static_cast<uint8_t>(c)));
        auto it = vocab_.find(word);
        if (it != vocab_.end()) { ids.push_back(it->second); return; }
    }
    struct Sym {
        int32_t id, prev, next;
    };
    std::vector<Sym> s(n);
    for (size_t i = 0; i < n; ++i)
        s[i] = {byte_to_id_[static_cast<unsigned char>(bytes[i])], static_cast<int32_t>(i) - 1,
                i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
    // Min-heap on (rank, position): the lowest-ranked merge first, leftmost among equal ranks,
    // exactly the order tokenizers' BPE::merge_all uses.
    using Cand = std::tuple<int32_t, int32_t, int32_t>;  // rank, left position, new id
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push_pair = [&](int32_t left) {
        const int32_t right = s[static_cast<size_t>(left)].next;
        if (right < 0) return;
        auto it = merges_.find(pair_key(s[static_cast<size_t>(left)].id, s[static_cast<size_t>(right)].id));
        if (it != merges_.end()) heap.emplace(it->second.rank, left, it->second.new_id);
    };
    for (size_t i = 0; i + 1 < n; ++i) push_pair(static_cast<int32_t>(i));
    while (!heap.empty()) {
        const auto [rank, pos, new_id] = heap.top();
        heap.pop();
        Sym& left = s[static_cast<size_t>(pos)];
        if (left.id < 0 || left.next < 0) continue;
        Sym& right = s[static_cast<size_t>(left.next)];
        auto it = merges_.find(pair_key(left.id, right.id));
        if (it == merges_.end() || it->second.new_id != new_id || it->second.rank != rank) continue;  // stale
        left.id = new_id;
        right.id = -1;
        left.next = right.next;
        if (right.next >= 0) s[static_cast<size_t>(right.next)].prev = pos;
        if (left.prev >= 0) push_pair(left.prev);
        push_pair(pos);
    }
    for (int32_t i = 0; i >= 0; i = s[static_cast<size_t>(i)].next) ids.push_back(s[static_cast<size_t>(i)].id);
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
    static const std::string empty;
    return has_id(id) ? id_bytes_[static_cast<size_t>(id)] : empty;
}

bool Tokenizer::has_id(int32_t id) const {
    return id >= 0 && id < vocab_size() && id_present_[static_cast<size_t>(id)];
}

bool Tokenizer::is_special(int32_t id) const { return has_id(id) && id_special_[static_cast<size_t>(id)]; }

int32_t Tokenizer::token_to_id(std::string_view token) const {
    for (const AddedToken& t : added_)
        if (t.content == token) return t.id;
    auto it = vocab_.find(std::string(token));
    return it == vocab_.end() ? -1 : it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const {
    return has_id(id) ? id_to_token_[static_cast<size_t>(id)] : std::string();
}

std::string Tokenizer::decode(const int32_t* ids, size_t n, bool skip_special_tokens) const {
    std::string bytes;
    for (size_t i = 0; i < n; ++i) {
        if (skip_special_tokens && is_special(ids[i])) continue;
        bytes += token_bytes(ids[i]);
    }
    return utf8_sanitize(bytes);
}

std::string DecodeStream::push(int32_t id) {
    if (skip_special_ && tok_->is_special(id)) return std::string();
    pending_ += tok_->token_bytes(id);
    const size_t keep_from = utf8_complete_prefix(pending_);
    std::string out = utf8_sanitize(std::string_view(pending_).substr(0, keep_from));
    pending_.erase(0, keep_from);
    return out;
}

std::string DecodeStream::flush() {
    std::string out = utf8_sanitize(pending_);
    pending_.clear();
    return out;
}

}  // namespace frost::text
