// MoE weight binding: both released layouts of the MoE fixtures bind (flat text and multimodal
// wrapper), per-expert and fused expert tensors give the same bytes, a broken MoE checkpoint
// lists every problem in one error, Qwen3-Next's decoder_sparse_step / mlp_only_layers decide
// which layers are sparse, and count_params matches an independent count from config.json.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "model/model_files_util.h"
#include "model/safetensors.h"
#include "model/weights.h"

using namespace frost::model;
using namespace frost::testing;
using nlohmann::json;

namespace {

constexpr int kE = 8, kI = 64, kIs = 96, kH = 128;  // moe-tiny-a{,-vl} (tests/fixtures/README.md)

RawTensor* find(std::vector<RawTensor>& ts, const std::string& name) {
    for (auto& t : ts)
        if (t.name == name) return &t;
    return nullptr;
}

std::string model_with(const std::string& fixture, const std::vector<RawTensor>& ts) {
    std::string dir = make_temp_dir("weights_moe");
    copy_config(fixture_dir(fixture), dir);
    write_bytes(dir + "/model.safetensors", safetensors_bytes(ts));
    return dir;
}

std::string bytes_of(const TensorView& v) { return std::string(static_cast<const char*>(v.data), v.bytes); }

// Parameter counts from config.json alone, written from the architecture description (spec §3)
// rather than from the binder's tensor list: per layer mixer + norms + MLP (dense or MoE).
struct Expected {
    uint64_t total = 0, active = 0;
};
Expected count_from_config(const json& root) {
    const json& t = root.contains("text_config") ? root["text_config"] : root;
    const uint64_t H = t["hidden_size"], V = t["vocab_size"], L = t["num_hidden_layers"];
    const uint64_t Hq = t["num_attention_heads"], Hkv = t["num_key_value_heads"], d = t["head_dim"];
    const uint64_t Hk = t["linear_num_key_heads"], Hv = t["linear_num_value_heads"];
    const uint64_t dk = t["linear_key_head_dim"], dv = t["linear_value_head_dim"];
    const uint64_t K = t.value("linear_conv_kernel_dim", 4);
    const uint64_t E = t.value("num_experts", 0), k = t.value("num_experts_per_tok", 0);
    const uint64_t I = t.value("moe_intermediate_size", 0), Is = t.value("shared_expert_intermediate_size", 0);
    const uint64_t conv = 2 * Hk * dk + Hv * dv;
    const uint64_t linear = H * conv + H * Hv * dv + 2 * H * Hv + conv * K + 2 * Hv + dv + Hv * dv * H;
    const uint64_t full = H * 2 * Hq * d + 2 * H * Hkv * d + Hq * d * H + 2 * d;
    const uint64_t moe_shared = E * H + 3 * H * Is + H;
    const bool tied = t.value("tie_word_embeddings", root.value("tie_word_embeddings", false));
    Expected x;
    x.total = V * H + H + (tied ? 0 : V * H);
    for (uint64_t l = 0; l < L; ++l) {
        const bool lin = t["layer_types"][l] == "linear_attention";
        x.total += 2 * H + (lin ? linear : full) + moe_shared + E * 3 * H * I;
        x.active += (E - k) * 3 * H * I;  // idle experts, subtracted below
    }
    x.active = x.total - x.active;
    return x;
}

}  // namespace

