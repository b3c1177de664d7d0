// Chunked gated-delta-rule prefill (spec §5, chunk 64), in three launches (the FLA structure):
//  1. prep, parallel over (chunk, value head): γ = within-chunk cumsum of g, A = strictly-lower
//     β_i (k_i·k_j) e^{γ_i−γ_j}, the UT solves W = (I+A)⁻¹(β e^γ K), U = (I+A)⁻¹(β V) by forward
//     substitution (one column per thread, in registers), P = (Q Kᵀ) ⊙ e^{γ_i−γ_j} (i ≥ j) and
//     Kg = K ⊙ e^{γ_L−γ};
//  2. state pass, sequential over chunks, parallel over (value head, 32-column dv slice), the
//     next chunk's operands prefetched with cp.async: store S₀, V' = U − W S₀,
//     S = e^{γ_L} S₀ + Kgᵀ V';
//  3. output, parallel over (chunk, value head, dv half): O = (Q ⊙ e^γ) S₀ + P V'.
// The products run on TF32 tensor cores (mma.sync m16n8k8, fp32 accumulators, S kept in fp32
// registers and memory). This file is the launcher of every chunked path: the default is the bf16
// path of lm_gdn_bf16.cu; GdnBf16Params::chunk_tf32 = 1 selects the TF32 kernels below and
// chunk_fp32 = 1 the all-fp32 CUDA-core path that tests compare with. Only exponentials of differences ≤ 0 are formed. Chunks sit at absolute
// multiples of 64 from position 0, so the first chunk of a launch may be short.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gdn_chunk.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;
using gdn::chunk_range;
using gdn::max_chunks;

constexpr int kC = kGdnChunk;        // 64
constexpr int kD = kGdnHeadDim;      // 128 (dk = dv)
constexpr int kPrepThreads = 2 * kD; // one W column and one U column per thread
constexpr int kSlice = 32;           // dv columns per state-pass block
constexpr int kStateWarps = 8;
constexpr int kStateThreads = kStateWarps * kWarp;  // output kernel
constexpr int kPassThreads = 2 * kStateThreads;     // sequential state pass

// Scratch layout per (chunk slot, value head), in floats (every block 16-byte aligned).
constexpr int64_t kWOff = 0;                    // W [C, dk]
constexpr int64_t kUOff = kWOff + kC * kD;      // U [C, dv], overwritten by V' in pass 2
constexpr int64_t kKgOff = kUOff + kC * kD;     // Kg [C, dk]
constexpr int64_t kPOff = kKgOff + kC * kD;     // P [C, C]
constexpr int64_t kGammaOff = kPOff + kC * kC;  // γ [C]
constexpr int64_t kSOff = kGammaOff + kC;       // S₀ [dk, dv], the state entering the chunk
constexpr int64_t kSlotFloats = kSOff + kD * kD;

static_assert(kSlotFloats >= gdn::kBf16SlotFloats, "one scratch size serves every path");

// ---- Tensor-core path (p.chunk_fp32 == 0): the same products as mma.sync m16n8k8 TF32 with fp32
// accumulators. Fragment layouts (PTX ISA, m16n8k8 .tf32), g = lane / 4, q = lane % 4:
// A 16x8 row-major: a0 (g, q), a1 (g+8, q), a2 (g, q+4), a3 (g+8, q+4); B 8x8: b0 (q, g), b1 (q+4, g);
// C 16x8: c0 (g, 2q), c1 (g, 2q+1), c2 (g+8, 2q), c3 (g+8, 2q+1).
// Shared-memory pitches keep every fragment load conflict-free: row-major A reads g*pitch + q
// (pitch = 4 mod 32), B and transposed-A reads q*pitch + g (pitch = 8 mod 32).
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 8;
constexpr int kAPitch = kD + 4;          // W, Q: row-major A operands
constexpr int kAtPitch = kD + 8;         // Kg, read transposed as the A operand of Kgᵀ V'
constexpr int kBSlicePitch = kSlice + 8; // S slice and V' slice: B operands

__device__ inline uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

__device__ inline void mma_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

constexpr int kPrepPitch = kD + 4;  // fp32 rows: float4-aligned, rows 16 apart in distinct banks
constexpr int kTileStride = 16;     // a thread's rows (and columns) of A/P are 16 apart

constexpr int kSolvePitch = kC + 4; // A rows float4-aligned: the solve reads four coefficients at once

struct PrepSmem {
    float k[kC][kPrepPitch];
    float q[kC][kPrepPitch];
    float a[kC][kSolvePitch];
    bf16 v[kC][kD];        // this value head's V rows, zero past len
    float g[kC];           // raw log decays, zero past len
    float gamma[kC];
    float beta[kC];
    float w_scale[kC];     // β e^γ, the W right-hand-side row scale
    float tail_decay[kC];  // e^{γ_L − γ_r}
};

