// FP8 prefill GEMM for block-quantized weights (issue 15): the DeepSeek / Qwen FP8 recipe, W8A8
// with 128x128 weight blocks and 1x128 activation groups, on Hopper's FP8 tensor cores through
// cuBLASLt's block-scaled matmul (CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F for the weight,
// VEC128_32F for the activations). The activations are quantized per row and 128-wide k group on
// the fly (act_quant_fp8_launch: scale = max|x| / 448, q = e4m3(x / scale)), as Qwen's
// `activation_scheme: dynamic` and transformers' FineGrainedFP8 linear do.
// Plan once per shape (like lm_gemm.h); launches set the scale pointers and never choose again.
// Per-channel weights (compressed-tensors FP8-dynamic) run as per-row VEC128 weight scales, each
// row's scale repeated for its K/128 groups (w_scale_channel_launch): the activations keep the
// same per-128-group quantizer and twins. A probe on the H200 (2026-12-04, sixty-second session,
// M 4096 N 12288 K 4096, random e4m3, CUDA 13.0) ran that VEC128 x VEC128 GEMM at 987 TFLOP/s
// against 1218 for BLK128x128 x VEC128 on the same data; a 128x128 grid of ones with the channel
// scales as a device alpha vector (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST), which
// would have kept the block-scaled speed, and a SCALAR weight scale beside VEC128 activations both
// have no algorithm (heuristic status NOT_SUPPORTED / INVALID_VALUE).
// Why block scaling and no per-channel W8A8 as such: a probe of cuBLASLt's scale modes on the H100 (CUDA
// 13.0, 2026-11-25, e4m3 operands of one constant byte, bf16 out, the 9B prefill shapes at M 4096)
// ran OUTER_VEC_32F (a scale per weight row and per token, what compressed-tensors' FP8-dynamic
// checkpoints declare) at 1197-1238 TFLOP/s, slower than BLK128x128 x VEC128 (1357-1482) and
// SCALAR (1437-1622); the heuristic offered one algorithm for either scaled mode. With random
// e4m3 operands the same probe ran block-scaled at 1236-1290 and SCALAR at 1343-1402 TFLOP/s:
// the data costs ~13 %, and the engine's block-scaled GEMMs (bench_ops: gate_up 1225, down 1218)
// already run at cuBLASLt's random-operand speed.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_gemv_quant.h"
#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

constexpr int kFp8Group = 128;  // the block edge of both scale grids
// Smallest K planned: cuBLASLt 13.1's block-scaled FP8 GEMM returned wrong products at K = 256
// on the H100 (relative L2 0.5-0.7 against an exact reference, no error status) while K >= 512
// matched to 2e-4 (tests/kernels/test_cuda_gemm_fp8.cpp, 2026-11-24); smaller K is refused as
// not supported, so the ops layer dequantizes instead.
constexpr int kFp8MinK = 512;

// Which GEMM runs a plan. kFp8ImplAuto: FROST_FP8_GEMM=cublas|cublaslt|wgmma in the environment decides if
// set, else gemm_fp8_prefers_wgmma (the shapes where our kernel measured faster). kFp8ImplWgmma:
// our Hopper kernel (lm_gemm_fp8_wgmma.cu; 128x128 weight blocks only, any K multiple of 128);
// the plan is NotSupported where it cannot run.
enum GemmFp8Impl : int32_t { kFp8ImplAuto = 0, kFp8ImplCublasLt = 1, kFp8ImplWgmma = 2 };

