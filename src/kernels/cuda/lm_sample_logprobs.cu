// The step's raw logprobs on the device (kernels/params/sample.h step 4), as the CPU reference
// writes them: log_softmax of the unprocessed row for the chosen token and the top N (N <= 20,
// ordered by (logit desc, id asc), NaN never listed). Two launches: per block of kPerBlock logits
// a running (max, sum of exp) and its own top N by N rounds of block argmax; then one block
// merging the partial sums (in block order) and the candidate lists by N more rounds. Only a
// SampleRecord (~180 bytes) is written; the host reads it with the token.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kThreads = 256;
constexpr int kPerThread = 16;
constexpr int kPerBlock = kThreads * kPerThread;
constexpr int kN = kMaxTopLogprobs;
// Per block in the work area: max, sum, then kN (value, id) pairs.
constexpr int kBlockFloats = 2 + 2 * kN;

struct Cand {
    float v;
    int i;
};

__device__ inline bool before(Cand a, Cand b) {
    if (b.i < 0) return a.i >= 0;
    if (a.i < 0) return false;
    return a.v > b.v || (a.v == b.v && a.i < b.i);
}

__device__ inline Cand block_best(Cand c, Cand* scratch) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) {
        Cand o{__shfl_xor_sync(kFullMask, c.v, off), __shfl_xor_sync(kFullMask, c.i, off)};
        if (before(o, c)) c = o;
    }
    __syncthreads();  // scratch may still be read from the previous round
    if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = c;
    __syncthreads();
    Cand r{0.0f, -1};
    for (int w = 0; w < kThreads / kWarp; ++w)
        if (before(scratch[w], r)) r = scratch[w];
    return r;
}

__device__ inline int wanted(const SampleParams& p) {
    const int l = p.settings ? p.settings->logprobs : 0;
    return l <= 0 ? 0 : min(min(l - 1, kN), p.vocab);
}

__device__ inline const float* raw_row(const SampleParams& p) {
    int row = 0;
    if (p.select_last_row) row = max((p.n_rows ? *p.n_rows : p.cursor->n_tokens) - 1, 0);
    return p.logits + static_cast<int64_t>(row) * p.row_stride;
}

__global__ void __launch_bounds__(kThreads) logprob_partial_kernel(SampleParams p, float* work) {
    __shared__ Cand scratch[kThreads / kWarp];
    __shared__ float red[kThreads / kWarp];
    if (!p.settings || p.settings->logprobs <= 0) return;
    const int n = wanted(p);
    const float* x = raw_row(p);
    float v[kPerThread];
    float mx = -INFINITY;
    const int base = blockIdx.x * kPerBlock;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
        const int i = base + j * kThreads + threadIdx.x;
        v[j] = i < p.vocab ? x[i] : NAN;
        if (v[j] == v[j]) mx = fmaxf(mx, v[j]);
    }
    // Block max, then the block's sum of exp(l - max).
    mx = warp_max(mx);
    if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = mx;
    __syncthreads();
    float bmx = -INFINITY;
    for (int w = 0; w < kThreads / kWarp; ++w) bmx = fmaxf(bmx, red[w]);
    __syncthreads();
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
        if (v[j] == v[j] && bmx > -INFINITY) sum += expf(v[j] - bmx);
    sum = warp_sum(sum);
    if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = sum;
    __syncthreads();
    float* out = work + static_cast<size_t>(blockIdx.x) * kBlockFloats;
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int w = 0; w < kThreads / kWarp; ++w) s += red[w];
        out[0] = bmx;
        out[1] = s;
    }
    // The block's top n: n rounds of block argmax, the winner's owner retiring it.
    unsigned taken = 0;
    for (int k = 0; k < n; ++k) {
        Cand c{0.0f, -1};
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
            const int i = base + j * kThreads + threadIdx.x;
            if (!(taken >> j & 1u) && v[j] == v[j] && i < p.vocab && before(Cand{v[j], i}, c)) c = Cand{v[j], i};
        }
        const Cand b = block_best(c, scratch);
        if (b.i >= 0 && (b.i - base) % kThreads == static_cast<int>(threadIdx.x)) taken |= 1u << ((b.i - base) / kThreads);
        if (threadIdx.x == 0) {
            out[2 + 2 * k] = b.v;
            reinterpret_cast<int*>(out)[3 + 2 * k] = b.i;
        }
    }
}

__global__ void __launch_bounds__(kThreads) logprob_final_kernel(SampleParams p, float* work, int blocks) {
    __shared__ Cand scratch[kThreads / kWarp];
    __shared__ float lse_s;
    SampleRecord& r = *p.record;
    const int token = *p.out_token;
    if (!p.settings || p.settings->logprobs <= 0) {
        if (threadIdx.x == 0) {
            r.token = token;
            r.logprob = 0.0f;
            r.n_top = 0;
        }
        return;
    }
    const int n = wanted(p);
    if (threadIdx.x == 0) {  // partial sums merged in block order
        float mx = -INFINITY;
        for (int b = 0; b < blocks; ++b) mx = fmaxf(mx, work[b * kBlockFloats]);
        double s = 0.0;
        for (int b = 0; b < blocks; ++b) {
            const float bm = work[b * kBlockFloats];
            if (bm > -INFINITY) s += static_cast<double>(work[b * kBlockFloats + 1]) * exp(static_cast<double>(bm) - mx);
        }
        lse_s = static_cast<float>(static_cast<double>(mx) + log(s));
    }
    __syncthreads();
    const float lse = lse_s;
    const int cands = blocks * n;
    // Taken flags live in the candidates' id slots (set to -1 once listed).
    for (int k = 0; k < n; ++k) {
        Cand c{0.0f, -1};
        int at = -1;
        for (int j = threadIdx.x; j < cands; j += kThreads) {
            const float* e = work + (j / n) * kBlockFloats + 2 + 2 * (j % n);
            const Cand o{e[0], reinterpret_cast<const int*>(e)[1]};
            if (before(o, c)) {
                c = o;
                at = j;
            }
        }
        const Cand b = block_best(c, scratch);
        if (b.i >= 0 && at >= 0 && c.i == b.i) {
            float* e = work + (at / n) * kBlockFloats + 2 + 2 * (at % n);
            reinterpret_cast<int*>(e)[1] = -1;
        }
        if (threadIdx.x == 0) {
            r.top_ids[k] = b.i < 0 ? 0 : b.i;
            r.top_logprobs[k] = b.v - lse;
        }
        __syncthreads();  // the retired candidate is visible before the next round
    }
    if (threadIdx.x == 0) {
        r.token = token;
        r.n_top = n;
        r.logprob = raw_row(p)[token] - lse;
    }
}

}  // namespace

size_t sample_logprob_work_floats(int vocab) { return static_cast<size_t>(ceil_div(vocab, kPerBlock)) * kBlockFloats; }

cudaError_t sample_logprobs_launch(const SampleParams& p, float* work, cudaStream_t stream) {
    if (!p.record || !p.out_token || !work || p.vocab <= 0) return cudaErrorInvalidValue;
    const int blocks = ceil_div(p.vocab, kPerBlock);
    logprob_partial_kernel<<<blocks, kThreads, 0, stream>>>(p, work);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    logprob_final_kernel<<<1, kThreads, 0, stream>>>(p, work, blocks);
    return cudaGetLastError();
}

}  // namespace frost::kernels
