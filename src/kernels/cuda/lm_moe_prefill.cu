// MoE prefill on the GPU (lm_moe.h, moe_prefill_launch): the router, grouping of (row, expert)
// pairs by expert into fixed-capacity buffers, gather, grouped GEMMs on tensor cores, SwiGLU and a
// per-row combine. Every reduction has a fixed order.
#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_common.cuh"

namespace frost::kernels {
namespace {

using namespace lm;
using moe::store_out;
using moe::valid;

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

}  // namespace frost::kernels
