// Load figures of an engine, for `frost generate` and the benches. The CUDA and CPU engines are
// the same Engine (engine.h) with different op tables; `active` says the backend is CUDA.
#pragma once
#include <cstddef>
#include <cstdint>

namespace frost::model {

class Engine;

struct CudaEngineInfo {
    bool active = false;        // the engine runs on the CUDA backend
    size_t graphs = 0;          // captured graph variants over all sessions
    uint64_t captures = 0;      // successful captures so far (constant after load)
    double capture_ms = 0;      // wall time of every capture at load (plans included)
    double weights_ms = 0;      // wall time of the weight conversion + upload
    size_t gemm_plans = 0;      // distinct cuBLASLt shapes planned
    uint64_t weight_bytes = 0;  // weights on the device
    uint64_t scratch_bytes = 0; // shared activations, backend workspace, staging
    uint64_t session_bytes = 0; // state + cursor of one session
    int quantized_matrices = 0; // GEMM weights kept in their quantized dtype (weight_bytes counts them packed)
    int dequantized_matrices = 0;  // quantized in the checkpoint but dequantized at load (weight_quant.h)
    // Kept-quantized weights the backend rewrote at load into the layout its kernels read
    // (ops::Backend::prepare_quant_weight; CUDA: every INT4 / NVFP4 weight, in the paired nibble order).
    int relaid_matrices = 0;
    int row_blocked_matrices = 0;  // of those, the ones also stored in 8-row blocks (Tensor::row_blocks)
};
CudaEngineInfo cuda_engine_info(const Engine& e);

}  // namespace frost::model
