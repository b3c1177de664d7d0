// Contract tests for graphs: capture executes nothing, replay equals direct execution, an
// uncaptured key is NOT_FOUND, LRU order and bound, evict / evict_lru, the capture counter, a
// failed record keeping the old variant, and the state errors of capture mode.
#include <cstring>

#include "contract_util.h"
#include "exec/error.h"

namespace frost::test {
namespace {

constexpr uint8_t kPoison = 0xCD;

using ExecGraph = ContractTest;

// A record callback that increments a host counter (one step per capture/replay).
struct Counter {
    uint64_t* cell;
};
frost_status record_count(void* user, frost_stream* s) {
    const CountArgs a{static_cast<Counter*>(user)->cell};
    return frost_launch_host(s, count_fn, &a, sizeof a);
}

frost_status record_fail(void*, frost_stream*) { return FROST_ERR_BACKEND; }

class ExecGraphCounter : public ContractTest {
protected:
    void SetUp() override {
        ContractTest::SetUp();
        cb = alloc("counter", sizeof(uint64_t), FROST_SPACE_HOST_PINNED);
        ASSERT_NE(cb, nullptr);
        counter.cell = static_cast<uint64_t*>(frost_buffer_ptr(cb));
        *counter.cell = 0;
    }
    frost_status capture(frost_graph* g, frost_shape_key key) {
        return frost_graph_capture(g, key, stream, record_count, &counter);
    }
    uint64_t count() {
        EXPECT_EQ(frost_stream_sync(stream), FROST_OK) << frost_last_error();
        return *counter.cell;
    }
    frost_buffer* cb = nullptr;
    Counter counter;
};

// The pipeline used for equivalence: x (host) -> device -> device -> pinned, then a host fn
// y = a * x + b over pinned memory, then a fill of y's tail.
struct Pipeline {
    frost_buffer *x, *d0, *d1, *xp, *y;
    size_t n;
    float a, b;
    size_t tail;         // last `tail` floats of y are overwritten by a fill
    uint8_t fill_value;  // byte value of that fill
};
frost_status record_pipeline(void* user, frost_stream* s) {
    auto& p = *static_cast<Pipeline*>(user);
    const size_t bytes = p.n * sizeof(float);
    FROST_TRY(frost_buffer_copy(p.d0, 0, p.x, 0, bytes, s));
    FROST_TRY(frost_buffer_copy(p.d1, 0, p.d0, 0, bytes, s));
    FROST_TRY(frost_buffer_copy(p.xp, 0, p.d1, 0, bytes, s));
    const AxpbArgs args{static_cast<float*>(frost_buffer_ptr(p.y)), static_cast<const float*>(frost_buffer_ptr(p.xp)),
                        p.a, p.b, p.n};
    FROST_TRY(frost_launch_host(s, axpb_fn, &args, sizeof args));
    return frost_buffer_fill(p.y, (p.n - p.tail) * sizeof(float), p.fill_value, p.tail * sizeof(float), s);
}

TEST_P(ExecGraph, ReplayEqualsDirectExecutionAndCaptureExecutesNothing) {
    constexpr size_t kN = 777;
    Pipeline p{};
    p.n = kN;
    p.x = alloc("x", kN * sizeof(float), FROST_SPACE_HOST);
    p.d0 = alloc("d0", kN * sizeof(float), FROST_SPACE_DEVICE);
    p.d1 = alloc("d1", kN * sizeof(float), FROST_SPACE_DEVICE);
    p.xp = alloc("xp", kN * sizeof(float), FROST_SPACE_HOST_PINNED);
    p.y = alloc("y", kN * sizeof(float), FROST_SPACE_HOST_PINNED);
    std::uniform_real_distribution<float> dist(-4.f, 4.f);
    p.a = dist(rng);
    p.b = dist(rng);
    p.tail = 1 + rng() % 16;
    p.fill_value = static_cast<uint8_t>(rng());
    std::vector<float> xs(kN);
    for (auto& v : xs) v = dist(rng);
    std::memcpy(frost_buffer_ptr(p.x), xs.data(), kN * sizeof(float));
    const std::vector<uint8_t> poison(kN * sizeof(float), kPoison);
    auto poison_all = [&] {
        write(p.d0, poison);
        write(p.d1, poison);
        write(p.xp, poison);
        write(p.y, poison);
    };

    // Direct: the record callback on a stream that is not capturing simply runs.
    poison_all();
    FROST_ASSERT_OK(record_pipeline(&p, stream));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    const std::vector<uint8_t> direct = read(p.y);
    // Independent naive reference.
    std::vector<float> ref(kN);
    for (size_t i = 0; i < kN; ++i) ref[i] = p.a * xs[i] + p.b;
    std::memset(ref.data() + (kN - p.tail), p.fill_value, p.tail * sizeof(float));
    EXPECT_EQ(std::memcmp(direct.data(), ref.data(), direct.size()), 0);

    // Capture: nothing runs.
    poison_all();
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "pipeline", 0, &g));
    FROST_ASSERT_OK(frost_graph_capture(g, 42, stream, record_pipeline, &p));
    FROST_ASSERT_OK(frost_ctx_sync(ctx));
    EXPECT_EQ(read(p.y), poison);
    EXPECT_EQ(read(p.d0), poison);
    EXPECT_EQ(read(p.xp), poison);
    EXPECT_EQ(frost_graph_has_variant(g, 42), 1);
    EXPECT_EQ(frost_graph_capture_count(g), 1u);

