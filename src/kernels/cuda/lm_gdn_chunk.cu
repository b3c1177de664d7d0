// Chunked gated-delta-rule prefill (spec §5, chunk 64), in two launches:
//  1. prep, parallel over (chunk, value head): γ = within-chunk cumsum of g, A = strictly-lower
//     β_i (k_i·k_j) e^{γ_i−γ_j}, the UT solves W = (I+A)⁻¹(β e^γ K), U = (I+A)⁻¹(β V) by forward
//     substitution (one column per thread, in registers), and P = (Q Kᵀ) ⊙ e^{γ_i−γ_j} (i ≥ j);
//  2. state pass, sequential over chunks, parallel over (value head, 32-column dv slice):
//     V' = U − W S₀;  O = (Q ⊙ e^γ) S₀ + P V';  S = e^{γ_L} S₀ + (K ⊙ e^{γ_L−γ})ᵀ V'.
// Everything in fp32; only exponentials of differences ≤ 0 are formed. Chunks sit at absolute
// multiples of 64 from position 0, so the first chunk of a launch may be short.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kC = kGdnChunk;        // 64
constexpr int kD = kGdnHeadDim;      // 128 (dk = dv)
constexpr int kPad = kD + 1;         // smem row pitch: column walks hit distinct banks
constexpr int kPrepThreads = 2 * kD; // one W column and one U column per thread
constexpr int kSlice = 32;           // dv columns per state-pass block
constexpr int kStateWarps = 8;
constexpr int kStateThreads = kStateWarps * kWarp;

// Scratch layout per (chunk slot, value head), in floats.
constexpr int64_t kWOff = 0;
constexpr int64_t kUOff = kWOff + kC * kD;
constexpr int64_t kPOff = kUOff + kC * kD;
constexpr int64_t kGammaOff = kPOff + kC * kC;
constexpr int64_t kSlotFloats = kGammaOff + kC;

__host__ __device__ inline int max_chunks(int max_rows) { return (max_rows + kC - 1) / kC + 1; }

// Rows [start, start + len) of this launch form chunk c (chunks at absolute multiples of 64).
__device__ inline bool chunk_range(int c, int pos, int rows, int& start, int& len) {
    const int first = min(rows, kC - pos % kC);
    if (c == 0) {
        start = 0;
        len = first;
    } else {
        start = first + (c - 1) * kC;
        len = min(kC, rows - start);
    }
    return len > 0;
}

struct PrepSmem {
    float k[kC][kPad];
    float q[kC][kPad];
    float a[kC][kC + 1];
    float gamma[kC];
    float beta[kC];
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

    for (int e = t; e < kC * kD; e += kPrepThreads) {
        const int r = e / kD, d = e % kD;
        const int64_t src = static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD + d;
        sm.k[r][d] = r < len ? __bfloat162float(p.k[src]) : 0.0f;
        sm.q[r][d] = r < len ? __bfloat162float(p.q[src]) : 0.0f;
    }
    if (t == 0) {  // sequential cumsum: one fixed order
        float acc = 0.0f;
        for (int r = 0; r < kC; ++r) {
            const bool in = r < len;
            acc += in ? p.g[(start + r) * p.Hv + h] : 0.0f;
            sm.gamma[r] = acc;
            sm.beta[r] = in ? p.beta[(start + r) * p.Hv + h] : 0.0f;
        }
    }
    __syncthreads();

    float* slot = p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats;
    for (int e = t; e < kC * kC; e += kPrepThreads) {
        const int i = e / kC, j = e % kC;
        float kk = 0.0f, qk = 0.0f;
        if (i >= j) {
            for (int d = 0; d < kD; ++d) {
                kk += sm.k[i][d] * sm.k[j][d];
                qk += sm.q[i][d] * sm.k[j][d];
            }
        }
        const float decay = i >= j ? expf(sm.gamma[i] - sm.gamma[j]) : 0.0f;
        sm.a[i][j] = i > j ? sm.beta[i] * kk * decay : 0.0f;
        slot[kPOff + e] = qk * decay;
    }
    if (t < kC) slot[kGammaOff + t] = sm.gamma[t];
    __syncthreads();

