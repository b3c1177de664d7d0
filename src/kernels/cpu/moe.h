// CPU fp32 reference of the sparse MoE MLP (params/moe.h). Synchronous; spreads rows over the
// kernels' thread pool. FROST_ERR_INVALID_ARG for null pointers or an impossible geometry.
#pragma once
#include "frost/exec.h"
#include "kernels/params/moe.h"

namespace frost::kernels::cpu {

frost_status moe(const MoeParams& p);

// The router of one row alone (probs [E], ids/w [k]); moe() calls it. Exposed for the CUDA
// parity test and for callers that only need the routing.
void moe_route_row(const MoeParams& p, const float* x, float* probs, int32_t* ids, float* w);

}  // namespace frost::kernels::cpu
