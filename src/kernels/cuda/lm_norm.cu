// Normalisation stages of the hybrid LM, each fused with its neighbour so the activation makes one
// trip through memory: residual add + RMSNorm, per-head q/k RMSNorm + partial NeoX RoPE, and the
// GDN output's gated RMSNorm. bf16 in and out, fp32 math, fixed-order reductions.
#include <algorithm>

#include "kernels/cuda/lm_act_quant.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_kernels.h"
#include "util/env.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kNormThreads = 256;
constexpr int kNormMaxVecPerThread = 4;  // dim <= 256 threads * 4 vectors * 8 = 8192
constexpr int kHeadWarpsPerBlock = 4;
constexpr int kHeadMaxPerLane = 8;       // head_dim <= 32 lanes * 8 = 256

// One warp's load of a head vector: v[e] = x[lane + 32 e] (zeros past dim) and the head's
// rsqrt(mean(x^2) + eps), squares summed per lane in e order, then warp_sum's fixed butterfly.
__device__ inline float head_rms_load(const bf16* x, int dim, float eps, float (&v)[kHeadMaxPerLane]) {
    const int lane = threadIdx.x % kWarp, per_lane = dim / kWarp;
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < kHeadMaxPerLane; ++e) {
        v[e] = e < per_lane ? __bfloat162float(x[lane + e * kWarp]) : 0.0f;
        ss += v[e] * v[e];
    }
    return rsqrtf(warp_sum(ss) / dim + eps);
}

