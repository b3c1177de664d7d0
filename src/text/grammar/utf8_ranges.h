// Code point ranges -> UTF-8 byte-range sequences (the splitting RE2 and Rust's utf8-ranges use):
// every sequence is a list of per-byte ranges whose cross product is exactly a run of valid UTF-8
// encodings, so a character class becomes a handful of byte-level alternatives. Surrogates
// (U+D800..U+DFFF) are never produced: the output is always valid UTF-8.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace frost::text::grammar {

using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;  // 1..4 inclusive byte ranges

// Appends the sequences covering [lo, hi] (clamped to U+10FFFF) to *out.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out);

// Sorted, merged ranges; `negated` complements them over [0, U+10FFFF].
std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(std::vector<std::pair<uint32_t, uint32_t>> r,
                                                            bool negated);

// UTF-8 encoding of one code point (<= U+10FFFF).
void append_utf8(uint32_t cp, std::string* out);

}  // namespace frost::text::grammar
