// The CUDA kernels' supported set checked against a config at load, every broken rule in one
// message (the CPU reference kernels take any shape).
#pragma once
#include "frost/exec.h"
#include "model/config.h"

namespace frost::model::qwen35 {

frost_status check_cuda_shapes(const ModelConfig& c);

}  // namespace frost::model::qwen35
