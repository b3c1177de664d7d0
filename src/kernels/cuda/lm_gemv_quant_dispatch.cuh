// The one switch from a quantized weight's runtime format (GemvQuantParams::format) to the
// compile-time format the kernels are instantiated for, shared by every quantized launcher.
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/lm_gemv_quant.h"

namespace frost::kernels {

// Calls launch(std::integral_constant<int, F>{}) with F = format (any other value runs INT4: the
// launchers validate the format first) and returns its status, else the launch's own error.
// A refused launch's error is cleared, so it does not surface in the next launch's check.
template <class Launch>
cudaError_t launch_for_format(int format, Launch&& launch) {
    cudaError_t e;
    switch (format) {
        case kGemvQuantFp8Block: e = launch(std::integral_constant<int, kGemvQuantFp8Block>{}); break;
        case kGemvQuantFp8Channel: e = launch(std::integral_constant<int, kGemvQuantFp8Channel>{}); break;
        case kGemvQuantNvfp4: e = launch(std::integral_constant<int, kGemvQuantNvfp4>{}); break;
        default: e = launch(std::integral_constant<int, kGemvQuantInt4>{}); break;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return e;
    }
    return cudaGetLastError();
}

}  // namespace frost::kernels
