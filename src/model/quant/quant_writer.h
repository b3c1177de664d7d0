// Quantizing writer for `frost synth --quant` and `frost quantize`: turns one bf16 linear weight into the tensors the
// real tools write (transformers' FineGrainedFP8 for Qwen's fp8 format; llm-compressor /
// compressed-tensors for FP8_DYNAMIC, NVFP4A16 and W4A16 [+ asymmetric]), and the matching
// quantization_config. The algorithms follow the published ones (absmax scales, round to nearest
// even); what matters for Frost is that the layout is exactly theirs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace frost::model::quant {

enum class WriteFormat : uint8_t { Fp8Block, Fp8Dynamic, Nvfp4, Int4, Int4Asym };
// "fp8", "fp8-dynamic", "nvfp4", "int4", "int4-asym"; false for anything else.
bool parse_write_format(const std::string& name, WriteFormat* out);
const char* write_format_names();  // "fp8|fp8-dynamic|nvfp4|int4|int4-asym"

// One tensor written in place of `<module>.weight`.
struct QuantOutTensor {
    std::string name;            // "<module>.weight_scale", ...
    std::string dtype;           // safetensors dtype name
    std::vector<int64_t> shape;
    uint64_t bytes = 0;
};

// The tensors (in write order) that replace the bf16 weight [out, in] of `module`.
std::vector<QuantOutTensor> quant_layout(WriteFormat f, const std::string& module, int64_t out, int64_t in);
// Quantizes `w` ([out, in] row-major, values already bf16-exact) into one byte blob per layout tensor.
std::vector<std::string> quantize_linear(WriteFormat f, const float* w, int64_t out, int64_t in);
// config.json "quantization_config" as the tool writes it. `ignore`: modules kept bf16.
nlohmann::json quant_config_json(WriteFormat f, const std::vector<std::string>& ignore);

// Linears the published recipes leave in bf16 besides the LM head and the vision tower (the GDN
// gate projections, the MoE router, the shared expert's gate), by the module name's last parts.
bool recipe_keeps_bf16(const std::string& module);
// What the recipes leave in bf16 as format f's config lists it: modules_to_not_convert (Qwen FP8:
// names or dotted parts of module paths) or compressed-tensors' ignore (names or "re:" patterns).
std::vector<std::string> recipe_ignore_list(WriteFormat f);

// Round-to-nearest-even encoders (saturating at the format's largest finite value).
uint8_t f32_to_fp4_e2m1(float x);

}  // namespace frost::model::quant
