// The `quantization_config` of a model's config.json, validated: Qwen's official block-wise FP8
// (quant_method "fp8"), llm-compressor's compressed-tensors (FP8 per-channel / per-tensor /
// block "float-quantized", NVFP4 "nvfp4-pack-quantized", INT4 "pack-quantized") and the 4-bit
// GPTQ ("gptq") and AWQ ("awq") formats. Frost runs the
// weights dequantized with unquantized activations (W-only), so activation schemes are parsed and
// recorded but never change the math. Every problem of the config is listed in one error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frost/exec.h"

namespace frost::model::quant {

// How one linear's weight is stored. The names are what `frost inspect` prints.
enum class Scheme : uint8_t {
    Fp8Block = 0,    // F8_E4M3 weight, one scale per block_rows x block_cols block
    Fp8Channel = 1,  // F8_E4M3 weight, one scale per output row ([out, 1])
    Fp8Tensor = 2,   // F8_E4M3 weight, one scale for the tensor ([1])
    Nvfp4 = 3,       // e2m1 pairs in U8, F8_E4M3 scale per 16 inputs, F32 global scale (divides)
    Int4 = 4,        // signed int4 (+8 offset) packed 8 per I32, scale per group, optional zero point
};
const char* scheme_name(Scheme s);  // "fp8-block", "fp8-channel", "fp8-tensor", "nvfp4", "int4"

struct WeightArgs {
    Scheme scheme = Scheme::Fp8Block;
    int block_rows = 0, block_cols = 0;  // Fp8Block
    int group_size = 0;                  // Nvfp4 (16) and Int4 (e.g. 128)
    bool symmetric = true;               // Int4: false -> weight_zero_point (packed 8 rows per I32)
    bool act_order_group = false;        // Int4: actorder "group" -> weight_g_idx maps columns to groups
    bool static_input_scale = false;     // FP8 static activations: an input_scale tensor is present
    bool input_global_scale = false;     // NVFP4 W4A4: an input_global_scale tensor is present
    std::string format;                  // on-disk format: "fp8" (Qwen) or the compressed-tensors format
    std::string describe() const;        // e.g. "nvfp4-pack-quantized: fp4 e2m1, group 16, fp8 scales, global scale"
};

struct ConfigGroup {
    std::string name;                  // "group_0"
    std::vector<std::string> targets;  // "Linear", exact module names, or "re:<regex>"
    WeightArgs weights;
};

enum class Method : uint8_t { None = 0, Fp8 = 1, CompressedTensors = 2, Gptq = 3, Awq = 4 };

// GPTQ (AutoGPTQ / GPTQModel, quant_method "gptq") and AutoAWQ (quant_method "awq", GEMM packing)
// 4-bit checkpoints: qweight / qzeros / scales (+ GPTQ g_idx) per linear. The plan repacks each
// module into the compressed-tensors INT4 layout (quant_plan.h), losslessly, so the dequantizer,
// the weight table and the kernels see one INT4 form.
struct NativeInt4 {
    int group_size = 128;       // inputs per scale group; -1 in the config: one group per row
    bool desc_act = false;      // GPTQ act-order: g_idx assigns each input column its group
    bool zero_plus_one = true;  // GPTQ v1 ("gptq") stores zero - 1; "gptq_v2" and AWQ store the zero
    std::string format;         // "gptq", "gptq_v2" or "awq"
};

struct QuantConfig {
    Method method = Method::None;
    WeightArgs fp8;                                   // Method::Fp8: the block scheme
    std::vector<std::string> modules_to_not_convert;  // Method::Fp8, Method::Awq
    NativeInt4 native;                                // Method::Gptq, Method::Awq
    std::vector<ConfigGroup> groups;                  // Method::CompressedTensors, in name order
    std::vector<std::string> ignore;                  // Method::CompressedTensors
    std::string format;                               // compressed-tensors top-level format
    bool quantized() const { return method != Method::None; }
    // One line naming the method and every scheme in use, e.g. "fp8 (block 128x128, e4m3)" or
    // "compressed-tensors nvfp4-pack-quantized"; "none" when not quantized. Hashed into the
    // deployment fingerprint.
    std::string summary() const;
};

// Parses the quantization_config of config.json text (absent -> Method::None). FROST_ERR_CORRUPT
// for malformed JSON, FROST_ERR_UNSUPPORTED listing every unsupported or inconsistent field.
frost_status parse_quant_config(const std::string& config_json_text, const std::string& source, QuantConfig* out);
frost_status load_quant_config(const std::string& model_dir, QuantConfig* out);

}  // namespace frost::model::quant
