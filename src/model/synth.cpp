// Writes a synthetic Qwen3.5 checkpoint. Weight scales keep activations and logits in a realistic
// range: projections uniform with std 1/sqrt(fan_in); zero-centred norm weights near 0 (the model
// multiplies by 1+w); the gated-norm weight near 1; A_log = log(U[1,16]) and dt_bias the inverse
// softplus of a log-uniform dt in [1e-3, 1e-1] (transformers / Mamba init), so decays span
// exp(-1.6)..~1; embeddings and lm_head with std 2/sqrt(H) so logits have std ~2, not flat.
#include "model/synth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "model/quant/quant_writer.h"
#include "model/shard_writer.h"
#include "util/bf16.h"
#include "util/fs.h"
#include "util/progress.h"

namespace frost::model {
namespace {

using nlohmann::json;

constexpr int kQwen35Vocab = 248320;
constexpr int kQwen3NextVocab = 151936;
constexpr int32_t kQwen3NextEos = 151645;  // <|im_end|> of the Qwen3 tokenizer
constexpr int32_t kQwen35EndOfText = 248044, kQwen35ImEnd = 248046;
constexpr int kConvKernel = 4;
constexpr int kVocabRound = 64;          // pad a tokenizer-derived vocab like the released models
constexpr size_t kChunkElems = 1 << 20;  // bf16 values generated per write

const SynthPreset kPresets[] = {
    // name   H     L   F      Hq Hkv d    Hk Hv dk   dv   vocab        tied   max_pos
    {"tiny", 256, 4, 512, 4, 1, 64, 2, 4, 32, 32, 4096, true, 32768},
    // the smallest shape the CUDA kernels accept (head_dim 256, dk = dv = 128): GPU engine tests
    {"tiny-gpu", 256, 4, 512, 2, 1, 256, 1, 2, 128, 128, 4096, true, 32768},
    {"0.8b", 1024, 24, 3584, 8, 2, 256, 16, 16, 128, 128, kQwen35Vocab, true, 262144},
    {"2b", 2048, 24, 6144, 8, 2, 256, 16, 16, 128, 128, kQwen35Vocab, true, 262144},
    {"4b", 2560, 32, 9216, 16, 4, 256, 16, 32, 128, 128, kQwen35Vocab, true, 262144},
    {"9b", 4096, 32, 12288, 16, 4, 256, 16, 32, 128, 128, kQwen35Vocab, false, 262144},
    {"27b", 5120, 64, 17408, 24, 4, 256, 16, 48, 128, 128, kQwen35Vocab, false, 262144},
    // MoE. name      H    L   F     Hq Hkv d   Hk Hv dk   dv   vocab         tied   max_pos  E    k   I    Is   next   step
    {"moe-tiny", 256, 4, 0, 4, 1, 64, 2, 4, 32, 32, 4096, true, 32768, 8, 2, 64, 128, false, 1},
    {"35b-a3b", 2048, 40, 0, 16, 2, 256, 16, 32, 128, 128, kQwen35Vocab, false, 262144, 256, 8, 512, 512, false, 1},
    {"next-moe-tiny", 256, 4, 512, 4, 1, 64, 2, 4, 32, 32, 4096, true, 32768, 8, 2, 64, 128, true, 2},
    // the tiny MoE shapes the CUDA kernels accept (head_dim 256, dk = dv = 128): GPU engine tests
    {"moe-tiny-gpu", 256, 4, 0, 2, 1, 256, 1, 2, 128, 128, 4096, true, 32768, 8, 2, 64, 128, false, 1},
    {"next-moe-tiny-gpu", 256, 4, 512, 2, 1, 256, 1, 2, 128, 128, 4096, true, 32768, 8, 2, 64, 128, true, 2},
    // expert and shared widths equal and a multiple of 128, as in the released MoE models: the
    // quantized decode folds the shared expert into the routed launches
    {"moe-tiny-gpu-i128", 256, 4, 0, 2, 1, 256, 1, 2, 128, 128, 4096, true, 32768, 8, 2, 128, 128, false, 1},
    {"next-80b-a3b", 2048, 48, 5120, 16, 2, 256, 16, 32, 128, 128, kQwen3NextVocab, false, 262144, 512, 10, 512, 512, true, 1},
};

bool is_moe_layer(const SynthPreset& p, int layer) { return p.moe_experts > 0 && (layer + 1) % p.sparse_step == 0; }

enum class Init { Linear, Embed, ZeroNorm, OneNorm, ALog, DtBias, Conv };

struct PlannedTensor {
    std::string name;
    std::vector<int64_t> shape;
    Init init = Init::Linear;
    int64_t fan_in = 1;
    uint64_t bytes = 0;
    size_t shard = 0;
    uint64_t begin = 0;
    std::string dtype = "BF16";
    // --quant: part `quant_part` of the tensors replacing `module`.weight (shape `weight_shape`);
    // part 0 carries the bytes of all parts so a module never straddles two shards.
    int quant_part = -1;
    std::string module;
    std::vector<int64_t> weight_shape;
    uint64_t group_bytes = 0;
    // SynthOptions::decisive_router: what this tensor does for it.
    enum class Routing { None, Embed, NormGain, OutRows, Router } routing = Routing::None;
};

// SynthOptions::decisive_router's constants (see synth.h): m routing channels at +-c, router scale beta.
struct DecisiveRouter {
    int m = 0;         // 0: off
    int E = 0;
    int fine = 0;      // log2(k): the least significant bits, which order the top-k set
    float c = 0, beta = 0;
};

// Rewrites value v (already drawn, so every other tensor's stream is unchanged) of element
// `idx` of tensor t for the decisive router.
float decisive(const DecisiveRouter& d, const PlannedTensor& t, uint64_t idx, float v) {
    if (d.m == 0 || t.routing == PlannedTensor::Routing::None) return v;
    // A quantized module's part 0 carries the dense weight's shape (its own is the packed one).
    const std::vector<int64_t>& shape = t.weight_shape.empty() ? t.shape : t.weight_shape;
    const uint64_t cols = uint64_t(shape.size() == 2 ? shape[1] : 1);
    const uint64_t row = idx / cols, col = idx % cols;
    switch (t.routing) {
        case PlannedTensor::Routing::Embed: return col < uint64_t(d.m) ? (v < 0 ? -d.c : d.c) : v;
        case PlannedTensor::Routing::NormGain: return idx < uint64_t(d.m) ? 0.f : v;
        case PlannedTensor::Routing::OutRows: return row < uint64_t(d.m) ? 0.f : v;
        case PlannedTensor::Routing::Router: {
            if (col >= uint64_t(d.m)) return 0.f;
            // Coarse bits (the top-k set: the k experts matching the token's code on them) weigh
            // 2, 4, 8, ... from the least significant up; fine bits (order inside the set) 0.25.
            const int j = int(col);
            const float sign = (row >> j) & 1 ? 1.f : -1.f;
            const float weight = j >= d.m - d.fine ? 0.25f / float(1 << (j - (d.m - d.fine))) : float(2 << (d.m - d.fine - 1 - j));
            return d.beta * sign * weight;
        }
        default: return v;
    }
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tags the tensors decisive_router rewrites: the embedding, the post-attention norms, every
// projection writing the residual stream, the routers. A quantized module is tagged on its part 0
// (the writer quantizes the rewritten dense values there; zero rows stay exactly zero in every
// format).
void tag_routing(std::vector<PlannedTensor>* ts) {
    using R = PlannedTensor::Routing;
    for (auto& t : *ts) {
        if (t.quant_part > 0) continue;
        const std::string name = t.quant_part == 0 ? t.module + ".weight" : t.name;
        if (ends_with(name, "embed_tokens.weight")) t.routing = R::Embed;
        else if (ends_with(name, "post_attention_layernorm.weight")) t.routing = R::NormGain;
        else if (ends_with(name, "out_proj.weight") || ends_with(name, "o_proj.weight") ||
                 ends_with(name, "down_proj.weight"))
            t.routing = R::OutRows;
        else if (ends_with(name, "mlp.gate.weight")) t.routing = R::Router;
    }
}

uint64_t splitmix64(uint64_t* s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
double uniform01(uint64_t* s) { return double(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }

uint64_t name_seed(uint64_t seed, const std::string& name) {
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;  // FNV-1a over the name, mixed with the seed
    for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

// Half-width of the uniform distribution for the "scaled symmetric" inits (std = width/sqrt(3)).
double uniform_half_width(Init init, int64_t fan_in, double embed_std) {
    const double kSqrt3 = std::sqrt(3.0);
    switch (init) {
        case Init::Linear: return kSqrt3 / std::sqrt(double(fan_in));
        case Init::Conv: return kSqrt3 / std::sqrt(double(kConvKernel));
        case Init::Embed: return kSqrt3 * embed_std;
        case Init::ZeroNorm:
        case Init::OneNorm: return 0.1;
        default: return 1.0;
    }
}

float draw(Init init, double half_width, uint64_t* s) {
    const double u = uniform01(s);
    const double sym = 2.0 * u - 1.0;  // U(-1, 1)
    switch (init) {
        case Init::Linear:
        case Init::Conv:
        case Init::Embed:
        case Init::ZeroNorm: return float(sym * half_width);
        case Init::OneNorm: return float(1.0 + sym * half_width);
        case Init::ALog: return float(std::log(1.0 + 15.0 * u));
        case Init::DtBias: {
            double dt = std::exp(std::log(1e-3) + u * (std::log(1e-1) - std::log(1e-3)));
            return float(dt + std::log(-std::expm1(-dt)));  // softplus^-1(dt)
        }
    }
    return 0.f;
}

std::vector<PlannedTensor> plan(const SynthPreset& p, int vocab) {
    std::vector<PlannedTensor> t;
    const std::string P = p.qwen3_next ? "model." : "model.language_model.";
    const int64_t H = p.hidden, F = p.ffn, Q = int64_t(p.lin_k_heads) * p.lin_k_dim, V = int64_t(p.lin_v_heads) * p.lin_v_dim;
    const int64_t C = 2 * Q + V, Hv = p.lin_v_heads, d = p.head_dim;
    auto add = [&](std::string n, std::vector<int64_t> shape, Init init) {
        int64_t fan_in = shape.size() == 2 ? shape[1] : 1;
        PlannedTensor pt;
        pt.name = std::move(n);
        pt.shape = std::move(shape);
        pt.init = init;
        pt.fan_in = fan_in;
        t.push_back(std::move(pt));
    };
    add(P + "embed_tokens.weight", {vocab, H}, Init::Embed);
    for (int i = 0; i < p.layers; ++i) {
        const std::string l = P + "layers." + std::to_string(i) + ".";
        add(l + "input_layernorm.weight", {H}, Init::ZeroNorm);
        if ((i + 1) % 4 != 0) {
            const std::string a = l + "linear_attn.";
            if (p.qwen3_next) {  // fused, grouped per key head (de-interleaved at load)
                add(a + "in_proj_qkvz.weight", {C + V, H}, Init::Linear);
                add(a + "in_proj_ba.weight", {2 * Hv, H}, Init::Linear);
            } else {
                add(a + "in_proj_qkv.weight", {C, H}, Init::Linear);
                add(a + "in_proj_z.weight", {V, H}, Init::Linear);
                add(a + "in_proj_b.weight", {Hv, H}, Init::Linear);
                add(a + "in_proj_a.weight", {Hv, H}, Init::Linear);
            }
            add(a + "conv1d.weight", {C, 1, kConvKernel}, Init::Conv);
            add(a + "A_log", {Hv}, Init::ALog);
            add(a + "dt_bias", {Hv}, Init::DtBias);
            add(a + "norm.weight", {p.lin_v_dim}, Init::OneNorm);
            add(a + "out_proj.weight", {H, V}, Init::Linear);
        } else {
            const std::string a = l + "self_attn.";
            add(a + "q_proj.weight", {2 * p.heads * d, H}, Init::Linear);
            add(a + "k_proj.weight", {p.kv_heads * d, H}, Init::Linear);
            add(a + "v_proj.weight", {p.kv_heads * d, H}, Init::Linear);
            add(a + "o_proj.weight", {H, p.heads * d}, Init::Linear);
            add(a + "q_norm.weight", {d}, Init::ZeroNorm);
            add(a + "k_norm.weight", {d}, Init::ZeroNorm);
        }
        add(l + "post_attention_layernorm.weight", {H}, Init::ZeroNorm);
        if (is_moe_layer(p, i)) {
            const int64_t I = p.moe_ffn, Is = p.moe_shared_ffn;
            add(l + "mlp.gate.weight", {p.moe_experts, H}, Init::Linear);
            for (int e = 0; e < p.moe_experts; ++e) {
                const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
                add(x + "gate_proj.weight", {I, H}, Init::Linear);
                add(x + "up_proj.weight", {I, H}, Init::Linear);
                add(x + "down_proj.weight", {H, I}, Init::Linear);
            }
            add(l + "mlp.shared_expert.gate_proj.weight", {Is, H}, Init::Linear);
            add(l + "mlp.shared_expert.up_proj.weight", {Is, H}, Init::Linear);
            add(l + "mlp.shared_expert.down_proj.weight", {H, Is}, Init::Linear);
            add(l + "mlp.shared_expert_gate.weight", {1, H}, Init::Linear);
            continue;
        }
        add(l + "mlp.gate_proj.weight", {F, H}, Init::Linear);
        add(l + "mlp.up_proj.weight", {F, H}, Init::Linear);
        add(l + "mlp.down_proj.weight", {H, F}, Init::Linear);
    }
    add(P + "norm.weight", {H}, Init::ZeroNorm);
    if (!p.tied) add("lm_head.weight", {vocab, H}, Init::Embed);
    for (auto& x : t) {
        uint64_t n = 1;
        for (auto s : x.shape) n *= uint64_t(s);
        x.bytes = n * sizeof(uint16_t);
    }
    return t;
}

// Replaces every projection weight (Init::Linear) by the tensors of quantized format `f`; the
// embedding, lm_head and the recipes' bf16 linears (recipe_keeps_bf16) stay bf16, as the
// published tools leave them.
std::vector<PlannedTensor> quantize_plan(std::vector<PlannedTensor> in, quant::WriteFormat f) {
    std::vector<PlannedTensor> out;
    for (auto& t : in) {
        const std::string module = t.name.substr(0, t.name.size() - std::string(".weight").size());
        if (t.init != Init::Linear || quant::recipe_keeps_bf16(module)) {
            out.push_back(std::move(t));
            continue;
        }
        const auto layout = quant::quant_layout(f, module, t.shape[0], t.shape[1]);
        uint64_t group = 0;
        for (const auto& q : layout) group += q.bytes;
        for (size_t i = 0; i < layout.size(); ++i) {
            PlannedTensor p = t;
            p.name = layout[i].name;
            p.shape = layout[i].shape;
            p.dtype = layout[i].dtype;
            p.bytes = layout[i].bytes;
            p.quant_part = int(i);
            p.module = module;
            p.weight_shape = t.shape;
            p.group_bytes = i == 0 ? group : 0;
            out.push_back(std::move(p));
        }
    }
    return out;
}

// One shard of the plan: every tensor's header entry, then the tensors drawn and written in
// parallel. Every tensor draws from its own seed (name_seed), so the bytes do not depend on the
// thread count. A quantized module's parts are written by the unit that drew its part 0.
frost_status write_shard(const std::string& path, const std::vector<const PlannedTensor*>& ts, uint64_t seed,
                         float embed_std, quant::WriteFormat qf, const DecisiveRouter& dr, bool header_only,
                         util::Progress* bar) {
    ShardJob job;
    for (const auto* t : ts) job.entries.push_back({t->name, t->dtype, t->shape, t->begin, t->bytes});
    job.units = ts.size();
    job.threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    job.holes = header_only;
    job.fill = [&](size_t i, const ShardPut& put) {
        const PlannedTensor& t = *ts[i];
        if (t.quant_part > 0) return;  // written with its module's part 0
        if (t.quant_part == 0) {
            // The same bf16 values the unquantized synth writes, then quantized as the tool would.
            uint64_t rng = name_seed(seed, t.module + ".weight");
            const double half_width = uniform_half_width(t.init, t.fan_in, embed_std);
            std::vector<float> w(size_t(t.weight_shape[0] * t.weight_shape[1]));
            for (size_t j = 0; j < w.size(); ++j)
                w[j] = util::bf16_to_f32(util::f32_to_bf16(decisive(dr, t, j, draw(t.init, half_width, &rng))));
            const std::vector<std::string> blobs = quant::quantize_linear(qf, w.data(), t.weight_shape[0], t.weight_shape[1]);
            for (size_t j = i; j < ts.size() && ts[j]->module == t.module && ts[j]->quant_part >= 0; ++j)
                if (!put(blobs[size_t(ts[j]->quant_part)].data(), ts[j]->bytes, ts[j]->begin)) return;
            return;
        }
        uint64_t rng = name_seed(seed, t.name);
        const double half_width = uniform_half_width(t.init, t.fan_in, embed_std);
        const uint64_t total = t.bytes / sizeof(uint16_t);
        std::vector<uint16_t> chunk(size_t(std::min<uint64_t>(total, kChunkElems)));
        for (uint64_t first = 0; first < total; first += kChunkElems) {
            const size_t n = size_t(std::min<uint64_t>(total - first, kChunkElems));
            for (size_t j = 0; j < n; ++j)
                chunk[j] = util::f32_to_bf16(decisive(dr, t, first + j, draw(t.init, half_width, &rng)));
            if (!put(chunk.data(), n * sizeof(uint16_t), t.begin + first * sizeof(uint16_t))) return;
        }
    };
    return write_shard_file(path, job, bar);
}

// Finds the ids of <|endoftext|> and <|im_end|> and the largest id in a tokenizer.json.
frost_status scan_tokenizer(const std::string& dir, int* max_id, std::vector<int32_t>* eos) {
    const std::string path = util::join_path(dir, "tokenizer.json");
    std::string text, err;
    if (!util::read_file(path, &text, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    try {
        json j = json::parse(text);
        *max_id = -1;
        for (const auto& [tok, id] : j.at("model").at("vocab").items()) *max_id = std::max(*max_id, id.get<int>());
        int32_t eot = -1, im_end = -1;
        for (const auto& a : j.value("added_tokens", json::array())) {
            int id = a.at("id").get<int>();
            *max_id = std::max(*max_id, id);
            std::string c = a.at("content").get<std::string>();
            if (c == "<|endoftext|>") eot = id;
            if (c == "<|im_end|>") im_end = id;
        }
        for (int32_t id : {im_end, eot})
            if (id >= 0) eos->push_back(id);
    } catch (const std::exception& e) {
        return fail(FROST_ERR_CORRUPT, "%s: %s", path.c_str(), e.what());
    }
    return FROST_OK;
}

json text_config(const SynthPreset& p, int vocab, const std::vector<int32_t>& eos) {
    json layer_types = json::array();
    for (int i = 0; i < p.layers; ++i) layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
    json t = {
        {"model_type", p.qwen3_next ? "qwen3_next" : p.moe_experts > 0 ? "qwen3_5_moe_text" : "qwen3_5_text"},
        {"attention_bias", false},
        {"attn_output_gate", true},
        {"dtype", "bfloat16"},
        {"eos_token_id", eos.empty() ? json(nullptr) : json(eos[0])},
        {"full_attention_interval", 4},
        {"head_dim", p.head_dim},
        {"hidden_act", "silu"},
        {"hidden_size", p.hidden},
        {"layer_types", layer_types},
        {"linear_conv_kernel_dim", kConvKernel},
        {"linear_key_head_dim", p.lin_k_dim},
        {"linear_num_key_heads", p.lin_k_heads},
        {"linear_num_value_heads", p.lin_v_heads},
        {"linear_value_head_dim", p.lin_v_dim},
        {"mamba_ssm_dtype", "float32"},
        {"max_position_embeddings", p.max_positions},
        {"mtp_num_hidden_layers", 0},
        {"num_attention_heads", p.heads},
        {"num_hidden_layers", p.layers},
        {"num_key_value_heads", p.kv_heads},
        {"rms_norm_eps", 1e-6},
        {"rope_parameters",
         {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25},
          {"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}}}},
        {"tie_word_embeddings", p.tied},
        {"vocab_size", vocab},
    };
    if (p.ffn > 0) t["intermediate_size"] = p.ffn;
    if (p.moe_experts > 0) {
        t["num_experts"] = p.moe_experts;
        t["num_experts_per_tok"] = p.moe_top_k;
        t["moe_intermediate_size"] = p.moe_ffn;
        t["shared_expert_intermediate_size"] = p.moe_shared_ffn;
        t["router_aux_loss_coef"] = 0.001;
        t["output_router_logits"] = false;
    }
    if (p.qwen3_next) {
        // Released Qwen3-Next files: legacy top-level rope fields, layer kinds from the interval.
        t.erase("rope_parameters");
        t.erase("layer_types");
        t.erase("mtp_num_hidden_layers");
        t.erase("mamba_ssm_dtype");
        t["rope_theta"] = 1e7;
        t["partial_rotary_factor"] = 0.25;
        t["norm_topk_prob"] = true;
        t["decoder_sparse_step"] = p.sparse_step;
        t["mlp_only_layers"] = json::array();
    }
    return t;
}

frost_status copy_file(const std::string& from, const std::string& to) {
    std::string data, err;
    if (!util::read_file(from, &data, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    if (frost_fault_hit(FROST_FAULT_IO) || !util::write_file(to, data, &err)) return fail(FROST_ERR_IO, "cannot write %s", to.c_str());
    return FROST_OK;
}

}  // namespace

bool find_synth_preset(const std::string& name, SynthPreset* out) {
    for (const auto& p : kPresets)
        if (p.name == name) {
            *out = p;
            return true;
        }
    return false;
}

std::vector<std::string> synth_preset_names() {
    std::vector<std::string> n;
    for (const auto& p : kPresets) n.push_back(p.name);
    return n;
}

frost_status synth_checkpoint(const SynthOptions& opt, SynthSummary* summary) {
    SynthPreset p;
    if (!find_synth_preset(opt.preset, &p)) {
        std::string names;
        for (const auto& n : synth_preset_names()) names.append(" ").append(n);
        return fail(FROST_ERR_INVALID_ARG, "unknown preset '%s' (one of:%s)", opt.preset.c_str(), names.c_str());
    }
    FROST_CHECK_ARG(!opt.out_dir.empty() && opt.vocab >= 0 && opt.shard_bytes > 0);
    if (opt.layers < 0 || opt.layers > p.layers)
        return fail(FROST_ERR_INVALID_ARG, "--layers %d is outside 1..%d (preset '%s')", opt.layers, p.layers,
                    opt.preset.c_str());
    if (opt.layers > 0) p.layers = opt.layers;
    int vocab = opt.vocab > 0 ? opt.vocab : p.vocab;
    std::vector<int32_t> eos;
    if (!opt.tokenizer_dir.empty()) {
        int max_id = -1;
        FROST_TRY(scan_tokenizer(opt.tokenizer_dir, &max_id, &eos));
        if (max_id >= vocab) {
            if (opt.vocab > 0)
                return fail(FROST_ERR_INVALID_ARG, "--vocab %d is too small for the tokenizer (largest id %d)", opt.vocab, max_id);
            vocab = (max_id + kVocabRound) / kVocabRound * kVocabRound;
        }
    } else if (vocab > kQwen35ImEnd) {
        eos = {kQwen35ImEnd, kQwen35EndOfText};
    } else if (p.qwen3_next && vocab > kQwen3NextEos) {
        eos = {kQwen3NextEos};
    } else {
        eos = {vocab - 1};  // no tokenizer: the last id stands in for end-of-text
    }

    std::string err;
    if (!util::make_dirs(opt.out_dir, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    std::vector<PlannedTensor> tensors = plan(p, vocab);
    quant::WriteFormat qf = quant::WriteFormat::Fp8Block;
    if (!opt.quant.empty()) {
        if (!quant::parse_write_format(opt.quant, &qf))
            return fail(FROST_ERR_INVALID_ARG, "unknown --quant '%s' (one of %s)", opt.quant.c_str(), quant::write_format_names());
        tensors = quantize_plan(std::move(tensors), qf);
    }
    float embed_std = float(2.0 / std::sqrt(double(p.hidden)));
    DecisiveRouter dr;
    if (opt.decisive_router) {
        if (p.moe_experts == 0)
            return fail(FROST_ERR_INVALID_ARG, "--decisive-router needs a MoE preset (preset '%s')", p.name.c_str());
        while ((1 << dr.m) < p.moe_experts) ++dr.m;
        while ((2 << dr.fine) <= p.moe_top_k) ++dr.fine;
        if (dr.m <= dr.fine || (1 << dr.fine) != p.moe_top_k)
            return fail(FROST_ERR_INVALID_ARG, "--decisive-router needs a power-of-two top-k below the expert count (preset '%s': k %d, E %d)",
                        p.name.c_str(), p.moe_top_k, p.moe_experts);
        dr.E = p.moe_experts;
        // c = 2 embed_std: the routing channels stand out of the embedding's noise. With
        // L = beta * c / rms(h) (k = 2, E = 8: scores +-4 +-2 +-0.25), the k-th and (k+1)-th
        // logits are >= 3.5 L apart and the top two 0.5 L, so the k-th - (k+1)-th probability
        // gap is >= 0.05 for L from 0.1 to 5; rms(h) grows through the layers and varies by
        // token (L measured 0.37-1.6 on the tiny presets with beta = 2), well inside that range.
        dr.c = 2.f * embed_std;
        dr.beta = 2.f;
        tag_routing(&tensors);
    }

    // Shards: tensors in order, a module's quantized parts together (part 0 carries their bytes).
    std::vector<ShardSlot> slots;
    for (const auto& t : tensors) slots.push_back({t.bytes, t.quant_part > 0 ? 0 : std::max(t.bytes, t.group_bytes)});
    uint64_t total = 0;
    const size_t shards = place_in_shards(&slots, opt.shard_bytes, &total);
    for (size_t i = 0; i < tensors.size(); ++i) {
        tensors[i].shard = slots[i].shard;
        tensors[i].begin = slots[i].begin;
    }
    util::Progress bar(std::string("synth ").append(p.name), total, opt.progress);
    json weight_map = json::object();
    for (size_t s = 0; s < shards; ++s) {
        std::vector<const PlannedTensor*> in;
        for (const auto& t : tensors)
            if (t.shard == s) {
                in.push_back(&t);
                weight_map[t.name] = shard_file_name(s, shards);
            }
        FROST_TRY(write_shard(util::join_path(opt.out_dir, shard_file_name(s, shards)), in, opt.seed, embed_std, qf, dr, opt.header_only, &bar));
    }
    bar.finish();
    auto write_json = [&](const std::string& name, const json& j) -> frost_status {
        std::string e;
        if (frost_fault_hit(FROST_FAULT_IO) || !util::write_file(util::join_path(opt.out_dir, name), j.dump(2) + "\n", &e))
            return fail(FROST_ERR_IO, "cannot write %s in %s", name.c_str(), opt.out_dir.c_str());
        return FROST_OK;
    };
    if (shards > 1) {
        // A stale single-file checkpoint would shadow nothing (the index wins) but confuses people.
        unlink(util::join_path(opt.out_dir, "model.safetensors").c_str());
        FROST_TRY(write_json("model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}));
    } else {
        unlink(util::join_path(opt.out_dir, "model.safetensors.index.json").c_str());
    }
    const bool moe = p.moe_experts > 0;
    json config = {
        {"architectures", {moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
        {"model_type", moe ? "qwen3_5_moe" : "qwen3_5"},
        {"tie_word_embeddings", p.tied},
        {"text_config", text_config(p, vocab, eos)},
        {"frost_synthetic", {{"preset", p.name}, {"seed", opt.seed}}},
    };
    if (p.qwen3_next) {  // flat: the text fields at top level (the quantization config follows)
        config = text_config(p, vocab, eos);
        config["architectures"] = {"Qwen3NextForCausalLM"};
        config["frost_synthetic"] = {{"preset", p.name}, {"seed", opt.seed}};
    } else if (vocab > kQwen35ImEnd) {
        config["image_token_id"] = 248056;
        config["video_token_id"] = 248057;
        config["vision_start_token_id"] = 248053;
        config["vision_end_token_id"] = 248054;
    }
    if (!opt.quant.empty()) {
        // Modules the tools leave in bf16: the LM head (ignored by every recipe), the vision tower
        // and the recipes' small gates (recipe_keeps_bf16).
        config["quantization_config"] = quant::quant_config_json(qf, quant::recipe_ignore_list(qf));
        config["frost_synthetic"]["quant"] = opt.quant;
    }
    if (opt.decisive_router) config["frost_synthetic"]["decisive_router"] = true;
    FROST_TRY(write_json("config.json", config));
    FROST_TRY(write_json("generation_config.json", {{"eos_token_id", eos}, {"do_sample", false}}));
    if (!opt.tokenizer_dir.empty()) {
        FROST_TRY(copy_file(util::join_path(opt.tokenizer_dir, "tokenizer.json"), util::join_path(opt.out_dir, "tokenizer.json")));
        const std::string tc = util::join_path(opt.tokenizer_dir, "tokenizer_config.json");
        if (util::file_exists(tc)) FROST_TRY(copy_file(tc, util::join_path(opt.out_dir, "tokenizer_config.json")));
    }
    if (summary) {
        summary->tensor_bytes = total;
        summary->tensors = tensors.size();
        summary->shards = shards;
        summary->vocab = vocab;
        summary->eos_ids = eos;
    }
    return FROST_OK;
}

}  // namespace frost::model
