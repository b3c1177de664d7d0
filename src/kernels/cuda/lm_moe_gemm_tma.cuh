// The TMA-fed persistent tile of the MoE prefill's grouped GEMMs (tile shapes 5 and 6,
// lm_moe_prefill_tma.cu), sm_90a only: acc[128 x BN] = A[128, K] · B[BN, K]^T, bf16 operands,
// fp32 accumulation, on the warp-specialised ring of lm_moe_gemm_ws.cuh (a producer warpgroup,
// two wgmma consumer warpgroups, full / empty mbarriers per stage, the ring carried across the
// tiles a persistent block takes). What differs from shape 4: the expert weights, dense
// [E, N, K] bf16, come by TMA (cuTensorMapEncodeTiled maps over all experts at once, 128-byte
// swizzle, zero fill past K and past the last row), one elected thread issuing each stage's boxes
// with an expect-tx arrival, so the weight stream needs no per-thread copies and no row table. A:
// gate|up gathers token rows through entry_row with cp.async (the producer warpgroup's 128
// threads, arriving on the same barrier); down reads the grouped activations `ag`, whose entries
// of one tile are contiguous, so A comes by TMA too (maps whose width is the group's F: the
// columns past F arrive as zeros, never another group's stale values).
//
// Measured on the H100 (ncu --set full, 35B-A3B shape, 4096 rows, base clocks; the old cp.async
// wgmma tile, shape 3, after the slash): gate|up 604 us for 128 x 256 (DRAM 76 % busy but 1.54 GB
// moved: a group of ~130 rows takes two row tiles, each streaming the expert's weights), 615 us
// for 192 x 128 (1.24 GB, DRAM 60 %, L2 70 %) / 633 us (DRAM 58 %); down 390 us for 128 x 256,
// 283 us for 192 x 128 (0.71 GB at 2.5 TB/s, L2 87 %) / 400 us. So at 4k rows both GEMMs are
// now bound by L2 -> SM traffic, most of it A re-read once per column tile (gate|up 8, down 16).
// (Not on the H200: keeping down's A resident across column tiles, which removed those re-reads,
// gained nothing, and ncu put both GEMMs at 4096 rows at ~70 % of the DRAM peak, ~85 % of the copy
// rate: the weight bytes bound them; lm_moe_prefill_tma.cu has the measurement.)
// Tried and dropped (correct, slower, same run): the 192 x 128 tile in clusters of 2 / 4 blocks
// sharing each A tile by TMA multicast (gate|up's rows gathered contiguously first): 1.89 / 2.85
// ms per launch at 4k against 0.98; the clusters step in lockstep on every stage release. A
// 192 x 256 tile (three consumer warpgroups of m64n256) does not fit: 512 threads get 128
// registers, the accumulators alone need 128 (ptxas C7602 even with setmaxnreg).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_moe.h"

namespace frost::kernels::moe {

// W consumer warpgroups of 64 rows each (BM = 64 W rows per tile), BN columns (gate|up: BN / 2
// gate rows then the matching BN / 2 up rows), S stages of 64 K each, 1024-byte aligned; the
// stages' full / empty barriers after them.
template <int BN_, int S_, int W_>
struct TmaTile {
    static constexpr int W = W_, BM = 64 * W, BN = BN_, BK = 64, stages = S_;
    static constexpr int threads = 128 * (W + 1);  // warpgroup 0 produces, 1..W consume
    static constexpr uint32_t a_bytes = BM * BK * 2, b_bytes = BN * BK * 2, stage_bytes = a_bytes + b_bytes;
    static constexpr size_t smem = 1024 + size_t(stages) * stage_bytes + 2 * stages * 8;
    static_assert(BN == 128 || BN == 256, "wgmma m64n128 / m64n256");
    static_assert(smem <= 227 * 1024, "one block per SM");
};

// The weight maps (b: routed experts over all E, and the shared expert) and, for down, the maps
// of the grouped activations (a: F = I for routed groups, Is for the shared group).
struct MoeTmaMaps {
    CUtensorMap a_routed, a_shared, b_routed, b_shared;
};

// Gate|up, then down, on TmaTile<256, 4, 2> (shape 5), <128, 6, 2> (shape 6) or <128, 5, 3>
// (shape 7: 192-row tiles, so a group of up to 192 entries streams its expert's weights once; no
// longer picked by default, lm_moe_prefill.cu's pick_tile_shape says why),
// after the grouping built the tile table at the shape's rows; `tile_capacity` bounds its tile count. Enqueues only;
// cudaErrorInvalidValue when the driver refuses a map (e.g. an unaligned base).
// p.fp8 = 1: the weights from p's FP8 stacks (MoeBf16Params::fp8), when tma_reads_fp8(p); p.fp8 = 2:
// W8A8 (shapes 5 and 6 only), when tma_w8a8_ok(p).
cudaError_t tma_gemms_launch(const MoeBf16Params& p, int tile_capacity, int shape, cudaStream_t stream);
// Whether p's four FP8 stacks fit the TMA tiles' FP8 path (set, 16-byte aligned rows of a multiple
// of 16 bytes, scale blocks of a multiple of 16 columns).
bool tma_reads_fp8(const MoeBf16Params& p);
// Whether p fits the W8A8 tile (p.fp8 = 2; MoeBf16Params says what it needs).
bool tma_w8a8_ok(const MoeBf16Params& p);

}  // namespace frost::kernels::moe
