// The MoE router for prefill chunks (lm_moe.h, moe_prefill_router_launch). The decode router
// (lm_moe.cu) gives each row one block that streams the whole [E, H] router matrix: fine for a
// token, but a 16k-row chunk would re-read it 16k times (16 GB through L2 at the 35B-A3B shape).
// Here the logits are one tensor-core GEMM over all rows (the grouped GEMM's tile, one group),
// then a warp per row does the fp32 softmax, the top-k (ties: lower id first), the optional
// renormalisation and the shared expert's sigmoid gate: the same function as params/moe.h, with
// the logits summed in another fixed order (bitwise deterministic, not bitwise equal to decode).
// Tried: splitting the logits GEMM over K into fp32 partials (4k rows are only 128 tiles of K 2048)
// made it slower on the H100 (4k rows 52 -> 79 us, 16k 179 -> 252 us: the partials' traffic), so it
// stays one pass. ncu (H200, 4k rows) put the logits and the select at 26.5 us each with 64-row
// logits tiles (one block per SM) and a select that held 32 values a lane whatever E. Now: 32-row
// tiles (two blocks per SM) and a select templated on ceil(E / 32) rounded up to a power of two (8
// for 256 experts): bench_moe_prefill router_tc 1k / 4k / 16k rows 0.035 / 0.050-0.051 /
// 0.171-0.173 -> 0.026 / 0.043 / 0.145-0.147 ms (H200, 2026-12-01, two rounds), the same bits by
// construction (each logit's K order does not depend on the tile's rows; the seed-7717 engine
// parity run printed identical errors with both). Measured and dropped: eight cp.async stages
// instead of three (one 197 KB block per SM): 4k unchanged, 16k 0.171 -> 0.191 ms.
// The engine does not run these logits tiles: its MoE op computes the logits as a dense cuBLASLt
// GEMM (ops/cuda/cuda_ops.cpp, moe) into scratch and sets MoeBf16Params::logits, so the router starts
// at the select. ncu (H200, 4096 rows) timed the tiles at 31 us, the 256 KB router matrix re-read
// by every 32-row tile; benches and kernel tests still run them through moe_prefill_launch.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_common.cuh"
#include "kernels/cuda/lm_moe_gemm.cuh"

