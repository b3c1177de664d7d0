// The residual RMSNorm of one bf16 row with the bits of add_rmsnorm_kernel (lm_norm.cu), for
// kernels that fuse the norm into their prologue (the MoE router: lm_moe.cu). That kernel runs
// 256 threads per row; the sum of squares here follows its order in a block of any size.
#pragma once
#include "kernels/cuda/lm_common.cuh"

namespace frost::kernels::lm {

constexpr int kNormThreads = 256;
constexpr int kNormMaxVecPerThread = 4;  // dim <= 256 threads * 4 vectors * 8 = 8192

// rsqrt(mean(h^2) + eps) of row h (dim elements, a multiple of 8, at most 8192), summed as a
// 256-thread add_rmsnorm block sums it: thread t adds the squares of vectors t, t + 256, ... in
// order, each warp's sums meet in warp_sum's butterfly, then the 8 warp sums in warp order. In a
// block of blockDim threads (a multiple of 32 dividing 256) thread t stands in for the 256-thread
// block's threads t, t + blockDim, ... . scratch: 8 floats of shared memory. Every thread of the
// block calls it (two barriers); all get the same value.
__device__ inline float rms_scale_row(const bf16* h, int dim, float eps, float* scratch) {
    const int nvec = dim / kVec, lane = threadIdx.x % kWarp;
    for (int vt = static_cast<int>(threadIdx.x); vt < kNormThreads; vt += static_cast<int>(blockDim.x)) {
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < kNormMaxVecPerThread; ++j) {
            const int vi = vt + j * kNormThreads;
            if (vi >= nvec) continue;
            float v[kVec];
            load8(h + vi * kVec, v);
#pragma unroll
            for (int e = 0; e < kVec; ++e) ss += v[e] * v[e];
        }
        ss = warp_sum(ss);
        if (lane == 0) scratch[vt / kWarp] = ss;
    }
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < kNormThreads / kWarp; ++i) total += scratch[i];
    __syncthreads();  // scratch may be written again by the next call
    return rsqrtf(total / dim + eps);
}

// Vector vi (8 elements) of the normalised row as add_rmsnorm_kernel stores it: (h * rs) *
// (one + w) per element (one: 1 for the zero-centred weights, else 0), rounded to bf16 once.
__device__ inline uint4 rms_norm_vec(const bf16* h, const float* w, int vi, float rs, float one) {
    float v[kVec];
    load8(h + vi * kVec, v);
    Bf16x8 out;
#pragma unroll
    for (int i = 0; i < 4; ++i)
        out.h[i] = __floats2bfloat162_rn(v[2 * i] * rs * (one + w[vi * kVec + 2 * i]), v[2 * i + 1] * rs * (one + w[vi * kVec + 2 * i + 1]));
    return *reinterpret_cast<const uint4*>(&out);
}

}  // namespace frost::kernels::lm
