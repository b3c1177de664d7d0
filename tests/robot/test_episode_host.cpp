// Episode host: capsule reset reproduces an episode byte for byte even after another episode and
// adversarial garbage overwrote every live buffer; the observation is re-bound, never restored;
// no capture after warm-up; critic, timeout and interrupt terminations. Every backend.
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "robot/episode_host.h"
#include "robot/policy_ops.h"
#include "robot_util.h"

using namespace frost::robot;
using namespace frost::robot::test;

namespace {

constexpr int32_t kMaxTicks = 6;
constexpr uint8_t kGarbage = 0xA5;

struct Episode {
    std::vector<std::vector<float>> actions;
    std::vector<TickResult> ticks;
};

class EpisodeHostTest : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override { ASSERT_EQ(frost_ctx_create(GetParam(), 0, &ctx_), FROST_OK) << frost_last_error(); }
    void TearDown() override {
        host_.reset();
        frost_ctx_destroy(ctx_);
    }
    void make_host(frost_space capsule_space = FROST_SPACE_DEVICE) {
        EpisodeHostConfig cfg;
        cfg.policy = small_policy_config();
        cfg.policy.weight_seed = fresh_seed();
        cfg.critic.hidden = 16;
        cfg.max_ticks = kMaxTicks;
        cfg.capsule_space = capsule_space;
        ASSERT_EQ(EpisodeHost::create(ctx_, cfg, &host_), FROST_OK) << frost_last_error();
        ASSERT_EQ(host_->warm_up(), FROST_OK) << frost_last_error();
    }
    // Runs from reset(seed) for at most `ticks` ticks or until the episode ends.
    Episode run(uint64_t seed, int32_t ticks = kMaxTicks) {
        Episode e;
        EXPECT_EQ(host_->reset(seed), FROST_OK) << frost_last_error();
        for (int32_t t = 0; t < ticks; ++t) {
            std::vector<float> a(host_->config().policy.chunk(), std::nanf(""));
            TickResult r;
            EXPECT_EQ(host_->tick(env_obs(seed, t, host_->config().policy.obs_dim).data(), a.data(), &r),
                      FROST_OK) << frost_last_error();
            e.actions.push_back(a);
            e.ticks.push_back(r);
            if (r.end != EpisodeEnd::running) break;
        }
        return e;
    }
    void dirty_everything() {
        frost_stream* s = host_->policy_stream();
        std::vector<frost_buffer*> all = host_->policy().state_buffers();
        for (frost_buffer* b : host_->policy().scratch_buffers()) all.push_back(b);
        all.push_back(host_->policy().obs());
        all.push_back(host_->policy().action());
        for (frost_buffer* b : all) ASSERT_EQ(frost_buffer_fill(b, 0, kGarbage, frost_buffer_bytes(b), s), FROST_OK);
        ASSERT_EQ(frost_stream_sync(s), FROST_OK);
    }
    static void expect_same_bytes(const Episode& a, const Episode& b) {
        ASSERT_EQ(a.actions.size(), b.actions.size());
        for (size_t t = 0; t < a.actions.size(); ++t)
            EXPECT_EQ(0, std::memcmp(a.actions[t].data(), b.actions[t].data(), a.actions[t].size() * 4))
                << "tick " << t;
    }
    frost_ctx* ctx_ = nullptr;
    std::unique_ptr<EpisodeHost> host_;
};

}  // namespace

TEST_P(EpisodeHostTest, ResetIsByteIdenticalAfterAnotherEpisodeAndGarbage) {
    make_host();
    const uint64_t seed_a = fresh_seed(), seed_b = seed_a + 1;
    SCOPED_TRACE(seed_a);
    const uint64_t captures = host_->capture_count();
    const Episode a1 = run(seed_a);
    ASSERT_EQ(a1.actions.size(), size_t(kMaxTicks));
    EXPECT_EQ(a1.ticks.back().end, EpisodeEnd::timeout);
    const Episode b1 = run(seed_b, 3);  // another episode moves the live state on
    dirty_everything();                 // and garbage over every live buffer, state and scratch
    const Episode a2 = run(seed_a);
    expect_same_bytes(a1, a2);
    const Episode b2 = run(seed_b, 3);
    expect_same_bytes(b1, b2);
    EXPECT_NE(a1.actions[0], b1.actions[0]);
    EXPECT_EQ(host_->capture_count(), captures);  // resets are copies, never recaptures
}

TEST_P(EpisodeHostTest, CapsuleStateIsLoadBearing) {
    make_host();
    const uint64_t seed = fresh_seed();
    const Episode ref = run(seed, 2);
    // The ablation: restoring, then spoiling one state buffer changes the very next chunk.
    for (int which = 0; which < 2; ++which) {
        ASSERT_EQ(host_->reset(seed), FROST_OK);
        frost_buffer* b = host_->policy().state_buffers()[which];
        ASSERT_EQ(frost_buffer_fill(b, 0, 0x3C, frost_buffer_bytes(b), host_->policy_stream()), FROST_OK);
        ASSERT_EQ(frost_stream_sync(host_->policy_stream()), FROST_OK);
        std::vector<float> a(host_->config().policy.chunk());
        TickResult r;
        ASSERT_EQ(host_->tick(env_obs(seed, 0, host_->config().policy.obs_dim).data(), a.data(), &r), FROST_OK);
        EXPECT_NE(0, std::memcmp(a.data(), ref.actions[0].data(), a.size() * 4))
            << frost_buffer_name(b) << " is not load-bearing";
    }
}

