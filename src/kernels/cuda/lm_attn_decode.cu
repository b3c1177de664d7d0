// Decode attention (one query row at position cursor->pos over cache [0, pos]), split over the KV
// length: block (split, kv head) handles split_keys(len) keys (16 to kAttnDecodeSplit, by the
// context length) for all q heads of the group and writes an unnormalised partial (o, max, sum);
// a second launch merges the partials of each q head in split order and applies the sigmoid
// gate. A split size that depends only on the length and a fixed merge order make the result
// independent of timing. Lengths are read from the cursor, so one graph serves every position.
// Both launches take programmatic dependent launch (AttentionBf16Params::pdl, decode graphs) and
// wait before touching q, the cache or the cursor. The split kernel is latency-bound on its
// per-key warp reductions: it computes all kKeysInFlight x G dots of a step, then runs their
// butterflies interleaved (bench_ops attn_decode at 1k, H100: 16.7 -> 14.0 us, the same bits).
// Tried and dropped (H200, 2026-11-30, `frost bench engine --decode 1024 --decode-steps 64 --reps
// 3`, ms/token, alternating in one call; both variants passed bitwise tests against the separate
// launches, solo and batched, GQA groups 4, 6 and 8):
// - the step's q/k norm + RoPE and KV append folded into this split launch (every block normalised
//   and rotated its own q heads into shared memory; the block holding the new key also did k and
//   wrote the caches): one launch fewer per attention layer, yet 0.8B 0.820 / 0.820 -> 0.831 /
//   0.827, 9B FP8 2.910 / 2.899 -> 2.953 / 2.935, 9B INT4 2.563 / 2.585 -> 2.608 / 2.611. The
//   separate kernel normalises each head once (24 warps on the 9B); folded, every one of the
//   ~256 split blocks redoes its q heads on the critical path;
// - each warp's first K / V rows (keys before pos) and the RoPE table loaded before the
//   programmatic wait, during the qkv projection: 9B FP8 2.915 / 2.929 -> 2.946 / 2.949, INT4
//   2.588 / 2.600 -> 2.596 / 2.611, 0.8B flat; with the fold as well, slower still.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kD = kAttnHeadDim;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kPartial = kD + 4;  // o[d], max, sum, 2 pad floats: each partial stays 16-byte aligned
constexpr int kKeysInFlight = 4;

// Keys per split for a context of `len` keys (read from the cursor on the device, so one graph
// serves every position): short contexts take smaller splits so that splits x kv heads blocks
// cover the SMs (128-key splits gave 8 x Hkv blocks at 1k keys). A pure function of len: the same
// position gives the same bits solo, batched, cold or after a capsule restore.
// Measured (H100, 2026-11-25, `frost bench engine --decode 1024,4096,16384`, two rounds against
// fixed 128-key splits in the same call, ms/token): 0.8B 1.041-1.052 -> 0.999-1.000 at 1k,
// 1.050-1.061 -> 1.028-1.034 at 4k; 9B bf16 6.110-6.117 -> 6.054-6.057 at 1k, 6.123-6.139 ->
// 6.088-6.089 at 4k; 35B-A3B 4-layer cut 0.671 -> 0.665-0.668; 16k unchanged (128 keys there).
// Up to 2048 keys the splits were 16 keys, which kept half of a block's warps idle (8 warps x
// kKeysInFlight take 32 keys a round); 32 keys there give the same single round with every warp
// busy, half the blocks and half the partials to merge. Measured (H200, 2026-12-02, forty-fifth
// session, `frost bench engine --decode 1024,4096 --decode-steps 64 --reps 3`, ms/token, two
// rounds, the split sizes scaled by a temporary variable, x1 / x2 / x4): 9B FP8 @1k 2.856 / 2.861
// -> 2.833 / 2.844 -> 2.853 / 2.848, 0.8B @1k 0.809 / 0.839 -> 0.807 / 0.806 -> 0.822 / 0.823;
// doubling the 4096 tier too (64 keys) was slower @4k (9B FP8 2.915-2.916 -> 2.940-2.944, 0.8B
// 0.833-0.843 -> 0.862-0.869), so only the shortest tier moved.
__host__ __device__ inline int split_keys(int len) {
    return len <= 4096 ? 32 : len <= 8192 ? 64 : kAttnDecodeSplit;
}
__host__ __device__ inline int splits_of(int len) {
    const int sk = split_keys(len);
    return (len + sk - 1) / sk;
}
// Every len <= 8192 has at most 128 splits (4096 / 32, 8192 / 64); longer ones len / 128.
__host__ __device__ inline int max_splits(int max_seq) {
    const int short_splits = ((max_seq < 4096 ? max_seq : 4096) + 31) / 32;
    const int long_splits = (max_seq + kAttnDecodeSplit - 1) / kAttnDecodeSplit;
    return short_splits > long_splits ? short_splits : long_splits;
}

