// Pieces every decode GEMV kernel shares (bf16 and quantized weights, SIMT and tensor-core;
// lm_gemv*.cu): the tensor-core tiles' row mapping and the output step, one definition so each
// kernel rounds exactly as the unfused pipeline does and a member of a batched step keeps its
// solo bits whichever kernel runs it.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"

namespace frost::kernels::lm {

// The two weight rows a lane holds in a 16-row tensor-core GEMV tile (gid = lane / 4): r = 0 is
// tile row gid, r = 1 is gid + 8; with SwiGLU the tile covers 8 activation columns j, and the
// lane holds gate j (row j) and up j (row N/2 + j), so one lane sees both halves of its output.
// ok[r]: the row exists (the tail tile).
template <bool kSwiglu>
__device__ inline void tc_tile_rows(int tile, int gid, int N, int (&n)[2], bool (&ok)[2]) {
    constexpr int kTileRows = 16;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if constexpr (kSwiglu) {
            const int j = tile * (kTileRows / 2) + gid;
            ok[r] = j < N / 2;
            n[r] = r == 0 ? j : N / 2 + j;
        } else {
            n[r] = tile * kTileRows + gid + 8 * r;
            ok[r] = n[r] < N;
        }
    }
}

// SwiGLU fused into gate_up: both projection sums rounded to bf16 (what the unfused GEMM would
// store), then swiglu_kernel's arithmetic.
__device__ inline bf16 swiglu_from_sums(float gate_sum, float up_sum) {
    const float gate = __bfloat162float(__float2bfloat16(gate_sum));
    const float up = __bfloat162float(__float2bfloat16(up_sum));
    return __float2bfloat16(silu(gate) * up);
}

// y[at] = v, or y[at] + v when p.accumulate: fp32 when p.out_f32, else bf16 with one rounding of
// the fp32 sum (the residual add). P: any params with y, out_f32 and accumulate.
template <class P>
__device__ inline void store_gemv_out(const P& p, int64_t at, float v) {
    if (p.out_f32) {
        float* y = static_cast<float*>(p.y) + at;
        *y = p.accumulate ? *y + v : v;
    } else {
        bf16* y = static_cast<bf16*>(p.y) + at;
        *y = __float2bfloat16(p.accumulate ? __bfloat162float(*y) + v : v);
    }
}

}  // namespace frost::kernels::lm
