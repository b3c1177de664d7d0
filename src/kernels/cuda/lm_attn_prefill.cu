// Causal GQA prefill attention, flash style (online softmax, fp32 statistics) on bf16 tensor cores
// (mma.sync m16n8k16, PTX ISA "Warp-level matrix multiply-accumulate"), head_dim 256, over the
// contiguous cache [pos][kv_head][d]; the sigmoid output gate is fused into the epilogue.
// A block is 64 query rows of one q head (4 warps x 16 rows); K and V tiles of 64 keys stream
// into shared memory with cp.async, the next K tile loading behind the softmax and PV product
// and the next V tile behind the next QKᵀ; V's B fragments come through ldmatrix.trans.
// Split-KV: when the row tiles x heads of a launch fill few SMs (a short chunk at a long position),
// grid.z = S blocks share one row tile's keys, each writing an unnormalised fp32 partial (o, row
// max, row sum) to p.work; a combine launch merges the S partials in split order (deterministic).
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/lm_attn_split.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"
#include "util/env.h"

namespace frost::kernels {
namespace {
using namespace lm;
using attn_split::kStats;
using attn_split::partial_row;
using attn_split::split_span;

constexpr int kD = kAttnHeadDim;     // 256
constexpr int kRowsPerBlock = 64;
constexpr int kKeysPerTile = 64;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kQkPitch = kD + 8;     // bf16; 16-byte padding makes fragment loads conflict-free
constexpr int kDTiles = kD / 8;      // n-tiles of the output
constexpr int kKeyTiles = kKeysPerTile / 8;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kBlocksPerSm = 2;       // ~99 KB of shared memory per block: two fit in an H100 SM
constexpr int kCombineWarps = 4;      // combine: one warp per (row, q head), 8 dims per lane

struct Smem {
    bf16 q[kRowsPerBlock][kQkPitch];
    bf16 k[kKeysPerTile][kQkPitch];
    bf16 v[kKeysPerTile][kQkPitch];  // row-major; B fragments come through ldmatrix.trans
};


constexpr int kVecsPerRow = kD / kVec;
static_assert(kD == kWarp * kVec, "the combine maps one lane to 8 dims");

// (Which keys a split holds and where its partial goes: lm_attn_split.cuh, shared with the Hopper
// kernel's split path.)
static_assert(attn_split::kKeysPerTile == kKeysPerTile, "splits cut at this kernel's key tiles");

// Issues the asynchronous copy of one 64-key tile of K or V (rows >= key_end become zeros, so an
// unwritten cache row can never leak a NaN through 0 * NaN).
__device__ inline void load_kv_tile(bf16 (*dst)[kQkPitch], const bf16* cache, int key0, int key_end, int kv_dim,
                                    int kvh) {
    for (int e = threadIdx.x; e < kKeysPerTile * kVecsPerRow; e += kThreads) {
        const int r = e / kVecsPerRow, vi = e % kVecsPerRow;
        const bool in = key0 + r < key_end;
        const bf16* src = cache + (static_cast<int64_t>(in ? key0 + r : 0) * kv_dim + kvh * kD + vi * kVec);
        cp_async16(&dst[r][vi * kVec], src, in ? 16 : 0);
    }
    cp_async_commit();
}

// kSplit: block z of gridDim.z covers its split of the keys and writes a partial to p.work;
// otherwise the block covers every key and writes the normalised, gated bf16 output.
template <bool kSplit>
__global__ void __launch_bounds__(kThreads) attn_prefill_kernel(AttentionBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    // Heaviest (last) row tiles first, so the causal imbalance does not form a tail.
    const int row0 = (gridDim.x - 1 - blockIdx.x) * kRowsPerBlock;
    if (row0 >= rows) return;
    const int qh = blockIdx.y;
    const int kvh = qh / (p.Hq / p.Hkv);
    const int kv_dim = p.Hkv * kD;
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    const int g = lane / 4;  // fragment row group
    const int t = lane % 4;  // fragment column pair
    const int kv_len = pos + min(rows, row0 + kRowsPerBlock);
    int key_begin = 0, key_end = kv_len;
    if constexpr (kSplit) {
        const int span = split_span(kv_len, gridDim.z);
        key_begin = blockIdx.z * span;
        if (key_begin >= kv_len) return;  // empty split: the combine skips it
        key_end = min(kv_len, key_begin + span);
    }

    for (int e = threadIdx.x; e < kRowsPerBlock * kVecsPerRow; e += kThreads) {
        const int r = e / kVecsPerRow, vi = e % kVecsPerRow;
        const bool in = row0 + r < rows;
        cp_async16(&sm.q[r][vi * kVec], p.q + (in ? row0 + r : 0) * p.q_row_stride + qh * p.q_head_stride + vi * kVec,
                   in ? 16 : 0);
    }
    load_kv_tile(sm.k, p.k_cache, key_begin, key_end, kv_dim, kvh);  // group: Q + K(first)
    load_kv_tile(sm.v, p.v_cache, key_begin, key_end, kv_dim, kvh);  // group: V(first)

    const int qpos_lo = pos + row0 + warp * 16 + g;  // positions of this thread's two rows
    const int qpos_hi = qpos_lo + 8;
    const float scale = p.scale * kLog2e;

    float o[kDTiles][4];
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;

    for (int key0 = key_begin; key0 < key_end; key0 += kKeysPerTile) {
        cp_async_wait<1>();  // Q and this K tile have landed (V may still be in flight)
        __syncthreads();
        float s[kKeyTiles][4];
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const bf16* qa = &sm.q[warp * 16 + g][2 * t];
        const bf16* qb = &sm.q[warp * 16 + g + 8][2 * t];
#pragma unroll 4
        for (int kk = 0; kk < kD; kk += 16) {
            const uint32_t a0 = ld32(qa + kk), a1 = ld32(qb + kk), a2 = ld32(qa + kk + 8), a3 = ld32(qb + kk + 8);
#pragma unroll
            for (int n = 0; n < kKeyTiles; ++n) {
                const bf16* kb = &sm.k[n * 8 + g][kk + 2 * t];
                mma_bf16(s[n], a0, a1, a2, a3, ld32(kb), ld32(kb + 8));
            }
        }
        __syncthreads();  // every warp is done with this K tile: fetch the next one behind the softmax
        const bool more = key0 + kKeysPerTile < key_end;
        if (more) {
            load_kv_tile(sm.k, p.k_cache, key0 + kKeysPerTile, key_end, kv_dim, kvh);
        } else {
            cp_async_commit();  // empty group keeps the wait counts uniform
        }
        // Scale into log2 units, mask the future, update the running max of each row.
        float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int key = key0 + n * 8 + 2 * t + e;
                s[n][e] = key <= qpos_lo ? s[n][e] * scale : -INFINITY;
                s[n][2 + e] = key <= qpos_hi ? s[n][2 + e] * scale : -INFINITY;
                mx_lo = fmaxf(mx_lo, s[n][e]);
                mx_hi = fmaxf(mx_hi, s[n][2 + e]);
            }
        }
#pragma unroll
        for (int off = 1; off < 4; off *= 2) {
            mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, off));
            mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, off));
        }
        // Unsplit, key 0 is visible to every row, so after the first tile both maxima are finite.
        // A split starting past a row's position gives that row no key at all: its max stays
        // -inf, and exponents are taken against 0 instead so that p = 0, alpha = 0 (never NaN).
        float base_lo = mx_lo, base_hi = mx_hi;
        if constexpr (kSplit) {
            if (mx_lo == -INFINITY) base_lo = 0.0f;
            if (mx_hi == -INFINITY) base_hi = 0.0f;
        }
        const float alpha_lo = exp2f(m_lo - base_lo), alpha_hi = exp2f(m_hi - base_hi);
        m_lo = mx_lo;
        m_hi = mx_hi;
        float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                s[n][e] = exp2f(s[n][e] - base_lo);
                s[n][2 + e] = exp2f(s[n][2 + e] - base_hi);
                sum_lo += s[n][e];
                sum_hi += s[n][2 + e];
            }
        }
        l_lo = l_lo * alpha_lo + sum_lo;
        l_hi = l_hi * alpha_hi + sum_hi;
