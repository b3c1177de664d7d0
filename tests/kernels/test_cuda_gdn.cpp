// CUDA gated delta rule: the recurrent (decode) and chunked (prefill) kernels against an fp64
// token-by-token recurrence on the same bf16-rounded inputs, with a random initial state, launches
// starting off the 64-grid, and a bitwise determinism check.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGdn, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::StepCursor;
constexpr double kBf16Tol = 1e-2;
constexpr double kStateTol = 1e-4;
constexpr int Hk = 2, Hv = 4, D = 128;
constexpr int C = 2 * Hk * D + Hv * D;
constexpr int64_t kStride = C + 64;

struct Inputs {
    std::vector<float> qkv;   // [T, kStride] bf16-exact
    std::vector<float> beta;  // [T, Hv]
    std::vector<float> g;     // [T, Hv]
};

Inputs make_inputs(std::mt19937& rng, int T) {
    Inputs in;
    in.qkv = uniform(rng, T * kStride, -1, 1, false);
    for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2 * Hk; ++h) {  // l2-normalised q (scaled) and k heads
            float* x = &in.qkv[t * kStride + h * D];
            double ss = 0;
            for (int i = 0; i < D; ++i) ss += double(x[i]) * x[i];
            const double sc = 1.0 / std::sqrt(ss + 1e-6) * (h < Hk ? 1.0 / std::sqrt(double(D)) : 1.0);
            for (int i = 0; i < D; ++i) x[i] = static_cast<float>(x[i] * sc);
        }
        for (int i = 0; i < kStride; ++i) in.qkv[t * kStride + i] = round_bf(in.qkv[t * kStride + i]);
    }
    in.beta = uniform(rng, T * Hv, 0.02f, 0.98f, false);
    in.g = uniform(rng, T * Hv, -3.0f, -0.001f, false);
    return in;
}

// fp64 recurrence over tokens [t0, t0 + n): updates S [Hv, D, D], appends o.
void reference(const Inputs& in, int t0, int n, std::vector<double>& S, std::vector<double>& o) {
    for (int t = t0; t < t0 + n; ++t) {
        for (int h = 0; h < Hv; ++h) {
            const int kh = h / (Hv / Hk);
            const float* q = &in.qkv[t * kStride + kh * D];
            const float* k = &in.qkv[t * kStride + Hk * D + kh * D];
            const float* v = &in.qkv[t * kStride + 2 * Hk * D + h * D];
            double* s = &S[static_cast<size_t>(h) * D * D];
            const double alpha = std::exp(double(in.g[t * Hv + h])), beta = in.beta[t * Hv + h];
            for (int i = 0; i < D * D; ++i) s[i] *= alpha;
            std::vector<double> delta(D);
            for (int j = 0; j < D; ++j) {
                double u = 0;
                for (int i = 0; i < D; ++i) u += s[i * D + j] * k[i];
                delta[j] = beta * (v[j] - u);
            }
            for (int i = 0; i < D; ++i)
                for (int j = 0; j < D; ++j) s[i * D + j] += k[i] * delta[j];
            for (int j = 0; j < D; ++j) {
                double acc = 0;
                for (int i = 0; i < D; ++i) acc += s[i * D + j] * q[i];
                o.push_back(acc);
            }
        }
    }
}

struct Rig {
    Dev<uint16_t> qkv;
    Dev<float> beta, g, state;
    Dev<uint16_t> o;
    Dev<float> work;
    Dev<StepCursor> cursor;
    int max_rows;
    kernels::GdnBf16Params params(int t0) const {
        kernels::GdnBf16Params p{};
        p.q = bf(qkv) + t0 * kStride;
        p.k = p.q + Hk * D;
        p.v = p.q + 2 * Hk * D;
        p.beta = beta.get() + t0 * Hv;
        p.g = g.get() + t0 * Hv;
        p.state = state.get();
        p.o = bf(o);
        p.work = work.get();
        p.qkv_row_stride = kStride;
        p.Hk = Hk;
        p.Hv = Hv;
        p.dk = D;
        p.dv = D;
        p.chunk = kernels::kGdnChunk;
        p.max_rows = max_rows;
        p.cursor = cursor.get();
        return p;
    }
};

size_t work_floats(int max_rows) {
    kernels::GdnBf16Params p{};
    p.Hv = Hv;
    p.max_rows = max_rows;
    return kernels::gdn_chunk_work_floats(p);
}

// Runs pieces (n rows, chunked or recurrent) from position pos0; checks each output and the state.
void run_pieces(const std::vector<std::pair<int, bool>>& pieces, int pos0, const char* name) {
    auto rng = fresh_rng(name);
    int T = 0;
    for (auto& pc : pieces) T += pc.first;
    const int max_rows = 192;
    const Inputs in = make_inputs(rng, T);
    auto s0 = uniform(rng, Hv * D * D, -0.2f, 0.2f, false);
    std::vector<double> S(s0.begin(), s0.end());
    Rig rig{Dev<uint16_t>(to_bf(in.qkv)), Dev<float>(in.beta), Dev<float>(in.g), Dev<float>(s0),
            Dev<uint16_t>(max_rows * Hv * D), Dev<float>(work_floats(max_rows)), Dev<StepCursor>(1), max_rows};
    int t0 = 0;
    for (auto [n, chunked] : pieces) {
        StepCursor c{};
        c.pos = pos0 + t0;
        c.n_tokens = n;
        rig.cursor.upload(std::vector<StepCursor>{c});
        rig.o.poison();
        const auto p = rig.params(t0);
        CUDA_OK(chunked ? kernels::gdn_chunk_launch(p, nullptr) : kernels::gdn_recurrent_launch(p, nullptr));
        std::vector<double> o_ref;
        reference(in, t0, n, S, o_ref);
        auto o = from_bf(rig.o.download());
        std::vector<float> got(o.begin(), o.begin() + static_cast<int64_t>(n) * Hv * D);
        EXPECT_LE(rel_l2(o_ref, got), kBf16Tol) << "piece at " << t0 << " n " << n << " chunked " << chunked;
        if (n < max_rows) {
            EXPECT_TRUE(std::isnan(o[n * Hv * D])) << "wrote past the valid rows";
        }
        EXPECT_LE(rel_l2(S, rig.state.download()), kStateTol) << "state after piece at " << t0;
        t0 += n;
    }
}

TEST(CudaGdn, RecurrentMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    run_pieces({{1, false}, {1, false}, {3, false}}, 5, "GdnRecurrent");
}

TEST(CudaGdn, ChunkedMatchesRecurrenceOffGrid) {
    FROST_SKIP_WITHOUT_CUDA();
    // 150 rows from position 21: chunks of 43, 64, 43; then decode steps; then a chunk that
    // starts off the grid again and crosses it.
    run_pieces({{150, true}, {1, false}, {2, false}, {100, true}, {64, true}}, 21, "GdnChunked");
}

// The engine's CPU reference (cpu/gdn.cpp) and this kernel agree on the chunk grid and the math.
TEST(CudaGdn, ChunkedMatchesCpuReference) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("GdnVsCpu");
    const int T = 200, pos = 21, max_rows = 256;
    const Inputs in = make_inputs(rng, T);
    auto s0 = uniform(rng, Hv * D * D, -0.2f, 0.2f, false);
    Rig rig{Dev<uint16_t>(to_bf(in.qkv)), Dev<float>(in.beta), Dev<float>(in.g), Dev<float>(s0),
            Dev<uint16_t>(max_rows * Hv * D), Dev<float>(work_floats(max_rows)), Dev<StepCursor>(1), max_rows};
    StepCursor c{};
    c.pos = pos;
    c.n_tokens = T;
    rig.cursor.upload(std::vector<StepCursor>{c});
    CUDA_OK(kernels::gdn_chunk_launch(rig.params(0), nullptr));
    std::vector<float> state = s0, o(static_cast<size_t>(T) * Hv * D, NAN);
    kernels::GdnParams cp{};
    cp.q = in.qkv.data();
    cp.k = in.qkv.data() + Hk * D;
    cp.v = in.qkv.data() + 2 * Hk * D;
    cp.beta = in.beta.data();
    cp.g = in.g.data();
    cp.state = state.data();
    cp.o = o.data();
    cp.qk_row_stride = kStride;
    cp.Hk = Hk;
    cp.Hv = Hv;
    cp.dk = D;
    cp.dv = D;
    cp.chunk = kernels::kGdnChunk;
    cp.max_rows = T;
    cp.cursor = &c;
    ASSERT_EQ(kernels::cpu::gdn_chunked(cp), FROST_OK);
    const auto got = from_bf(rig.o.download());
    EXPECT_LE(rel_l2(std::vector<double>(o.begin(), o.end()), std::vector<float>(got.begin(), got.begin() + o.size())),
              kBf16Tol);
    EXPECT_LE(rel_l2(std::vector<double>(state.begin(), state.end()), rig.state.download()), kStateTol);
}

TEST(CudaGdn, ChunkedIsDeterministic) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("GdnDeterminism");
    const int T = 256, max_rows = 256;
    const Inputs in = make_inputs(rng, T);
    auto s0 = uniform(rng, Hv * D * D, -0.2f, 0.2f, false);
    std::vector<std::vector<uint16_t>> outs;
    std::vector<std::vector<float>> states;
    for (int run = 0; run < 2; ++run) {
        Rig rig{Dev<uint16_t>(to_bf(in.qkv)), Dev<float>(in.beta), Dev<float>(in.g), Dev<float>(s0),
                Dev<uint16_t>(max_rows * Hv * D), Dev<float>(work_floats(max_rows)), Dev<StepCursor>(1), max_rows};
        StepCursor c{};
        c.pos = 64;
        c.n_tokens = T;
        rig.cursor.upload(std::vector<StepCursor>{c});
        CUDA_OK(kernels::gdn_chunk_launch(rig.params(0), nullptr));
        outs.push_back(rig.o.download());
        states.push_back(rig.state.download());
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(0, std::memcmp(states[0].data(), states[1].data(), states[0].size() * sizeof(float)));
}

}  // namespace
}  // namespace frost::test
#endif