__global__ void __launch_bounds__(kPrepThreads) gdn_chunk_prep_kernel(GdnBf16Params p) {
    extern __shared__ float smem_raw[];
    PrepSmem& sm = *reinterpret_cast<PrepSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int c = blockIdx.x;
    const int h = blockIdx.y;
    int start, len;
    if (!chunk_range(c, p.cursor->pos, rows, start, len)) return;
    const int kh = h / (p.Hv / p.Hk);
    const int t = threadIdx.x;

    // Every global load of the block is issued up front (unrolled), so their latencies overlap.
    constexpr int kRowVecs8 = kD / kVec;
    static_assert(kC * kRowVecs8 % kPrepThreads == 0, "whole load rounds");
#pragma unroll
    for (int it = 0; it < kC * kRowVecs8 / kPrepThreads; ++it) {
        const int e = t + it * kPrepThreads;
        const int r = e / kRowVecs8, d = (e % kRowVecs8) * kVec;
        float kv[kVec] = {}, qv[kVec] = {};
        uint4 vv = make_uint4(0, 0, 0, 0);
        if (r < len) {
            const int64_t src = static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD + d;
            load8(p.k + src, kv);
            load8(p.q + src, qv);
            vv = *reinterpret_cast<const uint4*>(p.v + static_cast<int64_t>(start + r) * p.qkv_row_stride + h * kD + d);
        }
#pragma unroll
        for (int x = 0; x < kVec; ++x) {
            sm.k[r][d + x] = kv[x];
            sm.q[r][d + x] = qv[x];
        }
        *reinterpret_cast<uint4*>(&sm.v[r][d]) = vv;
    }
    if (t < kC) {
        float beta = 0.0f, g = 0.0f;
        if (t < len) gdn_row_gates(p, start + t, h, beta, g);
        sm.g[t] = g;
        sm.beta[t] = beta;
    }
    __syncthreads();
    if (t == 0) {  // sequential cumsum: one fixed order
        float acc = 0.0f;
#pragma unroll
        for (int r = 0; r < kC; ++r) {
            acc += sm.g[r];
            sm.gamma[r] = acc;
        }
    }
    __syncthreads();
    if (t < kC) {
        sm.tail_decay[t] = expf(sm.gamma[len - 1] - sm.gamma[t]);
        sm.w_scale[t] = sm.beta[t] * expf(sm.gamma[t]);
    }

    float* slot = p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats;
    if (p.chunk_fp32) {
        // A and P by 4x4 register tiles: rows ty + 16 m, columns tx + 16 n, float4 steps over dk.
        const int ty = t / kTileStride, tx = t % kTileStride;
        float kk[4][4] = {}, qk[4][4] = {};
#pragma unroll 2
        for (int d = 0; d < kD; d += 4) {
            float4 ki[4], qi[4], kj[4];
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                ki[m] = *reinterpret_cast<const float4*>(&sm.k[ty + kTileStride * m][d]);
                qi[m] = *reinterpret_cast<const float4*>(&sm.q[ty + kTileStride * m][d]);
                kj[m] = *reinterpret_cast<const float4*>(&sm.k[tx + kTileStride * m][d]);
            }
#pragma unroll
            for (int m = 0; m < 4; ++m)
#pragma unroll
                for (int n = 0; n < 4; ++n) {
                    kk[m][n] += ki[m].x * kj[n].x + ki[m].y * kj[n].y + ki[m].z * kj[n].z + ki[m].w * kj[n].w;
                    qk[m][n] += qi[m].x * kj[n].x + qi[m].y * kj[n].y + qi[m].z * kj[n].z + qi[m].w * kj[n].w;
                }
        }
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int n = 0; n < 4; ++n) {
                const int i = ty + kTileStride * m, j = tx + kTileStride * n;
                const float decay = i >= j ? expf(sm.gamma[i] - sm.gamma[j]) : 0.0f;
                sm.a[i][j] = i > j ? sm.beta[i] * kk[m][n] * decay : 0.0f;
                slot[kPOff + i * kC + j] = qk[m][n] * decay;
            }
    } else {
        // A and P on TF32 tensor cores: q and k hold bf16 values, exact in TF32, so only the
        // accumulation order differs from the fp32 path. Warp w: rows 16 (w/2), columns 32 (w%2)..+31.
        const int warp = t / kWarp, lane = t % kWarp, g = lane / 4, q4 = lane % 4;
        constexpr int kTiles = 4;
        const int m0 = kMmaM * (warp / 2), n0 = kTiles * kMmaN * (warp % 2);
        float kk[kTiles][4] = {}, qk[kTiles][4] = {};
#pragma unroll 4
        for (int k0 = 0; k0 < kD; k0 += kMmaK) {
            const uint32_t ka0 = to_tf32(sm.k[m0 + g][k0 + q4]), ka1 = to_tf32(sm.k[m0 + g + 8][k0 + q4]);
            const uint32_t ka2 = to_tf32(sm.k[m0 + g][k0 + q4 + 4]), ka3 = to_tf32(sm.k[m0 + g + 8][k0 + q4 + 4]);
            const uint32_t qa0 = to_tf32(sm.q[m0 + g][k0 + q4]), qa1 = to_tf32(sm.q[m0 + g + 8][k0 + q4]);
            const uint32_t qa2 = to_tf32(sm.q[m0 + g][k0 + q4 + 4]), qa3 = to_tf32(sm.q[m0 + g + 8][k0 + q4 + 4]);
#pragma unroll
            for (int j = 0; j < kTiles; ++j) {
                const int n = n0 + kMmaN * j + g;  // Kᵀ as B: B[k][n] = K[n][k]
                const uint32_t b0 = to_tf32(sm.k[n][k0 + q4]), b1 = to_tf32(sm.k[n][k0 + q4 + 4]);
                mma_tf32(kk[j], ka0, ka1, ka2, ka3, b0, b1);
                mma_tf32(qk[j], qa0, qa1, qa2, qa3, b0, b1);
            }
        }
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int i = m0 + g + 8 * (x / 2), jj = n0 + kMmaN * j + 2 * q4 + x % 2;
                const float decay = i >= jj ? expf(sm.gamma[i] - sm.gamma[jj]) : 0.0f;
                sm.a[i][jj] = i > jj ? sm.beta[i] * kk[j][x] * decay : 0.0f;
                slot[kPOff + i * kC + jj] = qk[j][x] * decay;
            }
    }
    if (t < kC) slot[kGammaOff + t] = sm.gamma[t];
    __syncthreads();  // tail_decay is visible
    for (int e = t; e < kC * kD; e += kPrepThreads) {
        const int r = e / kD, d = e % kD;
        slot[kKgOff + e] = r < len ? sm.k[r][d] * sm.tail_decay[r] : 0.0f;
    }
    __syncthreads();

    // Forward substitution x_i = rhs_i − Σ_{m<i} A_im x_m for this thread's column.
    const bool is_w = t < kD;
    const int d = is_w ? t : t - kD;
    float x[kC];