#pragma unroll
        for (int n = 0; n < kDTiles; ++n) {
            o[n][0] *= alpha_lo;
            o[n][1] *= alpha_lo;
            o[n][2] *= alpha_hi;
            o[n][3] *= alpha_hi;
        }
        cp_async_wait<1>();  // this V tile has landed (the next K may still be in flight)
        __syncthreads();
        // O += P V: the S accumulators of key tiles 2k and 2k+1 are the A fragment of k-step k;
        // ldmatrix.trans turns row-major V into the B fragments of two n-tiles at once.
        const int mrow = lane % 16;          // key row within the k-step this lane addresses
        const int mcol = (lane / 16) * 8;    // which of the two n-tiles
#pragma unroll
        for (int ks = 0; ks < kKeyTiles / 2; ++ks) {
            const uint32_t a0 = pack_bf16(s[2 * ks][0], s[2 * ks][1]);
            const uint32_t a1 = pack_bf16(s[2 * ks][2], s[2 * ks][3]);
            const uint32_t a2 = pack_bf16(s[2 * ks + 1][0], s[2 * ks + 1][1]);
            const uint32_t a3 = pack_bf16(s[2 * ks + 1][2], s[2 * ks + 1][3]);
#pragma unroll
            for (int n = 0; n < kDTiles; n += 2) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, &sm.v[ks * 16 + mrow][n * 8 + mcol]);
                mma_bf16(o[n], a0, a1, a2, a3, b[0], b[1]);
                mma_bf16(o[n + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
        __syncthreads();  // every warp is done with this V tile
        if (more) {
            load_kv_tile(sm.v, p.v_cache, key0 + kKeysPerTile, key_end, kv_dim, kvh);
        } else {
            cp_async_commit();
        }
    }
    cp_async_wait<0>();

#pragma unroll
    for (int off = 1; off < 4; off *= 2) {
        l_lo += __shfl_xor_sync(kFullMask, l_lo, off);
        l_hi += __shfl_xor_sync(kFullMask, l_hi, off);
    }
    const int r_lo = row0 + warp * 16 + g, r_hi = r_lo + 8;
    if constexpr (kSplit) {
        const int R = attn_split::partial_rows(p.max_rows);
        float* stats = p.work + static_cast<int64_t>(gridDim.z) * p.Hq * R * kD;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = half ? r_hi : r_lo;
            if (r >= rows) continue;
            const int64_t pr = partial_row(blockIdx.z, qh, r, p.Hq, R);
            float* out = p.work + pr * kD;
#pragma unroll
            for (int n = 0; n < kDTiles; ++n) {
                *reinterpret_cast<float2*>(out + n * 8 + 2 * t) = make_float2(o[n][2 * half], o[n][2 * half + 1]);
            }
            if (t == 0) {
                stats[pr * kStats] = half ? m_hi : m_lo;
                stats[pr * kStats + 1] = half ? l_hi : l_lo;
            }
        }
        return;
    }
    const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;
    const int out_stride = p.Hq * kD;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int r = half ? r_hi : r_lo;
        if (r >= rows) continue;
        const float inv = half ? inv_hi : inv_lo;
        bf16* out = p.o + static_cast<int64_t>(r) * out_stride + qh * kD;
        const bf16* gate = p.gate ? p.gate + r * p.q_row_stride + qh * p.q_head_stride : nullptr;
