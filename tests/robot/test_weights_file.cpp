// Policy weights from a safetensors file: a file written here (by a plain writer, not frost's)
// loads into the policy, whose step then equals the float64 reference over those numbers; a
// tensor of the wrong shape is refused with its name and nothing is leaked.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "robot/policy.h"
#include "robot/policy_ops.h"
#include "robot_util.h"

using namespace frost::robot;
using namespace frost::robot::test;

namespace {

struct Tensor {
    std::vector<int64_t> shape;
    std::vector<float> data;
};

// Minimal safetensors writer: 8-byte little-endian header length, JSON header, raw data.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& ts) {
    nlohmann::json h = nlohmann::json::object();
    size_t off = 0;
    for (const auto& [name, t] : ts) {
        const size_t bytes = t.data.size() * sizeof(float);
        h[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + bytes}}};
        off += bytes;
    }
    std::string header = h.dump();
    while (header.size() % 8 != 0) header += ' ';
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), sizeof n);  // x86: little-endian
    f.write(header.data(), std::streamsize(header.size()));
    for (const auto& [name, t] : ts)
        f.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size() * sizeof(float)));
}

std::map<std::string, Tensor> tensors_of(const std::string& prefix, const MlpShape& s, const MlpHostWeights& w) {
    const int64_t in = s.in, h = s.hidden, o = s.out;
    return {{prefix + ".w1", {{h, in}, w.w1}}, {prefix + ".b1", {{h}, w.b1}}, {prefix + ".g1", {{h}, w.g1}},
            {prefix + ".w2", {{h, h}, w.w2}},  {prefix + ".b2", {{h}, w.b2}}, {prefix + ".w3", {{o, h}, w.w3}},
            {prefix + ".b3", {{o}, w.b3}}};
}

class WeightsFileTest : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        ASSERT_EQ(frost_ctx_create(GetParam(), 0, &ctx_), FROST_OK) << frost_last_error();
        ASSERT_EQ(frost_stream_create(ctx_, 0, &s_), FROST_OK);
        path_ = std::string(FROST_BINARY_DIR) + "/robot_weights_" + std::to_string(fresh_seed()) + ".safetensors";
    }
    void TearDown() override {
        policy_.reset();
        frost_ctx_destroy(ctx_);
        std::remove(path_.c_str());
    }
    frost_ctx* ctx_ = nullptr;
    frost_stream* s_ = nullptr;
    std::unique_ptr<Policy> policy_;
    std::string path_;
};

}  // namespace

TEST_P(WeightsFileTest, LoadedWeightsDriveTheStep) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    PolicyConfig cfg = small_policy_config();
    const MlpShape shape{cfg.mlp_in(), cfg.hidden, cfg.chunk(), cfg.act};
    const MlpHostWeights w = mlp_synthetic_weights(shape, seed, 0.7f);
    write_safetensors(path_, tensors_of("arm.mlp", shape, w));
    cfg.weights_file = path_;
    cfg.weight_seed = seed + 1;  // ignored when a file is given
    ASSERT_EQ(Policy::create(ctx_, "arm", cfg, PolicyExternal{}, s_, &policy_), FROST_OK) << frost_last_error();
    EXPECT_EQ(policy_->mlp().host_weights().w1, w.w1);
    EXPECT_EQ(policy_->mlp().host_weights().b3, w.b3);
    const auto obs = random_floats(cfg.obs_dim, seed + 2);
    ASSERT_EQ(upload(policy_->obs(), 0, obs.data(), obs.size() * 4, s_), FROST_OK);
    ASSERT_EQ(policy_->reset_state(seed, s_), FROST_OK);
    ASSERT_EQ(policy_->capture(s_), FROST_OK) << frost_last_error();
    ASSERT_EQ(policy_->step(s_), FROST_OK);
    std::vector<float> a(cfg.chunk());
    ASSERT_EQ(frost_stream_sync(s_), FROST_OK);
    ASSERT_EQ(download(a.data(), policy_->action(), 0, a.size() * 4, s_), FROST_OK);
    const auto ref = ref_policy_step(cfg, w, seed, 0, std::vector<double>(a.size(), 0.0), obs, {});
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], ref[i], 1e-5 * (1.0 + std::abs(ref[i]))) << i;
}

TEST_P(WeightsFileTest, WrongShapeIsRefusedByName) {
    PolicyConfig cfg = small_policy_config();
    const MlpShape shape{cfg.mlp_in(), cfg.hidden, cfg.chunk(), cfg.act};
    auto ts = tensors_of("arm.mlp", shape, mlp_synthetic_weights(shape, 5, 1.0f));
    ts["arm.mlp.w2"].shape = {int64_t(cfg.hidden) / 2, int64_t(cfg.hidden) * 2};
    write_safetensors(path_, ts);
    cfg.weights_file = path_;
    EXPECT_EQ(Policy::create(ctx_, "arm", cfg, PolicyExternal{}, s_, &policy_), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("arm.mlp.w2"), std::string::npos) << frost_last_error();
    cfg.weights_file = path_ + ".absent";
    EXPECT_NE(Policy::create(ctx_, "arm", cfg, PolicyExternal{}, s_, &policy_), FROST_OK);
    frost_ctx_stats st{};
    ASSERT_EQ(frost_ctx_get_stats(ctx_, &st), FROST_OK);
    EXPECT_EQ(st.live_buffers, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, WeightsFileTest, ::testing::ValuesIn(available_backends()), backend_name);