// The split launch's grid.x: one block per split up to kSplitBlocks, then each block loops over
// splits blockIdx.x + i * gridDim.x. The grid is fixed when the decode graph is captured, so it
// was max_splits(max_seq) blocks per kv head whatever the position: `frost serve` sizes sessions
// to the model's context (262144 keys for Qwen3.5), i.e. 2048 blocks per kv head (8192 on the 9B),
// all but len / 32 of which waited for the predecessor, read the cursor and exited, at every
// attention layer of every step. 128 covers every context up to 16384 keys with one split per
// block (max_splits is 128 there), so those lengths keep their schedule; a split's partial is
// computed the same way whichever block takes it, so the bits do not change.
constexpr int kSplitBlocks = 128;
inline int split_grid(int max_seq) { return max_splits(max_seq) < kSplitBlocks ? max_splits(max_seq) : kSplitBlocks; }

// Batched decode: points p at member m's row (q, gate, o), caches, cursor and work slice; false
// for a padding row (the merge launch writes its output row as zeros, never stale bits).
__device__ inline bool batch_member(AttentionBf16Params& p, int m) {
    const bf16* k = static_cast<const bf16*>(batch_state(p.batch, m, 0));
    const bf16* v = static_cast<const bf16*>(batch_state(p.batch, m, 1));
    p.o += static_cast<int64_t>(m) * p.Hq * kD;
    if (!k || !v) return false;
    p.k_cache = k;
    p.v_cache = v;
    p.cursor = &p.batch.cursors[m];
    p.q += m * p.q_row_stride;
    if (p.gate) p.gate += m * p.q_row_stride;
    p.work += static_cast<int64_t>(m) * max_splits(p.max_seq) * p.Hq * kPartial;
    return true;
}

// The partial of one split (keys split * sk .. + sk, clamped to len) for the block's G q heads.
template <int G, int kSub>
__device__ inline void split_partial(const AttentionBf16Params& p, const float (&q)[G][kVec], int split, int sk, int len,
                                     float (&acc_s)[kWarps][G][kD], float (&m_s)[kWarps][G], float (&l_s)[kWarps][G]) {
    const int key_begin = split * sk;
    const int key_end = min(len, key_begin + sk);
    const int kvh = blockIdx.y / kSub;
    const int qh0 = blockIdx.y * G;  // this block's first q head
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    const int kv_dim = p.Hkv * kD;

    float m[G], l[G], acc[G][kVec];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[g][e] = 0.0f;
    }
    // kKeysInFlight keys per warp per step: their K and V rows are loaded before any is used.
    for (int key0 = key_begin + warp * kKeysInFlight; key0 < key_end; key0 += kWarps * kKeysInFlight) {
        float kf[kKeysInFlight][kVec], vf[kKeysInFlight][kVec];
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
            const int key = min(key0 + u, key_end - 1);  // clamped rows are loaded, then skipped
            const int64_t off = static_cast<int64_t>(key) * kv_dim + kvh * kD + lane * kVec;
            load8(p.k_cache + off, kf[u]);
            load8(p.v_cache + off, vf[u]);
        }
        // Every (key, head) dot's lane partial first, then their butterflies interleaved level by
        // level: kKeysInFlight * G independent shuffles per level instead of that many reductions
        // one after another (the same offsets in the same order as warp_sum: the same bits).
        float dots[kKeysInFlight][G];
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
#pragma unroll
            for (int g = 0; g < G; ++g) {
                float dot = 0.0f;
#pragma unroll
                for (int e = 0; e < kVec; ++e) dot += q[g][e] * kf[u][e];
                dots[u][g] = dot;
            }
        }
