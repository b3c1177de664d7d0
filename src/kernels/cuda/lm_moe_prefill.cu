// MoE prefill on the GPU (lm_moe.h, moe_prefill_launch): the router (lm_moe_prefill_router.cu),
// grouping of (row, expert) pairs by expert into fixed-capacity buffers and a device-side tile
// table, the two grouped tensor-core GEMMs (lm_moe_gemm.cuh) with the row gather and SwiGLU fused
// into them, and a per-row combine. Every reduction has a fixed order, so two runs give the same
// bits.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_common.cuh"
#include "kernels/cuda/lm_moe_gemm.cuh"
#include "kernels/cuda/lm_moe_gemm_tma.cuh"
#include "kernels/cuda/lm_moe_gemm_ws.cuh"

namespace frost::kernels {
namespace {

using namespace lm;
using moe::valid;

constexpr int kChunkRows = 64;     // rows per counting / scatter block
constexpr int kChunkThreads = 256;
constexpr int kScanThreads = 1024;
constexpr int kActCols = moe::kBN / 2;  // gate|up tile: 64 gate + the matching 64 up columns

__host__ __device__ inline int max_ffn(const MoeBf16Params& p) { return p.I > p.Is ? p.I : p.Is; }
int64_t entries(const MoeBf16Params& p) { return static_cast<int64_t>(p.max_rows) * (p.k + 1); }
int chunks(const MoeBf16Params& p) { return ceil_div(p.max_rows, kChunkRows); }
// Tiles at most: every group's last tile may be partial, so one extra per group.
int tile_capacity(const MoeBf16Params& p, int bm) { return ceil_div(entries(p), bm) + p.E + 1; }

// 64-row tiles waste less of an expert's tile when groups are small (a 1k-token chunk of the
// 35B-A3B shape gives ~32 rows per expert); 128-row tiles halve the weight re-reads when they are
// large. Without wgmma (before Hopper) the switch is at an average of 128 rows per routed group.
// Measured on the H100 (bench_moe_prefill, 35B-A3B / Qwen3-Next-80B shapes, ms per launch): 1k
// rows 64x64 0.728 / 1.308; 4k wgmma 1.053 / 1.591 (best mma.sync 1.225 / 1.632); 16k wgmma 3.297
// / 4.294 (3.818 / 5.306). On Hopper the TMA-fed tiles (lm_moe_gemm_tma.cuh) win, by the average
// routed group g = rows k / E (H100, two runs, whole launch, ms, the old wgmma shape 3 after the
// slash): g 20-80 (1k rows; Qwen3-Next 4k): 128 x 256 tiles (shape 5) 0.685-0.694 / 0.726-0.735,
// 1.250-1.276 / 1.321-1.343, 1.562-1.610 / 1.597-1.632; g 128-320 (35B-A3B 4k, Qwen3-Next 16k):
// 192-row tiles (shape 7: one tile for most groups, so each expert's weights stream once)
// 0.963-0.983 / 1.040-1.060, 3.967-4.152 / 4.167-4.273; g 512 (35B-A3B 16k): shape 5 2.787-2.831
// / 3.243-3.253. The warp-specialised cp.async tile (shape 4) is never picked.
// Shape 5 at every g on Hopper since 2026-11-30 (issue 14): on the H200 it beats shape 7 at every
// size, g 64-256 included (bench_moe_prefill --shape 35b --tiles 5,7, whole launch, ms, two
// rounds: 2048 rows 0.598-0.599 against 0.809-0.810, 4096 0.882-0.885 against 1.006-1.010, 8192
// 1.441-1.450 against 1.825-1.838). The second row tile of a group re-reads its expert's weights,
// which the 192-row tile was built to avoid; most likely those re-reads come from L2, and shape 5's
// m64n256 wgmma and 87 FLOPs per staged byte (128 x 256 x 64 per 48 KB stage, against 192 x 128 x
// 64 per 40 KB: 79) weigh more. Not re-measured on the H100. Through the engine
// (35B-A3B shape, first 20 layers, `frost bench engine --ttft 1024,4096,16384`, shape forced by
// FROST_MOE_PREFILL_TILE, alternating, two calls): 4k 35.14-35.43 -> 30.72-31.13 and 34.34-34.55
// -> 29.97-31.23 ms, 16k (8192-row chunks) 142.69-143.01 -> 127.22-127.78 and 138.45-139.52 ->
// 128.49-128.66 ms. The 35B-A3B shape with FP8 experts (dequantized into the bf16 tile, then these
// GEMMs), 4k / 16k 45.17-45.23 / 193.64-194.03 -> 42.58-42.61 / 182.84-183.10 ms. Tried in the
// same calls and dropped: L2 eviction hints in the TMA tiles (weights evict-first, the gathered
// rows / grouped activations evict-last): shape 7 4k 0.865 -> 0.808-0.815 ms, but shape 5 4k
// 0.734 -> 0.780 and 8192 1.24 -> 1.31 (most likely an expert's second row tile then misses its
// weights in L2), engine shape 5 4k 30.7-31.1 -> 31.8-32.4 ms. Also measured: Qwen3-Next at
// 8192 rows (g 160) 2.028 -> 1.972 ms; and shape 5 over the 64-row shape 1 for small groups too
// (35B-A3B at 64 / 128 / 256 / 512 rows, g 2-16: 0.458 / 0.507 / 0.513-0.516 / 0.531 -> 0.418 /
// 0.466 / 0.470-0.476 / 0.484 ms; Qwen3-Next at 256 / 512 rows: 0.949 / 0.972 -> 0.877 / 0.899):
// every expert's weights are streamed whatever the tile, and shape 5 streams them faster.
int pick_tile_shape(const MoeBf16Params& p) {
    if (p.tile_shape) return p.tile_shape;
    if (const char* env = std::getenv("FROST_MOE_PREFILL_TILE"); env && *env) {
        const int forced = std::atoi(env);  // out of range: refused by the launcher like a bad tile_shape
        return forced >= 1 && forced <= kMoeTileShapeCount ? forced : -1;
    }
    const int64_t routed = static_cast<int64_t>(p.max_rows) * p.k;  // entries of the routed groups
    if (!moe_prefill_wgmma_supported()) return routed < 128LL * p.E ? 1 : 2;
    return 5;
}

}  // namespace

int moe_prefill_invariant_tile_shape() { return moe_prefill_wgmma_supported() ? 5 : 2; }

namespace {

// ---- grouping: count per chunk, scan, scatter (deterministic: by row within each group) -------

// grid: chunks. chunk_base[c, g] = how many of chunk c's (row, slot) pairs selected expert g. The
// shared-memory atomics only count, so the values do not depend on their order.
__global__ void moe_count_kernel(MoeBf16Params p) {
    extern __shared__ int32_t count[];  // [E]
    const int rows = launch_rows(p.n_rows, p.max_rows), r0 = blockIdx.x * kChunkRows;
    if (r0 >= rows) return;  // the scan reads only the chunks below rows
    for (int g = threadIdx.x; g < p.E; g += blockDim.x) count[g] = 0;
    __syncthreads();
    const int n = min(kChunkRows, rows - r0) * p.k;
    const int32_t* ids = p.topk_ids + static_cast<int64_t>(r0) * p.k;
    for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&count[ids[i]], 1);
    __syncthreads();
    int32_t* base = p.chunk_base + static_cast<int64_t>(blockIdx.x) * p.E;
    for (int g = threadIdx.x; g < p.E; g += blockDim.x) base[g] = count[g];
}

// Exclusive prefix sum of v in thread order over the block (blockDim.x a multiple of 32);
// `total` receives the sum. `warp_sums` holds 32 ints.
__device__ int block_exclusive_scan(int v, int* warp_sums, int& total) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    int inc = v;
#pragma unroll
    for (int off = 1; off < kWarp; off *= 2) {
        const int up = __shfl_up_sync(kFullMask, inc, off);
        if (lane >= off) inc += up;
    }
    __syncthreads();  // warp_sums may still be read by a previous call
    if (lane == kWarp - 1) warp_sums[warp] = inc;
    __syncthreads();
    int base = 0;
    total = 0;
    for (int w = 0; w < warps; ++w) {
        if (w < warp) base += warp_sums[w];
        total += warp_sums[w];
    }
    return base + inc - v;
}

