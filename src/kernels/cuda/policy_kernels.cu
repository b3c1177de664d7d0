// CUDA fp32 kernels of the robot policy (a small MLP integrated by Euler steps). Each output is
// computed by one thread or one warp with a fixed reduction order, so results are deterministic
// across replays. Launchers return the launch's cudaError_t as an int and never exit.
#include "kernels/cuda/policy_kernels.h"

#include <cuda_runtime.h>

#include "kernels/cpu/policy_noise.h"

namespace frost::kernels {

namespace {

constexpr int kWarp = 32;
constexpr int kBlock = 256;               // threads per block for elementwise kernels
constexpr int kWarpsPerBlock = kBlock / kWarp;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kInvSqrt2 = 0.70710678118654752440f;

__device__ inline float act_scalar(float x, PolicyAct act) {
    switch (act) {
        case PolicyAct::silu: return x / (1.0f + expf(-x));
        case PolicyAct::gelu: return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
        case PolicyAct::none: break;
    }
    return x;
}

__device__ inline float warp_sum(float v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(kFullMask, v, off);
    return v;
}

int blocks_for(int64_t n, int per_block) { return static_cast<int>((n + per_block - 1) / per_block); }

// One warp per output element (rows * out): lanes stride over `in`, then a butterfly sum.
__global__ void linear_kernel(PolicyLinearParams p) {
    const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (warp >= static_cast<int64_t>(p.rows) * p.out) return;
    const int64_t r = warp / p.out;
    const int64_t o = warp % p.out;
    const float* xr = p.x + r * p.in;
    const float* wo = p.w + o * p.in;
    float acc = 0.0f;
    for (int i = lane; i < p.in; i += kWarp) acc += xr[i] * wo[i];
    acc = warp_sum(acc);
    if (lane == 0) {
        if (p.b) acc += p.b[o];
        p.y[r * p.out + o] = act_scalar(acc, p.act);
    }
}

// One block per row; the block sums squares through shared memory in a fixed tree.
__global__ void rmsnorm_kernel(PolicyRmsNormParams p) {
    __shared__ float partial[kWarpsPerBlock];
    const int64_t r = blockIdx.x;
    const float* xr = p.x + r * p.dim;
    float* yr = p.y + r * p.dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < p.dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = ss;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < kWarpsPerBlock; ++w) total += partial[w];
    const float inv = rsqrtf(total / static_cast<float>(p.dim) + p.eps);
    for (int i = threadIdx.x; i < p.dim; i += blockDim.x) yr[i] = xr[i] * inv * p.g[i];
}

__global__ void act_kernel(PolicyActParams p) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.x[i] = act_scalar(p.x[i], p.act);
}

__global__ void time_embed_kernel(PolicyTimeEmbedParams p) {
    const int half = p.dim / 2;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= half) return;
    const float freq = expf(-logf(p.max_period) * static_cast<float>(i) / static_cast<float>(half));
    const float arg = p.t * p.time_scale * freq;
    p.out[i] = sinf(arg);
    p.out[half + i] = cosf(arg);
}

__global__ void axpy_kernel(PolicyAxpyParams p) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.x[i] = fmaf(p.a, p.v[i], p.x[i]);
}

__global__ void noise_kernel(PolicyNoiseParams p) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.out[i] = p.scale * policy_noise_normal(p.rng[0], p.rng[1], static_cast<uint32_t>(i));
}

__global__ void counter_kernel(PolicyCounterParams p) { p.rng[1] += 1; }

int launched() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

int policy_linear_cuda(const PolicyLinearParams& p, void* stream) {
    const int64_t threads = static_cast<int64_t>(p.rows) * p.out * kWarp;
    if (threads == 0) return 0;
    linear_kernel<<<blocks_for(threads, kBlock), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

int policy_rmsnorm_cuda(const PolicyRmsNormParams& p, void* stream) {
    if (p.rows == 0) return 0;
    rmsnorm_kernel<<<p.rows, kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

int policy_act_cuda(const PolicyActParams& p, void* stream) {
    if (p.n == 0) return 0;
    act_kernel<<<blocks_for(p.n, kBlock), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

int policy_time_embed_cuda(const PolicyTimeEmbedParams& p, void* stream) {
    if (p.dim < 2) return 0;
    time_embed_kernel<<<blocks_for(p.dim / 2, kBlock), kBlock, 0,
                        static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

int policy_axpy_cuda(const PolicyAxpyParams& p, void* stream) {
    if (p.n == 0) return 0;
    axpy_kernel<<<blocks_for(p.n, kBlock), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

int policy_noise_cuda(const PolicyNoiseParams& p, void* stream) {
    if (p.n == 0) return 0;
    noise_kernel<<<blocks_for(p.n, kBlock), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

int policy_counter_cuda(const PolicyCounterParams& p, void* stream) {
    counter_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(p);
    return launched();
}

const char* policy_cuda_error_string(int err) {
    return cudaGetErrorString(static_cast<cudaError_t>(err));
}

}  // namespace frost::kernels