    // Forward substitution x_i = rhs_i − Σ_{m<i} A_im x_m for this thread's column.
    const bool is_w = t < kD;
    const int d = is_w ? t : t - kD;
    float x[kC];
#pragma unroll
    for (int i = 0; i < kC; ++i) {
        float rhs = 0.0f;
        if (i < len) {
            rhs = is_w ? sm.beta[i] * expf(sm.gamma[i]) * sm.k[i][d]
                       : sm.beta[i] * __bfloat162float(p.v[static_cast<int64_t>(start + i) * p.qkv_row_stride + h * kD + d]);
        }
#pragma unroll
        for (int m = 0; m < i; ++m) rhs -= sm.a[i][m] * x[m];
        x[i] = rhs;
    }
    float* out = slot + (is_w ? kWOff : kUOff);
#pragma unroll
    for (int i = 0; i < kC; ++i) out[i * kD + d] = x[i];
}

struct StateSmem {
    float s[kD][kSlice];      // S slice: rows dk, columns dv slice
    float w[kC][kPad];        // W of the chunk
    float qk[kC][kPad];       // Q ⊙ e^γ, then K ⊙ e^{γ_L − γ}
    float pm[kC][kC + 1];     // P
    float vp[kC][kSlice + 1]; // U slice, then V'
    float gamma[kC];
};

__global__ void __launch_bounds__(kStateThreads) gdn_chunk_state_kernel(GdnBf16Params p) {
    extern __shared__ float smem_raw[];
    StateSmem& sm = *reinterpret_cast<StateSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int h = blockIdx.x;
    const int j0 = blockIdx.y * kSlice;
    const int kh = h / (p.Hv / p.Hk);
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    float* state = p.state + static_cast<int64_t>(h) * kD * kD;
    for (int e = threadIdx.x; e < kD * kSlice; e += kStateThreads) {
        sm.s[e / kSlice][e % kSlice] = state[(e / kSlice) * kD + j0 + e % kSlice];
    }
    const int chunks = rows == 0 ? 0 : max_chunks(rows);
    for (int c = 0; c < chunks; ++c) {
        int start, len;
        if (!chunk_range(c, pos, rows, start, len)) break;
        const float* slot = p.work + (static_cast<int64_t>(c) * p.Hv + h) * kSlotFloats;
        __syncthreads();  // previous chunk's state update and smem reads are complete
        if (threadIdx.x < kC) sm.gamma[threadIdx.x] = slot[kGammaOff + threadIdx.x];
        for (int e = threadIdx.x; e < kC * kD; e += kStateThreads) sm.w[e / kD][e % kD] = slot[kWOff + e];
        for (int e = threadIdx.x; e < kC * kC; e += kStateThreads) sm.pm[e / kC][e % kC] = slot[kPOff + e];
        for (int e = threadIdx.x; e < kC * kSlice; e += kStateThreads) {
            sm.vp[e / kSlice][e % kSlice] = slot[kUOff + (e / kSlice) * kD + j0 + e % kSlice];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < kC * kD; e += kStateThreads) {
            const int r = e / kD, d = e % kD;
            sm.qk[r][d] = r < len ? __bfloat162float(p.q[static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD + d]) *
                                        expf(sm.gamma[r])
                                  : 0.0f;
        }
        // V' = U − W S₀: thread owns column lane, rows warp + 8 m.
        constexpr int kRowsPerThread = kC / kStateWarps;
        float acc[kRowsPerThread];
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) acc[m] = 0.0f;
        for (int i = 0; i < kD; ++i) {
            const float s = sm.s[i][lane];
#pragma unroll
            for (int m = 0; m < kRowsPerThread; ++m) acc[m] += sm.w[warp + kStateWarps * m][i] * s;
        }
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) {
            const int r = warp + kStateWarps * m;
            sm.vp[r][lane] -= acc[m];
        }
        __syncthreads();
        // O = (Q ⊙ e^γ) S₀ + P V'.
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) acc[m] = 0.0f;
        for (int i = 0; i < kD; ++i) {
            const float s = sm.s[i][lane];
#pragma unroll
            for (int m = 0; m < kRowsPerThread; ++m) acc[m] += sm.qk[warp + kStateWarps * m][i] * s;
        }
        for (int i = 0; i < kC; ++i) {
            const float v = sm.vp[i][lane];
#pragma unroll
            for (int m = 0; m < kRowsPerThread; ++m) acc[m] += sm.pm[warp + kStateWarps * m][i] * v;
        }
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) {
            const int r = warp + kStateWarps * m;
            if (r < len) p.o[(static_cast<int64_t>(start + r) * p.Hv + h) * kD + j0 + lane] = __float2bfloat16(acc[m]);
        }
        __syncthreads();  // qk (Q part) consumed
        const float g_last = sm.gamma[len - 1];
        for (int e = threadIdx.x; e < kC * kD; e += kStateThreads) {
            const int r = e / kD, d = e % kD;
            sm.qk[r][d] = r < len ? __bfloat162float(p.k[static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD + d]) *
                                        expf(g_last - sm.gamma[r])
                                  : 0.0f;
        }
        __syncthreads();
        // S = e^{γ_L} S₀ + Kgᵀ V': thread owns column lane, rows warp + 8 m of dk.
        constexpr int kStateRowsPerThread = kD / kStateWarps;
        const float decay = expf(g_last);
        float upd[kStateRowsPerThread];
