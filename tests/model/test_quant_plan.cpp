// Strict validation of quantized checkpoints against their quantization_config: every missing,
// mis-shaped, mis-typed or orphaned scale, and every module stored against the config, is listed
// in one error. Built from the real fp8-tiny-a fixture with tensors removed or altered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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
    EXPECT_NE(e.find("wrong dtype: model.layers.2.mlp.down_proj.weight_scale_inv is I32, expected F32 or BF16 or F16"),
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

// Qwen's FP8 releases store weight_scale_inv in f32, bf16 or f16 (Qwen3-32B-FP8 and
// Qwen3.6-35B-A3B-FP8 bf16, Qwen3-4B-Instruct-2507-FP8 f16). The fixture's scales, rounded to powers
// of two (exact in all three), stored each way: the three checkpoints load to the same weights bit
// for bit, so the scale's storage dtype is read, not assumed.
TEST(QuantPlan, Fp8ScaleInvStoredAsF32Bf16OrF16LoadsTheSameWeights) {
    const auto base = read_tensors(fixture_dir("fp8-tiny-a") + "/model.safetensors");
    auto with_scales = [&](const std::string& dtype) {
        std::vector<RawTensor> ts = base;
        int scales = 0;
        for (auto& t : ts) {
            if (t.name.size() < 17 || t.name.compare(t.name.size() - 17, 17, ".weight_scale_inv") != 0) continue;
            EXPECT_EQ(t.dtype, "F32") << t.name;
            std::string out;
            for (size_t i = 0; i + 4 <= t.data.size(); i += 4) {
                float f;
                std::memcpy(&f, t.data.data() + i, 4);
                const int e = std::clamp(int(std::lround(std::log2(std::fabs(f)))), -24, 15);  // f16's pow2 range
                const float p2 = std::ldexp(1.0f, e);
                uint32_t bits;
                std::memcpy(&bits, &p2, 4);
                uint16_t half = e >= -14 ? uint16_t((e + 15) << 10) : uint16_t(1u << (e + 24));
                if (dtype == "F32") out.append(reinterpret_cast<const char*>(&bits), 4);
                if (dtype == "BF16") {
                    const uint16_t b = uint16_t(bits >> 16);
                    out.append(reinterpret_cast<const char*>(&b), 2);
                }
                if (dtype == "F16") out.append(reinterpret_cast<const char*>(&half), 2);
            }
            t.dtype = dtype;
            t.data = out;
            ++scales;
        }
        EXPECT_EQ(scales, 31);
        return fp8_model_with(ts);
    };
    ModelWeights f32, bf16, f16;
    ASSERT_EQ(load_weights(with_scales("F32"), &f32), FROST_OK) << frost_last_error();
    ASSERT_EQ(load_weights(with_scales("BF16"), &bf16), FROST_OK) << frost_last_error();
    ASSERT_EQ(load_weights(with_scales("F16"), &f16), FROST_OK) << frost_last_error();
    ASSERT_EQ(bf16.quant->modules.size(), 31u);
    int compared = 0;
    for (size_t l = 0; l < f32.layers.size(); ++l) {
        for (auto pick : {+[](const LayerWeights& w) { return &w.mlp_up; }, +[](const LayerWeights& w) { return &w.mlp_down; }}) {
            const TensorView *a = pick(f32.layers[l]), *b = pick(bf16.layers[l]), *c = pick(f16.layers[l]);
            ASSERT_EQ(a->dtype, DType::F32);
            ASSERT_EQ(a->bytes, b->bytes);
            ASSERT_EQ(a->bytes, c->bytes);
            EXPECT_EQ(std::memcmp(a->data, b->data, a->bytes), 0) << a->name << " (bf16 scales)";
            EXPECT_EQ(std::memcmp(a->data, c->data, a->bytes), 0) << a->name << " (f16 scales)";
            ++compared;
        }
    }
    EXPECT_EQ(compared, 2 * int(f32.layers.size()));
}

}  // namespace
}  // namespace frost::model
