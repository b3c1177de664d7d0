// The capsule contract checked the same way on every engine (CPU, CUDA; dense or MoE): a prefix
// restored from a capsule into a session dirtied by another prompt, plus an appended suffix, gives
// bitwise the logits and tokens of a cold prefill of prefix + suffix, then through greedy decode.
#pragma once
#include <string>

#include "model/engine.h"

namespace frost::test {

// Needs an engine with >= 3 sessions and max_seq_len >= 192 + 77 + 8. Prefixes of 64 and 192
// tokens (fresh random ids, gtest's seed) against the engine's own chunk size give different
// chunkings of the same tokens. `store_name` names the temp folder of the disk tier.
void expect_restore_append_equals_cold(model::Engine& e, const std::string& model_dir, const std::string& store_name);

}  // namespace frost::test