#pragma unroll
        for (int m = 0; m < kStateRowsPerThread; ++m) upd[m] = 0.0f;
        for (int r = 0; r < len; ++r) {
            const float v = sm.vp[r][lane];
#pragma unroll
            for (int m = 0; m < kStateRowsPerThread; ++m) upd[m] += sm.qk[r][warp + kStateWarps * m] * v;
        }
#pragma unroll
        for (int m = 0; m < kStateRowsPerThread; ++m) {
            const int i = warp + kStateWarps * m;
            sm.s[i][lane] = decay * sm.s[i][lane] + upd[m];
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kD * kSlice; e += kStateThreads) {
        state[(e / kSlice) * kD + j0 + e % kSlice] = sm.s[e / kSlice][e % kSlice];
    }
}

}  // namespace

size_t gdn_chunk_work_floats(const GdnBf16Params& p) {
    return static_cast<size_t>(max_chunks(p.max_rows)) * p.Hv * kSlotFloats;
}

cudaError_t gdn_chunk_launch(const GdnBf16Params& p, cudaStream_t stream) {
    if (!p.q || !p.k || !p.v || !p.beta || !p.g || !p.state || !p.o || !p.work || !p.cursor ||
        p.dk != kD || p.dv != kD || p.chunk != kC || p.Hk <= 0 || p.Hv <= 0 || p.Hv % p.Hk != 0 ||
        p.max_rows <= 0)
        return cudaErrorInvalidValue;
    const size_t prep_smem = sizeof(PrepSmem);
    const size_t state_smem = sizeof(StateSmem);
    cudaError_t err = cudaFuncSetAttribute(gdn_chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(prep_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(gdn_chunk_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(state_smem));
    if (err != cudaSuccess) return err;
    gdn_chunk_prep_kernel<<<dim3(max_chunks(p.max_rows), p.Hv), kPrepThreads, prep_smem, stream>>>(p);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    gdn_chunk_state_kernel<<<dim3(p.Hv, kD / kSlice), kStateThreads, state_smem, stream>>>(p);
    return cudaGetLastError();
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
