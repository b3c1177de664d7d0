// Shared by the bf16 chunked gated-delta-rule kernels (lm_gdn_bf16.cu: prep and the 32-column
// state pass; lm_gdn_bf16_narrow.cu: the 16-column state pass): block size, shared-memory pitches
// and the mma.sync m16n8k16 fragment loaders (layouts in lm_gdn_bf16.cu's header comment).
#pragma once
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gdn_chunk.cuh"

namespace frost::kernels::gdn {
using lm::kVec;
using lm::kWarp;
using lm::ld32;
using lm::ldmatrix_x4;
using lm::ldmatrix_x4_trans;

constexpr int kThreads = 256;  // 8 warps, both kernels
// Pitches in bf16: rows of 128 padded to 68 words (≡ 4 mod 32: the 32-bit fragment loads at
// g * pitch + q hit 32 distinct banks; 272 bytes ≡ 16 mod 128: the 8 row addresses of an ldmatrix
// hit 8 distinct 16-byte bank groups), rows of 64 to 36 words; the state passes pad their dv
// slices (32 columns to 80 bytes, 16 to 48: also ≡ distinct bank groups over 8 rows).
constexpr int kPW = kD + 8;
constexpr int kPP = kC + 8;

// A fragment of a row-major bf16 tile (rows m0.., columns k0..) with pitch P.
template <int P>
__device__ inline void load_a(uint32_t (&a)[4], const bf16* base, int m0, int k0, int g, int q) {
    a[0] = ld32(base + (m0 + g) * P + k0 + 2 * q);
    a[1] = ld32(base + (m0 + g + 8) * P + k0 + 2 * q);
    a[2] = ld32(base + (m0 + g) * P + k0 + 2 * q + 8);
    a[3] = ld32(base + (m0 + g + 8) * P + k0 + 2 * q + 8);
}

// The same fragment by one ldmatrix (lanes 0-7: rows m0.. at k0, 8-15: rows m0+8.. at k0, 16-23:
// rows m0.. at k0+8, 24-31: rows m0+8.. at k0+8): the same registers as load_a, one instruction
// instead of four (pitches ≡ 16 mod 128 bytes: the 8 rows of each matrix hit distinct bank groups).
template <int P>
__device__ inline void load_a_ldsm(uint32_t (&a)[4], const bf16* base, int m0, int k0, int lane) {
    const int r = lane & 7, mi = lane >> 3;
    ldmatrix_x4(a, base + (m0 + r + 8 * (mi & 1)) * P + k0 + 8 * (mi >> 1));
}

// B fragments of two n-tiles (n0.., n0+8..) of Xᵀ where X is a row-major [n][k] bf16 tile with
// pitch P (B[k][n] = X[n][k]): b[0], b[1] for n0 and b[2], b[3] for n0 + 8, as 32-bit loads of
// X[n0 + g][k0 + 2q ..] would give them.
template <int P>
__device__ inline void load_bt2(uint32_t (&b)[4], const bf16* base, int n0, int k0, int lane) {
    const int r = lane & 7, mi = lane >> 3;
    ldmatrix_x4(b, base + (n0 + r + 8 * (mi >> 1)) * P + k0 + 8 * (mi & 1));
}

// B fragments of two n-tiles (columns n0.., n0+8..) of a row-major [k][n] bf16 tile with pitch P:
// b[0], b[1] for n0 and b[2], b[3] for n0 + 8.
template <int P>
__device__ inline void load_b2_t(uint32_t (&b)[4], const bf16* base, int k0, int n0, int lane) {
    const int r = lane & 7, mi = lane >> 3;
    ldmatrix_x4_trans(b, base + (k0 + r + 8 * (mi & 1)) * P + n0 + 8 * (mi >> 1));
}

// A fragment of Xᵀ where X is a row-major [k][m] bf16 tile with pitch P (Aᵀ[m][k] = X[k][m]).
template <int P>
__device__ inline void load_at(uint32_t (&a)[4], const bf16* base, int m0, int k0, int lane) {
    const int r = lane & 7, mi = lane >> 3;
    ldmatrix_x4_trans(a, base + (k0 + r + 8 * (mi >> 1)) * P + m0 + 8 * (mi & 1));
}

}  // namespace frost::kernels::gdn
