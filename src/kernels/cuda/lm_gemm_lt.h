// The cuBLASLt handle + workspace behind GemmLt (lm_gemm.h), shared by the bf16 (lm_gemm.cu) and
// the FP8 (lm_gemm_fp8.cu) plan code. Internal to src/kernels/cuda.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

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

// The descriptors every plan holds (any of them may be null: a plan that failed half-way).
inline void lt_destroy(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                       cublasLtMatrixLayout_t c) {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
}

}  // namespace frost::kernels
