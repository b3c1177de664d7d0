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

// A state pass's slice of S (fp32 [kD][kD] of one value head, columns j0..): warp rows ms + g
// (+ 8), NT n-tiles of 8 columns, into accumulator registers s (the mma C layout) and, rounded to
// bf16, into the shared copy sb (the B operand of W S₀ and Q S₀); store_state_slice writes s back.
template <int NT, class SB>
__device__ inline void load_state_slice(float (&s)[NT][4], const float* state, SB& sb, int ms, int g, int q, int j0) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = ms + g + 8 * hi, col = 8 * j + 2 * q;
            const float2 v = *reinterpret_cast<const float2*>(state + r * kD + j0 + col);
            s[j][2 * hi] = v.x, s[j][2 * hi + 1] = v.y;
            *reinterpret_cast<uint32_t*>(&sb[r][col]) = lm::pack_bf16(v.x, v.y);
        }
}
template <int NT>
__device__ inline void store_state_slice(const float (&s)[NT][4], float* state, int ms, int g, int q, int j0) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = ms + g + 8 * hi, col = 8 * j + 2 * q;
            *reinterpret_cast<float2*>(state + r * kD + j0 + col) = make_float2(s[j][2 * hi], s[j][2 * hi + 1]);
        }
}

// The chunk operands every dv slice of a head reads, by cp.async with constant trip counts (one
// 256-thread block: each thread's offsets computed once per chunk, the copies unrolled). B: a
// stage buffer with w, k, q [kC][kPW] and p [kC][kPP] (the state passes' StageBuf, NarrowBuf).
// W (4 rounds of rows, from the prep's scratch slot), K and Q (rows past len zero-filled: never
// read, V' is zero there).
template <class B>
__device__ inline void prefetch_wkq(B& b, const GdnBf16Params& p, const float* slot, int start, int len, int kh) {
    constexpr int kRowVecs = kD / kVec, kRowsPer = kThreads / kRowVecs;  // 16 rows of 128 per round
    static_assert(kC % kRowsPer == 0, "whole rounds");
    const int t = threadIdx.x;
    const int r0 = t / kRowVecs, d = (t % kRowVecs) * kVec;
    const bf16* w = reinterpret_cast<const bf16*>(slot + kBf16WOff) + r0 * kD + d;
    const int64_t head_row = static_cast<int64_t>(start) * p.qkv_row_stride + kh * kD + d;
    const bf16* kb = p.k + head_row;
    const bf16* qb = p.q + head_row;
#pragma unroll
    for (int it = 0; it < kC / kRowsPer; ++it) {
        const int r = r0 + it * kRowsPer;
        lm::cp_async16(&b.w[r][d], w + it * kRowsPer * kD);
        const bool in = r < len;
        const int64_t off = in ? static_cast<int64_t>(r) * p.qkv_row_stride : 0;
        lm::cp_async16(&b.k[r][d], kb + off, in ? 16 : 0);
        lm::cp_async16(&b.q[r][d], qb + off, in ? 16 : 0);
    }
}
// P (two rounds of rows) from the prep's scratch slot.
template <class B>
__device__ inline void prefetch_p(B& b, const float* slot) {
    constexpr int kPVecs = kC / kVec;
    static_assert(kC * kPVecs == 2 * kThreads, "two rounds");
    const int t = threadIdx.x;
    const bf16* pm = reinterpret_cast<const bf16*>(slot + kBf16POff);
#pragma unroll
    for (int it = 0; it < 2; ++it) {
        const int r = t / kPVecs + it * (kThreads / kPVecs), dd = (t % kPVecs) * kVec;
        lm::cp_async16(&b.p[r][dd], pm + r * kC + dd);
    }
}

}  // namespace frost::kernels::gdn
