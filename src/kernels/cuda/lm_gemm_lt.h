// The cuBLASLt handle + workspace behind GemmLt (lm_gemm.h), shared by the bf16 (lm_gemm.cu) and
// the FP8 (lm_gemm_fp8.cu) plan code. Internal to src/kernels/cuda.
#pragma once
#include <cublasLt.h>

#include <cstddef>

namespace frost::kernels {

struct GemmLt {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
};

}  // namespace frost::kernels