#pragma unroll
    for (int i = 0; i < kC; ++i) {
        float rhs = 0.0f;
        if (i < len) rhs = is_w ? sm.w_scale[i] * sm.k[i][d] : sm.beta[i] * __bfloat162float(sm.v[i][d]);
#pragma unroll
        for (int m = 0; m + 4 <= i; m += 4) {  // same order as one m at a time, a quarter of the loads
            const float4 a4 = *reinterpret_cast<const float4*>(&sm.a[i][m]);
            rhs -= a4.x * x[m];
            rhs -= a4.y * x[m + 1];
            rhs -= a4.z * x[m + 2];
            rhs -= a4.w * x[m + 3];
        }
#pragma unroll
        for (int m = i & ~3; m < i; ++m) rhs -= sm.a[i][m] * x[m];
        x[i] = rhs;
    }
    float* out = slot + (is_w ? kWOff : kUOff);
#pragma unroll
    for (int i = 0; i < kC; ++i) out[i * kD + d] = x[i];
}

constexpr int kRowPitch = kD + 4;     // fp32 rows of 128: 16-byte aligned, 4 banks apart
constexpr int kSlicePitch = kSlice + 4;


struct StateBuf {
    float w[kC][kRowPitch];
    float kg[kC][kRowPitch];
    float u[kC][kSlicePitch];  // U slice, then V'
};
struct StateSmem {
    float s[kD][kSlicePitch];  // S slice: rows dk, columns of the dv slice
    StateBuf buf[2];
};

// W, Kg rows and this block's U slice of one chunk slot into a staging buffer (fp32 or TF32 layout).
template <class Buf>
__device__ inline void prefetch_chunk(Buf& b, const float* slot, int j0) {
    constexpr int kRowVecs = kD / 4, kSliceVecs = kSlice / 4;
    for (int e = threadIdx.x; e < kC * kRowVecs; e += kPassThreads) {
        const int r = e / kRowVecs, c4 = (e % kRowVecs) * 4;
        cp_async16(&b.w[r][c4], slot + kWOff + r * kD + c4);
        cp_async16(&b.kg[r][c4], slot + kKgOff + r * kD + c4);
    }
    for (int e = threadIdx.x; e < kC * kSliceVecs; e += kPassThreads) {
        const int r = e / kSliceVecs, c4 = (e % kSliceVecs) * 4;
        cp_async16(&b.u[r][c4], slot + kUOff + r * kD + j0 + c4);
    }
}

