// Shared pieces of the Hopper attention prefill kernels (lm_attn_hopper.cu, lm_attn_hopper_tma.cu):
// tile sizes, the swizzled shared-memory layout and its cp.async loader, the wgmma issue of QKᵀ and
// PV, the online softmax over wgmma accumulators, the gated epilogue, mbarrier primitives.
// Layout: a tile of R rows x 256 dims is stored as four column blocks of 64 dims, [block][row][64],
// each row 128 bytes with its 16-byte chunk c at c ^ (row % 8) (the 128-byte swizzle wgmma reads).
#pragma once
#include <cstdint>

#include "kernels/cuda/lm_attn_split.cuh"
#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda/lm_mbarrier.cuh"

namespace frost::kernels::attn_hopper {
using namespace lm;

constexpr int kD = kAttnHeadDim;  // 256
constexpr int kWgRows = 64;       // query rows per consumer warpgroup (wgmma M)
constexpr int kWgs = 2;
constexpr int kRows = kWgs * kWgRows;  // query rows per block
constexpr int kKeys = 64;              // keys per K/V tile
constexpr int kThreads = kWgs * 128;
constexpr int kQBytes = kRows * kD * 2;
constexpr int kKvBytes = kKeys * kD * 2;
constexpr int kStages = 2;
constexpr int kSmemBytes = kQBytes + 2 * kStages * kKvBytes + 1024;  // + slack for 1024 alignment

// Grid: q heads in x (dispatched fastest), row tiles in y; the kernels take y from the heaviest
// tile down.
inline dim3 grid(const AttentionBf16Params& p) { return dim3(p.Hq, ceil_div(p.max_rows, kRows)); }

#if defined(FROST_ATTN_WGMMA)

constexpr int kRowBytes = 128;      // one swizzled row: 64 bf16
constexpr int kChunks = kD / kVec;  // 16-byte chunks per row of 256 dims
constexpr float kLog2e = 1.4426950408889634f;

__device__ inline void cp_async16_s(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}


// Issues the copy of R rows x 256 dims into the swizzled layout at `dst`; global row r is
// src + r * stride (elements); rows r >= valid become zeros.
// Spread over kLoaders threads; `tid` is this thread's index among them. The consumers' copy
// is unrolled (few registers to spare, but fewer instructions between MMAs); the producer's is a
// plain loop, which keeps it within its small register budget.
template <int R, int kLoaders = kThreads>
__device__ inline void load_tile(uint32_t dst, const bf16* src, int64_t stride, int valid, int tid = threadIdx.x) {
    auto one = [&](int i) {
        const int e = tid + i * kLoaders;
        const int r = e / kChunks, ch = e % kChunks;
        const bool in = r < valid;
        const uint32_t off = (ch / 8) * (R * kRowBytes) + r * kRowBytes + (((ch % 8) ^ (r % 8)) << 4);
        cp_async16_s(dst + off, src + (in ? r * stride : 0) + ch * kVec, in ? 16 : 0);
    };
    constexpr int kIters = R * kChunks / kLoaders;
    if constexpr (kLoaders == kThreads) {
#pragma unroll
        for (int i = 0; i < kIters; ++i) one(i);
    } else {
#pragma unroll 1
        for (int i = 0; i < kIters; ++i) one(i);
    }
}

// Online-softmax step for one S tile held as wgmma accumulators (rows g and g+8 of this warp):
// masks keys past each row's position, updates the running max m (raw score units) and the
// thread's partial row sums l, leaves the probabilities in s and returns the
// factors exp(m_old - m_new) by which the output accumulators must be scaled.
// kSplit: a split's keys may all lie past a row's position, so its max can still be -inf after
// a tile; exponents are then taken against 0 (p = 0, alpha = 0, never NaN). Unsplit, every row
// sees key 0 in the first tile, and both forms compute the same values.
template <bool kSplit = false>
__device__ inline void softmax_tile(float (&s)[32], int key0, int qpos_lo, bool mask,
                                    float scale_log2, float (&m)[2], float (&l)[2], float (&alpha)[2]) {
    const int t = threadIdx.x % 4;
    if (mask) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int key = key0 + 8 * i + 2 * t + e;
                if (key > qpos_lo) s[4 * i + e] = -INFINITY;
                if (key > qpos_lo + 8) s[4 * i + 2 + e] = -INFINITY;
            }
        }
    }
    float mx[2] = {m[0], m[1]}, base[2];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(kFullMask, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(kFullMask, mx[h], 2));
        // Unsplit, every row sees key 0 in the first tile, so mx is finite; m = -inf only before it.
        base[h] = kSplit && mx[h] == -INFINITY ? 0.0f : mx[h];
        alpha[h] = exp2f((m[h] - base[h]) * scale_log2);
        m[h] = mx[h];
    }
    const float base0 = base[0] * scale_log2, base1 = base[1] * scale_log2;
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        s[4 * i] = exp2f(fmaf(s[4 * i], scale_log2, -base0));
        s[4 * i + 1] = exp2f(fmaf(s[4 * i + 1], scale_log2, -base0));
        s[4 * i + 2] = exp2f(fmaf(s[4 * i + 2], scale_log2, -base1));
        s[4 * i + 3] = exp2f(fmaf(s[4 * i + 3], scale_log2, -base1));
        sum[0] += s[4 * i] + s[4 * i + 1];
        sum[1] += s[4 * i + 2] + s[4 * i + 3];
    }
    l[0] = l[0] * alpha[0] + sum[0];
    l[1] = l[1] * alpha[1] + sum[1];
}

