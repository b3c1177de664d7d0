// The state layout is declared once and read everywhere: capsule parts state each buffer's TRUE
// dtype on every backend (CPU: fp32 state; CUDA: bf16 KV and conv state, fp32 recurrent state),
// the session buffers carry the same record, and live fork copies a session through the engine.
#include <gtest/gtest.h>

#include <map>

#include "model/capsule_test_util.h"
#include "ops/tensor.h"

namespace frost::model {
namespace {

class StateLayout : public ::testing::TestWithParam<frost_backend> {};

// What each kind must hold per backend, written out here rather than read from the layout.
std::string expected_dtype(frost_backend b, CapsulePartKind k) {
    if (k == CapsulePartKind::Cursor) return "u8";
    if (b == FROST_BACKEND_CUDA && (k == CapsulePartKind::Kv || k == CapsulePartKind::Conv)) return "bf16";
    return "f32";
}

size_t dtype_bytes(const std::string& d) { return d == "bf16" ? 2 : d == "u8" ? 1 : 4; }

TEST_P(StateLayout, CapsulePartsStateEachBuffersTrueDtype) {
    auto e = test::capsule_engine(GetParam(), 1);
    ASSERT_TRUE(e) << frost_last_error();
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(*e, test::capsule_model_dir(), {}, &mgr), FROST_OK) << frost_last_error();
    const auto ids = test::random_ids(2 * kCapsuleAlignment, 0x5eed + GetParam());
    CapsuleId id = 0;
    ASSERT_EQ(mgr->prefill_and_snapshot(0, ids.data(), ids.size(), CapsuleTier::Host, &id, nullptr), FROST_OK)
        << frost_last_error();
    CapsuleInfo info;
    ASSERT_EQ(mgr->info(id, &info), FROST_OK);
    const ModelConfig& c = e->config();
    std::map<CapsulePartKind, int> kinds;
    for (const auto& p : info.meta.parts) {
        ++kinds[p.kind];
        EXPECT_EQ(p.dtype, expected_dtype(GetParam(), p.kind)) << p.name;
        size_t elems = 1;
        for (int64_t s : p.shape) elems *= size_t(s);
        if (p.kind != CapsulePartKind::Cursor) {
            EXPECT_EQ(elems * dtype_bytes(p.dtype), p.bytes) << p.name;
        }
        if (p.kind == CapsulePartKind::Kv) {
            ASSERT_EQ(p.shape.size(), 3u) << p.name;
            EXPECT_EQ(p.shape[0], int64_t(ids.size())) << p.name;
            EXPECT_EQ(p.shape[1], c.num_kv_heads);
            EXPECT_EQ(p.shape[2], c.head_dim);
        }
    }
    EXPECT_EQ(kinds[CapsulePartKind::Cursor], 1);
    EXPECT_EQ(kinds[CapsulePartKind::Kv], 2 * c.num_full_layers());
    EXPECT_EQ(kinds[CapsulePartKind::Conv], c.num_linear_layers());
    EXPECT_EQ(kinds[CapsulePartKind::Recurrent], c.num_linear_layers());
    EXPECT_EQ(kinds[CapsulePartKind::Other], 0);
    // The deployment names the engine's activation dtype.
    EXPECT_EQ(info.meta.deployment.dtype, GetParam() == FROST_BACKEND_CUDA ? "bf16" : "f32");
    // The live session's buffers carry the same record the capsule wrote.
    for (const auto& b : e->state_buffers(0)) EXPECT_NE(b.kind, StateKind::None) << b.name;
}

// fork(src, dst) makes dst continue exactly like src: same position, journal and greedy tokens
// with bitwise-equal logits, without a capsule and off the alignment grid.
TEST_P(StateLayout, ForkedSessionContinuesLikeItsSource) {
    auto e = test::capsule_engine(GetParam(), 3);
    ASSERT_TRUE(e) << frost_last_error();
    const auto ids = test::random_ids(kCapsuleAlignment + 13, 0xf0 + GetParam());
    int32_t first = -1;
    ASSERT_EQ(e->reset(0), FROST_OK);
    ASSERT_EQ(e->prefill(0, ids.data(), ids.size(), &first), FROST_OK);
    test::poison_session(*e, 1, 0x7f);
    ASSERT_EQ(e->fork(0, 1), FROST_OK) << frost_last_error();
    EXPECT_EQ(e->position(1), e->position(0));
    EXPECT_EQ(e->journal(1), e->journal(0));
    EXPECT_EQ(test::live_state(*e, 1), test::live_state(*e, 0));
    const auto a = test::continue_session(*e, 0, first, 6, false);
    const auto b = test::continue_session(*e, 1, first, 6, false);
    EXPECT_TRUE(test::same_continuation(a, b));
    EXPECT_EQ(e->fork(2, 2), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(e->fork(0, 7), FROST_ERR_INVALID_ARG);
}

INSTANTIATE_TEST_SUITE_P(Backends, StateLayout, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::model
