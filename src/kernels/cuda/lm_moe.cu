// Sparse MoE MLP on the GPU (lm_moe.h): a router kernel (one block per row: fp32 logits of
// every expert and of the shared expert's gate, fp32 softmax, top-k by k block arg-max passes);
// decode: an expert GEMV pair that reads the selected expert ids from device memory (gate/up:
// one warp per FFN row of each selected expert; down: one warp per output element, summing the
// selected experts then the shared one). Prefill is lm_moe_prefill.cu. Every reduction has a
// fixed order.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_common.cuh"

namespace frost::kernels {
namespace {

using namespace lm;

constexpr int kRouterThreads = 256;
constexpr int kGemvWarps = 8;  // warps per block of the expert GEMVs (one output each)

using moe::aligned16;
using moe::store_out;
using moe::valid;

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


}  // namespace

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
