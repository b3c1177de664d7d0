// 16-byte stores out of mma / wgmma accumulator fragments. In the m16n8 layout (lm_attn_wgmma.cuh)
// a quad of lanes (4m .. 4m + 3) holds one accumulator row: lane q has columns 2q, 2q + 1 of each
// n8 tile. quad_gather transposes four tiles' bf16 pairs across the quad so that lane q holds tile
// q's eight columns and writes them as one 16-byte store. Four 4-byte stores per lane filled half
// of each 32-byte sector they touched (ncu, H200, the MoE down GEMM at 4096 rows: 16 of 32 bytes a
// sector; LSU-throttle stalls 20 % of its samples). Used by the MoE prefill GEMMs and the dense
// gate|up + SwiGLU GEMM.
#pragma once
#include <cstdint>

#include "kernels/cuda/lm_common.cuh"

namespace frost::kernels::lm {

// v[x] <- v[q ^ x] for x = 0..3: two conditional swaps.
__device__ inline void xor_permute(uint32_t (&v)[4], int q) {
    if (q & 1) {
        const uint32_t t0 = v[0], t2 = v[2];
        v[0] = v[1]; v[1] = t0; v[2] = v[3]; v[3] = t2;
    }
    if (q & 2) {
        const uint32_t t0 = v[0], t1 = v[1];
        v[0] = v[2]; v[1] = v[3]; v[2] = t0; v[3] = t1;
    }
}

// w[j]: this lane's bf16 pair (columns 2q, 2q + 1) of tile j. Returns tile q's eight columns in
// order. A 4 x 4 transpose: three xor shuffles, with the words permuted by q before (v[x] =
// w[q ^ x]) and after (out[j] = r[q ^ j]). Every lane of the warp must call it.
__device__ inline uint4 quad_gather(const uint32_t (&w)[4], int q) {
    uint32_t v[4] = {w[0], w[1], w[2], w[3]};
    xor_permute(v, q);  // v[s]: this lane's word for tile q ^ s, which lane q ^ s needs
    uint32_t r[4] = {v[0], __shfl_xor_sync(kFullMask, v[1], 1), __shfl_xor_sync(kFullMask, v[2], 2),
                     __shfl_xor_sync(kFullMask, v[3], 3)};  // r[s]: lane (q ^ s)'s word for tile q
    xor_permute(r, q);  // r[j]: lane j's word for tile q
    return make_uint4(r[0], r[1], r[2], r[3]);
}

}  // namespace frost::kernels::lm
