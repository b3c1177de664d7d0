// Reliability of the robot layer under injected faults: a failed allocation anywhere in the
// episode host's or the hand-off's construction leaks nothing; a failed capsule restore refuses
// to tick, and the next successful reset still reproduces the episode byte for byte.
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "robot/episode_host.h"
#include "robot/handoff.h"
#include "robot_util.h"

using namespace frost::robot;
using namespace frost::robot::test;

namespace {

constexpr uint64_t kMaxAllocs = 200;  // more than either object allocates

class RobotFaultTest : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override { ASSERT_EQ(frost_ctx_create(GetParam(), 0, &ctx_), FROST_OK) << frost_last_error(); }
    void TearDown() override {
        frost_fault_clear();
        frost_ctx_destroy(ctx_);
    }
    void expect_empty_ctx() {
        frost_ctx_stats st{};
        ASSERT_EQ(frost_ctx_get_stats(ctx_, &st), FROST_OK);
        EXPECT_EQ(st.live_buffers, 0u);
        EXPECT_EQ(st.live_graphs, 0u);
        EXPECT_EQ(st.live_streams, 0u);
        EXPECT_EQ(st.live_events, 0u);
    }
    static EpisodeHostConfig host_config() {
        EpisodeHostConfig cfg;
        cfg.policy = small_policy_config();
        cfg.critic.hidden = 8;
        cfg.max_ticks = 3;
        return cfg;
    }
    frost_ctx* ctx_ = nullptr;
};

}  // namespace

TEST_P(RobotFaultTest, FailedAllocationsLeakNothing) {
    bool built = false;
    for (uint64_t n = 1; n <= kMaxAllocs && !built; ++n) {
        frost_fault_arm(FROST_FAULT_ALLOC, n, 0);
        std::unique_ptr<EpisodeHost> host;
        const frost_status st = EpisodeHost::create(ctx_, host_config(), &host);
        frost_fault_clear();
        if (st == FROST_OK) {
            built = true;
        } else {
            EXPECT_EQ(st, FROST_ERR_OUT_OF_MEMORY) << "allocation " << n << ": " << frost_last_error();
            EXPECT_EQ(host, nullptr);
        }
        host.reset();
        expect_empty_ctx();
    }
    EXPECT_TRUE(built);
    built = false;
    HandoffConfig hc;
    hc.planner = small_policy_config();
    hc.actor = small_policy_config();
    for (uint64_t n = 1; n <= kMaxAllocs && !built; ++n) {
        frost_fault_arm(FROST_FAULT_ALLOC, n, 0);
        std::unique_ptr<Handoff> h;
        const frost_status st = Handoff::create(ctx_, hc, &h);
        frost_fault_clear();
        built = st == FROST_OK;
        if (!built) {
            EXPECT_EQ(st, FROST_ERR_OUT_OF_MEMORY) << frost_last_error();
        }
        h.reset();
        expect_empty_ctx();
    }
    EXPECT_TRUE(built);
}

TEST_P(RobotFaultTest, FailedRestoreRefusesToTickThenRecovers) {
    std::unique_ptr<EpisodeHost> host;
    ASSERT_EQ(EpisodeHost::create(ctx_, host_config(), &host), FROST_OK) << frost_last_error();
    ASSERT_EQ(host->warm_up(), FROST_OK);
    const uint64_t seed = fresh_seed();
    const int32_t od = host->config().policy.obs_dim;
    std::vector<float> a0(host->config().policy.chunk()), a1(a0.size());
    TickResult r;
    ASSERT_EQ(host->reset(seed), FROST_OK);
    ASSERT_EQ(host->tick(env_obs(seed, 0, od).data(), a0.data(), &r), FROST_OK);
    for (uint64_t n = 1; n <= 2; ++n) {  // fail the first, then the second copy of the restore
        frost_fault_arm(FROST_FAULT_COPY, n, 0);
        const frost_status st = host->reset(seed);
        frost_fault_clear();
        EXPECT_EQ(st, FROST_ERR_IO) << "copy " << n;  // the contract gates copies at enqueue
        EXPECT_EQ(host->tick(env_obs(seed, 0, od).data(), a1.data(), &r), FROST_ERR_STATE);
    }
    ASSERT_EQ(host->reset(seed), FROST_OK) << frost_last_error();
    ASSERT_EQ(host->tick(env_obs(seed, 0, od).data(), a1.data(), &r), FROST_OK);
    EXPECT_EQ(0, std::memcmp(a0.data(), a1.data(), a0.size() * 4));
    EXPECT_EQ(host->capture_count(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, RobotFaultTest, ::testing::ValuesIn(available_backends()), backend_name);
