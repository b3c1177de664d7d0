// Planner -> actor hand-off: one buffer bound to the planner's output port and the actor's
// subtask port (same frost_buffer, same pointer), planner at 1:4, the actor consuming exactly
// what the planner wrote, and an interrupt that overwrites it taking effect on the next tick.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "robot/handoff.h"
#include "robot/policy_ops.h"
#include "robot_util.h"

using namespace frost::robot;
using namespace frost::robot::test;

namespace {

constexpr int32_t kRate = 4;
constexpr double kTol = 1e-5;

class HandoffTest : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        ASSERT_EQ(frost_ctx_create(GetParam(), 0, &ctx_), FROST_OK) << frost_last_error();
        HandoffConfig cfg;
        cfg.planner = small_policy_config();
        cfg.planner.horizon = 1;
        cfg.planner.action_dim = 6;
        cfg.planner.weight_seed = fresh_seed();
        cfg.actor = small_policy_config();
        cfg.actor.weight_seed = cfg.planner.weight_seed + 1;
        cfg.rate = kRate;
        ASSERT_EQ(Handoff::create(ctx_, cfg, &h_), FROST_OK) << frost_last_error();
        ASSERT_EQ(h_->warm_up(), FROST_OK) << frost_last_error();
    }
    void TearDown() override {
        h_.reset();
        frost_ctx_destroy(ctx_);
    }
    std::vector<float> tick(int32_t t, bool* planned = nullptr) {
        std::vector<float> a(h_->actor().config().chunk(), std::nanf(""));
        EXPECT_EQ(h_->tick(env_obs(1, t, h_->actor().config().obs_dim).data(), a.data(), planned), FROST_OK)
            << frost_last_error();
        return a;
    }
    std::vector<float> subtask_now() {
        std::vector<float> s(h_->subtask_dim());
        EXPECT_EQ(download(s.data(), h_->subtask(), 0, s.size() * 4, h_->actor_stream()), FROST_OK);
        return s;
    }
    // The actor's chunk in float64 for a given subtask, counter and previous chunk.
    std::vector<double> actor_ref(uint64_t seed, uint64_t counter, const std::vector<double>& prev,
                                  int32_t t, const std::vector<float>& sub) {
        const Policy& a = h_->actor();
        return ref_policy_step(a.config(), a.mlp().host_weights(), seed, counter, prev,
                               env_obs(1, t, a.config().obs_dim), sub);
    }
    static void expect_close(const std::vector<float>& got, const std::vector<double>& ref) {
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < got.size(); ++i)
            EXPECT_NEAR(got[i], ref[i], kTol * (1.0 + std::abs(ref[i]))) << i;
    }
    frost_ctx* ctx_ = nullptr;
    std::unique_ptr<Handoff> h_;
};

}  // namespace

TEST_P(HandoffTest, SubtaskIsOneBufferBoundToBothGraphs) {
    frost_buffer* out = frost_graph_port(h_->planner().graph(), kPortAction);
    frost_buffer* in = frost_graph_port(h_->actor().graph(), kPortSubtask);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out, in);
    EXPECT_EQ(out, h_->subtask());
    EXPECT_EQ(frost_buffer_ptr(out), frost_buffer_ptr(in));
    EXPECT_EQ(frost_graph_port(h_->planner().graph(), kPortObs), frost_graph_port(h_->actor().graph(), kPortObs));
}

TEST_P(HandoffTest, ActorConsumesExactlyWhatThePlannerWrote) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const std::vector<double> zero(h_->actor().config().chunk(), 0.0);
    ASSERT_EQ(h_->reset(seed, seed + 1), FROST_OK);
    const auto a1 = tick(0);
    const auto s1 = subtask_now();
    // The planner's output is its own policy step (float64 reference)...
    const Policy& p = h_->planner();
    const auto pref = ref_policy_step(p.config(), p.mlp().host_weights(), seed, 0,
                                      std::vector<double>(s1.size(), 0.0),
                                      env_obs(1, 0, p.config().obs_dim), {});
    expect_close(s1, pref);
    // ...and the actor's chunk is the reference fed with that very subtask.
    expect_close(a1, actor_ref(seed + 1, 0, zero, 0, s1));
    // A different planner output (planner seed) with the same actor state changes the action.
    ASSERT_EQ(h_->reset(seed + 7, seed + 1), FROST_OK);
    const auto a2 = tick(0);
    const auto s2 = subtask_now();
    EXPECT_NE(s1, s2);
    EXPECT_NE(a1, a2);
    expect_close(a2, actor_ref(seed + 1, 0, zero, 0, s2));
}

TEST_P(HandoffTest, PlannerRunsAtOneInFourWithoutRecapture) {
    const uint64_t captures = h_->capture_count();
    EXPECT_EQ(captures, 2u);
    ASSERT_EQ(h_->reset(3, 4), FROST_OK);
    for (int32_t t = 0; t < 3 * kRate + 1; ++t) {
        bool planned = false;
        tick(t, &planned);
        EXPECT_EQ(planned, t % kRate == 0) << t;
    }
    uint64_t rng[2];
    ASSERT_EQ(download(rng, h_->planner().rng(), 0, sizeof rng, h_->actor_stream()), FROST_OK);
    EXPECT_EQ(rng[1], 4u);  // ticks 0, 4, 8, 12
    ASSERT_EQ(download(rng, h_->actor().rng(), 0, sizeof rng, h_->actor_stream()), FROST_OK);
    EXPECT_EQ(rng[1], uint64_t(3 * kRate + 1));
    EXPECT_EQ(h_->capture_count(), captures);
}

TEST_P(HandoffTest, InterruptTakesEffectOnTheNextTick) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    ASSERT_EQ(h_->reset(seed, seed + 1), FROST_OK);
    const auto a0 = tick(0);
    const auto plain = tick(1);  // tick 1 without interrupt
    ASSERT_EQ(h_->reset(seed, seed + 1), FROST_OK);
    ASSERT_EQ(tick(0), a0);
    const auto z = random_floats(h_->subtask_dim(), seed + 2);
    ASSERT_EQ(h_->interrupt(z.data()), FROST_OK);
    bool planned = true;
    const auto a1 = tick(1, &planned);
    EXPECT_FALSE(planned);
    EXPECT_NE(a1, plain);
    expect_close(a1, actor_ref(seed + 1, 1, std::vector<double>(a0.begin(), a0.end()), 1, z));
    EXPECT_EQ(subtask_now(), z);
    // An interrupt just before a planner tick owns that tick: the planner waits a period.
    tick(2);
    const auto a3 = tick(3);
    const auto z2 = random_floats(h_->subtask_dim(), seed + 3);
    ASSERT_EQ(h_->interrupt(z2.data()), FROST_OK);
    const auto a4 = tick(4, &planned);
    EXPECT_FALSE(planned);
    expect_close(a4, actor_ref(seed + 1, 4, std::vector<double>(a3.begin(), a3.end()), 4, z2));
    for (int32_t t = 5; t < 2 * kRate; ++t) tick(t);
    tick(2 * kRate, &planned);
    EXPECT_TRUE(planned);
    EXPECT_NE(subtask_now(), z2);
}

INSTANTIATE_TEST_SUITE_P(Backends, HandoffTest, ::testing::ValuesIn(available_backends()), backend_name);