struct GemmFp8Params {
    const uint8_t* xq;      // [M, K] e4m3, row stride K
    const float* x_scale;   // activation group scales, act_quant_fp8 layout (below)
    const uint8_t* w;       // [N, K] e4m3, row stride K
    const float* w_scale;   // w_block_n 128: [ceil(N/128), K/128] row-major (the checkpoint's
                            // weight_scale_inv); 1: [K/128][act_scale_ld(N)], w_scale_rows_launch
    void* y;                // [M, N] row stride ldy; bf16, or fp32 when out_f32
    int64_t ldy;
    int32_t M, N, K;        // K a multiple of 128
    int32_t out_f32;
    int32_t accumulate;     // y += x Wᵀ
    // Rows per weight scale: 128 (the 128x128 grid, BLK128x128) or 1 (one scale per row and
    // 128-wide k group, VEC128 like the activations). 1 is what a fused matrix gets when one of
    // its parts is not a whole number of 128-row blocks (the GDN in_proj's b and a: 32 rows each,
    // model/qwen35/weight_quant.cpp), so each row keeps its own part's block scale.
    int32_t w_block_n = kFp8Group;
    int32_t impl = kFp8ImplAuto;  // GemmFp8Impl; a plan's choice, launches ignore it
    // w_block_n 1 only: rows [0, grid_rows) are whole 128-row blocks (grid_rows a multiple of
    // 128, below N; 0: none) whose scales also come as the 128x128 grid w_grid_scale
    // ([grid_rows / 128][K / 128], the same values as those rows' per-row scales). The plan runs
    // those rows as a block-scaled GEMM and only rows [grid_rows, N) with per-row scales: on the
    // H100 (2026-11-25, bench_cuda_kernels --fp8, M 4096, GEMM alone) the 9B in_proj ran at 1029
    // TFLOP/s all per-row (VEC128 weight scales), 1243 split (12288 rows BLK128x128 at 1233, the
    // 64-row b | a rest at 186). Where cuBLASLt has no per-row plan for that narrow rest, the
    // plan moves whole blocks from the grid's end into it (gemm_fp8_plan_grid_rows: the rows it
    // runs block-scaled, G). w_scale then covers rows [G, N) alone: [K/128][act_scale_ld(N - G)]
    // (w_scale_rows_launch on the per-row scales from row G). Same products, same scales.
    int32_t grid_rows = 0;
    const float* w_grid_scale = nullptr;
};

// Per-row weight scales [N][K/128] (the quantized GEMV's layout, block rows 1) -> the VEC128
// layout cuBLASLt reads for w_block_n = 1: [K/128][act_scale_ld(N)], row n of group g at
// g * act_scale_ld(N) + n.
cudaError_t w_scale_rows_launch(const float* w_scale, int32_t N, int32_t K, float* out, cudaStream_t stream);
// Per-channel weight scales [N] (compressed-tensors' FP8-dynamic, strategy "channel") -> the same
// VEC128 layout, each row's scale repeated for its K/128 groups: a per-channel W8A8 GEMM is the
// per-row one with equal scales along k (the products are the same; see cuda_ops.cpp fp8_setup
// for why not cuBLASLt's OUTER_VEC mode).
cudaError_t w_scale_channel_launch(const float* w_scale, int32_t N, int32_t K, float* out, cudaStream_t stream);

// W4A8 (GemmOp::quant_act on an INT4 weight in 128-wide groups, lm_int4_e4m3.cu): the weight as
// this GEMM's operand with w_block_n 1. Each value q - zp (an integer in [-15, 15], exact in e4m3)
// as its e4m3 byte into wq [N, K] (16-byte aligned), each group's bf16 scale as fp32 into w_scale
// in the per-row VEC128 layout ([K/128][act_scale_ld(N)], as w_scale_rows_launch writes). Either
// nibble order and either row layout (GemvQuantParams::nibble_pairs, row_blocks). The GEMM then
// multiplies the exact INT4 weights; only the activations carry e4m3 rounding.
bool int4_e4m3_ok(const GemvQuantParams& q);
cudaError_t int4_to_e4m3_launch(const GemvQuantParams& q, uint8_t* wq, float* w_scale, cudaStream_t stream);

// Activation scale layout: [K/128][ld_scale] floats, group g of row m at g * ld_scale + m
// (rows contiguous per group, as cuBLASLt reads VEC128 scales of the column-major operand);
// ld_scale = M rounded up to a multiple of 4.
inline int64_t act_scale_ld(int32_t M) { return (M + 3) / 4 * 4; }
inline size_t act_scale_floats(int32_t M, int32_t K) { return size_t(act_scale_ld(M)) * size_t(K / kFp8Group); }

// x bf16 [M, K] (row stride ldx) -> xq e4m3 [M, K] and scales (layout above).
cudaError_t act_quant_fp8_launch(const bf16* x, int64_t ldx, int32_t M, int32_t K, uint8_t* xq, float* x_scale,
                                 cudaStream_t stream);

