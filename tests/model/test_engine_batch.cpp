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
#include "model/engine_test_util.h"

namespace frost::model {
namespace {

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

// The session's state: every state buffer's valid bytes, and the cursor without n_tokens (a
// prefill writes the chunk's count there, a batched step leaves 1; neither is state).
std::vector<uint8_t> state_bytes(const Engine& e, int s) {
    std::vector<uint8_t> out;
    for (const auto& b : e.state_buffers(s)) {
        const uint8_t* p = static_cast<const uint8_t*>(frost_buffer_ptr(b.buf));
        if (b.role == BufferRole::Cursor) {
            kernels::StepCursor c;
            std::memcpy(&c, p, sizeof c);
            c.n_tokens = 0;
            c.steps = 0;  // graph steps differ: a prefill of n tokens is fewer steps than n feeds
            const uint8_t* q = reinterpret_cast<const uint8_t*>(&c);
            out.insert(out.end(), q, q + sizeof c);
            continue;
        }
        const size_t n = b.valid_bytes(e.position(s));
        out.insert(out.end(), p, p + n);
    }
    return out;
}

struct Plan {
    std::vector<int32_t> prompt;
    int tokens = 0;  // generated tokens (the prefill's first one included)
    int join = 0;    // batched step before which the session is prefilled
    SamplingConfig sampling;
};

struct Result {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> state;
};

Result solo(Engine& e, const Plan& p) {
    Result r;
    EXPECT_EQ(e.reset(0, p.sampling), FROST_OK) << frost_last_error();
    int32_t next = -1;
    EXPECT_EQ(e.prefill(0, p.prompt.data(), p.prompt.size(), &next), FROST_OK) << frost_last_error();
    r.tokens.push_back(next);
    while (int(r.tokens.size()) < p.tokens) {
        EXPECT_EQ(e.decode(0, &next), FROST_OK) << frost_last_error();
        r.tokens.push_back(next);
    }
    r.state = state_bytes(e, 0);
    return r;
}

// Runs every plan on the batch engine: before step t the sessions joining at t are prefilled
// (their first token), then one decode_batch advances every session that has joined and still
// owes tokens. Returns per session its tokens and final state; *sizes collects the B of each step.
std::vector<Result> batched(Engine& e, const std::vector<Plan>& plans, std::vector<int>* sizes) {
    const int S = int(plans.size());
    std::vector<Result> out(static_cast<size_t>(S));
    std::vector<char> joined(static_cast<size_t>(S), 0);
    for (int t = 0;; ++t) {
        for (int s = 0; s < S; ++s) {
            if (joined[size_t(s)] || plans[size_t(s)].join != t) continue;
            EXPECT_EQ(e.reset(s, plans[size_t(s)].sampling), FROST_OK) << frost_last_error();
            int32_t next = -1;
            EXPECT_EQ(e.prefill(s, plans[size_t(s)].prompt.data(), plans[size_t(s)].prompt.size(), &next), FROST_OK)
                << frost_last_error();
            out[size_t(s)].tokens.push_back(next);
            joined[size_t(s)] = 1;
        }
        std::vector<int> members;
        for (int s = 0; s < S; ++s)
            if (joined[size_t(s)] && int(out[size_t(s)].tokens.size()) < plans[size_t(s)].tokens) members.push_back(s);
        const bool pending = std::any_of(plans.begin(), plans.end(), [&](const Plan& p) { return p.join > t; });
        if (members.empty() && !pending) break;
        if (members.empty()) continue;
        std::shuffle(members.begin(), members.end(), std::mt19937(unsigned(t)));  // row order is not session order
        std::vector<int32_t> next(members.size(), -1);
        EXPECT_EQ(e.decode_batch(members.data(), int(members.size()), next.data()), FROST_OK) << frost_last_error();
        for (size_t i = 0; i < members.size(); ++i) out[size_t(members[i])].tokens.push_back(next[i]);
        if (sizes) sizes->push_back(int(members.size()));
    }
    for (int s = 0; s < S; ++s) out[size_t(s)].state = state_bytes(e, s);
    return out;
}

std::vector<Plan> random_plans(std::mt19937& rng, int S, int vocab, bool sampled, bool staggered) {
    std::vector<Plan> plans(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) {
        Plan& p = plans[size_t(s)];
        p.prompt.resize(size_t(std::uniform_int_distribution<int>(3, 90)(rng)));
        for (auto& id : p.prompt) id = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
        p.tokens = std::uniform_int_distribution<int>(staggered ? 2 : 12, 16)(rng);
        p.join = staggered ? std::uniform_int_distribution<int>(0, 8)(rng) : 0;
        if (sampled) {
            p.sampling.temperature = 0.9f;
            p.sampling.top_k = s % 2 ? 40 : 0;
            p.sampling.top_p = s % 3 ? 0.95f : 1.0f;
            p.sampling.seed = rng();
        }
    }
    return plans;
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
