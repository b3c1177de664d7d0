// A small, valid byte-level BPE tokenizer.json (see tiny_tokenizer_util.cpp) for loader tests.
#pragma once
#include <nlohmann/json.hpp>

namespace frost::text::testing {

// Ids: 0..255 the byte tokens, 256 "he", 257 "ll", 258 "hell", 259 "hello", 260 " w",
// 261 "<|end|>" (special), 262 "<x>" (added, lstrip + rstrip).
nlohmann::json tiny_tokenizer_json();

}  // namespace frost::text::testing
