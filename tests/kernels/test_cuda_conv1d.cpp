// CUDA causal conv1d (+ SiLU, + fused q/k l2norm) against an fp64 reference over a sequence fed
// as a multi-tile prefill, a short prefill and single decode steps, checking the carried state.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaConv1d, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

constexpr double kBf16Tol = 1e-2;

// Reference over the whole sequence (zeros before the start), l2norm per 128-channel head.
std::vector<double> conv_ref(const std::vector<float>& x, const std::vector<float>& w, int T, int C, int K,
                             int l2_heads, int q_heads, double q_scale) {
    std::vector<double> y(static_cast<size_t>(T) * C);
    for (int t = 0; t < T; ++t) {
        for (int c = 0; c < C; ++c) {
            double acc = 0;
            for (int j = 0; j < K; ++j) {
                const int s = t - K + 1 + j;
                if (s >= 0) acc += double(w[c * K + j]) * x[s * C + c];
            }
            y[t * C + c] = acc / (1 + std::exp(-acc));
        }
        for (int h = 0; h < l2_heads; ++h) {
            double ss = 0;
            for (int i = 0; i < 128; ++i) ss += y[t * C + h * 128 + i] * y[t * C + h * 128 + i];
            const double sc = 1.0 / std::sqrt(ss + 1e-6) * (h < q_heads ? q_scale : 1.0);
            for (int i = 0; i < 128; ++i) y[t * C + h * 128 + i] *= sc;
        }
    }
    return y;
}

TEST(CudaConv1d, ChunksAndDecodeStepsMatchWholeSequence) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Conv1d");
    const int C = 1024, K = 4, l2_heads = 4, q_heads = 2;  // 2 q heads, 2 k heads, 4 v heads
    const double q_scale = 1.0 / std::sqrt(128.0);
    const int pieces[] = {37, 2, 1, 1, 70};  // multi-tile, shorter than K-1, decode steps, again
    int T = 0;
    for (int n : pieces) T += n;
    const int max_rows = 80;
    const int64_t x_stride = C + 256;  // conv input is a view into a wider projection output
    auto x = uniform(rng, T * x_stride, -3, 3);
    auto w = uniform(rng, C * K, -0.6f, 0.6f, false);
    std::vector<float> xc(static_cast<size_t>(T) * C);
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) xc[t * C + c] = x[t * x_stride + c];
    for (int fused = 0; fused < 2; ++fused) {
        const auto ref = conv_ref(xc, w, T, C, K, fused ? l2_heads : 0, q_heads, q_scale);
        Dev<uint16_t> dx(to_bf(x)), dstate(std::vector<uint16_t>(C * (K - 1), 0)), dy(max_rows * C);
        Dev<float> dw(w);
        Dev<int32_t> dn(1);
        std::vector<double> r;
        std::vector<float> got;
        int t0 = 0;
        for (int n : pieces) {
            dn.upload(std::vector<int32_t>{n});
            dy.poison();
            kernels::Conv1dBf16Params p{bf(dx) + t0 * x_stride, dw.get(), bf(dstate), bf(dy), x_stride, C, K,
                                        fused ? 128 : 0, fused ? l2_heads : 0, fused ? q_heads : 0, 1e-6f,
                                        static_cast<float>(q_scale), n == 1 ? 1 : max_rows, dn.get()};
            CUDA_OK(kernels::conv1d_launch(p, nullptr));
            auto y = from_bf(dy.download());
            for (int t = 0; t < n; ++t)
                for (int c = 0; c < C; ++c) {
                    r.push_back(ref[(t0 + t) * C + c]);
                    got.push_back(y[t * C + c]);
                }
            if (n < max_rows && n > 1) {
                EXPECT_TRUE(std::isnan(y[n * C]));
            }
            t0 += n;
        }
        EXPECT_LE(rel_l2(r, got), kBf16Tol) << "fused " << fused;
        // The state holds the last K-1 raw inputs, oldest first.
        auto st = from_bf(dstate.download());
        for (int c = 0; c < C; ++c)
            for (int j = 0; j < K - 1; ++j) ASSERT_EQ(st[c * (K - 1) + j], xc[(T - K + 1 + j) * C + c]) << c << " " << j;
    }
}

// A multi-tile prefill launch and single-row launches (the decode path, which also writes the
// state) compute each row with the same arithmetic in the same order: a row's output bits do not
// depend on how the prompt was cut, which capsule restore + append and sliced prefill rely on.
// Rows 0..T-1 once as one launch, once one by one.
TEST(CudaConv1d, TiledPrefillEqualsDecodeStepsBitwise) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Conv1dTiled");
    const int C = 768, K = 4, l2_heads = 4, q_heads = 2, T = 133;  // not a multiple of any tile
    const int64_t x_stride = C + 64;
    auto x = uniform(rng, T * x_stride, -3, 3);
    auto w = uniform(rng, C * K, -0.6f, 0.6f, false);
    Dev<uint16_t> dx(to_bf(x));
    Dev<float> dw(w);
    using kernels::bf16;
    auto params = [&](const bf16* xp, const Dev<uint16_t>& state, const Dev<uint16_t>& y, int max_rows,
                      const int32_t* n) {
        return kernels::Conv1dBf16Params{xp, dw.get(), bf(state), bf(y), x_stride, C, K, 128, l2_heads, q_heads,
                                         1e-6f, 0.0625f, max_rows, n};
    };
    Dev<uint16_t> s1(std::vector<uint16_t>(C * (K - 1), 0)), y1(T * C);
    Dev<int32_t> n1(std::vector<int32_t>{T});
    y1.poison();
    CUDA_OK(kernels::conv1d_launch(params(bf(dx), s1, y1, T + 7, n1.get()), nullptr));
    const auto whole = y1.download();
    Dev<uint16_t> s2(std::vector<uint16_t>(C * (K - 1), 0)), y2(C);
    Dev<int32_t> n2(std::vector<int32_t>{1});
    for (int t = 0; t < T; ++t) {
        y2.poison();
        CUDA_OK(kernels::conv1d_launch(params(bf(dx) + t * x_stride, s2, y2, 1, n2.get()), nullptr));
        const auto row = y2.download();
        for (int c = 0; c < C; ++c)
            ASSERT_EQ(row[c], whole[size_t(t) * C + c]) << "row " << t << " channel " << c;
    }
    EXPECT_EQ(s1.download(), s2.download());  // and both leave the same state
}

// The prefill kernels against the per-channel loop kernel that decode steps run
// (Conv1dBf16Params::prefill_loop = 1), bit for bit: outputs and the state left behind, from a
// random carried state, over row counts that end mid-tile and mid-group, including fewer rows than
// taps. Kernels: the default, the round-1 vector kernel (prefill_kernel 1; tile rows 16 / 64 / 16
// at 80 registers), the one-launch vector kernels (2: state by tile 0; 3: reduce-scatter l2norm,
// also at 80 registers; 4: row pairs; 16 and 32 rows). Layouts: the 9B (64 heads: 16 q, 16 k
// normalised; input a view into the 12352-wide in_proj row), the 0.8B (48 heads, 8224-wide row),
// and a row stride that is only 8-byte aligned.
TEST(CudaConv1d, PrefillKernelsEqualLoopKernelBitwise) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Conv1dVector");
    struct Layout {
        int C;
        int64_t stride;
    };
    struct Kind {
        int kernel, tile;
    };
    const Kind kinds[] = {{0, 0}, {1, 0}, {1, 16}, {1, 64}, {1, -16}, {2, 0},
                          {2, 32}, {3, 0}, {3, 32}, {3, -16}, {4, 0}, {4, 32}};
    const int K = 4, l2_heads = 32, q_heads = 16, max_rows = 1100;
    using kernels::bf16;
    for (const Layout lay : {Layout{8192, 8192 + 4160}, Layout{6144, 6144 + 2080}, Layout{6144, 6144 + 2084}}) {
        const int C = lay.C;
        const int64_t x_stride = lay.stride;
        auto x = uniform(rng, max_rows * x_stride, -3, 3);
        auto w = uniform(rng, C * K, -0.6f, 0.6f, false);
        auto s0 = to_bf(uniform(rng, C * (K - 1), -3, 3));
        Dev<uint16_t> dx(to_bf(x));
        Dev<float> dw(w);
        for (int rows : {1037, 333, 17, 2}) {
            Dev<int32_t> n(std::vector<int32_t>{rows});
            auto run = [&](int loop, int kernel, int tile, std::vector<uint16_t>& ys, std::vector<uint16_t>& ss) {
                Dev<uint16_t> st(s0), y(static_cast<size_t>(max_rows) * C);
                y.poison();
                kernels::Conv1dBf16Params p{bf(dx), dw.get(), bf(st), bf(y), x_stride, C, K, 128, l2_heads, q_heads,
                                            1e-6f, 0.0883883f, max_rows, n.get()};
                p.prefill_loop = loop;
                p.prefill_kernel = kernel;
                p.tile_rows = tile;
                CUDA_OK(kernels::conv1d_launch(p, nullptr));
                ys = y.download();
                ss = st.download();
            };
            std::vector<uint16_t> want_y, want_s;
            run(1, 0, 0, want_y, want_s);
            ASSERT_NE(want_s, s0) << "the state moved on";
            for (const Kind kd : kinds) {
                std::vector<uint16_t> ys, ss;
                run(0, kd.kernel, kd.tile, ys, ss);
                const auto got = from_bf(ys);
                const std::string what = "C " + std::to_string(C) + " stride " + std::to_string(x_stride) + " rows " +
                                         std::to_string(rows) + " kernel " + std::to_string(kd.kernel) + " tile " +
                                         std::to_string(kd.tile);
                for (size_t i = 0; i < size_t(rows) * C; ++i)
                    ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " not written";
                EXPECT_TRUE(std::isnan(got[size_t(rows) * C])) << what << ": wrote past the valid rows";
                for (size_t i = 0; i < size_t(rows) * C; ++i)
                    ASSERT_EQ(ys[i], want_y[i]) << what << ": row " << i / C << " channel " << i % C;
                EXPECT_EQ(ss, want_s) << what << ": state";
            }
        }
    }
}

// The one-launch kernels over a prompt cut into launches (1 row, fewer than the taps; more than one tile;
// a tile's worth; the rest) carries the state from launch to launch: every row's bits and the final
// state equal one launch over the whole prompt, from a random state carried in.
TEST(CudaConv1d, PrefillInPiecesEqualsOneLaunchBitwise) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Conv1dPieces");
    const int C = 6144, K = 4, l2_heads = 32, q_heads = 16, T = 900, max_rows = 512;
    const int64_t x_stride = C + 2080;
    const int pieces[] = {1, 2, 300, 64, 512, 21};
    auto x = uniform(rng, T * x_stride, -3, 3);
    auto w = uniform(rng, C * K, -0.6f, 0.6f, false);
    auto s0 = to_bf(uniform(rng, C * (K - 1), -3, 3));
    Dev<uint16_t> dx(to_bf(x));
    Dev<float> dw(w);
    using kernels::bf16;
    int kernel = 0;
    auto params = [&](const bf16* xp, Dev<uint16_t>& st, Dev<uint16_t>& y, int mr, const int32_t* n) {
        kernels::Conv1dBf16Params p{xp, dw.get(), bf(st), bf(y), x_stride, C, K, 128, l2_heads, q_heads,
                                    1e-6f, 0.0883883f, mr, n};
        p.prefill_kernel = kernel;
        return p;
    };
    for (int k : {2, 3, 4}) {  // state by tile 0, reduce-scatter, row pairs (the default)
        kernel = k;
        Dev<uint16_t> s1(s0), y1(static_cast<size_t>(T) * C);
        Dev<int32_t> n1(std::vector<int32_t>{T});
        y1.poison();
        CUDA_OK(kernels::conv1d_launch(params(bf(dx), s1, y1, T, n1.get()), nullptr));
        const auto whole = y1.download();
        Dev<uint16_t> s2(s0), y2(static_cast<size_t>(max_rows) * C);
        int t0 = 0;
        for (int n : pieces) {
            Dev<int32_t> dn(std::vector<int32_t>{n});
            y2.poison();
            CUDA_OK(kernels::conv1d_launch(params(bf(dx) + t0 * x_stride, s2, y2, max_rows, dn.get()), nullptr));
            const auto part = y2.download();
            for (size_t i = 0; i < size_t(n) * C; ++i)
                ASSERT_EQ(part[i], whole[size_t(t0) * C + i])
                    << "kernel " << kernel << ": piece at row " << t0 << ": row " << t0 + i / C << " channel " << i % C;
            t0 += n;
        }
        ASSERT_EQ(t0, T);
        EXPECT_EQ(s2.download(), s1.download()) << "kernel " << kernel << ": the state after the pieces";
    }
}

// Tile rows and kernel choices outside what each prefill kernel supports are refused.
TEST(CudaConv1d, PrefillRefusesBadTileRows) {
    FROST_SKIP_WITHOUT_CUDA();
    const int C = 1024, K = 4, max_rows = 100;
    Dev<uint16_t> dx(static_cast<size_t>(max_rows) * C), st(C * (K - 1)), y(static_cast<size_t>(max_rows) * C);
    Dev<float> dw(std::vector<float>(C * K, 0.1f));
    struct Case {
        int kernel, tile;
        const char* why;
    };
    for (const Case c : {Case{1, 48, "round-1 vector kernel: 48 rows"}, Case{2, 64, "one launch: 64 rows"},
                         Case{4, 8, "row pairs: 8 rows"}, Case{4, -16, "row pairs: -16"}, Case{3, -32, "scatter: -32"},
                         Case{5, 0, "no prefill kernel 5"}, Case{-1, 0, "no prefill kernel -1"}}) {
        kernels::Conv1dBf16Params p{bf(dx), dw.get(), bf(st), bf(y), C, C, K, 128, 4, 2, 1e-6f, 1.0f,
                                    max_rows, nullptr};
        p.prefill_kernel = c.kernel;
        p.tile_rows = c.tile;
        EXPECT_EQ(kernels::conv1d_launch(p, nullptr), cudaErrorInvalidValue) << c.why;
    }
}

}  // namespace
}  // namespace frost::test
#endif