// One block. Turns the per-chunk counts into each chunk's first slot inside its group, then
// writes group_offsets and the tile table: per group ceil(count / bm) tiles of (group, first
// entry), groups in order. Measured flat and not kept (H200, 2026-12-02, forty-eighth session):
// each group's chunks split over four adjacent lanes, every lane's share (16 counts) loaded at
// once and the shares' sums scanned by shuffles (one L2 round trip per pass instead of one per 8
// chunks; the grouping invariants of the MoE prefill tests held). `bench_moe_prefill --shape 35b
// --tiles 5 --reps 20`, whole launch, three rounds: 4096 rows 0.729 / 0.714 / 0.729 -> 0.734 /
// 0.723 / 0.724 ms, 16384 rows 2.247 / 2.235 / 2.243 -> 2.255 / 2.251 / 2.250.
__global__ void moe_scan_kernel(MoeBf16Params p, int bm) {
    extern __shared__ int32_t count[];  // [E + 1]
    __shared__ int warp_sums[kWarp];
    const int rows = launch_rows(p.n_rows, p.max_rows), n_chunks = (rows + kChunkRows - 1) / kChunkRows;
    constexpr int kBatch = 8;  // independent loads in flight per thread (a 16k-row chunk has 256 chunks)
    for (int g = threadIdx.x; g < p.E; g += blockDim.x) {
        int run = 0;
        for (int c0 = 0; c0 < n_chunks; c0 += kBatch) {
            int v[kBatch];
#pragma unroll
            for (int i = 0; i < kBatch; ++i)
                v[i] = c0 + i < n_chunks ? p.chunk_base[static_cast<int64_t>(c0 + i) * p.E + g] : 0;
#pragma unroll
            for (int i = 0; i < kBatch; ++i) {
                if (c0 + i < n_chunks) p.chunk_base[static_cast<int64_t>(c0 + i) * p.E + g] = run;
                run += v[i];
            }
        }
        count[g] = run;
    }
    if (threadIdx.x == 0) count[p.E] = rows;  // the shared expert: every row once
    __syncthreads();
    // Each thread owns a contiguous run of groups, so thread order is group order.
    const int groups = p.E + 1, per = (groups + blockDim.x - 1) / blockDim.x;
    const int lo = min(groups, static_cast<int>(threadIdx.x) * per), hi = min(groups, lo + per);
    int entries_here = 0, tiles_here = 0;
    for (int g = lo; g < hi; ++g) {
        entries_here += count[g];
        tiles_here += (count[g] + bm - 1) / bm;
    }
    int entry_total, tile_total;
    int entry = block_exclusive_scan(entries_here, warp_sums, entry_total);
    int tile = block_exclusive_scan(tiles_here, warp_sums, tile_total);
    for (int g = lo; g < hi; ++g) {
        p.group_offsets[g] = entry;
        for (int t = 0; t * bm < count[g]; ++t, ++tile) {
            p.tile_table[1 + 2 * tile] = g;
            p.tile_table[2 + 2 * tile] = entry + t * bm;
        }
        entry += count[g];
    }
    if (threadIdx.x == 0) {
        p.group_offsets[p.E + 1] = entry_total;
        p.tile_table[0] = tile_total;
        p.group_offsets[p.E + 2] = p.group_offsets[p.E + 3] = 0;  // the TMA GEMMs' work counters
    }
}

