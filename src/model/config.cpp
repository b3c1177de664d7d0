// config.json -> ModelConfig for Qwen3.5/3.6 (wrapper with text_config, or flat), Qwen3.5-MoE and
// Qwen3-Next (flat, legacy top-level rope fields). Spec: shared/design/model-qwen35.md §1.
#include "model/config.h"

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "util/fs.h"

namespace frost::model {
namespace {

using nlohmann::json;

constexpr int kDefaultFullAttentionInterval = 4;
constexpr double kDefaultRopeTheta = 1e7;
constexpr double kDefaultRotaryFactor = 0.25;
constexpr double kDefaultRmsEps = 1e-6;
constexpr int kDefaultConvKernel = 4;

struct Reader {
    const json& obj;
    const std::string& src;
    std::string prefix;  // "text_config." when nested

    frost_status get_int(const char* key, int* out, bool required, int min_value = 1) const {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) {
            if (required) return fail(FROST_ERR_INVALID_ARG, "%s: missing required field '%s%s'", src.c_str(), prefix.c_str(), key);
            return FROST_OK;
        }
        if (!it->is_number_integer())
            return fail(FROST_ERR_INVALID_ARG, "%s: field '%s%s' must be an integer", src.c_str(), prefix.c_str(), key);
        int64_t v = it->get<int64_t>();
        if (v < min_value || v > INT32_MAX)
            return fail(FROST_ERR_INVALID_ARG, "%s: field '%s%s' = %lld out of range (must be >= %d)", src.c_str(),
                        prefix.c_str(), key, (long long)v, min_value);
        *out = int(v);
        return FROST_OK;
    }
    frost_status get_double(const json& o, const char* key, double* out) const {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) return FROST_OK;
        if (!it->is_number())
            return fail(FROST_ERR_INVALID_ARG, "%s: field '%s%s' must be a number", src.c_str(), prefix.c_str(), key);
        *out = it->get<double>();
        return FROST_OK;
    }
    frost_status get_bool(const char* key, bool* out) const {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) return FROST_OK;
        if (!it->is_boolean())
            return fail(FROST_ERR_INVALID_ARG, "%s: field '%s%s' must be a boolean", src.c_str(), prefix.c_str(), key);
        *out = it->get<bool>();
        return FROST_OK;
    }
};

frost_status parse_eos(const json& v, const std::string& src, std::vector<int32_t>* out) {
    if (v.is_null()) return FROST_OK;
    auto add = [&](const json& x) -> frost_status {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
            return fail(FROST_ERR_INVALID_ARG, "%s: eos_token_id entries must be non-negative integers", src.c_str());
        int32_t id = int32_t(x.get<int64_t>());
        if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
        return FROST_OK;
    };
    if (v.is_array()) {
        for (const auto& x : v) FROST_TRY(add(x));
        return FROST_OK;
    }
    return add(v);
}

// MoE geometry and which layers are sparse (Qwen3-Next decoder_sparse_step / mlp_only_layers;
// transformers Qwen3NextDecoderLayer). Qwen3.5-MoE makes every layer sparse and ignores both.
frost_status parse_moe_layout(const json& t, const Reader& r, ModelConfig* c) {
    const std::string& src = r.src;
    if (!c->is_moe()) return FROST_OK;
    if (c->num_experts_per_tok < 1 || c->num_experts_per_tok > c->num_experts)
        return fail(FROST_ERR_INVALID_ARG, "%s: field '%snum_experts_per_tok' = %d must be in [1, num_experts = %d]",
                    src.c_str(), r.prefix.c_str(), c->num_experts_per_tok, c->num_experts);
    if (c->moe_intermediate_size < 1)
        return fail(FROST_ERR_INVALID_ARG, "%s: field '%smoe_intermediate_size' must be > 0 for a MoE model",
                    src.c_str(), r.prefix.c_str());
    if (c->shared_expert_intermediate_size < 1)
        return fail(FROST_ERR_INVALID_ARG, "%s: field '%sshared_expert_intermediate_size' must be > 0 for a MoE model",
                    src.c_str(), r.prefix.c_str());
    if (c->family != Family::Qwen3Next) return FROST_OK;
    FROST_TRY(r.get_int("decoder_sparse_step", &c->decoder_sparse_step, false));
    auto mol = t.find("mlp_only_layers");
    if (mol != t.end() && !mol->is_null()) {
        if (!mol->is_array())
            return fail(FROST_ERR_INVALID_ARG, "%s: field '%smlp_only_layers' must be a list of layer indices",
                        src.c_str(), r.prefix.c_str());
        for (const auto& v : *mol) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c->num_layers)
                return fail(FROST_ERR_INVALID_ARG, "%s: field '%smlp_only_layers' entry %s is not a layer index in [0, %d)",
                            src.c_str(), r.prefix.c_str(), v.dump().c_str(), c->num_layers);
            c->mlp_only_layers.push_back(int(v.get<int64_t>()));
        }
    }
    if (c->num_moe_layers() < c->num_layers && c->intermediate_size <= 0)
        return fail(FROST_ERR_INVALID_ARG,
                    "%s: %d layer(s) keep a dense MLP (decoder_sparse_step / mlp_only_layers) but '%sintermediate_size' is "
                    "missing or 0",
                    src.c_str(), c->num_layers - c->num_moe_layers(), r.prefix.c_str());
    return FROST_OK;
}

