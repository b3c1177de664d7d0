// Sparse MoE MLP on the GPU (lm_moe.h): a router kernel (one block per row: fp32 logits of
// every expert and of the shared expert's gate, fp32 softmax, top-k by k block arg-max passes);
// decode: an expert GEMV pair that reads the selected expert ids from device memory (gate/up:
// one warp per FFN row of each selected expert; down: one warp per output element, summing the
// selected experts then the shared one); prefill: grouping by expert into fixed-capacity
// buffers, gather, grouped WMMA GEMMs, SwiGLU, per-row combine. Every reduction has a fixed order.
#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"

namespace frost::kernels {
namespace {

using namespace lm;

constexpr int kRouterThreads = 256;
constexpr int kGemvWarps = 8;  // warps per block of the expert GEMVs (one output each)

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Σ_i w[i] * x[i] over n (multiple of 8) bf16 values, lanes striding 8-wide; full-warp result.
__device__ inline float warp_dot_bf16(const bf16* w, const bf16* x, int n) {
    const int lane = threadIdx.x % kWarp;
    float acc = 0.0f;
    for (int c = lane * kVec; c < n; c += kWarp * kVec) {
        float a[kVec], b[kVec];
        load8(w + c, a);
        load8(x + c, b);
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc = fmaf(a[i], b[i], acc);
    }
    return warp_sum(acc);
}

// Σ_i w[i] * a[i] with bf16 weights and fp32 activations.
__device__ inline float warp_dot_bf16_f32(const bf16* w, const float* a, int n) {
    const int lane = threadIdx.x % kWarp;
    float acc = 0.0f;
    for (int c = lane * kVec; c < n; c += kWarp * kVec) {
        float v[kVec];
        load8(w + c, v);
        const float4 lo = *reinterpret_cast<const float4*>(a + c);
        const float4 hi = *reinterpret_cast<const float4*>(a + c + 4);
        acc = fmaf(v[0], lo.x, acc); acc = fmaf(v[1], lo.y, acc);
        acc = fmaf(v[2], lo.z, acc); acc = fmaf(v[3], lo.w, acc);
        acc = fmaf(v[4], hi.x, acc); acc = fmaf(v[5], hi.y, acc);
        acc = fmaf(v[6], hi.z, acc); acc = fmaf(v[7], hi.w, acc);
    }
    return warp_sum(acc);
}

// Block arg-max of (value desc, index asc) over n candidates in `vals` (taken ones are -1).
__device__ int block_argmax(const float* vals, int n, float* red_val, int* red_idx) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    float best = -2.0f;
    int idx = n;
    for (int e = threadIdx.x; e < n; e += blockDim.x)
        if (vals[e] > best) {  // ascending e per thread: the first of equal values wins
            best = vals[e];
            idx = e;
        }
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) {
        const float ov = __shfl_xor_sync(kFullMask, best, off);
        const int oi = __shfl_xor_sync(kFullMask, idx, off);
        if (ov > best || (ov == best && oi < idx)) {
            best = ov;
            idx = oi;
        }
    }
    __syncthreads();
    if (lane == 0) {
        red_val[warp] = best;
        red_idx[warp] = idx;
    }
    __syncthreads();
    best = red_val[0];
    idx = red_idx[0];
    for (int w = 1; w < warps; ++w)
        if (red_val[w] > best || (red_val[w] == best && red_idx[w] < idx)) {
            best = red_val[w];
            idx = red_idx[w];
        }
    return idx;
}

// The bf16 output element i: written, or accumulated into (fused residual add) in fp32 then rounded once.
__device__ inline void store_out(const MoeBf16Params& p, int64_t i, float total) {
    if (p.accumulate) total += __bfloat162float(p.out_bf16[i]);
    p.out_bf16[i] = __float2bfloat16_rn(total);
}