// The probabilities as bf16 A fragments: k-step ks of PV covers keys 16ks..16ks+15 = n8 tiles
// 2ks, 2ks+1 of S.
__device__ inline void pack_p(const float (&s)[32], uint32_t (&pa)[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        pa[ks][0] = pack_bf16(s[8 * ks], s[8 * ks + 1]);
        pa[ks][1] = pack_bf16(s[8 * ks + 2], s[8 * ks + 3]);
        pa[ks][2] = pack_bf16(s[8 * ks + 4], s[8 * ks + 5]);
        pa[ks][3] = pack_bf16(s[8 * ks + 6], s[8 * ks + 7]);
    }
}

__device__ inline void reg_fence_u(uint32_t (&r)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// S = Q Kᵀ for this warpgroup's 64 rows against one K tile (issued, not waited).
__device__ inline void issue_qk(float (&s)[32], uint32_t sq_wg, uint32_t sk) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t koff = (kk % 4) * 32;  // 16 dims = 32 bytes into the swizzled row
        const uint64_t da = smem_desc_sw128(sq_wg + (kk / 4) * (kRows * kRowBytes) + koff, 16, 1024);
        const uint64_t db = smem_desc_sw128(sk + (kk / 4) * (kKeys * kRowBytes) + koff, 16, 1024);
        wgmma_m64n64k16_ss(s, da, db, kk > 0);
    }
}

// O += P V over one V tile: k-step ks covers keys 16ks..16ks+15 (two 8-row groups, 1024 bytes
// apart: the stride offset); the four 64-dim column blocks of N = 256 are kKeys * 128 bytes apart
// (the leading offset of an N-major operand).
__device__ inline void issue_pv(float (&o)[128], const uint32_t (&pa)[4][4], uint32_t sv) {
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
        const uint64_t db = smem_desc_sw128(sv + ks * 16 * kRowBytes, kKeys * kRowBytes, 1024);
        wgmma_m64n256k16_rs(o, pa[ks], db);
    }
}

// The output gate of rows r_lo and r_lo + 8 (this thread's columns 8i + 2t, 8i + 2t + 1), loaded
// as one batch while the last PV runs. Loaded inside the store loop, each gate load waited for the
// store before it (o and gate may alias as far as the compiler knows): the epilogue took ~44,000
// cycles a block against ~90,000 for the whole key loop of a 4096-row prompt, ~21,000 with the
// loads batched (an in-kernel clock probe, H200, 2026-12-01; ~18,000 with gate_sigmoid below).
__device__ inline void load_gate(const AttentionBf16Params& p, int r_lo, int rows, int qh, int t, uint32_t (&gv)[2][32]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r_lo + 8 * h;
        const int64_t row = r < rows ? r : 0;  // a row past the valid count loads row 0's (never stored)
        const bf16* gate = p.gate ? p.gate + row * p.q_row_stride + qh * p.q_head_stride : nullptr;
#pragma unroll
        for (int i = 0; i < 32; ++i) gv[h][i] = gate ? *reinterpret_cast<const uint32_t*>(gate + 8 * i + 2 * t) : 0u;
    }
}

