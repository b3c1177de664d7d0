// Greedy sampling on the device: argmax of one logits row in two launches (per-block partials,
// then one block merging them in block order). Ties go to the lowest index and NaN never wins,
// so the token is a pure function of the logits. The winner lands in *out_token and
// cursor->last_token, where the next decode step reads its input.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kThreads = 256;
constexpr int kPerThread = 16;  // logits scanned per thread in the first pass
constexpr int kPerBlock = kThreads * kPerThread;

struct Best {
    float v;
    int i;
};

__device__ inline Best better(Best a, Best b) {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
    return a;
}

__device__ inline Best block_best(Best b, Best* scratch) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) {
        Best o{__shfl_xor_sync(kFullMask, b.v, off), __shfl_xor_sync(kFullMask, b.i, off)};
        b = better(b, o);
    }
    if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = b;
    __syncthreads();
    Best r{0.0f, -1};
    for (int w = 0; w < kThreads / kWarp; ++w) r = better(r, scratch[w]);
    return r;
}

__device__ inline const float* selected_row(const SampleArgmaxParams& p) {
    int row = 0;
    if (p.select_last_row) row = max((p.n_rows ? *p.n_rows : p.cursor->n_tokens) - 1, 0);
    return p.logits + row * p.row_stride;
}

__global__ void __launch_bounds__(kThreads) argmax_partial_kernel(SampleArgmaxParams p) {
    __shared__ Best scratch[kThreads / kWarp];
    const float* x = selected_row(p);
    Best b{0.0f, -1};
    const int base = blockIdx.x * kPerBlock;
    for (int j = 0; j < kPerThread; ++j) {
        const int i = base + j * kThreads + threadIdx.x;
        if (i < p.vocab) {
            const float v = x[i];
            if (v == v) b = better(b, Best{v, i});  // NaN never wins
        }
    }
    b = block_best(b, &scratch[0]);
    if (threadIdx.x == 0) {
        p.work[2 * blockIdx.x] = b.v;
        reinterpret_cast<int*>(p.work)[2 * blockIdx.x + 1] = b.i;
    }
}

__global__ void __launch_bounds__(kThreads) argmax_final_kernel(SampleArgmaxParams p, int blocks) {
    __shared__ Best scratch[kThreads / kWarp];
    Best b{0.0f, -1};
    for (int j = threadIdx.x; j < blocks; j += kThreads) {
        b = better(b, Best{p.work[2 * j], reinterpret_cast<const int*>(p.work)[2 * j + 1]});
    }
    b = block_best(b, &scratch[0]);
    if (p.only_when_greedy && !(p.cursor->sample_mode == kSampleGreedy || !(p.cursor->temperature > 0.0f))) return;
    if (threadIdx.x == 0) {
        const int token = b.i < 0 ? 0 : b.i;  // all-NaN row: token 0, never an out-of-range id
        *p.out_token = token;
        if (p.cursor) p.cursor->last_token = token;
    }
}

}  // namespace

int sample_argmax_blocks(int vocab) { return ceil_div(vocab, kPerBlock); }

cudaError_t sample_argmax_launch(const SampleArgmaxParams& p, cudaStream_t stream) {
    if (!p.logits || !p.work || !p.out_token || p.vocab <= 0 || (p.select_last_row && !p.n_rows && !p.cursor) ||
        (p.only_when_greedy && !p.cursor))
        return cudaErrorInvalidValue;
    const int blocks = sample_argmax_blocks(p.vocab);
    argmax_partial_kernel<<<blocks, kThreads, 0, stream>>>(p);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    argmax_final_kernel<<<1, kThreads, 0, stream>>>(p, blocks);
    return cudaGetLastError();
}

KernelCost sample_argmax_cost(const SampleArgmaxParams& p) {
    return {static_cast<double>(p.vocab) * sizeof(float), static_cast<double>(p.vocab)};
}

}  // namespace frost::kernels