// grid: max_rows blocks; dynamic smem: (E + 1) logits + E candidate copies.
__global__ void moe_router_kernel(MoeBf16Params p) {
    extern __shared__ float smem[];
    float* logit = smem;            // [E + 1]: experts, then the shared gate
    float* cand = smem + p.E + 1;   // [E] probabilities still selectable
    __shared__ float red_val[32];
    __shared__ int red_idx[32];
    __shared__ float scratch[32];
    const int r = blockIdx.x;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const bf16* x = p.x + static_cast<int64_t>(r) * p.H;
    const int warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    for (int e = warp; e <= p.E; e += warps) {
        const bf16* w = e < p.E ? p.router + static_cast<int64_t>(e) * p.H : p.shared_gate;
        const float v = warp_dot_bf16(w, x, p.H);
        if (threadIdx.x % kWarp == 0) logit[e] = v;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int e = threadIdx.x; e < p.E; e += blockDim.x) mx = fmaxf(mx, logit[e]);
    mx = warp_max(mx);
    __syncthreads();
    if (threadIdx.x % kWarp == 0) scratch[warp] = mx;
    __syncthreads();
    mx = scratch[0];
    for (int w = 1; w < warps; ++w) mx = fmaxf(mx, scratch[w]);
    float part = 0.0f;
    for (int e = threadIdx.x; e < p.E; e += blockDim.x) part += (cand[e] = expf(logit[e] - mx));
    const float sum = block_sum(part, scratch);
    float* probs = p.probs + static_cast<int64_t>(r) * p.E;
    for (int e = threadIdx.x; e < p.E; e += blockDim.x) {
        cand[e] /= sum;
        probs[e] = cand[e];
    }
    __syncthreads();
    int32_t* ids = p.topk_ids + static_cast<int64_t>(r) * p.k;
    float* w = p.topk_w + static_cast<int64_t>(r) * p.k;
    float picked[kMoeMaxTopK];
    for (int j = 0; j < p.k; ++j) {
        const int best = block_argmax(cand, p.E, red_val, red_idx);
        picked[j] = cand[best];
        __syncthreads();
        if (threadIdx.x == 0) {
            ids[j] = best;
            cand[best] = -1.0f;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int j = 0; j < p.k; ++j) s += picked[j];
        for (int j = 0; j < p.k; ++j) w[j] = p.norm_topk ? picked[j] / s : picked[j];
        p.shared_w[r] = sigmoid(logit[p.E]);
    }
}

// grid: (ceil(max(I, Is) / kGemvWarps), k + 1, max_rows); slot k is the shared expert.
__global__ void moe_gate_up_kernel(MoeBf16Params p) {
    const int r = blockIdx.z, slot = blockIdx.y;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const bool shared = slot == p.k;
    const int F = shared ? p.Is : p.I;
    const int i = blockIdx.x * kGemvWarps + threadIdx.x / kWarp;
    if (i >= F) return;
    const int e = shared ? 0 : p.topk_ids[static_cast<int64_t>(r) * p.k + slot];
    const bf16* gu = shared ? p.shared_gate_up : p.experts_gate_up + static_cast<int64_t>(e) * 2 * p.I * p.H;
    const bf16* x = p.x + static_cast<int64_t>(r) * p.H;
    const float g = warp_dot_bf16(gu + static_cast<int64_t>(i) * p.H, x, p.H);
    const float u = warp_dot_bf16(gu + static_cast<int64_t>(F + i) * p.H, x, p.H);
    const int width = p.I > p.Is ? p.I : p.Is;
    if (threadIdx.x % kWarp == 0) p.act[(static_cast<int64_t>(r) * (p.k + 1) + slot) * width + i] = silu(g) * u;
}

// grid: (ceil(H / kGemvWarps), max_rows). Selected experts in slot order, then the shared one.
__global__ void moe_down_kernel(MoeBf16Params p) {
    const int r = blockIdx.y;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const int h = blockIdx.x * kGemvWarps + threadIdx.x / kWarp;
    if (h >= p.H) return;
    const int width = p.I > p.Is ? p.I : p.Is;
    const float* act = p.act + static_cast<int64_t>(r) * (p.k + 1) * width;
    float total = 0.0f;
    for (int j = 0; j < p.k; ++j) {
        const int e = p.topk_ids[static_cast<int64_t>(r) * p.k + j];
        const bf16* down = p.experts_down + (static_cast<int64_t>(e) * p.H + h) * p.I;
        total = fmaf(p.topk_w[static_cast<int64_t>(r) * p.k + j], warp_dot_bf16_f32(down, act + j * width, p.I),
                     total);
    }
    const float s = warp_dot_bf16_f32(p.shared_down + static_cast<int64_t>(h) * p.Is, act + p.k * width, p.Is);
    total = fmaf(p.shared_w[r], s, total);
    if (threadIdx.x % kWarp == 0) {
        if (p.out) p.out[static_cast<int64_t>(r) * p.H + h] = total;
        if (p.out_bf16) store_out(p, static_cast<int64_t>(r) * p.H + h, total);
    }
}


