// CUDA elementwise kernels against fp64 references on fresh random inputs with poisoned outputs:
// embedding gather, SwiGLU, GDN gates, KV append, cursor nodes and greedy sampling.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaElementwise, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::StepCursor;
constexpr double kBf16Tol = 1e-2;
constexpr double kF32Tol = 1e-5;

TEST(CudaElementwise, EmbedGathersRows) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Embed");
    const int vocab = 1000, dim = 256, max_rows = 6, rows = 5;
    auto table = uniform(rng, vocab * dim, -1, 1);
    std::vector<int32_t> ids(max_rows);
    for (auto& i : ids) i = static_cast<int32_t>(rng() % vocab);
    ids[1] = vocab + 3;  // out of range: a zero row, never a wild read
    Dev<uint16_t> dt(to_bf(table)), dy(max_rows * dim);
    Dev<int32_t> di(ids), dn(std::vector<int32_t>{rows});
    CUDA_OK(kernels::embed_launch({bf(dt), di.get(), bf(dy), vocab, dim, max_rows, dn.get()}, nullptr));
    auto y = from_bf(dy.download());
    for (int r = 0; r < rows; ++r)
        for (int i = 0; i < dim; ++i)
            ASSERT_EQ(y[r * dim + i], r == 1 ? 0.0f : table[ids[r] * dim + i]) << r << " " << i;
    EXPECT_TRUE(std::isnan(y[rows * dim]));
}

TEST(CudaElementwise, SwigluMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Swiglu");
    const int F = 1024, max_rows = 4, rows = 3;
    auto x = uniform(rng, max_rows * 2 * F, -6, 6);
    Dev<uint16_t> dx(to_bf(x)), dy(max_rows * F);
    Dev<int32_t> dn(std::vector<int32_t>{rows});
    CUDA_OK(kernels::swiglu_launch({bf(dx), bf(dy), F, max_rows, dn.get()}, nullptr));
    auto y = from_bf(dy.download());
    std::vector<double> ref;
    std::vector<float> got;
    for (int r = 0; r < rows; ++r)
        for (int i = 0; i < F; ++i) {
            const double g = x[r * 2 * F + i], u = x[r * 2 * F + F + i];
            ref.push_back(g / (1 + std::exp(-g)) * u);
            got.push_back(y[r * F + i]);
        }
    EXPECT_LE(rel_l2(ref, got), kBf16Tol);
    EXPECT_TRUE(std::isnan(y[rows * F]));
}

TEST(CudaElementwise, GdnGateMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("GdnGate");
    const int Hv = 32, max_rows = 9, rows = 9, stride = 2 * Hv + 16;
    auto ba = uniform(rng, max_rows * stride, -8, 30);  // covers the softplus linear branch
    auto A_log = uniform(rng, Hv, -2, 2.7f, false), dt = uniform(rng, Hv, -1, 1, false);
    Dev<uint16_t> dba(to_bf(ba));
    Dev<float> dA(A_log), ddt(dt), dbeta(max_rows * Hv), dg(max_rows * Hv);
    Dev<int32_t> dn(std::vector<int32_t>{rows});
    CUDA_OK(kernels::gdn_gate_launch({bf(dba), bf(dba) + Hv, dA.get(), ddt.get(), dbeta.get(), dg.get(), stride, Hv,
                                      max_rows, dn.get()},
                                     nullptr));
    auto beta = dbeta.download(), g = dg.download();
    std::vector<double> rb, rg;
    for (int r = 0; r < rows; ++r)
        for (int h = 0; h < Hv; ++h) {
            const double b = ba[r * stride + h], a = ba[r * stride + Hv + h] + double(dt[h]);
            rb.push_back(1 / (1 + std::exp(-b)));
            rg.push_back(-std::exp(double(A_log[h])) * (a > 20 ? a : std::log1p(std::exp(a))));
        }
    EXPECT_LE(rel_l2(rb, beta), kF32Tol);
    EXPECT_LE(rel_l2(rg, g), kF32Tol);
}

TEST(CudaElementwise, KvAppendWritesAtCursor) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("KvAppend");
    const int kv_dim = 1024, max_seq = 64, max_rows = 8, rows = 5, pos = 37;
    const int64_t stride = 3 * kv_dim;
    auto src = uniform(rng, max_rows * stride, -1, 1);
    Dev<uint16_t> ds(to_bf(src)), dk(max_seq * kv_dim), dv(max_seq * kv_dim);
    StepCursor c{};
    c.pos = pos;
    c.n_tokens = rows;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    CUDA_OK(kernels::kv_append_launch({bf(ds), bf(ds) + kv_dim, bf(dk), bf(dv), stride, kv_dim, max_seq, max_rows, dc.get()},
                                      nullptr));
    auto k = from_bf(dk.download()), v = from_bf(dv.download());
    for (int s = 0; s < max_seq; ++s)
        for (int i = 0; i < kv_dim; i += 97) {
            const int r = s - pos;
            if (r >= 0 && r < rows) {
                ASSERT_EQ(k[s * kv_dim + i], src[r * stride + i]);
                ASSERT_EQ(v[s * kv_dim + i], src[r * stride + kv_dim + i]);
            } else {
                ASSERT_TRUE(std::isnan(k[s * kv_dim + i]) && std::isnan(v[s * kv_dim + i])) << s;
            }
        }
}

TEST(CudaElementwise, CursorNodes) {
    FROST_SKIP_WITHOUT_CUDA();
    StepCursor c{};
    c.pos = 100;
    c.n_tokens = 64;
    c.last_token = 4242;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    Dev<int32_t> ids(4);
    CUDA_OK(kernels::cursor_launch({dc.get(), ids.get(), kernels::kCursorAdvance}, nullptr));
    CUDA_OK(kernels::cursor_launch({dc.get(), ids.get(), kernels::kCursorDecodeBegin}, nullptr));
    const StepCursor out = dc.download()[0];
    EXPECT_EQ(out.pos, 164);
    EXPECT_EQ(out.steps, 1);
    EXPECT_EQ(out.n_tokens, 1);
    EXPECT_EQ(ids.download()[0], 4242);
}

TEST(CudaElementwise, ArgmaxPicksLowestIndexOfMaximum) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("Argmax");
    const int vocab = 248320, rows = 3;
    for (int trial = 0; trial < 3; ++trial) {
        auto logits = uniform(rng, rows * vocab, -10, 10, false);
        const int row = rows - 1;
        const int a = static_cast<int>(rng() % vocab);
        const int b = static_cast<int>((a + 1000 + rng() % 1000) % vocab);
        logits[row * vocab + a] = 50.0f;
        logits[row * vocab + b] = 50.0f;  // a tie: the lower index must win
        logits[row * vocab + (a + 1) % vocab] = NAN;
        logits[0 * vocab + 7] = 99.0f;    // a larger value in a row that is not selected
        Dev<float> dl(logits), work(2 * kernels::sample_argmax_blocks(vocab));
        Dev<int32_t> dn(std::vector<int32_t>{rows}), tok(1);
        StepCursor c{};
        Dev<StepCursor> dc(std::vector<StepCursor>{c});
        kernels::SampleArgmaxParams p{dl.get(), vocab, vocab, 1, dn.get(), work.get(), dc.get(), tok.get(), 0};
        CUDA_OK(kernels::sample_argmax_launch(p, nullptr));
        EXPECT_EQ(tok.download()[0], std::min(a, b));
        EXPECT_EQ(dc.download()[0].last_token, std::min(a, b));
    }
}

}  // namespace
}  // namespace frost::test
#endif