// One block per row: h += delta (rounded to bf16 as the residual stream is), then RMSNorm.
// It moved 1.4 TB/s (bf16 y) and ~1.0 TB/s (FP8 twin) on the 9B's prefill chunks while its
// "16-byte" loads compiled to four 4-byte ones and its weights to scalar loads (lm_common.cuh
// Bf16x8); since the fix (H200, 2026-11-29, bench_ops, us summed over the 32 input norms): 9B
// 2048-row chunk 756 -> 464 (2.3 TB/s), 9B FP8 twin 4096 rows 1747 -> 1337, 0.8B 405 -> 360, and
// 248 with one thread per vector (the launcher). Tried
// and dropped (H100 2026-11-25, `bench_ops --rows 4096 --pos 0`, us summed over the 32 input norms
// of the 9B bf16 / 9B FP8 twin / over the 24 of the 0.8B, this kernel -> variant; the same bits
// each): a warp per row, all of a row's loads at once and the block reduction replayed lane by
// lane: 1573 -> 1749, 1684 -> 1982, 429 -> 348; a grid of resident blocks each looping over rows
// with the next row's loads in flight during the reduction: 1557 -> 1439, 1652 -> 1616, 373 ->
// 324. Cold TTFT through the engine (9B 4k / 16k, 0.8B 1k-16k, alternated twice) moved within
// noise either way, so the simple kernel stays.
//
// In decode the norm sits between two GEMVs, and removing its launch outright (wrong results, a
// timing probe) saved 70 us per token on the 0.8B (1.001 -> 0.931 ms) and 210 us on the 9B FP8
// (3.968 -> 3.750 ms). Three ways of getting some of that were measured and dropped (H100
// 2026-11-25, `frost bench engine --decode 1024 --decode-steps 64`, alternating, ms/token, as it
// was -> variant; the first passed the full suite, the others their kernel and engine tests):
// - the norm as the previous residual GEMV's tail (its last block, found with a fence and an
//   atomic ticket, normalised h): 0.8B 1.016 -> 1.083-1.089, 9B FP8 3.985 -> 3.985-4.013;
// - the norm as the reading GEMV's prologue (every block normalised the row into shared memory;
//   no x round trip, no launch): 0.8B 1.014 -> 1.054, 9B FP8 4.066 -> 4.211, each block paying
//   the load + block reduction before its first mma, and the kernels' registers growing;
// - the small kernels before a GEMV (this one, the GDN step, the attention merge) triggering it
//   before their own wait (so the GEMV fetches weights behind both); for the norms alone, 0.8B
//   0.995 -> 1.025-1.031, 9B INT4 3.20 -> 3.17-3.18; for all three, 0.8B 0.996 -> 1.03-1.04, 9B
//   INT4 3.20 -> 3.19, 9B FP8 3.967 -> 3.928.
// The probe's saving is the norm's work leaving the critical path, which no fusion achieves.
// kV: the vectors each thread holds (the launcher's smallest that covers dim: 1, 2 or 4). The
// weights are loaded before the programmatic wait and all of the row's h and delta right after
// it, before any arithmetic; before, each vector's h and delta were awaited in turn (the next
// loads could not pass the h store in between) and the weights were loaded only after the block
// reduction, a dependent round trip on the decode critical path. Same arithmetic in the same
// order: the same bits. Measured (H200, 2026-11-30):
// - decode, old and new binaries alternating in one call (`frost bench engine --decode 1024
//   --decode-steps 64 --reps 3`, ms/token): 9B INT4 2.780 / 2.771 -> 2.685 / 2.693, 9B FP8 3.105 /
//   3.112 -> 3.000 / 3.012, 9B bf16 4.569 / 4.573 -> 4.486 / 4.483, 35B-A3B (20 layers) 1.544 /
//   1.551 -> 1.520 / 1.521, 0.8B 0.853 / 0.862 -> 0.857 / 0.851 (noise). Inside the 9B INT4 graph
//   a norm now costs 1.8 us (`frost bench graph-ops`), 4.2 us before;
// - prefill, timed alone (`bench_ops --rows 4096 --pos 0`, us over the 32 input / 32 post-attention
//   norms): 9B bf16 1125 / 1041 -> 890 / 820, with the FP8 twin 1419 / 1254 -> 1225 / 1050; 0.8B
//   (1024 rows) 111 -> 101. Through the engine the 9B's 4k / 16k cold TTFT moved within noise.
// pdl 2 (the forward's hint where the norm's reader is a dense GEMV and its predecessor no MoE
// block): the trigger comes before the wait, so the GEMV's blocks become resident and load their
// first weights while the previous GEMV drains, instead of after it completed. Measured (H200,
// 2026-11-30, `frost bench engine --decode 1024 --decode-steps 64 --reps 3`, ms/token, alternating
// in one call; the last calls with FROST_NORM_EARLY=0 as the "before"):
// - 9B FP8, five calls: 2.878-2.881 -> 2.860, 2.894-2.898 -> 2.874-2.879, 2.900-2.909 ->
//   2.877-2.888, 2.901 / 2.914 -> 2.908 / 2.891 (mixed), 2.865-2.876 -> 2.852-2.875;
// - 9B bf16: 4.403 / 4.406 -> 4.389 / 4.392; 0.8B: 0.811-0.813 -> 0.806-0.811 in three calls;
// - 9B INT4, with the 4-bit GEMV's second buffer (lm_gemv_quant_tc.cu): 2.556 / 2.563 -> 2.520 /
//   2.520; 9B NVFP4 2.757-2.769 -> 2.695-2.737 (two calls);
// - batched (`frost bench batch --sizes 4,8 --context 1024`): 9B FP8 B = 4 3.542-3.547 -> 3.494-3.520,
//   B = 8 4.236-4.237 -> 4.187-4.215; 0.8B flat.
// In the 35B-A3B shape it cost: 1.491-1.495 -> 1.548-1.555 with every norm early, 1.527-1.528 with
// the post-attention norms alone (their reader is the MoE router) and 1.548-1.549 with the input
// norms alone (their predecessor the MoE down kernel), hence the hint's rule. The same early
// trigger in the GDN decode step and the attention merge (their readers the out / o projections)
// measured flat (9B FP8 2.901-2.906 against 2.900-2.909) and is not used.
template <int kV>
__global__ void __launch_bounds__(kNormThreads) add_rmsnorm_kernel(AddRmsNormBf16Params p) {
    __shared__ float scratch[kWarp];
    const int nvec = p.dim / kVec;
    // The weights first, before the wait: they do not depend on the previous kernel, so under
    // programmatic launch (decode graphs) their loads overlap its tail. As two float4 loads per
    // vector where aligned (eight scalar loads each otherwise: a warp's scalar load spans 1 KiB,
    // eight L1 wavefronts for 128 useful bytes).
    const bool w_vec = (reinterpret_cast<uintptr_t>(p.w) & 15) == 0;
    float w[kV][kVec];
#pragma unroll
    for (int j = 0; j < kV; ++j) {
        const int vi = threadIdx.x + j * blockDim.x;
        if (vi < nvec) load8f(p.w + vi * kVec, w_vec, w[j]);
    }
    pdl_wait_and_trigger(p.pdl);  // programmatic launch (decode graphs): h comes from the predecessor
    const int rows = launch_rows(p.n_rows, p.max_rows);
    int row = blockIdx.x;
    if (p.last_row_only) {
        if (rows == 0) return;
        row = rows - 1;
    } else if (row >= rows) {
        return;
    }
    bf16* h = p.h + static_cast<int64_t>(row) * p.dim;
    const bf16* delta = p.delta ? p.delta + static_cast<int64_t>(row) * p.dim : nullptr;
    Bf16x8 hv[kV], dv[kV];
#pragma unroll
    for (int j = 0; j < kV; ++j) {
        const int vi = threadIdx.x + j * blockDim.x;
        if (vi >= nvec) continue;
        hv[j] = reinterpret_cast<const Bf16x8*>(h)[vi];
        if (delta) dv[j] = reinterpret_cast<const Bf16x8*>(delta)[vi];
    }
    float v[kV][kVec];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
        const int vi = threadIdx.x + j * blockDim.x;
        if (vi >= nvec) continue;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = hv[j].f2(i);
            v[j][2 * i] = f.x;
            v[j][2 * i + 1] = f.y;
        }
        if (delta) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 d = dv[j].f2(i);
                v[j][2 * i] = __bfloat162float(__float2bfloat16(v[j][2 * i] + d.x));
                v[j][2 * i + 1] = __bfloat162float(__float2bfloat16(v[j][2 * i + 1] + d.y));
            }
            store8(h + vi * kVec, v[j]);
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) ss += v[j][e] * v[j][e];
    }
    const float rs = rsqrtf(block_sum(ss, scratch) / p.dim + p.eps);
    bf16* y = p.y + static_cast<int64_t>(p.last_row_only ? 0 : row) * p.dim;
    const float one = p.zero_centred ? 1.0f : 0.0f;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
        const int vi = threadIdx.x + j * blockDim.x;
        float out[kVec] = {};
        if (vi < nvec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) out[e] = v[j][e] * rs * (one + w[j][e]);
            if (!p.yq_only) store8(y + vi * kVec, out);  // yq_only: the twin is the only reader's input
        }
        // The FP8 twin (dim a multiple of 128, so 16 lanes hold one group): the whole warp joins
        // while any of its lanes has a vector, as the group max is a warp shuffle.
        if (p.yq && (threadIdx.x & ~(kWarp - 1)) + j * blockDim.x < nvec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) out[e] = bf16_rounded(out[e]);
            act_quant_group<kActGroup / kVec, kVec>(out, vi < nvec, p.yq + static_cast<int64_t>(row) * p.dim + vi * kVec,
                                                    p.yq_scale + (vi * kVec / kActGroup) * p.yq_scale_ld + row);
        }
    }
}

