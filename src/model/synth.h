// Synthetic checkpoints: a valid Qwen3.5 model folder in the released multimodal-wrapper layout
// (config.json with text_config, model.language_model.* tensors, index + shards above
// shard_bytes) with deterministic random bf16 weights, streamed to disk tensor by tensor.
// MoE presets write Qwen3.5-MoE (same wrapper, per-expert tensors as released) or Qwen3-Next
// (flat config and model.* keys, fused in_proj_qkvz / in_proj_ba, per-expert tensors).
// Used by CPU tests, demos and benchmarks at real sizes without downloading anything.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frost/exec.h"

namespace frost::model {

struct SynthPreset {
    std::string name;
    int hidden = 0, layers = 0, ffn = 0;
    int heads = 0, kv_heads = 0, head_dim = 0;
    int lin_k_heads = 0, lin_v_heads = 0, lin_k_dim = 0, lin_v_dim = 0;
    int vocab = 0;
    bool tied = false;
    int max_positions = 0;
    // MoE (moe_experts > 0). Qwen3.5-MoE makes every layer sparse; Qwen3-Next layer l is sparse
    // when (l+1) % sparse_step == 0 (dense layers then use `ffn`).
    int moe_experts = 0, moe_top_k = 0, moe_ffn = 0, moe_shared_ffn = 0;
    bool qwen3_next = false;  // Qwen3-Next layout (Qwen3NextForCausalLM)
    int sparse_step = 1;
};

// Presets: tiny, tiny-gpu (smallest shape the CUDA kernels accept), 0.8b, 2b, 4b, 9b, 27b (spec
// model-qwen35.md §2; 2b values are a plausible guess); MoE: moe-tiny (tests), 35b-a3b
// (Qwen3.5/3.6-35B-A3B), next-moe-tiny (Qwen3-Next layout, every other layer sparse, tests),
// moe-tiny-gpu / next-moe-tiny-gpu (the same at shapes the CUDA kernels accept), moe-tiny-gpu-i128
// (expert and shared widths 128, as the released models have them equal), next-80b-a3b
// (Qwen3-Next-80B-A3B).
bool find_synth_preset(const std::string& name, SynthPreset* out);
std::vector<std::string> synth_preset_names();

struct SynthOptions {
    std::string out_dir;
    std::string preset = "tiny";
    int vocab = 0;                 // 0: the preset's (raised to fit the tokenizer when one is given)
    uint64_t seed = 0;
    std::string tokenizer_dir;     // copy tokenizer.json / tokenizer_config.json from here if set
    uint64_t shard_bytes = 4000000000ULL;  // above this, weights are split into shards + index
    bool progress = false;
    // "" (bf16) or a quantized format written as the published tools do: fp8 (Qwen block 128),
    // fp8-dynamic, nvfp4, int4, int4-asym (compressed-tensors). See model/quant/quant_writer.h.
    std::string quant;
    // MoE presets only (with --quant too: the writer quantizes the rewritten projections, whose
    // routing rows stay exactly zero): a decisive router, so a bf16 or quantized path routes every
    // token as fp32 does.
    // ceil(log2 E) "routing channels" of the residual stream carry a per-token sign pattern set by
    // the embedding (+-2 embed_std) that no layer writes (those rows of every output projection
    // are zero; their post-attention norm weights are 0, i.e. gain 1), and the router reads only
    // them: expert e scores beta * sum_j (bit j of e ? +1 : -1) * w_j * x_j with large weights
    // w_j on the high "coarse" bits and 0.25 on the log2(k) low "fine" bits, so the top-k set is
    // the k experts matching the token's code on the coarse bits, far (>= 3.5 w units) from the
    // rest, with unequal weights inside the set. The top-k gap is large at every token (tests
    // assert >= 0.05 from the fp32 trace) for any residual scale within 50x; routing still
    // varies by token (E / k sets). Needs a power-of-two k < E. config.json records it.
    bool decisive_router = false;
    // Every file of the checkpoint as usual (config, index, shard headers, layout and sizes), but
    // the tensor data left as holes: sparse files that read as zeros, written in milliseconds and
    // taking no disk. Lets a released shape (next-80b-a3b: 160 GB) be bound and inspected
    // (names, shapes, dtypes, parameter counts) without writing it; its outputs are meaningless.
    bool header_only = false;
    // > 0: the preset cut to its first `layers` layers (same shapes and layer pattern): a released
    // shape's per-layer kernels can be measured without writing the whole checkpoint (35B-A3B:
    // 70 GB; 4 layers: 7 GB). Must not exceed the preset's layer count.
    int layers = 0;
};

struct SynthSummary {
    uint64_t tensor_bytes = 0;
    size_t tensors = 0;
    size_t shards = 0;
    int vocab = 0;
    std::vector<int32_t> eos_ids;
};

frost_status synth_checkpoint(const SynthOptions& opt, SynthSummary* summary = nullptr);

}  // namespace frost::model