struct GemmFp8Plan;
// `shape` gives M, N, K, ldy, out_f32, accumulate, w_block_n, grid_rows. cudaErrorNotSupported
// when K < kFp8MinK or cuBLASLt offers no block-scaled algorithm for the shape (measured: M = 77;
// pre-Hopper GPUs): the caller falls back to bf16.
// rank: which of the heuristic's ordered answers to take (0, its first choice, is what the engine
// uses; benches sweep the others); NotSupported when it offers fewer.
cudaError_t gemm_fp8_plan_create(GemmLt* lt, const GemmFp8Params& shape, GemmFp8Plan** out, int* lt_status = nullptr,
                                 int rank = 0);
void gemm_fp8_plan_destroy(GemmFp8Plan* plan);
// The implementation a plan took (kFp8ImplCublasLt or kFp8ImplWgmma; a split plan: its head's).
int gemm_fp8_plan_impl(const GemmFp8Plan* plan);
// The rows a grid_rows plan runs block-scaled (a multiple of 128, <= shape.grid_rows); 0 unsplit.
int32_t gemm_fp8_plan_grid_rows(const GemmFp8Plan* plan);
cudaError_t gemm_fp8_launch(GemmFp8Plan* plan, const GemmFp8Params& p, cudaStream_t stream, int* lt_status = nullptr);

// Our warp-specialised TMA + wgmma kernel (lm_gemm_fp8_wgmma.cu) for the same GemmFp8Params
// (w_block_n 128 only). supported: the shape and the device (sm_90) allow it. launch:
// cudaErrorNotSupported where not supported; variant selects a pipeline configuration for the
// tests and benches: 0 the first design (6 stages, promotion overlapped with the next block's MMAs,
// clusters of 2 sharing the weight tile by multicast); 1: 6 stages, promotion after each block's
// MMAs, no cluster; 2: 4 stages, overlapped, no cluster; 3: 6 stages, overlapped, no cluster;
// 4: 6 stages, not overlapped, clusters of 2; 5: 4 stages, overlapped, clusters of 2; 6: variant 0
// with the epilogue overlapped (the next tile's first k block runs on the tensor cores while this
// tile is stored; the residual prefetched into L2); 7: 6 stages, overlapped, 2x2 clusters (A and
// B multicast); 8: 7 with the epilogue overlapped; 9: 6 with 7 stages; 10: 6 without clusters;
// 11: variant 0 with the producer's CTA-scope wait (no L1 invalidate per k block); 12: variant 0
// with the scales loaded three k blocks ahead of their use; 13: 11 + 12; 14: variant 3 with the
// scales ahead; 15: variant 4 with the CTA-scope wait and the scales ahead. Timed on the H100
// (2026-11-25, bench_cuda_kernels --fp8, M 4096, GEMM alone, TFLOP/s, down / out_proj): variant 0
// 914 / 803, 11 888 / 805, 12 973 / 825, 13 979 / 832, 14 874 / 777, 15 740 / 738; cuBLASLt
// 1286 / 1193 in the same run.
// Every variant computes the same products in the same order: bitwise the same output.
constexpr int kFp8WgmmaVariants = 16;
// The variant a kFp8ImplWgmma plan launches (FROST_FP8_WGMMA_VARIANT overrides it): the fastest
// measured (above).
constexpr int kFp8WgmmaDefaultVariant = 13;
bool gemm_fp8_wgmma_supported(const GemmFp8Params& shape);
cudaError_t gemm_fp8_wgmma_launch(const GemmFp8Params& p, cudaStream_t stream, int variant = 0);
// Whether auto selection takes our kernel for the narrow-N prefill shapes (gemm_fp8_prefers_wgmma).
// Off: measured slower than cuBLASLt there too (lm_gemm_fp8.cu).
constexpr bool kFp8PreferWgmmaNarrow = false;
// Auto selection's default: whether our kernel takes this shape (see lm_gemm_fp8.cu).
bool gemm_fp8_prefers_wgmma(const GemmFp8Params& shape);

}  // namespace frost::kernels
