// Weight binding: fixtures bind with the expected shapes; T07 mismatches all listed in one error;
// tying decided by lm_head presence; visual skipped, mtp kept; F32 A_log accepted; Qwen3-Next
// fused projections de-interleaved, checked against an independent per-row reference.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "model/deinterleave.h"
#include "model/model_files_util.h"
#include "model/safetensors.h"
#include "model/weights.h"

using namespace frost::model;
using namespace frost::testing;

namespace {

std::string model_with(const std::string& fixture, const std::vector<RawTensor>& ts) {
    std::string dir = make_temp_dir("weights");
    copy_config(fixture_dir(fixture), dir);
    write_bytes(dir + "/model.safetensors", safetensors_bytes(ts));
    return dir;
}

RawTensor* find(std::vector<RawTensor>& ts, const std::string& name) {
    for (auto& t : ts)
        if (t.name == name) return &t;
    return nullptr;
}

// Source row of each destination row, written from the layout description in spec §3 directly
// (per destination row, not per source block as deinterleave.cpp walks it).
struct RefMap {
    std::vector<int> qkv, z, b, a;
};
RefMap reference_map(int Hk, int Hv, int dk, int dv) {
    const int r = Hv / Hk, group = 2 * dk + 2 * r * dv, Q = Hk * dk, V = Hv * dv;
    RefMap m;
    for (int i = 0; i < 2 * Q + V; ++i) {
        if (i < Q) m.qkv.push_back((i / dk) * group + i % dk);
        else if (i < 2 * Q) m.qkv.push_back(((i - Q) / dk) * group + dk + (i - Q) % dk);
        else {
            int vi = i - 2 * Q, h = vi / dv;
            m.qkv.push_back((h / r) * group + 2 * dk + (h % r) * dv + vi % dv);
        }
    }
    for (int i = 0; i < V; ++i) {
        int h = i / dv;
        m.z.push_back((h / r) * group + 2 * dk + r * dv + (h % r) * dv + i % dv);
    }
    for (int h = 0; h < Hv; ++h) {
        m.b.push_back((h / r) * 2 * r + h % r);
        m.a.push_back((h / r) * 2 * r + r + h % r);
    }
    return m;
}

void expect_rows(const void* got, const std::string& src, const std::vector<int>& map, size_t row_bytes, const char* what) {
    for (size_t i = 0; i < map.size(); ++i)
        ASSERT_EQ(std::memcmp(static_cast<const char*>(got) + i * row_bytes, src.data() + size_t(map[i]) * row_bytes, row_bytes), 0)
            << what << " row " << i;
}

}  // namespace

TEST(Weights, FixturesBindWithExpectedShapes) {
    for (const char* name : {"qwen35-tiny-a", "qwen35-tiny-a-vl"}) {
        ModelWeights w;
        ASSERT_EQ(load_weights(fixture_dir(name), &w), FROST_OK) << frost_last_error();
        EXPECT_FALSE(w.tied);
        EXPECT_EQ(w.embed_tokens.shape, (std::vector<int64_t>{2048, 128}));
        EXPECT_EQ(w.lm_head.shape, (std::vector<int64_t>{2048, 128}));
        EXPECT_NE(w.lm_head.data, w.embed_tokens.data);
        ASSERT_EQ(w.layers.size(), 4u);
        EXPECT_EQ(w.layers[0].kind, LayerKind::Linear);
        EXPECT_EQ(w.layers[0].lin.in_proj_qkv.shape, (std::vector<int64_t>{512, 128}));
        EXPECT_EQ(w.layers[0].lin.conv1d.shape, (std::vector<int64_t>{512, 1, 4}));
        EXPECT_EQ(w.layers[0].lin.A_log.shape, (std::vector<int64_t>{2}));
        EXPECT_EQ(w.layers[3].kind, LayerKind::Full);
        EXPECT_EQ(w.layers[3].full.q_proj.shape, (std::vector<int64_t>{1024, 128}));
        EXPECT_EQ(w.layers[3].full.o_proj.shape, (std::vector<int64_t>{128, 512}));
        EXPECT_TRUE(w.mtp.empty());
        EXPECT_EQ(w.total_bytes(), 3564440u - 8 - 6008) << "every LM tensor of the flat fixture is bound";
    }
}