// Thread (ty, tx), 64 x 8 of them: V' row ty and S rows 2ty, 2ty+1, columns 4tx..4tx+3 of the
// slice. 16 warps per block keep the sequential pass latency-tolerant on one block per SM.
__global__ void __launch_bounds__(kPassThreads) gdn_chunk_state_kernel(GdnBf16Params p) {
    extern __shared__ __align__(16) float smem_raw[];
    StateSmem& sm = *reinterpret_cast<StateSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int h = blockIdx.x;
    const int j0 = blockIdx.y * kSlice;
    const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;
    const int c0 = 4 * tx;
    float* state = p.state + static_cast<int64_t>(h) * kD * kD;
    float s[2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
        const float4 v = *reinterpret_cast<const float4*>(state + (2 * ty + m) * kD + j0 + c0);
        s[m][0] = v.x, s[m][1] = v.y, s[m][2] = v.z, s[m][3] = v.w;
        *reinterpret_cast<float4*>(&sm.s[2 * ty + m][c0]) = v;
    }
    int chunks = 0;
    for (int start, len; chunks < max_chunks(rows) && chunk_range(chunks, pos, rows, start, len);) ++chunks;
    auto slot_of = [&](int c) { return p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats; };
    if (chunks > 0) prefetch_chunk(sm.buf[0], slot_of(0), j0);
    cp_async_commit();
    for (int c = 0; c < chunks; ++c) {
        if (c + 1 < chunks) prefetch_chunk(sm.buf[(c + 1) & 1], slot_of(c + 1), j0);
        cp_async_commit();
        cp_async_wait<1>();  // chunk c has landed
        __syncthreads();   // ... for every thread, and the previous state update is visible
        StateBuf& b = sm.buf[c & 1];
        float* slot = slot_of(c);
        int start, len;
        chunk_range(c, pos, rows, start, len);
        const float decay = expf(slot[kGammaOff + len - 1]);
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            *reinterpret_cast<float4*>(slot + kSOff + (2 * ty + m) * kD + j0 + c0) =
                make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
        }
        // V' = U − W S₀ for row ty.
        float acc[4] = {};
#pragma unroll 8
        for (int i = 0; i < kD; ++i) {
            const float4 sv = *reinterpret_cast<const float4*>(&sm.s[i][c0]);
            const float w0 = b.w[ty][i];
            acc[0] += w0 * sv.x, acc[1] += w0 * sv.y, acc[2] += w0 * sv.z, acc[3] += w0 * sv.w;
        }
        {
            float4 v = *reinterpret_cast<const float4*>(&b.u[ty][c0]);
            v.x -= acc[0], v.y -= acc[1], v.z -= acc[2], v.w -= acc[3];
            *reinterpret_cast<float4*>(&b.u[ty][c0]) = v;
            *reinterpret_cast<float4*>(slot + kUOff + ty * kD + j0 + c0) = v;
        }
        __syncthreads();
        // S = e^{γ_L} S₀ + Kgᵀ V' for rows 2ty, 2ty+1 (rows of Kg past len are zero).
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int n = 0; n < 4; ++n) s[m][n] *= decay;
#pragma unroll 8
        for (int r = 0; r < kC; ++r) {
            const float2 kv = *reinterpret_cast<const float2*>(&b.kg[r][2 * ty]);
            const float4 vv = *reinterpret_cast<const float4*>(&b.u[r][c0]);
            const float kk[2] = {kv.x, kv.y}, v4[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int n = 0; n < 4; ++n) s[m][n] += kk[m] * v4[n];
        }
#pragma unroll
        for (int m = 0; m < 2; ++m)
            *reinterpret_cast<float4*>(&sm.s[2 * ty + m][c0]) = make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
        __syncthreads();  // buffer c&1 is free for the prefetch of chunk c + 2
    }
#pragma unroll
    for (int m = 0; m < 2; ++m)
        *reinterpret_cast<float4*>(state + (2 * ty + m) * kD + j0 + c0) = make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
}

constexpr int kOutCols = kD / 2;  // dv half per output block
constexpr int kOutPitch = kOutCols + 4;

struct OutSmem {
    float qg[kC][kRowPitch];      // Q ⊙ e^γ
    float s[kD][kOutPitch];       // S₀ half
    float pm[kC][kC + 4];         // P
    float vp[kC][kOutPitch];      // V' half
    float eg[kC];                 // e^γ per row
};