TEST(WeightsMoe, BothFixtureLayoutsBindEveryExpert) {
    for (const char* name : {"moe-tiny-a", "moe-tiny-a-vl"}) {
        SCOPED_TRACE(name);
        ModelWeights w;
        ASSERT_EQ(load_weights(fixture_dir(name), &w), FROST_OK) << frost_last_error();
        const ModelConfig& c = w.config;
        EXPECT_EQ(c.family, Family::Qwen35Moe);
        EXPECT_TRUE(c.norm_topk_prob);
        EXPECT_EQ(c.num_moe_layers(), 4);
        ASSERT_EQ(w.layers.size(), 4u);
        for (const auto& L : w.layers) {
            ASSERT_TRUE(L.is_moe);
            EXPECT_FALSE(L.mlp_gate.present());
            EXPECT_EQ(L.moe.router.shape, (std::vector<int64_t>{kE, kH}));
            ASSERT_EQ(L.moe.gate.size(), size_t(kE));
            for (int e = 0; e < kE; ++e) {
                EXPECT_EQ(L.moe.gate[e].shape, (std::vector<int64_t>{kI, kH}));
                EXPECT_EQ(L.moe.up[e].shape, (std::vector<int64_t>{kI, kH}));
                EXPECT_EQ(L.moe.down[e].shape, (std::vector<int64_t>{kH, kI}));
            }
            EXPECT_EQ(L.moe.shared_gate.shape, (std::vector<int64_t>{kIs, kH}));
            EXPECT_EQ(L.moe.shared_down.shape, (std::vector<int64_t>{kH, kIs}));
            EXPECT_EQ(L.moe.shared_expert_gate.shape, (std::vector<int64_t>{1, kH}));
        }
        // Every LM tensor of the file is bound: the sum of the header's non-visual tensors.
        uint64_t file_lm_bytes = 0;
        for (const auto& t : read_tensors(fixture_dir(name) + "/model.safetensors"))
            if (t.name.rfind("model.visual.", 0) != 0) file_lm_bytes += t.data.size();
        EXPECT_EQ(w.total_bytes(), file_lm_bytes);
    }
}

TEST(WeightsMoe, FusedExpertLayoutGivesTheSameExpertBytes) {
    auto ts = read_tensors(fixture_dir("moe-tiny-a") + "/model.safetensors");
    std::vector<RawTensor> fused;
    for (const auto& t : ts)
        if (t.name.find(".mlp.experts.") == std::string::npos) fused.push_back(t);
    for (int l = 0; l < 4; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
        RawTensor gu{p + "gate_up_proj", "BF16", {kE, 2 * kI, kH}, ""}, dn{p + "down_proj", "BF16", {kE, kH, kI}, ""};
        for (int e = 0; e < kE; ++e) {
            const std::string ep = p + std::to_string(e) + ".";
            gu.data += find(ts, ep + "gate_proj.weight")->data + find(ts, ep + "up_proj.weight")->data;
            dn.data += find(ts, ep + "down_proj.weight")->data;
        }
        fused.push_back(gu);
        fused.push_back(dn);
    }
    ModelWeights a, b;
    ASSERT_EQ(load_weights(fixture_dir("moe-tiny-a"), &a), FROST_OK) << frost_last_error();
    ASSERT_EQ(load_weights(model_with("moe-tiny-a", fused), &b), FROST_OK) << frost_last_error();
    EXPECT_EQ(a.total_bytes(), b.total_bytes());
    for (int l = 0; l < 4; ++l)
        for (int e = 0; e < kE; ++e) {
            const MoeWeights &x = a.layers[l].moe, &y = b.layers[l].moe;
            ASSERT_EQ(y.gate[e].shape, x.gate[e].shape);
            ASSERT_EQ(y.down[e].shape, x.down[e].shape);
            EXPECT_EQ(bytes_of(y.gate[e]), bytes_of(x.gate[e])) << "layer " << l << " expert " << e;
            EXPECT_EQ(bytes_of(y.up[e]), bytes_of(x.up[e])) << "layer " << l << " expert " << e;
            EXPECT_EQ(bytes_of(y.down[e]), bytes_of(x.down[e])) << "layer " << l << " expert " << e;
        }
}

