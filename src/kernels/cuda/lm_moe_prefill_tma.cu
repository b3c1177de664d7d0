// The MoE prefill's grouped GEMMs on the TMA-fed persistent tile (tile shapes 5 and 6,
// lm_moe_gemm_tma.cuh; sm_90a): the same inputs, outputs and bits-per-element contract as the
// other shapes' gate|up and down kernels in lm_moe_prefill.cu (each output element is one
// thread's fixed-order K sum, no atomics in a value). A block per SM takes the work items (row
// tile of the device-side tile table x column tile, the column tiles of one row tile adjacent,
// so an expert's A rows are re-read from L2) in order from a device counter (next_item).
// Measured and dropped (H200, 2026-12-01, 35B-A3B shape, bench_moe_prefill's two GEMMs):
//  - clusters of two blocks, an expert's two row tiles per cluster, each block loading half of the
//    weight tile and multicasting it to both (consumers release to both blocks' empty barriers; a
//    lone row tile's cluster takes two column tiles): same bits, 4096 rows 0.648-0.652 -> 0.652-0.687
//    ms, 8192 1.128-1.130 -> 1.166-1.168, Qwen3-Next 4096 0.998 -> 0.977;
//  - the down GEMM with each item's activations resident in shared memory (forty-sixth session,
//    as a temporary tile shape 8, not the branch's shape 8 below: an item = one row tile and 2 / 4
//    / 8 of its column tiles; the producer loaded the whole 128 x F A once (F <= 512: 128 KB, its
//    own full / empty barriers, released after the item's last wgmma) and streamed the weight slabs
//    through a 3-stage ring of 32 KB; the same wgmma sequence, so shape 5's bits: a bitwise test
//    against shape 5 passed at 1-8 column tiles per item, K tails and an idle consumer warpgroup,
//    as did the 57 MoE tests). It removes a quarter of the down GEMM's L2 -> SM bytes (A once per
//    item, not once per column tile) and gained nothing, two rounds, both GEMMs, ms: 4096 rows
//    0.595-0.602 -> 0.603-0.612 (2 or 4 tiles per item), 0.624-0.629 (8); 8192 0.971-1.009 ->
//    1.023-1.052; 16384 1.828-1.847 -> 1.853-1.886; Qwen3-Next 4096 / 16384 0.937-0.939 /
//    2.365-2.382 -> 0.952 / 2.444-2.448. So the A re-reads are not what bounds down. ncu (4096
//    rows, second launch, clocks unlocked), shape 5 -> 8: down 207 -> 214 us, L2 -> SM bytes 1.28
//    -> 0.96 GB, L2 throughput 92 -> 87 %, DRAM reads 577 -> 584 MB at 71 -> 70 % of the DRAM peak.
//    What bounds both GEMMs at 4096 rows is DRAM: down moves 577 MB read + 151 MB of yg written in
//    207 us (3.5 TB/s, ~88 % of the copy rate the engine bench measures), gate|up 1.21 GB read + 38
//    MB of ag in 375 us (3.3 TB/s, 69 % of peak; ~0.14 GB more than its weights and rows, most
//    likely gathered x rows read again: see next_item).
//  - the producer asking L2 for the weight boxes 4 / 8 / 12 / 16 k-steps ahead
//    (cp.async.bulk.prefetch.tensor): DRAM reads 1.21 -> 1.68 GB, 4096 rows 0.661-0.671 ->
//    0.733-0.772 ms.
//  - wgmma wait<1> with each stage released a k-step later (a template parameter, branch
//    wip/moe-next): 4096 rows 0.637 -> 0.660, 16384 2.036-2.046 -> 2.033; engine 4k no gain;
//  - tile shape 8, the tokens on wgmma's N side (N 16-128 per item, no padded rows; same branch):
//    4096 rows 0.637 -> 0.665, Qwen3-Next 16384 2.659-2.663 -> 3.078-3.111.
//  - both GEMMs in one persistent launch (H200, 2026-12-01, thirty-eighth session): gate|up's items
//    claimed first, then down's; each consumer warpgroup counted itself in per row tile after an
//    item's stores (warpgroup barrier, one thread's __threadfence + atomicAdd), and a down item's
//    producer waited for its tile's count (ld.acquire) before copying the activations by cp.async
//    (weights by TMA). Same bits (a bitwise test against the two launches with poisoned
//    activations passed, 56 of 56 MoE tests), but slower, two rounds: 4096 rows 0.595 / 0.601 ->
//    0.604 / 0.603 ms, 8192 1.011-1.012 -> 1.050-1.060, 16384 1.803-1.850 -> 1.908-1.929,
//    Qwen3-Next 16384 2.388-2.408 -> 2.507-2.550; engine 16k 114.2-114.8 -> 116.3-117.0 ms. The
//    gate|up tail it fills is ~half an item (~15 us) a launch; most likely the fence per item and
//    warpgroup, and the down rows by cp.async instead of TMA, cost more than that.
// (Variants of a wgmma loop belong in template parameters: a runtime branch between two wgmma
// waits made ptxas serialize every wgmma of the kernel, C7518.)
// Landed (same session): the epilogue's 16-byte stores (quad_gather). ncu's stall sampling of the
// down GEMM at 4096 rows put 20 % of its warps' samples on the LSU queue, its 4-byte stores filling
// half of each sector; both GEMMs, alternating processes: 4096 rows 0.649-0.655 -> 0.599-0.603 ms,
// 8192 1.154 -> 1.007-1.031, 16384 2.071-2.073 -> 1.826-1.847, Qwen3-Next 4096 1.012-1.019 ->
// 0.964-0.967.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/lm_attn_tma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_gemm_fp8_wgmma.cuh"
#include "kernels/cuda/lm_mbarrier.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_gemm_tma.cuh"
#include "kernels/cuda/lm_moe_gemm_ws.cuh"
#include "kernels/cuda/lm_quad_store.cuh"
#include "util/env.h"

namespace frost::kernels::moe {
namespace {

__host__ __device__ inline int tma_width(const MoeBf16Params& p) { return p.I > p.Is ? p.I : p.Is; }
// Column tiles per row tile: gate|up BN / 2 activation columns, down BN output columns.
template <class T>
__host__ __device__ inline int tma_col_tiles(const MoeBf16Params& p, bool down) {
    return down ? (p.H + T::BN - 1) / T::BN : (tma_width(p) + T::BN / 2 - 1) / (T::BN / 2);
}

#if defined(FROST_ATTN_WGMMA)  // (the kernels that use these exist only in the sm_90a code)
template <int BN>
__device__ inline void wgmma_tile_ss(float (&d)[BN / 2], uint64_t da, uint64_t db) {
    if constexpr (BN == 256) lm::wgmma_m64n256k16_ss(d, da, db);
    else lm::wgmma_m64n128k16_ss(d, da, db);
}
#endif

// One work item's coordinates; false when the item has no columns (a narrower FFN than the
// widest: the same test on the producer's and the consumers' side, so the ring stays in step).
struct Item {
    int row0, row_end, group, F, n0, K;
    bool shared;
};
template <class T, bool kDown>
__device__ inline bool item_of(const MoeBf16Params& p, int w, int nt, Item& it) {
    const int t = w / nt;
    it.group = p.tile_table[1 + 2 * t];
    it.row0 = p.tile_table[2 + 2 * t];
    it.row_end = min(it.row0 + T::BM, p.group_offsets[it.group + 1]);
    it.shared = it.group == p.E;
    it.F = it.shared ? p.Is : p.I;
    it.n0 = (w % nt) * (kDown ? T::BN : T::BN / 2);
    it.K = kDown ? it.F : p.H;
    return kDown || it.n0 < it.F;
}

// The next work item of a block: its first is blockIdx.x, each later one the next unclaimed
// item past the grid (a device counter, `claim`, that the grouping's scan zeroed). Claimed in
// order, items that share an expert's weights (its row tiles of one column tile, 4 items apart)
// start within a few microseconds of each other on whatever SMs are free, so the second read of
// those weights comes from L2. With a fixed stride of the grid the blocks drift apart over the
// items they take. Measured (H200, 35B-A3B shape, 4096 rows, ncu): gate|up read 1.44 GB from
// DRAM for 1.09 GB of weights and rows with the stride, 1.21 GB claimed (417 -> 385 us); down
// 703 -> 577 MB (290 -> 242 us). bench_moe_prefill's two GEMMs: 4096 rows 0.724-0.733 ->
// 0.639-0.641 ms, 8192 rows 1.190 -> 1.123-1.136, 1024 rows unchanged. Tried with it and
// dropped: gate|up's x rows gathered with an L2 evict-last policy (1.21 -> 1.15 GB read, yet
// 4096 rows 0.636-0.643 -> 0.650-0.652 ms, 16k 2.11 -> 2.08, the engine's 4k TTFT unchanged):
// not DRAM then (L2 88 % busy in ncu). Nor L2 -> SM traffic alone: the clusters in the header,
// which halve an expert's weight reads from L2, were no faster. Also measured and dropped
// (forty-sixth session, H200): gate|up's items taken by column within each group, so an
// expert's row tiles that read one weight slab are claimed back to back (same bits, a bitwise
// test passed): DRAM reads 1.21 GB either way (so the extra ~0.14 GB is not second row tiles
// missing their weights; most likely the gathered x rows, which the evict-last hint above cut),
// bench_moe_prefill 4096 / 8192 / 16384 rows 0.604-0.614 / 1.027-1.041 / 1.859-1.898 ms row-major
// against 0.606 / 1.051-1.056 / 1.881-1.887, engine 4k / 16k 27.80-28.05 / 116.76-117.45 against
// 27.53-28.27 / 116.55-117.17 (noise).
// The gate|up producer warpgroup's 128 threads all need the item: thread 0 claims it, named
// barrier 1 hands it over (two slots, so the next claim cannot overwrite a slot before every
// thread has read it). Which block runs an item does not change its bits. `claim` null: the
// fixed stride instead (FROST_MOE_CLAIM=0, for A/B runs).
template <bool kOneThread>
__device__ inline int next_item(int32_t* claim, int w, int grab, int* slot) {
    if (!claim) return w + static_cast<int>(gridDim.x);
    if constexpr (kOneThread) {
        return static_cast<int>(gridDim.x) + atomicAdd(claim, 1);
    } else {
        if (threadIdx.x == 0) slot[grab & 1] = static_cast<int>(gridDim.x) + atomicAdd(claim, 1);
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        return slot[grab & 1];
    }
}

constexpr int kFp8Slots = 4;  // FP8 stacks: k-steps of weight bytes staged ahead (below)

#if defined(FROST_ATTN_WGMMA)
// FP8 weights (MoeBf16Params::fp8; opt-in, FROST_MOE_FP8_DIRECT=1 in the ops layer). The weight
// bytes of each k-step come by TMA (boxes of 64 bytes x rows, no swizzle: row j of the piece at
// j * 64) into a staging ring of kFp8Slots pieces, issued kFp8Slots - 1 steps ahead inside an
// item, each slot on its own full barrier; the producer warpgroup's 128 threads then convert a
// piece into the stage's bf16 weight rows, in the layout the bf16 TMA box has (128-byte rows,
// 16-byte chunk c of row r at c ^ (r % 8)), and arrive on the stage's full barrier. Thread t takes
// the 16-byte piece q = t % 4 (16 weights, k0 + 16 q ..) of tile rows j = t / 4 + 32 i, i.e. bf16
// chunks 2q and 2q + 1 of those rows. A row outside its matrix (past F of a narrower expert, past
// H) is stored as zeros, like k past K (TMA's zero fill): such rows reach only the outputs the
// epilogue drops. The values are dequant_bf16_launch's, bf16(e4m3 * scale), so the GEMMs' bits
// equal the dequantize-then-bf16 path's (kernels_test_cuda_moe_prefill, every TMA tile shape).
// Measured (H200, 2026-12-04, sixtieth session; 35B-A3B FP8, first 20 layers, cold TTFT 1k / 4k /
// 16k through the engine, alternating with the dequantization in one call, ms), all slower than
// dequantizing the layer into bf16 first (24.7 / 38.4-39.0 / 165.7-168.4), hence opt-in:
//  - the producer threads loading each piece from global memory into registers, one step ahead,
//    with a register copy between pieces that waited for the loads: 29.2-29.4 / 53.2-53.6 /
//    222.1-222.9; two alternating pieces: 31.3 / 55.8-55.9 / 231.4-231.6;
//  - this staging ring: 28.6-28.8 / 52.2-52.3 / 218.4-218.5.
// So neither the loads in flight nor (fp8_store) the conversion instructions' pipe is the limit;
// the likelier one is the producer warpgroup's issue rate (one warp per scheduler converting 16384
// weights a k-step of the 256-column tile while the consumers' wgmma take ~1000 cycles). Next:
// the conversion spread over the consumer warpgroups while their wgmma run, or FP8 wgmma on
// activations quantized per 128-wide group (the dense prefill's W8A8 mode).

template <int BN>
struct Fp8Piece {
    static constexpr int rows = BN / 32;  // tile rows per thread
    uint4 w[rows];
    float s[rows];   // each row's scale for this k-step
    uint32_t valid;  // bit i: row i inside its matrix and k inside K
};

// The weight-stack row of tile row j (gate|up: BN / 2 gate rows then the matching up rows), or -1.
template <int BN, bool kDown>
__device__ inline int64_t fp8_row(const MoeBf16Params& p, const Item& it, int j) {
    if constexpr (kDown) {
        const int n = it.n0 + j;
        return n < p.H ? (it.shared ? 0 : int64_t(it.group) * p.H) + n : -1;
    } else {
        const int col = it.n0 + j % (BN / 2);
        if (col >= it.F) return -1;
        return (it.shared ? 0 : int64_t(it.group) * 2 * p.I) + (j >= BN / 2 ? it.F : 0) + col;
    }
}

template <bool kDown>
__device__ inline const MoeFp8Weights& fp8_stack(const MoeBf16Params& p, const Item& it) {
    return kDown ? (it.shared ? p.fp8_shared_down : p.fp8_down) : (it.shared ? p.fp8_shared_gate_up : p.fp8_gate_up);
}

// Thread 0: k-step k0's weight boxes into staging slot `dst` (barrier `bar`).
template <int BN, bool kDown>
__device__ inline void fp8_issue(const MoeBf16Params& p, const MoeTmaMaps& maps, const Item& it, int k0, uint32_t dst,
                                 uint32_t bar) {
    const CUtensorMap* m = it.shared ? &maps.b_shared : &maps.b_routed;
    const int row = (it.shared ? 0 : it.group * (kDown ? p.H : 2 * p.I)) + it.n0;
    attn_hopper::mbar_arrive_expect_tx(bar, BN * 64);
    if constexpr (kDown) {
        attn_hopper::tma_load_2d(dst, m, k0, row, bar);
    } else {
        attn_hopper::tma_load_2d(dst, m, k0, row, bar);
        attn_hopper::tma_load_2d(dst + (BN / 2) * 64, m, k0, row + it.F, bar);
    }
}

// The scales of this thread's rows for k-step k0 (issued before the wait for the piece).
template <int BN, bool kDown>
__device__ inline void fp8_scales(const MoeBf16Params& p, const Item& it, int k0, Fp8Piece<BN>& f) {
    const MoeFp8Weights& m = fp8_stack<kDown>(p, it);
    const int t = threadIdx.x % 128, k = k0 + 16 * (t % 4);
    const int scale_cols = (it.K + m.block_k - 1) / m.block_k;
    f.valid = 0;
#pragma unroll
    for (int i = 0; i < Fp8Piece<BN>::rows; ++i) {
        const int64_t row = k < it.K ? fp8_row<BN, kDown>(p, it, t / 4 + 32 * i) : -1;
        f.s[i] = row < 0 ? 0.0f : __ldg(m.scale + (row / m.block_n) * scale_cols + k / m.block_k);
        f.valid |= row < 0 ? 0u : 1u << i;
    }
}

// This thread's part of the staged piece at `src`; a row outside its matrix reads as zeros.
template <int BN>
__device__ inline void fp8_read(uint32_t src, Fp8Piece<BN>& f) {
    const int t = threadIdx.x % 128;
#pragma unroll
    for (int i = 0; i < Fp8Piece<BN>::rows; ++i) {
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(src + (t / 4 + 32 * i) * 64 + (t % 4) * 16)
                     : "memory");
        f.w[i] = (f.valid >> i) & 1u ? v : make_uint4(0, 0, 0, 0);
    }
}

// Converts a piece to bf16(e4m3 * scale), dequant_bf16_launch's arithmetic, into the stage's
// weight rows at `b`. (Measured and dropped, same bits: each e4m3 byte placed into fp32 bits by
// integer operations and scaled by 2^120 instead of the hardware e4m3x2 -> f16x2 -> f32
// conversions: 35B-A3B FP8 cold TTFT at 4k 57.8-58.1 ms in its own call, against this form's
// 52.2-52.3 in the call before; the dequantized tile ran 38.4-38.7 in both. So the conversion pipe
// was not the limit; the producer's instruction issue, one warp per scheduler, is the likelier one.)
template <int BN>
__device__ inline void fp8_store(const Fp8Piece<BN>& f, uint32_t b) {
    const int t = threadIdx.x % 128, q = t % 4;
#pragma unroll
    for (int i = 0; i < Fp8Piece<BN>::rows; ++i) {
        const int r = t / 4 + 32 * i;
        const uint32_t words[4] = {f.w[i].x, f.w[i].y, f.w[i].z, f.w[i].w};
        uint32_t packed[8];
#pragma unroll
        for (int h = 0; h < 8; ++h) {
            const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(
                static_cast<__nv_fp8x2_storage_t>((words[h / 2] >> (16 * (h % 2))) & 0xFFFFu), __NV_E4M3);
            const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&raw));
            packed[h] = lm::pack_bf162(v.x * f.s[i], v.y * f.s[i]);
        }
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const uint32_t dst = b + r * 128 + (((2 * q + c) ^ (r & 7)) * 16);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(packed[4 * c]),
                         "r"(packed[4 * c + 1]), "r"(packed[4 * c + 2]), "r"(packed[4 * c + 3])
                         : "memory");
        }
    }
}
#endif

// How the grouped GEMMs read the expert weights (MoeBf16Params::fp8): bf16 stacks; FP8 stacks
// converted to bf16 on their way into shared memory (above); or FP8 stacks times e4m3
// activations on FP8 tensor cores (W8A8, below).
enum WeightRead : int { kReadBf16 = 0, kReadFp8Cvt = 1, kReadW8A8 = 2 };

// W8A8 (kReadW8A8; BN 128): the ring's stages hold the same bytes per row as bf16 ones, 128, now
// 128 e4m3 values of k, so one stage is a whole 128-wide scale block of both operands. A: gate|up
// gathers xq rows (cp.async, as the bf16 rows), down reads agq by TMA; B: the FP8 stacks by TMA,
// both with the 128-byte swizzle. A consumer warpgroup runs four m64n128k32 e4m3 wgmma per stage
// into `part`, waits for them, releases the stage and adds part x (its row's activation scale x
// the tile's weight block scale, rounded to fp32 first) into acc: no more than 128 products are
// summed inside the tensor cores (they accumulate FP8 products at reduced precision), and the
// scales change per block anyway (lm_gemm_fp8_wgmma.cu does the same). The gate|up tile's 64 gate
// rows and 64 up rows each sit inside one 128-row weight block (n0 and F are multiples of 64), as
// do down's 128 rows. Measured (H200, 2026-12-04, sixty-first session; 35B-A3B FP8, first 20
// layers, `frost bench engine --ttft 1024,4096,16384 --reps 2 --fp8-prefill w8a8`, cold TTFT ms,
// one call): 9.56-9.63 / 22.25-22.30 / 101.34-102.23 against 23.62 / 35.75 / 154.09 with the MoE
// exact under the same switch (FROST_MOE_W8A8=0: the dequantized tile, the dense GEMMs W8A8),
// 24.71-24.85 / 38.11-38.62 / 163.91-164.63 all exact, and the bf16 checkpoint's 12.28 / 25.82 /
// 107.64. Only 128-column tiles: the promotion needs two 64-register accumulators.
#if defined(FROST_ATTN_WGMMA)
// Per-channel stacks (one scale per weight row: block_n 1, block_k K, compressed-tensors'
// FP8-dynamic): the weight's scale is the same for every k block, so the promotion applies the
// activation scale alone and the column's weight scale multiplies the finished sum once
// (w8a8_channel_scale), 64 loads per thread per item instead of one per column per block.
struct W8a8Scales {
    const float* a;        // this thread's two rows' activation scales, k block 0 (null: no row)
    const float* a1;
    const float* w_gate;   // 128 x 128 blocks: the tile's weight block scales along k (gate rows /
    const float* w_up;     // down's rows; gate|up: the up rows', down: = w_gate). Per-channel: null
    const float* col_gate; // per-channel: the scales of the tile's gate (down: output) rows n0 ..
    const float* col_up;   // and gate|up's up rows F + n0 ..; null for 128 x 128 blocks
    int64_t ld;            // activation scales: k block stride
};

template <bool kDown>
__device__ inline W8a8Scales w8a8_scales(const MoeBf16Params& p, const Item& it, int cw, int64_t ld) {
    const MoeFp8Weights& m = kDown ? (it.shared ? p.fp8_shared_down : p.fp8_down)
                                   : (it.shared ? p.fp8_shared_gate_up : p.fp8_gate_up);
    const int kcols = (it.K + 127) / 128;
    const int64_t row = (it.shared ? 0 : int64_t(it.group) * (kDown ? p.H : 2 * p.I)) + it.n0;
    W8a8Scales s;
    if (m.block_n == 1) {  // per-channel (tma_w8a8_ok: block_k is then K); H, I multiples of 128
        s.w_gate = s.w_up = nullptr;
        s.col_gate = m.scale + row;
        s.col_up = kDown ? s.col_gate : m.scale + row + it.F;
    } else {
        s.w_gate = m.scale + (row / 128) * kcols;
        s.w_up = kDown ? s.w_gate : m.scale + ((row + it.F) / 128) * kcols;
        s.col_gate = s.col_up = nullptr;
    }
    s.ld = ld;
    const float* base = kDown ? p.agq_scale : p.xq_scale;
    const int e0 = it.row0 + 64 * cw + ws_row(0), e1 = e0 + 8;
    // A row past the tile's group feeds only outputs the epilogue drops: no scale is read for it.
    s.a = e0 < it.row_end ? base + (kDown ? e0 : p.entry_row[e0]) : nullptr;
    s.a1 = e1 < it.row_end ? base + (kDown ? e1 : p.entry_row[e1]) : nullptr;
    return s;
}

// Per-channel: acc's columns times their rows' weight scales (n8 tile i holds columns ws_col(i)
// and the next for both of the thread's rows; gate|up's second half is the up rows).
template <int BN, bool kDown>
__device__ inline void w8a8_channel_scale(const W8a8Scales& sc, float* acc) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        const bool up = !kDown && i >= BN / 16;
        const float* c = up ? sc.col_up + ws_col(i - BN / 16) : sc.col_gate + ws_col(i);
        const float s0 = __ldg(c), s1 = __ldg(c + 1);
        acc[4 * i + 0] *= s0;
        acc[4 * i + 1] *= s1;
        acc[4 * i + 2] *= s0;
        acc[4 * i + 3] *= s1;
    }
}
#endif

