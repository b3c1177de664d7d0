// `frost quantize`: a bf16 (or fp16 / fp32) checkpoint rewritten in one of the published quantized
// formats (quant_writer.h: Qwen's block-128 FP8, compressed-tensors FP8_DYNAMIC, NVFP4A16, W4A16
// symmetric or asymmetric), with the layouts, config and ignore lists the tools write, so a user
// who downloaded a model in bf16 runs it quantized (and any reader of those formats loads it).
//
// What is quantized: every linear (a 2-D `<module>.weight` that is not an embedding or a norm, the
// quantization plan's definition) whose input width the format takes whole (INT4: groups of 128,
// NVFP4: groups of 16; a linear that does not fit stays as stored and is listed), except what the
// published recipes keep in bf16: the LM head, the vision tower, the GDN gate projections, the
// MoE router and shared-expert gate (recipe_keeps_bf16), and the MTP head, which Frost does not
// run. The scales are round-to-nearest absmax (quant_writer.cpp), as Qwen's own FP8 releases and
// llm-compressor's data-free schemes compute them; GPTQ / AWQ need calibration data and are not
// done here. Every other tensor and every other file of the folder is copied unchanged; config.json
// gains quantization_config. The result is checked before returning: it opens, and its
// quantization plan binds every module as written.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "frost/exec.h"

namespace frost::model::quant {

struct QuantizeOptions {
    std::string model_dir;  // the source checkpoint (config.json + safetensors, sharded or not)
    std::string out_dir;    // created if missing; must not already hold a checkpoint
    std::string format;     // write_format_names(): fp8 | fp8-dynamic | nvfp4 | int4 | int4-asym
    uint64_t shard_bytes = 4000000000ULL;  // above this, weights are split into shards + index
    unsigned threads = 0;                  // 0: up to 8 (each holds one fp32 copy of a weight)
    bool progress = false;
};

struct QuantizeSummary {
    size_t quantized = 0;  // linear modules written in the format
    size_t kept = 0;       // linear modules left as stored (recipe, MTP, shape), all in the ignore list
    size_t tensors_in = 0, tensors_out = 0, shards = 0, files_copied = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
};

frost_status quantize_checkpoint(const QuantizeOptions& opt, QuantizeSummary* summary = nullptr);

}  // namespace frost::model::quant
