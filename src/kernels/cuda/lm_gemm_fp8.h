// FP8 prefill GEMM for block-quantized weights (issue 15): the DeepSeek / Qwen FP8 recipe, W8A8
// with 128x128 weight blocks and 1x128 activation groups, on Hopper's FP8 tensor cores through
// cuBLASLt's block-scaled matmul (CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F for the weight,
// VEC128_32F for the activations). The activations are quantized per row and 128-wide k group on
// the fly (act_quant_fp8_launch: scale = max|x| / 448, q = e4m3(x / scale)), as Qwen's
// `activation_scheme: dynamic` and transformers' FineGrainedFP8 linear do.
// Plan once per shape (like lm_gemm.h); launches set the scale pointers and never choose again.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

constexpr int kFp8Group = 128;  // the block edge of both scale grids
// Smallest K planned: cuBLASLt 13.1's block-scaled FP8 GEMM returned wrong products at K = 256
// on the H100 (relative L2 0.5-0.7 against an exact reference, no error status) while K >= 512
// matched to 2e-4 (tests/kernels/test_cuda_gemm_fp8.cpp, 2026-11-24); smaller K is refused as
// not supported, so the ops layer dequantizes instead.
constexpr int kFp8MinK = 512;

struct GemmFp8Params {
    const uint8_t* xq;      // [M, K] e4m3, row stride K
    const float* x_scale;   // activation group scales, act_quant_fp8 layout (below)
    const uint8_t* w;       // [N, K] e4m3, row stride K
    const float* w_scale;   // [ceil(N/128), K/128] row-major (the checkpoint's weight_scale_inv)
    void* y;                // [M, N] row stride ldy; bf16, or fp32 when out_f32
    int64_t ldy;
    int32_t M, N, K;        // K a multiple of 128
    int32_t out_f32;
    int32_t accumulate;     // y += x Wᵀ
};

// Activation scale layout: [K/128][ld_scale] floats, group g of row m at g * ld_scale + m
// (rows contiguous per group, as cuBLASLt reads VEC128 scales of the column-major operand);
// ld_scale = M rounded up to a multiple of 4.
inline int64_t act_scale_ld(int32_t M) { return (M + 3) / 4 * 4; }
inline size_t act_scale_floats(int32_t M, int32_t K) { return size_t(act_scale_ld(M)) * size_t(K / kFp8Group); }

// x bf16 [M, K] (row stride ldx) -> xq e4m3 [M, K] and scales (layout above).
cudaError_t act_quant_fp8_launch(const bf16* x, int64_t ldx, int32_t M, int32_t K, uint8_t* xq, float* x_scale,
                                 cudaStream_t stream);

struct GemmFp8Plan;
// `shape` gives M, N, K, ldy, out_f32, accumulate. cudaErrorNotSupported when K < kFp8MinK or
// cuBLASLt offers no block-scaled algorithm for the shape (measured: M = 77; pre-Hopper GPUs):
// the caller falls back to bf16.
cudaError_t gemm_fp8_plan_create(GemmLt* lt, const GemmFp8Params& shape, GemmFp8Plan** out, int* lt_status = nullptr);
void gemm_fp8_plan_destroy(GemmFp8Plan* plan);
cudaError_t gemm_fp8_launch(GemmFp8Plan* plan, const GemmFp8Params& p, cudaStream_t stream, int* lt_status = nullptr);

}  // namespace frost::kernels
