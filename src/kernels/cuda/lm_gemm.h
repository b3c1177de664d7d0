// bf16 GEMM through cuBLASLt (y = x Wᵀ, fp32 accumulation, bf16 or fp32 out, optional fused
// residual add y += x Wᵀ). Plan once, run many: gemm_plan_create() asks the heuristic for one
// algorithm per shape at load time and caches it in the plan; gemm_launch() never chooses again.
// Reductions that accumulate in place (atomics, order varies) are excluded, so two runs match
// bitwise. The workspace is the caller's (allocated through frost_buffer_alloc by upper layers).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

struct GemmLt;    // a cuBLASLt handle plus the caller's workspace
struct GemmPlan;  // descriptors + the chosen algorithm for one shape

// Recommended workspace for Hopper (cuBLAS documentation, "cublasLtMatmul workspace").
constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// Each returns cudaSuccess, or cudaErrorNotSupported (no algorithm for the shape),
// cudaErrorInvalidValue (bad shape) or cudaErrorUnknown (other cuBLAS failure; *lt_status, when
// non-null, receives the cublasStatus_t as an int).
cudaError_t gemm_lt_create(void* workspace, size_t workspace_bytes, GemmLt** out, int* lt_status = nullptr);
void gemm_lt_destroy(GemmLt* lt);  // null ignored

// `shape` gives M, N, K, ldx, ldy, out_f32, accumulate; its pointers are ignored.
// rank: which of the heuristic's ordered answers to take (0, its first choice, is what the engine
// uses; benches sweep the others); NotSupported when it offers fewer.
cudaError_t gemm_plan_create(GemmLt* lt, const GemmBf16Params& shape, GemmPlan** out, int* lt_status = nullptr,
                             int rank = 0);
void gemm_plan_destroy(GemmPlan* plan);  // null ignored

// p must have the plan's shape (else cudaErrorInvalidValue); pointers 16-byte aligned.
cudaError_t gemm_launch(const GemmPlan* plan, const GemmBf16Params& p, cudaStream_t stream, int* lt_status = nullptr);

}  // namespace frost::kernels