#pragma unroll
        for (int off = kWarp / 2; off > 0; off /= 2) {
#pragma unroll
            for (int u = 0; u < kKeysInFlight; ++u) {
#pragma unroll
                for (int g = 0; g < G; ++g) dots[u][g] += __shfl_xor_sync(kFullMask, dots[u][g], off);
            }
        }
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
            if (key0 + u >= key_end) break;
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const float s = dots[u][g] * p.scale;
                const float m_new = fmaxf(m[g], s);
                const float alpha = expf(m[g] - m_new);
                const float pr = expf(s - m_new);
                m[g] = m_new;
                l[g] = l[g] * alpha + pr;
#pragma unroll
                for (int e = 0; e < kVec; ++e) acc[g][e] = acc[g][e] * alpha + pr * vf[u][e];
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc_s[warp][g][lane * kVec + e] = acc[g][e];
        if (lane == 0) {
            m_s[warp][g] = m[g];
            l_s[warp][g] = l[g];
        }
    }
    __syncthreads();
    // Merge the warps in index order; a warp that saw no key has max -inf and weight 0.
    for (int e = threadIdx.x; e < G * kD; e += kThreads) {
        const int g = e / kD, d = e % kD;
        float mx = -INFINITY;
        for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][g]);
        float o = 0.0f, sum = 0.0f;
        for (int w = 0; w < kWarps; ++w) {
            const float wt = m_s[w][g] == -INFINITY ? 0.0f : expf(m_s[w][g] - mx);
            o += wt * acc_s[w][g][d];
            sum += wt * l_s[w][g];
        }
        float* part = p.work + (static_cast<int64_t>(split) * p.Hq + qh0 + g) * kPartial;
        part[d] = o;
        if (d == 0) {
            part[kD] = mx;
            part[kD + 1] = sum;
        }
    }
}

// G q heads per block. A GQA group larger than the shared memory holds (6, 8) is kSub blocks of G
// heads each over the same kv head: block y serves q heads y*G .. y*G+G-1 of kv head y / kSub.
template <int G, int kSub>
__global__ void __launch_bounds__(kThreads) attn_decode_split_kernel(AttentionBf16Params p) {
    __shared__ float acc_s[kWarps][G][kD];
    __shared__ float m_s[kWarps][G], l_s[kWarps][G];
    pdl_wait();  // programmatic launch (decode graphs): q, the appended key and the cursor come from predecessors
    pdl_launch_dependents();
    if (p.batch.slots && !batch_member(p, blockIdx.z)) return;
    const int len = p.cursor->pos + 1;
    const int sk = split_keys(len);
    if (static_cast<int>(blockIdx.x) * sk >= len) return;
    const int qh0 = blockIdx.y * G;  // this block's first q head
    const int lane = threadIdx.x % kWarp;
    float q[G][kVec];
#pragma unroll
    for (int g = 0; g < G; ++g) load8(p.q + (qh0 + g) * p.q_head_stride + lane * kVec, q[g]);
    // Splits blockIdx.x, + gridDim.x, ... (split_grid: the grid is capped, a long context loops).
    // The condition is block-uniform, so the barrier between two splits' uses of acc_s is safe.
    for (int split = blockIdx.x; split * sk < len; split += gridDim.x) {
        if (split != static_cast<int>(blockIdx.x)) __syncthreads();
        split_partial<G, kSub>(p, q, split, sk, len, acc_s, m_s, l_s);
    }
}

// One block per q head merges the splits: the block max of the split maxima first (max is exact
// in any order), then warp w sums a fixed contiguous range of splits for its lanes' 8 dims each,
// and the warp partials are added in warp order. The grouping depends only on the split count,
// so the result is the same on every run; independent loads per warp keep the merge short at 32k.
__global__ void __launch_bounds__(kThreads) attn_decode_merge_kernel(AttentionBf16Params p) {
    __shared__ float red[kWarps];
    __shared__ float o_s[kWarps][kD];
    __shared__ float l_s[kWarps];
    pdl_wait();  // programmatic launch (decode graphs): the partials come from the split launch
    pdl_launch_dependents();
    if (p.batch.slots && !batch_member(p, blockIdx.y)) {
        p.o[blockIdx.x * kD + threadIdx.x] = __float2bfloat16(0.0f);  // kThreads == kD
        return;
    }
    const int len = p.cursor->pos + 1;
    const int splits = splits_of(len);
    const int qh = blockIdx.x;
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    auto part = [&](int s) { return p.work + (static_cast<int64_t>(s) * p.Hq + qh) * kPartial; };
    float mx = -INFINITY;
    for (int s = threadIdx.x; s < splits; s += kThreads) mx = fmaxf(mx, part(s)[kD]);
    mx = warp_max(mx);
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < kWarps; ++w) mx = fmaxf(mx, red[w]);
    const int per_warp = (splits + kWarps - 1) / kWarps;
    const int s_begin = warp * per_warp, s_end = min(splits, s_begin + per_warp);
    float o[kVec] = {}, sum = 0.0f;
