// Device sampling with the cursor's mode, following the CPU sampler (cpu/sample.cpp) step by step:
// greedy → the lowest index of the maximum (argmax launches of lm_sample.cu); random → candidates
// ordered by (logit desc, index asc) and truncated to top_k, weights exp((l − max)/T) summed in
// candidate order, the top-p prefix, u = rng_uniform(seed, counter) · kept weight, the first
// candidate whose running weight exceeds u, counter + 1. Exact (same draw, same token) for
// 0 < top_k <= kSampleMaxTopK; top_k = 0 (no truncation) is served as top_k = kSampleMaxTopK,
// since the tail beyond it cannot be ordered cheaply here. The weights use exp in double rounded
// to float, which agrees with the CPU's expf except where that is off by an ulp.
//
// The top n candidates (n = top_k, at most kK) in three passes: (1) the maximum of each of 512
// slices of the row; (2) the threshold t = the n-th largest of those maxima (n distinct entries
// are >= t, so every entry of the top n is), and the entries >= t appended to a survivor list
// (~0.1-0.3 % of a random row for n = 256, a few dozen for n = 20); (3) one block sorts the
// survivors by (logit desc, index asc) in shared memory and draws. A list shorter than n (t = -inf:
// fewer than n slices hold a finite entry, as under a token mask) is padded with the -inf entries
// in index order, as the CPU's sort orders them; more than kCap survivors (massive ties) fall back
// to an exact running merge over the whole row (~1-2 ms, correct, rare).
// Before (2026-12-02, H200, fifty-third session): every 4096-entry tile of the row fully
// bitonic-sorted to keep its best 256, then the tiles' lists merged 16 at a time, 5 launches:
// `frost bench engine --decode 1024 --sample 1.0`, 0.8B 0.728 -> 0.886 ms/token against greedy
// (+157 us a token), 9B FP8 2.866-2.889 -> 3.038-3.049 (+160-180 us).
//
// In greedy mode the random passes exit at once, yet such launches cost a step 7-11 us (a probe that
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
constexpr int kSlices = 512;        // pass 1's slices of the row (a power of two: pass 2 sorts their maxima)
constexpr int kSliceThreads = 256;  // pass 1: one warp per slice
constexpr int kFilterBlocks = 64;   // pass 2's grid (kSlices threads each)
constexpr int kCap = 4096;          // survivors pass 3 sorts in shared memory (a power of two)
constexpr int kPickThreads = 1024;  // pass 3: one block
static_assert(kPickThreads >= kK && kCap > kK && kSlices <= 1024, "pass shapes");

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

// NaN never wins: it orders as -inf (with its index), as the CPU sampler's key does.
__device__ inline float key_of(float v) { return v == v ? v : -INFINITY; }

// Ascending bitonic sort of c[0, n) by `before` (n a power of two), by the whole block.
__device__ inline void sort_cands(Cand* c, int n) {
    for (int k = 2; k <= n; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
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
}

// Candidates the cursor asks for: top_k (0: kK), at most the vocabulary and kK.
__device__ inline int cand_count(const StepCursor& cur, int vocab) {
    const int n = cur.top_k > 0 ? min(cur.top_k, vocab) : vocab;
    return min(n, kK);
}

// Pass 1: the maximum of each of kSlices contiguous slices of the row (one warp per slice), and
// the survivor count zeroed for pass 2.
__global__ void __launch_bounds__(kSliceThreads) slice_max_kernel(SampleParams p, float* smax, int* count) {
    if (greedy(p.cursor)) return;
    if (blockIdx.x == 0 && threadIdx.x == 0) *count = 0;
    const float* x = selected_row(p);
    const int s = blockIdx.x * (kSliceThreads / kWarp) + threadIdx.x / kWarp;
    const int len = (p.vocab + kSlices - 1) / kSlices;
    const int end = min(p.vocab, (s + 1) * len);
    float m = -INFINITY;
    for (int i = s * len + threadIdx.x % kWarp; i < end; i += kWarp) m = fmaxf(m, key_of(x[i]));
    m = warp_max(m);
    if (threadIdx.x % kWarp == 0) smax[s] = m;
}

// Pass 2: the threshold t = the n-th largest slice maximum (n = cand_count). Those n maxima are
// n distinct entries >= t, so the n-th largest entry of the row is >= t: every entry of the top n,
// ties included, is >= t. Entries >= t (other than -inf) are appended to the survivor list in any
// order (pass 3 sorts them); the count keeps counting past kCap, so pass 3 sees an overflow.
// Every block sorts the kSlices maxima itself (cheaper than a launch that would do it once).
__global__ void __launch_bounds__(kSlices) filter_kernel(SampleParams p, const float* smax, int* count, Cand* out) {
    __shared__ float m[kSlices];
    if (greedy(p.cursor)) return;
    m[threadIdx.x] = smax[threadIdx.x];
    __syncthreads();
    for (int k = 2; k <= kSlices; k <<= 1) {  // descending bitonic sort of the maxima
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int i = threadIdx.x, ixj = i ^ j;
            if (ixj > i) {
                const float a = m[i], b = m[ixj];
                if (((i & k) == 0) ? a < b : a > b) {
                    m[i] = b;
                    m[ixj] = a;
                }
            }
            __syncthreads();
        }
    }
    const float t = m[cand_count(*p.cursor, p.vocab) - 1];
    const float* x = selected_row(p);
    const int lane = threadIdx.x % kWarp;
    const int stride = gridDim.x * kSlices;
    for (int base = blockIdx.x * kSlices; base < p.vocab; base += stride) {  // uniform per warp
        const int i = base + static_cast<int>(threadIdx.x);
        const float v = i < p.vocab ? key_of(x[i]) : -INFINITY;
        const bool keep = v >= t && v != -INFINITY;
        const unsigned ballot = __ballot_sync(kFullMask, keep);
        if (!ballot) continue;
        int at = 0;
        if (lane == 0) at = atomicAdd(count, __popc(ballot));
        at = __shfl_sync(kFullMask, at, 0) + __popc(ballot & ((1u << lane) - 1u));
        if (keep && at < kCap) out[at] = Cand{v, i};
    }
}

