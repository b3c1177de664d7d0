// The C ABI (include/frost/frost.h) exercised the way a C, Rust or Python caller would: only the C
// header's types and functions touch the model (the synthetic model folder comes from the suite's
// C++ helper). Restore/fork/rollback through the ABI equal the live path; errors are statuses.
#include <gtest/gtest.h>

#include <string.h>

#include "frost/frost.h"
#include "model/capsule_test_util.h"

namespace {

#define C_OK(expr) ASSERT_EQ((expr), FROST_OK) << #expr << ": " << frost_last_error()

int32_t decode_n(frost_model* m, int session, int n) {
    int32_t t = -1;
    for (int i = 0; i < n; ++i)
        if (frost_session_decode(m, session, &t) != FROST_OK) return -2;
    return t;
}

TEST(CApi, CapsuleVerbsThroughTheCAbi) {
    EXPECT_EQ(frost_api_version(), uint32_t(FROST_API_VERSION));
    const std::string dir = frost::test::capsule_model_dir();
    const std::string cdir = frost::test::capsule_temp_dir("capi");
    frost_model_options o;
    frost_model_options_default(&o);
    o.max_seq_len = 256;
    o.sessions = 3;
    o.prefill_chunk = 128;
    o.capsule_dir = cdir.c_str();
    frost_model* m = NULL;
    C_OK(frost_model_load(dir.c_str(), &o, &m));
    EXPECT_EQ(frost_model_sessions(m), 3);
    EXPECT_EQ(frost_model_vocab_size(m), frost::test::kCapsuleVocab);
    EXPECT_EQ(frost_model_alignment(m), 64);
    char fp[65];
    C_OK(frost_model_fingerprint(m, fp));
    EXPECT_EQ(strlen(fp), 64u);

    const std::vector<int32_t> ids = frost::test::random_ids(100, ::testing::UnitTest::GetInstance()->random_seed());
    frost_capsule_id cap = 0;
    int32_t next = -1;
    C_OK(frost_capsule_prefill_and_snapshot(m, 0, ids.data(), ids.size(), FROST_TIER_DEVICE, &cap, &next));
    EXPECT_NE(cap, 0u);
    EXPECT_EQ(frost_session_position(m, 0), 100);
    frost_capsule_info info;
    C_OK(frost_capsule_get_info(m, cap, &info));
    EXPECT_EQ(info.requested_boundary, 100);
    EXPECT_EQ(info.stored_boundary, 64);
    EXPECT_EQ(info.n_remainder, 36u);
    EXPECT_EQ(info.tier, FROST_TIER_DEVICE);
    EXPECT_EQ(info.bytes_total, info.bytes_kv + info.bytes_recurrent + info.bytes_conv + info.bytes_cursor);
    EXPECT_GT(info.bytes_recurrent, 0u);
    EXPECT_EQ(std::string(info.model_digest), std::string(fp));
    int32_t toks[128];
    size_t n = 0;
    C_OK(frost_capsule_tokens(m, cap, toks, 128, &n));
    ASSERT_EQ(n, ids.size());
    EXPECT_EQ(memcmp(toks, ids.data(), n * sizeof(int32_t)), 0);
    char name[64];
    uint64_t bytes = 0, sum = 0;
    C_OK(frost_capsule_buffer(m, cap, 0, name, sizeof name, &bytes, &sum));
    EXPECT_STREQ(name, "cursor");
    EXPECT_EQ(frost_capsule_buffer(m, cap, info.n_buffers, name, sizeof name, &bytes, &sum), FROST_ERR_OUT_OF_RANGE);

    // Restore and fork equal the live continuation of session 0.
    const int32_t live5 = decode_n(m, 0, 5);
    int32_t r = -1;
    C_OK(frost_capsule_restore(m, cap, 1, &r));
    EXPECT_EQ(r, next);
    EXPECT_EQ(decode_n(m, 1, 5), live5);
    const int targets[2] = {1, 2};
    int32_t firsts[2] = {-1, -1};
    C_OK(frost_capsule_fork(m, cap, targets, 2, firsts));
    EXPECT_EQ(firsts[0], next);
    EXPECT_EQ(firsts[1], next);
    EXPECT_EQ(decode_n(m, 2, 5), live5);
    // Restore + append equals the live path of prefill(ids ++ suffix) in one run.
    const int32_t suffix[3] = {5, 6, 7};
    std::vector<int32_t> full = ids;
    full.insert(full.end(), suffix, suffix + 3);
    int32_t cold = -1, warm = -1;
    C_OK(frost_session_reset(m, 2, NULL));
    C_OK(frost_session_prefill(m, 2, full.data(), full.size(), &cold));
    const int32_t cold5 = decode_n(m, 2, 5);
    C_OK(frost_capsule_restore_append(m, cap, 1, suffix, 3, NULL, &warm));
    EXPECT_EQ(warm, cold);
    EXPECT_EQ(decode_n(m, 1, 5), cold5);
    EXPECT_EQ(frost_session_position(m, 1), 108);
    // Rollback of session 0 to its own earlier boundary.
    C_OK(frost_capsule_rollback(m, 0, cap, &r));
    EXPECT_EQ(frost_session_position(m, 0), 100);
    EXPECT_EQ(decode_n(m, 0, 5), live5);

    // Tiers and files.
    C_OK(frost_capsule_move(m, cap, FROST_TIER_HOST));
    C_OK(frost_capsule_move(m, cap, FROST_TIER_DISK));
    C_OK(frost_capsule_get_info(m, cap, &info));
    EXPECT_EQ(info.tier, FROST_TIER_DISK);
    const std::string path = cdir + "/c.frostcap";
    C_OK(frost_capsule_save(m, cap, path.c_str()));
    frost_capsule_id loaded = 0;
    C_OK(frost_capsule_load(m, path.c_str(), FROST_TIER_HOST, &loaded));
    C_OK(frost_capsule_restore(m, loaded, 2, &r));
    EXPECT_EQ(decode_n(m, 2, 5), live5);

    // Errors are statuses with a message, never a crash.
    EXPECT_EQ(frost_capsule_restore(m, 987654, 0, &r), FROST_ERR_NOT_FOUND);
    EXPECT_STRNE(frost_last_error(), "");
    EXPECT_EQ(frost_capsule_move(m, cap, (frost_tier)7), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(frost_capsule_restore(NULL, cap, 0, &r), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(frost_session_position(NULL, 0), -1);
    EXPECT_EQ(frost_capsule_snapshot(m, 0, FROST_TIER_DEVICE, &loaded), FROST_ERR_STATE);  // position 105
    C_OK(frost_capsule_release(m, cap));
    EXPECT_EQ(frost_capsule_release(m, cap), FROST_ERR_NOT_FOUND);
    frost_model_free(m);
    frost_model_free(NULL);
}

}  // namespace
