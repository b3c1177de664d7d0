// Batched decode (Engine::decode_batch) against solo runs: every session's tokens and final
// state bytes under batching equal those of the same session run alone on a one-session engine
// (greedy and seeded sampling, dense and MoE fixtures), with members joining after their
// prefill and leaving when done at random steps, every B from 1 to 8 (odd ones run padded);
// membership changes never recapture; a capsule taken from a session that decoded in a batch
// restores bit-exact and continues as the original did.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "model/capsule.h"
#include "model/engine.h"
#include "model/batch_test_util.h"
#include "model/engine_test_util.h"

namespace frost::model {
namespace {

using batch_test::Plan;
using batch_test::Result;
using batch_test::batched;
using batch_test::random_plans;
using batch_test::solo;
using batch_test::state_bytes;

constexpr int kMaxSeq = 256;

std::unique_ptr<Engine> make(const std::string& fixture, int sessions) {
    EngineOptions o;
    o.max_seq_len = kMaxSeq;
    o.prefill_chunk = 64;
    o.sessions = sessions;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(test::fixture_dir(fixture), o, &e), FROST_OK)
        << "fixture " << fixture << ": " << frost_last_error();
    return e;
}

void check_against_solo(const std::string& fixture, int S, bool sampled, bool staggered, unsigned seed) {
    SCOPED_TRACE(fixture + " S=" + std::to_string(S) + (sampled ? " sampled" : " greedy") +
                 (staggered ? " joins/leaves" : " all at once") + " seed=" + std::to_string(seed));
    auto one = make(fixture, 1);
    auto many = make(fixture, S);
    ASSERT_TRUE(one && many);
    std::mt19937 rng(seed);
    const auto plans = random_plans(rng, S, many->config().vocab_size, sampled, staggered);
    const uint64_t captures = many->capture_count();
    std::vector<int> sizes;
    const auto got = batched(*many, plans, &sizes);
    EXPECT_EQ(many->capture_count(), captures) << "a batched step recaptured a graph";
    for (int s = 0; s < S; ++s) {
        const Result want = solo(*one, plans[size_t(s)]);
        EXPECT_EQ(got[size_t(s)].tokens, want.tokens) << "session " << s << " tokens differ from its solo run";
        EXPECT_TRUE(got[size_t(s)].state == want.state) << "session " << s << " state differs from its solo run";
    }
    if (!staggered) {
        EXPECT_EQ(sizes.front(), S);
    }
}

unsigned fresh_seed() { return std::random_device{}(); }

TEST(EngineBatch, CapturesOneGraphPerBatchSize) {
    auto e = make("qwen35-tiny-a", 8);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->batch_sizes(), (std::vector<int>{2, 4, 8}));
    auto e3 = make("qwen35-tiny-a", 3);
    ASSERT_TRUE(e3);
    EXPECT_EQ(e3->batch_sizes(), (std::vector<int>{2, 4}));  // 3 members run padded at 4
}

TEST(EngineBatch, EveryBFrom1To8MatchesSoloGreedy) {
    for (int S = 1; S <= 8; ++S) check_against_solo("qwen35-tiny-a", S, false, false, fresh_seed());
}

TEST(EngineBatch, SeededSamplingMatchesSolo) {
    for (int S : {2, 3, 5, 8}) check_against_solo("qwen35-tiny-a", S, true, false, fresh_seed());
}

TEST(EngineBatch, MembersJoiningAndLeavingMatchSolo) {
    for (bool sampled : {false, true}) check_against_solo("qwen35-tiny-a", 7, sampled, true, fresh_seed());
}

TEST(EngineBatch, MoeModelMatchesSolo) {
    check_against_solo("moe-tiny-a", 5, false, true, fresh_seed());
    check_against_solo("moe-tiny-a", 4, true, false, fresh_seed());
}

// More members than the largest captured size: the engine runs them in groups.
TEST(EngineBatch, MoreMembersThanTheLargestSizeRunInGroups) {
    check_against_solo("qwen35-tiny-a", 11, true, false, fresh_seed());
}

