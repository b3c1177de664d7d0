// `frost generate --capsule FILE [--prompt-ids SUFFIX]`: continue a generation from a capsule file
// (restore, append the suffix, decode) with the same result record as model::generate.
#pragma once
#include <cstdint>
#include <string>

#include "model/engine.h"
#include "model/generate.h"

namespace frost::model {

// Reads only the header of a capsule file (validated) and returns its requested boundary P, so a
// caller can size max_seq_len before building the engine.
frost_status capsule_file_boundary(const std::string& path, int64_t* boundary);

// Validates the capsule file against the engine built from `model_dir`, restores it into
// `session`, applies req.sampling (the seed starts at the branch point), prefills req.prompt as
// the suffix (may be empty), and decodes like generate(). ttft_ms covers load + restore + suffix.
frost_status generate_from_capsule(Engine& e, const std::string& model_dir, int session, const std::string& path,
                                   const GenerateRequest& req, GenerateResult* out);

}  // namespace frost::model