// The CPU sampler's sequential weight sums over the sorted candidates: the weights are computed
// in parallel (one per thread), the running sums stay sequential in thread 0, in candidate order.
// Needs blockDim.x >= kK; every thread of the block calls it.
__device__ void pick_token(const SampleParams& p, const Cand* cand, float* w) {
    StepCursor& cur = *p.cursor;
    int n = cand_count(cur, p.vocab);
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

// The candidates after the survivors when there are fewer than n of them: that happens only when
// t is -inf (a finite t leaves >= n survivors), and then the survivors are every entry but the
// -inf (or NaN) ones, so the rest of the top n are those entries in index order, lowest first:
// c[have + r] = the r-th such index, r < need. Usually found in the first block of the row.
__device__ void fill_ninf(const float* x, int vocab, Cand* c, int have, int need) {
    __shared__ int warp_n[kPickThreads / kWarp];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    int found = 0;
    for (int base = 0; base < vocab && found < need; base += kPickThreads) {  // found: block-uniform
        const int i = base + static_cast<int>(threadIdx.x);
        const bool ninf = i < vocab && key_of(x[i]) == -INFINITY;
        const unsigned ballot = __ballot_sync(kFullMask, ninf);
        if (lane == 0) warp_n[warp] = __popc(ballot);
        __syncthreads();
        int before_me = 0, total = 0;
        for (int w = 0; w < kPickThreads / kWarp; ++w) {
            if (w < warp) before_me += warp_n[w];
            total += warp_n[w];
        }
        const int r = found + before_me + __popc(ballot & ((1u << lane) - 1u));
        if (ninf && r < need) c[have + r] = Cand{-INFINITY, i};
        found += total;
        __syncthreads();
    }
    __syncthreads();
}

// Pass 3 (one block): the survivors sorted by (logit desc, index asc), the first n of them the
// candidates, then the draw. More than kCap survivors (massive ties, or t = -inf with many
// finite entries, e.g. a token mask that allows thousands of ids in fewer than n slices): the
// exact top kK by a running merge over the whole row instead, kCap - kK new entries at a time.
__global__ void __launch_bounds__(kPickThreads) select_pick_kernel(SampleParams p, const int* count, const Cand* surv) {
    __shared__ Cand c[kCap];
    __shared__ float w[kK];
    if (greedy(p.cursor)) return;
    const int have = *count;
    const int n = cand_count(*p.cursor, p.vocab);
    const float* x = selected_row(p);
    if (have <= kCap) {
        int sz = 2;
        while (sz < have) sz <<= 1;
        for (int e = threadIdx.x; e < sz; e += kPickThreads) c[e] = e < have ? surv[e] : Cand{-INFINITY, INT_MAX};
        __syncthreads();
        sort_cands(c, sz);
        if (have < n) fill_ninf(x, p.vocab, c, have, n - have);
    } else {
        for (int e = threadIdx.x; e < kK; e += kPickThreads) c[e] = Cand{-INFINITY, INT_MAX};
        for (int base = 0; base < p.vocab; base += kCap - kK) {
            for (int e = threadIdx.x; e < kCap - kK; e += kPickThreads) {
                const int i = base + e;
                c[kK + e] = i < p.vocab ? Cand{key_of(x[i]), i} : Cand{-INFINITY, INT_MAX};
            }
            __syncthreads();
            sort_cands(c, kCap);
        }
    }
    pick_token(p, c, w);
}

}  // namespace

static cudaError_t sample_core_launch(const SampleParams& p, cudaStream_t stream);

// Work area: [slice maxima | survivor count (2 floats) | survivors (kCap) | argmax partials |
// processed row (vocab) | logprob partials].
static size_t sampler_core_floats(int vocab) {
    return static_cast<size_t>(kSlices) + 2 + 2 * static_cast<size_t>(kCap) + 2 * sample_argmax_blocks(vocab);
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
    float* smax = p.work;
    int* count = reinterpret_cast<int*>(p.work + kSlices);
    Cand* surv = reinterpret_cast<Cand*>(p.work + kSlices + 2);
    float* argmax_work = p.work + kSlices + 2 + 2 * kCap;
    // Greedy: the argmax launches, which write the token only in greedy mode; the passes below
    // exit at once then.
    SampleArgmaxParams ap{p.logits, p.row_stride, p.vocab, p.select_last_row, p.n_rows, argmax_work,
                          p.cursor, p.out_token, 1};
    cudaError_t err = sample_argmax_launch(ap, stream);
    if (err != cudaSuccess) return err;
    slice_max_kernel<<<kSlices / (kSliceThreads / kWarp), kSliceThreads, 0, stream>>>(p, smax, count);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    filter_kernel<<<kFilterBlocks, kSlices, 0, stream>>>(p, smax, count, surv);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    select_pick_kernel<<<1, kPickThreads, 0, stream>>>(p, count, surv);
    return cudaGetLastError();
}

}  // namespace frost::kernels
