// Pieces shared by the decode (lm_moe.cu) and prefill (lm_moe_prefill.cu) MoE kernels: parameter
// validation and the bf16 output store with the optional fused residual add.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"

namespace frost::kernels::moe {

inline bool valid(const MoeBf16Params& p) {
    return p.x && p.router && p.experts_gate_up && p.experts_down && p.shared_gate_up && p.shared_down &&
           p.shared_gate && p.probs && p.topk_ids && p.topk_w && p.shared_w && p.H > 0 && p.H % lm::kVec == 0 &&
           p.E > 0 && p.E <= kMoeMaxExperts && p.k >= 1 && p.k <= p.E && p.k <= kMoeMaxTopK && p.I > 0 &&
           p.I % lm::kVec == 0 && p.Is > 0 && p.Is % lm::kVec == 0 && p.max_rows > 0 && lm::aligned16(p.x) &&
           lm::aligned16(p.router) && lm::aligned16(p.experts_gate_up) && lm::aligned16(p.experts_down) &&
           lm::aligned16(p.shared_gate_up) && lm::aligned16(p.shared_down) && lm::aligned16(p.shared_gate);
}

// The bf16 output element i: written, or accumulated into (fused residual add) in fp32 then rounded once.
__device__ inline void store_out(const MoeBf16Params& p, int64_t i, float total) {
    if (p.accumulate) total += __bfloat162float(p.out_bf16[i]);
    p.out_bf16[i] = __float2bfloat16_rn(total);
}

}  // namespace frost::kernels::moe
