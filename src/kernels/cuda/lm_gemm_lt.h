// The cuBLASLt handle + workspace behind GemmLt (lm_gemm.h), shared by the bf16 (lm_gemm.cu) and
// the FP8 (lm_gemm_fp8.cu) plan code. Internal to src/kernels/cuda.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace frost::kernels {

struct GemmLt {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
};

// A cuBLAS status as the plan functions report it: *lt_status (when non-null) receives it as an
// int; cudaErrorUnknown unless it is success.
inline cudaError_t lt_fail(cublasStatus_t st, int* lt_status) {
    if (lt_status) *lt_status = static_cast<int>(st);
    return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

// y[M, N] = x[M, K] W[N, K]ᵀ as cuBLASLt sees it (column-major): C[N, M] = Aᵀ B with A = W
// ([K, N], lda K), B = x ([K, M], ldb ldx), C = y (ldc ldy); fp32 compute. Creates the matmul
// descriptor and the three layouts (C also serves as D), stopping at the first failure.
inline cublasStatus_t lt_tn_descs(cublasLtMatmulDesc_t* op, cublasLtMatrixLayout_t* a, cublasLtMatrixLayout_t* b,
                                  cublasLtMatrixLayout_t* c, cudaDataType_t in_type, cudaDataType_t out_type, int N,
                                  int M, int K, int64_t ldx, int64_t ldy) {
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    cublasStatus_t st = cublasLtMatmulDescCreate(op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(a, in_type, K, N, K);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(b, in_type, K, M, ldx);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(c, out_type, N, M, ldy);
    return st;
}

// A heuristic preference allowing the handle's workspace; *pref stays null on failure.
inline cublasStatus_t lt_preference(const GemmLt* lt, cublasLtMatmulPreference_t* pref) {
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(pref);
    const uint64_t ws = lt->workspace_bytes;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(*pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    return st;
}

// The descriptors every plan holds (any of them may be null: a plan that failed half-way).
inline void lt_destroy(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                       cublasLtMatrixLayout_t c) {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
}

}  // namespace frost::kernels