// grid: chunks. Writes each (row, slot) pair of the chunk to its group at the chunk's base plus
// its rank among the chunk's earlier pairs of that group, and each row's shared-expert entry. Warp
// w takes a contiguous run of the chunk's pairs in steps of 32 lanes; __match_any_sync finds the
// lanes of one group, so a pair's rank is (its group's pairs in earlier warps) + (in this warp's
// earlier steps) + (in lower lanes of its step): pair order, as one thread per group walking the
// chunk gave. H200, 35B-A3B shape, 4096 rows (ncu): 26 -> 6 us (that thread's loop had 512 steps).
__global__ void __launch_bounds__(kChunkThreads) moe_scatter_kernel(MoeBf16Params p) {
    extern __shared__ int32_t scatter_smem[];
    const int rows = launch_rows(p.n_rows, p.max_rows), r0 = blockIdx.x * kChunkRows;
    if (r0 >= rows) return;
    const int nr = min(kChunkRows, rows - r0), n = nr * p.k;
    const int warps = blockDim.x / kWarp, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    int32_t* ids = scatter_smem;       // [kChunkRows * k]
    int32_t* rank = ids + n;           // [kChunkRows * k] rank within the warp's run
    int32_t* wbase = rank + n;         // [warps, E] pairs per group in warp w's run, then its first slot
    const int32_t* src = p.topk_ids + static_cast<int64_t>(r0) * p.k;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ids[i] = src[i];
    for (int i = threadIdx.x; i < warps * p.E; i += blockDim.x) wbase[i] = 0;
    __syncthreads();
    const int per = (n + warps * kWarp - 1) / (warps * kWarp) * kWarp;  // a warp's run, whole steps
    const int lo = min(n, warp * per), hi = min(n, lo + per);
    int32_t* mine = wbase + warp * p.E;
    for (int i0 = lo; i0 < hi; i0 += kWarp) {  // warp-uniform
        const int i = i0 + lane;
        const bool live = i < hi;
        const int g = live ? ids[i] : -1;
        const unsigned same = __match_any_sync(kFullMask, g);
        const int leader = __ffs(same) - 1;
        int before = 0;
        if (live && lane == leader) {
            before = mine[g];
            mine[g] = before + __popc(same);
        }
        before = __shfl_sync(kFullMask, before, leader);
        if (live) rank[i] = before + __popc(same & ((1u << lane) - 1u));
        __syncwarp();  // the next step's leaders read what this step's wrote
    }
    __syncthreads();
    for (int g = threadIdx.x; g < p.E; g += blockDim.x) {
        int pos = p.group_offsets[g] + p.chunk_base[static_cast<int64_t>(blockIdx.x) * p.E + g];
        for (int w = 0; w < warps; ++w) {
            const int c = wbase[w * p.E + g];
            wbase[w * p.E + g] = pos;
            pos += c;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int pos = wbase[(i / per) * p.E + ids[i]] + rank[i], r = r0 + i / p.k;
        p.entry_row[pos] = r;
        p.entry_pos[static_cast<int64_t>(r) * (p.k + 1) + i % p.k] = pos;
    }
    for (int i = threadIdx.x; i < nr; i += blockDim.x) {
        const int r = r0 + i, pos = p.group_offsets[p.E] + r;
        p.entry_row[pos] = r;
        p.entry_pos[static_cast<int64_t>(r) * (p.k + 1) + p.k] = pos;
    }
}

static_assert(sizeof(int32_t) * (2 * kChunkRows * kMoeMaxTopK + kChunkThreads / kWarp * kMoeMaxExperts) <= 48 * 1024,
              "the scatter's shared memory fits the default limit at every supported k and E");
size_t scatter_smem_bytes(const MoeBf16Params& p) {
    return sizeof(int32_t) * (2 * static_cast<size_t>(kChunkRows) * p.k + static_cast<size_t>(kChunkThreads / kWarp) * p.E);
}

// ---- grouped GEMMs ---------------------------------------------------------------------------

// This block's tile: its group and entry range [row0, row_end); false past the tile count.
__device__ inline bool tile_of(const MoeBf16Params& p, int bm, int& group, int& row0, int& row_end) {
    const int t = blockIdx.y;
    if (t >= p.tile_table[0]) return false;
    group = p.tile_table[1 + 2 * t];
    row0 = p.tile_table[2 + 2 * t];
    row_end = min(row0 + bm, p.group_offsets[group + 1]);
    return true;
}

// grid: (ceil(max(I, Is) / 64), tile capacity). ag[entry, n0 .. n0 + 64) = bf16(silu(x_r · Wg^T)
// * (x_r · Wu^T)) for the tile's entries, x_r gathered through entry_row. The B tile interleaves
// gate and up weight rows (gate_up_col) so that SwiGLU pairs sit in one thread's registers.
template <class T>
__global__ void __launch_bounds__(T::threads, 2) moe_gate_up_kernel(MoeBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int half_wc = T::WC / 2;
    int group, row0, row_end;
    if (!tile_of(p, T::BM, group, row0, row_end)) return;
    const bool shared = group == p.E;
    const int F = shared ? p.Is : p.I, n0 = blockIdx.x * kActCols;
    if (n0 >= F) return;
    const bf16* w = shared ? p.shared_gate_up : p.experts_gate_up + static_cast<int64_t>(group) * 2 * p.I * p.H;
    const bf16** rows = moe::gemm_rows(smem_raw);
    for (int i = threadIdx.x; i < T::BM + moe::kBN; i += blockDim.x) {
        if (i < T::BM) {
            const int e = row0 + i;
            rows[i] = e < row_end ? p.x + static_cast<int64_t>(p.entry_row[e]) * p.H : nullptr;
        } else {
            bool up;
            const int col = n0 + moe::gate_up_col<T>(i - T::BM, up);
            rows[i] = col < F ? w + static_cast<int64_t>(up ? F + col : col) * p.H : nullptr;
        }
    }
    __syncthreads();
    typename T::Acc acc{};
    moe::tile_run<T>(acc, p.H, w, smem_raw);
    const int width = max_ffn(p);
    T::visit_pairs(acc, [&](int r, int c, float g0, float g1, float u0, float u1) {
        const int e = row0 + r, col = n0 + c;
        if (e < row_end && col < F)
            *reinterpret_cast<__nv_bfloat162*>(p.ag + static_cast<int64_t>(e) * width + col) =
                __floats2bfloat162_rn(silu(g0) * u0, silu(g1) * u1);
    });
}

// grid: (ceil(H / 128), tile capacity). yg[entry, n0 .. n0 + 128) = bf16(ag[entry, :F] · Wd^T).
template <class T>
__global__ void __launch_bounds__(T::threads, 2) moe_down_kernel(MoeBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    int group, row0, row_end;
    if (!tile_of(p, T::BM, group, row0, row_end)) return;
    const bool shared = group == p.E;
    const int F = shared ? p.Is : p.I, n0 = blockIdx.x * moe::kBN, width = max_ffn(p);
    const bf16* w = shared ? p.shared_down : p.experts_down + static_cast<int64_t>(group) * p.H * p.I;
    const bf16** rows = moe::gemm_rows(smem_raw);
    for (int i = threadIdx.x; i < T::BM + moe::kBN; i += blockDim.x) {
        const int e = row0 + i, n = n0 + i - T::BM;
        if (i < T::BM) rows[i] = e < row_end ? p.ag + static_cast<int64_t>(e) * width : nullptr;
        else rows[i] = n < p.H ? w + static_cast<int64_t>(n) * F : nullptr;
    }
    __syncthreads();
    typename T::Acc acc{};
    moe::tile_run<T>(acc, F, w, smem_raw);
    T::visit(acc, [&](int r, int c, float v0, float v1) {
        const int e = row0 + r, col = n0 + c;
        if (e < row_end && col < p.H)
            *reinterpret_cast<__nv_bfloat162*>(p.yg + static_cast<int64_t>(e) * p.H + col) =
                __floats2bfloat162_rn(v0, v1);
    });
}

// grid: max_rows blocks; out[r] = Σ_j w_j · yg[pos(r, j)] (slot order) + shared_w · yg[pos(r, k)],
// 8 columns per thread. All of a row's entry positions, then all of its kBatch entry loads go out
// before any sum (the sums keep the slot order, so the bits do not depend on the batching): one
// round trip each for k + 1 <= kBatch. H200, 35B-A3B shape, 4096 rows (ncu): 67 -> 48 us against
// batches of 4 loads, each batch behind its own position loads.
__global__ void __launch_bounds__(256, 2) moe_combine_kernel(MoeBf16Params p) {  // 2 blocks: <= 128 registers
    constexpr int kBatch = 12;  // k + 1 for the released models: 9 (Qwen3.5 MoE), 11 (Qwen3-Next)
    const int r = blockIdx.x;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const int32_t* pos = p.entry_pos + static_cast<int64_t>(r) * (p.k + 1);
    for (int h = threadIdx.x * kVec; h < p.H; h += blockDim.x * kVec) {
        const int64_t row_at = static_cast<int64_t>(r) * p.H + h;
        float total[kVec] = {}, old[kVec] = {};
        if (p.out_bf16 && p.accumulate) load8(p.out_bf16 + row_at, old);  // in flight with the entries' loads
        for (int j0 = 0; j0 <= p.k; j0 += kBatch) {
            int at[kBatch];
            float wj[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                const int j = j0 + u;
                at[u] = j <= p.k ? pos[j] : 0;
                wj[u] = j < p.k ? p.topk_w[static_cast<int64_t>(r) * p.k + j] : j == p.k ? p.shared_w[r] : 0.0f;
            }
            Bf16x8 y[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u)
                if (j0 + u <= p.k) y[u] = *reinterpret_cast<const Bf16x8*>(p.yg + static_cast<int64_t>(at[u]) * p.H + h);
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                if (j0 + u > p.k) break;
#pragma unroll
                for (int c = 0; c < kVec / 2; ++c) {
                    const float2 f = y[u].f2(c);
                    total[2 * c] = fmaf(wj[u], f.x, total[2 * c]);
                    total[2 * c + 1] = fmaf(wj[u], f.y, total[2 * c + 1]);
                }
            }
        }
        if (p.out)
#pragma unroll
            for (int c = 0; c < kVec; ++c) p.out[row_at + c] = total[c];
        if (p.out_bf16) {
            if (p.accumulate)  // the fused residual add: fp32 sum, one bf16 rounding (moe::store_out)
#pragma unroll
                for (int c = 0; c < kVec; ++c) total[c] += old[c];
            store8(p.out_bf16 + row_at, total);
        }
    }
}