// kDown false: ag[e, n0 .. n0 + BN/2) = bf16(silu(x_r · Wg^T) * (x_r · Wu^T)), x_r gathered
// through entry_row. kDown true: yg[e, n0 .. n0 + BN) = bf16(ag[e, :F] · Wd^T).
// The producer tells the consumers which item a ring position starts in item_at (written by
// thread 0 before its arrival on the stage's full barrier, read after the wait on it); -1 after
// the last item, on a stage whose barrier completes with no data.
// kFp8: the weights come from p's FP8 stacks, staged by TMA and converted by the producer threads
// (above kFp8Slots); down's A still by TMA. A stage's full barrier then counts the producer
// threads' conversions too; `maps`' b maps are the FP8 stacks' (fp8_maps).
// kW kReadW8A8: e4m3 A and B (above); `maps` then map xq / agq and the FP8 stacks in 128-byte
// boxes; a_scale_ld is the activation scales' k block stride (act_scale_ld of xq's / agq's rows).
template <class T, bool kDown, int kW>
__global__ void __launch_bounds__(T::threads, 1)
    moe_tma_kernel(MoeBf16Params p, const __grid_constant__ MoeTmaMaps maps, int claim_items,
                   [[maybe_unused]] int64_t a_scale_ld) {
#if defined(FROST_ATTN_WGMMA)
    constexpr bool kFp8 = kW == kReadFp8Cvt, kQ = kW == kReadW8A8;
    static_assert(!kQ || T::BN == 128, "W8A8: two 64-register accumulators (m64n128)");
    // k values per stage: 128 bytes of a row either way.
    constexpr int kBk = kQ ? 128 : T::BK;
    constexpr int S = T::stages;
    // Arrivals on a full barrier: gate|up's 128 cp.async arrivals (A), with kFp8 the 128
    // converting threads' (B), and one expect-tx arrival where a TMA box lands (down's A, bf16 B).
    constexpr bool kCpA = !kDown, kTx = kDown || !kFp8, kAllThreads = kCpA || kFp8;
    constexpr int kFullArrivals = (kCpA ? 128 : 0) + (kFp8 ? 128 : 0) + (kTx ? 1 : 0);
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ int item_at[S], claimed[2];
    const uint32_t base = (lm::smem_addr(smem_raw) + 1023u) & ~1023u, bars = base + S * T::stage_bytes;
    const lm::StageRing<S, T::stage_bytes> ring{base, bars};
    // kFp8: the staging ring after 256 bytes of barriers (the stages' 2S, then one per slot).
    [[maybe_unused]] const auto fp8_bar = [&](uint32_t g) { return bars + 16 * S + 8 * (g % kFp8Slots); };
    [[maybe_unused]] const auto fp8_slot = [&](uint32_t g) { return bars + 256 + (g % kFp8Slots) * (T::BN * 64); };
    [[maybe_unused]] uint32_t sg = 0;  // staged k-steps over the block's whole run
    if (threadIdx.x == 0) {
        if constexpr (kFp8)
            for (int s = 0; s < kFp8Slots; ++s) lm::mbar_init(fp8_bar(s), 1);
        for (int s = 0; s < S; ++s) {
            lm::mbar_init(bars + 8 * s, kFullArrivals);
            lm::mbar_init(bars + 8 * (S + s), 4 * T::W);  // lane 0 of each consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int width = tma_width(p), nt = tma_col_tiles<T>(p, kDown);
    const int wg = threadIdx.x / 128;
    uint32_t it = 0;  // k-steps over the block's whole run: the ring position
    if (wg == 0) {
        if (!kAllThreads && threadIdx.x != 0) return;  // bf16 down: one thread issues every box
        if (threadIdx.x == 0) {
            attn_hopper::tma_prefetch_map(&maps.b_routed);
            attn_hopper::tma_prefetch_map(&maps.b_shared);
        }
        const int total = p.tile_table[0] * nt, c = threadIdx.x % 8, r0 = threadIdx.x / 8;
        int32_t* claim = claim_items ? p.group_offsets + p.E + (kDown ? 3 : 2) : nullptr;
        int grab = 0;
        for (int w = blockIdx.x; w < total; w = next_item<!kAllThreads>(claim, w, grab++, claimed)) {
            Item item;
            if (!item_of<T, kDown>(p, w, nt, item)) continue;
            [[maybe_unused]] const CUtensorMap* bmap = item.shared ? &maps.b_shared : &maps.b_routed;
            [[maybe_unused]] const CUtensorMap* amap = item.shared ? &maps.a_shared : &maps.a_routed;
            // Weight rows of this tile in the map: down, output rows n0..; gate|up, gate rows n0..
            // and up rows F + n0.. of the expert (rows past F land in outputs the epilogue drops).
            [[maybe_unused]] const int brow = (item.shared ? 0 : item.group * (kDown ? p.H : 2 * p.I)) + item.n0;
            // Gate|up's gathered rows, as bytes (bf16 x, or its e4m3 xq with W8A8).
            const unsigned char* a[T::BM / 16];
            if constexpr (!kDown) {
                const unsigned char* src = kQ ? p.xq : reinterpret_cast<const unsigned char*>(p.x);
                const int64_t row_bytes = int64_t(p.H) * (kQ ? 1 : 2);
#pragma unroll
                for (int i = 0; i < T::BM / 16; ++i) {
                    const int e = item.row0 + r0 + 16 * i;
                    a[i] = e < item.row_end ? src + static_cast<int64_t>(p.entry_row[e]) * row_bytes : nullptr;
                }
            }
            const int k_tiles = (item.K + kBk - 1) / kBk;
            // One k-step into ring position `it`: its boxes / copies, and with kFp8 `piece`'s
            // weights converted into it (their loads issued a step earlier).
            const auto step = [&](int kt, [[maybe_unused]] const Fp8Piece<T::BN>& piece) {
                const int k0 = kt * kBk;
                if (it >= S) lm::mbar_wait(ring.empty(it), ring.phase(it) ^ 1);
                const uint32_t st = ring.stage(it);
                if (threadIdx.x == 0) {
                    if (kt == 0) item_at[it % S] = w;
                    if constexpr (kDown) {
                        attn_hopper::mbar_arrive_expect_tx(ring.full(it), kFp8 ? T::a_bytes : T::a_bytes + T::b_bytes);
                        attn_hopper::tma_load_2d(st, amap, k0, item.row0, ring.full(it));
                        if constexpr (!kFp8) attn_hopper::tma_load_2d(st + T::a_bytes, bmap, k0, brow, ring.full(it));
                    } else if constexpr (!kFp8) {
                        attn_hopper::mbar_arrive_expect_tx(ring.full(it), T::b_bytes);
                        attn_hopper::tma_load_2d(st + T::a_bytes, bmap, k0, brow, ring.full(it));
                        attn_hopper::tma_load_2d(st + T::a_bytes + (T::BN / 2) * 128, bmap, k0, brow + item.F, ring.full(it));
                    }
                }
                if constexpr (!kDown) {
                    // A null row is not copied (its products land only in dropped outputs); chunks
                    // past K are zero-filled (they would enter every output). In bytes: 128 a row.
                    const int col = kt * 128 + c * 16;
#pragma unroll
                    for (int i = 0; i < T::BM / 16; ++i) {
                        const int r = r0 + 16 * i;
                        const uint32_t dst = st + r * 128 + ((c ^ (r & 7)) * 16);
                        if (col >= item.K * (kQ ? 1 : 2))
                            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 0;\n" ::"r"(dst), "l"(p.x));
                        else if (a[i])
                            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(a[i] + col));
                    }
                    lm::mbar_arrive_cp_async(ring.full(it));
                }
                if constexpr (kFp8) {  // after A's copies are on their way
                    fp8_store<T::BN>(piece, st + T::a_bytes);
                    // The stores (generic proxy) before the wgmma that reads them (async proxy).
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    lm::mbar_arrive(ring.full(it));
                }
                ++it;
            };
            if constexpr (kFp8) {
                // Staging slot of step kt: (sg + kt) % kFp8Slots; thread 0 keeps kFp8Slots - 1 steps
                // of the item in flight, each issued into the slot all threads finished reading
                // (the named barrier after the reads of the step before).
                if (threadIdx.x == 0)
                    for (int j = 0; j < kFp8Slots - 1 && j < k_tiles; ++j)
                        fp8_issue<T::BN, kDown>(p, maps, item, j * T::BK, fp8_slot(sg + j), fp8_bar(sg + j));
                for (int kt = 0; kt < k_tiles; ++kt, ++sg) {
                    if (threadIdx.x == 0 && kt + kFp8Slots - 1 < k_tiles)
                        fp8_issue<T::BN, kDown>(p, maps, item, (kt + kFp8Slots - 1) * T::BK,
                                                fp8_slot(sg + kFp8Slots - 1), fp8_bar(sg + kFp8Slots - 1));
                    Fp8Piece<T::BN> piece;
                    fp8_scales<T::BN, kDown>(p, item, kt * T::BK, piece);
                    lm::mbar_wait(fp8_bar(sg), static_cast<int>((sg / kFp8Slots) & 1));
                    fp8_read<T::BN>(fp8_slot(sg), piece);
                    asm volatile("bar.sync 1, 128;\n" ::: "memory");  // the slot may be refilled
                    step(kt, piece);
                }
            } else {
                const Fp8Piece<T::BN> none{};
                for (int kt = 0; kt < k_tiles; ++kt) step(kt, none);
            }
        }
        // The end: one more ring position, no data, item -1 (its barrier's arrivals as a stage's).
        if (it >= S) lm::mbar_wait(ring.empty(it), ring.phase(it) ^ 1);
        if (threadIdx.x == 0) {
            item_at[it % S] = -1;
            if constexpr (kTx && kAllThreads) lm::mbar_arrive(ring.full(it));  // in place of the expect-tx arrival
        }
        if constexpr (kCpA) lm::mbar_arrive(ring.full(it));  // in place of the cp.async arrival
        if constexpr (kFp8) lm::mbar_arrive(ring.full(it));  // in place of the conversion's
        if constexpr (!kAllThreads) lm::mbar_arrive(ring.full(it));  // bf16 down: the expect-tx one
        if constexpr (!kDown) lm::cp_async_wait<0>();  // no copy may still target shared memory at exit
        return;
    }
    const int cw = wg - 1, lane = threadIdx.x % 32;
    for (;;) {
        lm::mbar_wait(ring.full(it), ring.phase(it));
        const int w = item_at[it % S];
        if (w < 0) break;
        Item item;
        item_of<T, kDown>(p, w, nt, item);  // the producer published only items with columns
        const int k_tiles = (item.K + kBk - 1) / kBk;
        if (item.row0 + 64 * cw >= item.row_end) {  // warpgroup-uniform: no rows; walk the ring only
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                if (kt) lm::mbar_wait(ring.full(it), ring.phase(it));
                if (lane == 0) lm::mbar_arrive(ring.empty(it));
            }
            continue;
        }
        float acc[T::BN / 2];
#pragma unroll
        for (int i = 0; i < T::BN / 2; ++i) acc[i] = 0.0f;
        if constexpr (kQ) {
            const W8a8Scales sc = w8a8_scales<kDown>(p, item, cw, a_scale_ld);
            float part[T::BN / 2];
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                // The block's scales first: their loads land while the stage is awaited.
                const float a0 = sc.a ? __ldg(sc.a + kt * sc.ld) : 0.0f, a1 = sc.a1 ? __ldg(sc.a1 + kt * sc.ld) : 0.0f;
                const float wg = sc.w_gate ? __ldg(sc.w_gate + kt) : 1.0f;
                const float wu = kDown ? wg : sc.w_up ? __ldg(sc.w_up + kt) : 1.0f;
                if (kt) lm::mbar_wait(ring.full(it), ring.phase(it));
                if constexpr (kCpA) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async -> wgmma
                const uint32_t st = ring.stage(it), a_st = st + cw * 64 * 128, b_st = st + T::a_bytes;
                lm::reg_fence(part);
                lm::wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
                    lm::wgmma_m64n128k32_e4m3(part, lm::smem_desc_sw128(a_st + kk * 32, 16, 1024),
                                              lm::smem_desc_sw128(b_st + kk * 32, 16, 1024), kk);
                lm::wgmma_commit();
                lm::wgmma_wait<0>();
                lm::reg_fence(part);
                if (lane == 0) lm::mbar_arrive(ring.empty(it));
                const float g0 = a0 * wg, g1 = a1 * wg, u0 = a0 * wu, u1 = a1 * wu;
#pragma unroll
                for (int i = 0; i < T::BN / 8; ++i) {  // n8 tile i: gate (or down) columns, then up
                    const bool up = !kDown && i >= T::BN / 16;
                    acc[4 * i + 0] = fmaf(part[4 * i + 0], up ? u0 : g0, acc[4 * i + 0]);
                    acc[4 * i + 1] = fmaf(part[4 * i + 1], up ? u0 : g0, acc[4 * i + 1]);
                    acc[4 * i + 2] = fmaf(part[4 * i + 2], up ? u1 : g1, acc[4 * i + 2]);
                    acc[4 * i + 3] = fmaf(part[4 * i + 3], up ? u1 : g1, acc[4 * i + 3]);
                }
            }
            if (sc.col_gate) w8a8_channel_scale<T::BN, kDown>(sc, acc);
        } else {
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                if (kt) lm::mbar_wait(ring.full(it), ring.phase(it));
                if constexpr (kCpA || kFp8) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async / st.shared -> wgmma
                const uint32_t st = ring.stage(it);
                static_assert(T::BK == 64, "wgmma_k64_step");
                lm::wgmma_k64_step(acc, st + cw * 64 * 128, st + T::a_bytes, wgmma_tile_ss<T::BN>);
                if (lane == 0) lm::mbar_arrive(ring.empty(it));
            }
        }
        // acc: n8 tile i (columns 8 i..) in acc[4 i .. 4 i + 3] (ws_row / ws_col). Each group of
        // four tiles goes out as one 16-byte store per lane (quad_gather): the quad's shuffles run
        // for rows past row_end too, and only the store is skipped.
        constexpr int n8 = T::BN / 8;
        const int q = lane % 4;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int e = item.row0 + 64 * cw + ws_row(half);
            const bool row_ok = e < item.row_end;
            if constexpr (kDown) {
                bf16* dst = p.yg + static_cast<int64_t>(e) * p.H;
#pragma unroll
                for (int i0 = 0; i0 < n8; i0 += 4) {
                    uint32_t w[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        w[j] = lm::pack_bf162(acc[4 * (i0 + j) + 2 * half], acc[4 * (i0 + j) + 2 * half + 1]);
                    const uint4 v = lm::quad_gather(w, q);
                    const int col = item.n0 + 8 * (i0 + q);
                    if (row_ok && col < p.H) *reinterpret_cast<uint4*>(dst + col) = v;
                }
            } else {
                bf16* dst = p.ag + static_cast<int64_t>(e) * width;
#pragma unroll
                for (int i0 = 0; i0 < n8 / 2; i0 += 4) {
                    uint32_t w[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int i = i0 + j;
                        const float g0 = acc[4 * i + 2 * half], g1 = acc[4 * i + 2 * half + 1];
                        const float u0 = acc[4 * (i + n8 / 2) + 2 * half], u1 = acc[4 * (i + n8 / 2) + 2 * half + 1];
                        w[j] = lm::pack_bf162(lm::silu(g0) * u0, lm::silu(g1) * u1);
                    }
                    const uint4 v = lm::quad_gather(w, q);
                    const int col = item.n0 + 8 * (i0 + q);
                    if (row_ok && col < item.F) *reinterpret_cast<uint4*>(dst + col) = v;
                }
            }
        }
    }