#pragma unroll
        for (int n = 0; n < kDTiles; ++n) {
            const int d = n * 8 + 2 * t;
            float v0 = o[n][2 * half] * inv, v1 = o[n][2 * half + 1] * inv;
            if (gate) {
                const float2 gv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(gate + d));
                v0 *= sigmoid(gv.x);
                v1 *= sigmoid(gv.y);
            }
            *reinterpret_cast<__nv_bfloat162*>(out + d) = __floats2bfloat162_rn(v0, v1);
        }
    }
}

// One warp per (row, q head) merges the partials of the splits that hold keys of the row's tile
// (`tile_rows` rows: the splitting kernel's), in split order: max of the maxima, then weights
// 2^(m_s - max) (0 for a split the row cannot see), normalise, gate, round to bf16 exactly like
// the unsplit epilogue.
__global__ void __launch_bounds__(kCombineWarps * kWarp) attn_prefill_combine_kernel(AttentionBf16Params p,
                                                                                    int splits, int R, int tile_rows) {
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int item = blockIdx.x * kCombineWarps + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (item >= rows * p.Hq) return;
    const int r = item / p.Hq, qh = item % p.Hq;
    const int kv_len = p.cursor->pos + min(rows, (r / tile_rows + 1) * tile_rows);
    const int span = split_span(kv_len, splits);
    const int used = (kv_len + span - 1) / span;  // splits that hold at least one key
    const float* stats = p.work + static_cast<int64_t>(splits) * p.Hq * R * kD;
    float mx = -INFINITY;
    for (int s = 0; s < used; ++s) mx = fmaxf(mx, stats[partial_row(s, qh, r, p.Hq, R) * kStats]);
    float acc[kVec] = {};
    float total = 0.0f;
    for (int s = 0; s < used; ++s) {
        const int64_t pr = partial_row(s, qh, r, p.Hq, R);
        const float ms = stats[pr * kStats];
        if (ms == -INFINITY) continue;  // no key of this split is visible to the row
        const float w = exp2f(ms - mx);
        total += w * stats[pr * kStats + 1];
        const float* po = p.work + pr * kD + lane * kVec;
        const float4 a = *reinterpret_cast<const float4*>(po);
        const float4 b = *reinterpret_cast<const float4*>(po + 4);
        acc[0] += w * a.x, acc[1] += w * a.y, acc[2] += w * a.z, acc[3] += w * a.w;
        acc[4] += w * b.x, acc[5] += w * b.y, acc[6] += w * b.z, acc[7] += w * b.w;
    }
    const float inv = 1.0f / total;
    float gv[kVec];
    if (p.gate) load8(p.gate + r * p.q_row_stride + qh * p.q_head_stride + lane * kVec, gv);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
        acc[e] *= inv;
        if (p.gate) acc[e] *= sigmoid(gv[e]);
    }
    store8(p.o + static_cast<int64_t>(r) * p.Hq * kD + qh * kD + lane * kVec, acc);
}

