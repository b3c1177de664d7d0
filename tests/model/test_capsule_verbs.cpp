// The capsule correctness envelope (design/capsules.md): byte restore, adversarial dirty state,
// restore + decode == cold, restore + append == cold full prefill with bitwise-identical logits,
// fork into 3 sessions, rollback, the KV-only ablation (must diverge) and "no recapture".
// Parameterized over every available backend (CPU in CI).
#include <gtest/gtest.h>

#include <cstring>

#include "model/capsule_test_util.h"
#include "util/hash64.h"

namespace frost::model {
namespace {

using test::Continuation;

constexpr int kSteps = 12;  // decode steps compared after each restore

class CapsuleVerbs : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        engine = test::capsule_engine(GetParam(), 4);
        ASSERT_TRUE(engine);
        CapsuleManagerOptions o;
        o.disk_dir = test::capsule_temp_dir("verbs");
        ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), o, &mgr), FROST_OK)
            << frost_last_error();
        seed = ::testing::UnitTest::GetInstance()->random_seed();
    }
    // Prefills `ids` into session 0 from empty through prefill_and_snapshot.
    CapsuleId capture(const std::vector<int32_t>& ids, CapsuleTier tier, int32_t* next) {
        EXPECT_EQ(engine->reset(0), FROST_OK);
        CapsuleId id = 0;
        EXPECT_EQ(mgr->prefill_and_snapshot(0, ids.data(), ids.size(), tier, &id, next), FROST_OK)
            << frost_last_error();
        return id;
    }
    std::unique_ptr<Engine> engine;
    std::unique_ptr<CapsuleManager> mgr;
    uint64_t seed = 0;
};

TEST_P(CapsuleVerbs, ByteRestoreEqualsSnapshotAndChecksums) {
    const auto ids = test::random_ids(128, seed);
    int32_t next = -1;
    const CapsuleId id = capture(ids, CapsuleTier::Device, &next);
    const auto before = test::live_state(*engine, 0);
    test::poison_session(*engine, 1, 0xFF);
    int32_t restored_next = -1;
    ASSERT_EQ(mgr->restore(id, 1, &restored_next), FROST_OK) << frost_last_error();
    EXPECT_EQ(restored_next, next);
    EXPECT_EQ(engine->position(1), 128);
    EXPECT_EQ(engine->journal(1), ids);
    const auto after = test::live_state(*engine, 1);
    ASSERT_EQ(after.size(), before.size());
    CapsuleInfo info;
    ASSERT_EQ(mgr->info(id, &info), FROST_OK);
    ASSERT_EQ(info.meta.parts.size(), after.size());
    for (size_t i = 0; i < after.size(); ++i) {
        EXPECT_EQ(after[i].first, before[i].first);
        EXPECT_EQ(after[i].second, before[i].second) << "buffer " << after[i].first;
        if (info.meta.checksums_valid) {
            EXPECT_EQ(util::hash64(after[i].second.data(), after[i].second.size()), info.meta.parts[i].checksum)
                << after[i].first;
        }
    }
    // Introspection: the parts are complete and sized by the role declaration.
    const CapsuleBytes b = info.meta.bytes();
    EXPECT_EQ(b.cursor, sizeof(kernels::StepCursor));
    EXPECT_GT(b.kv, 0u);
    EXPECT_GT(b.recurrent, 0u);
    EXPECT_GT(b.conv, 0u);
    EXPECT_EQ(b.other, 0u);
    EXPECT_EQ(info.meta.stored_boundary, 128);
    EXPECT_EQ(info.meta.requested_boundary, 128);
    EXPECT_EQ(info.meta.alignment, 64);
    EXPECT_EQ(info.meta.prefix_digest, capsule_prefix_digest(ids));
}

TEST_P(CapsuleVerbs, AdversarialDirtyStateThenRestoreContinuesUnchanged) {
    const auto ids = test::random_ids(192, seed);
    int32_t next = -1;
    const CapsuleId id = capture(ids, CapsuleTier::Device, &next);
    const Continuation ref = test::continue_session(*engine, 0, next, kSteps);
    // Overwrite every state and scratch buffer, run another prompt on the same session, dirty again.
    test::poison_session(*engine, 0, 0xFF);
    const auto other = test::random_ids(150, seed + 1);
    ASSERT_EQ(engine->reset(0), FROST_OK);
    int32_t t = -1;
    ASSERT_EQ(engine->prefill(0, other.data(), other.size(), &t), FROST_OK);
    for (int i = 0; i < 5; ++i) ASSERT_EQ(engine->decode(0, &t), FROST_OK);
    test::poison_session(*engine, 0, 0x5A);
    int32_t r = -1;
    ASSERT_EQ(mgr->restore(id, 0, &r), FROST_OK) << frost_last_error();
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 0, r, kSteps, false), ref));
}

TEST_P(CapsuleVerbs, RestoreThenDecodeEqualsColdAndNeverRecaptures) {
    const auto ids = test::random_ids(256, seed);
    int32_t next = -1;
    const CapsuleId id = capture(ids, CapsuleTier::Device, &next);
    const Continuation cold = test::cold_run(*engine, 2, ids, kSteps);
    const uint64_t captures = engine->capture_count();
    int32_t r = -1;
    ASSERT_EQ(mgr->restore(id, 3, &r), FROST_OK) << frost_last_error();
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 3, r, kSteps, false), cold));
    EXPECT_EQ(engine->capture_count(), captures) << "restore must replay the captured graphs, not recapture";
}

// Restore at an aligned boundary + append(suffix) == cold prefill(prefix + suffix), bitwise in
// the logits of the last prefill row and of every decode step. Boundary 64 with C_p = 128 makes
// the capsule path's chunks (64..128) differ from the cold ones (0..128): A = 64, not C_p.
TEST_P(CapsuleVerbs, RestoreAppendEqualsColdFullPrefillBitwise) {
    for (int prefix_len : {64, 128, 192}) {
        SCOPED_TRACE("prefix " + std::to_string(prefix_len));
        const auto prefix = test::random_ids(prefix_len, seed + prefix_len);
        const auto suffix = test::random_ids(97, seed + 7 * prefix_len);
        const CapsuleId id = capture(prefix, CapsuleTier::Device, nullptr);
        std::vector<int32_t> full = prefix;
        full.insert(full.end(), suffix.begin(), suffix.end());
        const Continuation cold = test::cold_run(*engine, 1, full, kSteps);
        ASSERT_EQ(mgr->restore(id, 2, nullptr), FROST_OK) << frost_last_error();
        int32_t next = -1;
        ASSERT_EQ(engine->prefill(2, suffix.data(), suffix.size(), &next), FROST_OK);
        EXPECT_EQ(engine->journal(2), full);
        EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 2, next, kSteps), cold));
        ASSERT_EQ(mgr->release(id), FROST_OK);
    }
}

// At an unaligned requested boundary (150: stored 128 + 22 remainder ids), restore_append runs
// remainder + suffix as one prefill from 128, so the logits equal the cold prefill bitwise.
TEST_P(CapsuleVerbs, RestoreAppendAtUnalignedBoundaryEqualsColdBitwise) {
    const auto prefix = test::random_ids(150, seed);
    const auto suffix = test::random_ids(61, seed + 1);
    const CapsuleId id = capture(prefix, CapsuleTier::Device, nullptr);
    std::vector<int32_t> full = prefix;
    full.insert(full.end(), suffix.begin(), suffix.end());
    const Continuation cold = test::cold_run(*engine, 1, full, kSteps);
    test::poison_session(*engine, 2, 0xFF);
    int32_t next = -1;
    ASSERT_EQ(mgr->restore_append(id, 2, suffix.data(), suffix.size(), &next), FROST_OK) << frost_last_error();
    EXPECT_EQ(engine->journal(2), full);
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 2, next, kSteps), cold));
}

// restore_stored leaves the remainder to the caller (the server's restore): the session stands at
// the stored boundary with the stored ids, and the caller's prefill of remainder + suffix, cut
// where it likes on the grid, equals the cold prefill bitwise. Requested 150 = stored 128 + 22;
// the caller prefills the 83 ids in two pieces cut at 192, a grid point.
TEST_P(CapsuleVerbs, RestoreStoredLeavesTheRemainderAndAGridCutEqualsCold) {
    const auto prefix = test::random_ids(150, seed);
    const auto suffix = test::random_ids(61, seed + 1);
    const CapsuleId id = capture(prefix, CapsuleTier::Host, nullptr);
    std::vector<int32_t> full = prefix;
    full.insert(full.end(), suffix.begin(), suffix.end());
    const Continuation cold = test::cold_run(*engine, 1, full, kSteps);
    test::poison_session(*engine, 2, 0xFF);
    int64_t at = -1;
    ASSERT_EQ(mgr->restore_stored(id, 2, &at), FROST_OK) << frost_last_error();
    ASSERT_EQ(at, 128);
    EXPECT_EQ(engine->position(2), 128);
    EXPECT_EQ(engine->journal(2), std::vector<int32_t>(prefix.begin(), prefix.begin() + 128));
    int32_t next = -1;
    ASSERT_EQ(engine->prefill(2, full.data() + 128, 64, nullptr), FROST_OK) << frost_last_error();
    ASSERT_EQ(engine->prefill(2, full.data() + 192, full.size() - 192, &next), FROST_OK) << frost_last_error();
    EXPECT_EQ(engine->journal(2), full);
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 2, next, kSteps), cold));
    // An unknown id is refused and leaves the session as it was.
    const std::vector<int32_t> before = engine->journal(2);
    EXPECT_EQ(mgr->restore_stored(id + 1000, 2, &at), FROST_ERR_NOT_FOUND);
    EXPECT_EQ(engine->journal(2), before);
}

// Fork one capsule (stored 128, requested 150: a 22-token remainder) into 3 sessions with
// different suffixes and seeds; each equals its own cold run (prefix prefilled, seed applied at
// the branch point, suffix, sampled decode) and the branches differ from each other.
TEST_P(CapsuleVerbs, ForkIntoThreeSessionsEachEqualsItsColdRun) {
    const auto prefix = test::random_ids(150, seed);
    const CapsuleId id = capture(prefix, CapsuleTier::Host, nullptr);
    CapsuleInfo info;
    ASSERT_EQ(mgr->info(id, &info), FROST_OK);
    EXPECT_EQ(info.meta.stored_boundary, 128);
    EXPECT_EQ(info.meta.remainder.size(), 22u);
    // Reliability case T25: the branches decode on copies; the capsule itself stays byte-exact.
    std::vector<uint8_t> stored_before;
    ASSERT_EQ(mgr->read_payload(id, &stored_before), FROST_OK) << frost_last_error();
    const std::vector<int> sessions = {1, 2, 3};
    std::vector<int32_t> firsts;
    ASSERT_EQ(mgr->fork(id, sessions, &firsts), FROST_OK) << frost_last_error();
    ASSERT_EQ(firsts.size(), 3u);
    std::vector<Continuation> branches;
    for (int b = 0; b < 3; ++b) {
        SamplingConfig sc;
        sc.temperature = 0.9f;
        sc.top_k = 40;
        sc.seed = seed + 100 + b;
        const auto suffix = test::random_ids(20 + 10 * b, seed + 200 + b);
        ASSERT_EQ(engine->set_sampling(sessions[b], sc), FROST_OK);
        int32_t next = -1;
        ASSERT_EQ(engine->prefill(sessions[b], suffix.data(), suffix.size(), &next), FROST_OK);
        branches.push_back(test::continue_session(*engine, sessions[b], next, kSteps));
        // Cold: the same schedule on session 0 without any capsule.
        ASSERT_EQ(engine->reset(0), FROST_OK);
        ASSERT_EQ(engine->prefill(0, prefix.data(), prefix.size(), nullptr), FROST_OK);
        ASSERT_EQ(engine->set_sampling(0, sc), FROST_OK);
        ASSERT_EQ(engine->prefill(0, suffix.data(), suffix.size(), &next), FROST_OK);
        EXPECT_TRUE(test::same_continuation(branches.back(), test::continue_session(*engine, 0, next, kSteps)))
            << "branch " << b;
    }
    EXPECT_FALSE(test::same_continuation(branches[0], branches[1]));
    EXPECT_FALSE(test::same_continuation(branches[1], branches[2]));
    std::vector<uint8_t> stored_after;
    ASSERT_EQ(mgr->read_payload(id, &stored_after), FROST_OK) << frost_last_error();
    EXPECT_TRUE(stored_after == stored_before) << "a branch's decode wrote into the capsule it was forked from";
    std::vector<int32_t> dummy;
    EXPECT_EQ(mgr->fork(id, {1, 1}, &dummy), FROST_ERR_INVALID_ARG);
}

// Generate 100 tokens, roll back to the capsule taken at position 128 (64 prompt + 64 generated),
// regenerate: identical tokens and logits; then roll back again and append a different suffix:
// equal to a capsule-free run (prompt prefilled, the same 64 tokens decoded, then that suffix).
TEST_P(CapsuleVerbs, RollbackRegeneratesAndTakesADifferentSuffix) {
    const auto prompt = test::random_ids(64, seed);
    ASSERT_EQ(engine->reset(0), FROST_OK);
    int32_t next = -1;
    ASSERT_EQ(engine->prefill(0, prompt.data(), prompt.size(), &next), FROST_OK);
    std::vector<int32_t> gen = {next};
    CapsuleId id = 0;
    Continuation tail_ref;
    while (gen.size() < 100) {
        if (engine->position(0) == 128) {
            ASSERT_EQ(mgr->snapshot(0, CapsuleTier::Device, &id), FROST_OK) << frost_last_error();
            tail_ref = test::continue_session(*engine, 0, gen.back(), 100 - int(gen.size()) + 1);
            gen.insert(gen.end(), tail_ref.tokens.begin() + 1, tail_ref.tokens.end());
            break;
        }
        ASSERT_EQ(engine->decode(0, &next), FROST_OK);
        gen.push_back(next);
    }
    ASSERT_NE(id, 0u);
    ASSERT_EQ(gen.size(), 100u);
    int32_t r = -1;
    ASSERT_EQ(mgr->rollback(0, id, &r), FROST_OK) << frost_last_error();
    EXPECT_EQ(engine->position(0), 128);
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 0, r, int(tail_ref.tokens.size()), false), tail_ref));

    ASSERT_EQ(mgr->rollback(0, id, nullptr), FROST_OK) << frost_last_error();
    const std::vector<int32_t> history = engine->journal(0);
    const auto suffix = test::random_ids(33, seed + 5);
    ASSERT_EQ(engine->prefill(0, suffix.data(), suffix.size(), &next), FROST_OK);
    const Continuation got = test::continue_session(*engine, 0, next, kSteps);
    ASSERT_EQ(engine->reset(1), FROST_OK);
    ASSERT_EQ(engine->prefill(1, prompt.data(), prompt.size(), &next), FROST_OK);
    while (engine->position(1) < 128) ASSERT_EQ(engine->decode(1, &next), FROST_OK);
    EXPECT_EQ(engine->journal(1), history);
    ASSERT_EQ(engine->prefill(1, suffix.data(), suffix.size(), &next), FROST_OK);
    EXPECT_TRUE(test::same_continuation(got, test::continue_session(*engine, 1, next, kSteps)));

    // Rolling back a session to a capsule of another history is refused, nothing touched.
    const auto other = test::random_ids(64, seed + 9);
    ASSERT_EQ(engine->reset(2), FROST_OK);
    ASSERT_EQ(engine->prefill(2, other.data(), other.size(), nullptr), FROST_OK);
    const auto before = test::live_state(*engine, 2);
    EXPECT_EQ(mgr->rollback(2, id, nullptr), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(test::live_state(*engine, 2), before);
}

// The ablation: copying only the KV (and cursor) of a capsule, with the recurrent and conv state
// zeroed or left stale from another prompt, must diverge from the true continuation.
TEST_P(CapsuleVerbs, KvOnlyRestoreDiverges) {
    const auto ids = test::random_ids(128, seed);
    int32_t next = -1;
    const CapsuleId id = capture(ids, CapsuleTier::Host, &next);
    const Continuation ref = test::continue_session(*engine, 0, next, 4);
    std::vector<uint8_t> payload;
    ASSERT_EQ(mgr->read_payload(id, &payload), FROST_OK);
    CapsuleInfo info;
    ASSERT_EQ(mgr->info(id, &info), FROST_OK);
    auto kv_only = [&](int session) {
        frost_buffer* src = nullptr;
        ASSERT_EQ(frost_buffer_wrap(engine->ctx(), "payload", payload.data(), payload.size(), FROST_SPACE_HOST, &src),
                  FROST_OK);
        for (const auto& b : engine->state_buffers(session))
            for (const auto& p : info.meta.parts)
                if (b.name.substr(b.name.find('.') + 1) == p.name &&
                    (p.kind == CapsulePartKind::Kv || p.kind == CapsulePartKind::Cursor)) {
                    ASSERT_EQ(frost_buffer_copy(b.buf, 0, src, p.offset, p.bytes, engine->stream()), FROST_OK);
                }
        ASSERT_EQ(frost_stream_sync(engine->stream()), FROST_OK);
        frost_buffer_free(src);
        ASSERT_EQ(engine->adopt_restored_state(session, info.meta.ids), FROST_OK) << frost_last_error();
    };
    // (a) recurrent/conv zeroed.
    ASSERT_EQ(engine->reset(1), FROST_OK);
    kv_only(1);
    EXPECT_FALSE(test::same_continuation(test::continue_session(*engine, 1, next, 4, false), ref));
    // (b) recurrent/conv stale from another prompt of the same length.
    const auto other = test::random_ids(128, seed + 3);
    ASSERT_EQ(engine->reset(2), FROST_OK);
    ASSERT_EQ(engine->prefill(2, other.data(), other.size(), nullptr), FROST_OK);
    kv_only(2);
    EXPECT_FALSE(test::same_continuation(test::continue_session(*engine, 2, next, 4, false), ref));
    // Control: the full capsule into the same kind of dirty session matches.
    ASSERT_EQ(mgr->restore(id, 2, nullptr), FROST_OK);
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 2, next, 4, false), ref));
}

TEST_P(CapsuleVerbs, UnalignedSnapshotIsRefusedNamingTheBoundaryAndUnknownIds) {
    const auto ids = test::random_ids(100, seed);
    ASSERT_EQ(engine->reset(0), FROST_OK);
    ASSERT_EQ(engine->prefill(0, ids.data(), ids.size(), nullptr), FROST_OK);
    CapsuleId id = 0;
    EXPECT_EQ(mgr->snapshot(0, CapsuleTier::Device, &id), FROST_ERR_STATE);
    EXPECT_NE(std::string(frost_last_error()).find("64"), std::string::npos) << frost_last_error();
    EXPECT_EQ(mgr->count(), 0u);
    EXPECT_EQ(mgr->restore(12345, 0, nullptr), FROST_ERR_NOT_FOUND);
    EXPECT_EQ(mgr->release(12345), FROST_ERR_NOT_FOUND);
    // prefill_and_snapshot cannot go back before the session's position.
    const auto more = test::random_ids(10, seed + 1);
    EXPECT_EQ(mgr->prefill_and_snapshot(0, more.data(), more.size(), CapsuleTier::Device, &id, nullptr),
              FROST_ERR_STATE);
    EXPECT_EQ(engine->position(0), 100);
}

INSTANTIATE_TEST_SUITE_P(Backends, CapsuleVerbs, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::model
