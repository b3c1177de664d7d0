// Config parsing: both fixture layouts, Qwen3-Next legacy rope fields and derived layer_types,
// MTP reported as unsupported, MoE layout (sparse step, mlp_only_layers), and clear errors naming
// the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/model_files_util.h"

using namespace frost::model;
using namespace frost::testing;
using nlohmann::json;

namespace {

json qwen3_next_flat() {
    // Qwen3-Next-80B-A3B style (TFNXc defaults) with legacy top-level rope fields, no layer_types.
    return {{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"}, {"hidden_size", 2048},
            {"num_hidden_layers", 48}, {"vocab_size", 151936}, {"num_attention_heads", 16},
            {"num_key_value_heads", 2}, {"head_dim", 256}, {"linear_num_key_heads", 16},
            {"linear_num_value_heads", 32}, {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128},
            {"linear_conv_kernel_dim", 4}, {"intermediate_size", 5120}, {"num_experts", 512},
            {"num_experts_per_tok", 10}, {"moe_intermediate_size", 512}, {"shared_expert_intermediate_size", 512},
            {"norm_topk_prob", true}, {"rope_theta", 10000000}, {"partial_rotary_factor", 0.25},
            {"full_attention_interval", 4}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 262144},
            {"tie_word_embeddings", false}, {"num_nextn_predict_layers", 1}, {"eos_token_id", 151645}};
}

std::string parse_err(const json& j) {
    ModelConfig c;
    frost_status s = parse_config(j.dump(), "cfg.json", &c);
    return s == FROST_OK ? "" : frost_last_error();
}

}  // namespace

TEST(Config, FixtureFlatAndWrapperAgree) {
    ModelConfig flat, vl;
    ASSERT_EQ(load_config(fixture_dir("qwen35-tiny-a"), &flat), FROST_OK) << frost_last_error();
    ASSERT_EQ(load_config(fixture_dir("qwen35-tiny-a-vl"), &vl), FROST_OK) << frost_last_error();
    EXPECT_FALSE(flat.multimodal_wrapper);
    EXPECT_TRUE(vl.multimodal_wrapper);
    EXPECT_EQ(flat.weight_prefix, "model.");
    EXPECT_EQ(vl.weight_prefix, "model.language_model.");
    EXPECT_EQ(vl.architecture, "Qwen3_5ForConditionalGeneration");
    for (const ModelConfig* c : {&flat, &vl}) {
        EXPECT_EQ(c->family, Family::Qwen35);
        EXPECT_EQ(c->hidden_size, 128);
        EXPECT_EQ(c->num_layers, 4);
        EXPECT_EQ(c->num_linear_layers(), 3);
        EXPECT_TRUE(c->is_linear(0));
        EXPECT_FALSE(c->is_linear(3));
        EXPECT_EQ(c->vocab_size, 2048);
        EXPECT_EQ(c->intermediate_size, 384);
        EXPECT_EQ(c->num_heads, 2);
        EXPECT_EQ(c->num_kv_heads, 1);
        EXPECT_EQ(c->head_dim, 256);
        EXPECT_EQ(c->rotary_dim, 64);
        EXPECT_DOUBLE_EQ(c->rope_theta, 1e7);
        EXPECT_EQ(c->lin_num_k_heads, 1);
        EXPECT_EQ(c->lin_num_v_heads, 2);
        EXPECT_EQ(c->conv_dim(), 2 * 128 + 256);
        EXPECT_EQ(c->max_position_embeddings, 32768);
        EXPECT_TRUE(c->unsupported_features().empty());
    }
}

TEST(Config, Qwen3NextLegacyRopeDerivedLayersAndMoeReported) {
    ModelConfig c;
    ASSERT_EQ(parse_config(qwen3_next_flat().dump(), "next.json", &c), FROST_OK) << frost_last_error();
    EXPECT_EQ(c.family, Family::Qwen3Next);
    EXPECT_EQ(c.weight_prefix, "model.");
    ASSERT_EQ(c.layer_types.size(), 48u);
    for (int i = 0; i < 48; ++i) EXPECT_EQ(c.is_linear(i), (i + 1) % 4 != 0) << i;
    EXPECT_EQ(c.num_full_layers(), 12);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
    EXPECT_EQ(c.rotary_dim, 64);
    EXPECT_EQ(c.num_experts, 512);
    EXPECT_EQ(c.mtp_num_layers, 1);
    EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
    EXPECT_EQ(c.num_experts_per_tok, 10);
    EXPECT_EQ(c.num_moe_layers(), 48);
    auto f = c.unsupported_features();
    ASSERT_EQ(f.size(), 1u) << "MoE is executed, so only the MTP head is reported";
    EXPECT_EQ(f[0], "MTP head (1 layer)");
}