int row_tiles(const AttentionBf16Params& p) { return ceil_div(p.max_rows, kRowsPerBlock); }

// Splits for `tiles` row tiles: as many as keep the launch within one wave of resident blocks
// (kBlocksPerSm per SM), at most kAttnPrefillMaxSplits; 1 when the tiles alone fill half of it.
int splits_for(int tiles, int Hq) {
    const int sms = lm::device_sm_count();
    if (sms == 0) return 1;
    const int s = kBlocksPerSm * sms / (tiles * Hq);
    return s >= 2 ? std::min(s, kAttnPrefillMaxSplits) : 1;
}

}  // namespace

int attn_prefill_splits(const AttentionBf16Params& p) {
    if (p.max_rows <= 0 || p.Hq <= 0) return 1;
    return splits_for(row_tiles(p), p.Hq);
}

size_t attn_prefill_split_work_floats(const AttentionBf16Params& p, int splits) {
    if (splits <= 1 || p.max_rows <= 0 || p.Hq <= 0) return 0;
    return static_cast<size_t>(splits) * attn_split::partial_rows(p.max_rows) * p.Hq * (kD + kStats);
}

size_t attn_prefill_work_floats(const AttentionBf16Params& p) {
    size_t most = 0;
    AttentionBf16Params b = p;
    for (int tiles = 1; tiles <= row_tiles(p); ++tiles) {  // every bucket 64, 128, ..., max_rows
        b.max_rows = tiles * kRowsPerBlock;
        const int splits = std::max(attn_prefill_splits(b), attn_prefill_hopper_splits(b));
        most = std::max(most, attn_prefill_split_work_floats(b, splits));
    }
    return most;
}