#else
    __trap();  // not launched: the wgmma shapes run only on compute capability 9.0 (the sm_90a code)
#endif
}

// One persistent block per SM (132, the H100's, if the runtime cannot say).
int sm_count() { return lm::device_sm_count() > 0 ? lm::device_sm_count() : 132; }

// The launch's shared memory: the tile's ring, and with FP8 stacks 256 bytes of barriers and the
// staging slots after it.
template <class T, int kW>
constexpr size_t launch_smem() {
    return kW == kReadFp8Cvt ? 1024 + size_t(T::stages) * T::stage_bytes + 256 + size_t(kFp8Slots) * T::BN * 64 : T::smem;
}

template <class T, int kW>
cudaError_t launch_t(const MoeBf16Params& p, int tile_capacity, cudaStream_t stream) {
    using attn_hopper::encode_tile_map;
    constexpr bool kFp8 = kW == kReadFp8Cvt, kQ = kW == kReadW8A8;
    constexpr auto up = moe_tma_kernel<T, false, kW>, down = moe_tma_kernel<T, true, kW>;
    static_assert(launch_smem<T, kW>() <= 227 * 1024, "one block per SM");
    static_assert(16 * T::stages + 8 * kFp8Slots <= 256, "the barriers before the staging slots");
    const int smem = static_cast<int>(launch_smem<T, kW>());
    cudaError_t e = cudaFuncSetAttribute(up, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(down, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    // Weights: [E * 2I, H] / [2Is, H] (gate|up, boxes of BN / 2 rows) and [E * H, I] / [H, Is]
    // (down, BN rows); down's A: the grouped activations [entries, width], F columns of them.
    const int64_t entries = static_cast<int64_t>(p.max_rows) * (p.k + 1), width = tma_width(p);
    MoeTmaMaps gu{}, dn{};
    if (kQ) {  // down's A: agq's e4m3 bytes (I = Is: one map serves both groups)
        e = attn_hopper::encode_swizzled_map(&dn.a_routed, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.agq, p.I, entries, p.I, T::BM);
        dn.a_shared = dn.a_routed;
    } else {
        e = encode_tile_map(&dn.a_routed, p.ag, p.I, entries, width, T::BM);
        if (e == cudaSuccess) e = encode_tile_map(&dn.a_shared, p.ag, p.Is, entries, width, T::BM);
    }
    if (kFp8 || kQ) {
        // The FP8 stacks: W8A8 in 128-byte boxes with the 128-byte swizzle (what wgmma reads), the
        // converting path in 64-byte boxes for its staging slots (fp8_issue).
        const auto fp8_map = [](CUtensorMap* m, const MoeFp8Weights& w, int64_t cols, int64_t rows, int box_rows) {
            return attn_hopper::encode_box_map(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, w.w, cols, rows, cols, kQ ? 128 : 64,
                                               box_rows, kQ);
        };
        if (e == cudaSuccess) e = fp8_map(&gu.b_routed, p.fp8_gate_up, p.H, int64_t(p.E) * 2 * p.I, T::BN / 2);
        if (e == cudaSuccess) e = fp8_map(&gu.b_shared, p.fp8_shared_gate_up, p.H, 2 * int64_t(p.Is), T::BN / 2);
        if (e == cudaSuccess) e = fp8_map(&dn.b_routed, p.fp8_down, p.I, int64_t(p.E) * p.H, T::BN);
        if (e == cudaSuccess) e = fp8_map(&dn.b_shared, p.fp8_shared_down, p.Is, p.H, T::BN);
    } else {
        if (e == cudaSuccess) e = encode_tile_map(&gu.b_routed, p.experts_gate_up, p.H, int64_t(p.E) * 2 * p.I, p.H, T::BN / 2);
        if (e == cudaSuccess) e = encode_tile_map(&gu.b_shared, p.shared_gate_up, p.H, 2 * int64_t(p.Is), p.H, T::BN / 2);
        if (e == cudaSuccess) e = encode_tile_map(&dn.b_routed, p.experts_down, p.I, int64_t(p.E) * p.H, p.I, T::BN);
        if (e == cudaSuccess) e = encode_tile_map(&dn.b_shared, p.shared_down, p.Is, p.H, p.Is, T::BN);
    }
    if (e != cudaSuccess) return e;
    gu.a_routed = gu.b_routed;  // unused by gate|up (A is gathered): never read
    gu.a_shared = gu.b_shared;
    const int64_t cap_up = int64_t(tile_capacity) * tma_col_tiles<T>(p, false);
    const int64_t cap_down = int64_t(tile_capacity) * tma_col_tiles<T>(p, true);
    const int claim = util::env_is("FROST_MOE_CLAIM", "0") ? 0 : 1;
    // W8A8: every row of x quantized before gate|up, every entry of ag before down (capacity
    // rows: the counts live on the device; rows past them feed only rows nobody reads).
    if (kQ && (e = act_quant_fp8_launch(p.x, p.H, p.max_rows, p.H, p.xq, p.xq_scale, stream)) != cudaSuccess) return e;
    up<<<static_cast<int>(std::min<int64_t>(sm_count(), cap_up)), T::threads, smem, stream>>>(
        p, gu, claim, act_scale_ld(p.max_rows));
    if (kQ && (e = act_quant_fp8_launch(p.ag, width, static_cast<int32_t>(entries), p.I, p.agq, p.agq_scale,
                                        stream)) != cudaSuccess)
        return e;
    down<<<static_cast<int>(std::min<int64_t>(sm_count(), cap_down)), T::threads, smem, stream>>>(
        p, dn, claim, act_scale_ld(static_cast<int32_t>(entries)));
    return cudaGetLastError();
}

}  // namespace

cudaError_t tma_gemms_launch(const MoeBf16Params& p, int tile_capacity, int shape, cudaStream_t stream) {
    // W8A8: the 128 x 128 tile with 6 stages at shapes 5 and 6 (both 128-row tiles: the same tile
    // table); shape 7's 192-row tile would leave 128 registers a thread for two accumulators.
    if (p.fp8 == kReadW8A8)
        return shape == 5 || shape == 6 ? launch_t<TmaTile<128, 6, 2>, kReadW8A8>(p, tile_capacity, stream)
                                        : cudaErrorInvalidValue;
    const bool f = p.fp8 == kReadFp8Cvt;
    switch (shape) {
        // FP8 stacks: one ring stage fewer, for the staging slots (the same tile, so the same bits).
        case 5: return f ? launch_t<TmaTile<256, 3, 2>, kReadFp8Cvt>(p, tile_capacity, stream)
                         : launch_t<TmaTile<256, 4, 2>, kReadBf16>(p, tile_capacity, stream);
        case 6: return f ? launch_t<TmaTile<128, 5, 2>, kReadFp8Cvt>(p, tile_capacity, stream)
                         : launch_t<TmaTile<128, 6, 2>, kReadBf16>(p, tile_capacity, stream);
        case 7: return f ? launch_t<TmaTile<128, 4, 3>, kReadFp8Cvt>(p, tile_capacity, stream)
                         : launch_t<TmaTile<128, 5, 3>, kReadBf16>(p, tile_capacity, stream);
        default: return cudaErrorInvalidValue;
    }
}

bool tma_w8a8_ok(const MoeBf16Params& p) {
    const MoeFp8Weights* ms[] = {&p.fp8_gate_up, &p.fp8_down, &p.fp8_shared_gate_up, &p.fp8_shared_down};
    const int ks[] = {p.H, p.I, p.H, p.Is};
    for (int i = 0; i < 4; ++i) {
        const MoeFp8Weights& m = *ms[i];
        const bool block = m.block_n == kFp8Group && m.block_k == kFp8Group;
        const bool channel = m.block_n == 1 && m.block_k == ks[i];  // one scale per row
        if (!m.w || !m.scale || !lm::aligned16(m.w) || !(block || channel)) return false;
    }
    return p.H % kFp8Group == 0 && p.I % kFp8Group == 0 && p.Is == p.I && p.xq && p.xq_scale && p.agq &&
           p.agq_scale && lm::aligned16(p.xq) && lm::aligned16(p.agq) && lm::aligned16(p.x);
}

bool tma_reads_fp8(const MoeBf16Params& p) {
    const MoeFp8Weights* ms[] = {&p.fp8_gate_up, &p.fp8_down, &p.fp8_shared_gate_up, &p.fp8_shared_down};
    const int ks[] = {p.H, p.I, p.H, p.Is};
    for (int i = 0; i < 4; ++i) {
        const MoeFp8Weights& m = *ms[i];
        if (!m.w || !m.scale || !lm::aligned16(m.w) || m.block_n < 1 || m.block_k < 16 || m.block_k % 16 ||
            ks[i] % 16)
            return false;
    }
    return true;
}

}  // namespace frost::kernels::moe
