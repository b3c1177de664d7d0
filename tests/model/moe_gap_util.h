// Router conditioning of a MoE engine run, from the engine's "router_probs" trace (options.trace,
// CPU engine): per row, the smallest gap between the k-th and (k+1)-th router probability over
// all MoE layers, and the selected expert set per layer. A bf16 path can only pick other experts
// than fp32 where that gap is below its noise; tests use it to prove their own conditioning.
#pragma once
#include <string>
#include <vector>

#include "model/engine.h"

namespace frost::test {

struct RouterGaps {
    std::vector<double> gap;                    // [row] min over MoE layers of p_(k) - p_(k+1)
    std::vector<std::vector<int>> experts;      // [row] sorted top-k ids of every MoE layer, concatenated
};

// The first `valid` rows of the last step. Adds a gtest failure (and returns what it has) when a
// trace is missing or holds fewer rows.
RouterGaps router_gaps(model::Engine& e, int valid);

}  // namespace frost::test