TEST(EngineBatch, BadMembershipIsRefusedAndChangesNothing) {
    auto e = make("qwen35-tiny-a", 4);
    ASSERT_TRUE(e);
    const int32_t ids[3] = {5, 6, 7};
    for (int s = 0; s < 4; ++s) ASSERT_EQ(e->prefill(s, ids, 3, nullptr), FROST_OK);
    const auto before = state_bytes(*e, 0);
    int32_t next[4];
    const int dup[3] = {0, 2, 0};
    EXPECT_EQ(e->decode_batch(dup, 3, next), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("twice"), std::string::npos) << frost_last_error();
    const int out_of_range[2] = {0, 4};
    EXPECT_EQ(e->decode_batch(out_of_range, 2, next), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(e->decode_batch(dup, 0, next), FROST_ERR_INVALID_ARG);
    EXPECT_TRUE(state_bytes(*e, 0) == before);
    EXPECT_EQ(e->position(0), 3);
}

// A session decodes in a batch up to an aligned boundary, is frozen there, decodes on in the
// batch; its capsule restored into another session holds the same bytes and continues with the
// same tokens.
TEST(EngineBatch, CapsuleOfABatchedSessionRestoresBitExact) {
    auto e = make("qwen35-tiny-a", 4);
    ASSERT_TRUE(e);
    CapsuleManager caps(*e, "test-digest");
    std::mt19937 rng(fresh_seed());
    auto plans = random_plans(rng, 3, e->config().vocab_size, true, false);
    plans[0].prompt.resize(50);  // session 0 reaches position 64 after 14 batched steps
    for (int s = 0; s < 3; ++s) {
        ASSERT_EQ(e->reset(s, plans[size_t(s)].sampling), FROST_OK);
        ASSERT_EQ(e->prefill(s, plans[size_t(s)].prompt.data(), plans[size_t(s)].prompt.size(), nullptr), FROST_OK);
    }
    const int members[3] = {2, 0, 1};
    int32_t next[3];
    while (e->position(0) < 64) ASSERT_EQ(e->decode_batch(members, 3, next), FROST_OK) << frost_last_error();
    CapsuleId id = 0;
    ASSERT_EQ(caps.snapshot(0, CapsuleTier::Host, &id), FROST_OK) << frost_last_error();
    const auto frozen = state_bytes(*e, 0);
    std::vector<int32_t> after;
    for (int i = 0; i < 6; ++i) {
        ASSERT_EQ(e->decode_batch(members, 3, next), FROST_OK);
        after.push_back(next[1]);
    }
    ASSERT_EQ(caps.restore(id, 3, nullptr), FROST_OK) << frost_last_error();
    EXPECT_TRUE(state_bytes(*e, 3) == frozen) << "restored bytes differ from the frozen batched session";
    std::vector<int32_t> again;
    for (int i = 0; i < 6; ++i) {
        int32_t t = -1;
        ASSERT_EQ(e->decode(3, &t), FROST_OK);
        again.push_back(t);
    }
    EXPECT_EQ(again, after);
}

// The bytes floor of a batched step: the weights are read once, each member's state once more.
TEST(EngineBatch, BatchedStepCostReadsWeightsOnce) {
    auto e = make("qwen35-tiny-a", 8);
    ASSERT_TRUE(e);
    ops::OpCost c1, c4;
    ASSERT_EQ(e->batch_step_cost(1, 100, &c1), FROST_OK) << frost_last_error();
    ASSERT_EQ(e->batch_step_cost(4, 100, &c4), FROST_OK) << frost_last_error();
    EXPECT_LT(c4.bytes, 2.0 * c1.bytes);        // not 4x: the GEMM weights are shared
    EXPECT_GT(c4.bytes, c1.bytes);              // but every member's state is read
    EXPECT_NEAR(c4.flops / c1.flops, 4.0, 0.5);  // the work scales with the rows
}

}  // namespace
}  // namespace frost::model