// The Hopper kernel (128 rows a block) where it runs and the bucket has kAttnPrefillHopperMinRows
// rows, unless the split path is needed to fill the GPU and the Hopper grid would hold fewer than
// kAttnPrefillHopperMinBlocks blocks. Like the split count, it depends on max_rows and Hq only,
// so it must hold at every position: bench_cuda_kernels --attn-splits (H200, 2026-12-01, ms per
// launch, the launcher's Hopper variant against the split count picked before this rule):
//   8 q / 2 KV heads x 1024 rows (64 blocks): position 0 0.0379 against 0.0550 (2 splits),
//     position 15360 0.4009 against 0.5882;
//   16 q / 4 KV x 512 (64): position 0 0.0254 against 0.0371, position 30720 0.7587 against 1.1031;
//   8 q / 2 KV x 512 (32, stays split): position 0 0.0245 against 0.0255 (4 splits), but position
//     15360 0.3872 against 0.2944: 32 blocks leave 100 SMs idle through a long key range.
// (Before 2026-12-01 that sweep timed Hopper variant 1, not the launcher's 5, and showed less.)
// Measured and not made the rule (2026-12-01, H200): counting the Hopper kernel's own key splits
// (attn_prefill_hopper_splits) in its block count, so that 8 q heads x 512 rows (32 tiles x 4
// splits) and smaller buckets take it. The same sweep, with the Hopper split columns (ms, the
// launcher's pick -> the Hopper kernel at its split count):
//   8 / 2 x 512: position 0 0.0251 (mma.sync, 4 splits) -> 0.0206 (4), 15360 0.3017 -> 0.1147;
//   8 / 2 x 256: position 0 0.0162 (8) -> 0.0170 (8), 15360 0.1544 -> 0.0669;
//   8 / 2 x 128 at 15360: 0.0910 (16) -> 0.0623 (8 splits);
// engine, 0.8B 512 tokens 2.11 -> 2.08 ms (its tests passed on the GPU). Why it is not the rule:
// restore + append must equal a cold prefill bit for bit (capsules), and a row's attention bits
// depend on which kernel ran it. With the rule, tiny-gpu (2 q heads) would run a cold 289-token
// prompt (bucket 320) on the Hopper kernel but the 97-token append after a 192-token capsule
// (bucket 128) on the mma.sync one, which CapsuleVerbs.RestoreAppendEqualsColdFullPrefillBitwise
// checks on CUDA; that test was not run with it. A rule whose kernel per row does not depend on
// the bucket (or a Hopper path for 64-row buckets too) would keep both.
bool attn_prefill_takes_hopper(const AttentionBf16Params& p) {
    if (p.max_rows < kAttnPrefillHopperMinRows || p.Hq <= 0 || !attn_prefill_hopper_supported(p)) return false;
    return attn_prefill_splits(p) == 1 || p.Hq * ceil_div(p.max_rows, 128) >= kAttnPrefillHopperMinBlocks;
}

// A Hopper grid of at most half the SMs (q heads x 128-row tiles: the 0.8B's 1k prompt, 8 x 8)
// leaves the heaviest tile's 16 key tiles in sequence on one SM while the light tiles' SMs idle;
// its keys split instead, as many ways as the grid fits the SMs (two there), and the split path's
// combine merges them. Measured (H200, 2026-12-01, `frost bench engine --ttft 1024,2048 --reps 5`
// on the 0.8B, three rounds alternating in one call): 1k 3.35-3.37 -> 3.31-3.32 ms (~7 us off
// each of the 6 attention layers); 2k (128 blocks: no split) 5.69-5.71 either way. Per launch
// (bench_cuda_kernels --attn-splits): 8 / 2 x 1024 at position 0 0.0376 -> 0.0318, at 15360
// 0.3972 -> 0.2168; 16 / 4 x 512 (the 9B's 512-row chunk) at 0 0.0255 -> 0.0257, at 30720
// 0.7448 -> 0.3926. This changes no launch's kernel (attn_prefill_takes_hopper does not count
// the splits: see there), only how a Hopper launch spreads.
// FROST_ATTN_HOPPER_SPLIT=0 keeps one block per tile (A/B runs; read once per process).
// Measured and dropped (H200, 2026-12-04, sixty-fourth session): balanced runs instead of equal
// splits per row tile. The launcher allowed twice the splits and the kernel and the combine cut
// every row tile in runs of one span, the smallest that kept the runs within one wave (0.8B 1k at
// position 0: span 6, 120 blocks, the heaviest run 6 key tiles instead of 8). Bitwise stable and
// within the reference (kernels_test_cuda_attention, the capsule and chunk-invariance suites
// passed), but the 0.8B's prompts did not move (`scripts/gpu/ab_env.sh`, three rounds, 512 / 1k /
// 2k: 2.02-2.03 / 3.10-3.12 / 5.41-5.43 ms against 2.01-2.03 / 3.06-3.10 / 5.40-5.45 with equal
// splits), so the heaviest block's key tiles do not set this launch's time.
int attn_prefill_hopper_splits(const AttentionBf16Params& p) {
    static const bool off = util::env_is("FROST_ATTN_HOPPER_SPLIT", "0");
    const int sms = lm::device_sm_count();
    const int blocks = p.Hq * ceil_div(p.max_rows, 128);
    if (off || sms <= 0 || blocks <= 0) return 1;
    const int s = sms / blocks;
    return s >= 2 ? std::min(s, kAttnPrefillMaxSplits) : 1;
}

