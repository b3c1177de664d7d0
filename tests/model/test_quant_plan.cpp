// Strict validation of quantized checkpoints against their quantization_config: every missing,
// mis-shaped, mis-typed or orphaned scale, and every module stored against the config, is listed
// in one error. Built from the real fp8-tiny-a fixture with tensors removed or altered.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/model_files_util.h"
#include "model/quant/quant_plan.h"
#include "model/weights.h"

namespace frost::model {
namespace {

using namespace frost::testing;

RawTensor* find(std::vector<RawTensor>& ts, const std::string& name) {
    for (auto& t : ts)
        if (t.name == name) return &t;
    return nullptr;
}

std::string fp8_model_with(const std::vector<RawTensor>& ts, const nlohmann::json& quant_patch = nullptr) {
    std::string dir = make_temp_dir("quant_plan");
    copy_config(fixture_dir("fp8-tiny-a"), dir);
    if (!quant_patch.is_null()) {
        auto cfg = nlohmann::json::parse(read_bytes(dir + "/config.json"));
        cfg["quantization_config"].merge_patch(quant_patch);
        write_bytes(dir + "/config.json", cfg.dump());
    }
    write_bytes(dir + "/model.safetensors", safetensors_bytes(ts));
    return dir;
}

TEST(QuantPlan, FixtureUnchangedLoads) {
    ModelWeights w;
    ASSERT_EQ(load_weights(fp8_model_with(read_tensors(fixture_dir("fp8-tiny-a") + "/model.safetensors")), &w),
              FROST_OK)
        << frost_last_error();
    EXPECT_EQ(w.quant->modules.size(), 31u);
}

TEST(QuantPlan, EveryFp8ProblemListedInOneError) {
    auto ts = read_tensors(fixture_dir("fp8-tiny-a") + "/model.safetensors");
    std::vector<RawTensor> bad;
    for (auto& t : ts)
        if (t.name != "model.layers.0.mlp.up_proj.weight_scale_inv") bad.push_back(t);
    find(bad, "model.layers.1.mlp.gate_proj.weight_scale_inv")->shape = {2, 3};  // 6 floats like [3, 2]
    RawTensor* s2 = find(bad, "model.layers.2.mlp.down_proj.weight_scale_inv");
    s2->dtype = "I32";
    bad.push_back({"model.layers.3.mlp.extra.weight_scale_inv", "F32", {1, 1}, random_bytes(4)});
    ModelWeights w;
    ASSERT_EQ(load_weights(fp8_model_with(bad, {{"modules_to_not_convert", {"o_proj"}}}), &w), FROST_ERR_INCOMPATIBLE);
    const std::string e = frost_last_error();
    EXPECT_NE(e.find("(5 problems)"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: model.layers.0.mlp.up_proj.weight_scale_inv [3,2]"), std::string::npos) << e;
    EXPECT_NE(e.find("wrong shape: model.layers.1.mlp.gate_proj.weight_scale_inv is [2,3], expected [3,2]"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("wrong dtype: model.layers.2.mlp.down_proj.weight_scale_inv is I32, expected F32"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("unexpected: model.layers.3.mlp.extra.weight_scale_inv has no weight"), std::string::npos) << e;
    EXPECT_NE(e.find("module model.layers.3.self_attn.o_proj is in modules_to_not_convert but stored quantized"),
              std::string::npos)
        << e;
}

// Quantization problems and the dense binder's own are one list, each reported once.
TEST(QuantPlan, QuantAndBindingProblemsInOneError) {
    auto ts = read_tensors(fixture_dir("fp8-tiny-a") + "/model.safetensors");
    std::vector<RawTensor> bad;
    for (auto& t : ts)
        if (t.name != "model.layers.0.mlp.up_proj.weight_scale_inv" && t.name != "model.layers.2.input_layernorm.weight")
            bad.push_back(t);
    ModelWeights w;
    ASSERT_EQ(load_weights(fp8_model_with(bad), &w), FROST_ERR_INCOMPATIBLE);
    const std::string e = frost_last_error();
    EXPECT_NE(e.find("(2 problems)"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: model.layers.0.mlp.up_proj.weight_scale_inv"), std::string::npos) << e;
    EXPECT_NE(e.find("missing: model.layers.2.input_layernorm.weight [256]"), std::string::npos) << e;
}

TEST(QuantPlan, ScaleWithoutFp8WeightOrWeightWithoutConfigRefused) {
    // A bf16 weight beside a scale is not what the quantizer writes.
    auto ts = read_tensors(fixture_dir("fp8-tiny-a") + "/model.safetensors");
    RawTensor* w0 = find(ts, "model.layers.0.mlp.up_proj.weight");
    w0->dtype = "BF16";
    w0->data += w0->data;
    ModelWeights w;
    ASSERT_EQ(load_weights(fp8_model_with(ts), &w), FROST_ERR_INCOMPATIBLE);
    EXPECT_NE(std::string(frost_last_error()).find("model.layers.0.mlp.up_proj.weight is BF16 but has a weight_scale_inv"),
              std::string::npos)
        << frost_last_error();

    // The same FP8 tensors without a quantization_config: the bf16 binder names each of them.
    std::string dir = make_temp_dir("quant_plan_noconfig");
    auto cfg = nlohmann::json::parse(read_bytes(fixture_dir("fp8-tiny-a") + "/config.json"));
    cfg.erase("quantization_config");
    write_bytes(dir + "/config.json", cfg.dump());
    write_bytes(dir + "/model.safetensors", read_bytes(fixture_dir("fp8-tiny-a") + "/model.safetensors"));
    ASSERT_EQ(load_weights(dir, &w), FROST_ERR_INCOMPATIBLE);
    EXPECT_NE(std::string(frost_last_error()).find("wrong dtype: model.layers.0.mlp.up_proj.weight is F8_E4M3"),
              std::string::npos)
        << frost_last_error();
}

}  // namespace
}  // namespace frost::model