frost_status parse_text(const json& root, const json& t, const std::string& src, ModelConfig* c) {
    Reader r{t, src, c->multimodal_wrapper ? "text_config." : ""};
    c->model_type = t.value("model_type", std::string());
    if (c->model_type.empty()) c->model_type = root.value("model_type", std::string());  // qwen3_5 wrapper
    if (c->model_type == "qwen3_5_text" || c->model_type == "qwen3_5") c->family = Family::Qwen35;
    else if (c->model_type == "qwen3_5_moe_text" || c->model_type == "qwen3_5_moe") c->family = Family::Qwen35Moe;
    else if (c->model_type == "qwen3_next") c->family = Family::Qwen3Next;
    else
        return fail(FROST_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (qwen3_5_text, qwen3_5_moe_text, qwen3_next)",
                    src.c_str(), c->model_type.c_str());

    FROST_TRY(r.get_int("hidden_size", &c->hidden_size, true));
    FROST_TRY(r.get_int("num_hidden_layers", &c->num_layers, true));
    FROST_TRY(r.get_int("vocab_size", &c->vocab_size, true));
    FROST_TRY(r.get_int("num_attention_heads", &c->num_heads, true));
    FROST_TRY(r.get_int("num_key_value_heads", &c->num_kv_heads, true));
    FROST_TRY(r.get_int("head_dim", &c->head_dim, true));
    FROST_TRY(r.get_int("linear_num_key_heads", &c->lin_num_k_heads, true));
    FROST_TRY(r.get_int("linear_num_value_heads", &c->lin_num_v_heads, true));
    FROST_TRY(r.get_int("linear_key_head_dim", &c->lin_k_head_dim, true));
    FROST_TRY(r.get_int("linear_value_head_dim", &c->lin_v_head_dim, true));
    c->conv_kernel = kDefaultConvKernel;
    FROST_TRY(r.get_int("linear_conv_kernel_dim", &c->conv_kernel, false));
    FROST_TRY(r.get_int("max_position_embeddings", &c->max_position_embeddings, false));
    FROST_TRY(r.get_int("num_experts", &c->num_experts, false, 0));
    FROST_TRY(r.get_int("num_experts_per_tok", &c->num_experts_per_tok, false, 0));
    FROST_TRY(r.get_int("moe_intermediate_size", &c->moe_intermediate_size, false, 0));
    FROST_TRY(r.get_int("shared_expert_intermediate_size", &c->shared_expert_intermediate_size, false, 0));
    FROST_TRY(r.get_int("intermediate_size", &c->intermediate_size, !c->is_moe() && c->family == Family::Qwen35, 0));
    FROST_TRY(r.get_bool("norm_topk_prob", &c->norm_topk_prob));
    if (c->family == Family::Qwen35Moe) c->norm_topk_prob = true;  // Qwen3.5-MoE always renormalises (spec §1)
    c->attn_output_gate = true;
    FROST_TRY(r.get_bool("attn_output_gate", &c->attn_output_gate));
    FROST_TRY(r.get_int("mtp_num_hidden_layers", &c->mtp_num_layers, false, 0));
    FROST_TRY(r.get_int("num_nextn_predict_layers", &c->mtp_num_layers, false, 0));
    c->rms_norm_eps = kDefaultRmsEps;
    FROST_TRY(r.get_double(t, "rms_norm_eps", &c->rms_norm_eps));

    // Rope: current files nest it in rope_parameters; legacy Qwen3-Next files have top-level fields.
    c->rope_theta = kDefaultRopeTheta;
    c->partial_rotary_factor = kDefaultRotaryFactor;
    FROST_TRY(r.get_double(t, "rope_theta", &c->rope_theta));
    FROST_TRY(r.get_double(t, "partial_rotary_factor", &c->partial_rotary_factor));
    auto rp = t.find("rope_parameters");
    if (rp != t.end() && rp->is_object()) {
        FROST_TRY(r.get_double(*rp, "rope_theta", &c->rope_theta));
        FROST_TRY(r.get_double(*rp, "partial_rotary_factor", &c->partial_rotary_factor));
        std::string type = rp->value("rope_type", std::string("default"));
        if (type != "default") c->other_unsupported.push_back("rope_parameters.rope_type '" + type + "'");
    }
    auto rs = t.find("rope_scaling");
    if (rs != t.end() && !rs->is_null()) {
        std::string type = rs->is_object() ? rs->value("rope_type", rs->value("type", std::string("?"))) : "?";
        if (type != "default") c->other_unsupported.push_back("rope_scaling (" + type + ")");
    }
    if (c->rope_theta <= 0)
        return fail(FROST_ERR_INVALID_ARG, "%s: rope_theta must be positive", src.c_str());
    if (c->partial_rotary_factor <= 0 || c->partial_rotary_factor > 1)
        return fail(FROST_ERR_INVALID_ARG, "%s: partial_rotary_factor must be in (0, 1]", src.c_str());
    c->rotary_dim = int(c->head_dim * c->partial_rotary_factor + 0.5);
    if (c->rotary_dim % 2 != 0 || c->rotary_dim == 0)
        return fail(FROST_ERR_INVALID_ARG, "%s: rotary dim head_dim*partial_rotary_factor = %d must be even and > 0",
                    src.c_str(), c->rotary_dim);

    // Layer kinds: explicit list, or every full_attention_interval-th layer is full attention.
    auto lt = t.find("layer_types");
    if (lt != t.end() && !lt->is_null()) {
        if (!lt->is_array() || int(lt->size()) != c->num_layers)
            return fail(FROST_ERR_INVALID_ARG, "%s: layer_types must be a list of num_hidden_layers (%d) entries",
                        src.c_str(), c->num_layers);
        for (const auto& k : *lt) {
            std::string s = k.is_string() ? k.get<std::string>() : "";
            if (s == "linear_attention") c->layer_types.push_back(LayerKind::Linear);
            else if (s == "full_attention") c->layer_types.push_back(LayerKind::Full);
            else
                return fail(FROST_ERR_UNSUPPORTED, "%s: layer_types entry '%s' is not linear_attention or full_attention",
                            src.c_str(), k.dump().c_str());
        }
    } else {
        int interval = kDefaultFullAttentionInterval;
        FROST_TRY(r.get_int("full_attention_interval", &interval, false));
        for (int i = 0; i < c->num_layers; ++i)
            c->layer_types.push_back((i + 1) % interval == 0 ? LayerKind::Full : LayerKind::Linear);
    }

    if (c->num_heads % c->num_kv_heads != 0)
        return fail(FROST_ERR_INVALID_ARG, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                    src.c_str(), c->num_heads, c->num_kv_heads);
    if (c->lin_num_v_heads % c->lin_num_k_heads != 0)
        return fail(FROST_ERR_INVALID_ARG, "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d",
                    src.c_str(), c->lin_num_v_heads, c->lin_num_k_heads);

    bool attention_bias = false;
    FROST_TRY(r.get_bool("attention_bias", &attention_bias));
    if (attention_bias) c->other_unsupported.push_back("attention_bias (biases in attention projections)");
    std::string act = t.value("hidden_act", std::string("silu"));
    if (act != "silu") c->other_unsupported.push_back("hidden_act '" + act + "' (only silu)");
    if (!c->attn_output_gate) c->other_unsupported.push_back("attn_output_gate false (ungated attention)");
    FROST_TRY(parse_moe_layout(t, r, c));
    if (!c->is_moe() && c->intermediate_size <= 0)
        return fail(FROST_ERR_INVALID_ARG, "%s: a dense model needs intermediate_size > 0", src.c_str());

    // tie_word_embeddings exists at top level and in text_config; the tensors decide (weights.cpp).
    c->tie_word_embeddings = root.value("tie_word_embeddings", false);
    FROST_TRY(r.get_bool("tie_word_embeddings", &c->tie_word_embeddings));
    auto eos = t.find("eos_token_id");
    if (eos != t.end()) FROST_TRY(parse_eos(*eos, src, &c->eos_token_ids));
    auto reos = root.find("eos_token_id");
    if (c->multimodal_wrapper && reos != root.end()) FROST_TRY(parse_eos(*reos, src, &c->eos_token_ids));
    return FROST_OK;
}

}  // namespace

