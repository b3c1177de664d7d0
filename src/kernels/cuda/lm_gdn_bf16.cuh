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
using lm::cp_async16;

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

// Chunk c's operands into a state-pass stage buffer Buf (members w, k, q [kC][kPW], u
// [kC][kSliceCols + 8], p [kC][kPP], gamma [kC]) by 16-byte cp.async. Thread t owns row t / 4 and
// copies its 16-byte vectors t % 4 + 4 i: one warp instruction reads 64 contiguous bytes of each of
// 8 rows (whole 32-byte sectors), and every source is one row pointer plus a constant, so the
// per-chunk address arithmetic is a handful of instructions (the row-interleaved form spent ~160
// instructions per warp per chunk on 64-bit offsets, a third of the state pass's). K and Q rows past
// len are zero-filled (V' is zero there). Same bytes as prefetch() of lm_gdn_bf16.cu.
template <int kSliceCols, class Buf>
__device__ inline void prefetch_rows(Buf& b, const GdnBf16Params& p, const float* slot, int start, int len, int kh,
                                     int j0) {
    static_assert(kThreads == 4 * kC, "four threads per row");
    constexpr int kStep = 4 * kVec;  // columns between one thread's vectors
    constexpr int kUVecs = kSliceCols / kVec;
    static_assert(kUVecs == 2 || kUVecs == 4, "16- or 32-column slices");
    const int t = threadIdx.x, r = t / 4, d = (t % 4) * kVec;
    const bool in = r < len;
    const int64_t row = static_cast<int64_t>(start + (in ? r : 0)) * p.qkv_row_stride + kh * kD + d;
    const bf16* kr = p.k + row;
    const bf16* qr = p.q + row;
    const bf16* wr = reinterpret_cast<const bf16*>(slot + kBf16WOff) + r * kD + d;
    const int bytes = in ? 16 : 0;
#pragma unroll
    for (int i = 0; i < kD / kStep; ++i) {
        cp_async16(&b.w[r][d + kStep * i], wr + kStep * i);
        cp_async16(&b.k[r][d + kStep * i], kr + kStep * i, bytes);
        cp_async16(&b.q[r][d + kStep * i], qr + kStep * i, bytes);
    }
    const bf16* pr = reinterpret_cast<const bf16*>(slot + kBf16POff) + r * kC + d;
#pragma unroll
    for (int i = 0; i < kC / kStep; ++i) cp_async16(&b.p[r][d + kStep * i], pr + kStep * i);
    if (t % 4 < kUVecs)
        cp_async16(&b.u[r][d], reinterpret_cast<const bf16*>(slot + kBf16UOff) + r * kD + j0 + d);
    if (t < kC / 4) cp_async16(&b.gamma[4 * t], slot + kBf16GammaOff + 4 * t);
}

}  // namespace frost::kernels::gdn
