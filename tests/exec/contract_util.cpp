// Fixture and host fns shared by the exec contract tests (see contract_util.h).
#include "contract_util.h"

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "exec/error.h"

namespace frost::test {

std::vector<frost_backend> available_backends() {
    std::vector<frost_backend> out{FROST_BACKEND_CPU};
    if (frost_backend_available(FROST_BACKEND_CUDA)) out.push_back(FROST_BACKEND_CUDA);
    return out;
}

std::string backend_param_name(const testing::TestParamInfo<frost_backend>& info) {
    return info.param == FROST_BACKEND_CPU ? "cpu" : "cuda";
}

const char* space_name(frost_space s) {
    switch (s) {
        case FROST_SPACE_DEVICE: return "device";
        case FROST_SPACE_HOST_PINNED: return "pinned";
        case FROST_SPACE_HOST: return "host";
    }
    return "unknown";
}

bool same_stats(const frost_ctx_stats& a, const frost_ctx_stats& b) {
    return a.live_buffers == b.live_buffers && a.bytes_device == b.bytes_device &&
           a.bytes_host_pinned == b.bytes_host_pinned && a.bytes_host == b.bytes_host &&
           a.live_streams == b.live_streams && a.live_events == b.live_events &&
           a.live_graphs == b.live_graphs && a.live_plans == b.live_plans;
}

std::string stats_str(const frost_ctx_stats& s) {
    std::ostringstream o;
    o << "{buffers " << s.live_buffers << ", device " << s.bytes_device << " B, pinned "
      << s.bytes_host_pinned << " B, host " << s.bytes_host << " B, streams " << s.live_streams
      << ", events " << s.live_events << ", graphs " << s.live_graphs << ", plans " << s.live_plans << "}";
    return o.str();
}

void ContractTest::SetUp() {
    frost_fault_clear();
    const uint64_t seed = std::random_device{}();
    rng.seed(seed);
    RecordProperty("seed", std::to_string(seed));
    FROST_ASSERT_OK(frost_ctx_create(GetParam(), 0, &ctx));
    FROST_ASSERT_OK(frost_stream_create(ctx, 0, &stream));
    baseline = stats();
}

void ContractTest::TearDown() {
    frost_fault_clear();
    if (ctx) {
        EXPECT_EQ(frost_ctx_sync(ctx), FROST_OK) << frost_last_error();
        EXPECT_EQ(frost_ctx_destroy(ctx), FROST_OK);
    }
}

frost_buffer* ContractTest::alloc(const char* name, size_t bytes, frost_space space) {
    frost_buffer* b = nullptr;
    const frost_status s = frost_buffer_alloc(ctx, name, bytes, space, &b);
    if (s != FROST_OK) {
        ADD_FAILURE() << "alloc '" << name << "': " << frost_status_name(s) << ": " << frost_last_error();
        return nullptr;
    }
    return b;
}

std::vector<uint8_t> ContractTest::read(frost_buffer* b) {
    const size_t n = frost_buffer_bytes(b);
    std::vector<uint8_t> out(n);
    frost_buffer* stage = alloc("test.read_stage", n, FROST_SPACE_HOST);
    if (!stage) return out;
    EXPECT_EQ(frost_buffer_copy(stage, 0, b, 0, n, stream), FROST_OK) << frost_last_error();
    EXPECT_EQ(frost_stream_sync(stream), FROST_OK) << frost_last_error();
    std::memcpy(out.data(), frost_buffer_ptr(stage), n);
    EXPECT_EQ(frost_buffer_free(stage), FROST_OK);
    return out;
}

void ContractTest::write(frost_buffer* b, const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(bytes.size(), frost_buffer_bytes(b));
    frost_buffer* stage = alloc("test.write_stage", bytes.size(), FROST_SPACE_HOST);
    ASSERT_NE(stage, nullptr);
    std::memcpy(frost_buffer_ptr(stage), bytes.data(), bytes.size());
    EXPECT_EQ(frost_buffer_copy(b, 0, stage, 0, bytes.size(), stream), FROST_OK) << frost_last_error();
    EXPECT_EQ(frost_stream_sync(stream), FROST_OK) << frost_last_error();
    EXPECT_EQ(frost_buffer_free(stage), FROST_OK);
}

std::vector<uint8_t> ContractTest::random_bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = static_cast<uint8_t>(rng());
    return v;
}

frost_ctx_stats ContractTest::stats() {
    frost_ctx_stats s{};
    EXPECT_EQ(frost_ctx_get_stats(ctx, &s), FROST_OK);
    return s;
}

frost_status axpb_fn(const void* args) {
    const auto& a = *static_cast<const AxpbArgs*>(args);
    for (size_t i = 0; i < a.n; ++i) a.y[i] = a.a * a.x[i] + a.b;
    return FROST_OK;
}

frost_status count_fn(const void* args) {
    ++*static_cast<const CountArgs*>(args)->counter;
    return FROST_OK;
}

frost_status store_fn(const void* args) {
    const auto& a = *static_cast<const StoreArgs*>(args);
    if (a.sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(a.sleep_ms));
    *a.dst = a.value;
    return FROST_OK;
}

frost_status map_fn(const void* args) {
    const auto& a = *static_cast<const MapArgs*>(args);
    *a.dst = *a.src * a.mul + a.add;
    return FROST_OK;
}

frost_status sum2_fn(const void* args) {
    const auto& a = *static_cast<const Sum2Args*>(args);
    *a.dst = *a.a + *a.b;
    return FROST_OK;
}

frost_status gate_fn(const void* args) {
    const auto& a = *static_cast<const GateArgs*>(args);
    constexpr auto kPoll = std::chrono::milliseconds(1);
    while (a.open->load() == 0) std::this_thread::sleep_for(kPoll);
    return FROST_OK;
}

const char* const kFailMessage = "test host fn failed on purpose";

frost_status failing_fn(const void*) { return frost::fail(FROST_ERR_BACKEND, "%s", kFailMessage); }

}  // namespace frost::test