#pragma unroll 4
    for (int s = s_begin; s < s_end; ++s) {
        const float* ps = part(s);
        const float wt = expf(ps[kD] - mx);
        const float4 a = *reinterpret_cast<const float4*>(ps + lane * kVec);
        const float4 b = *reinterpret_cast<const float4*>(ps + lane * kVec + 4);
        o[0] += wt * a.x, o[1] += wt * a.y, o[2] += wt * a.z, o[3] += wt * a.w;
        o[4] += wt * b.x, o[5] += wt * b.y, o[6] += wt * b.z, o[7] += wt * b.w;
        sum += wt * ps[kD + 1];
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) o_s[warp][lane * kVec + e] = o[e];
    if (lane == 0) l_s[warp] = sum;
    __syncthreads();
    const int d = threadIdx.x;  // kThreads == kD
    float out = 0.0f, total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
        out += o_s[w][d];
        total += l_s[w];
    }
    out /= total;
    if (p.gate) out *= sigmoid(__bfloat162float(p.gate[qh * p.q_head_stride + d]));
    p.o[qh * kD + d] = __float2bfloat16(out);
}

template <int G, int kSub = 1>
cudaError_t attn_decode_dispatch(const AttentionBf16Params& p, cudaStream_t stream) {
    const int members = p.batch.slots ? p.batch.B : 1;  // batched decode: one grid slice per member
    const bool pdl = p.pdl != 0;
    cudaError_t err = launch_kernel(attn_decode_split_kernel<G, kSub>, dim3(split_grid(p.max_seq), p.Hkv * kSub, members),
                                    dim3(kThreads), 0, stream, pdl, p);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    static_assert(kThreads == kD, "the merge maps one thread to one dim");
    err = launch_kernel(attn_decode_merge_kernel, dim3(p.Hq, members), dim3(kThreads), 0, stream, pdl, p);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

}  // namespace

// One slice per row a batched decode step may hold (kAttnDecodeMaxBatch members).
size_t attn_decode_work_floats(const AttentionBf16Params& p) {
    return static_cast<size_t>(max_splits(p.max_seq)) * p.Hq * kPartial * kAttnDecodeMaxBatch;
}

cudaError_t attn_decode_launch(const AttentionBf16Params& p, cudaStream_t stream) {
    if (!p.q || !p.k_cache || !p.v_cache || !p.o || !p.work || !p.cursor || p.head_dim != kD ||
        p.Hq <= 0 || p.Hkv <= 0 || p.Hq % p.Hkv != 0 || p.max_seq <= 0 || p.q_head_stride % kVec != 0)
        return cudaErrorInvalidValue;
    if (p.batch.slots && (!p.batch.table || !p.batch.cursors || p.batch.B != p.max_rows || p.batch.B > kAttnDecodeMaxBatch))
        return cudaErrorInvalidValue;
    switch (p.Hq / p.Hkv) {  // GQA group sizes 1-4 in one block (static smem holds 4); 6 and 8 in two
        case 1: return attn_decode_dispatch<1>(p, stream);
        case 2: return attn_decode_dispatch<2>(p, stream);
        case 3: return attn_decode_dispatch<3>(p, stream);
        case 4: return attn_decode_dispatch<4>(p, stream);
        case 6: return attn_decode_dispatch<3, 2>(p, stream);
        case 8: return attn_decode_dispatch<4, 2>(p, stream);
        default: return cudaErrorInvalidValue;
    }
}

KernelCost attn_decode_cost(const AttentionBf16Params& p, int pos) {
    const double len = pos + 1.0;
    const double kv = 2.0 * len * p.Hkv * p.head_dim * sizeof(bf16);
    const double qo = static_cast<double>(p.Hq) * p.head_dim * sizeof(bf16) * (p.gate ? 3.0 : 2.0);
    return {kv + qo, 4.0 * len * p.Hq * p.head_dim};
}

}  // namespace frost::kernels