    // Replay: bit-identical to direct execution, several times.
    for (int r = 0; r < 3; ++r) {
        write(p.y, poison);
        FROST_ASSERT_OK(frost_graph_replay(g, 42, stream));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        EXPECT_EQ(read(p.y), direct) << "replay " << r;
    }
    // New input, same variant: the pointers are baked, the data is not.
    for (auto& v : xs) v = dist(rng);
    std::memcpy(frost_buffer_ptr(p.x), xs.data(), kN * sizeof(float));
    FROST_ASSERT_OK(frost_graph_replay(g, 42, stream));
    const std::vector<uint8_t> got = read(p.y);
    std::vector<float> ref2(kN);
    for (size_t i = 0; i < kN; ++i) ref2[i] = p.a * xs[i] + p.b;
    std::memset(ref2.data() + (kN - p.tail), p.fill_value, p.tail * sizeof(float));
    EXPECT_EQ(std::memcmp(got.data(), ref2.data(), got.size()), 0);
    EXPECT_EQ(frost_graph_capture_count(g), 1u);
    FROST_EXPECT_OK(frost_graph_destroy(g));
}

TEST_P(ExecGraph, GraphNameAndBadNames) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "decode", 4, &g));
    EXPECT_STREQ(frost_graph_name(g), "decode");
    frost_graph* bad = nullptr;
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_graph_create(ctx, "", 0, &bad));
    EXPECT_EQ(bad, nullptr);
    FROST_EXPECT_OK(frost_graph_destroy(g));
    FROST_EXPECT_OK(frost_graph_destroy(nullptr));
}

using ExecGraphC = ExecGraphCounter;

TEST_P(ExecGraphC, ReplayOfUncapturedKeyIsNotFoundAndRunsNothing) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "prefill", 0, &g));
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_replay(g, 7, stream));
    const std::string msg = frost_last_error();
    EXPECT_NE(msg.find("prefill"), std::string::npos) << msg;
    EXPECT_NE(msg.find('7'), std::string::npos) << msg;
    FROST_ASSERT_OK(capture(g, 8));
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_replay(g, 7, stream));
    FROST_ASSERT_OK(frost_graph_evict(g, 8));
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_replay(g, 8, stream));
    EXPECT_EQ(count(), 0u);
}

TEST_P(ExecGraphC, ReplaysRunInOrderOnAStream) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    FROST_ASSERT_OK(capture(g, 1));
    const int kReplays = 10 + static_cast<int>(rng() % 20);
    for (int i = 0; i < kReplays; ++i) FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
    EXPECT_EQ(count(), static_cast<uint64_t>(kReplays));
    EXPECT_EQ(frost_graph_capture_count(g), 1u);
}

// Two variants with different arithmetic: the result proves they ran in enqueue order.
struct MapUser {
    uint32_t* cell;
    uint32_t mul, add;
};
frost_status record_map(void* user, frost_stream* s) {
    const auto& u = *static_cast<MapUser*>(user);
    const MapArgs a{u.cell, u.cell, u.mul, u.add};
    return frost_launch_host(s, map_fn, &a, sizeof a);
}

