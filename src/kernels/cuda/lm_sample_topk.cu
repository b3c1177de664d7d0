// Device sampling with the cursor's mode, following the CPU sampler (cpu/sample.cpp) step by step:
// greedy → the lowest index of the maximum (argmax launches of lm_sample.cu); random → candidates
// ordered by (logit desc, index asc) and truncated to top_k, weights exp((l − max)/T) summed in
// candidate order, the top-p prefix, u = rng_uniform(seed, counter) · kept weight, the first
// candidate whose running weight exceeds u, counter + 1. The top-k candidates are found exactly by
// bitonic sorts of 4096-element tiles keeping each tile's best kSampleMaxTopK, merged 16 lists at a
// time. Exact (same draw, same token) for 0 < top_k <= kSampleMaxTopK; top_k = 0 (no truncation)
// is served as top_k = kSampleMaxTopK, since the tail beyond it cannot be ordered cheaply here.
// The weights use exp in double rounded to float, which agrees with the CPU's expf except where
// that is off by an ulp.
//
// In greedy mode the top-k launches exit at once, yet they cost a step 7-11 us (a probe that
// skipped them: 0.8B decode @1k 1.000 -> 0.993 ms/token, 9B FP8 3.964 -> 3.953; H100 2026-11-25).
// Chaining every sampler launch and the cursor advance by programmatic dependent launch did not
// recover it (0.8B 0.997-1.002 -> 0.994-1.002, 9B FP8 3.956-3.963 -> 3.950-3.967, alternating):
// dropped. Nor did a graph conditional (IF) node around the top-k launches, opened by the argmax's
// final block for a non-greedy cursor (kernel nodes in its body; the sampler tests passed, captured
// and launched): 0.8B 0.994-0.998 -> 0.996-1.000, 9B FP8 3.958-3.979 -> 3.972-3.985, 0.8B batched
// B = 8 1.413 -> 1.428 ms/token. The node costs about what the launches it skips do.
#include <climits>
#include <utility>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kK = kSampleMaxTopK;
constexpr int kTile = 4096;
constexpr int kSortThreads = 1024;
constexpr int kMergeFan = kTile / kK;  // lists merged per block

struct Cand {
    float v;
    int i;
};

__device__ inline bool before(Cand a, Cand b) { return a.v > b.v || (a.v == b.v && a.i < b.i); }

__device__ inline bool greedy(const StepCursor* c) { return c->sample_mode == kSampleGreedy || !(c->temperature > 0.0f); }

// SplitMix64 finaliser and the uniform draw, bit for bit as cpu/kernels.h defines them.
__device__ inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
__device__ inline float rng_uniform(uint64_t seed, uint64_t counter) {
    const uint64_t r = splitmix64(seed ^ splitmix64(counter));
    return static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
}

__device__ inline const float* selected_row(const SampleParams& p) {
    int row = 0;
    if (p.select_last_row) row = max((p.n_rows ? *p.n_rows : p.cursor->n_tokens) - 1, 0);
    return p.logits + row * p.row_stride;
}

