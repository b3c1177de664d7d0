// Contract tests for events: record / query / sync, cross-stream waits, re-recording, and the
// never-recorded event being complete. A "gate" host fn that blocks until the test opens it
// makes "not yet complete" deterministic without relying on timing.
#include "contract_util.h"

namespace frost::test {
namespace {

class ExecEvent : public ContractTest {
protected:
    void SetUp() override {
        ContractTest::SetUp();
        FROST_ASSERT_OK(frost_stream_create(ctx, 0, &other));
        FROST_ASSERT_OK(frost_event_create(ctx, &ev));
        cells = alloc("cells", 2 * sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
        ASSERT_NE(cells, nullptr);
        x = static_cast<uint32_t*>(frost_buffer_ptr(cells));
        y = x + 1;
        *x = *y = 0;
    }
    frost_stream* other = nullptr;
    frost_event* ev = nullptr;
    frost_buffer* cells = nullptr;
    uint32_t* x = nullptr;
    uint32_t* y = nullptr;
    std::atomic<int> open{0};
};

TEST_P(ExecEvent, NeverRecordedIsCompleteAndWaitingOnItIsANoOp) {
    int done = -1;
    FROST_ASSERT_OK(frost_event_query(ev, &done));
    EXPECT_EQ(done, 1);
    FROST_EXPECT_OK(frost_event_sync(ev));
    FROST_EXPECT_OK(frost_stream_wait_event(stream, ev));
    const StoreArgs a{x, 5u, 0};
    FROST_ASSERT_OK(frost_launch_host(stream, store_fn, &a, sizeof a));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*x, 5u);
}

TEST_P(ExecEvent, RecordQuerySync) {
    const GateArgs gate{&open};
    FROST_ASSERT_OK(frost_launch_host(stream, gate_fn, &gate, sizeof gate));
    FROST_ASSERT_OK(frost_event_record(ev, stream));
    int done = -1;
    FROST_ASSERT_OK(frost_event_query(ev, &done));
    EXPECT_EQ(done, 0);  // the gate holds the stream
    open = 1;
    FROST_ASSERT_OK(frost_event_sync(ev));
    FROST_ASSERT_OK(frost_event_query(ev, &done));
    EXPECT_EQ(done, 1);
}

TEST_P(ExecEvent, ReRecordingMovesThePoint) {
    FROST_ASSERT_OK(frost_event_record(ev, stream));
    FROST_ASSERT_OK(frost_event_sync(ev));
    const GateArgs gate{&open};
    FROST_ASSERT_OK(frost_launch_host(stream, gate_fn, &gate, sizeof gate));
    FROST_ASSERT_OK(frost_event_record(ev, stream));
    int done = -1;
    FROST_ASSERT_OK(frost_event_query(ev, &done));
    EXPECT_EQ(done, 0);
    open = 1;
    FROST_ASSERT_OK(frost_event_sync(ev));
    FROST_ASSERT_OK(frost_event_query(ev, &done));
    EXPECT_EQ(done, 1);
}

// Stream `other` reads x only after `stream` wrote it, although `stream` is blocked at first.
TEST_P(ExecEvent, WaitOrdersWorkAcrossStreams) {
    constexpr int kRounds = 5;
    for (int r = 1; r <= kRounds; ++r) {
        open = 0;
        const GateArgs gate{&open};
        const auto value = static_cast<uint32_t>(rng() | 1u);
        const StoreArgs store{x, value, 0};
        FROST_ASSERT_OK(frost_launch_host(stream, gate_fn, &gate, sizeof gate));
        FROST_ASSERT_OK(frost_launch_host(stream, store_fn, &store, sizeof store));
        FROST_ASSERT_OK(frost_event_record(ev, stream));
        FROST_ASSERT_OK(frost_stream_wait_event(other, ev));
        const MapArgs copy{x, y, 1u, 0u};
        FROST_ASSERT_OK(frost_launch_host(other, map_fn, &copy, sizeof copy));
        open = 1;
        FROST_ASSERT_OK(frost_stream_sync(other));
        EXPECT_EQ(*y, value) << "round " << r;
        FROST_ASSERT_OK(frost_stream_sync(stream));
    }
}

TEST_P(ExecEvent, RejectsObjectsOfAnotherCtx) {
    frost_ctx* c2 = nullptr;
    FROST_ASSERT_OK(frost_ctx_create(GetParam(), 0, &c2));
    frost_event* ev2 = nullptr;
    FROST_ASSERT_OK(frost_event_create(c2, &ev2));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_event_record(ev2, stream));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_stream_wait_event(stream, ev2));
    EXPECT_NE(std::string(frost_last_error()).find("context"), std::string::npos) << frost_last_error();
    FROST_EXPECT_OK(frost_ctx_destroy(c2));
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecEvent, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
