// Shared fixture and host "kernels" for the exec contract tests. Every test is parameterised
// over the backends this build can use (cpu always, cuda where a GPU is present); host fns only
// touch HOST / HOST_PINNED memory so they are valid host callbacks on CUDA too, and device
// buffers are checked by copying them back to host.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "frost/exec.h"

#define FROST_EXPECT_STATUS(expected, expr)                                                    \
    do {                                                                                       \
        const frost_status frost_s_ = (expr);                                                  \
        EXPECT_EQ(frost_status_name(frost_s_), std::string(frost_status_name(expected)))       \
            << #expr << ": " << frost_last_error();                                            \
    } while (0)
#define FROST_ASSERT_OK(expr)                                                                  \
    do {                                                                                       \
        const frost_status frost_s_ = (expr);                                                  \
        ASSERT_EQ(frost_s_, FROST_OK) << #expr << ": " << frost_status_name(frost_s_) << ": " \
                                      << frost_last_error();                                   \
    } while (0)
#define FROST_EXPECT_OK(expr) FROST_EXPECT_STATUS(FROST_OK, expr)

namespace frost::test {

std::vector<frost_backend> available_backends();
std::string backend_param_name(const testing::TestParamInfo<frost_backend>& info);
const char* space_name(frost_space s);
bool same_stats(const frost_ctx_stats& a, const frost_ctx_stats& b);
std::string stats_str(const frost_ctx_stats& s);

// A ctx and one stream on the backend under test; checks faults are disarmed on both ends.
class ContractTest : public testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override;
    void TearDown() override;

    // Allocates or fails the test (returns nullptr after ADD_FAILURE).
    frost_buffer* alloc(const char* name, size_t bytes, frost_space space);
    // Synchronous helpers that go through the contract (a host staging buffer and copies).
    std::vector<uint8_t> read(frost_buffer* b);
    void write(frost_buffer* b, const std::vector<uint8_t>& bytes);
    std::vector<uint8_t> random_bytes(size_t n);
    frost_ctx_stats stats();

    frost_ctx* ctx = nullptr;
    frost_stream* stream = nullptr;
    std::mt19937_64 rng;
    frost_ctx_stats baseline{};  // after SetUp
};

// ---- host fns (the cpu backend's kernels; host callbacks on cuda) -------------------------

struct AxpbArgs {
    float* y;        // [n] host memory
    const float* x;  // [n] host memory
    float a, b;
    size_t n;
};
frost_status axpb_fn(const void* args);  // y = a * x + b

struct CountArgs {
    uint64_t* counter;  // host memory
};
frost_status count_fn(const void* args);  // ++*counter

struct StoreArgs {
    uint32_t* dst;  // host memory
    uint32_t value;
    uint32_t sleep_ms;  // delay before the store: makes the producer the slow side of a race
};
frost_status store_fn(const void* args);

struct MapArgs {
    const uint32_t* src;  // host memory
    uint32_t* dst;        // host memory
    uint32_t mul, add;
};
frost_status map_fn(const void* args);  // *dst = *src * mul + add

struct Sum2Args {
    const uint32_t* a;
    const uint32_t* b;
    uint32_t* dst;
};
frost_status sum2_fn(const void* args);  // *dst = *a + *b

struct GateArgs {
    std::atomic<int>* open;  // the fn blocks until *open != 0
};
frost_status gate_fn(const void* args);

extern const char* const kFailMessage;
frost_status failing_fn(const void* args);  // fails with FROST_ERR_BACKEND and kFailMessage

}  // namespace frost::test
