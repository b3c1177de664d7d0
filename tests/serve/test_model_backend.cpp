// ModelEngine (the serve layer's adapter to the real engine and capsule manager) when a capsule
// cannot be frozen for want of memory (design/reliability.md T32): prefill_snapshot finishes the
// prefill without a capsule and says why, so the request is served all the same. Checked on the
// tiny synthetic model against a plain prefill on another slot: the same next token, the same
// live state bytes, the same continuation, and nothing left allocated.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/capsule_test_util.h"
#include "serve/model_backend.h"

namespace frost::serve {
namespace {

using model::CapsuleManager;
using model::CapsuleManagerOptions;

TEST(ModelEngineFreeze, NoMemoryToFreezeFinishesThePrefillWithoutACapsule) {
    auto engine = test::capsule_engine(FROST_BACKEND_CPU, 2);
    ASSERT_TRUE(engine);
    CapsuleManagerOptions o;
    o.disk_dir = test::capsule_temp_dir("model-backend");
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), o, &mgr), FROST_OK) << frost_last_error();
    ModelEngine me(*engine, mgr.get());
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    const frost_ctx_stats base = test::stats_of(*engine);
    // 128: the freeze is the last step (nothing remains after the aligned boundary); 150: 22
    // tokens remain to prefill after the failed freeze.
    for (size_t n : {size_t(128), size_t(150)}) {
        for (Tier tier : {Tier::Device, Tier::Host}) {
            for (int persistent : {0, 1}) {
                SCOPED_TRACE(std::to_string(n) + " tokens, " + model::capsule_tier_name(tier) +
                             (persistent ? ", persistent" : ", once"));
                const std::vector<int32_t> ids = test::random_ids(n, seed + n);
                ASSERT_EQ(me.reset(0), FROST_OK);
                ASSERT_EQ(me.reset(1), FROST_OK);
                int32_t want = -1, got = -2;
                ASSERT_EQ(me.prefill(1, ids.data(), n, &want), FROST_OK);
                uint64_t handle = 99, bytes = 0;
                std::string refusal;
                // Prefill allocates nothing (static buffers): the first allocation is the freeze's.
                frost_fault_arm(FROST_FAULT_ALLOC, 1, persistent);
                const frost_status st = me.prefill_snapshot(0, ids.data(), n, tier, &got, &handle, &bytes, &refusal);
                frost_fault_clear();
                ASSERT_EQ(st, FROST_OK) << frost_last_error();
                EXPECT_EQ(handle, 0u);
                EXPECT_NE(refusal.find(model::capsule_tier_name(tier)), std::string::npos) << refusal;
                EXPECT_EQ(got, want);
                EXPECT_EQ(engine->position(0), int64_t(n));
                EXPECT_EQ(test::live_state(*engine, 0), test::live_state(*engine, 1));
                EXPECT_EQ(mgr->count(), 0u);
                EXPECT_TRUE(test::same_stats(test::stats_of(*engine), base));
                for (int step = 0; step < 4; ++step) {
                    ASSERT_EQ(me.decode(0, &got), FROST_OK);
                    ASSERT_EQ(me.decode(1, &want), FROST_OK);
                    EXPECT_EQ(got, want) << "step " << step;
                }
            }
        }
    }
    // With room, the same call freezes a capsule.
    const std::vector<int32_t> ids = test::random_ids(150, seed);
    ASSERT_EQ(me.reset(0), FROST_OK);
    uint64_t handle = 0, bytes = 0;
    int32_t next = -1;
    std::string refusal;
    ASSERT_EQ(me.prefill_snapshot(0, ids.data(), ids.size(), Tier::Host, &next, &handle, &bytes, &refusal), FROST_OK);
    EXPECT_NE(handle, 0u);
    EXPECT_TRUE(refusal.empty()) << refusal;
    me.drop(handle);
}

// ModelEngine::memory against the engine's own ctx on every backend here: the buffers per space
// and live graphs are the ctx's, a capsule frozen on a tier shows in that space's bytes by at
// least its size and is gone again once dropped; on CUDA the driver's used bytes cover the
// engine's device buffers, on the CPU there is no device view.
class ModelEngineMemory : public ::testing::TestWithParam<frost_backend> {};

