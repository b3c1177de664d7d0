// Robot policy kernels: the CPU reference against naive float64 loops, the noise generator's
// determinism and moments, and every backend (CUDA on the GPU machine) against the CPU kernels
// through the same enqueue path the policy graph uses.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/policy_kernels.h"
#include "robot/policy_ops.h"
#include "robot_util.h"

using namespace frost::kernels;
using namespace frost::robot;
using namespace frost::robot::test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double act_ref(double x, PolicyAct a) {
    if (a == PolicyAct::silu) return x / (1.0 + std::exp(-x));
    if (a == PolicyAct::gelu) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    return x;
}

}  // namespace

TEST(PolicyKernelsCpu, LinearMatchesFloat64) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const int rows = 3, in = 37, out = 19;
    for (PolicyAct a : {PolicyAct::none, PolicyAct::silu, PolicyAct::gelu}) {
        auto x = random_floats(size_t(rows) * in, seed);
        auto w = random_floats(size_t(out) * in, seed + 1);
        auto b = random_floats(out, seed + 2);
        std::vector<float> y(size_t(rows) * out, kNaN);
        policy_linear_cpu(PolicyLinearParams{x.data(), w.data(), b.data(), y.data(), rows, in, out, a});
        for (int r = 0; r < rows; ++r)
            for (int o = 0; o < out; ++o) {
                double acc = b[o];
                for (int i = 0; i < in; ++i) acc += double(x[r * in + i]) * w[o * in + i];
                EXPECT_NEAR(y[r * out + o], act_ref(acc, a), 1e-5) << "act " << int(a);
            }
    }
}

TEST(PolicyKernelsCpu, RmsNormTimeEmbedAxpyMatchFloat64) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const int dim = 48;
    auto x = random_floats(dim, seed);
    auto g = random_floats(dim, seed + 1);
    std::vector<float> y(dim, kNaN);
    policy_rmsnorm_cpu(PolicyRmsNormParams{x.data(), g.data(), y.data(), 1, dim, 1e-5f});
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(y[i], x[i] * inv * g[i], 1e-5);

    std::vector<float> emb(dim, kNaN);
    const float t = 0.6f, scale = 100.0f, period = 10000.0f;
    policy_time_embed_cpu(PolicyTimeEmbedParams{emb.data(), dim, t, scale, period});
    for (int i = 0; i < dim / 2; ++i) {
        const double arg = double(t) * scale * std::exp(-std::log(double(period)) * i / (dim / 2));
        EXPECT_NEAR(emb[i], std::sin(arg), 2e-5);
        EXPECT_NEAR(emb[dim / 2 + i], std::cos(arg), 2e-5);
    }

    auto v = random_floats(dim, seed + 2);
    std::vector<float> z = x;
    policy_axpy_cpu(PolicyAxpyParams{z.data(), v.data(), dim, 0.25f});
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(z[i], x[i] + 0.25 * v[i], 1e-6);
}

TEST(PolicyKernelsCpu, NoiseIsCounterBasedAndStandardNormal) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const int n = 40000;
    uint64_t rng[2] = {seed, 7};
    std::vector<float> a(n, kNaN), b(n, kNaN), c(n, kNaN);
    policy_noise_cpu(PolicyNoiseParams{a.data(), rng, n, 1.0f});
    policy_noise_cpu(PolicyNoiseParams{b.data(), rng, n, 1.0f});
    policy_counter_cpu(PolicyCounterParams{rng});
    EXPECT_EQ(rng[0], seed);
    EXPECT_EQ(rng[1], 8u);
    policy_noise_cpu(PolicyNoiseParams{c.data(), rng, n, 1.0f});
    EXPECT_EQ(a, b);  // same (seed, counter) -> same bits
    int same = 0;
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i) {
        same += a[i] == c[i];
        // The independent float64 generator gives exactly the same value.
        ASSERT_EQ(a[i], float(ref_noise(seed, 7, uint32_t(i)))) << i;
        mean += a[i];
    }
    mean /= n;
    for (float v : a) var += (v - mean) * (v - mean);
    var /= n;
    EXPECT_LT(same, 5);  // the advanced counter draws fresh noise
    EXPECT_NEAR(mean, 0.0, 0.03);
    EXPECT_NEAR(var, 1.0, 0.05);
}

// Every backend's kernels, launched through the policy's own enqueue path, against the CPU ones.
class PolicyKernelsBackend : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        ASSERT_EQ(frost_ctx_create(GetParam(), 0, &ctx_), FROST_OK) << frost_last_error();
        ASSERT_EQ(frost_stream_create(ctx_, 0, &s_), FROST_OK) << frost_last_error();
    }
    void TearDown() override { frost_ctx_destroy(ctx_); }
    frost_buffer* dev(const std::vector<float>& v) {
        frost_buffer* b = nullptr;
        EXPECT_EQ(frost_buffer_alloc(ctx_, "t", v.size() * 4, FROST_SPACE_DEVICE, &b), FROST_OK);
        EXPECT_EQ(upload(b, 0, v.data(), v.size() * 4, s_), FROST_OK) << frost_last_error();
        return b;
    }
    std::vector<float> host(frost_buffer* b) {
        std::vector<float> v(frost_buffer_bytes(b) / 4);
        EXPECT_EQ(frost_stream_sync(s_), FROST_OK) << frost_last_error();
        EXPECT_EQ(download(v.data(), b, 0, v.size() * 4, s_), FROST_OK) << frost_last_error();
        return v;
    }
    frost_ctx* ctx_ = nullptr;
    frost_stream* s_ = nullptr;
};

TEST_P(PolicyKernelsBackend, MatchesCpuReference) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    const int rows = 2, in = 70, out = 33;
    auto x = random_floats(size_t(rows) * in, seed);
    auto w = random_floats(size_t(out) * in, seed + 1);
    auto b = random_floats(out, seed + 2);
    const std::vector<float> poison(size_t(rows) * out, kNaN);
    frost_buffer *dx = dev(x), *dw = dev(w), *db = dev(b), *dy = dev(poison);
    for (PolicyAct a : {PolicyAct::none, PolicyAct::silu, PolicyAct::gelu}) {
        std::vector<float> ref(poison);
        policy_linear_cpu(PolicyLinearParams{x.data(), w.data(), b.data(), ref.data(), rows, in, out, a});
        ASSERT_EQ(enqueue_linear(s_, PolicyLinearParams{fptr(dx), fptr(dw), fptr(db), fptr(dy), rows,
                                                        in, out, a}), FROST_OK) << frost_last_error();
        auto y = host(dy);
        for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-5) << i;
    }
    // RMSNorm in place, then activation, time embedding, axpy.
    std::vector<float> ref(x);
    policy_rmsnorm_cpu(PolicyRmsNormParams{ref.data(), w.data(), ref.data(), rows, in, 1e-5f});
    policy_act_cpu(PolicyActParams{ref.data(), rows * in, PolicyAct::gelu});
    ASSERT_EQ(enqueue_rmsnorm(s_, PolicyRmsNormParams{fptr(dx), fptr(dw), fptr(dx), rows, in, 1e-5f}), FROST_OK);
    ASSERT_EQ(enqueue_act(s_, PolicyActParams{fptr(dx), rows * in, PolicyAct::gelu}), FROST_OK);
    auto got = host(dx);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5) << i;

    const int dim = 32;
    std::vector<float> eref(dim, kNaN);
    policy_time_embed_cpu(PolicyTimeEmbedParams{eref.data(), dim, 0.8f, 100.0f, 10000.0f});
    frost_buffer* de = dev(std::vector<float>(dim, kNaN));
    ASSERT_EQ(enqueue_time_embed(s_, PolicyTimeEmbedParams{fptr(de), dim, 0.8f, 100.0f, 10000.0f}), FROST_OK);
    auto e = host(de);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(e[i], eref[i], 2e-5) << i;

    // Noise: bit-identical across backends, and the counter advances inside the stream.
    const int n = 257;
    uint64_t rng_host[2] = {seed, 3};
    frost_buffer* drng = nullptr;
    ASSERT_EQ(frost_buffer_alloc(ctx_, "rng", sizeof rng_host, FROST_SPACE_DEVICE, &drng), FROST_OK);
    ASSERT_EQ(upload(drng, 0, rng_host, sizeof rng_host, s_), FROST_OK);
    frost_buffer* dn = dev(std::vector<float>(n, kNaN));
    ASSERT_EQ(enqueue_counter(s_, PolicyCounterParams{static_cast<uint64_t*>(frost_buffer_ptr(drng))}), FROST_OK);
    ASSERT_EQ(enqueue_noise(s_, PolicyNoiseParams{fptr(dn), static_cast<const uint64_t*>(frost_buffer_ptr(drng)),
                                                  n, 0.5f}), FROST_OK);
    ASSERT_EQ(enqueue_axpy(s_, PolicyAxpyParams{fptr(dn), fptr(de), dim, 2.0f}), FROST_OK);
    auto noise = host(dn);
    rng_host[1] = 4;
    std::vector<float> nref(n, kNaN);
    policy_noise_cpu(PolicyNoiseParams{nref.data(), rng_host, n, 0.5f});
    for (int i = 0; i < dim; ++i) nref[i] += 2.0f * eref[i];
    for (int i = dim; i < n; ++i) ASSERT_EQ(noise[i], nref[i]) << i;  // bitwise
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(noise[i], nref[i], 1e-5) << i;
}

TEST_P(PolicyKernelsBackend, BadParamsAreRejected) {
    frost_buffer* b = dev(std::vector<float>(8, 0.0f));
    EXPECT_EQ(enqueue_time_embed(s_, PolicyTimeEmbedParams{fptr(b), 7, 0.0f, 1.0f, 10.0f}),
              FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("even"), std::string::npos);
    EXPECT_EQ(enqueue_linear(s_, PolicyLinearParams{nullptr, fptr(b), nullptr, fptr(b), 1, 2, 2,
                                                    PolicyAct::none}), FROST_ERR_INVALID_ARG);
}

INSTANTIATE_TEST_SUITE_P(Backends, PolicyKernelsBackend, ::testing::ValuesIn(available_backends()),
                         backend_name);
