// The GDN gate projections of a decode step (GdnGateDotParams): [b | a] = x · wᵀ for one value
// head and one row, on one 256-thread block, in one fixed order, shared by the fused GDN decode
// kernel (lm_gdn_decode_fused.cu) and gdn_gate_dot_launch, so decode's bits do not depend on which
// runs. A quantized checkpoint keeps these 2 Hv rows in bf16 beside its quantized in_proj, and
// they used to be a GEMV launch of their own between in_proj and the GDN step: 4.4 us of each
// layer's critical path inside the 9B INT4 decode graph (H200, 2026-11-30, `frost bench
// graph-ops`), for 16 KB of weights. Folded into the GDN decode launch (H200, 2026-11-30, old and
// new binaries alternating in one call, `frost bench engine --decode 1024 --decode-steps 64
// --reps 3`, ms/token): 9B INT4 2.810 / 2.792 -> 2.610 / 2.594, 9B FP8 3.135 / 3.138 -> 2.938 /
// 2.936. The weights are loaded before the programmatic wait, so they stream during in_proj.
//
// Order: thread t holds vectors t, t + 256, ... of k (8 bf16 each; K <= 8192: at most four), sums
// them in that order with one fused multiply-add per element; then the warp butterfly (offsets 16
// .. 1); then warp 0 .. 7 in order; then rounding to bf16 (the activation dtype the GEMV stored).
// The _rn intrinsics keep the compiler from contracting or reordering differently in the two kernels.
#pragma once

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_params.h"

namespace frost::kernels::lm {

constexpr int kGateDotThreads = 256;
constexpr int kGateDotWarps = kGateDotThreads / kWarp;
constexpr int kGateDotMaxVec = kGdnGateDotMaxK / (kGateDotThreads * kVec);  // 4

__device__ __forceinline__ float warp_sum_rn(float v) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(kFullMask, v, off));
    return v;
}

// This thread's vectors of head h's b and a weight rows.
struct GateDotWeights {
    Bf16x8 b[kGateDotMaxVec], a[kGateDotMaxVec];
};

// The weights depend on no earlier kernel: callers load them before the programmatic wait.
__device__ __forceinline__ void gate_dot_load(const GdnGateDotParams& p, int h, GateDotWeights& w) {
    const Bf16x8* wb = reinterpret_cast<const Bf16x8*>(p.w + static_cast<int64_t>(h) * p.K);
    const Bf16x8* wa = reinterpret_cast<const Bf16x8*>(p.w + static_cast<int64_t>(p.Hv + h) * p.K);
    const int nvec = p.K / kVec;
#pragma unroll
    for (int j = 0; j < kGateDotMaxVec; ++j) {
        const int i = static_cast<int>(threadIdx.x) + j * kGateDotThreads;
        if (i < nvec) {
            w.b[j] = wb[i];
            w.a[j] = wa[i];
        }
    }
}

// b and a of x's row `row`, rounded to bf16, returned to every thread of the block. Every thread
// of the (256-thread) block must call it; scratch: kGateDotWarps pairs of shared floats that no
// other code touches between this call's two barriers.
__device__ __forceinline__ float2 gate_dot_sum(const GdnGateDotParams& p, const GateDotWeights& w, int row,
                                               float (*scratch)[2]) {
    const Bf16x8* x = reinterpret_cast<const Bf16x8*>(p.x + static_cast<int64_t>(row) * p.x_row_stride);
    const int nvec = p.K / kVec;
    Bf16x8 xv[kGateDotMaxVec];
#pragma unroll
    for (int j = 0; j < kGateDotMaxVec; ++j) {
        const int i = static_cast<int>(threadIdx.x) + j * kGateDotThreads;
        if (i < nvec) xv[j] = x[i];
    }
    float sb = 0.0f, sa = 0.0f;
#pragma unroll
    for (int j = 0; j < kGateDotMaxVec; ++j) {
        const int i = static_cast<int>(threadIdx.x) + j * kGateDotThreads;
        if (i >= nvec) continue;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float2 xf = xv[j].f2(q), bf = w.b[j].f2(q), af = w.a[j].f2(q);
            sb = __fmaf_rn(bf.x, xf.x, sb);
            sb = __fmaf_rn(bf.y, xf.y, sb);
            sa = __fmaf_rn(af.x, xf.x, sa);
            sa = __fmaf_rn(af.y, xf.y, sa);
        }
    }
    sb = warp_sum_rn(sb);
    sa = warp_sum_rn(sa);
    const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
    __syncthreads();  // an earlier use of scratch has been read
    if (lane == 0) {
        scratch[warp][0] = sb;
        scratch[warp][1] = sa;
    }
    __syncthreads();
    float tb = 0.0f, ta = 0.0f;
#pragma unroll
    for (int i = 0; i < kGateDotWarps; ++i) {
        tb = __fadd_rn(tb, scratch[i][0]);
        ta = __fadd_rn(ta, scratch[i][1]);
    }
    return make_float2(__bfloat162float(__float2bfloat16(tb)), __bfloat162float(__float2bfloat16(ta)));
}

}  // namespace frost::kernels::lm