// sigmoid on the special-function unit (ex2.approx, rcp.approx; a few ulp of fp32, far below the
// bf16 rounding of the gated output; the limits 0 and 1 and NaN hold). The accurate form (expf and
// an IEEE division, each with a slow path) made the epilogue's fully unrolled 128 sigmoids ~10,000
// SASS instructions, ~160 KB of code run once per block: ~25,000 cycles of instruction fetch and
// issue against ~90,000 for the key loop of a 4096-row prompt (clock probe, H200, 2026-12-01).
__device__ inline float gate_sigmoid(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }

// Epilogue: row sums reduced over the quad, O normalised, gated (gv from load_gate), stored as
// bf16 (rows r_lo and r_lo + 8 of this thread; rows past the valid count are not written). Staging
// the tile in shared memory (the warpgroup's own Q rows) for 16-byte row-contiguous stores measured
// the same (H200, 2026-12-01: 0.2587 against 0.2579 ms at 4096 rows, 16 q / 2 KV heads), so the
// fragments are stored as they are.
__device__ inline void store_output(const AttentionBf16Params& p, const float (&o)[128], float (&l)[2],
                                    const uint32_t (&gv)[2][32], int r_lo, int rows, int qh, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
        l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
    }
    const int out_stride = p.Hq * kD;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r_lo + 8 * h;
        if (r >= rows) continue;
        const float inv = 1.0f / l[h];
        bf16* out = p.o + static_cast<int64_t>(r) * out_stride + qh * kD;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            float v0 = o[4 * i + 2 * h] * inv, v1 = o[4 * i + 2 * h + 1] * inv;
            if (p.gate) {
                const float2 gf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&gv[h][i]));
                v0 *= gate_sigmoid(gf.x);
                v1 *= gate_sigmoid(gf.y);
            }
            *reinterpret_cast<__nv_bfloat162*>(out + 8 * i + 2 * t) = __floats2bfloat162_rn(v0, v1);
        }
    }
}

// Split epilogue: this warpgroup's unnormalised rows (r_lo, r_lo + 8 of this thread) as an fp32
// partial of split blockIdx.z, its max in log2 units and its row sum (reduced over the quad), in
// the layout of lm_attn_split.cuh; a row that saw no key of the split keeps max -inf, which the
// combine skips. Rows past the valid count are not written.
__device__ inline void store_partial(const AttentionBf16Params& p, const float (&o)[128], const float (&m)[2],
                                     float (&l)[2], float scale_log2, int r_lo, int rows, int qh, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
        l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
    }
    const int R = attn_split::partial_rows(p.max_rows);
    float* stats = p.work + static_cast<int64_t>(gridDim.z) * p.Hq * R * kD;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r_lo + 8 * h;
        if (r >= rows) continue;
        const int64_t pr = attn_split::partial_row(blockIdx.z, qh, r, p.Hq, R);
        float* out = p.work + pr * kD;
#pragma unroll
        for (int i = 0; i < 32; ++i)
            *reinterpret_cast<float2*>(out + 8 * i + 2 * t) = make_float2(o[4 * i + 2 * h], o[4 * i + 2 * h + 1]);
        if (t == 0) {
            stats[pr * attn_split::kStats] = m[h] == -INFINITY ? -INFINITY : m[h] * scale_log2;
            stats[pr * attn_split::kStats + 1] = l[h];
        }
    }
}
#endif  // FROST_ATTN_WGMMA

// Launches the TMA-producer variants (lm_attn_hopper_tma.cu) with k_stages (2 or 3) K stages, or
// as clusters of two CTAs sharing K/V by multicast (2 K stages; where Hq / Hkv is odd, the plain
// launch); cudaErrorInvalidValue for a base address TMA cannot read (not 16-byte aligned).
// splits > 1 (not clustered): that many key splits per row tile, partials into p.work (the caller
// runs the combine).
cudaError_t tma_launch(const AttentionBf16Params& p, cudaStream_t stream, bool pingpong, int k_stages, bool cluster,
                       int splits = 1);

}  // namespace frost::kernels::attn_hopper