// One warp per (row, head) of q then k. kKv (decode): the row's KV append too (kv_append_kernel's
// rules): k warps also store their output into the K cache, and Hkv more warps per row copy the v
// heads into the V cache.
// The rotation's cos / sin depend on (position, frequency) only, so the block computes them once
// per row it touches (at most kHeadWarpsPerBlock rows) into shared memory, with the same powf and
// sincosf calls, before its warps rotate. Every (row, head) warp computed its own before: 20x the
// trigonometry on the 9B, most of the kernel's instructions (0.8 TB/s, 417 us per 9B 2048-row chunk).
// Measured and dropped (H200, 2026-12-01, thirty-eighth session): four (row, head) items a warp,
// every item's loads issued before any arithmetic (the same bits; a bitwise test against one item
// a warp passed), to keep more than 512 bytes in flight per warp. It took 77-78 registers instead
// of 35-38, so far fewer warps fit an SM: bench_ops, the fused form with the KV append, 35B-A3B
// shape at 4096 rows 174-177 -> 280 us over its 2 attention layers, 0.8B at 1024 rows 90 -> 105 us
// over 6. One warp per item (~1.0 TB/s) stays.
//
// Two layouts of a head over the warp's lanes (kPer). kPer 0, strided, any head_dim (a multiple of
// 32): lane owns elements lane + 32 e, every access 2 bytes, and the RoPE partner (i ± rotary_dim/2,
// rotary_dim a multiple of 64) sits in the same lane, picked from the unrolled set. kPer 4 / 8 (head_dim 128 / 256, every Qwen3.5 shape): lane owns the
// kPer contiguous elements from kPer * lane, so q, k, the caches and v move as 8- / 16-byte vectors
// and the weights as float4s, and the partner is the same slot of lane ± rotary_dim / (2 kPer),
// one shuffle per element. The squares are summed in a different order: other bits than the
// strided form's (prefill, decode and batched steps all take the same form: they agree).
// FROST_QK_ROPE_STRIDED=1 forces the strided form (A/B runs of one binary). Measured (H200,
// 2026-12-02, fifty-second session, `bench_ops --rows R --pos 0 --reps 5`, us summed over the
// layers, fused with the KV append, strided -> contiguous, two rounds in each of two calls): 9B at
// 4096 rows 818-831 -> 768-781; 0.8B at 1024 rows 85-88 -> 85-87. The width of the accesses is not
// what holds the kernel near 1.1 TB/s. Tried and dropped in the same calls: (1) the warp's head
// loaded before the rotation table and its barrier, the weights before the programmatic wait (40
// instead of 32 registers, capped at 12 blocks an SM): 9B 892-899, 0.8B 92.5; (2) one row's heads
// a block (24 warps on the 9B, 12 on the 0.8B), one rotation table per row instead of per 4 items:
// 9B 876-886, 0.8B 80.5-81.6 (strided: 945-947 / 84-85.5). The 32-byte stack frame ptxas reports
// for every form is sincosf's: its slow path (Payne-Hanek reduction, arguments beyond ~1e5, never
// reached at these positions) keeps its words in local memory; __sincosf has none.
constexpr int kRopeMaxHalf = kWarp * kHeadMaxPerLane / 2;  // rotary_dim / 2 <= head_dim / 2

// A warp's work in qk_norm_rope_kernel: one q or k head to normalise and rotate in place (x, its
// weights w, the row's (cos, sin) table cs and, kKv, the K cache row to store it into as well), or
// one v head to copy into the V cache (v_src -> v_dst). All null: nothing.
struct QkHeadItem {
    bf16* x = nullptr;
    const float* w = nullptr;
    const float2* cs = nullptr;
    bf16* k_cache = nullptr;
    const bf16* v_src = nullptr;
    bf16* v_dst = nullptr;
};

// Every thread of the block calls this (it holds the block's barrier). False: the whole block has
// no item (it returns before the barrier). Else `it` is this warp's item.
template <bool kKv>
__device__ inline bool qk_head_item(const QkNormRopeBf16Params& p, const KvAppendBf16Params& kv,
                                    float2 (*rope_cs)[kRopeMaxHalf], QkHeadItem& it) {
    const bool batched = p.batch.cursors != nullptr;  // every row, at its member's own position
    const int rows = batched ? p.max_rows : cursor_rows(p.cursor, p.max_rows);
    const int heads = p.Hq + p.Hkv;
    const int items = heads + (kKv ? p.Hkv : 0);  // per row
    const int first = blockIdx.x * kHeadWarpsPerBlock;
    if (first >= rows * items) return false;
    const int row0 = first / items;
    const int half = p.rotary_dim / 2;
    {
        const int block_rows = (min(first + kHeadWarpsPerBlock, rows * items) - 1) / items - row0 + 1;
        for (int t = threadIdx.x; t < block_rows * half; t += blockDim.x) {
            const int r = t / half, fi = t % half;  // fi: frequency slot
            const int row = row0 + r;
            const float pos = static_cast<float>(batched ? p.batch.cursors[row].pos : p.cursor->pos + row);
            float inv_freq = 1.0f / powf(p.theta, static_cast<float>(2 * fi) / p.rotary_dim);
            // A model cast to bf16 holds its inv_freq buffer in bf16 (round to nearest even, as the CPU kernel).
            if (p.inv_freq_bf16) inv_freq = __bfloat162float(__float2bfloat16_rn(inv_freq));
            float sn, cs;
            sincosf(pos * inv_freq, &sn, &cs);
            rope_cs[r][fi] = make_float2(cs, sn);
        }
        __syncthreads();
    }
    const int item = first + threadIdx.x / kWarp;
    if (item >= rows * items) return true;
    const int row = item / items;
    const int head = item % items;
    if constexpr (kKv) {
        bf16* kc = kv.k_cache;
        bf16* vc = kv.v_cache;
        if (kv.batch.slots) {  // row = member: its caches (padding: none)
            kc = static_cast<bf16*>(batch_state(kv.batch, row, 0));
            vc = static_cast<bf16*>(batch_state(kv.batch, row, 1));
        }
        const int pos = kv.batch.slots ? kv.batch.cursors[row].pos : kv.cursor->pos + row;
        const bool append = kc && vc && pos >= 0 && pos < kv.max_seq;  // never out of bounds
        const int64_t at = static_cast<int64_t>(pos) * kv.kv_dim;
        if (head >= heads) {  // a v head: copy
            if (append) {
                const int64_t off = static_cast<int64_t>(head - heads) * p.head_dim;
                it.v_src = kv.v + row * kv.src_row_stride + off;
                it.v_dst = vc + at + off;
            }
            return true;
        }
        if (append && head >= p.Hq) it.k_cache = kc + at + static_cast<int64_t>(head - p.Hq) * p.head_dim;
    }
    const bool is_q = head < p.Hq;
    it.x = is_q ? p.q + row * p.q_row_stride + head * p.q_head_stride
                : p.k + row * p.k_row_stride + (head - p.Hq) * p.k_head_stride;
    it.w = is_q ? p.q_w : p.k_w;
    it.cs = rope_cs[row - row0];
    return true;
}

// The strided form (kPer 0 above).
__device__ inline void qk_head_strided(const QkNormRopeBf16Params& p, const QkHeadItem& it) {
    const int lane = threadIdx.x % kWarp;
    const int per_lane = p.head_dim / kWarp;
    float v[kHeadMaxPerLane];
    const float rs = head_rms_load(it.x, p.head_dim, p.eps, v);
    const float one = p.zero_centred ? 1.0f : 0.0f;
#pragma unroll
    for (int e = 0; e < kHeadMaxPerLane; ++e) {
        if (e < per_lane) v[e] = v[e] * rs * (one + it.w[lane + e * kWarp]);
    }
    const int half = p.rotary_dim / 2;
    const int half_lanes = half / kWarp;  // partner offset in e
    float out[kHeadMaxPerLane];
#pragma unroll
    for (int e = 0; e < kHeadMaxPerLane; ++e) {
        out[e] = v[e];
        const int i = lane + e * kWarp;
        if (e >= per_lane || i >= p.rotary_dim) continue;
        const float2 cs = it.cs[i % half];
        const float c = cs.x, s = cs.y;
        // Partner index is known at compile time only through e; select it from the unrolled set.
        float partner = 0.0f;
#pragma unroll
        for (int f = 0; f < kHeadMaxPerLane; ++f) {
            if (i < half ? f == e + half_lanes : f == e - half_lanes) partner = v[f];
        }
        out[e] = i < half ? v[e] * c - partner * s : v[e] * c + partner * s;
    }
#pragma unroll
    for (int e = 0; e < kHeadMaxPerLane; ++e) {
        if (e < per_lane) {
            const bf16 o = __float2bfloat16(out[e]);
            it.x[lane + e * kWarp] = o;
            if (it.k_cache) it.k_cache[lane + e * kWarp] = o;
        }
    }
}

// Four bf16 from one 8-byte access (p 8-byte aligned); load8 / store8 are the 16-byte ones.
__device__ inline void load4(const bf16* p, float (&v)[4]) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

__device__ inline void store4(bf16* p, const float (&v)[4]) {
    *reinterpret_cast<uint2*>(p) = make_uint2(pack_bf162(v[0], v[1]), pack_bf162(v[2], v[3]));
}

// kPer bf16 (4 or 8) as one 8- / 16-byte access where `vec`, else one by one (the same values).
template <int kPer>
__device__ inline void load_run(const bf16* src, bool vec, float (&v)[kPer]) {
    if (!vec) {
#pragma unroll
        for (int e = 0; e < kPer; ++e) v[e] = __bfloat162float(src[e]);
    } else if constexpr (kPer == 8) {
        load8(src, v);
    } else {
        load4(src, v);
    }
}

template <int kPer>
__device__ inline void store_run(bf16* dst, bool vec, const float (&v)[kPer]) {
    if (!vec) {
#pragma unroll
        for (int e = 0; e < kPer; ++e) dst[e] = __float2bfloat16(v[e]);
    } else if constexpr (kPer == 8) {
        store8(dst, v);
    } else {
        store4(dst, v);
    }
}

template <int kPer>
__device__ inline bool run_aligned(const void* ptr) {
    return (reinterpret_cast<uintptr_t>(ptr) & (kPer * sizeof(bf16) - 1)) == 0;
}

// kPer weights from wp (float4s where aligned).
template <int kPer>
__device__ inline void load_weights(const float* wp, float (&w)[kPer]) {
    if ((reinterpret_cast<uintptr_t>(wp) & 15) == 0) {
#pragma unroll
        for (int j = 0; j < kPer / 4; ++j) {
            const float4 f = reinterpret_cast<const float4*>(wp)[j];
            w[4 * j] = f.x, w[4 * j + 1] = f.y, w[4 * j + 2] = f.z, w[4 * j + 3] = f.w;
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) w[e] = wp[e];
}

// The contiguous form (kPer 4 / 8 above). Every lane of the warp runs it (the shuffles).
template <int kPer>
__device__ inline void qk_head_contiguous(const QkNormRopeBf16Params& p, const QkHeadItem& it) {
    const int lane = threadIdx.x % kWarp;
    const int i0 = kPer * lane;
    bf16* x = it.x + i0;
    bf16* kc = it.k_cache ? it.k_cache + i0 : nullptr;
    // Unaligned addresses (never the engine's buffers) take the element-wise accesses, warp-uniform.
    const bool vec = __all_sync(kFullMask, run_aligned<kPer>(x) && (!kc || run_aligned<kPer>(kc)));
    float v[kPer], w[kPer];
    load_run<kPer>(x, vec, v);
    load_weights<kPer>(it.w + i0, w);
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) ss += v[e] * v[e];
    const float rs = rsqrtf(warp_sum(ss) / (kPer * kWarp) + p.eps);
    const float one = p.zero_centred ? 1.0f : 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) v[e] = v[e] * rs * (one + w[e]);
    const int half = p.rotary_dim / 2;  // a multiple of 32, so of kPer: partners are whole runs
    const bool rotated = i0 < p.rotary_dim, low = i0 < half;
    const int src = !rotated ? lane : low ? lane + half / kPer : lane - half / kPer;
    float out[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
        const float partner = __shfl_sync(kFullMask, v[e], src);
        out[e] = v[e];
        if (!rotated) continue;
        const float2 cs = it.cs[(i0 + e) % half];
        out[e] = low ? v[e] * cs.x - partner * cs.y : v[e] * cs.x + partner * cs.y;
    }
    store_run<kPer>(x, vec, out);
    if (kc) store_run<kPer>(kc, vec, out);
}

template <bool kKv, int kPer>
__global__ void qk_norm_rope_kernel(QkNormRopeBf16Params p, KvAppendBf16Params kv) {
    __shared__ float2 rope_cs[kHeadWarpsPerBlock][kRopeMaxHalf];  // (cos, sin) per row of the block and slot
    pdl_wait();  // programmatic launch (decode graphs): q / k and the cursor come from predecessors
    pdl_launch_dependents();
    QkHeadItem it;
    if (!qk_head_item<kKv>(p, kv, rope_cs, it)) return;
    const int lane = threadIdx.x % kWarp;
    if (it.v_dst) {
        if constexpr (kPer > 0) {
            const int i0 = kPer * lane;
            const bool vec = __all_sync(kFullMask, run_aligned<kPer>(it.v_src + i0) && run_aligned<kPer>(it.v_dst + i0));
            float v[kPer];
            load_run<kPer>(it.v_src + i0, vec, v);  // bf16 -> fp32 -> bf16: exact
            store_run<kPer>(it.v_dst + i0, vec, v);
        } else {
            for (int i = lane; i < p.head_dim; i += kWarp) it.v_dst[i] = it.v_src[i];
        }
        return;
    }
    if (!it.x) return;
    if constexpr (kPer > 0)
        qk_head_contiguous<kPer>(p, it);
    else
        qk_head_strided(p, it);
}

// One warp per (row, value head): y = w * norm(o) * silu(z).
__global__ void gated_rmsnorm_kernel(GatedRmsNormBf16Params p) {
    pdl_wait();  // programmatic launch (decode graphs): x comes from the predecessor
    pdl_launch_dependents();
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int item = blockIdx.x * kHeadWarpsPerBlock + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (item >= rows * p.heads) return;
    const int row = item / p.heads;
    const int head = item % p.heads;
    const bf16* x = p.x + (static_cast<int64_t>(row) * p.heads + head) * p.dim;
    const bf16* z = p.z + row * p.z_row_stride + static_cast<int64_t>(head) * p.dim;
    bf16* y = p.y + (static_cast<int64_t>(row) * p.heads + head) * p.dim;
    const int per_lane = p.dim / kWarp;
    float v[kHeadMaxPerLane];
    const float rs = head_rms_load(x, p.dim, p.eps, v);
#pragma unroll
    for (int e = 0; e < kHeadMaxPerLane; ++e) {
        if (e >= per_lane) continue;
        const int i = lane + e * kWarp;
        y[i] = __float2bfloat16(v[e] * rs * p.w[i] * silu(__bfloat162float(z[i])));
    }
}

// The same for dim 128 (every Qwen3.5 GDN value head): lane owns 4 contiguous elements, so x, z and
// y move as 8-byte vectors and w as one float4 (the strided kernel above moves 2 bytes per load
// and ran at ~1.35 TB/s on 2048-row prefill chunks). Needs 8-byte aligned rows.
// Four (row, head) items per warp with all their loads issued first was slower (H100 2026-11-25,
// 9B 4096-row chunk, 24 layers: 1258 -> 1440 us bf16, 1653 -> 1793 us with the FP8 twin).
constexpr int kGatedVecDim = 4 * kWarp;

__global__ void gated_rmsnorm_vec4_kernel(GatedRmsNormBf16Params p) {
    const int lane = threadIdx.x % kWarp;
    const float4 w = *reinterpret_cast<const float4*>(p.w + 4 * lane);  // weights: before the wait
    pdl_wait();  // programmatic launch (decode graphs): x comes from the predecessor
    pdl_launch_dependents();
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int item = blockIdx.x * kHeadWarpsPerBlock + threadIdx.x / kWarp;
    if (item >= rows * p.heads) return;
    const int row = item / p.heads;
    const int head = item % p.heads;
    const int64_t xo = (static_cast<int64_t>(row) * p.heads + head) * kGatedVecDim + 4 * lane;
    float v[4], z[4];
    load4(p.x + xo, v);
    load4(p.z + row * p.z_row_stride + static_cast<int64_t>(head) * kGatedVecDim + 4 * lane, z);
    const float ss = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
    const float rs = rsqrtf(warp_sum(ss) / kGatedVecDim + p.eps);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0] * rs * w.x * silu(z[0]), v[1] * rs * w.y * silu(z[1]));
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2] * rs * w.z * silu(z[2]), v[3] * rs * w.w * silu(z[3]));
    uint2 u;
    u.x = *reinterpret_cast<const uint32_t*>(&lo);
    u.y = *reinterpret_cast<const uint32_t*>(&hi);
    if (!p.yq_only) *reinterpret_cast<uint2*>(p.y + xo) = u;  // yq_only: the twin is the only reader's input
    // The FP8 twin: a head of 128 is one activation group, this warp's.
    if (p.yq) {
        const float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
        const float r[4] = {a.x, a.y, b.x, b.y};
        act_quant_group<kWarp, 4>(r, true, p.yq + xo, p.yq_scale + head * p.yq_scale_ld + row);
    }
}

}  // namespace