// ---- prefill: group by expert, grouped tensor-core GEMMs --------------------------------------

constexpr int kGroupThreads = 1024;
constexpr int kTile = 16;          // WMMA m = n = k
constexpr int kGemmWarps = 4;      // warps per GEMM block: 16 rows x 64 columns

int max_ffn(const MoeBf16Params& p) { return p.I > p.Is ? p.I : p.Is; }
int64_t entries(const MoeBf16Params& p) { return static_cast<int64_t>(p.max_rows) * (p.k + 1); }

// One block. Group g < E holds the (row, slot) pairs that selected expert g, group E every row
// (shared expert); inside a group, entries follow the row (then slot) order.
__global__ void moe_group_kernel(MoeBf16Params p) {
    extern __shared__ int32_t counts[];  // [E + 1]
    const int rows = launch_rows(p.n_rows, p.max_rows);
    for (int g = threadIdx.x; g <= p.E; g += blockDim.x) {
        int c = 0;
        if (g == p.E) c = rows;
        else
            for (int i = 0; i < rows * p.k; ++i) c += p.topk_ids[i] == g;
        counts[g] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int g = 0; g <= p.E; ++g) {
            const int c = counts[g];
            counts[g] = run;
            p.group_offsets[g] = run;
            run += c;
        }
        p.group_offsets[p.E + 1] = run;
    }
    __syncthreads();
    for (int g = threadIdx.x; g <= p.E; g += blockDim.x) {
        int pos = counts[g];
        for (int r = 0; r < rows; ++r) {
            for (int j = 0; j < p.k; ++j) {
                if (g == p.E || p.topk_ids[r * p.k + j] != g) continue;
                p.entry_row[pos] = r;
                p.entry_pos[r * (p.k + 1) + j] = pos++;
            }
            if (g == p.E) {
                p.entry_row[pos] = r;
                p.entry_pos[r * (p.k + 1) + p.k] = pos++;
            }
        }
    }
}

// grid: entries blocks; copies x[entry_row[i]] to xg[i].
__global__ void moe_gather_kernel(MoeBf16Params p) {
    const int i = blockIdx.x;
    if (i >= p.group_offsets[p.E + 1]) return;
    const bf16* src = p.x + static_cast<int64_t>(p.entry_row[i]) * p.H;
    bf16* dst = p.xg + static_cast<int64_t>(i) * p.H;
    for (int c = threadIdx.x * kVec; c < p.H; c += blockDim.x * kVec)
        *reinterpret_cast<Bf16x8*>(dst + c) = *reinterpret_cast<const Bf16x8*>(src + c);
}

// Y[rows of group g, 0:N_g] = A[rows of g, 0:K_g] · W_g^T (W_g [N_g, K_g] row-major), for the
// routed groups (W_g = w_routed + g * N_r * K_r) and the shared one (group E).
struct GroupedGemm {
    const bf16* a;           // [entries + 16, lda]
    int lda;
    const bf16* w_routed;    // [E, N_r, K_r]
    const bf16* w_shared;    // [N_s, K_s]
    int n_routed, k_routed, n_shared, k_shared;
    float* y;                // [entries + 16, ldy]
    int ldy;
};