// Sorts one tile of candidates by `before` in shared memory and writes its best kK.
// raw: the tile is logits [b*kTile, ...); else it is kMergeFan lists of kK candidates.
__global__ void __launch_bounds__(kSortThreads) topk_tile_kernel(SampleParams p, const Cand* in, int in_lists,
                                                                 Cand* out, int raw) {
    __shared__ Cand c[kTile];
    if (greedy(p.cursor)) return;
    const float* x = raw ? selected_row(p) : nullptr;
    for (int e = threadIdx.x; e < kTile; e += kSortThreads) {
        Cand v{-INFINITY, INT_MAX};
        if (raw) {
            const int i = blockIdx.x * kTile + e;
            if (i < p.vocab) v = Cand{x[i] == x[i] ? x[i] : -INFINITY, i};
        } else {
            const int list = blockIdx.x * kMergeFan + e / kK;
            if (list < in_lists) v = in[list * kK + e % kK];
        }
        c[e] = v;
    }
    __syncthreads();
    for (int k = 2; k <= kTile; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < kTile; i += kSortThreads) {
                const int ixj = i ^ j;
                if (ixj <= i) continue;
                const bool up = (i & k) == 0;
                const Cand a = c[i], b = c[ixj];
                if (up ? before(b, a) : before(a, b)) {
                    c[i] = b;
                    c[ixj] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int e = threadIdx.x; e < kK; e += kSortThreads) out[blockIdx.x * kK + e] = c[e];
}

// The CPU sampler's sequential weight sums over the sorted candidates: the weights are computed
// in parallel (one per thread), the running sums stay sequential in thread 0, in candidate order.
__global__ void __launch_bounds__(kK) topk_pick_kernel(SampleParams p, const Cand* cand) {
    __shared__ float w[kK];
    StepCursor& cur = *p.cursor;
    if (greedy(&cur)) return;
    int n = cur.top_k > 0 ? min(cur.top_k, p.vocab) : p.vocab;
    n = min(n, kK);
    const float mx = cand[0].v;
    const float inv_t = 1.0f / cur.temperature;
    const int i = threadIdx.x;
    if (i < n) w[i] = static_cast<float>(exp(static_cast<double>((cand[i].v - mx) * inv_t)));
    __syncthreads();
    if (i != 0) return;
    const float min_p = p.settings ? p.settings->min_p : 0.0f;
    if (min_p > 0.0f) {  // the candidates are ordered: min_p keeps a prefix (the best has weight 1)
        int keep = 1;
        while (keep < n && w[keep] >= min_p) ++keep;
        n = keep;
    }
    float total = 0.0f;
    for (int j = 0; j < n; ++j) total += w[j];
    int kept = n;
    float kept_total = total;
    if (cur.top_p < 1.0f) {
        const float target = cur.top_p * total;
        float cum = 0.0f;
        for (int j = 0; j < n; ++j) {
            cum += w[j];
            if (cum >= target) {
                kept = j + 1;
                kept_total = cum;
                break;
            }
        }
    }
    const float u = rng_uniform(cur.rng_seed, cur.rng_counter) * kept_total;
    cur.rng_counter += 1;
    int token = cand[kept - 1].i;
    float cum = 0.0f;
    for (int j = 0; j < kept; ++j) {
        cum += w[j];
        if (cum > u) {
            token = cand[j].i;
            break;
        }
    }
    cur.last_token = token;
    *p.out_token = token;
}

int tiles(int vocab) { return ceil_div(vocab, kTile); }

}  // namespace

static cudaError_t sample_core_launch(const SampleParams& p, cudaStream_t stream);

// Work area: [candidate lists, two regions | argmax partials | processed row (vocab) | logprob partials].
static size_t sampler_core_floats(int vocab) {
    const int t = tiles(vocab);
    return static_cast<size_t>(2) * kK * (t + ceil_div(t, kMergeFan)) + 2 * sample_argmax_blocks(vocab);
}

size_t sample_work_floats(int vocab) {
    return sampler_core_floats(vocab) + static_cast<size_t>(vocab) + sample_logprob_work_floats(vocab);
}

// Processing (settings) -> sampling over the processed row -> logprobs of the raw row (record).
cudaError_t sample_launch(const SampleParams& raw, cudaStream_t stream) {
    if (!raw.logits || !raw.work || !raw.cursor || !raw.out_token || raw.vocab <= 0) return cudaErrorInvalidValue;
    float* processed = raw.work + sampler_core_floats(raw.vocab);
    float* lp_work = processed + raw.vocab;
    SampleParams p = raw;
    cudaError_t err;
    if (raw.settings) {
        if ((err = sample_process_launch(raw, processed, stream)) != cudaSuccess) return err;
        p.logits = processed;
        p.row_stride = raw.vocab;
        p.select_last_row = 0;
    }
    if ((err = sample_core_launch(p, stream)) != cudaSuccess) return err;
    return raw.record ? sample_logprobs_launch(raw, lp_work, stream) : cudaSuccess;
}

static cudaError_t sample_core_launch(const SampleParams& p, cudaStream_t stream) {
    // Greedy: the argmax launches, which write the token only in greedy mode.
    const int t = tiles(p.vocab);
    Cand* region_a = reinterpret_cast<Cand*>(p.work);
    Cand* region_b = region_a + static_cast<size_t>(kK) * t;
    float* argmax_work = reinterpret_cast<float*>(region_b + static_cast<size_t>(kK) * ceil_div(t, kMergeFan));
    SampleArgmaxParams ap{p.logits, p.row_stride, p.vocab, p.select_last_row, p.n_rows, argmax_work,
                          p.cursor, p.out_token, 1};
    cudaError_t err = sample_argmax_launch(ap, stream);
    if (err != cudaSuccess) return err;
    topk_tile_kernel<<<t, kSortThreads, 0, stream>>>(p, nullptr, 0, region_a, 1);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    Cand* src = region_a;
    Cand* dst = region_b;
    for (int lists = t; lists > 1; lists = ceil_div(lists, kMergeFan)) {
        topk_tile_kernel<<<ceil_div(lists, kMergeFan), kSortThreads, 0, stream>>>(p, src, lists, dst, 0);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        std::swap(src, dst);
    }
    topk_pick_kernel<<<1, kK, 0, stream>>>(p, src);
    return cudaGetLastError();
}

}  // namespace frost::kernels