int ModelConfig::num_linear_layers() const {
    int n = 0;
    for (auto k : layer_types) n += k == LayerKind::Linear;
    return n;
}

int ModelConfig::num_full_layers() const { return int(layer_types.size()) - num_linear_layers(); }

bool ModelConfig::is_moe_layer(int layer) const {
    if (!is_moe() || layer < 0 || layer >= num_layers) return false;
    if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
    return decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

int ModelConfig::num_moe_layers() const {
    int n = 0;
    for (int l = 0; l < num_layers; ++l) n += is_moe_layer(l);
    return n;
}

std::vector<std::string> ModelConfig::unsupported_features() const {
    std::vector<std::string> f;
    if (mtp_num_layers > 0)
        f.push_back("MTP head (" + std::to_string(mtp_num_layers) + (mtp_num_layers == 1 ? " layer)" : " layers)"));
    f.insert(f.end(), other_unsupported.begin(), other_unsupported.end());
    return f;
}

frost_status parse_config(const std::string& json_text, const std::string& source_name, ModelConfig* out) {
    ModelConfig c;
    try {
        json root = json::parse(json_text);
        if (!root.is_object()) return fail(FROST_ERR_CORRUPT, "%s: config is not a JSON object", source_name.c_str());
        auto arch = root.find("architectures");
        if (arch != root.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string())
            c.architecture = (*arch)[0].get<std::string>();
        auto tc = root.find("text_config");
        c.multimodal_wrapper = tc != root.end() && tc->is_object();
        c.weight_prefix = c.multimodal_wrapper ? "model.language_model." : "model.";
        FROST_TRY(parse_text(root, c.multimodal_wrapper ? *tc : root, source_name, &c));
    } catch (const json::parse_error& e) {
        return fail(FROST_ERR_CORRUPT, "%s: not valid JSON: %s", source_name.c_str(), e.what());
    } catch (const std::exception& e) {
        return fail(FROST_ERR_INVALID_ARG, "%s: %s", source_name.c_str(), e.what());
    }
    *out = std::move(c);
    return FROST_OK;
}

frost_status load_config(const std::string& model_dir, ModelConfig* out) {
    const std::string path = util::join_path(model_dir, "config.json");
    std::string text, err;
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "%s: injected I/O fault", path.c_str());
    if (!util::read_file(path, &text, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    FROST_TRY(parse_config(text, path, out));
    // generation_config.json holds the stop ids for checkpoints whose config has eos null.
    const std::string gen_path = util::join_path(model_dir, "generation_config.json");
    std::string gen;
    if (util::read_file(gen_path, &gen, &err)) {
        try {
            json g = json::parse(gen);
            if (g.is_object() && g.contains("eos_token_id")) FROST_TRY(parse_eos(g["eos_token_id"], gen_path, &out->eos_token_ids));
        } catch (const std::exception& e) {
            return fail(FROST_ERR_CORRUPT, "%s: %s", gen_path.c_str(), e.what());
        }
    }
    return FROST_OK;
}

}  // namespace frost::model