// Thread (ty, tx): output rows 4ty..4ty+3, columns 4tx..4tx+3 of the dv half.
__global__ void __launch_bounds__(kStateThreads) gdn_chunk_out_kernel(GdnBf16Params p) {
    extern __shared__ __align__(16) float smem_raw[];
    OutSmem& sm = *reinterpret_cast<OutSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int c = blockIdx.x, h = blockIdx.y, half = blockIdx.z;
    int start, len;
    if (!chunk_range(c, p.cursor->pos, rows, start, len)) return;
    const int kh = h / (p.Hv / p.Hk);
    const float* slot = p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats;
    const int col0 = half * kOutCols;
    if (threadIdx.x < kC) sm.eg[threadIdx.x] = expf(slot[kGammaOff + threadIdx.x]);
    __syncthreads();
    constexpr int kRowVecs8 = kD / kVec;
    for (int e = threadIdx.x; e < kC * kRowVecs8; e += kStateThreads) {
        const int r = e / kRowVecs8, d = (e % kRowVecs8) * kVec;
        float qv[kVec] = {};
        if (r < len) load8(p.q + static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD + d, qv);
#pragma unroll
        for (int x = 0; x < kVec; ++x) sm.qg[r][d + x] = qv[x] * sm.eg[r];
    }
    constexpr int kHalfVecs = kOutCols / 4;
    for (int e = threadIdx.x; e < kD * kHalfVecs; e += kStateThreads) {
        const int i = e / kHalfVecs, c4 = (e % kHalfVecs) * 4;
        *reinterpret_cast<float4*>(&sm.s[i][c4]) = *reinterpret_cast<const float4*>(slot + kSOff + i * kD + col0 + c4);
    }
    for (int e = threadIdx.x; e < kC * kHalfVecs; e += kStateThreads) {
        const int r = e / kHalfVecs, c4 = (e % kHalfVecs) * 4;
        *reinterpret_cast<float4*>(&sm.vp[r][c4]) = *reinterpret_cast<const float4*>(slot + kUOff + r * kD + col0 + c4);
    }
    for (int e = threadIdx.x; e < kC * kC / 4; e += kStateThreads) {
        const int r = e / (kC / 4), c4 = (e % (kC / 4)) * 4;
        *reinterpret_cast<float4*>(&sm.pm[r][c4]) = *reinterpret_cast<const float4*>(slot + kPOff + r * kC + c4);
    }
    __syncthreads();
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int cc = 4 * tx;
    float acc[4][4] = {};
#pragma unroll 4
    for (int i = 0; i < kD; ++i) {
        const float4 sv = *reinterpret_cast<const float4*>(&sm.s[i][cc]);
        const float v4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const float q = sm.qg[4 * ty + m][i];
#pragma unroll
            for (int n = 0; n < 4; ++n) acc[m][n] += q * v4[n];
        }
    }
#pragma unroll 4
    for (int j = 0; j < kC; ++j) {
        const float4 vv = *reinterpret_cast<const float4*>(&sm.vp[j][cc]);
        const float v4[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const float pr = sm.pm[4 * ty + m][j];
#pragma unroll
            for (int n = 0; n < 4; ++n) acc[m][n] += pr * v4[n];
        }
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        const int r = 4 * ty + m;
        if (r >= len) continue;
        bf16* out = p.o + (static_cast<int64_t>(start + r) * p.Hv + h) * kD + col0 + cc;
        const __nv_bfloat162 lo = __floats2bfloat162_rn(acc[m][0], acc[m][1]);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(acc[m][2], acc[m][3]);
        reinterpret_cast<__nv_bfloat162*>(out)[0] = lo;
        reinterpret_cast<__nv_bfloat162*>(out)[1] = hi;
    }
}

// c += A[m0.., k0..] B[k0.., n0..] with A row-major (pitch PA) and B row-major [k][n] (pitch PB).
template <int PA, int PB>
__device__ inline void mma_step(float (&c)[4], const float* a, const float* b, int m0, int k0, int n0, int g, int q) {
    mma_tf32(c, to_tf32(a[(m0 + g) * PA + k0 + q]), to_tf32(a[(m0 + g + 8) * PA + k0 + q]),
             to_tf32(a[(m0 + g) * PA + k0 + q + 4]), to_tf32(a[(m0 + g + 8) * PA + k0 + q + 4]),
             to_tf32(b[(k0 + q) * PB + n0 + g]), to_tf32(b[(k0 + q + 4) * PB + n0 + g]));
}

struct TcStateBuf {
    float w[kC][kAPitch];
    float kg[kC][kAtPitch];
    float u[kC][kBSlicePitch];  // U slice, then V'
    float gamma[kC];            // γ, so the chunk decay needs no global load on the critical path
};
struct TcStateSmem {
    float s[kD][kBSlicePitch];  // S slice: rows dk, columns of the dv slice
    TcStateBuf buf[2];
};

__device__ inline void prefetch_chunk_tc(TcStateBuf& b, const float* slot, int j0) {
    prefetch_chunk(b, slot, j0);
    if (threadIdx.x < kC / 4) cp_async16(&b.gamma[4 * threadIdx.x], slot + kGammaOff + 4 * threadIdx.x);
}

