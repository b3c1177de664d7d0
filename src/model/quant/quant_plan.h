// Which linear of a checkpoint is stored how: the quantization_config matched against the tensor
// names (compressed-tensors targets / ignore lists, Qwen FP8 scales), every quantized module's
// tensors checked for presence, dtype and shape. Works by module name, so dense, MoE-expert and
// MTP linears resolve the same way. One error lists every problem of the checkpoint.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/quant/quant_config.h"
#include "model/safetensors.h"

namespace frost::model::quant {

struct QuantModule {
    std::string module;        // "model.layers.0.mlp.up_proj"
    std::string group;         // compressed-tensors config group name ("" for Qwen fp8)
    WeightArgs args;
    int64_t out = 0, in = 0;   // logical weight shape [out, in]
    const CheckpointTensor* q = nullptr;             // weight (F8) or weight_packed (U8 / I32)
    const CheckpointTensor* scale = nullptr;         // weight_scale_inv (fp8) / weight_scale
    const CheckpointTensor* global_scale = nullptr;  // Nvfp4: weight_global_scale F32 [1]
    const CheckpointTensor* zero_point = nullptr;    // Int4 asymmetric: I32 [ceil(out/8), groups]
    const CheckpointTensor* g_idx = nullptr;         // Int4 act-order: I32 [in]
    std::vector<std::string> tensors;  // every checkpoint tensor of the module (consumed by binding)
    uint64_t stored_bytes = 0;         // bytes of those tensors on disk
};

// A linear module kept unquantized, and why ("ignored", "not targeted", "modules_to_not_convert",
// "no scale"). Reported by `frost inspect`.
struct PlainModule {
    std::string module;
    std::string reason;
};

struct QuantPlan {
    QuantConfig config;
    // Tensors the plan made: GPTQ / AWQ modules repacked into the compressed-tensors INT4 layout
    // (weight_packed [out, in/8], weight_scale [out, groups], weight_zero_point [out/8, groups]),
    // which their QuantModules point at. A deque: the addresses stay put as it grows.
    std::deque<CheckpointTensor> derived;
    std::deque<std::vector<uint8_t>> derived_bytes;
    std::map<std::string, QuantModule> modules;  // by module name
    std::map<std::string, PlainModule> plain;    // linears stored unquantized, by module name
    // Modules whose tensors failed validation -> every tensor name of the module (the problems are
    // reported by build_quant_plan; binding skips these tensors).
    std::map<std::string, std::vector<std::string>> invalid;
    // The quantized module whose weight is `weight_name` ("<module>.weight"), or nullptr.
    const QuantModule* find_weight(const std::string& weight_name) const;
    // The tensors of the invalid module that `tensor_name` belongs to, or nullptr.
    const std::vector<std::string>* find_invalid(const std::string& tensor_name) const;
};

// Builds and validates the plan. A checkpoint without quantization_config gets an empty plan.
// FROST_ERR_INCOMPATIBLE with every problem listed when tensors do not match the config.
frost_status build_quant_plan(const QuantConfig& config, const Checkpoint& ck, QuantPlan* out);
// Same, appending every problem to *problems (one line each) instead of failing, so weight binding
// lists them with its own in one error. *out then holds the modules that passed.
frost_status build_quant_plan(const QuantConfig& config, const Checkpoint& ck, QuantPlan* out,
                              std::vector<std::string>* problems);

// compressed-tensors name matching: "re:<regex>" matches when the regex matches at the start of
// the name (Python re.match); anything else must equal the name. Bad regexes are reported by
// build_quant_plan.
bool target_matches(const std::string& target, const std::string& module_name);

}  // namespace frost::model::quant