cudaError_t add_rmsnorm_launch(const AddRmsNormBf16Params& p, cudaStream_t stream) {
    if (!p.h || !p.w || !p.y || p.dim <= 0 || p.dim % kVec != 0 ||
        p.dim > kNormThreads * kNormMaxVecPerThread * kVec || p.max_rows <= 0)
        return cudaErrorInvalidValue;
    if (p.yq && (p.last_row_only || !act_twin_ok(p.yq, p.yq_scale, p.yq_scale_ld, p.dim, p.max_rows)))
        return cudaErrorInvalidValue;
    if (p.yq_only && !p.yq) return cudaErrorInvalidValue;
    const int blocks = p.last_row_only ? 1 : p.max_rows;
    // In prefill, a row of fewer than 256 vectors (dim < 2048: the 0.8B's 1024) gets one thread
    // per vector, not 256 threads half of them idle: the 0.8B's 4096-row chunk, 24 input norms,
    // 360 -> 248 us (H200, bench_ops, 2026-11-29). The same bits: the idle warps' partial sums
    // were zeros, added after the others. Decode launches (one row, or a batched step's <= 8)
    // keep 256 threads: with 128 there too, the 0.8B's decode ran 0.891-0.892 ms/token against
    // 0.857-0.858 before (H200, one call, alternating, `frost bench engine --decode 1024`); with
    // decode left at 256, 0.853-0.859 against 0.853-0.863 (the next call). Not understood: the
    // kernel is one block either way; it is what the graphs measured.
    const bool decode = p.last_row_only || p.max_rows <= kGemvMaxRows;
    const int threads = decode ? kNormThreads : std::min(kNormThreads, ceil_div(p.dim / kVec, kWarp) * kWarp);
    const int per_thread = ceil_div(p.dim / kVec, threads);  // vectors each thread holds
    AddRmsNormBf16Params q = p;
    // The early trigger is for decode steps only; FROST_NORM_EARLY=0 turns it off (A/B runs of one
    // binary, the same bits).
    static const bool early_on = !util::env_is("FROST_NORM_EARLY", "0");
    if (q.pdl == 2 && (!decode || !early_on)) q.pdl = 1;
    const cudaError_t err =
        per_thread <= 1   ? launch_kernel(add_rmsnorm_kernel<1>, dim3(blocks), dim3(threads), 0, stream, q.pdl != 0, q)
        : per_thread <= 2 ? launch_kernel(add_rmsnorm_kernel<2>, dim3(blocks), dim3(threads), 0, stream, q.pdl != 0, q)
                          : launch_kernel(add_rmsnorm_kernel<kNormMaxVecPerThread>, dim3(blocks), dim3(threads), 0,
                                          stream, q.pdl != 0, q);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

KernelCost add_rmsnorm_cost(const AddRmsNormBf16Params& p, int rows) {
    const int r = p.last_row_only ? 1 : rows;
    const double elems = static_cast<double>(r) * p.dim;
    const double io = (p.delta ? 4.0 : 2.0) - (p.yq_only ? 1.0 : 0.0);  // h (+ delta read, h write) and y
    const double twin = p.yq ? act_twin_bytes(elems) : 0.0;
    return {elems * sizeof(bf16) * io + p.dim * sizeof(float) + twin, elems * 5.0};
}

namespace {
// The layout of qk_norm_rope_kernel for a head_dim (see there): contiguous runs for 128 and 256.
template <bool kKv>
auto qk_norm_rope_kernel_for(int head_dim) {
    static const bool strided = util::env_is("FROST_QK_ROPE_STRIDED", "1");
    if (!strided && head_dim == 8 * kWarp) return qk_norm_rope_kernel<kKv, 8>;
    if (!strided && head_dim == 4 * kWarp) return qk_norm_rope_kernel<kKv, 4>;
    return qk_norm_rope_kernel<kKv, 0>;
}
}  // namespace

cudaError_t qk_norm_rope_launch(const QkNormRopeBf16Params& p, cudaStream_t stream) {
    if (!p.q || !p.k || !p.q_w || !p.k_w || !p.cursor || p.head_dim <= 0 ||
        p.head_dim % kWarp != 0 || p.head_dim > kWarp * kHeadMaxPerLane || p.rotary_dim < 0 ||
        p.rotary_dim % (2 * kWarp) != 0 || p.rotary_dim > p.head_dim || p.max_rows <= 0)
        return cudaErrorInvalidValue;
    const int items = p.max_rows * (p.Hq + p.Hkv);
    const cudaError_t err = launch_kernel(qk_norm_rope_kernel_for<false>(p.head_dim),
                                          dim3(ceil_div(items, kHeadWarpsPerBlock)), dim3(kHeadWarpsPerBlock * kWarp),
                                          0, stream, p.pdl != 0, p, KvAppendBf16Params{});
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

bool qk_norm_rope_kv_applies(const QkRopeKvBf16Params& f) {
    const QkNormRopeBf16Params& p = f.qk;
    const KvAppendBf16Params& kv = f.kv;
    if (!kv.k || !kv.v || !kv.k_cache || !kv.v_cache || !kv.cursor || kv.cursor != p.cursor || kv.max_rows != p.max_rows)
        return false;
    // The cache rows are the k heads qk writes: same rows, heads contiguous, the caches' width.
    if (kv.k != p.k || kv.src_row_stride != p.k_row_stride || p.k_head_stride != p.head_dim ||
        kv.kv_dim != p.Hkv * p.head_dim)
        return false;
    if (!kv.batch.slots) return !p.batch.cursors;
    return kv.batch.table && kv.batch.cursors == p.batch.cursors && kv.batch.B == kv.max_rows;
}

cudaError_t qk_norm_rope_kv_launch(const QkRopeKvBf16Params& f, cudaStream_t stream) {
    const QkNormRopeBf16Params& p = f.qk;
    if (!qk_norm_rope_kv_applies(f) || !p.q || !p.k || !p.q_w || !p.k_w || !p.cursor || p.head_dim <= 0 ||
        p.head_dim % kWarp != 0 || p.head_dim > kWarp * kHeadMaxPerLane || p.rotary_dim < 0 ||
        p.rotary_dim % (2 * kWarp) != 0 || p.rotary_dim > p.head_dim || p.max_rows <= 0)
        return cudaErrorInvalidValue;
    const int items = p.max_rows * (p.Hq + 2 * p.Hkv);
    const cudaError_t err = launch_kernel(qk_norm_rope_kernel_for<true>(p.head_dim),
                                          dim3(ceil_div(items, kHeadWarpsPerBlock)), dim3(kHeadWarpsPerBlock * kWarp),
                                          0, stream, p.pdl != 0, p, f.kv);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

KernelCost qk_norm_rope_cost(const QkNormRopeBf16Params& p, int rows) {
    const double elems = static_cast<double>(rows) * (p.Hq + p.Hkv) * p.head_dim;
    return {elems * sizeof(bf16) * 2.0, elems * 8.0};
}

cudaError_t gated_rmsnorm_launch(const GatedRmsNormBf16Params& p, cudaStream_t stream) {
    if (!p.x || !p.z || !p.w || !p.y || p.dim <= 0 || p.dim % kWarp != 0 ||
        p.dim > kWarp * kHeadMaxPerLane || p.heads <= 0 || p.max_rows <= 0)
        return cudaErrorInvalidValue;
    const int items = p.max_rows * p.heads;
    if (p.yq && !act_twin_ok(p.yq, p.yq_scale, p.yq_scale_ld, int64_t(p.heads) * p.dim, p.max_rows))
        return cudaErrorInvalidValue;
    if (p.yq_only && !p.yq) return cudaErrorInvalidValue;
    const bool vec4 = p.dim == kGatedVecDim && p.z_row_stride % 4 == 0 && reinterpret_cast<uintptr_t>(p.x) % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(p.z) % 8 == 0 && reinterpret_cast<uintptr_t>(p.y) % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
    // The strided kernel's lanes do not hold whole groups: its twin comes from the quantizer after,
    // which reads y, so y is stored there even with yq_only.
    GatedRmsNormBf16Params k = p;
    if (!vec4) {
        k.yq = nullptr;
        k.yq_only = 0;
    }
    const cudaError_t err = launch_kernel(vec4 ? gated_rmsnorm_vec4_kernel : gated_rmsnorm_kernel,
                                          dim3(ceil_div(items, kHeadWarpsPerBlock)),
                                          dim3(kHeadWarpsPerBlock * kWarp), 0, stream, p.pdl != 0, k);
    if (err != cudaSuccess) return err;
    if (p.yq && !vec4) {
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        const int64_t width = int64_t(p.heads) * p.dim;
        return act_quant_fp8_launch(p.y, width, p.max_rows, int32_t(width), p.yq, p.yq_scale, stream);
    }
    return cudaGetLastError();
}

KernelCost gated_rmsnorm_cost(const GatedRmsNormBf16Params& p, int rows) {
    const double elems = static_cast<double>(rows) * p.heads * p.dim;
    const double twin = p.yq ? act_twin_bytes(elems) : 0.0;
    return {elems * sizeof(bf16) * (p.yq_only ? 2.0 : 3.0) + twin, elems * 8.0};
}

}  // namespace frost::kernels