template <class T>
cudaError_t launch_gemms(const MoeBf16Params& p, cudaStream_t stream) {
    cudaError_t e = cudaFuncSetAttribute(moe_gate_up_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(moe_down_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::smem);
    if (e != cudaSuccess) return e;
    const int tiles = tile_capacity(p, T::BM);
    moe_gate_up_kernel<T><<<dim3(ceil_div(max_ffn(p), kActCols), tiles), T::threads, T::smem, stream>>>(p);
    moe_down_kernel<T><<<dim3(ceil_div(p.H, moe::kBN), tiles), T::threads, T::smem, stream>>>(p);
    return cudaGetLastError();
}

// The one dispatch of a tile shape (kMoeTileShapes, 1-based) to its instantiation.
cudaError_t launch_gemms(const MoeBf16Params& p, int shape, cudaStream_t stream) {
    using moe::Tile;
    switch (shape) {
        case 1: return launch_gemms<Tile<64>>(p, stream);
        case 2: return launch_gemms<Tile<128>>(p, stream);
        case 3: return launch_gemms<moe::WgTile>(p, stream);
        case 4: return moe::ws_gemms_launch(p, tile_capacity(p, moe::WsTile::BM), stream);
        case 5:
        case 6:
        case 7: return moe::tma_gemms_launch(p, tile_capacity(p, kMoeTileShapes[shape - 1].rows), shape, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace

MoePrefillScratch moe_prefill_scratch(const MoeBf16Params& p) {
    const size_t n = static_cast<size_t>(entries(p));
    // The table is sized for the smaller tile, which needs more of them.
    const size_t tiles = static_cast<size_t>(tile_capacity(p, 64));
    return {static_cast<size_t>(p.E) + 4, static_cast<size_t>(chunks(p)) * p.E, 1 + 2 * tiles, n, n,
            n * max_ffn(p), n * p.H};
}

bool moe_prefill_wgmma_supported() {
    static const bool supported = lm::device_runs_sm90a();
    return supported;
}

int moe_prefill_tile_rows(const MoeBf16Params& p) {
    const int shape = pick_tile_shape(p);
    return shape >= 1 && shape <= kMoeTileShapeCount ? kMoeTileShapes[shape - 1].rows : 0;
}

bool moe_prefill_reads_fp8(const MoeBf16Params& p) {
    const int shape = pick_tile_shape(p);
    return shape >= 5 && shape <= 7 && moe_prefill_wgmma_supported() && moe::tma_reads_fp8(p);  // the TMA-fed shapes
}

bool moe_prefill_w8a8_ok(const MoeBf16Params& p) {
    const int shape = pick_tile_shape(p);
    return (shape == 5 || shape == 6) && moe_prefill_wgmma_supported() && moe::tma_w8a8_ok(p);
}

size_t moe_w8a8_scratch_bytes(const MoeBf16Params& p) {
    const auto unit = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    const size_t rows = static_cast<size_t>(p.max_rows), n = static_cast<size_t>(entries(p));
    return unit(rows * p.H) + unit(sizeof(float) * act_scale_floats(p.max_rows, p.H)) + unit(n * p.I) +
           unit(sizeof(float) * act_scale_floats(static_cast<int32_t>(n), p.I));
}

namespace {
// The checks every prefill entry point makes; cudaSuccess when `shape` may run.
cudaError_t check_prefill(const MoeBf16Params& p, int shape) {
    // FP8 stacks the tile cannot take: the caller dequantizes instead.
    if (p.fp8 < 0 || p.fp8 > 2 || (p.fp8 == 1 && !moe_prefill_reads_fp8(p)) || (p.fp8 == 2 && !moe_prefill_w8a8_ok(p)))
        return cudaErrorInvalidValue;
    if (!valid(p) || (!p.out && !p.out_bf16) || !p.group_offsets || !p.chunk_base || !p.tile_table ||
        !p.entry_row || !p.entry_pos || !p.ag || !p.yg || p.H % 16 || p.I % 16 || p.Is % 16 || shape < 1 ||
        shape > kMoeTileShapeCount)
        return cudaErrorInvalidValue;
    if (kMoeTileShapes[shape - 1].wgmma && !moe_prefill_wgmma_supported()) return cudaErrorNotSupported;
    // 16-byte cp.async, TMA and vector accesses.
    if (!lm::aligned16(p.ag) || !lm::aligned16(p.yg) || (p.out_bf16 && !lm::aligned16(p.out_bf16)))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}
}  // namespace

cudaError_t moe_prefill_gemms_launch(const MoeBf16Params& p, cudaStream_t stream) {
    const int shape = pick_tile_shape(p);
    cudaError_t e = check_prefill(p, shape);
    // Without the scan before them, the work counters are zeroed here.
    if (e == cudaSuccess) e = cudaMemsetAsync(p.group_offsets + p.E + 2, 0, 2 * sizeof(int32_t), stream);
    return e != cudaSuccess ? e : launch_gemms(p, shape, stream);
}

cudaError_t moe_prefill_launch(const MoeBf16Params& p, cudaStream_t stream) {
    const int shape = pick_tile_shape(p);
    cudaError_t e = check_prefill(p, shape);
    if (e != cudaSuccess) return e;
    e = moe_prefill_router_launch(p, stream);
    if (e != cudaSuccess) return e;
    const int n_chunks = chunks(p);
    moe_count_kernel<<<n_chunks, kChunkThreads, sizeof(int32_t) * p.E, stream>>>(p);
    moe_scan_kernel<<<1, kScanThreads, sizeof(int32_t) * (p.E + 1), stream>>>(p, kMoeTileShapes[shape - 1].rows);
    moe_scatter_kernel<<<n_chunks, kChunkThreads, scatter_smem_bytes(p), stream>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    e = launch_gemms(p, shape, stream);
    if (e != cudaSuccess) return e;
    moe_combine_kernel<<<p.max_rows, 256, 0, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels
