// CUDA launchers of the sparse MoE MLP, decode and prefill paths (bf16 weights and activations, fp32 router,
// accumulation and mixing weights). Family MoeParams (kernels/params/moe.h), same math:
//   moe_router_launch:  probs = softmax_fp32(router · x) over all E experts; the k largest
//                       (ties: lower id first) into topk_ids / topk_w (renormalised when
//                       norm_topk); shared_w = sigmoid(shared_gate · x). Logits kernel (router
//                       rows spread over the SMs) + a top-k kernel (one warp per row).
//   moe_experts_launch: for every row, the k selected experts (ids READ FROM DEVICE MEMORY,
//                       so one captured decode graph serves every step: no host round trip, no
//                       recapture) and the shared expert: act = silu(gate · x) ⊙ (up · x), then
//                       out = Σ_j w_j · down_j act_j + shared_w · down_s act_s. Only the selected
//                       experts' weights are read. A gate/up kernel then a down kernel.
//   moe_decode_launch:  router + experts in three launches (logits, gate/up that routes its row
//                       itself, down), the same bits as the two launchers above; what op_moe's
//                       decode runs. p.pdl chains them (and the first to its predecessor) with
//                       programmatic dependent launch (decode graphs; never on the legacy stream).
//                       Gate/up runs on bf16 tensor cores (fp32 accumulation); for one row on an
//                       sm_90 device the down kernel starts beside gate/up, routes the row itself
//                       and bulk-copies its output rows of the k + 1 down matrices into shared
//                       memory while gate/up streams (same bits as the batched rows' down kernel).
//                       A/B switches (environment, read at launch): FROST_MOE_DOWN=plain|cpasync,
//                       FROST_MOE_GU_L2=1 (lm_moe.cu has the measurements). FROST_MOE_DECODE=fused
//                       (a prototype, 5 % slower): one row in ONE launch of one block per SM, two
//                       grid-wide barriers on p.sync, the same bits.
// moe_prefill_launch: the same result for many rows, tokens grouped by expert (see below).
// Rows = *n_rows (clamped to max_rows) read on the device. Every launcher enqueues on `stream`,
// never synchronises, and returns its cudaError_t (cudaErrorInvalidValue for params outside the
// supported set: H, I, Is multiples of 8; 1 <= k <= kMoeMaxTopK; E <= kMoeMaxExperts).
// The CUDA op table's op_moe wraps them (decode: moe_decode_launch; prefill: moe_prefill_launch);
// tests/kernels/test_cuda_moe.cpp (decode) and test_cuda_moe_prefill.cpp check parity with the CPU
// reference. Defined only in builds with FROST_WITH_CUDA.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

constexpr int kMoeMaxExperts = 1024;
constexpr int kMoeMaxTopK = 32;

// The grouped GEMMs' tile shapes (rows per tile, K per pipeline stage, columns per warp or
// warpgroup, wgmma: warpgroup MMA, sm_90 only), for MoeBf16Params::tile_shape (1-based).
struct MoeTileShape {
    int rows, k, warp_cols, wgmma;
};
// Shape 4: 128 x 256 tiles, a producer warpgroup and two wgmma consumer warpgroups over a
// 4-stage ring, persistent blocks (lm_moe_gemm_ws.cuh); opt-in, the launcher does not pick it.
// Shapes 5-7: the same ring with the expert weights (and down's activations) loaded by TMA,
// 128 x 256 in 4 stages, 128 x 128 in 6 stages, 192 x 128 in 5 stages (lm_moe_gemm_tma.cuh).
constexpr MoeTileShape kMoeTileShapes[] = {{64, 64, 32, 0},   {128, 64, 32, 0},  {128, 64, 128, 1}, {128, 64, 256, 1},
                                           {128, 64, 256, 1}, {128, 64, 128, 1}, {192, 64, 128, 1}};
constexpr int kMoeTileShapeCount = 7;

// An FP8 (e4m3) weight stack the Hopper prefill GEMMs read as stored (MoeBf16Params::fp8): rows
// of K bytes, w = e4m3 * scale[(row / block_n) * ceil(K / block_k) + k / block_k] (Qwen's block
// format, block_n = block_k = 128; one scale per row is block_n = 1, block_k = K), rows indexed
// across the stack as the bf16 pointers' are.
struct MoeFp8Weights {
    const uint8_t* w = nullptr;
    const float* scale = nullptr;
    int32_t block_n = 0, block_k = 0;
};

struct MoeBf16Params {
    const bf16* x;                // [max_rows, H] post-attention-norm output
    const bf16* router;           // [E, H]
    const bf16* experts_gate_up;  // [E, 2I, H]: expert e = [gate_proj (I rows) ; up_proj (I rows)]
    const bf16* experts_down;     // [E, H, I]
    const bf16* shared_gate_up;   // [2Is, H]
    const bf16* shared_down;      // [H, Is]
    const bf16* shared_gate;      // [H]
    float* probs;                 // [max_rows, E] out (router)
    int32_t* topk_ids;            // [max_rows, k] out (router), read by moe_experts_launch
    float* topk_w;                // [max_rows, k] out (router)
    float* shared_w;              // [max_rows] out (router): sigmoid(shared_gate · x)
    float* act;                   // moe_act_floats(): [max_rows, k + 1, max(I, Is)] activations, then
                                  // [max_rows, E + 1] logits (moe_decode_launch)
    float* out;                   // [max_rows, H] MoE output (fp32), may be null
    bf16* out_bf16;               // [max_rows, H] MoE output (bf16, e.g. the residual delta), may be null
    int32_t accumulate;           // 1: out_bf16 += output (the fused residual add, one bf16 rounding)
    int32_t H, E, k, I, Is;
    int32_t norm_topk;
    int32_t max_rows;
    const int32_t* n_rows;        // [1] device, may be null (= max_rows)
    int32_t pdl;                  // router / experts / decode: programmatic dependent launch (lm_common.cuh)
    // Prefill only (moe_prefill_launch): fixed-capacity grouping buffers for max_rows x (k + 1)
    // entries (every (row, selected expert) pair, plus every row once for the shared expert,
    // which is group E), sized by moe_prefill_scratch(); the counts live on the device.
    int32_t* group_offsets;       // [E + 4]: first entry of each group, the entry total, then the
                                  // TMA GEMMs' two work counters (gate|up, down; zeroed by the scan)
    int32_t* chunk_base;          // [ceil(max_rows / 64), E]: per 64-row chunk, its first slot in each group
    int32_t* tile_table;          // [1 + 2 * tile capacity]: tile count, then (group, first entry) per tile
    int32_t* entry_row;           // [entries] source row of each grouped entry
    int32_t* entry_pos;           // [max_rows, k + 1] grouped entry of (row, slot); slot k = shared
    bf16* ag;                     // [entries, max(I, Is)] silu(gate) * up of each entry
    bf16* yg;                     // [entries, H] each entry's expert output (before its mixing weight)
    int32_t tile_shape;           // GEMM tile: 0 = the launcher picks (FROST_MOE_PREFILL_TILE=N in the
                                  // environment, read at launch, overrides the pick: A/B runs);
                                  // 1..kMoeTileShapeCount forces one (benches)
    float* logits;                // prefill: [max_rows, E] router logits x · routerᵀ computed already (the
                                  // ops layer's dense GEMM, which writes every row of the bucket, so into
                                  // scratch and never into probs past the valid rows), so the router starts
                                  // at the select; nullptr: the router computes them into probs
    unsigned long long* sync;     // one-row decode in one launch (prototype, FROST_MOE_DECODE=fused): its
                                  // grid-barrier counter, zero at allocation, one launch at a time;
                                  // nullptr: the three launches
    // Prefill with FP8 experts (moe_prefill_reads_fp8; opt-in in the ops layer, slower so far:
    // lm_moe_prefill_tma.cu): fp8 = 1 makes the grouped GEMMs read
    // these stacks (routed gate|up, routed down, shared gate|up, shared down; the layouts of the
    // bf16 pointers above, which are then not read) and convert each weight to bf16 on its way
    // into shared memory, bf16(e4m3 * scale), the value dequant_bf16_launch writes: the same
    // products in the same order as the bf16 GEMMs on the dequantized stacks, so the same bits.
    // fp8 = 2 (W8A8, moe_prefill_w8a8_ok; the ops layer's MoeOp::quant_act, i.e.
    // EngineOptions::fp8_w8a8_prefill): the same stacks with 128 x 128 blocks, multiplied on FP8
    // tensor cores with activations quantized per row and 128-wide group (act_quant_fp8_launch's
    // e4m3 bytes and scales): x into xq before gate|up, the bf16 SwiGLU activations ag into agq
    // before down. Each 128-wide k block's products are summed on the tensor cores, then scaled by
    // (activation scale x weight block scale) into the fp32 accumulator, as the dense W8A8 GEMM
    // does. Not the exact path's bits: the activations carry e4m3 rounding.
    int32_t fp8 = 0;
    MoeFp8Weights fp8_gate_up, fp8_down, fp8_shared_gate_up, fp8_shared_down;
    uint8_t* xq = nullptr;       // fp8 = 2: [max_rows, H] e4m3
    float* xq_scale = nullptr;   // fp8 = 2: [H / 128][act_scale_ld(max_rows)]
    uint8_t* agq = nullptr;      // fp8 = 2: [entries, I] e4m3 (entries = max_rows * (k + 1))
    float* agq_scale = nullptr;  // fp8 = 2: [I / 128][act_scale_ld(entries)]
};

// Prefill: router (moe_prefill_router_launch), then tokens grouped by expert inside the launch
// (a counting pass per 64-row chunk, a scan, a scatter; deterministic order: by row within each
// group) into a device-side tile table, then two grouped GEMMs on tensor cores (bf16, fp32
// accumulation; on Hopper the TMA-fed persistent 128 x 256 tiles of lm_moe_gemm_tma.cuh at every
// group size (pick_tile_shape in lm_moe_prefill.cu has the measurements); before Hopper mma.sync
// 64x128 tiles, 128x128 from 128 rows per routed group; lm_moe_gemm.cuh): gate|up with the A rows
// gathered through entry_row and SwiGLU in the epilogue (bf16 ag), then down (bf16 yg); a per-row
// combine in slot order. Needs H, I, Is multiples of 16. Graph-capturable: the grids are sized
// for the capacity and blocks past the device-side tile count exit. Bitwise deterministic: no
// atomics in any value path. Measured (bench/bench_moe_prefill.cpp, 35B-A3B shape, whole
// launch): H100 84 / 236 / 333 TFLOP/s over the active FLOPs at 1k / 4k / 16k rows; H200
// (2026-12-01) 121 / 328-330 / 418-419.
cudaError_t moe_prefill_launch(const MoeBf16Params& p, cudaStream_t stream);
// Whether moe_prefill_launch takes p's FP8 stacks as stored (MoeBf16Params::fp8): the tile shape
// it will run is a TMA-fed one (sm_90a), every K a multiple of 16, every block_k a multiple of 16,
// the stacks and scales set and 16-byte aligned. Otherwise the caller dequantizes them into bf16
// first (and a launch with fp8 = 1 is refused).
bool moe_prefill_reads_fp8(const MoeBf16Params& p);
// Whether moe_prefill_launch runs p as W8A8 (fp8 = 2): the tile it will run has 128 rows and is
// TMA-fed (shapes 5 and 6), H and I = Is multiples of 128, all four stacks FP8 in 128 x 128 blocks,
// 16-byte aligned, and the four activation buffers set (16-byte aligned). Otherwise the caller
// takes another path (a launch with fp8 = 2 is refused).
bool moe_prefill_w8a8_ok(const MoeBf16Params& p);
// Bytes of the W8A8 activation buffers (xq, xq_scale, agq, agq_scale), each rounded up to 256.
size_t moe_w8a8_scratch_bytes(const MoeBf16Params& p);
// The grouped GEMMs alone (gate|up, then down) over the grouping and tile table that the last
// moe_prefill_launch with the same params (the same tile shape) left on the device: benches time
// the GEMMs' share of a launch with it. Same validation as moe_prefill_launch.
cudaError_t moe_prefill_gemms_launch(const MoeBf16Params& p, cudaStream_t stream);
// The router part of moe_prefill_launch (same outputs as moe_router_launch): the logits of all
// rows as one tensor-core GEMM (skipped when p.logits is set: the engine's dense GEMM wrote them),
// then one warp per row for softmax / top-k / shared gate.
cudaError_t moe_prefill_router_launch(const MoeBf16Params& p, cudaStream_t stream);
struct MoePrefillScratch {
    size_t offsets_ints, chunk_ints, tile_ints, entry_row_ints, entry_pos_ints;  // int32 counts
    size_t ag_elems, yg_elems;                                                   // bf16 counts
};
MoePrefillScratch moe_prefill_scratch(const MoeBf16Params& p);
// Whether this device runs the wgmma tile shapes (the sm_90a machine code: compute capability 9.0);
// moe_prefill_launch refuses them elsewhere with cudaErrorNotSupported.
bool moe_prefill_wgmma_supported();
// The tile shape for MoeBf16Params::tile_shape under EngineOptions::chunk_invariant: one shape for
// every bucket (the launcher's own pick moves with the rows before Hopper), so each grouped row's
// products sum in the same order whatever chunk it came in: 5 where wgmma runs, else 2.
int moe_prefill_invariant_tile_shape();
// Rows per GEMM tile the launch will use (the tile table's granularity); 0 for a bad tile_shape.
int moe_prefill_tile_rows(const MoeBf16Params& p);

cudaError_t moe_router_launch(const MoeBf16Params& p, cudaStream_t stream);

// The last step of a decode over quantized experts (the ops layer runs the router above, then the
// routed experts' gate/up and down as quantized GEMVs that read each entry's expert id from
// topk_ids, and the shared expert's two GEMVs): per row r and hidden unit h,
//   out[r, h] = bf16(out[r, h] + Σ_j topk_w[r, j] · routed[r·k + j, h] + shared_w[r] · shared[r, h])
// in fp32, slot order, one rounding (lm_moe_combine.cu). Where the shared expert is folded into the
// routed launches, the down GEMV and this mix run as one launch instead
// (lm_gemv_quant.h gemv_quant_moe_down_launch, the same bits).
struct MoeCombineParams {
    const float* routed;    // [rows * k, H] each routed entry's down output
    const float* shared;    // [rows, H] the shared expert's down output
    const float* topk_w;    // [rows, k] mixing weights (router)
    const float* shared_w;  // [rows] sigmoid gate of the shared expert (router)
    bf16* out;              // [rows, H] residual stream, accumulated into
    int32_t rows, k, H;
    int32_t pdl;
};
cudaError_t moe_combine_launch(const MoeCombineParams& p, cudaStream_t stream);
cudaError_t moe_experts_launch(const MoeBf16Params& p, cudaStream_t stream);
cudaError_t moe_decode_launch(const MoeBf16Params& p, cudaStream_t stream);
// Floats of p.act.
size_t moe_act_floats(const MoeBf16Params& p);

}  // namespace frost::kernels
