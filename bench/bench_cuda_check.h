// CK(expr): a CUDA runtime call in a kernel bench, which has no caller to hand an error back to:
// on failure it prints the call, file and line and exits. Benches only; launchers in src/ return
// their cudaError_t and never exit.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(expr)                                                                                      \
    do {                                                                                              \
        const cudaError_t e_ = (expr);                                                                \
        if (e_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
            std::exit(1);                                                                             \
        }                                                                                             \
    } while (0)