// Block (value head, 32-column dv slice), 16 warps. Warp w owns the V' tile rows 16 (w/4), columns
// 8 (w%4) of the slice, and the S tiles rows 32 (w/4) + {0, 16}, the same columns, as accumulator
// fragments in registers for the whole pass (fp32; only the multiplicands are rounded to TF32).
__global__ void __launch_bounds__(kPassThreads) gdn_chunk_state_tc_kernel(GdnBf16Params p) {
    extern __shared__ __align__(16) float smem_raw[];
    TcStateSmem& sm = *reinterpret_cast<TcStateSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int h = blockIdx.x;
    const int j0 = blockIdx.y * kSlice;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int g = lane / 4, q = lane % 4;
    constexpr int kNTiles = kSlice / kMmaN;  // 4
    const int vm = kMmaM * (warp / kNTiles), n0 = kMmaN * (warp % kNTiles);
    const int sm0 = 2 * kMmaM * (warp / kNTiles);
    const int col = n0 + 2 * q;  // this lane's first accumulator column in the slice
    float* state = p.state + static_cast<int64_t>(h) * kD * kD;
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = sm0 + kMmaM * i + g + 8 * hi;
            const float2 v = *reinterpret_cast<const float2*>(state + r * kD + j0 + col);
            s[i][2 * hi] = v.x, s[i][2 * hi + 1] = v.y;
            *reinterpret_cast<float2*>(&sm.s[r][col]) = v;
        }
    int chunks = 0;
    for (int start, len; chunks < max_chunks(rows) && chunk_range(chunks, pos, rows, start, len);) ++chunks;
    auto slot_of = [&](int c) { return p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats; };
    if (chunks > 0) prefetch_chunk_tc(sm.buf[0], slot_of(0), j0);
    cp_async_commit();
    for (int c = 0; c < chunks; ++c) {
        if (c + 1 < chunks) prefetch_chunk_tc(sm.buf[(c + 1) & 1], slot_of(c + 1), j0);
        cp_async_commit();
        cp_async_wait<1>();  // chunk c has landed
        __syncthreads();   // ... for every thread, and the previous state update is visible
        TcStateBuf& b = sm.buf[c & 1];
        float* slot = slot_of(c);
        int start, len;
        chunk_range(c, pos, rows, start, len);
        const float decay = expf(b.gamma[len - 1]);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int r = sm0 + kMmaM * i + g + 8 * hi;
                *reinterpret_cast<float2*>(slot + kSOff + r * kD + j0 + col) = make_float2(s[i][2 * hi], s[i][2 * hi + 1]);
            }
        // V' = U − W S₀ on this warp's tile; two accumulators halve the dependent mma chain.
        float acc[2][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < kD; k0 += 2 * kMmaK) {
            mma_step<kAPitch, kBSlicePitch>(acc[0], &b.w[0][0], &sm.s[0][0], vm, k0, n0, g, q);
            mma_step<kAPitch, kBSlicePitch>(acc[1], &b.w[0][0], &sm.s[0][0], vm, k0 + kMmaK, n0, g, q);
        }
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = vm + g + 8 * hi;
            float2 v = *reinterpret_cast<const float2*>(&b.u[r][col]);
            v.x -= acc[0][2 * hi] + acc[1][2 * hi];
            v.y -= acc[0][2 * hi + 1] + acc[1][2 * hi + 1];
            *reinterpret_cast<float2*>(&b.u[r][col]) = v;
            *reinterpret_cast<float2*>(slot + kUOff + r * kD + j0 + col) = v;
        }
        __syncthreads();
        // S = e^{γ_L} S₀ + Kgᵀ V' (rows of Kg past len are zero). Kgᵀ[m][k] = kg[k][m].
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int x = 0; x < 4; ++x) s[i][x] *= decay;
#pragma unroll
        for (int k0 = 0; k0 < kC; k0 += kMmaK) {
            const uint32_t b0 = to_tf32(b.u[k0 + q][n0 + g]), b1 = to_tf32(b.u[k0 + q + 4][n0 + g]);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int m = sm0 + kMmaM * i;
                mma_tf32(s[i], to_tf32(b.kg[k0 + q][m + g]), to_tf32(b.kg[k0 + q][m + g + 8]),
                         to_tf32(b.kg[k0 + q + 4][m + g]), to_tf32(b.kg[k0 + q + 4][m + g + 8]), b0, b1);
            }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int r = sm0 + kMmaM * i + g + 8 * hi;
                *reinterpret_cast<float2*>(&sm.s[r][col]) = make_float2(s[i][2 * hi], s[i][2 * hi + 1]);
            }
        __syncthreads();  // buffer c&1 is free for the prefetch of chunk c + 2
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = sm0 + kMmaM * i + g + 8 * hi;
            *reinterpret_cast<float2*>(state + r * kD + j0 + col) = make_float2(s[i][2 * hi], s[i][2 * hi + 1]);
        }
}