// grid: (ceil(max N / 64), ceil(entries / 16)); each block: one 16-row tile, 64 columns, once
// per group the tile overlaps (rows of other groups are computed and dropped).
__global__ void moe_grouped_gemm_kernel(MoeBf16Params p, GroupedGemm g) {
    using namespace nvcuda;
    __shared__ __align__(32) float tile[kGemmWarps][kTile * kTile];  // WMMA stores need 256-bit alignment
    const int total = p.group_offsets[p.E + 1];
    const int row0 = blockIdx.y * kTile;
    if (row0 >= total) return;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int n0 = blockIdx.x * (kGemmWarps * kTile) + warp * kTile;
    const int row_end = row0 + kTile < total ? row0 + kTile : total;
    // First group whose entries reach past row0 (groups are few; a linear scan is cheap).
    int grp = 0;
    while (p.group_offsets[grp + 1] <= row0) ++grp;
    for (; grp <= p.E && p.group_offsets[grp] < row_end; ++grp) {
        const int lo = p.group_offsets[grp], hi = p.group_offsets[grp + 1];
        if (hi <= lo) continue;
        const bool shared = grp == p.E;
        const int N = shared ? g.n_shared : g.n_routed, K = shared ? g.k_shared : g.k_routed;
        if (n0 >= N) continue;  // warp-uniform
        const bf16* w = shared ? g.w_shared : g.w_routed + static_cast<int64_t>(grp) * N * K;
        wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k0 = 0; k0 < K; k0 += kTile) {
            wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, bf16, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, g.a + static_cast<int64_t>(row0) * g.lda + k0, g.lda);
            wmma::load_matrix_sync(fb, w + static_cast<int64_t>(n0) * K + k0, K);  // B[k][n] = W[n][k]
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(tile[warp], acc, kTile, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < kTile * kTile; e += kWarp) {
            const int r = row0 + e / kTile;
            if (r >= lo && r < hi) g.y[static_cast<int64_t>(r) * g.ldy + n0 + e % kTile] = tile[warp][e];
        }
        __syncwarp();
    }
}

// grid: entries blocks; ag[i, :F] = bf16(silu(hg[i, :F]) * hg[i, F:2F]), F = I or Is by group.
__global__ void moe_swiglu_kernel(MoeBf16Params p) {
    const int i = blockIdx.x;
    if (i >= p.group_offsets[p.E + 1]) return;
    const int width = max(p.I, p.Is);
    const int F = i >= p.group_offsets[p.E] ? p.Is : p.I;
    const float* h = p.hg + static_cast<int64_t>(i) * 2 * width;
    bf16* a = p.ag + static_cast<int64_t>(i) * width;
    for (int c = threadIdx.x; c < F; c += blockDim.x) a[c] = __float2bfloat16_rn(silu(h[c]) * h[F + c]);
}

// grid: max_rows blocks; out[r] = Σ_j w_j · yg[pos(r, j)] (slot order) + shared_w · yg[pos(r, k)].
__global__ void moe_combine_kernel(MoeBf16Params p) {
    const int r = blockIdx.x;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const int32_t* pos = p.entry_pos + static_cast<int64_t>(r) * (p.k + 1);
    for (int h = threadIdx.x; h < p.H; h += blockDim.x) {
        float total = 0.0f;
        for (int j = 0; j < p.k; ++j)
            total = fmaf(p.topk_w[static_cast<int64_t>(r) * p.k + j], p.yg[static_cast<int64_t>(pos[j]) * p.H + h], total);
        total = fmaf(p.shared_w[r], p.yg[static_cast<int64_t>(pos[p.k]) * p.H + h], total);
        if (p.out) p.out[static_cast<int64_t>(r) * p.H + h] = total;
        if (p.out_bf16) store_out(p, static_cast<int64_t>(r) * p.H + h, total);
    }
}

bool valid(const MoeBf16Params& p) {
    return p.x && p.router && p.experts_gate_up && p.experts_down && p.shared_gate_up && p.shared_down &&
           p.shared_gate && p.probs && p.topk_ids && p.topk_w && p.shared_w && p.H > 0 && p.H % kVec == 0 &&
           p.E > 0 && p.E <= kMoeMaxExperts && p.k >= 1 && p.k <= p.E && p.k <= kMoeMaxTopK && p.I > 0 &&
           p.I % kVec == 0 && p.Is > 0 && p.Is % kVec == 0 && p.max_rows > 0 && aligned16(p.x) &&
           aligned16(p.router) && aligned16(p.experts_gate_up) && aligned16(p.experts_down) &&
           aligned16(p.shared_gate_up) && aligned16(p.shared_down) && aligned16(p.shared_gate);
}

}  // namespace

