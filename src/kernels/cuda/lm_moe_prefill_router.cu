// The MoE router for prefill chunks (lm_moe.h, moe_prefill_router_launch). The decode router
// (lm_moe.cu) gives each row one block that streams the whole [E, H] router matrix: fine for a
// token, but a 16k-row chunk would re-read it 16k times (16 GB through L2 at the 35B-A3B shape).
// Here the logits are one tensor-core GEMM over all rows (the grouped GEMM's tile, one group),
// then a warp per row does the fp32 softmax, the top-k (ties: lower id first), the optional
// renormalisation and the shared expert's sigmoid gate: the same function as params/moe.h, with
// the logits summed in another fixed order (bitwise deterministic, not bitwise equal to decode).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_common.cuh"
#include "kernels/cuda/lm_moe_gemm.cuh"

namespace frost::kernels {
namespace {

using namespace lm;

using LogitTile = moe::Tile<64>;  // 64 rows x 128 experts, K 64 per stage
constexpr int kSelectWarps = 8; // rows per select block
constexpr int kPerLane = kMoeMaxExperts / kWarp;  // expert values a lane holds
constexpr int kMaxSplits = 8;                       // K slices of the logits GEMM

// grid: (ceil(E / 128), ceil(max_rows / 64), splits). Split z sums K columns [z ks, (z + 1) ks)
// of probs[r, e] = x_r · router_e (fp32 logits; the select kernel turns them into probabilities in
// place): into probs itself when splits is 1, else into partial z of `part` ([splits, max_rows,
// E], summed by the select kernel in split order, so the bits do not depend on scheduling). The
// splits fill the GPU: a 4k-row chunk of the 35B-A3B shape is only 128 tiles of K 2048.
__global__ void __launch_bounds__(LogitTile::threads, 2) moe_logits_kernel(MoeBf16Params p, float* part, int ks) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int rows = launch_rows(p.n_rows, p.max_rows), row0 = blockIdx.y * LogitTile::BM, n0 = blockIdx.x * moe::kBN;
    if (row0 >= rows) return;
    const int k0 = blockIdx.z * ks, K = min(ks, p.H - k0);
    const bf16** tile_rows = moe::gemm_rows(smem_raw);
    for (int i = threadIdx.x; i < LogitTile::BM + moe::kBN; i += blockDim.x) {
        const int r = row0 + i, e = n0 + i - LogitTile::BM;
        if (i < LogitTile::BM) tile_rows[i] = r < rows ? p.x + static_cast<int64_t>(r) * p.H + k0 : nullptr;
        else tile_rows[i] = e < p.E ? p.router + static_cast<int64_t>(e) * p.H + k0 : nullptr;
    }
    __syncthreads();
    LogitTile::Acc acc{};
    moe::tile_run<LogitTile>(acc, K, p.router, smem_raw);
    float* dst = part ? part + static_cast<int64_t>(blockIdx.z) * p.max_rows * p.E : p.probs;
    LogitTile::visit(acc, [&](int r, int c, float v0, float v1) {
        const int row = row0 + r, e = n0 + c;
        float* out = dst + static_cast<int64_t>(row) * p.E + e;
        if (row < rows && e < p.E) out[0] = v0;
        if (row < rows && e + 1 < p.E) out[1] = v1;
    });
}

// grid: ceil(max_rows / 8) blocks of 8 warps, one row each. Lane l holds experts l, l + 32, ...
// The logits: probs, or the sum of the `splits` partials in `partials` in split order.
__global__ void moe_select_kernel(MoeBf16Params p, const float* partials, int splits) {
    const int lane = threadIdx.x % kWarp;
    const int r = blockIdx.x * kSelectWarps + threadIdx.x / kWarp;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;  // warp-uniform
    float* probs = p.probs + static_cast<int64_t>(r) * p.E;
    float v[kPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + kWarp * i;
        if (e < p.E && partials) {
            float sum = 0.0f;
            for (int z = 0; z < splits; ++z) sum += partials[(static_cast<int64_t>(z) * p.max_rows + r) * p.E + e];
            v[i] = sum;
        } else {
            v[i] = e < p.E ? probs[e] : -INFINITY;
        }
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
    // The shared expert's gate: sigmoid(shared_gate · x_r), 8 columns per lane.
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

}  // namespace

cudaError_t moe_prefill_router_launch(const MoeBf16Params& p, cudaStream_t stream) {
    static_assert(kMoeMaxTopK <= kWarp, "lane j keeps pick j");
    if (!moe::valid(p)) return cudaErrorInvalidValue;
    constexpr size_t smem = LogitTile::smem;
    const cudaError_t e = cudaFuncSetAttribute(moe_logits_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    // K splits: enough blocks for ~2 waves of 132 SMs x 2, slices of whole 64-column stages, as many
    // partials as p.ag holds (free until the gate|up GEMM; without it, one split into probs).
    const int tiles = ceil_div(p.E, moe::kBN) * ceil_div(p.max_rows, LogitTile::BM);
    const size_t ag_bytes = static_cast<size_t>(p.max_rows) * (p.k + 1) * (p.I > p.Is ? p.I : p.Is) * sizeof(bf16);
    const size_t part_bytes = static_cast<size_t>(p.max_rows) * p.E * sizeof(float);
    int splits = p.ag && moe::aligned16(p.ag) ? std::min<int>({kMaxSplits, ceil_div(528, tiles), ceil_div(p.H, LogitTile::BK),
                                       static_cast<int>(ag_bytes / part_bytes)})
                      : 1;
    if (splits < 2) splits = 1;
    const int ks = ceil_div(ceil_div(p.H, splits), LogitTile::BK) * LogitTile::BK;
    splits = ceil_div(p.H, ks);
    float* part = splits > 1 ? reinterpret_cast<float*>(p.ag) : nullptr;
    moe_logits_kernel<<<dim3(ceil_div(p.E, moe::kBN), ceil_div(p.max_rows, LogitTile::BM), splits), LogitTile::threads,
                        smem, stream>>>(p, part, ks);
    moe_select_kernel<<<ceil_div(p.max_rows, kSelectWarps), kSelectWarps * kWarp, 0, stream>>>(p, part, splits);
    return cudaGetLastError();
}

}  // namespace frost::kernels