cudaError_t attn_prefill_launch(const AttentionBf16Params& p, cudaStream_t stream) {
    if (attn_prefill_takes_hopper(p)) return attn_prefill_hopper_launch(p, stream, 0, attn_prefill_hopper_splits(p));
    return attn_prefill_launch_splits(p, stream, attn_prefill_splits(p));
}

cudaError_t attn_prefill_invariant_launch(const AttentionBf16Params& p, cudaStream_t stream) {
    if (p.max_rows > 0 && p.Hq > 0 && attn_prefill_hopper_supported(p)) return attn_prefill_hopper_launch(p, stream, 0, 1);
    return attn_prefill_launch_splits(p, stream, 1);
}

cudaError_t attn_prefill_launch_splits(const AttentionBf16Params& p, cudaStream_t stream, int splits) {
    if (!p.q || !p.k_cache || !p.v_cache || !p.o || !p.cursor || p.head_dim != kD || p.Hq <= 0 ||
        p.Hkv <= 0 || p.Hq % p.Hkv != 0 || p.max_rows <= 0 || p.q_row_stride % kVec != 0 ||
        p.q_head_stride % kVec != 0 || splits < 1 || splits > kAttnPrefillMaxSplits || (splits > 1 && !p.work))
        return cudaErrorInvalidValue;
    const int smem = static_cast<int>(sizeof(Smem));
    const int tiles = row_tiles(p);
    if (splits == 1) {
        cudaError_t err = cudaFuncSetAttribute(attn_prefill_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess) return err;
        attn_prefill_kernel<false><<<dim3(tiles, p.Hq), kThreads, smem, stream>>>(p);
        return cudaGetLastError();
    }
    cudaError_t err = cudaFuncSetAttribute(attn_prefill_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    attn_prefill_kernel<true><<<dim3(tiles, p.Hq, splits), kThreads, smem, stream>>>(p);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    return attn_split::combine_launch(p, stream, splits, kRowsPerBlock);
}

cudaError_t attn_split::combine_launch(const AttentionBf16Params& p, cudaStream_t stream, int splits, int tile_rows) {
    const int items = p.max_rows * p.Hq;
    attn_prefill_combine_kernel<<<ceil_div(items, kCombineWarps), kCombineWarps * kWarp, 0, stream>>>(
        p, splits, attn_split::partial_rows(p.max_rows), tile_rows);
    return cudaGetLastError();
}

KernelCost attn_prefill_cost(const AttentionBf16Params& p, int rows, int pos) {
    // Causal: row r sees pos + r + 1 keys; QKᵀ and PV are 2 d FLOPs per (row, key) each.
    const double pairs = static_cast<double>(rows) * pos + static_cast<double>(rows) * (rows + 1) / 2.0;
    const double flops = 4.0 * p.head_dim * pairs * p.Hq;
    const double kv = 2.0 * (pos + rows) * p.Hkv * p.head_dim * sizeof(bf16);
    const double qo = static_cast<double>(rows) * p.Hq * p.head_dim * sizeof(bf16) * (p.gate ? 3.0 : 2.0);
    return {kv + qo, flops};
}

}  // namespace frost::kernels