TEST(Weights, T07EveryMismatchListedInOneError) {
    auto ts = read_tensors(fixture_dir("qwen35-tiny-a") + "/model.safetensors");
    std::vector<RawTensor> bad;
    for (auto& t : ts)
        if (t.name != "model.layers.1.linear_attn.dt_bias") bad.push_back(t);
    find(bad, "model.layers.0.mlp.up_proj.weight")->shape = {128, 384};
    find(bad, "model.layers.3.self_attn.q_norm.weight")->dtype = "F16";
    bad.push_back({"model.layers.7.mlp.extra.weight", "BF16", {2}, random_bytes(4)});
    ModelWeights w;
    ASSERT_EQ(load_weights(model_with("qwen35-tiny-a", bad), &w), FROST_ERR_INCOMPATIBLE);
    std::string e = frost_last_error();
    EXPECT_NE(e.find("4 problems"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: model.layers.1.linear_attn.dt_bias [2]"), std::string::npos) << e;
    EXPECT_NE(e.find("wrong shape: model.layers.0.mlp.up_proj.weight is [128,384], expected [384,128]"), std::string::npos) << e;
    EXPECT_NE(e.find("wrong dtype: model.layers.3.self_attn.q_norm.weight is F16, expected BF16"), std::string::npos) << e;
    EXPECT_NE(e.find("unexpected: model.layers.7.mlp.extra.weight"), std::string::npos) << e;
}

TEST(Weights, TiedWhenLmHeadAbsentMtpKeptF32ALogAccepted) {
    auto ts = read_tensors(fixture_dir("qwen35-tiny-a") + "/model.safetensors");
    std::vector<RawTensor> mod;
    for (auto& t : ts)
        if (t.name != "lm_head.weight") mod.push_back(t);
    RawTensor* alog = find(mod, "model.layers.2.linear_attn.A_log");
    alog->dtype = "F32";
    alog->data = random_bytes(8);
    mod.push_back({"mtp.fc.weight", "BF16", {128, 256}, random_bytes(128 * 256 * 2)});
    ModelWeights w;
    ASSERT_EQ(load_weights(model_with("qwen35-tiny-a", mod), &w), FROST_OK) << frost_last_error();
    EXPECT_TRUE(w.tied);
    EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);
    EXPECT_EQ(w.layers[2].lin.A_log.dtype, DType::F32);
    EXPECT_EQ(std::string(static_cast<const char*>(w.layers[2].lin.A_log.data), 8), alog->data);
    ASSERT_EQ(w.mtp.count("mtp.fc.weight"), 1u);
    EXPECT_EQ(w.mtp["mtp.fc.weight"].shape, (std::vector<int64_t>{128, 256}));
}

TEST(Weights, MoeConfigOnADenseCheckpointListsTheMissingExperts) {
    std::string dir = make_temp_dir("weights_moe");
    auto cfg = nlohmann::json::parse(read_bytes(fixture_dir("qwen35-tiny-a") + "/config.json"));
    cfg["num_experts"] = 8;
    cfg["num_experts_per_tok"] = 2;
    cfg["moe_intermediate_size"] = 64;
    cfg["shared_expert_intermediate_size"] = 96;
    write_bytes(dir + "/config.json", cfg.dump());
    write_bytes(dir + "/model.safetensors", read_bytes(fixture_dir("qwen35-tiny-a") + "/model.safetensors"));
    ModelWeights w;
    EXPECT_EQ(load_weights(dir, &w), FROST_ERR_INCOMPATIBLE);
    const std::string e = frost_last_error();
    EXPECT_NE(e.find("missing: model.layers.0.mlp.gate.weight [8,128]"), std::string::npos) << e;
    // 4 layers x (router, 3 expert groups, 4 shared tensors missing; 3 dense ones unexpected).
    EXPECT_NE(e.find("(44 problems)"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: model.layers.3.mlp.experts.{e}.down_proj.weight [128,64] for experts 0-7 (8)"),
              std::string::npos) << e;
    EXPECT_NE(e.find("unexpected: model.layers.3.mlp.down_proj.weight"), std::string::npos) << e;
}

TEST(Weights, DeinterleaveMatchesReferencePermutation) {
    std::mt19937 rng(std::random_device{}());
    for (auto [Hk, Hv, dk, dv] : {std::array<int, 4>{2, 6, 3, 2}, {1, 1, 4, 4}, {4, 8, 2, 3}}) {
        const size_t row_bytes = 5 * 2;  // H = 5 bf16
        const int Q = Hk * dk, V = Hv * dv;
        std::string qkvz = random_bytes(size_t(2 * Q + 2 * V) * row_bytes), ba = random_bytes(size_t(2 * Hv) * row_bytes);
        std::string qkv(size_t(2 * Q + V) * row_bytes, '\x7f'), z(size_t(V) * row_bytes, '\x7f');
        std::string b(size_t(Hv) * row_bytes, '\x7f'), a(size_t(Hv) * row_bytes, '\x7f');
        QkvzSplit p{Hk, Hv, dk, dv, row_bytes};
        deinterleave_qkvz(p, qkvz.data(), qkv.data(), z.data());
        deinterleave_ba(p, ba.data(), b.data(), a.data());
        RefMap m = reference_map(Hk, Hv, dk, dv);
        expect_rows(qkv.data(), qkvz, m.qkv, row_bytes, "qkv");
        expect_rows(z.data(), qkvz, m.z, row_bytes, "z");
        expect_rows(b.data(), ba, m.b, row_bytes, "b");
        expect_rows(a.data(), ba, m.a, row_bytes, "a");
    }
}

TEST(Weights, Qwen3NextDenseCheckpointDeinterleavedAtLoad) {
    const int H = 8, Hk = 2, Hv = 4, dk = 4, dv = 2, F = 16, vocab = 32, d = 8, Hq = 2, Hkv = 1;
    const int Q = Hk * dk, V = Hv * dv, C = 2 * Q + V;
    nlohmann::json cfg = {{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"}, {"hidden_size", H},
                          {"num_hidden_layers", 2}, {"vocab_size", vocab}, {"num_attention_heads", Hq},
                          {"num_key_value_heads", Hkv}, {"head_dim", d}, {"linear_num_key_heads", Hk},
                          {"linear_num_value_heads", Hv}, {"linear_key_head_dim", dk}, {"linear_value_head_dim", dv},
                          {"intermediate_size", F}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25},
                          {"full_attention_interval", 2}, {"tie_word_embeddings", true}};
    auto bf = [](std::string n, std::vector<int64_t> shape) {
        size_t numel = 1;
        for (auto s : shape) numel *= size_t(s);
        return RawTensor{std::move(n), "BF16", shape, random_bytes(numel * 2)};
    };
    std::vector<RawTensor> ts = {bf("model.embed_tokens.weight", {vocab, H}), bf("model.norm.weight", {H})};
    for (int l = 0; l < 2; ++l) {
        std::string p = "model.layers." + std::to_string(l) + ".";
        for (auto n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) ts.push_back(bf(p + n, {H}));
        ts.push_back(bf(p + "mlp.gate_proj.weight", {F, H}));
        ts.push_back(bf(p + "mlp.up_proj.weight", {F, H}));
        ts.push_back(bf(p + "mlp.down_proj.weight", {H, F}));
        if (l == 0) {
            std::string a = p + "linear_attn.";
            ts.push_back(bf(a + "in_proj_qkvz.weight", {2 * Q + 2 * V, H}));
            ts.push_back(bf(a + "in_proj_ba.weight", {2 * Hv, H}));
            ts.push_back(bf(a + "conv1d.weight", {C, 1, 4}));
            ts.push_back(bf(a + "A_log", {Hv}));
            ts.push_back(bf(a + "dt_bias", {Hv}));
            ts.push_back(bf(a + "norm.weight", {dv}));
            ts.push_back(bf(a + "out_proj.weight", {H, V}));
        } else {
            std::string a = p + "self_attn.";
            ts.push_back(bf(a + "q_proj.weight", {2 * Hq * d, H}));
            ts.push_back(bf(a + "k_proj.weight", {Hkv * d, H}));
            ts.push_back(bf(a + "v_proj.weight", {Hkv * d, H}));
            ts.push_back(bf(a + "o_proj.weight", {H, Hq * d}));
            ts.push_back(bf(a + "q_norm.weight", {d}));
            ts.push_back(bf(a + "k_norm.weight", {d}));
        }
    }
    std::string dir = make_temp_dir("weights_next");
    write_bytes(dir + "/config.json", cfg.dump());
    write_bytes(dir + "/model.safetensors", safetensors_bytes(ts));
    ModelWeights w;
    ASSERT_EQ(load_weights(dir, &w), FROST_OK) << frost_last_error();
    EXPECT_TRUE(w.tied);
    const auto& lin = w.layers[0].lin;
    EXPECT_EQ(lin.in_proj_qkv.shape, (std::vector<int64_t>{C, H}));
    EXPECT_EQ(lin.in_proj_z.shape, (std::vector<int64_t>{V, H}));
    EXPECT_EQ(lin.in_proj_b.shape, (std::vector<int64_t>{Hv, H}));
    RefMap m = reference_map(Hk, Hv, dk, dv);
    const size_t row = size_t(H) * 2;
    expect_rows(lin.in_proj_qkv.data, find(ts, "model.layers.0.linear_attn.in_proj_qkvz.weight")->data, m.qkv, row, "qkv");
    expect_rows(lin.in_proj_z.data, find(ts, "model.layers.0.linear_attn.in_proj_qkvz.weight")->data, m.z, row, "z");
    expect_rows(lin.in_proj_b.data, find(ts, "model.layers.0.linear_attn.in_proj_ba.weight")->data, m.b, row, "b");
    expect_rows(lin.in_proj_a.data, find(ts, "model.layers.0.linear_attn.in_proj_ba.weight")->data, m.a, row, "a");
}
