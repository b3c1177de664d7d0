// The capsule contract checked the same way on every engine (CPU, CUDA; dense or MoE): a prefix
// restored from a capsule into a session dirtied by another prompt, plus an appended suffix, gives
// bitwise the logits and tokens of a cold prefill of prefix + suffix, then through greedy decode.
#pragma once
#include <string>
#include <vector>

#include "model/engine.h"

namespace frost::test {

// One comparison: a capsule of `prefix` tokens (a multiple of 64), then `suffix` appended.
struct RestoreAppendCase {
    int prefix, suffix;
};

// Needs an engine with >= 3 sessions and max_seq_len >= prefix + suffix + 8 for every case. Each
// case draws fresh random ids (gtest's seed); the prefix against the engine's own chunk size gives
// the capsule path and the cold prefill different chunkings of the same tokens. `store_name`
// names the temp folder of the disk tier.
void expect_restore_append_equals_cold(model::Engine& e, const std::string& model_dir, const std::string& store_name,
                                       const std::vector<RestoreAppendCase>& cases);
// The cases every engine's test runs: prefixes of 64 and 192 tokens, 77 appended.
void expect_restore_append_equals_cold(model::Engine& e, const std::string& model_dir, const std::string& store_name);

}  // namespace frost::test