TEST(WeightsMoe, BrokenCheckpointListsEveryProblemInOneError) {
    auto ts = read_tensors(fixture_dir("moe-tiny-a-vl") + "/model.safetensors");
    const std::string P = "model.language_model.layers.";
    std::vector<RawTensor> bad;
    auto dropped = [&](const std::string& n) {
        if (n == P + "1.mlp.experts.3.up_proj.weight" || n == P + "2.mlp.shared_expert_gate.weight") return true;
        for (int e : {0, 1, 2, 3, 6})  // one layer's gate_proj of several experts: grouped into one line
            if (n == P + "2.mlp.experts." + std::to_string(e) + ".gate_proj.weight") return true;
        return false;
    };
    for (auto& t : ts)
        if (!dropped(t.name)) bad.push_back(t);
    find(bad, P + "0.mlp.gate.weight")->shape = {kE, kH / 2};
    find(bad, P + "0.mlp.gate.weight")->data = random_bytes(kE * kH / 2 * 2);
    find(bad, P + "3.mlp.experts.7.down_proj.weight")->dtype = "F16";
    bad.push_back({P + "0.mlp.gate_proj.weight", "BF16", {4, 2}, random_bytes(16)});  // a dense MLP tensor
    ModelWeights w;
    ASSERT_EQ(load_weights(model_with("moe-tiny-a-vl", bad), &w), FROST_ERR_INCOMPATIBLE) << frost_last_error();
    const std::string e = frost_last_error();
    EXPECT_NE(e.find("6 problems"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: " + P + "2.mlp.experts.{e}.gate_proj.weight [64,128] for experts 0-3,6 (5)"),
              std::string::npos) << e;
    EXPECT_NE(e.find("missing: " + P + "1.mlp.experts.3.up_proj.weight [64,128]"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: " + P + "2.mlp.shared_expert_gate.weight [1,128]"), std::string::npos) << e;
    EXPECT_NE(e.find("wrong shape: " + P + "0.mlp.gate.weight is [8,64], expected [8,128]"), std::string::npos) << e;
    EXPECT_NE(e.find("wrong dtype: " + P + "3.mlp.experts.7.down_proj.weight is F16, expected BF16"), std::string::npos) << e;
    EXPECT_NE(e.find("unexpected: " + P + "0.mlp.gate_proj.weight"), std::string::npos) << e;
}

TEST(WeightsMoe, ParamCountsMatchAnIndependentCountFromConfigJson) {
    for (const char* name : {"moe-tiny-a", "moe-tiny-a-vl"}) {
        SCOPED_TRACE(name);
        ModelWeights w;
        ASSERT_EQ(load_weights(fixture_dir(name), &w), FROST_OK) << frost_last_error();
        const Expected x = count_from_config(json::parse(read_bytes(fixture_dir(name) + "/config.json")));
        const ParamCounts pc = count_params(w);
        EXPECT_EQ(pc.total, x.total);
        EXPECT_EQ(pc.active, x.active);
        EXPECT_LT(pc.active, pc.total);
    }
    ModelWeights dense;
    ASSERT_EQ(load_weights(fixture_dir("qwen35-tiny-a"), &dense), FROST_OK) << frost_last_error();
    const ParamCounts pd = count_params(dense);
    EXPECT_EQ(pd.total, pd.active);
    EXPECT_EQ(pd.total * 2, dense.total_bytes()) << "bf16 fixture: 2 bytes per parameter";
}

// Qwen3-Next: layer l is MoE iff l is not in mlp_only_layers and (l+1) % decoder_sparse_step == 0
// (transformers Qwen3NextDecoderLayer); dense layers bind mlp.{gate,up,down}_proj of width
// intermediate_size. 4 layers, step 2, mlp_only [3]: only layer 1 is MoE.
TEST(WeightsMoe, Qwen3NextSparseStepAndMlpOnlyLayersDecideTheMlpKind) {
    const int H = 8, Hk = 1, Hv = 2, dk = 4, dv = 4, F = 16, vocab = 32, d = 8, E = 4, I = 6, Is = 5;
    const int Q = Hk * dk, V = Hv * dv, C = 2 * Q + V;
    json cfg = {{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"}, {"hidden_size", H},
                {"num_hidden_layers", 4}, {"vocab_size", vocab}, {"num_attention_heads", 2},
                {"num_key_value_heads", 1}, {"head_dim", d}, {"linear_num_key_heads", Hk},
                {"linear_num_value_heads", Hv}, {"linear_key_head_dim", dk}, {"linear_value_head_dim", dv},
                {"intermediate_size", F}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25},
                {"full_attention_interval", 4}, {"tie_word_embeddings", true}, {"num_experts", E},
                {"num_experts_per_tok", 2}, {"moe_intermediate_size", I}, {"shared_expert_intermediate_size", Is},
                {"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}, {"norm_topk_prob", false}};
    auto bf = [](std::string n, std::vector<int64_t> shape) {
        size_t numel = 1;
        for (auto s : shape) numel *= size_t(s);
        return RawTensor{std::move(n), "BF16", shape, random_bytes(numel * 2)};
    };
    std::vector<RawTensor> ts = {bf("model.embed_tokens.weight", {vocab, H}), bf("model.norm.weight", {H})};
    for (int l = 0; l < 4; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        for (auto n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) ts.push_back(bf(p + n, {H}));
        if (l == 1) {
            ts.push_back(bf(p + "mlp.gate.weight", {E, H}));
            for (int e = 0; e < E; ++e) {
                const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
                ts.push_back(bf(ep + "gate_proj.weight", {I, H}));
                ts.push_back(bf(ep + "up_proj.weight", {I, H}));
                ts.push_back(bf(ep + "down_proj.weight", {H, I}));
            }
            ts.push_back(bf(p + "mlp.shared_expert.gate_proj.weight", {Is, H}));
            ts.push_back(bf(p + "mlp.shared_expert.up_proj.weight", {Is, H}));
            ts.push_back(bf(p + "mlp.shared_expert.down_proj.weight", {H, Is}));
            ts.push_back(bf(p + "mlp.shared_expert_gate.weight", {1, H}));
        } else {
            ts.push_back(bf(p + "mlp.gate_proj.weight", {F, H}));
            ts.push_back(bf(p + "mlp.up_proj.weight", {F, H}));
            ts.push_back(bf(p + "mlp.down_proj.weight", {H, F}));
        }
        if (l < 3) {
            const std::string a = p + "linear_attn.";
            ts.push_back(bf(a + "in_proj_qkvz.weight", {2 * Q + 2 * V, H}));
            ts.push_back(bf(a + "in_proj_ba.weight", {2 * Hv, H}));
            ts.push_back(bf(a + "conv1d.weight", {C, 1, 4}));
            ts.push_back(bf(a + "A_log", {Hv}));
            ts.push_back(bf(a + "dt_bias", {Hv}));
            ts.push_back(bf(a + "norm.weight", {dv}));
            ts.push_back(bf(a + "out_proj.weight", {H, V}));
        } else {
            const std::string a = p + "self_attn.";
            ts.push_back(bf(a + "q_proj.weight", {2 * 2 * d, H}));
            ts.push_back(bf(a + "k_proj.weight", {d, H}));
            ts.push_back(bf(a + "v_proj.weight", {d, H}));
            ts.push_back(bf(a + "o_proj.weight", {H, 2 * d}));
            ts.push_back(bf(a + "q_norm.weight", {d}));
            ts.push_back(bf(a + "k_norm.weight", {d}));
        }
    }
    std::string dir = make_temp_dir("weights_next_moe");
    write_bytes(dir + "/config.json", cfg.dump());
    write_bytes(dir + "/model.safetensors", safetensors_bytes(ts));
    ModelWeights w;
    ASSERT_EQ(load_weights(dir, &w), FROST_OK) << frost_last_error();
    EXPECT_FALSE(w.config.norm_topk_prob);
    for (int l = 0; l < 4; ++l) EXPECT_EQ(w.layers[l].is_moe, l == 1) << "layer " << l;
    EXPECT_EQ(w.layers[0].mlp_gate.shape, (std::vector<int64_t>{F, H}));
    EXPECT_EQ(w.layers[1].moe.down[3].shape, (std::vector<int64_t>{H, I}));
    EXPECT_EQ(bytes_of(w.layers[1].moe.gate[2]), find(ts, "model.layers.1.mlp.experts.2.gate_proj.weight")->data);
    const ParamCounts pc = count_params(w);
    EXPECT_EQ(pc.total - pc.active, uint64_t(E - 2) * 3 * H * I) << "one MoE layer, E-k idle experts";

    // Without mlp_only_layers, layer 3 becomes MoE too and its dense tensors no longer fit.
    cfg.erase("mlp_only_layers");
    write_bytes(dir + "/config.json", cfg.dump());
    ASSERT_EQ(load_weights(dir, &w), FROST_ERR_INCOMPATIBLE);
    const std::string e = frost_last_error();
    EXPECT_NE(e.find("missing: model.layers.3.mlp.gate.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("unexpected: model.layers.3.mlp.gate_proj.weight"), std::string::npos) << e;
}
