// UTF-8 range splitting (see utf8_ranges.h).
#include "text/grammar/utf8_ranges.h"

#include <algorithm>

namespace frost::text::grammar {

namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;

int encode(uint32_t cp, uint8_t* b) {
    if (cp < 0x80) { b[0] = uint8_t(cp); return 1; }
    if (cp < 0x800) { b[0] = uint8_t(0xC0 | (cp >> 6)); b[1] = uint8_t(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        b[0] = uint8_t(0xE0 | (cp >> 12)); b[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
        b[2] = uint8_t(0x80 | (cp & 0x3F)); return 3;
    }
    b[0] = uint8_t(0xF0 | (cp >> 18)); b[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
    b[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F)); b[3] = uint8_t(0x80 | (cp & 0x3F)); return 4;
}

// [lo, hi] lies within one encoding length and contains no surrogate.
void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out) {
    static const uint32_t kLenEnds[] = {0x7F, 0x7FF, 0xFFFF};
    for (uint32_t b : kLenEnds) {
        if (lo <= b && hi > b) {
            split(lo, b, out);
            split(b + 1, hi, out);
            return;
        }
    }
    if (hi <= 0x7F) {
        out->push_back({{uint8_t(lo), uint8_t(hi)}});
        return;
    }
    // Cut until every continuation byte range is "full" below the first differing byte, so the
    // cross product of per-byte ranges is exactly [lo, hi].
    for (int i = 1; i < 4; ++i) {
        const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                split(lo, lo | m, out);
                split((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                split(lo, (hi & ~m) - 1, out);
                split(hi & ~m, hi, out);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    const int n = encode(lo, a);
    encode(hi, b);
    ByteRangeSeq seq;
    for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
    out->push_back(std::move(seq));
}

}  // namespace

void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out) {
    hi = std::min(hi, kMaxCp);
    if (lo > hi) return;
    // Surrogates are not characters: cut them out.
    if (lo < 0xD800 && hi >= 0xD800) {
        split(lo, 0xD7FF, out);
        if (hi > 0xDFFF) split(0xE000, hi, out);
        return;
    }
    if (lo >= 0xD800 && lo <= 0xDFFF) {
        if (hi <= 0xDFFF) return;
        lo = 0xE000;
    }
    split(lo, hi, out);
}

std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(std::vector<std::pair<uint32_t, uint32_t>> r,
                                                            bool negated) {
    for (auto& p : r) {
        if (p.first > p.second) std::swap(p.first, p.second);
        p.second = std::min(p.second, kMaxCp);
    }
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint32_t, uint32_t>> m;
    for (const auto& p : r) {
        if (p.first > kMaxCp) continue;
        if (!m.empty() && p.first <= m.back().second + 1) m.back().second = std::max(m.back().second, p.second);
        else m.push_back(p);
    }
    if (!negated) return m;
    std::vector<std::pair<uint32_t, uint32_t>> c;
    uint32_t next = 0;
    for (const auto& p : m) {
        if (p.first > next) c.push_back({next, p.first - 1});
        next = p.second + 1;
    }
    if (next <= kMaxCp) c.push_back({next, kMaxCp});
    return c;
}

void append_utf8(uint32_t cp, std::string* out) {
    uint8_t b[4];
    const int n = encode(std::min(cp, kMaxCp), b);
    out->append(reinterpret_cast<const char*>(b), size_t(n));
}

}  // namespace frost::text::grammar