constexpr int kOutBPitch = kOutCols + 8;  // S₀ half and V' half: B operands
constexpr int kPPitch = kC + 4;           // P: row-major A operand

struct TcOutSmem {
    float qg[kC][kAPitch];     // Q (scaled by e^γ after the product)
    float s[kD][kOutBPitch];   // S₀ half
    float pm[kC][kPPitch];     // P (zero above the diagonal)
    float vp[kC][kOutBPitch];  // V' half
    float gamma[kC];           // γ per row
};

// Block (chunk, value head, dv half), 8 warps: warp w computes rows 16 (w/2), columns
// 32 (w%2) .. +31 of the half as four m16n8 tiles.
__global__ void __launch_bounds__(kStateThreads) gdn_chunk_out_tc_kernel(GdnBf16Params p) {
    extern __shared__ __align__(16) float smem_raw[];
    TcOutSmem& sm = *reinterpret_cast<TcOutSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int c = blockIdx.x, h = blockIdx.y, half = blockIdx.z;
    int start, len;
    if (!chunk_range(c, p.cursor->pos, rows, start, len)) return;
    const int kh = h / (p.Hv / p.Hk);
    const float* slot = p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats;
    const int col0 = half * kOutCols;
    // S₀ half, V' half, P and γ land through cp.async while Q comes through registers.
    constexpr int kHalfVecs = kOutCols / 4;
    for (int e = threadIdx.x; e < kD * kHalfVecs; e += kStateThreads) {
        const int i = e / kHalfVecs, c4 = (e % kHalfVecs) * 4;
        cp_async16(&sm.s[i][c4], slot + kSOff + i * kD + col0 + c4);
    }
    for (int e = threadIdx.x; e < kC * kHalfVecs; e += kStateThreads) {
        const int r = e / kHalfVecs, c4 = (e % kHalfVecs) * 4;
        cp_async16(&sm.vp[r][c4], slot + kUOff + r * kD + col0 + c4);
    }
    for (int e = threadIdx.x; e < kC * kC / 4; e += kStateThreads) {
        const int r = e / (kC / 4), c4 = (e % (kC / 4)) * 4;
        cp_async16(&sm.pm[r][c4], slot + kPOff + r * kC + c4);
    }
    if (threadIdx.x < kC / 4) cp_async16(&sm.gamma[4 * threadIdx.x], slot + kGammaOff + 4 * threadIdx.x);
    cp_async_commit();
    constexpr int kRowVecs8 = kD / kVec;
    static_assert(kC * kRowVecs8 % kStateThreads == 0, "whole load rounds");
#pragma unroll
    for (int it = 0; it < kC * kRowVecs8 / kStateThreads; ++it) {
        const int e = threadIdx.x + it * kStateThreads;
        const int r = e / kRowVecs8, d = (e % kRowVecs8) * kVec;
        float qv[kVec] = {};
        if (r < len) load8(p.q + static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD + d, qv);
#pragma unroll
        for (int x = 0; x < kVec; ++x) sm.qg[r][d + x] = qv[x];
    }
    cp_async_wait<0>();
    __syncthreads();
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int g = lane / 4, q = lane % 4;
    constexpr int kTiles = 4;
    const int m0 = kMmaM * (warp / 2), n0 = kTiles * kMmaN * (warp % 2);
    float acc[kTiles][4] = {};
#pragma unroll 4
    for (int k0 = 0; k0 < kD; k0 += kMmaK) {
        const uint32_t a0 = to_tf32(sm.qg[m0 + g][k0 + q]), a1 = to_tf32(sm.qg[m0 + g + 8][k0 + q]);
        const uint32_t a2 = to_tf32(sm.qg[m0 + g][k0 + q + 4]), a3 = to_tf32(sm.qg[m0 + g + 8][k0 + q + 4]);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            const int n = n0 + kMmaN * j + g;
            mma_tf32(acc[j], a0, a1, a2, a3, to_tf32(sm.s[k0 + q][n]), to_tf32(sm.s[k0 + q + 4][n]));
        }
    }
    // Row scale e^γ after the product: Q is bf16, exact in TF32, so only S₀ is rounded.
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int x = 0; x < 4; ++x) acc[j][x] *= expf(sm.gamma[m0 + g + 8 * (x / 2)]);
    // P is zero above the diagonal: columns past this tile's last row contribute nothing.
    for (int k0 = 0; k0 < m0 + kMmaM; k0 += kMmaK) {
        const uint32_t a0 = to_tf32(sm.pm[m0 + g][k0 + q]), a1 = to_tf32(sm.pm[m0 + g + 8][k0 + q]);
        const uint32_t a2 = to_tf32(sm.pm[m0 + g][k0 + q + 4]), a3 = to_tf32(sm.pm[m0 + g + 8][k0 + q + 4]);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            const int n = n0 + kMmaN * j + g;
            mma_tf32(acc[j], a0, a1, a2, a3, to_tf32(sm.vp[k0 + q][n]), to_tf32(sm.vp[k0 + q + 4][n]));
        }
    }
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
        const int r = m0 + g + 8 * hi;
        if (r >= len) continue;
        bf16* out = p.o + (static_cast<int64_t>(start + r) * p.Hv + h) * kD + col0 + n0 + 2 * q;
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
            reinterpret_cast<__nv_bfloat162*>(out + kMmaN * j)[0] =
                __floats2bfloat162_rn(acc[j][2 * hi], acc[j][2 * hi + 1]);
    }
}

}  // namespace

