// A row's bits must not depend on how many rows its launch has: a prefill chunk, a one-token decode
// step and a capsule's append must agree bitwise, whatever grid a kernel picks for its row count
// (row kernels with several rows per block or thread were measured: lm_norm.cu). Each case runs
// a launch with many rows and compares every output (y, the residual h, the FP8 twin's bytes and
// scales) with the same rows launched one at a time, and with an fp64 reference.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaRowsBits, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>
#include <cstring>

#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::act_scale_ld;
using kernels::kFp8Group;

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// y and its FP8 twin written by one launch of `rows` rows (y, q, s) and by one launch per row
// (y1, q1, s1: row r's twin scales at s_row(r), a launch of one row's layout).
struct RowOutputs {
    int rows, cols, groups;
    Dev<uint16_t> y, y1;
    Dev<uint8_t> q, q1;
    Dev<float> s, s1;
    RowOutputs(int rows_, int cols_)
        : rows(rows_), cols(cols_), groups(cols_ / kFp8Group), y(size_t(rows_) * cols_), y1(size_t(rows_) * cols_),
          q(size_t(rows_) * cols_), q1(size_t(rows_) * cols_), s(size_t(act_scale_ld(rows_)) * (cols_ / kFp8Group)),
          s1(size_t(act_scale_ld(1)) * (cols_ / kFp8Group) * rows_) {}
    kernels::bf16* y_row(int r) const { return bf(y1) + size_t(r) * cols; }
    uint8_t* q_row(int r) const { return q1.get() + size_t(r) * cols; }
    float* s_row(int r) const { return s1.get() + size_t(r) * act_scale_ld(1) * groups; }
    // Points a launch's twin at the many-row outputs (q, s); y is set by the caller's params.
    template <class P>
    void twin_all(P& p) const {
        p.yq = q.get();
        p.yq_scale = s.get();
        p.yq_scale_ld = act_scale_ld(rows);
    }
    // Turns a copy of the many-row params into row r's one-row launch (y, twin, one row).
    template <class P>
    void one_row(P& o, int r) const {
        o.y = y_row(r);
        o.max_rows = 1;
        o.yq = q_row(r);
        o.yq_scale = s_row(r);
        o.yq_scale_ld = act_scale_ld(1);
    }
    // The first `valid` rows of both, bitwise: y, the twin's bytes and its scales.
    void expect_equal(int valid) const {
        const auto a = y.download(), b = y1.download();
        const auto qa = q.download(), qb = q1.download();
        const auto sa = s.download(), sb = s1.download();
        const size_t n = size_t(valid) * cols;
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * 2)) << "y differs from the one-row launches";
        ASSERT_EQ(0, std::memcmp(qa.data(), qb.data(), n)) << "twin bytes differ";
        for (int r = 0; r < valid; ++r)
            for (int g = 0; g < groups; ++g)
                ASSERT_EQ(bits(sa[size_t(g) * act_scale_ld(rows) + r]),
                          bits(sb[size_t(r) * act_scale_ld(1) * groups + size_t(g) * act_scale_ld(1)]))
                    << "twin scale row " << r << " group " << g;
    }
};

// At dim 1024 the many-row launch runs one thread per vector (128) and the one-row launches 256
// (add_rmsnorm_launch: decode launches keep 256), so this also pins that the block size does not
// change a row's bits.
TEST(CudaRowsBits, AddRmsNormManyRowsEqualOneRowAtATime) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("AddRmsNormRows");
    const int rows = 1501;
    for (int dim : {1024, 2048, 4096}) {
        for (int with_delta = 0; with_delta < 2; ++with_delta) {
            SCOPED_TRACE("dim " + std::to_string(dim) + " delta " + std::to_string(with_delta));
            const auto h0 = to_bf(uniform(rng, size_t(rows) * dim, -2, 2));
            const auto delta = to_bf(uniform(rng, size_t(rows) * dim, -1, 1));
            const auto w = uniform(rng, dim, -0.5f, 0.5f, false);
            Dev<uint16_t> dh(h0), dd(delta), dh1(h0);
            Dev<float> dw(w);
            RowOutputs out(rows, dim);
            kernels::AddRmsNormBf16Params p{bf(dh), with_delta ? bf(dd) : nullptr, dw.get(), bf(out.y), dim, 1, 1e-6f,
                                            rows, nullptr, 0};
            out.twin_all(p);
            CUDA_OK(kernels::add_rmsnorm_launch(p, nullptr));
            for (int r = 0; r < rows; ++r) {  // the same rows, one launch each
                kernels::AddRmsNormBf16Params o = p;
                o.h = bf(dh1) + size_t(r) * dim;
                o.delta = with_delta ? bf(dd) + size_t(r) * dim : nullptr;
                out.one_row(o, r);
                CUDA_OK(kernels::add_rmsnorm_launch(o, nullptr));
            }
            out.expect_equal(rows);
            if (HasFatalFailure()) return;
            const auto y = out.y.download(), h = dh.download(), h1 = dh1.download();
            ASSERT_EQ(0, std::memcmp(h.data(), h1.data(), h.size() * 2)) << "h differs from the one-row launches";
            // fp64 reference on a sample of rows (the first, then a stride through).
            std::vector<double> ref;
            std::vector<float> got;
            for (int r = 0; r < rows; r += 97) {
                double ss = 0;
                std::vector<double> hr(dim);
                for (int i = 0; i < dim; ++i) {
                    const size_t at = size_t(r) * dim + i;
                    hr[i] = with_delta ? round_bf(bf2f(h0[at]) + bf2f(delta[at])) : bf2f(h0[at]);
                    ss += hr[i] * hr[i];
                    ASSERT_EQ(bf2f(h[at]), float(hr[i])) << "residual r" << r << " i" << i;
                }
                const double rs = 1.0 / std::sqrt(ss / dim + 1e-6);
                for (int i = 0; i < dim; ++i) {
                    ref.push_back(hr[i] * rs * (1.0 + w[i]));
                    got.push_back(bf2f(y[size_t(r) * dim + i]));
                }
            }
            EXPECT_LE(rel_l2(ref, got), 1e-2);
        }
    }
}

TEST(CudaRowsBits, GatedRmsNormManyRowsEqualOneRowAtATime) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("GatedRmsNormRows");
    // 32 heads x 500 rows against one-row launches of 32 (row, head) items.
    const int rows = 500, heads = 32, dim = 128, width = heads * dim;
    const int64_t zs = 2 * width + 64;  // z inside a wider projection row, as in the GDN in_proj
    const auto x = to_bf(uniform(rng, size_t(rows) * width, -2, 2));
    const auto z = to_bf(uniform(rng, size_t(rows) * zs, -3, 3));
    const auto w = uniform(rng, dim, 0.5f, 1.5f, false);
    Dev<uint16_t> dx(x), dz(z);
    Dev<float> dw(w);
    RowOutputs out(rows, width);
    kernels::GatedRmsNormBf16Params p{bf(dx), bf(dz), dw.get(), bf(out.y), zs, dim, heads, 1e-6f, rows, nullptr};
    out.twin_all(p);
    CUDA_OK(kernels::gated_rmsnorm_launch(p, nullptr));
    for (int r = 0; r < rows; ++r) {
        kernels::GatedRmsNormBf16Params o = p;
        o.x = bf(dx) + size_t(r) * width;
        o.z = bf(dz) + size_t(r) * zs;
        out.one_row(o, r);
        CUDA_OK(kernels::gated_rmsnorm_launch(o, nullptr));
    }
    out.expect_equal(rows);
    if (HasFatalFailure()) return;
    const auto y = out.y.download();
    std::vector<double> ref;
    std::vector<float> got;
    for (int r = 0; r < rows; r += 37)
        for (int hd = 0; hd < heads; ++hd) {
            const size_t at = size_t(r) * width + size_t(hd) * dim;
            double ss = 0;
            for (int i = 0; i < dim; ++i) ss += double(bf2f(x[at + i])) * bf2f(x[at + i]);
            const double rs = 1.0 / std::sqrt(ss / dim + 1e-6);
            for (int i = 0; i < dim; ++i) {
                const double zv = bf2f(z[size_t(r) * zs + size_t(hd) * dim + i]);
                ref.push_back(bf2f(x[at + i]) * rs * w[i] * zv / (1.0 + std::exp(-zv)));
                got.push_back(bf2f(y[at + i]));
            }
        }
    EXPECT_LE(rel_l2(ref, got), 1e-2);
}

TEST(CudaRowsBits, SwigluManyRowsEqualOneRowAtATime) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("SwigluRows");
    const int rows = 700, valid = rows - 3, F = 1536;  // the last rows are past the count: untouched
    const auto x = to_bf(uniform(rng, size_t(rows) * 2 * F, -4, 4));
    Dev<uint16_t> dx(x);
    RowOutputs out(rows, F);
    Dev<int32_t> dn(std::vector<int32_t>{valid});
    kernels::SwigluBf16Params p{bf(dx), bf(out.y), F, rows, dn.get()};
    out.twin_all(p);
    CUDA_OK(kernels::swiglu_launch(p, nullptr));
    for (int r = 0; r < valid; ++r) {
        kernels::SwigluBf16Params o = p;
        o.x = bf(dx) + size_t(r) * 2 * F;
        out.one_row(o, r);
        o.n_rows = nullptr;
        CUDA_OK(kernels::swiglu_launch(o, nullptr));
    }
    out.expect_equal(valid);
    if (HasFatalFailure()) return;
    const auto y = out.y.download();
    for (size_t i = size_t(valid) * F; i < y.size(); ++i)
        ASSERT_EQ(y[i], uint16_t(0xFFFF)) << "row past the count written at " << i;
    std::vector<double> ref;
    std::vector<float> got;
    for (size_t i = 0; i < size_t(valid) * F; i += 13) {
        const size_t r = i / F, c = i % F;
        const double g = bf2f(x[r * 2 * F + c]), u = bf2f(x[r * 2 * F + F + c]);
        ref.push_back(g / (1.0 + std::exp(-g)) * u);
        got.push_back(bf2f(y[i]));
    }
    EXPECT_LE(rel_l2(ref, got), 1e-2);
}

}  // namespace
}  // namespace frost::test
#endif
