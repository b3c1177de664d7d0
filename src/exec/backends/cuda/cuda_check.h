// One check for every CUDA runtime call of the cuda backend: a failed call becomes
// FROST_ERR_BACKEND (or FROST_ERR_OUT_OF_MEMORY for allocations) with the CUDA error's name,
// its text, the failing expression and file:line. Library code never exits on a CUDA error.
#pragma once
#include <cuda_runtime.h>

#include "exec/error.h"

namespace frost::exec::cuda {

// Clears the calling thread's non-sticky CUDA error so a later, unrelated cudaGetLastError() by
// kernel launchers does not report our failure as theirs. Sticky errors (a faulted context)
// cannot be cleared and will surface again from the next synchronising call.
inline void clear_cuda_error() { (void)cudaGetLastError(); }

// Maps `e` from `expr` to a frost status with a message; clears the non-sticky error state.
inline frost_status cuda_fail(cudaError_t e, const char* expr, const char* file, int line) {
    clear_cuda_error();
    const frost_status s =
        e == cudaErrorMemoryAllocation ? FROST_ERR_OUT_OF_MEMORY : FROST_ERR_BACKEND;
    return fail(s, "%s failed: %s: %s (%s:%d)", expr, cudaGetErrorName(e), cudaGetErrorString(e),
                file, line);
}

}  // namespace frost::exec::cuda

// Returns the mapped status from the enclosing function when the CUDA call fails.
#define FROST_CUDA_TRY(expr)                                                                 \
    do {                                                                                     \
        const cudaError_t frost_cuda_e_ = (expr);                                            \
        if (frost_cuda_e_ != cudaSuccess)                                                    \
            return ::frost::exec::cuda::cuda_fail(frost_cuda_e_, #expr, __FILE__, __LINE__); \
    } while (0)
