// Contract tests for contexts, streams, stats, status names and argument validation.
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "contract_util.h"

namespace frost::test {
namespace {

TEST(ExecCtx, CpuIsAlwaysAvailableAndUnknownBackendIsNot) {
    EXPECT_EQ(frost_backend_available(FROST_BACKEND_CPU), 1);
    EXPECT_EQ(frost_backend_available(static_cast<frost_backend>(7)), 0);
}

TEST(ExecCtx, CreateRejectsBadArguments) {
    frost_ctx* ctx = nullptr;
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_ctx_create(FROST_BACKEND_CPU, 0, nullptr));
    EXPECT_NE(std::string(frost_last_error()), "");
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_ctx_create(static_cast<frost_backend>(9), 0, &ctx));
    EXPECT_NE(std::string(frost_last_error()).find("backend"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_UNSUPPORTED, frost_ctx_create(FROST_BACKEND_CPU, 1, &ctx));
    EXPECT_NE(std::string(frost_last_error()).find("device"), std::string::npos) << frost_last_error();
    if (!frost_backend_available(FROST_BACKEND_CUDA)) {
        FROST_EXPECT_STATUS(FROST_ERR_UNSUPPORTED, frost_ctx_create(FROST_BACKEND_CUDA, 0, &ctx));
        EXPECT_NE(std::string(frost_last_error()), "");
    }
    EXPECT_EQ(ctx, nullptr);  // never written on failure
    EXPECT_EQ(frost_ctx_destroy(nullptr), FROST_OK);
}

TEST(ExecCtx, StatusNamesAreDistinctAndAbiVersionMatches) {
    std::set<std::string> names;
    for (int s = FROST_OK; s <= FROST_ERR_INCOMPATIBLE; ++s) {
        const char* n = frost_status_name(static_cast<frost_status>(s));
        ASSERT_NE(n, nullptr);
        names.insert(n);
    }
    EXPECT_EQ(names.size(), static_cast<size_t>(FROST_ERR_INCOMPATIBLE) + 1);
    EXPECT_STREQ(frost_status_name(FROST_ERR_NOT_FOUND), "FROST_ERR_NOT_FOUND");
    EXPECT_NE(frost_status_name(static_cast<frost_status>(1234)), nullptr);
    EXPECT_EQ(frost_exec_abi_version(), static_cast<uint32_t>(FROST_EXEC_ABI_VERSION));
}

TEST(ExecCtx, LastErrorIsThreadLocalAndClearable) {
    frost_ctx* ctx = nullptr;
    FROST_EXPECT_STATUS(FROST_ERR_UNSUPPORTED, frost_ctx_create(FROST_BACKEND_CPU, 3, &ctx));
    EXPECT_NE(std::string(frost_last_error()), "");
    std::string other = "unset";
    std::thread([&] { other = frost_last_error(); }).join();
    EXPECT_EQ(other, "");
    frost_clear_error();
    EXPECT_STREQ(frost_last_error(), "");
}

using ExecCtxP = ContractTest;

TEST_P(ExecCtxP, StatsCountEveryObjectKindAndReturnToBaseline) {
    EXPECT_EQ(baseline.live_streams, 1u);
    EXPECT_EQ(baseline.live_buffers, 0u);
    EXPECT_EQ(frost_ctx_backend(ctx), GetParam());
    frost_stream* s2 = nullptr;
    frost_event* ev = nullptr;
    frost_graph* g = nullptr;
    frost_plan* p = nullptr;
    FROST_ASSERT_OK(frost_stream_create(ctx, 0, &s2));
    FROST_ASSERT_OK(frost_event_create(ctx, &ev));
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    FROST_ASSERT_OK(frost_plan_create(ctx, &p));
    frost_buffer* d = alloc("d", 1000, FROST_SPACE_DEVICE);
    frost_buffer* pin = alloc("p", 300, FROST_SPACE_HOST_PINNED);
    frost_buffer* h = alloc("h", 7, FROST_SPACE_HOST);
    std::vector<uint8_t> ext(64);
    frost_buffer* w = nullptr;
    FROST_ASSERT_OK(frost_buffer_wrap(ctx, "w", ext.data(), ext.size(), FROST_SPACE_HOST, &w));
    const frost_ctx_stats s = stats();
    EXPECT_EQ(s.live_streams, 2u);
    EXPECT_EQ(s.live_events, 1u);
    EXPECT_EQ(s.live_graphs, 1u);
    EXPECT_EQ(s.live_plans, 1u);
    EXPECT_EQ(s.live_buffers, 4u);  // the wrapped one counts as live but owns no bytes
    EXPECT_EQ(s.bytes_device, 1000u);
    EXPECT_EQ(s.bytes_host_pinned, 300u);
    EXPECT_EQ(s.bytes_host, 7u);
    FROST_EXPECT_OK(frost_buffer_free(w));
    FROST_EXPECT_OK(frost_buffer_free(h));
    FROST_EXPECT_OK(frost_buffer_free(pin));
    FROST_EXPECT_OK(frost_buffer_free(d));
    FROST_EXPECT_OK(frost_plan_destroy(p));
    FROST_EXPECT_OK(frost_graph_destroy(g));
    FROST_EXPECT_OK(frost_event_destroy(ev));
    FROST_EXPECT_OK(frost_stream_destroy(s2));
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats()) << " vs " << stats_str(baseline);
}

TEST_P(ExecCtxP, StreamPriorityAndOwnerAreStored) {
    frost_stream* hi = nullptr;
    frost_stream* lo = nullptr;
    constexpr int kHigh = -1, kLow = 3;
    FROST_ASSERT_OK(frost_stream_create(ctx, kHigh, &hi));
    FROST_ASSERT_OK(frost_stream_create(ctx, kLow, &lo));
    EXPECT_EQ(frost_stream_priority(hi), kHigh);
    EXPECT_EQ(frost_stream_priority(lo), kLow);
    EXPECT_EQ(frost_stream_priority(stream), 0);
    EXPECT_EQ(frost_stream_ctx(hi), ctx);
    if (GetParam() == FROST_BACKEND_CPU) EXPECT_EQ(frost_stream_native(hi), nullptr);
    else EXPECT_NE(frost_stream_native(hi), nullptr);
    FROST_EXPECT_OK(frost_stream_destroy(hi));
    FROST_EXPECT_OK(frost_stream_destroy(lo));
    FROST_EXPECT_OK(frost_stream_destroy(nullptr));
}

TEST_P(ExecCtxP, StreamSyncWaitsForEnqueuedWork) {
    uint32_t* cell = nullptr;
    frost_buffer* b = alloc("cell", sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    ASSERT_NE(b, nullptr);
    cell = static_cast<uint32_t*>(frost_buffer_ptr(b));
    *cell = 0;
    constexpr uint32_t kValue = 0xC0FFEEu, kSleepMs = 30;
    const StoreArgs a{cell, kValue, kSleepMs};
    FROST_ASSERT_OK(frost_launch_host(stream, store_fn, &a, sizeof a));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*cell, kValue);
    *cell = 0;
    FROST_ASSERT_OK(frost_launch_host(stream, store_fn, &a, sizeof a));
    FROST_ASSERT_OK(frost_ctx_sync(ctx));
    EXPECT_EQ(*cell, kValue);
}

TEST_P(ExecCtxP, LaunchHostCopiesArgsAndValidates) {
    frost_buffer* b = alloc("cell", sizeof(uint32_t), FROST_SPACE_HOST);
    ASSERT_NE(b, nullptr);
    auto* cell = static_cast<uint32_t*>(frost_buffer_ptr(b));
    *cell = 0;
    std::atomic<int> open{0};
    const GateArgs gate{&open};
    FROST_ASSERT_OK(frost_launch_host(stream, gate_fn, &gate, sizeof gate));
    {
        StoreArgs a{cell, 77u, 0};
        FROST_ASSERT_OK(frost_launch_host(stream, store_fn, &a, sizeof a));
        a.value = 12345u;  // the stream must use the bytes as they were at enqueue time
    }
    open = 1;
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*cell, 77u);
    std::vector<uint8_t> big(4097);
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_launch_host(stream, count_fn, big.data(), big.size()));
    EXPECT_NE(std::string(frost_last_error()).find("4096"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_launch_host(stream, count_fn, nullptr, 8));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_launch_host(stream, nullptr, nullptr, 0));
}

// The driver's view of device memory: on cuda it covers this ctx's own buffers (used >= what they
// hold, used <= total, a query with no out-pointers is fine); the cpu backend refuses with a
// message and leaves the outputs alone; a NULL ctx is INVALID_ARG on both.
TEST_P(ExecCtxP, DeviceMemoryCoversTheCtxBuffersOnCudaAndIsUnsupportedOnCpu) {
    constexpr uint64_t kUntouched = 0xDEADBEEFull;
    uint64_t used = kUntouched, total = kUntouched;
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_ctx_device_memory(nullptr, &used, &total));
    EXPECT_EQ(used, kUntouched);
    if (GetParam() == FROST_BACKEND_CPU) {
        FROST_EXPECT_STATUS(FROST_ERR_UNSUPPORTED, frost_ctx_device_memory(ctx, &used, &total));
        EXPECT_NE(std::string(frost_last_error()).find("bytes_device"), std::string::npos) << frost_last_error();
        EXPECT_EQ(used, kUntouched);
        EXPECT_EQ(total, kUntouched);
        return;
    }
    FROST_ASSERT_OK(frost_ctx_device_memory(ctx, nullptr, nullptr));
    // A size drawn per run, large enough to stand out of any rounding (256 MiB .. 1 GiB).
    const size_t bytes = (size_t{256} + size_t(rng() % 769)) << 20;
    frost_buffer* b = alloc("big", bytes, FROST_SPACE_DEVICE);
    ASSERT_TRUE(b);
    FROST_ASSERT_OK(frost_ctx_device_memory(ctx, &used, &total));
    EXPECT_GE(used, stats().bytes_device);
    EXPECT_GE(used, bytes);
    EXPECT_LE(used, total);
    EXPECT_GT(total, bytes);
    uint64_t total_only = 0;
    FROST_ASSERT_OK(frost_ctx_device_memory(ctx, nullptr, &total_only));
    EXPECT_EQ(total_only, total);  // the capacity does not move
    FROST_EXPECT_OK(frost_buffer_free(b));
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

// Every entry point rejects a NULL handle or out-pointer with INVALID_ARG and a message.
TEST_P(ExecCtxP, NullArgumentsAreInvalidArgWithMessage) {
    frost_buffer* b = alloc("b", 64, FROST_SPACE_HOST);
    frost_graph* g = nullptr;
    frost_plan* p = nullptr;
    frost_event* ev = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    FROST_ASSERT_OK(frost_plan_create(ctx, &p));
    FROST_ASSERT_OK(frost_event_create(ctx, &ev));
    size_t node = 0;
    int done = 0;
    const std::vector<std::pair<const char*, frost_status>> calls = {
        {"ctx_sync", frost_ctx_sync(nullptr)},
        {"get_stats ctx", frost_ctx_get_stats(nullptr, nullptr)},
        {"get_stats out", frost_ctx_get_stats(ctx, nullptr)},
        {"stream_create", frost_stream_create(nullptr, 0, nullptr)},
        {"stream_create out", frost_stream_create(ctx, 0, nullptr)},
        {"stream_sync", frost_stream_sync(nullptr)},
        {"event_create", frost_event_create(ctx, nullptr)},
        {"event_record", frost_event_record(nullptr, stream)},
        {"event_record stream", frost_event_record(ev, nullptr)},
        {"wait_event", frost_stream_wait_event(stream, nullptr)},
        {"event_sync", frost_event_sync(nullptr)},
        {"event_query", frost_event_query(ev, nullptr)},
        {"event_query ev", frost_event_query(nullptr, &done)},
        {"launch_host", frost_launch_host(nullptr, count_fn, nullptr, 0)},
        {"alloc ctx", frost_buffer_alloc(nullptr, "x", 8, FROST_SPACE_HOST, &b)},
        {"alloc out", frost_buffer_alloc(ctx, "x", 8, FROST_SPACE_HOST, nullptr)},
        {"alloc name", frost_buffer_alloc(ctx, nullptr, 8, FROST_SPACE_HOST, &b)},
        {"wrap ptr", frost_buffer_wrap(ctx, "x", nullptr, 8, FROST_SPACE_HOST, &b)},
        {"copy dst", frost_buffer_copy(nullptr, 0, b, 0, 1, stream)},
        {"copy src", frost_buffer_copy(b, 0, nullptr, 0, 1, stream)},
        {"copy stream", frost_buffer_copy(b, 0, b, 8, 1, nullptr)},
        {"fill", frost_buffer_fill(nullptr, 0, 0, 1, stream)},
        {"fill stream", frost_buffer_fill(b, 0, 0, 1, nullptr)},
        {"graph_create", frost_graph_create(ctx, nullptr, 0, &g)},
        {"graph_create out", frost_graph_create(ctx, "g2", 0, nullptr)},
        {"capture graph", frost_graph_capture(nullptr, 1, stream, [](void*, frost_stream*) { return FROST_OK; }, nullptr)},
        {"capture record", frost_graph_capture(g, 1, stream, nullptr, nullptr)},
        {"capture stream", frost_graph_capture(g, 1, nullptr, [](void*, frost_stream*) { return FROST_OK; }, nullptr)},
        {"replay", frost_graph_replay(nullptr, 1, stream)},
        {"replay stream", frost_graph_replay(g, 1, nullptr)},
        {"evict", frost_graph_evict(nullptr, 1)},
        {"evict_lru", frost_graph_evict_lru(nullptr, nullptr)},
        {"bind", frost_graph_bind(g, nullptr, b)},
        {"bind buf", frost_graph_bind(g, "in", nullptr)},
        {"unbind", frost_graph_unbind(nullptr, "in")},
        {"plan_create", frost_plan_create(ctx, nullptr)},
        {"plan_add", frost_plan_add(p, nullptr, 1, stream, &node)},
        {"plan_add node", frost_plan_add(p, g, 1, stream, nullptr)},
        {"plan_depend", frost_plan_depend(nullptr, 0, 1)},
        {"plan_execute", frost_plan_execute(nullptr)},
        {"plan_sync", frost_plan_sync(nullptr)},
    };
    for (const auto& [what, st] : calls) {
        EXPECT_EQ(frost_status_name(st), std::string("FROST_ERR_INVALID_ARG")) << what;
    }
    frost_clear_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_copy(nullptr, 0, b, 0, 1, stream));
    EXPECT_NE(std::string(frost_last_error()).find("dst"), std::string::npos) << frost_last_error();
    // Pure getters tolerate NULL.
    EXPECT_EQ(frost_buffer_ptr(nullptr), nullptr);
    EXPECT_EQ(frost_graph_variant_count(nullptr), 0u);
    EXPECT_EQ(frost_graph_port(nullptr, "x"), nullptr);
    EXPECT_EQ(frost_graph_has_variant(nullptr, 1), 0);
}

// The ctx may be used from several threads, each feeding its own stream: allocations, copies,
// captures and replays interleave and every thread still sees its own results.
frost_status record_count_cell(void* user, frost_stream* s) {
    const CountArgs a{static_cast<uint64_t*>(user)};
    return frost_launch_host(s, count_fn, &a, sizeof a);
}

TEST_P(ExecCtxP, ThreadsShareACtxEachWithItsOwnStream) {
    constexpr int kThreads = 4, kRounds = 20;
    constexpr size_t kBytes = 512;
    // Captured up front: a buffer free drains every stream of the ctx, which must not meet a
    // capture in progress on another thread.
    std::vector<frost_stream*> streams(kThreads);
    std::vector<frost_graph*> graphs(kThreads);
    std::vector<uint64_t> counters(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
        FROST_ASSERT_OK(frost_stream_create(ctx, t, &streams[t]));
        FROST_ASSERT_OK(frost_graph_create(ctx, "g", 2, &graphs[t]));
        FROST_ASSERT_OK(frost_graph_capture(graphs[t], 1, streams[t], record_count_cell, &counters[t]));
    }
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            auto check = [&](frost_status st, const char* what) {
                if (st != FROST_OK && errors[t].empty()) errors[t] = std::string(what) + ": " + frost_last_error();
                return st == FROST_OK;
            };
            frost_stream* s = streams[t];
            for (int r = 0; r < kRounds; ++r) {
                frost_buffer *h = nullptr, *d = nullptr, *back = nullptr;
                if (!check(frost_buffer_alloc(ctx, "h", kBytes, FROST_SPACE_HOST, &h), "alloc h") ||
                    !check(frost_buffer_alloc(ctx, "d", kBytes, FROST_SPACE_DEVICE, &d), "alloc d") ||
                    !check(frost_buffer_alloc(ctx, "back", kBytes, FROST_SPACE_HOST, &back), "alloc back"))
                    return;
                std::memset(frost_buffer_ptr(h), t * kRounds + r, kBytes);
                check(frost_buffer_copy(d, 0, h, 0, kBytes, s), "h2d");
                check(frost_buffer_copy(back, 0, d, 0, kBytes, s), "d2h");
                check(frost_graph_replay(graphs[t], 1, s), "replay");
                check(frost_stream_sync(s), "sync");
                if (std::memcmp(frost_buffer_ptr(back), frost_buffer_ptr(h), kBytes) != 0 && errors[t].empty())
                    errors[t] = "round trip mismatch in round " + std::to_string(r);
                check(frost_buffer_free(h), "free h");
                check(frost_buffer_free(d), "free d");
                check(frost_buffer_free(back), "free back");
            }
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(errors[t], "") << "thread " << t;
        EXPECT_EQ(counters[t], static_cast<uint64_t>(kRounds)) << "thread " << t;
        FROST_EXPECT_OK(frost_graph_destroy(graphs[t]));
        FROST_EXPECT_OK(frost_stream_destroy(streams[t]));
    }
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

TEST_P(ExecCtxP, DestroyWithPendingWorkAndLiveObjectsReleasesEverything) {
    frost_ctx* c = nullptr;
    FROST_ASSERT_OK(frost_ctx_create(GetParam(), 0, &c));
    frost_stream* s = nullptr;
    FROST_ASSERT_OK(frost_stream_create(c, 0, &s));
    frost_buffer* b = nullptr;
    FROST_ASSERT_OK(frost_buffer_alloc(c, "cell", sizeof(uint32_t), FROST_SPACE_HOST_PINNED, &b));
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(c, "g", 0, &g));
    FROST_ASSERT_OK(frost_graph_bind(g, "cell", b));
    frost_plan* p = nullptr;
    FROST_ASSERT_OK(frost_plan_create(c, &p));
    frost_event* ev = nullptr;
    FROST_ASSERT_OK(frost_event_create(c, &ev));
    const StoreArgs a{static_cast<uint32_t*>(frost_buffer_ptr(b)), 1u, 20};
    FROST_ASSERT_OK(frost_launch_host(s, store_fn, &a, sizeof a));
    FROST_ASSERT_OK(frost_event_record(ev, s));
    FROST_EXPECT_OK(frost_ctx_destroy(c));  // sanitizers catch a leak or a use after free
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecCtxP, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
