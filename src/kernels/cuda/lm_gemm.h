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
// rank: which of the heuristic's ordered answers to take; kGemmRankPick (the engine's) takes the
// one gemm_pick_rank chooses from the first few (kernels/gemm_pick.h: its first answer unless that
// leaves much of its last wave of SMs idle), or the first when FROST_GEMM_PICK=first is set (A/B
// runs); benches sweep the others. NotSupported when the heuristic offers fewer.
constexpr int kGemmRankPick = -1;
cudaError_t gemm_plan_create(GemmLt* lt, const GemmBf16Params& shape, GemmPlan** out, int* lt_status = nullptr,
                             int rank = kGemmRankPick);
// Which heuristic answer a plan runs and that answer's wavesCount (benches print them).
struct GemmPlanInfo {
    int rank = -1;
    float waves = 0.0f;
};
GemmPlanInfo gemm_plan_info(const GemmPlan* plan);
// A plan whose per-row arithmetic does not depend on M (EngineOptions::chunk_invariant): the
// algorithm is the heuristic's first choice for `ref_rows` rows of the same N, K, strides and
// epilogue, among those without a split-K reduction, then checked against the shape's own M (one
// algorithm, no split of K: each output element sums its K products in the same order at every M,
// so a row's bits do not depend on how many rows share its launch). NotSupported when that
// algorithm cannot run the shape's M. The plan launches through gemm_launch like any other.
cudaError_t gemm_plan_create_row_invariant(GemmLt* lt, const GemmBf16Params& shape, int ref_rows, GemmPlan** out,
                                           int* lt_status = nullptr);
// The ref_rows the CUDA ops pass. Measured (H200, 2026-12-01, `frost bench capsule --chunk 0
// --chunk-invariant` and `frost bench engine --chunk-invariant`, ms; the default engine first):
//   ref rows              default  256    1024   4096   own M (no split-K)
//   0.8B append 97 @ 1k   1.79     2.00   2.38   3.23   4.03, and NOT invariant: a row's bits
//   0.8B append 97 @ 14k  2.38     4.18   4.67   5.49   6.23  then follow its M's algorithm
//   0.8B cold 1k / 16k    3.32 / 53.5  3.92 / 59.7  3.35 / 54.5  4.40 / 52.5
//   9B append 64 @ 4k     6.32     9.45   14.25  14.51
//   9B append 64 @ 30k    7.86     15.17  19.47  22.21
//   9B cold 4k / 32k      95.0 / 881  104.7 / 938  94.5 / 879  96.3 / 884
// 1024 keeps the cold prompts at the default's speed (the 0.8B's 4k-16k within 2-4 %) and beats
// 4096 everywhere; 256 serves appends better but costs long prompts 6-12 %.
constexpr int kGemmRowInvariantRefRows = 1024;
void gemm_plan_destroy(GemmPlan* plan);  // null ignored

// p must have the plan's shape (else cudaErrorInvalidValue); pointers 16-byte aligned.
cudaError_t gemm_launch(const GemmPlan* plan, const GemmBf16Params& p, cudaStream_t stream, int* lt_status = nullptr);

}  // namespace frost::kernels
