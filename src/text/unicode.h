// Unicode helpers for the tokenizer and chat template: UTF-8 <-> code points (invalid input gets a
// defined replacement), the general-category classes the pre-tokenizer regex uses, whitespace
// predicates and NFC normalisation. Tables come from scripts/gen_unicode_tables.py.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace frost::text {

constexpr uint32_t kReplacementChar = 0xFFFD;

enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kMark = 2, kNumber = 3 };

// Decodes UTF-8 to code points. Invalid input never fails: each maximal ill-formed subpart (the
// W3C/Unicode "substitution of maximal subparts" practice, which is what Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do) becomes U+FFFD.
std::vector<uint32_t> utf8_decode(std::string_view s);
// Same, replacing ill-formed subparts with U+FFFD in UTF-8 form.
std::string utf8_sanitize(std::string_view s);
// True when `s` is well-formed UTF-8.
bool utf8_valid(std::string_view s);
// Length of the longest prefix of `s` that ends on a complete UTF-8 sequence boundary, treating
// ill-formed bytes as complete (they will become U+FFFD); only a truncated-but-so-far-valid
// sequence at the very end is held back.
size_t utf8_complete_prefix(std::string_view s);
void utf8_append(std::string& out, uint32_t cp);
std::string utf8_encode(const std::vector<uint32_t>& cps);

CharClass char_class(uint32_t cp);
// Regex \w as Rust's regex crate defines it (letters, marks, Nd/Nl, connector punctuation,
// joiners): what tokenizers' single_word added tokens treat as "inside a word".
bool is_word_char(uint32_t cp);
// Oniguruma's \s in Unicode mode: the White_Space property.
bool is_regex_space(uint32_t cp);
// Python's str.isspace(): what str.strip() / jinja's trim remove.
bool is_python_space(uint32_t cp);

// Canonical composition normal form (NFC) of `cps`, in place.
void nfc_normalize(std::vector<uint32_t>& cps);
std::string nfc_normalize_utf8(std::string_view s);

const char* unicode_version();

}  // namespace frost::text
