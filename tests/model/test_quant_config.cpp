// quantization_config parsing: the published shapes of Qwen's fp8 config and llm-compressor's
// compressed-tensors configs are accepted and mapped to their scheme; anything Frost would run
// wrongly is refused with one error naming every offending field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/quant/quant_config.h"
#include "model/quant/quant_plan.h"

namespace frost::model::quant {
namespace {

using nlohmann::json;

frost_status parse(const json& q, QuantConfig* c) {
    return parse_quant_config(json{{"model_type", "qwen3_5_text"}, {"quantization_config", q}}.dump(), "config.json", c);
}

json ct_group(const std::string& fmt, json weights, json inputs = nullptr) {
    return {{"format", fmt}, {"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs},
            {"output_activations", nullptr}};
}

json ct(json groups, const std::string& fmt) {
    return {{"quant_method", "compressed-tensors"}, {"format", fmt}, {"config_groups", groups},
            {"ignore", {"lm_head"}}, {"quantization_status", "compressed"}, {"kv_cache_scheme", nullptr},
            {"sparsity_config", json::object()}, {"transform_config", json::object()}, {"version", "0.12.2"},
            {"global_compression_ratio", nullptr}};
}

TEST(QuantConfig, AbsentMeansNotQuantized) {
    QuantConfig c;
    ASSERT_EQ(parse_quant_config(R"({"model_type":"qwen3_5_text"})", "config.json", &c), FROST_OK);
    EXPECT_FALSE(c.quantized());
    EXPECT_EQ(c.summary(), "none");
}

TEST(QuantConfig, QwenFp8Block) {
    QuantConfig c;
    ASSERT_EQ(parse({{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                     {"weight_block_size", {128, 128}}, {"modules_to_not_convert", {"lm_head", "mlp.gate"}}},
                    &c),
              FROST_OK)
        << frost_last_error();
    EXPECT_EQ(c.method, Method::Fp8);
    EXPECT_EQ(c.fp8.scheme, Scheme::Fp8Block);
    EXPECT_EQ(c.fp8.block_rows, 128);
    EXPECT_EQ(c.modules_to_not_convert.size(), 2u);
    EXPECT_EQ(c.summary(), "fp8 (block 128x128, e4m3)");
}

TEST(QuantConfig, CompressedTensorsSchemes) {
    QuantConfig c;
    json fp8 = {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}, {"dynamic", false},
                {"group_size", nullptr}, {"observer", "minmax"}, {"observer_kwargs", json::object()}};
    json tok = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}, {"symmetric", true}};
    ASSERT_EQ(parse(ct({{"group_0", ct_group("float-quantized", fp8, tok)}}, "float-quantized"), &c), FROST_OK)
        << frost_last_error();
    EXPECT_EQ(c.groups.at(0).weights.scheme, Scheme::Fp8Channel);
    EXPECT_EQ(c.ignore, std::vector<std::string>{"lm_head"});

    json nv = {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16},
               {"symmetric", true}, {"dynamic", false}, {"scale_dtype", "torch.float8_e4m3fn"}};
    ASSERT_EQ(parse(ct({{"group_0", ct_group("nvfp4-pack-quantized", nv)}}, "nvfp4-pack-quantized"), &c), FROST_OK)
        << frost_last_error();
    EXPECT_EQ(c.groups.at(0).weights.scheme, Scheme::Nvfp4);

    json i4 = {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}, {"symmetric", false},
               {"dynamic", false}, {"actorder", "group"}};
    ASSERT_EQ(parse(ct({{"group_0", ct_group("pack-quantized", i4)}}, "pack-quantized"), &c), FROST_OK)
        << frost_last_error();
    const WeightArgs& a = c.groups.at(0).weights;
    EXPECT_EQ(a.scheme, Scheme::Int4);
    EXPECT_EQ(a.group_size, 128);
    EXPECT_FALSE(a.symmetric);
    EXPECT_TRUE(a.act_order_group);

    // mixed-precision: each group carries its own format.
    ASSERT_EQ(parse(ct({{"group_0", ct_group("nvfp4-pack-quantized", nv)}, {"group_1", ct_group("float-quantized", fp8)}},
                       "mixed-precision"),
                    &c),
              FROST_OK)
        << frost_last_error();
    EXPECT_EQ(c.groups.size(), 2u);
}

