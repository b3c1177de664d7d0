// Model hyperparameters: one validated struct for Qwen3.5/3.6 (nested text_config or flat),
// Qwen3.5-MoE and Qwen3-Next (flat, legacy rope fields). Spec: shared/design/model-qwen35.md §1-2.
// Parsing never silently ignores a feature: what the engine does not execute (MTP, attention
// biases, ...) is reported by unsupported_features(). MoE layers (Qwen3.5-MoE: every layer;
// Qwen3-Next: per decoder_sparse_step / mlp_only_layers) run on the CPU reference path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frost/exec.h"

namespace frost::model {

enum class LayerKind : uint8_t { Linear = 0, Full = 1 };  // "linear_attention" / "full_attention"
enum class Family : uint8_t { Qwen35 = 0, Qwen35Moe = 1, Qwen3Next = 2 };

struct ModelConfig {
    Family family = Family::Qwen35;
    std::string model_type;    // text model_type: qwen3_5_text, qwen3_5_moe_text, qwen3_next
    std::string architecture;  // architectures[0] of config.json
    bool multimodal_wrapper = false;  // text_config nested (weights under model.language_model.)
    std::string weight_prefix;        // "model.language_model." or "model."

    int hidden_size = 0;          // H
    int num_layers = 0;           // L (MTP layers not counted)
    std::vector<LayerKind> layer_types;  // size L
    int vocab_size = 0;
    int intermediate_size = 0;    // dense MLP width F (0 when every layer is MoE)

    // Full (gated softmax) attention.
    int num_heads = 0;      // Hq
    int num_kv_heads = 0;   // Hkv
    int head_dim = 0;       // d (256 in released models; explicit, never H/Hq)
    bool attn_output_gate = true;
    double rope_theta = 1e7;
    double partial_rotary_factor = 0.25;
    int rotary_dim = 0;     // head_dim * partial_rotary_factor (64)

    // Gated DeltaNet (linear attention).
    int lin_num_k_heads = 0;  // Hk
    int lin_num_v_heads = 0;  // Hv (multiple of Hk)
    int lin_k_head_dim = 0;   // dk
    int lin_v_head_dim = 0;   // dv
    int conv_kernel = 4;      // K

    double rms_norm_eps = 1e-6;
    int max_position_embeddings = 0;
    bool tie_word_embeddings = false;  // as declared; weights.cpp decides from the tensors present
    std::vector<int32_t> eos_token_ids;

    // MoE (spec §1, §4 "MoE block"). A layer is MoE when is_moe_layer(l); its MLP is a router
    // [E, H] + E SwiGLU experts of width moe_intermediate_size + a shared SwiGLU expert of width
    // shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate . x).
    int num_experts = 0;                      // E (0: dense model)
    int num_experts_per_tok = 0;              // k
    int moe_intermediate_size = 0;            // I
    int shared_expert_intermediate_size = 0;  // Is
    bool norm_topk_prob = true;               // renormalise the top-k weights (always for Qwen3.5-MoE)
    int decoder_sparse_step = 1;              // Qwen3-Next: layer l is MoE when (l+1) % step == 0
    std::vector<int> mlp_only_layers;         // Qwen3-Next: layers that keep a dense MLP

    int mtp_num_layers = 0;  // MTP head layers (parsed; weights kept, not executed yet)

    // Other parsed features the dense engine does not execute (attention biases, rope scaling,
    // a non-silu activation, Qwen3-Next mlp_only_layers ...), one line each; reported by
    // unsupported_features() next to MoE and MTP.
    std::vector<std::string> other_unsupported;

    // Derived sizes.
    int lin_q_dim() const { return lin_num_k_heads * lin_k_head_dim; }   // Q = Hk*dk
    int lin_v_dim() const { return lin_num_v_heads * lin_v_head_dim; }   // V = Hv*dv
    int conv_dim() const { return 2 * lin_q_dim() + lin_v_dim(); }       // C = 2Q+V
    int num_linear_layers() const;
    int num_full_layers() const;
    bool is_moe() const { return num_experts > 0; }
    // transformers Qwen3NextDecoderLayer's rule (Qwen3.5-MoE: step 1, no mlp_only_layers).
    bool is_moe_layer(int layer) const;
    int num_moe_layers() const;
    bool is_linear(int layer) const { return layer_types[layer] == LayerKind::Linear; }

    // Human-readable list of parsed features the engine does not execute ("MTP head (1 layer)",
    // "attention_bias ..."); empty when fully supported. MoE is executed (CPU backend), so it is
    // not listed; the CUDA engine refuses MoE itself until its kernels are wired in.
    std::vector<std::string> unsupported_features() const;
};

// Parses config.json text. On error returns FROST_ERR_CORRUPT / FROST_ERR_INVALID_ARG /
// FROST_ERR_UNSUPPORTED with frost_last_error() naming the field and the rule.
frost_status parse_config(const std::string& json_text, const std::string& source_name,
                          ModelConfig* out);
// Reads MODEL_DIR/config.json and parses it.
frost_status load_config(const std::string& model_dir, ModelConfig* out);

}  // namespace frost::model
