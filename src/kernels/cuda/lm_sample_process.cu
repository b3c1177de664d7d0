// The sampler's per-session processing on the device (kernels/params/sample.h steps 1-2), as the
// CPU reference (cpu/sample.cpp) does it: the step's input ids are marked seen (and a decode
// step's input counted), then the processed row q = f(l) is written for the sampler to read:
// logit_bias, repetition (HF), frequency / presence (OpenAI), the token mask. Every element runs
// the same float operations in the same order as the CPU, so q is bit-identical. Settings are
// read from device memory at run time: one captured graph serves every request.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kThreads = 256;
constexpr int kBiasThreads = 320;  // >= kMaxLogitBias

__device__ inline const float* raw_row(const SampleParams& p) {
    int row = 0;
    if (p.select_last_row) row = max((p.n_rows ? *p.n_rows : p.cursor->n_tokens) - 1, 0);
    return p.logits + static_cast<int64_t>(row) * p.row_stride;
}

__device__ inline bool bit(const uint32_t* w, int i) { return (w[i >> 5] >> (i & 31)) & 1u; }

// Repetition, penalties and mask of one element (after its bias), as cpu/sample.cpp process().
__device__ inline float shape(const SampleParams& p, const SamplerSettings& s, int i, float x) {
    const float rep = s.repetition_penalty;
    if (rep > 0.0f && rep != 1.0f && bit(p.seen, i)) x = x > 0.0f ? x / rep : x * rep;
    if (s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f) {
        const int32_t c = p.counts[i];
        if (c > 0) x -= s.frequency_penalty * static_cast<float>(c) + s.presence_penalty;
    }
    if (s.mask_on && !bit(p.mask, i)) x = -INFINITY;
    return x;
}

__global__ void __launch_bounds__(kThreads) prepare_kernel(SampleParams p) {
    const int rows = p.n_rows ? *p.n_rows : p.cursor->n_tokens;
    for (int r = threadIdx.x; r < rows; r += kThreads) {
        const int id = p.ids[r];
        if (id >= 0 && id < p.vocab) atomicOr(&p.seen[id >> 5], 1u << (id & 31));
    }
    if (threadIdx.x == 0 && p.count_inputs && p.ids[0] >= 0 && p.ids[0] < p.vocab) p.counts[p.ids[0]] += 1;
}

__global__ void __launch_bounds__(kThreads) process_kernel(SampleParams p, float* q) {
    const SamplerSettings& s = *p.settings;
    const float* l = raw_row(p);
    const int i = blockIdx.x * kThreads + threadIdx.x;
    if (i < p.vocab) q[i] = shape(p, s, i, l[i]);
}

// The biased ids (distinct: the engine merges repeats) are redone from the raw value.
__global__ void __launch_bounds__(kBiasThreads) bias_kernel(SampleParams p, float* q) {
    const SamplerSettings& s = *p.settings;
    const int b = threadIdx.x;
    if (b >= min(s.n_bias, kMaxLogitBias)) return;
    const int id = s.bias_ids[b];
    if (id < 0 || id >= p.vocab) return;
    q[id] = shape(p, s, id, raw_row(p)[id] + s.bias_values[b]);
}

}  // namespace

cudaError_t sample_process_launch(const SampleParams& p, float* processed, cudaStream_t stream) {
    if (!p.settings || !p.counts || !p.seen || !p.mask || !p.ids || !processed || p.vocab <= 0)
        return cudaErrorInvalidValue;
    prepare_kernel<<<1, kThreads, 0, stream>>>(p);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    process_kernel<<<ceil_div(p.vocab, kThreads), kThreads, 0, stream>>>(p, processed);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    bias_kernel<<<1, kBiasThreads, 0, stream>>>(p, processed);
    return cudaGetLastError();
}

}  // namespace frost::kernels