TEST_P(ModelEngineMemory, ReportsTheCtxBuffersAndTheCapsulesInThem) {
    auto engine = test::capsule_engine(GetParam(), 2);
    ASSERT_TRUE(engine);
    CapsuleManagerOptions o;
    o.disk_dir = test::capsule_temp_dir("model-backend-memory");
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), o, &mgr), FROST_OK) << frost_last_error();
    ModelEngine me(*engine, mgr.get());
    EngineMemory m;
    ASSERT_TRUE(me.memory(&m));
    const frost_ctx_stats st = test::stats_of(*engine);
    EXPECT_EQ(m.buffer_bytes[FROST_SPACE_DEVICE], st.bytes_device);
    EXPECT_EQ(m.buffer_bytes[FROST_SPACE_HOST_PINNED], st.bytes_host_pinned);
    EXPECT_EQ(m.buffer_bytes[FROST_SPACE_HOST], st.bytes_host);
    EXPECT_EQ(m.live_buffers, st.live_buffers);
    EXPECT_EQ(m.live_graphs, st.live_graphs);
    EXPECT_GT(m.buffer_bytes[FROST_SPACE_DEVICE], 0u);  // the weights at least
    EXPECT_EQ(m.has_device, GetParam() == FROST_BACKEND_CUDA);
    if (m.has_device) {
        EXPECT_GE(m.device_used, m.buffer_bytes[FROST_SPACE_DEVICE]);
        EXPECT_GT(m.device_total, m.device_used);
    }
    EXPECT_STREQ(frost_last_error(), "");  // the cpu backend's refusal is not left behind
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    const std::vector<int32_t> ids = test::random_ids(150, seed);
    for (Tier tier : {Tier::Device, Tier::Host}) {
        SCOPED_TRACE(model::capsule_tier_name(tier));
        const frost_space space = tier == Tier::Device ? FROST_SPACE_DEVICE : FROST_SPACE_HOST_PINNED;
        EngineMemory before, held, after;
        ASSERT_TRUE(me.memory(&before));
        ASSERT_EQ(me.reset(0), FROST_OK);
        uint64_t handle = 0, bytes = 0;
        int32_t next = -1;
        std::string refusal;
        ASSERT_EQ(me.prefill_snapshot(0, ids.data(), ids.size(), tier, &next, &handle, &bytes, &refusal), FROST_OK);
        ASSERT_NE(handle, 0u) << refusal;
        ASSERT_TRUE(me.memory(&held));
        EXPECT_GE(held.buffer_bytes[space], before.buffer_bytes[space] + bytes);
        EXPECT_GT(held.live_buffers, before.live_buffers);
        me.drop(handle);
        ASSERT_TRUE(me.memory(&after));
        for (int sp = 0; sp < 3; ++sp) EXPECT_EQ(after.buffer_bytes[sp], before.buffer_bytes[sp]) << "space " << sp;
        EXPECT_EQ(after.live_buffers, before.live_buffers);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelEngineMemory, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

// ModelEngine::restore of a capsule frozen past the grid (150 ids: stored 128, remainder 22)
// stops at the grid point and says so; the scheduler's prefill of the remainder with the rest of
// the prompt then gives the next token and logits of a cold prefill of the whole prompt. Neither
// engine here promises bits per cut grid (CPU: any cut is exact; CUDA: default numerics).
class ModelEngineRestore : public ::testing::TestWithParam<frost_backend> {};

TEST_P(ModelEngineRestore, StopsAtTheGridPointAndTheRemainderIsTheCallersToPrefill) {
    auto engine = test::capsule_engine(GetParam(), 2);
    ASSERT_TRUE(engine);
    CapsuleManagerOptions o;
    o.disk_dir = test::capsule_temp_dir("model-backend-restore");
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), o, &mgr), FROST_OK) << frost_last_error();
    ModelEngine me(*engine, mgr.get());
    EXPECT_EQ(me.exact_cut_grid(), 0u);
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    const std::vector<int32_t> ids = test::random_ids(150 + 40, seed);
    ASSERT_EQ(me.reset(0), FROST_OK);
    uint64_t handle = 0, bytes = 0;
    int32_t next = -1;
    std::string refusal;
    ASSERT_EQ(me.prefill_snapshot(0, ids.data(), 150, Tier::Host, &next, &handle, &bytes, &refusal), FROST_OK);
    ASSERT_NE(handle, 0u) << refusal;
    int32_t cold_next = -1, warm_next = -2;
    ASSERT_EQ(me.reset(0), FROST_OK);
    ASSERT_EQ(me.prefill(0, ids.data(), ids.size(), &cold_next), FROST_OK);
    std::vector<float> cold, warm;
    ASSERT_EQ(engine->last_logits(0, &cold), FROST_OK);
    size_t at = 0;
    ASSERT_EQ(me.restore(handle, 1, &at), FROST_OK) << frost_last_error();
    EXPECT_EQ(at, 128u);
    EXPECT_EQ(engine->position(1), 128);
    ASSERT_EQ(me.prefill(1, ids.data() + at, ids.size() - at, &warm_next), FROST_OK);
    ASSERT_EQ(engine->last_logits(1, &warm), FROST_OK);
    EXPECT_EQ(warm_next, cold_next);
    ASSERT_EQ(warm.size(), cold.size());
    EXPECT_EQ(0, std::memcmp(warm.data(), cold.data(), sizeof(float) * cold.size()));
    me.drop(handle);
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelEngineRestore, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::serve
