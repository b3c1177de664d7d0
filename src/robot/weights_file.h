// Loading the robot MLPs' weights from a safetensors file (through the model layer's validated
// Checkpoint reader) instead of drawing them from a seed. Tensor names are "<prefix>.w1", ".b1",
// ".g1", ".w2", ".b2", ".w3", ".b3", dtype F32, shapes as in MlpHostWeights (w: [out, in]).
#pragma once
#include <string>

#include "frost/exec.h"
#include "robot/mlp.h"

namespace frost::robot {

// Fills `out` from `path`; FROST_ERR_INVALID_ARG naming the tensor if one is missing, not F32,
// or shaped differently from `shape`. Errors of the file itself come from the Checkpoint reader.
frost_status load_mlp_weights(const std::string& path, const std::string& prefix,
                              const MlpShape& shape, MlpHostWeights* out);

}  // namespace frost::robot
