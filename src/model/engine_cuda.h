// The CUDA side of the Engine (architecture.md "The engine"): bf16 weights and activations, fp32
// recurrent state and small weights, cuBLASLt plans chosen once per GEMM shape at load, and one
// captured whole-forward graph per prefill chunk bucket plus ONE decode graph per session that
// serves every position (the cursor lives in device memory). The host side of a step (ids in,
// replay, one token id out) is the Engine's own, shared with the CPU backend.
#pragma once
#include <cstddef>
#include <cstdint>

#include "frost/exec.h"

namespace frost::model {

class Engine;
struct ModelWeights;

// What the CUDA build of an engine did at load, for `frost generate` and the benches.
struct CudaEngineInfo {
    bool active = false;        // the engine runs on the CUDA backend
    size_t graphs = 0;          // captured graph variants over all sessions
    uint64_t captures = 0;      // successful captures so far (constant after load)
    double capture_ms = 0;      // wall time of every capture at load (plans included)
    double weights_ms = 0;      // wall time of the weight conversion + upload
    size_t gemm_plans = 0;      // distinct cuBLASLt shapes planned
    uint64_t weight_bytes = 0;  // bf16 + fp32 weights on the device
    uint64_t scratch_bytes = 0; // shared activations, GEMM workspace, staging
    uint64_t session_bytes = 0; // state + cursor of one session
};
CudaEngineInfo cuda_engine_info(const Engine& e);

// Private state of a CUDA engine (engine_cuda.cpp); the deleter lets engine.h hold it by
// unique_ptr without the definition. Destroying it touches no frost object.
struct CudaState;
struct CudaStateDeleter {
    void operator()(CudaState* s) const;
};

// Builds the CUDA engine inside an Engine whose ctx and stream exist (Engine::init calls it).
// Friend of Engine: it fills the same buffer registry, session records and graphs as the CPU path.
struct CudaBuild {
    static frost_status init(Engine& e, const ModelWeights& w);
    static CudaEngineInfo info(const Engine& e);

private:
    static frost_status alloc_scratch(Engine& e);
    static frost_status alloc_session(Engine& e, int index);
    static frost_status capture_all(Engine& e);
};

}  // namespace frost::model
