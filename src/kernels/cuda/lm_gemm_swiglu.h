// Prefill's dense gate|up GEMM with SwiGLU in its epilogue, on Hopper (lm_gemm_swiglu.cu):
// y[M, F] = bf16(silu(g) * u), g = bf16(x W[0:F]ᵀ), u = bf16(x W[F:2F]ᵀ), fp32 accumulation; the
// numbers of the cuBLASLt projection followed by the SwiGLU kernel up to the summation order of g
// and u. Uses GemmBf16Params with N = 2F: x [M, K] (row stride ldx), w [2F, K] (gate rows, then
// up rows; row stride K), y [M, F] bf16 (row stride ldy); out_f32, accumulate and swiglu unused.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

// Whether gemm_swiglu_launch runs p: an sm_90a device, F and K multiples of 8, ldx and ldy
// multiples of 8, 16-byte aligned pointers, bf16 out without accumulation.
bool gemm_swiglu_supported(const GemmBf16Params& p);

// Column tile (112 or 128 output columns) for M rows and F columns on `sms` SMs:
// gemm_pick.h's gemm_swiglu_tile, unless FROST_GEMM_SWIGLU_TILE=112|128 forces one (A/B runs).
int gemm_swiglu_pick_tile(int M, int F, int sms);

// Enqueues the GEMM (tile 0: gemm_swiglu_pick_tile; 112 or 128: that tile; the same bits either
// way). NotSupported off sm_90a, InvalidValue for a shape gemm_swiglu_supported refuses or another
// tile.
cudaError_t gemm_swiglu_launch(const GemmBf16Params& p, cudaStream_t stream, int tile = 0);

}  // namespace frost::kernels
