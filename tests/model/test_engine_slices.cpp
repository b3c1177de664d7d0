// Sliced prefill (Engine::prefill_slices_begin / _run) against plain prefill: a prompt admitted a
// random number of layers at a time, with batched decode steps of other sessions between two of
// its calls, leaves every session (the admitted one and the running ones) with the tokens and
// state bytes of its solo run, on dense and MoE fixtures, greedy and seeded; random piece sizes
// cross the C_p grid. A session with a staged piece refuses other steps and snapshots; reset,
// restore and fork onto it drop the piece. No slice call recaptures a graph.
#include <gtest/gtest.h>

#include <random>

#include "model/batch_test_util.h"
#include "model/capsule.h"
#include "model/engine.h"
#include "model/engine_test_util.h"

namespace frost::model {
namespace {

using batch_test::Plan;
using batch_test::Result;
using batch_test::state_bytes;

constexpr int kMaxSeq = 256;

std::unique_ptr<Engine> make(const std::string& fixture, int sessions, int slice_rows = 128) {
    EngineOptions o;
    o.max_seq_len = kMaxSeq;
    o.prefill_chunk = 128;
    o.slice_rows = slice_rows;
    o.sessions = sessions;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(test::fixture_dir(fixture), o, &e), FROST_OK)
        << "fixture " << fixture << ": " << frost_last_error();
    return e;
}

unsigned fresh_seed() { return std::random_device{}(); }

void check_sliced_against_solo(const std::string& fixture, int S, bool sampled, unsigned seed) {
    SCOPED_TRACE(fixture + " S=" + std::to_string(S) + (sampled ? " sampled" : " greedy") + " seed=" +
                 std::to_string(seed));
    auto one = make(fixture, 1);
    auto many = make(fixture, S);
    ASSERT_TRUE(one && many);
    ASSERT_EQ(many->slice_rows(), 128);
    std::mt19937 rng(seed);
    auto plans = batch_test::random_plans(rng, S, many->config().vocab_size, sampled, true);
    for (Plan& p : plans) {  // longer prompts: several pieces, some across the 128-token C_p grid
        const size_t n = size_t(std::uniform_int_distribution<int>(40, 200)(rng));
        while (p.prompt.size() < n) p.prompt.push_back(std::uniform_int_distribution<int>(0, many->config().vocab_size - 1)(rng));
    }
    batch_test::random_pieces(rng, many->slice_rows(), &plans);
    const uint64_t captures = many->capture_count();
    std::mt19937 layers(seed + 1);
    const auto got = batch_test::batched(*many, plans, nullptr, &layers);
    EXPECT_EQ(many->capture_count(), captures) << "a sliced prefill recaptured a graph";
    for (int s = 0; s < S; ++s) {
        const Result want = batch_test::solo(*one, plans[size_t(s)]);
        EXPECT_EQ(got[size_t(s)].tokens, want.tokens) << "session " << s << " tokens differ from its solo run";
        EXPECT_TRUE(got[size_t(s)].state == want.state) << "session " << s << " state differs from its solo run";
        EXPECT_EQ(many->journal(s), one->journal(0)) << "session " << s;
    }
}

TEST(EngineSlices, AdmittedBesideBatchedDecodeMatchesSoloGreedy) {
    for (int S : {2, 4, 6}) check_sliced_against_solo("qwen35-tiny-a", S, false, fresh_seed());
}

TEST(EngineSlices, AdmittedBesideBatchedDecodeMatchesSoloSampled) {
    check_sliced_against_solo("qwen35-tiny-a", 5, true, fresh_seed());
}

TEST(EngineSlices, MoeModelMatchesSolo) {
    check_sliced_against_solo("moe-tiny-a", 4, false, fresh_seed());
}

// One layer per call: the piece's token only after num_layers calls per chunk; a piece crossing
// the C_p grid is two chunks.
TEST(EngineSlices, OneLayerPerCallTakesEveryLayerOfEveryChunk) {
    auto e = make("qwen35-tiny-a", 2);
    ASSERT_TRUE(e);
    const int L = e->config().num_layers;
    std::vector<int32_t> ids(140);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(7 * i + 3) % e->config().vocab_size;
    ASSERT_EQ(e->prefill(0, ids.data(), 100, nullptr), FROST_OK);
    ASSERT_EQ(e->prefill_slices_begin(0, ids.data() + 100, 40), FROST_OK) << frost_last_error();  // 100..128..140
    EXPECT_TRUE(e->prefill_slices_pending(0));
    int calls = 0;
    bool done = false;
    int32_t next = -1;
    while (!done) {
        ASSERT_EQ(e->prefill_slices_run(0, 1, &done, &next), FROST_OK) << frost_last_error();
        ++calls;
        ASSERT_LE(calls, 2 * L);
        if (calls == L) {
            EXPECT_EQ(e->position(0), 128) << "the first chunk ends on the C_p grid";
        }
    }
    EXPECT_EQ(calls, 2 * L);
    EXPECT_EQ(e->position(0), 140);
    EXPECT_FALSE(e->prefill_slices_pending(0));
    // The same through plain prefill on the other session.
    int32_t want = -1;
    ASSERT_EQ(e->prefill(1, ids.data(), 100, nullptr), FROST_OK);
    ASSERT_EQ(e->prefill(1, ids.data() + 100, 40, &want), FROST_OK);
    EXPECT_EQ(next, want);
    EXPECT_TRUE(state_bytes(*e, 0) == state_bytes(*e, 1));
}

TEST(EngineSlices, StagedSessionRefusesOtherStepsAndSnapshots) {
    auto e = make("qwen35-tiny-a", 3);
    ASSERT_TRUE(e);
    CapsuleManager caps(*e, "test-digest");
    const int32_t ids[70] = {};
    ASSERT_EQ(e->prefill(1, ids, 64, nullptr), FROST_OK);
    ASSERT_EQ(e->prefill_slices_begin(0, ids, 70), FROST_OK);
    bool done = false;
    int32_t next = -1;
    ASSERT_EQ(e->prefill_slices_run(0, 1, &done, &next), FROST_OK);
    ASSERT_FALSE(done);
    EXPECT_EQ(e->prefill(0, ids, 3, nullptr), FROST_ERR_STATE);
    EXPECT_EQ(e->decode(0, &next), FROST_ERR_STATE);
    EXPECT_EQ(e->feed(0, 1, &next), FROST_ERR_STATE);
    EXPECT_EQ(e->fork(0, 2), FROST_ERR_STATE);
    EXPECT_EQ(e->prefill_slices_begin(0, ids, 3), FROST_ERR_STATE);
    const int members[2] = {1, 0};
    int32_t two[2];
    EXPECT_EQ(e->decode_batch(members, 2, two), FROST_ERR_STATE);
    CapsuleId id = 0;
    EXPECT_EQ(caps.snapshot(0, CapsuleTier::Host, &id), FROST_ERR_STATE);
    EXPECT_NE(std::string(frost_last_error()).find("sliced prefill"), std::string::npos) << frost_last_error();
    // Other sessions go on meanwhile.
    EXPECT_EQ(e->decode(1, &next), FROST_OK);
    // A fork onto the staged session drops its piece: it is session 1's copy afterwards.
    ASSERT_EQ(e->fork(1, 0), FROST_OK) << frost_last_error();
    EXPECT_FALSE(e->prefill_slices_pending(0));
    EXPECT_TRUE(state_bytes(*e, 0) == state_bytes(*e, 1));
    // reset drops a staged piece too.
    ASSERT_EQ(e->prefill_slices_begin(2, ids, 10), FROST_OK);
    ASSERT_EQ(e->reset(2), FROST_OK);
    EXPECT_FALSE(e->prefill_slices_pending(2));
    EXPECT_EQ(e->prefill_slices_run(2, 1, &done, &next), FROST_ERR_STATE);
}

TEST(EngineSlices, BadPiecesAreRefusedAndChangeNothing) {
    auto e = make("qwen35-tiny-a", 1, 64);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->slice_rows(), 64);
    std::vector<int32_t> ids(65, 1);
    bool done = false;
    EXPECT_EQ(e->prefill_slices_begin(0, ids.data(), 65), FROST_ERR_INVALID_ARG);  // over slice_rows
    EXPECT_EQ(e->prefill_slices_begin(0, ids.data(), 0), FROST_ERR_INVALID_ARG);
    ids[5] = e->config().vocab_size;
    EXPECT_EQ(e->prefill_slices_begin(0, ids.data(), 10), FROST_ERR_INVALID_ARG);
    EXPECT_FALSE(e->prefill_slices_pending(0));
    EXPECT_EQ(e->prefill_slices_run(0, 1, &done, nullptr), FROST_ERR_STATE);
    ids[5] = 1;
    ASSERT_EQ(e->prefill_slices_begin(0, ids.data(), 10), FROST_OK);
    EXPECT_EQ(e->prefill_slices_run(0, 0, &done, nullptr), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(e->prefill_slices_run(0, 1, nullptr, nullptr), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(e->position(0), 0);
    // Off: an engine without slice graphs refuses.
    auto off = make("qwen35-tiny-a", 1, 0);
    ASSERT_TRUE(off);
    EXPECT_EQ(off->slice_rows(), 0);
    EXPECT_EQ(off->prefill_slices_begin(0, ids.data(), 10), FROST_ERR_UNSUPPORTED);
}

}  // namespace
}  // namespace frost::model