size_t gdn_chunk_work_floats(const GdnBf16Params& p) {
    return static_cast<size_t>(max_chunks(p.max_rows)) * p.Hv * kSlotFloats;
}

cudaError_t gdn_chunk_launch(const GdnBf16Params& p, cudaStream_t stream) {
    return gdn_chunk_launch_stages(p, stream, kGdnStageAll);
}

cudaError_t gdn_chunk_launch_stages(const GdnBf16Params& p, cudaStream_t stream, int stages) {
    const bool gates = p.gate_b ? p.gate_a && p.A_log && p.dt_bias : p.beta && p.g;  // folded or given
    if (!p.q || !p.k || !p.v || !gates || !p.state || !p.o || !p.work || !p.cursor ||
        p.dk != kD || p.dv != kD || p.chunk != kC || p.qkv_row_stride % kVec != 0 || p.Hk <= 0 || p.Hv <= 0 || p.Hv % p.Hk != 0 ||
        p.max_rows <= 0)
        return cudaErrorInvalidValue;
    if (p.chunk_fp32 == 0 && p.chunk_tf32 == 0) return gdn::chunk_bf16_launch_stages(p, stream, stages);
    const bool tc = p.chunk_fp32 == 0;
    const void* state_fn = tc ? reinterpret_cast<const void*>(gdn_chunk_state_tc_kernel)
                              : reinterpret_cast<const void*>(gdn_chunk_state_kernel);
    const void* out_fn = tc ? reinterpret_cast<const void*>(gdn_chunk_out_tc_kernel)
                            : reinterpret_cast<const void*>(gdn_chunk_out_kernel);
    const size_t prep_smem = sizeof(PrepSmem);
    const size_t state_smem = tc ? sizeof(TcStateSmem) : sizeof(StateSmem);
    const size_t out_smem = tc ? sizeof(TcOutSmem) : sizeof(OutSmem);
    cudaError_t err = cudaFuncSetAttribute(gdn_chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(prep_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(state_fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(state_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(out_fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(out_smem));
    if (err != cudaSuccess) return err;
    if (stages & kGdnStagePrep) {
        gdn_chunk_prep_kernel<<<dim3(max_chunks(p.max_rows), p.Hv), kPrepThreads, prep_smem, stream>>>(p);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    if (stages & kGdnStageState) {
        const dim3 grid(p.Hv, kD / kSlice);
        if (tc)
            gdn_chunk_state_tc_kernel<<<grid, kPassThreads, state_smem, stream>>>(p);
        else
            gdn_chunk_state_kernel<<<grid, kPassThreads, state_smem, stream>>>(p);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    if (stages & kGdnStageOut) {
        const dim3 grid(max_chunks(p.max_rows), p.Hv, kD / kOutCols);
        if (tc)
            gdn_chunk_out_tc_kernel<<<grid, kStateThreads, out_smem, stream>>>(p);
        else
            gdn_chunk_out_kernel<<<grid, kStateThreads, out_smem, stream>>>(p);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    return cudaSuccess;
}

KernelCost gdn_chunk_cost(const GdnBf16Params& p, int rows) {
    const double state = static_cast<double>(p.Hv) * p.dk * p.dv * sizeof(float) * 2.0;
    const double io = static_cast<double>(rows) *
                      ((2.0 * p.Hk * p.dk + p.Hv * p.dv) * sizeof(bf16) + 2.0 * p.Hv * sizeof(float) +
                       p.Hv * p.dv * sizeof(bf16));
    // Per chunk and head: A, QKᵀ (C²dk each, half used), solves (C²(dk+dv)/2), W S₀, Q S₀, P V',
    // Kᵀ V' (C dk dv, C dk dv, C² dv / 2, C dk dv). Two FLOPs per multiply-add.
    const double chunks = static_cast<double>(rows) / kC;
    const double per = kC * kC * (p.dk + p.dk) * 0.5 + kC * kC * (p.dk + p.dv) * 0.5 +
                       3.0 * kC * p.dk * p.dv + kC * kC * p.dv * 0.5;
    return {state + io, 2.0 * chunks * p.Hv * per};
}

}  // namespace frost::kernels