TEST_P(ExecGraph, VariantsOfOneGraphReplayInEnqueueOrder) {
    frost_buffer* b = alloc("cell", sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    ASSERT_NE(b, nullptr);
    auto* cell = static_cast<uint32_t*>(frost_buffer_ptr(b));
    MapUser dbl{cell, 2u, 0u}, inc{cell, 1u, 1u};
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "arith", 0, &g));
    FROST_ASSERT_OK(frost_graph_capture(g, 100, stream, record_map, &dbl));
    FROST_ASSERT_OK(frost_graph_capture(g, 200, stream, record_map, &inc));
    *cell = static_cast<uint32_t>(rng() % 1000);
    uint32_t want = *cell;
    for (int i = 0; i < 24; ++i) {
        const bool d = rng() & 1;
        FROST_ASSERT_OK(frost_graph_replay(g, d ? 100 : 200, stream));
        want = d ? want * 2u : want + 1u;
    }
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*cell, want);
}

TEST_P(ExecGraphC, LruBoundEvictsLeastRecentlyUsedCaptureAndReplayRefresh) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "bounded", 3, &g));
    FROST_ASSERT_OK(capture(g, 1));
    FROST_ASSERT_OK(capture(g, 2));
    FROST_ASSERT_OK(capture(g, 3));
    EXPECT_EQ(frost_graph_variant_count(g), 3u);
    FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));  // order of use now: 2, 3, 1
    FROST_ASSERT_OK(capture(g, 4));                     // evicts 2 -> 3, 1, 4
    EXPECT_EQ(frost_graph_variant_count(g), 3u);
    EXPECT_EQ(frost_graph_has_variant(g, 2), 0);
    EXPECT_EQ(frost_graph_has_variant(g, 1), 1);
    EXPECT_EQ(frost_graph_has_variant(g, 3), 1);
    EXPECT_EQ(frost_graph_has_variant(g, 4), 1);
    FROST_ASSERT_OK(capture(g, 3));  // recapture of a held key replaces it and refreshes: 1, 4, 3
    EXPECT_EQ(frost_graph_variant_count(g), 3u);
    FROST_ASSERT_OK(capture(g, 5));  // evicts 1 -> 4, 3, 5
    EXPECT_EQ(frost_graph_has_variant(g, 1), 0);
    frost_shape_key k = 0;
    FROST_ASSERT_OK(frost_graph_evict_lru(g, &k));
    EXPECT_EQ(k, 4u);
    FROST_ASSERT_OK(frost_graph_evict_lru(g, &k));
    EXPECT_EQ(k, 3u);
    EXPECT_EQ(frost_graph_capture_count(g), 6u);
    EXPECT_EQ(count(), 1u);  // only the one replay ran anything
}

TEST_P(ExecGraphC, EvictAndEvictLru) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "unbounded", 0, &g));
    constexpr int kKeys = 40;  // unbounded keeps them all
    for (int k = 0; k < kKeys; ++k) FROST_ASSERT_OK(capture(g, 1000 + k));
    EXPECT_EQ(frost_graph_variant_count(g), static_cast<size_t>(kKeys));
    FROST_ASSERT_OK(frost_graph_replay(g, 1000, stream));
    frost_shape_key k = 0;
    FROST_ASSERT_OK(frost_graph_evict_lru(g, &k));
    EXPECT_EQ(k, 1001u);
    FROST_ASSERT_OK(frost_graph_evict(g, 1002));
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_evict(g, 1002));
    EXPECT_NE(std::string(frost_last_error()).find("1002"), std::string::npos) << frost_last_error();
    FROST_ASSERT_OK(frost_graph_evict_lru(g, nullptr));  // 1003
    EXPECT_EQ(frost_graph_has_variant(g, 1003), 0);
    while (frost_graph_variant_count(g) > 1) FROST_ASSERT_OK(frost_graph_evict_lru(g, &k));
    EXPECT_EQ(frost_graph_has_variant(g, 1000), 1);  // most recently used survives longest
    FROST_ASSERT_OK(frost_graph_evict_lru(g, &k));
    EXPECT_EQ(k, 1000u);
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_evict_lru(g, &k));
    EXPECT_EQ(frost_graph_capture_count(g), static_cast<uint64_t>(kKeys));  // never decreases
}

TEST_P(ExecGraphC, FailedRecordStoresNothingAndKeepsTheOldVariant) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    FROST_ASSERT_OK(capture(g, 5));
    FROST_EXPECT_STATUS(FROST_ERR_BACKEND, frost_graph_capture(g, 5, stream, record_fail, nullptr));
    EXPECT_NE(std::string(frost_last_error()).find("record"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_BACKEND, frost_graph_capture(g, 6, stream, record_fail, nullptr));
    EXPECT_EQ(frost_graph_has_variant(g, 6), 0);
    EXPECT_EQ(frost_graph_capture_count(g), 1u);
    FROST_ASSERT_OK(frost_graph_replay(g, 5, stream));  // the old variant still counts
    EXPECT_EQ(count(), 1u);
    // The stream left capture mode: direct work runs again.
    const CountArgs a{counter.cell};
    FROST_ASSERT_OK(frost_launch_host(stream, count_fn, &a, sizeof a));
    EXPECT_EQ(count(), 2u);
}

// Inside a record callback: nested capture, sync and event record are state errors.
struct Nested {
    frost_graph* g;
    frost_event* ev;
    frost_status nested, sync, record, ctx_sync;
};
frost_status record_nested(void* user, frost_stream* s) {
    auto& n = *static_cast<Nested*>(user);
    n.nested = frost_graph_capture(n.g, 99, s, record_fail, nullptr);
    n.sync = frost_stream_sync(s);
    n.record = frost_event_record(n.ev, s);
    n.ctx_sync = frost_ctx_sync(frost_stream_ctx(s));
    return FROST_OK;
}

TEST_P(ExecGraph, CaptureModeRejectsNestedCaptureSyncAndEventRecord) {
    Nested n{};
    FROST_ASSERT_OK(frost_graph_create(ctx, "outer", 0, &n.g));
    FROST_ASSERT_OK(frost_event_create(ctx, &n.ev));
    FROST_ASSERT_OK(frost_graph_capture(n.g, 1, stream, record_nested, &n));
    EXPECT_EQ(n.nested, FROST_ERR_STATE);
    EXPECT_EQ(n.sync, FROST_ERR_STATE);
    EXPECT_EQ(n.record, FROST_ERR_STATE);
    EXPECT_EQ(n.ctx_sync, FROST_ERR_STATE);
    EXPECT_EQ(frost_graph_has_variant(n.g, 99), 0);
    FROST_EXPECT_OK(frost_graph_replay(n.g, 1, stream));
}

// A wait captured in a variant orders each replay after the event's point at replay time.
struct WaitUser {
    frost_event* ev;
    uint32_t *src, *dst;
};
frost_status record_wait_then_copy(void* user, frost_stream* s) {
    auto& u = *static_cast<WaitUser*>(user);
    FROST_TRY(frost_stream_wait_event(s, u.ev));
    const MapArgs a{u.src, u.dst, 1u, 0u};
    return frost_launch_host(s, map_fn, &a, sizeof a);
}

TEST_P(ExecGraph, WaitEventIsLegalDuringCapture) {
    frost_stream* producer = nullptr;
    FROST_ASSERT_OK(frost_stream_create(ctx, 0, &producer));
    frost_event* ev = nullptr;
    FROST_ASSERT_OK(frost_event_create(ctx, &ev));
    frost_buffer* b = alloc("cells", 2 * sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    ASSERT_NE(b, nullptr);
    auto* cells = static_cast<uint32_t*>(frost_buffer_ptr(b));
    cells[0] = cells[1] = 0;
    WaitUser u{ev, cells, cells + 1};
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "consumer", 0, &g));
    FROST_ASSERT_OK(frost_event_record(ev, producer));
    FROST_ASSERT_OK(frost_graph_capture(g, 1, stream, record_wait_then_copy, &u));
    std::atomic<int> open{0};
    const GateArgs gate{&open};
    const auto value = static_cast<uint32_t>(rng() | 1u);
    const StoreArgs store{cells, value, 0};
    FROST_ASSERT_OK(frost_launch_host(producer, gate_fn, &gate, sizeof gate));
    FROST_ASSERT_OK(frost_launch_host(producer, store_fn, &store, sizeof store));
    FROST_ASSERT_OK(frost_event_record(ev, producer));
    FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
    open = 1;
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(cells[1], value);
    FROST_ASSERT_OK(frost_stream_sync(producer));
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecGraph, testing::ValuesIn(available_backends()), backend_param_name);
INSTANTIATE_TEST_SUITE_P(Backends, ExecGraphC, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
