// The flow-matching policy step, captured once and replayed: equals an independent float64
// reference (own noise, MLP, Euler loop) for one step and for the next (counter advanced,
// warm start from the previous chunk), on every available backend.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "robot/policy.h"
#include "robot/policy_ops.h"
#include "robot_util.h"

using namespace frost::robot;
using namespace frost::robot::test;

namespace {

constexpr uint8_t kNaNByte = 0xFF;  // 0xFFFFFFFF is a NaN float
constexpr double kTol = 1e-5;       // fp32 MLP + Euler steps against float64

class PolicyTest : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        ASSERT_EQ(frost_ctx_create(GetParam(), 0, &ctx_), FROST_OK) << frost_last_error();
        ASSERT_EQ(frost_stream_create(ctx_, 0, &s_), FROST_OK) << frost_last_error();
    }
    void TearDown() override {
        policy_.reset();
        frost_ctx_destroy(ctx_);
    }
    std::vector<float> run_step() {
        EXPECT_EQ(frost_buffer_fill(policy_->action(), 0, kNaNByte, frost_buffer_bytes(policy_->action()), s_), FROST_OK);
        EXPECT_EQ(policy_->step(s_), FROST_OK) << frost_last_error();
        EXPECT_EQ(frost_stream_sync(s_), FROST_OK) << frost_last_error();
        std::vector<float> a(policy_->config().chunk());
        EXPECT_EQ(download(a.data(), policy_->action(), 0, a.size() * 4, s_), FROST_OK);
        return a;
    }
    frost_ctx* ctx_ = nullptr;
    frost_stream* s_ = nullptr;
    std::unique_ptr<Policy> policy_;
};

void expect_close(const std::vector<float>& got, const std::vector<double>& ref) {
    ASSERT_EQ(got.size(), ref.size());
    double max_err = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << i;
        max_err = std::max(max_err, std::abs(double(got[i]) - ref[i]) / (1.0 + std::abs(ref[i])));
    }
    EXPECT_LT(max_err, kTol);
}

}  // namespace

TEST_P(PolicyTest, StepMatchesFloat64Reference) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    PolicyConfig cfg = small_policy_config();
    cfg.subtask_dim = 6;
    cfg.weight_seed = seed;
    ASSERT_EQ(Policy::create(ctx_, "p", cfg, PolicyExternal{}, s_, &policy_), FROST_OK) << frost_last_error();
    const auto obs = random_floats(cfg.obs_dim, seed + 1);
    const auto sub = random_floats(cfg.subtask_dim, seed + 2);
    ASSERT_EQ(upload(policy_->obs(), 0, obs.data(), obs.size() * 4, s_), FROST_OK);
    ASSERT_EQ(upload(policy_->subtask(), 0, sub.data(), sub.size() * 4, s_), FROST_OK);
    ASSERT_EQ(policy_->reset_state(seed + 3, s_), FROST_OK);
    ASSERT_EQ(policy_->capture(s_), FROST_OK) << frost_last_error();
    EXPECT_EQ(frost_graph_capture_count(policy_->graph()), 1u);

    const auto a0 = run_step();
    const std::vector<double> zero(cfg.chunk(), 0.0);
    expect_close(a0, ref_policy_step(cfg, policy_->mlp().host_weights(), seed + 3, 0, zero, obs, sub));

    // Second chunk: counter 1, warm-started from the first chunk (the state carried between chunks).
    const auto a1 = run_step();
    const std::vector<double> prev(a0.begin(), a0.end());
    expect_close(a1, ref_policy_step(cfg, policy_->mlp().host_weights(), seed + 3, 1, prev, obs, sub));
    EXPECT_NE(a0, a1);

    uint64_t rng[2] = {0, 0};
    ASSERT_EQ(download(rng, policy_->rng(), 0, sizeof rng, s_), FROST_OK);
    EXPECT_EQ(rng[0], seed + 3);
    EXPECT_EQ(rng[1], 2u);
    EXPECT_EQ(frost_graph_capture_count(policy_->graph()), 1u);  // replays never recapture
}

TEST_P(PolicyTest, SameSeedSameBitsDifferentSeedDifferentActions) {
    PolicyConfig cfg = small_policy_config();
    ASSERT_EQ(Policy::create(ctx_, "p", cfg, PolicyExternal{}, s_, &policy_), FROST_OK) << frost_last_error();
    ASSERT_EQ(policy_->capture(s_), FROST_OK) << frost_last_error();
    ASSERT_EQ(policy_->reset_state(11, s_), FROST_OK);
    const auto a = run_step();
    ASSERT_EQ(policy_->reset_state(11, s_), FROST_OK);
    const auto b = run_step();
    ASSERT_EQ(policy_->reset_state(12, s_), FROST_OK);
    const auto c = run_step();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
    EXPECT_NE(a, c);
}

TEST_P(PolicyTest, InvalidConfigIsRejectedWithTheFieldName) {
    PolicyConfig cfg = small_policy_config();
    cfg.time_dim = 7;
    EXPECT_EQ(Policy::create(ctx_, "p", cfg, PolicyExternal{}, s_, &policy_), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("time_dim"), std::string::npos);
    cfg = small_policy_config();
    cfg.horizon = 0;
    EXPECT_EQ(Policy::create(ctx_, "p", cfg, PolicyExternal{}, s_, &policy_), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("horizon"), std::string::npos);
    frost_ctx_stats st{};
    ASSERT_EQ(frost_ctx_get_stats(ctx_, &st), FROST_OK);
    EXPECT_EQ(st.live_buffers, 0u);  // nothing leaked by the refused creates
}

INSTANTIATE_TEST_SUITE_P(Backends, PolicyTest, ::testing::ValuesIn(available_backends()), backend_name);