TEST(QuantConfig, EveryProblemListedInOneError) {
    QuantConfig c;
    EXPECT_EQ(parse({{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"activation_scheme", "static"},
                     {"weight_block_size", nullptr}, {"mystery", 1}},
                    &c),
              FROST_ERR_UNSUPPORTED);
    std::string e = frost_last_error();
    EXPECT_NE(e.find("4 problem(s)"), std::string::npos) << e;
    EXPECT_NE(e.find("quantization_config.fmt"), std::string::npos) << e;
    EXPECT_NE(e.find("quantization_config.activation_scheme"), std::string::npos) << e;
    EXPECT_NE(e.find("quantization_config.weight_block_size"), std::string::npos) << e;
    EXPECT_NE(e.find("quantization_config.mystery: unknown field"), std::string::npos) << e;

    json bad_nv = {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 32},
                   {"symmetric", true}, {"dynamic", false}};
    json q = ct({{"group_0", ct_group("nvfp4-pack-quantized", bad_nv)},
                 {"group_1", ct_group("marlin-24", {{"num_bits", 4}, {"type", "int"}})}},
                "mixed-precision");
    q["kv_cache_scheme"] = {{"num_bits", 8}, {"type", "float"}};
    q["quantization_status"] = "frozen";
    EXPECT_EQ(parse(q, &c), FROST_ERR_UNSUPPORTED);
    e = frost_last_error();
    EXPECT_NE(e.find("4 problem(s)"), std::string::npos) << e;
    EXPECT_NE(e.find("group_size 32 is not NVFP4"), std::string::npos) << e;
    EXPECT_NE(e.find("format \"marlin-24\" is not supported"), std::string::npos) << e;
    EXPECT_NE(e.find("kv_cache_scheme"), std::string::npos) << e;
    EXPECT_NE(e.find("quantization_status"), std::string::npos) << e;

    EXPECT_EQ(parse({{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}}, &c), FROST_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(frost_last_error()).find("\"bitsandbytes\" is not supported"), std::string::npos);
    // gptq without its group size: the one field it cannot default
    EXPECT_EQ(parse({{"quant_method", "gptq"}, {"bits", 4}}, &c), FROST_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(frost_last_error()).find(".group_size: must be"), std::string::npos);
}

// GPTQ and AWQ as AutoGPTQ / GPTQModel / AutoAWQ write them: the keys that decide how the bytes
// are read are checked (bits, group size, act-order, v1 / v2 zero points, AWQ's GEMM packing and
// zero points); the tools' informational keys pass; every refusal is listed at once.
TEST(QuantConfig, GptqAndAwq) {
    QuantConfig c;
    ASSERT_EQ(parse({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", true}, {"sym", true},
                     {"damp_percent", 0.01}, {"true_sequential", true}, {"model_name_or_path", nullptr},
                     {"quantizer", {"gptqmodel:2.2.0"}}, {"pack_dtype", "int32"}, {"meta", {{"mse", 0.0}}}},
                    &c),
              FROST_OK)
        << frost_last_error();
    EXPECT_EQ(c.method, Method::Gptq);
    EXPECT_TRUE(c.native.desc_act);
    EXPECT_TRUE(c.native.zero_plus_one);  // no checkpoint_format: the v1 layout
    EXPECT_EQ(c.native.group_size, 128);
    EXPECT_EQ(c.summary(), "gptq (int4, group 128, act-order)");
    ASSERT_EQ(parse({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}, {"checkpoint_format", "gptq_v2"}}, &c),
              FROST_OK)
        << frost_last_error();
    EXPECT_FALSE(c.native.zero_plus_one);
    EXPECT_EQ(c.native.group_size, -1);
    ASSERT_EQ(parse({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}, {"version", "GEMM"},
                     {"modules_to_not_convert", {"visual"}}},
                    &c),
              FROST_OK)
        << frost_last_error();
    EXPECT_EQ(c.method, Method::Awq);
    EXPECT_EQ(c.native.format, "awq");
    EXPECT_EQ(c.modules_to_not_convert, std::vector<std::string>{"visual"});

    EXPECT_EQ(parse({{"quant_method", "gptq"}, {"bits", 8}, {"group_size", 0}, {"format", "marlin"}, {"desc_act", "yes"},
                     {"dynamic", {{"-:.*down", json::object()}}}},
                    &c),
              FROST_ERR_UNSUPPORTED);
    std::string e = frost_last_error();
    for (const char* what : {"5 problem(s)", ".bits: only 4-bit", ".group_size: must be -1", ".format: only \"gptq\"",
                             ".desc_act: must be a boolean", ".dynamic: per-module overrides"})
        EXPECT_NE(e.find(what), std::string::npos) << what << " in " << e;
    // AutoGPTQ's checkpoint_format and GPTQModel's format must agree on the zero-point layout
    EXPECT_EQ(parse({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"checkpoint_format", "gptq_v2"},
                     {"format", "gptq"}},
                    &c),
              FROST_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(frost_last_error()).find(".format: \"gptq\" contradicts checkpoint_format \"gptq_v2\""),
              std::string::npos)
        << frost_last_error();
    EXPECT_EQ(parse({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", false}, {"version", "gemv"}},
                    &c),
              FROST_ERR_UNSUPPORTED);
    e = frost_last_error();
    EXPECT_NE(e.find(".version: only the \"gemm\" packing"), std::string::npos) << e;
    EXPECT_NE(e.find(".zero_point: only checkpoints with zero points"), std::string::npos) << e;
}

TEST(QuantConfig, TargetMatchingFollowsCompressedTensors) {
    // "re:" entries match from the start of the name (re.match), anything else matches exactly.
    EXPECT_TRUE(target_matches("re:.*mlp\\.gate$", "model.layers.3.mlp.gate"));
    EXPECT_FALSE(target_matches("re:.*mlp\\.gate$", "model.layers.3.mlp.gate_proj"));
    EXPECT_TRUE(target_matches("re:model\\.layers\\.1\\.", "model.layers.1.mlp.up_proj"));
    EXPECT_FALSE(target_matches("re:layers\\.1\\.", "model.layers.1.mlp.up_proj"));
    EXPECT_TRUE(target_matches("lm_head", "lm_head"));
    EXPECT_FALSE(target_matches("lm_head", "model.lm_head"));
}

}  // namespace
}  // namespace frost::model::quant
