// FP8 (e4m3) warpgroup MMA for the block-scaled prefill GEMM (lm_gemm_fp8_wgmma.cu), sm_90a:
// d[64x128] (+)= A[64x32] * B[32x128], both operands K-major in shared memory (FP8 wgmma reads
// only K-major operands, so the instruction has no transpose immediates), fp32 accumulators. The
// fragment layout of d is lm_attn_wgmma.cuh's: warp w holds rows 16w..16w+15, n8 tile i in
// d[4i..4i+3] = (row g, cols 8i+2t, +1), (row g+8, same cols), g = lane/4, t = lane%4.
#pragma once
#include <cstdint>

#include "kernels/cuda/lm_attn_wgmma.cuh"

namespace frost::kernels::lm {

#if defined(FROST_ATTN_WGMMA)
// accumulate = 0 overwrites d (the first k32 step of each 128-wide k block).
__device__ inline void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" FROST_WGMMA_D64 "}, %64, %65, p, 1, 1;\n}\n"
                 : FROST_WGMMA_ACC64(d)
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
#endif

}  // namespace frost::kernels::lm
