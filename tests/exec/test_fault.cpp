// Contract tests for failure paths: injected allocation and copy failures (once and persistent)
// end in a clean error with stats back to baseline and nothing written; a failing host fn sets
// the stream's sticky error, reported once by the next sync and named in the message.
#include <cstring>

#include "contract_util.h"

namespace frost::test {
namespace {

constexpr uint8_t kPoison = 0xCD;

using ExecFault = ContractTest;

TEST(ExecFaultGate, CountsCallsAndFailsTheNthOnceOrFromThenOn) {
    frost_fault_clear();
    frost_fault_arm(FROST_FAULT_IO, 3, 0);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 0);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 0);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 1);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 0);
    EXPECT_EQ(frost_fault_calls(FROST_FAULT_IO), 4u);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_ALLOC), 0);  // other kinds unaffected
    frost_fault_arm(FROST_FAULT_IO, 2, 1);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 0);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 1);
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 1);
    frost_fault_arm(FROST_FAULT_IO, 0, 1);  // nth 0 disarms
    EXPECT_EQ(frost_fault_hit(FROST_FAULT_IO), 0);
    frost_fault_clear();
    EXPECT_EQ(frost_fault_calls(FROST_FAULT_IO), 0u);
    EXPECT_EQ(frost_fault_calls(static_cast<frost_fault_kind>(17)), 0u);
}

TEST_P(ExecFault, InjectedAllocationFailureOnceIsCleanAndLeavesNothing) {
    frost_buffer* a = nullptr;
    frost_fault_arm(FROST_FAULT_ALLOC, 2, 0);
    FROST_ASSERT_OK(frost_buffer_alloc(ctx, "first", 100, FROST_SPACE_DEVICE, &a));
    auto* const sentinel = reinterpret_cast<frost_buffer*>(uintptr_t{0x1234});
    frost_buffer* b = sentinel;
    FROST_EXPECT_STATUS(FROST_ERR_OUT_OF_MEMORY, frost_buffer_alloc(ctx, "second", 200, FROST_SPACE_HOST_PINNED, &b));
    const std::string msg = frost_last_error();
    EXPECT_NE(msg.find("second"), std::string::npos) << msg;
    EXPECT_NE(msg.find("injected"), std::string::npos) << msg;
    EXPECT_EQ(b, sentinel);  // out untouched
    frost_ctx_stats s = stats();
    EXPECT_EQ(s.live_buffers, baseline.live_buffers + 1);
    EXPECT_EQ(s.bytes_host_pinned, baseline.bytes_host_pinned);
    frost_buffer* c = nullptr;
    FROST_ASSERT_OK(frost_buffer_alloc(ctx, "third", 300, FROST_SPACE_HOST, &c));  // "once"
    EXPECT_EQ(frost_fault_calls(FROST_FAULT_ALLOC), 3u);
    FROST_EXPECT_OK(frost_buffer_free(a));
    FROST_EXPECT_OK(frost_buffer_free(c));
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

TEST_P(ExecFault, InjectedAllocationFailurePersistsUntilCleared) {
    frost_fault_arm(FROST_FAULT_ALLOC, 1, 1);
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST};
    for (frost_space sp : spaces) {
        frost_buffer* b = nullptr;
        FROST_EXPECT_STATUS(FROST_ERR_OUT_OF_MEMORY, frost_buffer_alloc(ctx, "p", 64, sp, &b));
        EXPECT_EQ(b, nullptr);
    }
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
    frost_fault_clear();
    frost_buffer* b = alloc("ok", 64, FROST_SPACE_DEVICE);
    FROST_EXPECT_OK(frost_buffer_free(b));
}

// SQLite-style loop: fail the 1st, 2nd, ... allocation of a multi-buffer setup that cleans up
// after itself; every failing run must leave the stats at baseline.
frost_status setup_four(frost_ctx* ctx, frost_buffer** out) {
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST, FROST_SPACE_DEVICE};
    for (int i = 0; i < 4; ++i) {
        const frost_status s = frost_buffer_alloc(ctx, "setup", 64 * (i + 1), spaces[i], &out[i]);
        if (s != FROST_OK) {
            for (int j = 0; j < i; ++j) frost_buffer_free(out[j]);
            return s;
        }
    }
    return FROST_OK;
}

TEST_P(ExecFault, AllocationFailureLoopAlwaysReturnsToBaseline) {
    for (uint64_t nth = 1;; ++nth) {
        frost_fault_arm(FROST_FAULT_ALLOC, nth, 0);
        frost_buffer* bufs[4] = {};
        const frost_status s = setup_four(ctx, bufs);
        frost_fault_clear();
        if (s == FROST_OK) {
            EXPECT_EQ(nth, 5u);  // four allocations, then the armed call is never reached
            for (frost_buffer* b : bufs) FROST_EXPECT_OK(frost_buffer_free(b));
            break;
        }
        EXPECT_EQ(s, FROST_ERR_OUT_OF_MEMORY);
        EXPECT_TRUE(same_stats(stats(), baseline)) << "nth " << nth << ": " << stats_str(stats());
        ASSERT_LT(nth, 10u);
    }
    EXPECT_TRUE(same_stats(stats(), baseline));
}

TEST_P(ExecFault, InjectedCopyFailureOnceWritesNothing) {
    constexpr size_t kBytes = 512;
    frost_buffer* src = alloc("src", kBytes, FROST_SPACE_HOST);
    frost_buffer* dst = alloc("dst", kBytes, FROST_SPACE_DEVICE);
    const std::vector<uint8_t> data = random_bytes(kBytes);
    const std::vector<uint8_t> poison(kBytes, kPoison);
    write(src, data);
    write(dst, poison);
    const frost_ctx_stats before = stats();
    frost_fault_arm(FROST_FAULT_COPY, 1, 0);
    FROST_EXPECT_STATUS(FROST_ERR_IO, frost_buffer_copy(dst, 0, src, 0, kBytes, stream));
    const std::string msg = frost_last_error();
    EXPECT_NE(msg.find("injected"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dst"), std::string::npos) << msg;
    FROST_EXPECT_OK(frost_ctx_sync(ctx));  // not an asynchronous error: nothing was enqueued
    EXPECT_TRUE(same_stats(stats(), before));
    frost_fault_clear();
    EXPECT_EQ(read(dst), poison);
    frost_fault_arm(FROST_FAULT_COPY, 2, 0);
    FROST_ASSERT_OK(frost_buffer_copy(dst, 0, src, 0, kBytes, stream));
    FROST_EXPECT_STATUS(FROST_ERR_IO, frost_buffer_fill(dst, 0, 0, kBytes, stream));
    FROST_ASSERT_OK(frost_buffer_fill(dst, 0, 0, 1, stream));  // once: the next one passes
    frost_fault_clear();
    std::vector<uint8_t> want = data;
    want[0] = 0;
    EXPECT_EQ(read(dst), want);
}

TEST_P(ExecFault, InjectedCopyFailurePersistentFailsEveryCopyAndFill) {
    constexpr size_t kBytes = 64;
    frost_buffer* a = alloc("a", kBytes, FROST_SPACE_HOST_PINNED);
    frost_buffer* b = alloc("b", kBytes, FROST_SPACE_DEVICE);
    write(a, random_bytes(kBytes));
    const std::vector<uint8_t> poison(kBytes, kPoison);
    write(b, poison);
    const frost_ctx_stats before = stats();
    frost_fault_arm(FROST_FAULT_COPY, 1, 1);
    for (int i = 0; i < 3; ++i) {
        FROST_EXPECT_STATUS(FROST_ERR_IO, frost_buffer_copy(b, 0, a, 0, kBytes, stream));
        FROST_EXPECT_STATUS(FROST_ERR_IO, frost_buffer_fill(b, 0, 1, kBytes, stream));
    }
    EXPECT_EQ(frost_fault_calls(FROST_FAULT_COPY), 6u);
    FROST_EXPECT_OK(frost_ctx_sync(ctx));
    EXPECT_TRUE(same_stats(stats(), before));
    frost_fault_clear();
    EXPECT_EQ(read(b), poison);
}

TEST_P(ExecFault, FailingHostFnSetsAStickyErrorReportedOnceBySync) {
    frost_buffer* cb = alloc("counter", sizeof(uint64_t), FROST_SPACE_HOST_PINNED);
    auto* counter = static_cast<uint64_t*>(frost_buffer_ptr(cb));
    *counter = 0;
    const CountArgs c{counter};
    FROST_ASSERT_OK(frost_launch_host(stream, failing_fn, nullptr, 0));  // enqueue succeeds
    FROST_ASSERT_OK(frost_launch_host(stream, count_fn, &c, sizeof c));
    const frost_status s = frost_stream_sync(stream);
    EXPECT_NE(s, FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find(kFailMessage), std::string::npos) << frost_last_error();
    EXPECT_EQ(*counter, 1u);  // later work still ran
    FROST_EXPECT_OK(frost_stream_sync(stream));  // reported once, then cleared

    // Through ctx_sync, and from inside a replayed variant.
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "failing", 0, &g));
    FROST_ASSERT_OK(frost_graph_capture(
        g, 1, stream, [](void*, frost_stream* st) { return frost_launch_host(st, failing_fn, nullptr, 0); }, nullptr));
    FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
    EXPECT_NE(frost_ctx_sync(ctx), FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find(kFailMessage), std::string::npos) << frost_last_error();
    FROST_EXPECT_OK(frost_ctx_sync(ctx));
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecFault, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