TEST_P(EpisodeHostTest, ObservationIsReboundNeverRestored) {
    make_host();
    const uint64_t seed = fresh_seed();
    const int32_t od = host_->config().policy.obs_dim;
    const auto x = random_floats(od, seed);
    const auto y = random_floats(od, seed + 1);
    std::vector<float> ax(host_->config().policy.chunk()), ay(ax.size()), ax2(ax.size());
    TickResult r;
    ASSERT_EQ(host_->reset(seed), FROST_OK);
    RobotCapsule* cap = host_->capsule(seed);
    ASSERT_NE(cap, nullptr);
    EXPECT_FALSE(cap->contains(host_->policy().obs()));
    for (frost_buffer* b : host_->policy().state_buffers()) EXPECT_TRUE(cap->contains(b));
    ASSERT_EQ(host_->tick(x.data(), ax.data(), &r), FROST_OK);
    ASSERT_EQ(host_->reset(seed), FROST_OK);
    // After the reset the obs port still holds the last input (x), not the snapshot-time zeros.
    std::vector<float> live(od);
    ASSERT_EQ(download(live.data(), host_->policy().obs(), 0, od * 4, host_->policy_stream()), FROST_OK);
    EXPECT_EQ(live, x);
    ASSERT_EQ(host_->tick(y.data(), ay.data(), &r), FROST_OK);
    EXPECT_NE(ax, ay);  // the current observation drives the chunk
    ASSERT_EQ(host_->reset(seed), FROST_OK);
    ASSERT_EQ(host_->tick(x.data(), ax2.data(), &r), FROST_OK);
    EXPECT_EQ(0, std::memcmp(ax.data(), ax2.data(), ax.size() * 4));
}

TEST_P(EpisodeHostTest, NoCaptureAcrossManyEpisodesWithPinnedCapsules) {
    make_host(FROST_SPACE_HOST_PINNED);
    const uint64_t captures = host_->capture_count();
    EXPECT_EQ(captures, 2u);  // policy step + critic, once each
    const uint64_t base = fresh_seed();
    std::vector<Episode> first;
    for (int e = 0; e < 12; ++e) {
        const Episode ep = run(base + e % 3, 3);
        if (e < 3) first.push_back(ep);
        else expect_same_bytes(first[e % 3], ep);
    }
    EXPECT_EQ(host_->capture_count(), captures);
    EXPECT_EQ(host_->capsule(base)->space(), FROST_SPACE_HOST_PINNED);
}

TEST_P(EpisodeHostTest, CriticTerminationTriggersAndMatchesReference) {
    make_host();
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const Episode full = run(seed);
    ASSERT_EQ(full.ticks.size(), size_t(kMaxTicks));
    // The critic value equals a float64 MLP over [action chunk, observation].
    const Critic& c = *host_->critic();
    for (size_t t = 0; t < full.ticks.size(); ++t) {
        std::vector<double> in(full.actions[t].begin(), full.actions[t].end());
        for (float o : env_obs(seed, int32_t(t), host_->config().policy.obs_dim)) in.push_back(o);
        const double ref = ref_mlp(c.mlp().shape(), c.mlp().host_weights(), in)[0];
        EXPECT_NEAR(full.ticks[t].value, ref, 1e-4 * (1.0 + std::abs(ref))) << t;
    }
    // Threshold at the largest value of the first ticks: the episode must end exactly there.
    size_t k = 0;
    for (size_t t = 1; t + 1 < full.ticks.size(); ++t)
        if (full.ticks[t].value > full.ticks[k].value) k = t;
    host_->set_critic_threshold(full.ticks[k].value);
    const Episode cut = run(seed);
    ASSERT_EQ(cut.ticks.size(), k + 1);
    EXPECT_EQ(cut.ticks.back().end, EpisodeEnd::critic);
    for (size_t t = 0; t <= k; ++t) EXPECT_EQ(cut.actions[t], full.actions[t]);
    std::vector<float> a(host_->config().policy.chunk());
    TickResult r;
    EXPECT_EQ(host_->tick(env_obs(seed, 0, host_->config().policy.obs_dim).data(), a.data(), &r),
              FROST_ERR_STATE);  // an ended episode needs a reset
}

TEST_P(EpisodeHostTest, InterruptEndsTheEpisodeAtTheNextChunkBoundary) {
    make_host();
    const uint64_t seed = fresh_seed();
    const int32_t od = host_->config().policy.obs_dim;
    std::vector<float> a(host_->config().policy.chunk());
    TickResult r;
    ASSERT_EQ(host_->reset(seed), FROST_OK);
    ASSERT_EQ(host_->tick(env_obs(seed, 0, od).data(), a.data(), &r), FROST_OK);
    EXPECT_EQ(r.end, EpisodeEnd::running);
    host_->interrupt();
    std::vector<float> before = a;
    ASSERT_EQ(host_->tick(env_obs(seed, 1, od).data(), a.data(), &r), FROST_OK);
    EXPECT_FALSE(r.acted);
    EXPECT_EQ(r.end, EpisodeEnd::interrupt);
    EXPECT_EQ(a, before);  // no chunk was produced after the interrupt
    EXPECT_EQ(host_->tick(env_obs(seed, 1, od).data(), a.data(), &r), FROST_ERR_STATE);
    ASSERT_EQ(host_->reset(seed), FROST_OK);  // reset clears the interrupt
    ASSERT_EQ(host_->tick(env_obs(seed, 0, od).data(), a.data(), &r), FROST_OK);
    EXPECT_TRUE(r.acted);
}

INSTANTIATE_TEST_SUITE_P(Backends, EpisodeHostTest, ::testing::ValuesIn(available_backends()), backend_name);