TEST(Config, Qwen3NextSparseStepMlpOnlyLayersAndNormTopk) {
    json j = qwen3_next_flat();
    j["decoder_sparse_step"] = 2;
    j["mlp_only_layers"] = {1, 8};
    j["norm_topk_prob"] = false;
    ModelConfig c;
    ASSERT_EQ(parse_config(j.dump(), "next.json", &c), FROST_OK) << frost_last_error();
    EXPECT_FALSE(c.norm_topk_prob);
    for (int l = 0; l < 48; ++l) EXPECT_EQ(c.is_moe_layer(l), (l + 1) % 2 == 0 && l != 1) << l;
    EXPECT_EQ(c.num_moe_layers(), 23);
    // Qwen3.5-MoE renormalises always and ignores both layout fields (every layer is sparse).
    j["model_type"] = "qwen3_5_moe_text";
    ASSERT_EQ(parse_config(j.dump(), "moe.json", &c), FROST_OK) << frost_last_error();
    EXPECT_TRUE(c.norm_topk_prob);
    EXPECT_EQ(c.num_moe_layers(), 48);
}

TEST(Config, MoeErrorsNameTheField) {
    json j = qwen3_next_flat();
    j["mlp_only_layers"] = {48};
    EXPECT_NE(parse_err(j).find("'mlp_only_layers' entry 48 is not a layer index in [0, 48)"), std::string::npos)
        << parse_err(j);
    j = qwen3_next_flat();
    j["num_experts_per_tok"] = 513;
    EXPECT_NE(parse_err(j).find("'num_experts_per_tok' = 513 must be in [1, num_experts = 512]"), std::string::npos)
        << parse_err(j);
    j = qwen3_next_flat();
    j.erase("moe_intermediate_size");
    EXPECT_NE(parse_err(j).find("'moe_intermediate_size' must be > 0"), std::string::npos) << parse_err(j);
    j = qwen3_next_flat();
    j["decoder_sparse_step"] = 2;
    j.erase("intermediate_size");
    EXPECT_NE(parse_err(j).find("24 layer(s) keep a dense MLP"), std::string::npos) << parse_err(j);
}

TEST(Config, Qwen35MoeWrapperAndExtraFeatures) {
    json tc = qwen3_next_flat();
    tc["model_type"] = "qwen3_5_moe_text";
    tc.erase("rope_theta");
    tc["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}};
    tc["attention_bias"] = true;
    tc["eos_token_id"] = {248046, 248044};
    json root = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"}, {"text_config", tc}};
    ModelConfig c;
    ASSERT_EQ(parse_config(root.dump(), "moe.json", &c), FROST_OK) << frost_last_error();
    EXPECT_EQ(c.family, Family::Qwen35Moe);
    EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
    EXPECT_EQ(c.rotary_dim, 128);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{248046, 248044}));
    auto f = c.unsupported_features();
    EXPECT_NE(std::find(f.begin(), f.end(), "attention_bias (biases in attention projections)"), f.end());
}

TEST(Config, ErrorsNameTheField) {
    json j = qwen3_next_flat();
    j.erase("hidden_size");
    EXPECT_NE(parse_err(j).find("missing required field 'hidden_size'"), std::string::npos) << parse_err(j);
    j = qwen3_next_flat();
    j["head_dim"] = "256";
    EXPECT_NE(parse_err(j).find("'head_dim' must be an integer"), std::string::npos);
    j = qwen3_next_flat();
    j["linear_num_value_heads"] = 20;
    EXPECT_NE(parse_err(j).find("not a multiple of linear_num_key_heads"), std::string::npos);
    j = qwen3_next_flat();
    j["layer_types"] = {"linear_attention"};
    EXPECT_NE(parse_err(j).find("layer_types must be a list of num_hidden_layers (48)"), std::string::npos);
    j = qwen3_next_flat();
    j["model_type"] = "llama";
    EXPECT_NE(parse_err(j).find("model_type 'llama' is not supported"), std::string::npos);
    EXPECT_NE(parse_err(json::array()).find("not a JSON object"), std::string::npos);
    ModelConfig c;
    EXPECT_EQ(parse_config("{not json", "x.json", &c), FROST_ERR_CORRUPT);
    EXPECT_NE(std::string(frost_last_error()).find("x.json"), std::string::npos);
    json wrapped = {{"text_config", {{"model_type", "qwen3_5_text"}}}};
    EXPECT_NE(parse_err(wrapped).find("'text_config.hidden_size'"), std::string::npos) << parse_err(wrapped);
}

TEST(Config, EosFromGenerationConfig) {
    std::string dir = make_temp_dir("cfg_eos");
    copy_config(fixture_dir("qwen35-tiny-a"), dir);
    write_bytes(dir + "/generation_config.json", R"({"eos_token_id":[7,9]})");
    ModelConfig c;
    ASSERT_EQ(load_config(dir, &c), FROST_OK) << frost_last_error();
    EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7, 9}));
}
