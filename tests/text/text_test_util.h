// Helpers shared by the text layer's gtests: the fixture tokenizer (loaded once) and a random
// string generator over tricky code points.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include "text/tokenizer.h"

namespace frost::text::testing {

// The real Qwen3 tokenizer from tests/fixtures; nullptr when the fixture is missing.
const Tokenizer* qwen3_tokenizer();
std::string qwen3_tokenizer_dir();

// A random valid UTF-8 string of up to `max_chars` characters (ASCII, Latin, marks, CJK, emoji,
// whitespace, digits, special-token text).
std::string random_text(std::mt19937_64& rng, size_t max_chars);

}  // namespace frost::text::testing
