// Random sentences of a grammar, drawn byte by byte through the matcher (tests only): the
// grammar's own "generation", independent of any vocabulary, so a test can ask whether
// EVERYTHING the grammar lets through is valid for an outside reader (nlohmann::json, Python's
// json / jsonschema) and not only the hand-written cases.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include "text/grammar/machine.h"

namespace frost::text::testing {

// One random walk from m.start(): each step picks an allowed byte (biased toward closers `"]}`
// so walks end, and toward the bytes of \u escapes so surrogate pairs come up often), and stops
// at random where the input is a complete sentence. True with the sentence in *out when it
// ended within max_bytes; false (a long walk, or a dead end, which a correct grammar never has)
// otherwise, *dead_end saying which.
// The seed of a randomized grammar test: FROST_GRAMMAR_SEED when set (to repeat a failure), else
// a fresh one from std::random_device; printed either way, so a failing run names it.
uint64_t grammar_test_seed(const char* test_name);

bool sample_sentence(grammar::Machine& m, std::mt19937_64& rng, size_t max_bytes, std::string* out,
                     bool* dead_end = nullptr);

}  // namespace frost::text::testing
