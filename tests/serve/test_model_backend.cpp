// ModelEngine (the serve layer's adapter to the real engine and capsule manager) when a capsule
// cannot be frozen for want of memory (design/reliability.md T32): prefill_snapshot finishes the
// prefill without a capsule and says why, so the request is served all the same. Checked on the
// tiny synthetic model against a plain prefill on another slot: the same next token, the same
// live state bytes, the same continuation, and nothing left allocated.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace frost::serve