namespace frost::kernels {
namespace {

using namespace lm;

// 32 rows x 128 experts, K 64 per stage: two blocks per SM (64-row tiles were one; see the header).
using LogitTile = moe::Tile<32>;
constexpr int kSelectWarps = 8;  // rows per select block

// grid: (ceil(E / 128), ceil(max_rows / BM)). probs[r, e] = x_r · router_e (fp32 logits; the
// select kernel turns them into probabilities in place).
__global__ void __launch_bounds__(LogitTile::threads, 2) moe_logits_kernel(MoeBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int rows = launch_rows(p.n_rows, p.max_rows), row0 = blockIdx.y * LogitTile::BM, n0 = blockIdx.x * moe::kBN;
    if (row0 >= rows) return;
    const bf16** tile_rows = moe::gemm_rows(smem_raw);
    for (int i = threadIdx.x; i < LogitTile::BM + moe::kBN; i += blockDim.x) {
        const int r = row0 + i, e = n0 + i - LogitTile::BM;
        if (i < LogitTile::BM) tile_rows[i] = r < rows ? p.x + static_cast<int64_t>(r) * p.H : nullptr;
        else tile_rows[i] = e < p.E ? p.router + static_cast<int64_t>(e) * p.H : nullptr;
    }
    __syncthreads();
    LogitTile::Acc acc{};
    moe::tile_run<LogitTile>(acc, p.H, p.router, smem_raw);
    LogitTile::visit(acc, [&](int r, int c, float v0, float v1) {
        const int row = row0 + r, e = n0 + c;
        float* out = p.probs + static_cast<int64_t>(row) * p.E + e;
        if (row < rows && e < p.E) out[0] = v0;
        if (row < rows && e + 1 < p.E) out[1] = v1;
    });
}

// grid: ceil(max_rows / 8) blocks of 8 warps, one row each. Lane l holds experts l, l + 32, ...
// (kPerLane of them: ceil(E / 32) rounded up to a power of two).
template <int kPerLane>
__global__ void moe_select_kernel(MoeBf16Params p) {
    const int lane = threadIdx.x % kWarp;
    const int r = blockIdx.x * kSelectWarps + threadIdx.x / kWarp;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;  // warp-uniform
    float* probs = p.probs + static_cast<int64_t>(r) * p.E;
    const float* logit = p.logits ? p.logits + static_cast<int64_t>(r) * p.E : probs;
    float v[kPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + kWarp * i;
        v[i] = e < p.E ? logit[e] : -INFINITY;
        mx = fmaxf(mx, v[i]);
    }
    mx = warp_max(mx);
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        v[i] = lane + kWarp * i < p.E ? expf(v[i] - mx) : 0.0f;
        part += v[i];
    }
    const float sum = warp_sum(part);  // fixed butterfly order
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + kWarp * i;
        if (e < p.E) {
            v[i] /= sum;
            probs[e] = v[i];
        } else {
            v[i] = -2.0f;  // never selectable (taken ones are -1, probabilities >= 0)
        }
    }
    // k arg-max passes over (probability desc, id asc); lane j keeps the j-th pick.
    float mine = 0.0f;
    int mine_id = 0;
    for (int j = 0; j < p.k; ++j) {
        float best = -2.0f;
        int idx = kMoeMaxExperts;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
            if (v[i] > best) {  // ascending id per lane: the first of equal values wins
                best = v[i];
                idx = lane + kWarp * i;
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
        if (lane == j) {
            mine = best;
            mine_id = idx;
        }
        if (idx % kWarp == lane)
#pragma unroll
            for (int i = 0; i < kPerLane; ++i)
                if (i == idx / kWarp) v[i] = -1.0f;
    }
    float s = 0.0f;  // in slot order, as the decode router
    for (int j = 0; j < p.k; ++j) s += __shfl_sync(kFullMask, mine, j);
    if (lane < p.k) {
        p.topk_ids[static_cast<int64_t>(r) * p.k + lane] = mine_id;
        p.topk_w[static_cast<int64_t>(r) * p.k + lane] = p.norm_topk ? mine / s : mine;
    }
    // The shared expert's gate: sigmoid(shared_gate · x_r), 8 columns per lane. (ncu, H200, 4096
    // rows: this kernel 14.5 us; unrolling this loop by 4 left it there. Issuing all of a lane's
    // x and gate loads at the kernel's start, under the softmax and top-k, was slower (H200,
    // 2026-12-02, the same bits: `bench_moe_prefill` router_tc 4096 / 16384 rows 0.043 / 0.148 ->
    // 0.051 / 0.195 ms; engine 35B-A3B 4k 27.95-28.16 -> 28.36-28.49 ms, in one binary with the
    // scan change lm_moe_prefill.cu records as flat): most likely the 16 more 16-byte values per
    // lane, live through the whole kernel, cost it resident warps.)
    const bf16* x = p.x + static_cast<int64_t>(r) * p.H;
    float dot = 0.0f;
    for (int c = lane * kVec; c < p.H; c += kWarp * kVec) {
        float a[kVec], b[kVec];
        load8(p.shared_gate + c, a);
        load8(x + c, b);
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot = fmaf(a[i], b[i], dot);
    }
    dot = warp_sum(dot);
    if (lane == 0) p.shared_w[r] = sigmoid(dot);
}

cudaError_t logits(const MoeBf16Params& p, cudaStream_t stream) {
    constexpr size_t smem = LogitTile::smem;
    const cudaError_t e = cudaFuncSetAttribute(moe_logits_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    moe_logits_kernel<<<dim3(ceil_div(p.E, moe::kBN), ceil_div(p.max_rows, LogitTile::BM)), LogitTile::threads, smem,
                        stream>>>(p);
    return cudaGetLastError();
}

}  // namespace

cudaError_t moe_prefill_router_launch(const MoeBf16Params& p, cudaStream_t stream) {
    static_assert(kMoeMaxTopK <= kWarp, "lane j keeps pick j");
    if (!moe::valid(p)) return cudaErrorInvalidValue;
    const cudaError_t e = p.logits ? cudaSuccess : logits(p, stream);
    if (e != cudaSuccess) return e;
    const int per_lane = ceil_div(p.E, kWarp);
    const dim3 grid(ceil_div(p.max_rows, kSelectWarps)), block(kSelectWarps * kWarp);
    if (per_lane <= 1) moe_select_kernel<1><<<grid, block, 0, stream>>>(p);
    else if (per_lane <= 2) moe_select_kernel<2><<<grid, block, 0, stream>>>(p);
    else if (per_lane <= 4) moe_select_kernel<4><<<grid, block, 0, stream>>>(p);
    else if (per_lane <= 8) moe_select_kernel<8><<<grid, block, 0, stream>>>(p);
    else if (per_lane <= 16) moe_select_kernel<16><<<grid, block, 0, stream>>>(p);
    else moe_select_kernel<kMoeMaxExperts / kWarp><<<grid, block, 0, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels
