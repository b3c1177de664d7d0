// Tests of the cuda backend that only make sense with CUDA: work enqueued directly on the native
// stream captured and replayed through the contract, host-fn payloads owned by the variant,
// pinned memory really page-locked, illegal calls during capture failing cleanly, priorities,
// out-of-memory mapping and pageable copies inside a capture. Skipped without a CUDA device.
#include "contract_util.h"

#ifdef FROST_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "exec/error.h"

namespace frost::test {
namespace {

constexpr size_t kBytes = 4096;
constexpr uint8_t kPoison = 0xAB;
constexpr uint8_t kMemsetValue = 0x5A;
constexpr int kReplays = 3;
constexpr auto kGateDelay = std::chrono::milliseconds(100);

class CudaSpecificTest : public ContractTest {
protected:
    void SetUp() override {
        if (!frost_backend_available(FROST_BACKEND_CUDA)) GTEST_SKIP() << "no CUDA device";
        ContractTest::SetUp();
    }
};

// Record callback: half of `dst` from `src` with cudaMemcpyAsync, the other half set with
// cudaMemsetAsync, both issued straight on the native stream as a kernel launcher would.
struct NativeWork {
    void* dst;        // [kBytes] device
    const void* src;  // [kBytes / 2] device
};

frost_status record_native(void* user, frost_stream* stream) {
    const auto* w = static_cast<const NativeWork*>(user);
    auto s = static_cast<cudaStream_t>(frost_stream_native(stream));
    cudaError_t e = cudaMemcpyAsync(w->dst, w->src, kBytes / 2, cudaMemcpyDeviceToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(static_cast<uint8_t*>(w->dst) + kBytes / 2, kMemsetValue, kBytes / 2,
                            s);
    if (e != cudaSuccess) return fail(FROST_ERR_BACKEND, "native work: %s", cudaGetErrorString(e));
    return FROST_OK;
}

TEST_P(CudaSpecificTest, NativeStreamWorkIsCapturedNotRunAndReplayedWithCurrentInputs) {
    frost_buffer* src = alloc("src", kBytes / 2, FROST_SPACE_DEVICE);
    frost_buffer* dst = alloc("dst", kBytes, FROST_SPACE_DEVICE);
    ASSERT_TRUE(src && dst);
    ASSERT_NE(frost_stream_native(stream), nullptr);
    write(dst, std::vector<uint8_t>(kBytes, kPoison));
    write(src, random_bytes(kBytes / 2));

    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "native", 0, &g));
    NativeWork w{frost_buffer_ptr(dst), frost_buffer_ptr(src)};
    FROST_ASSERT_OK(frost_graph_capture(g, 1, stream, record_native, &w));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(read(dst), std::vector<uint8_t>(kBytes, kPoison)) << "capture executed work";

    for (int i = 0; i < kReplays; ++i) {
        // Fresh inputs each round: the replay must read the buffer, not a value baked at capture.
        const std::vector<uint8_t> input = random_bytes(kBytes / 2);
        write(src, input);
        write(dst, std::vector<uint8_t>(kBytes, kPoison));
        FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        const std::vector<uint8_t> out = read(dst);
        ASSERT_TRUE(std::equal(input.begin(), input.end(), out.begin())) << "round " << i;
        ASSERT_EQ(std::vector<uint8_t>(out.begin() + kBytes / 2, out.end()),
                  std::vector<uint8_t>(kBytes / 2, kMemsetValue))
            << "round " << i;
    }
    EXPECT_EQ(frost_graph_capture_count(g), 1u);
    FROST_EXPECT_OK(frost_graph_destroy(g));
}

// Record callback: one counting host fn whose args live on the callback's stack.
frost_status record_count(void* user, frost_stream* stream) {
    const CountArgs args{static_cast<uint64_t*>(user)};
    return frost_launch_host(stream, count_fn, &args, sizeof args);
}

TEST_P(CudaSpecificTest, CapturedHostFnArgsLiveAsLongAsTheVariantEvenWhenEvictedInFlight) {
    frost_buffer* counter_buf = alloc("counter", sizeof(uint64_t), FROST_SPACE_HOST_PINNED);
    ASSERT_TRUE(counter_buf);
    auto* counter = static_cast<uint64_t*>(frost_buffer_ptr(counter_buf));
    *counter = 0;
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "count", 0, &g));
    FROST_ASSERT_OK(frost_graph_capture(g, 7, stream, record_count, counter));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*counter, 0u) << "capture ran the host fn";

    for (int i = 0; i < kReplays; ++i) FROST_ASSERT_OK(frost_graph_replay(g, 7, stream));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*counter, static_cast<uint64_t>(kReplays));

    // Hold the stream behind a gate, enqueue a replay and evict its variant while the replay is
    // still queued: it must still find its args. The gate opens from another thread after a
    // delay, so the test also finishes if a driver made the evict wait for the replay.
    std::atomic<int> open{0};
    const GateArgs gate{&open};
    FROST_ASSERT_OK(frost_launch_host(stream, gate_fn, &gate, sizeof gate));
    std::thread opener([&open] {
        std::this_thread::sleep_for(kGateDelay);
        open = 1;
    });
    const frost_status replayed = frost_graph_replay(g, 7, stream);
    const frost_status evicted = frost_graph_evict(g, 7);
    opener.join();
    FROST_ASSERT_OK(replayed);
    FROST_ASSERT_OK(evicted);
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*counter, static_cast<uint64_t>(kReplays + 1));
    FROST_EXPECT_OK(frost_graph_destroy(g));
}

frost_status record_failing(void*, frost_stream* stream) {
    return frost_launch_host(stream, failing_fn, nullptr, 0);
}

TEST_P(CudaSpecificTest, HostFnFailureInAReplayIsReportedOnTheReplayStreamOnce) {
    frost_stream* other = nullptr;
    FROST_ASSERT_OK(frost_stream_create(ctx, 0, &other));
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "failing", 0, &g));
    FROST_ASSERT_OK(frost_graph_capture(g, 3, stream, record_failing, nullptr));
    FROST_ASSERT_OK(frost_stream_sync(stream));  // capture ran nothing, so nothing failed

    FROST_ASSERT_OK(frost_graph_replay(g, 3, other));
    FROST_EXPECT_STATUS(FROST_ERR_BACKEND, frost_stream_sync(other));
    EXPECT_NE(std::string(frost_last_error()).find(kFailMessage), std::string::npos)
        << frost_last_error();
    FROST_EXPECT_OK(frost_stream_sync(other));   // reported once, then cleared
    FROST_EXPECT_OK(frost_stream_sync(stream));  // the capture stream never ran it
    FROST_EXPECT_OK(frost_graph_destroy(g));
    FROST_EXPECT_OK(frost_stream_destroy(other));
}

TEST_P(CudaSpecificTest, EachSpaceHasTheCudaMemoryTypeItPromises) {
    struct Case {
        frost_space space;
        cudaMemoryType type;
    };
    for (const Case c : {Case{FROST_SPACE_DEVICE, cudaMemoryTypeDevice},
                         Case{FROST_SPACE_HOST_PINNED, cudaMemoryTypeHost},
                         Case{FROST_SPACE_HOST, cudaMemoryTypeUnregistered}}) {
        frost_buffer* b = alloc("typed", kBytes, c.space);
        ASSERT_TRUE(b);
        cudaPointerAttributes attr{};
        ASSERT_EQ(cudaPointerGetAttributes(&attr, frost_buffer_ptr(b)), cudaSuccess)
            << space_name(c.space);
        EXPECT_EQ(attr.type, c.type) << space_name(c.space);
        FROST_EXPECT_OK(frost_buffer_free(b));
    }
}

// Checks that the stream works after a failed capture: a round trip and a fresh capture+replay.
void expect_stream_usable(frost_ctx* ctx, frost_stream* stream, frost_buffer* dst,
                          frost_buffer* src) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a failed capture left a CUDA error behind";
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "after", 0, &g));
    NativeWork w{frost_buffer_ptr(dst), frost_buffer_ptr(src)};
    FROST_ASSERT_OK(frost_graph_capture(g, 1, stream, record_native, &w));
    FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    FROST_EXPECT_OK(frost_graph_destroy(g));
}

struct IllegalCall {
    void* device;      // [kBytes] device
    bool query;        // true: cudaStreamQuery; false: cudaStreamSynchronize
};

// Record callback that does legal work, then a call stream capture forbids. It returns the
// call's failure if CUDA reported one there, else OK (the backend must then notice the
// invalidated capture itself).
frost_status record_illegal(void* user, frost_stream* stream) {
    const auto* c = static_cast<const IllegalCall*>(user);
    auto s = static_cast<cudaStream_t>(frost_stream_native(stream));
    if (cudaMemsetAsync(c->device, 0, kBytes, s) != cudaSuccess)
        return fail(FROST_ERR_BACKEND, "legal memset failed");
    // (A synchronous cudaMemcpy is NOT illegal here: it runs on the legacy stream, which a
    // thread-local capture of a non-blocking stream leaves alone; seen on an H100, 2026-11-22.)
    if (c->query) {
        const cudaError_t e = cudaStreamQuery(s);
        if (e != cudaSuccess && e != cudaErrorNotReady)
            return fail(FROST_ERR_BACKEND, "cudaStreamQuery in capture: %s", cudaGetErrorString(e));
        return FROST_OK;
    }
    (void)cudaStreamSynchronize(s);
    return FROST_OK;
}

TEST_P(CudaSpecificTest, IllegalCallsDuringCaptureFailCleanlyAndLeaveTheStreamUsable) {
    frost_buffer* src = alloc("src", kBytes / 2, FROST_SPACE_DEVICE);
    frost_buffer* dst = alloc("dst", kBytes, FROST_SPACE_DEVICE);
    ASSERT_TRUE(src && dst);
    for (const bool query : {true, false}) {
        SCOPED_TRACE(query ? "cudaStreamQuery" : "cudaStreamSynchronize");
        frost_graph* g = nullptr;
        FROST_ASSERT_OK(frost_graph_create(ctx, "illegal", 0, &g));
        IllegalCall c{frost_buffer_ptr(dst), query};
        const frost_status st = frost_graph_capture(g, 9, stream, record_illegal, &c);
        EXPECT_NE(st, FROST_OK);
        EXPECT_STRNE(frost_last_error(), "");
        EXPECT_EQ(frost_graph_has_variant(g, 9), 0);
        EXPECT_EQ(frost_graph_capture_count(g), 0u);
        FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_replay(g, 9, stream));
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
        ASSERT_EQ(
            cudaStreamIsCapturing(static_cast<cudaStream_t>(frost_stream_native(stream)), &cs),
            cudaSuccess);
        EXPECT_EQ(cs, cudaStreamCaptureStatusNone);
        FROST_EXPECT_OK(frost_graph_destroy(g));
        expect_stream_usable(ctx, stream, dst, src);
    }
}

struct MemoryQuery {
    void* device;  // [kBytes] device
    frost_ctx* ctx;
    frost_status status = FROST_OK;
    std::string error;
};

// Record callback: legal work, then the device-memory query, which must refuse inside a capture
// (recorded in the struct) without breaking it.
frost_status record_memory_query(void* user, frost_stream* stream) {
    auto* q = static_cast<MemoryQuery*>(user);
    if (cudaMemsetAsync(q->device, kMemsetValue, kBytes, static_cast<cudaStream_t>(frost_stream_native(stream))) !=
        cudaSuccess)
        return fail(FROST_ERR_BACKEND, "legal memset failed");
    uint64_t used = 0;
    q->status = frost_ctx_device_memory(q->ctx, &used, nullptr);
    q->error = frost_last_error();
    return FROST_OK;
}

TEST_P(CudaSpecificTest, DeviceMemoryQueryRefusesInsideACaptureAndTheCaptureStillReplays) {
    frost_buffer* dst = alloc("dst", kBytes, FROST_SPACE_DEVICE);
    ASSERT_TRUE(dst);
    write(dst, std::vector<uint8_t>(kBytes, kPoison));
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "query", 0, &g));
    MemoryQuery q{frost_buffer_ptr(dst), ctx, FROST_OK, std::string()};
    FROST_ASSERT_OK(frost_graph_capture(g, 1, stream, record_memory_query, &q));
    EXPECT_EQ(frost_status_name(q.status), std::string(frost_status_name(FROST_ERR_STATE))) << q.error;
    EXPECT_NE(q.error.find("capturing"), std::string::npos) << q.error;
    EXPECT_EQ(read(dst), std::vector<uint8_t>(kBytes, kPoison));  // captured, not run
    FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(read(dst), std::vector<uint8_t>(kBytes, kMemsetValue));
    uint64_t used = 0;
    FROST_EXPECT_OK(frost_ctx_device_memory(ctx, &used, nullptr));  // outside the capture again
    EXPECT_GT(used, 0u);
    FROST_EXPECT_OK(frost_graph_destroy(g));
}

TEST_P(CudaSpecificTest, PrioritiesAreClampedToTheDeviceRange) {
    int least = 0, greatest = 0;
    ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    constexpr int kFarBeyond = 1000;
    struct Case {
        int requested, expected;
    };
    for (const Case c : {Case{-kFarBeyond, greatest}, Case{kFarBeyond, least},
                         Case{0, std::clamp(0, greatest, least)}}) {
        frost_stream* s = nullptr;
        FROST_ASSERT_OK(frost_stream_create(ctx, c.requested, &s));
        int native = 0;
        ASSERT_EQ(cudaStreamGetPriority(static_cast<cudaStream_t>(frost_stream_native(s)), &native),
                  cudaSuccess);
        EXPECT_EQ(native, c.expected) << "requested " << c.requested;
        EXPECT_EQ(frost_stream_priority(s), c.requested);
        FROST_EXPECT_OK(frost_stream_destroy(s));
    }
}

TEST_P(CudaSpecificTest, RealOutOfMemoryMapsToOutOfMemoryAndLeavesNoError) {
    constexpr size_t kImpossible = size_t{1} << 50;  // 1 PiB: more than any device or host has
    for (const frost_space space : {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED}) {
        SCOPED_TRACE(space_name(space));
        frost_buffer* b = nullptr;
        FROST_EXPECT_STATUS(FROST_ERR_OUT_OF_MEMORY,
                            frost_buffer_alloc(ctx, "huge", kImpossible, space, &b));
        EXPECT_EQ(b, nullptr);
        EXPECT_EQ(cudaGetLastError(), cudaSuccess);
        EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
        frost_buffer* small = alloc("small", kBytes, space);
        ASSERT_TRUE(small);
        FROST_EXPECT_OK(frost_buffer_free(small));
    }
}

struct PageableTrip {
    frost_buffer* in;   // [kBytes] pageable host
    frost_buffer* mid;  // [kBytes] device
    frost_buffer* out;  // [kBytes] pageable host
};

frost_status record_pageable_trip(void* user, frost_stream* stream) {
    const auto* t = static_cast<const PageableTrip*>(user);
    FROST_TRY(frost_buffer_copy(t->mid, 0, t->in, 0, kBytes, stream));
    return frost_buffer_copy(t->out, 0, t->mid, 0, kBytes, stream);
}

TEST_P(CudaSpecificTest, PageableDeviceCopiesCanBeCapturedAndReplayed) {
    PageableTrip t{alloc("in", kBytes, FROST_SPACE_HOST), alloc("mid", kBytes, FROST_SPACE_DEVICE),
                   alloc("out", kBytes, FROST_SPACE_HOST)};
    ASSERT_TRUE(t.in && t.mid && t.out);
    std::memset(frost_buffer_ptr(t.out), kPoison, kBytes);
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "pageable", 0, &g));
    FROST_ASSERT_OK(frost_graph_capture(g, 2, stream, record_pageable_trip, &t));
    for (int i = 0; i < kReplays; ++i) {
        const std::vector<uint8_t> input = random_bytes(kBytes);
        std::memcpy(frost_buffer_ptr(t.in), input.data(), kBytes);
        FROST_ASSERT_OK(frost_graph_replay(g, 2, stream));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        ASSERT_EQ(std::memcmp(frost_buffer_ptr(t.out), input.data(), kBytes), 0) << "round " << i;
    }
    FROST_EXPECT_OK(frost_graph_destroy(g));
}

TEST_P(CudaSpecificTest, PageableUploadWaitsForEarlierHostWorkOnTheStream) {
    frost_buffer* in = alloc("in", sizeof(uint32_t), FROST_SPACE_HOST);
    frost_buffer* mid = alloc("mid", sizeof(uint32_t), FROST_SPACE_DEVICE);
    frost_buffer* out = alloc("out", sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    ASSERT_TRUE(in && mid && out);
    *static_cast<uint32_t*>(frost_buffer_ptr(in)) = 0;
    const uint32_t value = static_cast<uint32_t>(rng()) | 1u;
    constexpr uint32_t kSlowMs = 50;  // the host fn is the slow side of the race
    const StoreArgs store{static_cast<uint32_t*>(frost_buffer_ptr(in)), value, kSlowMs};
    FROST_ASSERT_OK(frost_launch_host(stream, store_fn, &store, sizeof store));
    FROST_ASSERT_OK(frost_buffer_copy(mid, 0, in, 0, sizeof(uint32_t), stream));
    FROST_ASSERT_OK(frost_buffer_copy(out, 0, mid, 0, sizeof(uint32_t), stream));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*static_cast<uint32_t*>(frost_buffer_ptr(out)), value);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaSpecificTest, testing::Values(FROST_BACKEND_CUDA),
                         backend_param_name);

}  // namespace
}  // namespace frost::test

#else  // !FROST_WITH_CUDA

TEST(CudaSpecificTest, SkippedWithoutCudaBuild) {
    GTEST_SKIP() << "built without the CUDA backend";
}

#endif