MoePrefillScratch moe_prefill_scratch(const MoeBf16Params& p) {
    const size_t n = static_cast<size_t>(entries(p)) + kTile, w = static_cast<size_t>(max_ffn(p));
    return {static_cast<size_t>(p.E) + 2, static_cast<size_t>(entries(p)), static_cast<size_t>(entries(p)),
            n * p.H, n * w, n * 2 * w, n * p.H};
}

cudaError_t moe_prefill_launch(const MoeBf16Params& p, cudaStream_t stream) {
    if (!valid(p) || (!p.out && !p.out_bf16) || !p.group_offsets || !p.entry_row || !p.entry_pos || !p.xg ||
        !p.hg || !p.ag || !p.yg || p.H % kTile || p.I % kTile || p.Is % kTile)
        return cudaErrorInvalidValue;
    // WMMA fragment loads need 256-bit aligned tiles.
    for (const void* ptr : {static_cast<const void*>(p.xg), static_cast<const void*>(p.ag),
                            static_cast<const void*>(p.experts_gate_up), static_cast<const void*>(p.experts_down),
                            static_cast<const void*>(p.shared_gate_up), static_cast<const void*>(p.shared_down)})
        if (reinterpret_cast<uintptr_t>(ptr) % 32) return cudaErrorInvalidValue;
    cudaError_t e = moe_router_launch(p, stream);
    if (e != cudaSuccess) return e;
    moe_group_kernel<<<1, kGroupThreads, sizeof(int32_t) * (p.E + 1), stream>>>(p);
    const int n_entries = static_cast<int>(entries(p)), m_tiles = ceil_div(n_entries, kTile);
    moe_gather_kernel<<<n_entries, 128, 0, stream>>>(p);
    const int width = max_ffn(p);
    const int cols = kGemmWarps * kTile;
    GroupedGemm gu{p.xg, p.H, p.experts_gate_up, p.shared_gate_up, 2 * p.I, p.H, 2 * p.Is, p.H, p.hg, 2 * width};
    moe_grouped_gemm_kernel<<<dim3(ceil_div(2 * width, cols), m_tiles), kGemmWarps * kWarp, 0, stream>>>(p, gu);
    moe_swiglu_kernel<<<n_entries, 128, 0, stream>>>(p);
    GroupedGemm dn{p.ag, width, p.experts_down, p.shared_down, p.H, p.I, p.H, p.Is, p.yg, p.H};
    moe_grouped_gemm_kernel<<<dim3(ceil_div(p.H, cols), m_tiles), kGemmWarps * kWarp, 0, stream>>>(p, dn);
    moe_combine_kernel<<<p.max_rows, 256, 0, stream>>>(p);
    return cudaGetLastError();
}

size_t moe_act_floats(const MoeBf16Params& p) {
    const int width = p.I > p.Is ? p.I : p.Is;
    return static_cast<size_t>(p.max_rows) * (p.k + 1) * width;
}

cudaError_t moe_router_launch(const MoeBf16Params& p, cudaStream_t stream) {
    if (!valid(p)) return cudaErrorInvalidValue;
    const size_t smem = sizeof(float) * (2 * static_cast<size_t>(p.E) + 1);
    moe_router_kernel<<<p.max_rows, kRouterThreads, smem, stream>>>(p);
    return cudaGetLastError();
}

cudaError_t moe_experts_launch(const MoeBf16Params& p, cudaStream_t stream) {
    if (!valid(p) || !p.act || (!p.out && !p.out_bf16) || !aligned16(p.act)) return cudaErrorInvalidValue;
    const int width = p.I > p.Is ? p.I : p.Is;
    const dim3 gu(ceil_div(width, kGemvWarps), p.k + 1, p.max_rows);
    moe_gate_up_kernel<<<gu, kGemvWarps * kWarp, 0, stream>>>(p);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    const dim3 dn(ceil_div(p.H, kGemvWarps), p.max_rows);
    moe_down_kernel<<<dn, kGemvWarps * kWarp, 0, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels
