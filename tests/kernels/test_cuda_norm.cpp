// CUDA normalisation kernels against fp64 references on fresh random bf16 inputs with poisoned
// outputs: residual add + RMSNorm, q/k RMSNorm + partial NeoX RoPE, gated RMSNorm; determinism.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaNorm, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>
#include <memory>
#include <string>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::StepCursor;
constexpr double kBf16Tol = 1e-2;

TEST(CudaNorm, AddRmsNormMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("AddRmsNorm");
    // Decode-sized launches (<= 8 rows: 256 threads) and prefill ones (one thread per vector up
    // to 256), so each vectors-per-thread instance runs: 1 (dims 1024, 2048), 2 (4096), 4 (5120:
    // three of four slots used, 8192).
    struct Shape {
        int rows, max_rows, dim;
    };
    for (const Shape sh : {Shape{7, 9, 4096}, Shape{5, 8, 1024}, Shape{37, 40, 1024}, Shape{33, 36, 2048},
                           Shape{20, 24, 4096}, Shape{19, 21, 5120}, Shape{17, 19, 8192}}) {
        SCOPED_TRACE("dim " + std::to_string(sh.dim) + " rows " + std::to_string(sh.rows) + "/" +
                     std::to_string(sh.max_rows));
        const int rows = sh.rows, max_rows = sh.max_rows, dim = sh.dim;
        for (int with_delta = 0; with_delta < 2; ++with_delta) {
            for (int last_only = 0; last_only < 2; ++last_only) {
                auto h = uniform(rng, max_rows * dim, -2, 2);
                auto delta = uniform(rng, max_rows * dim, -1, 1);
                auto w = uniform(rng, dim, -0.5f, 0.5f, false);
                Dev<uint16_t> dh(to_bf(h)), dd(to_bf(delta)), dy(max_rows * dim);
                Dev<float> dw(w);
                Dev<int32_t> dn(std::vector<int32_t>{rows});
                kernels::AddRmsNormBf16Params p{bf(dh), with_delta ? bf(dd) : nullptr, dw.get(), bf(dy),
                                                dim, 1, 1e-6f, max_rows, dn.get(), last_only};
                CUDA_OK(kernels::add_rmsnorm_launch(p, nullptr));
                auto y = from_bf(dy.download());
                auto hout = from_bf(dh.download());
                std::vector<double> ref;
                std::vector<float> got;
                for (int r = last_only ? rows - 1 : 0; r < rows; ++r) {
                    std::vector<double> hr(dim);
                    double ss = 0;
                    for (int i = 0; i < dim; ++i) {
                        hr[i] = with_delta ? round_bf(h[r * dim + i] + delta[r * dim + i]) : h[r * dim + i];
                        ss += hr[i] * hr[i];
                        EXPECT_EQ(hout[r * dim + i], static_cast<float>(hr[i])) << "residual r" << r << " i" << i;
                        if (HasFailure()) return;
                    }
                    const double rs = 1.0 / std::sqrt(ss / dim + 1e-6);
                    const int yr = last_only ? 0 : r;
                    for (int i = 0; i < dim; ++i) {
                        ref.push_back(hr[i] * rs * (1.0 + w[i]));
                        got.push_back(y[yr * dim + i]);
                    }
                }
                EXPECT_LE(rel_l2(ref, got), kBf16Tol) << "delta " << with_delta << " last " << last_only;
                if (!last_only) {  // rows beyond the count stay untouched (still poison)
                    EXPECT_TRUE(std::isnan(y[rows * dim]));
                }
            }
        }
    }
}

// pdl 2 (AddRmsNormBf16Params): the norm lets its reader start before its own wait. The reader's
// wait must still cover the norm and, through it, the GEMV before it: a decode-like chain (GEMV
// delta -> norm h += delta, y -> GEMV z from y, six layers on one non-blocking stream, PDL on every
// launch) gives the same bits with pdl 2, pdl 1 and no PDL, each from poisoned outputs. A reader
// that started on a stale or half-written y would differ.
TEST(CudaNorm, EarlyTriggerKeepsTheChainOrdered) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("NormEarlyTrigger");
    const int dim = 4096, N = 4096, layers = 6;
    const auto h0 = uniform(rng, dim, -2, 2);
    const auto x0 = uniform(rng, dim, -1, 1);
    std::vector<std::vector<uint16_t>> wd, wz;
    for (int l = 0; l < layers; ++l) {
        wd.push_back(to_bf(uniform(rng, size_t(N) * dim, -0.02f, 0.02f)));
        wz.push_back(to_bf(uniform(rng, size_t(N) * dim, -0.02f, 0.02f)));
    }
    const auto nw = uniform(rng, dim, -0.5f, 0.5f, false);
    cudaStream_t st = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto run = [&](int pdl, std::vector<uint16_t>* h_out, std::vector<uint16_t>* z_out) {
        Dev<uint16_t> h(to_bf(h0)), x(to_bf(x0)), delta(dim), y(dim), z(size_t(layers) * N);
        Dev<float> w(nw);
        std::vector<std::unique_ptr<Dev<uint16_t>>> dwd, dwz;
        for (int l = 0; l < layers; ++l) {
            dwd.push_back(std::make_unique<Dev<uint16_t>>(wd[l]));
            dwz.push_back(std::make_unique<Dev<uint16_t>>(wz[l]));
        }
        for (int l = 0; l < layers; ++l) {
            // delta = W_d x (x: the previous layer's z, the first layer's x0), then the norm, then z = W_z y.
            const kernels::bf16* in = l == 0 ? bf(x) : bf(z) + size_t(l - 1) * N;
            kernels::GemmBf16Params gd{in, bf(*dwd[l]), delta.get(), dim, N, 1, N, dim, 0, 0};
            gd.pdl = pdl ? 1 : 0;
            CUDA_OK(kernels::gemv_launch(gd, st));
            kernels::AddRmsNormBf16Params n{bf(h), bf(delta), w.get(), bf(y), dim, 1, 1e-6f, 1, nullptr, 0};
            n.pdl = pdl;
            CUDA_OK(kernels::add_rmsnorm_launch(n, st));
            kernels::GemmBf16Params gz{bf(y), bf(*dwz[l]), bf(z) + size_t(l) * N, dim, N, 1, N, dim, 0, 0};
            gz.pdl = pdl ? 1 : 0;
            CUDA_OK(kernels::gemv_launch(gz, st));
        }
        CUDA_OK(cudaStreamSynchronize(st));
        *h_out = h.download();
        *z_out = z.download();
    };
    std::vector<uint16_t> h_plain, z_plain;
    run(0, &h_plain, &z_plain);
    const auto zf = from_bf(z_plain);
    for (float v : zf) ASSERT_TRUE(std::isfinite(v)) << "the plain chain left poison";
    for (int pdl : {1, 2}) {
        SCOPED_TRACE("pdl " + std::to_string(pdl));
        for (int rep = 0; rep < 3; ++rep) {
            std::vector<uint16_t> hh, zz;
            run(pdl, &hh, &zz);
            EXPECT_EQ(hh, h_plain);
            EXPECT_EQ(zz, z_plain);
        }
    }
    CUDA_OK(cudaStreamDestroy(st));
}

// bf16_freq: inv_freq rounded to bf16 as the CPU kernel does (EngineOptions::rope_inv_freq_bf16),
// else exact. The output is also checked to be far from the other setting's reference, so a
// kernel that ignored the flag would fail. d 256 / 128 take the contiguous layouts (8 / 4 elements
// a lane, partners rot / 16 or rot / 8 lanes away), d 96 the strided one; pad 1 makes every
// other row's heads misaligned for the vector accesses (the element-wise fallback). A block holds
// one row's heads up to 32 (Hq + Hkv); Hq 32 + Hkv 4 takes the 4-warp blocks that span rows.
void check_qk_norm_rope(int bf16_freq, int d = 256, int rot = 64, int pad = 0, int Hq = 4, int Hkv = 2) {
    SCOPED_TRACE(std::string(bf16_freq ? "inv_freq bf16" : "inv_freq fp32") + ", d " + std::to_string(d) + ", rot " +
                 std::to_string(rot) + ", pad " + std::to_string(pad) + ", heads " + std::to_string(Hq) + "/" +
                 std::to_string(Hkv));
    auto rng = fresh_rng("QkNormRope");
    const int rows = 5, max_rows = 6, pos = 1234;
    const float theta = 1e7f;
    // q rows interleave [q_h | gate_h] per head like the fused projection; k follows in the row.
    const int64_t row_stride = 2 * Hq * d + 2 * Hkv * d + pad;
    auto x = uniform(rng, max_rows * row_stride, -3, 3);
    auto qw = uniform(rng, d, -0.3f, 0.3f, false), kw = uniform(rng, d, -0.3f, 0.3f, false);
    Dev<uint16_t> dx(to_bf(x));
    Dev<float> dqw(qw), dkw(kw);
    StepCursor c{};
    c.pos = pos;
    c.n_tokens = rows;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    kernels::QkNormRopeBf16Params p{};
    p.q = bf(dx);
    p.k = bf(dx) + 2 * Hq * d;
    p.q_w = dqw.get();
    p.k_w = dkw.get();
    p.q_row_stride = row_stride;
    p.q_head_stride = 2 * d;
    p.k_row_stride = row_stride;
    p.k_head_stride = d;
    p.Hq = Hq;
    p.Hkv = Hkv;
    p.head_dim = d;
    p.rotary_dim = rot;
    p.zero_centred = 1;
    p.eps = 1e-6f;
    p.theta = theta;
    p.max_rows = max_rows;
    p.cursor = dc.get();
    p.inv_freq_bf16 = bf16_freq;
    CUDA_OK(kernels::qk_norm_rope_launch(p, nullptr));
    auto y = from_bf(dx.download());
    std::vector<double> ref, ref_other;
    std::vector<float> got;
    // inv_freq of slot fi: fp64 exact, or the CPU kernel's fp32 value rounded to bf16.
    auto inv_freq = [&](int fi, bool bf16) {
        if (!bf16) return std::pow(double(theta), -2.0 * fi / rot);
        return double(round_bf(1.0f / std::pow(theta, static_cast<float>(2 * fi) / static_cast<float>(rot))));
    };
    for (int r = 0; r < max_rows; ++r) {
        for (int hh = 0; hh < Hq + Hkv; ++hh) {
            const bool is_q = hh < Hq;
            const int64_t off = r * row_stride + (is_q ? hh * 2 * d : 2 * Hq * d + (hh - Hq) * d);
            const auto& w = is_q ? qw : kw;
            if (r >= rows) {  // untouched rows keep their input
                for (int i = 0; i < d; ++i) ASSERT_EQ(y[off + i], x[off + i]);
                continue;
            }
            double ss = 0;
            for (int i = 0; i < d; ++i) ss += double(x[off + i]) * x[off + i];
            const double rs = 1.0 / std::sqrt(ss / d + 1e-6);
            std::vector<double> n(d);
            for (int i = 0; i < d; ++i) n[i] = x[off + i] * rs * (1.0 + w[i]);
            for (int i = 0; i < d; ++i) {
                double v[2] = {n[i], n[i]};  // [this setting, the other setting]
                for (int which = 0; which < 2 && i < rot; ++which) {
                    const int fi = i % (rot / 2);
                    const double ang = double(pos + r) * inv_freq(fi, (which == 0) == (bf16_freq == 1));
                    v[which] = i < rot / 2 ? n[i] * std::cos(ang) - n[i + rot / 2] * std::sin(ang)
                                           : n[i] * std::cos(ang) + n[i - rot / 2] * std::sin(ang);
                }
                ref.push_back(v[0]);
                ref_other.push_back(v[1]);
                got.push_back(y[off + i]);
            }
            if (is_q) {  // the gate half of each q head is not touched
                for (int i = 0; i < d; ++i) ASSERT_EQ(y[off + d + i], x[off + d + i]);
            }
        }
    }
    EXPECT_LE(rel_l2(ref, got), kBf16Tol);
    EXPECT_GT(rel_l2(ref_other, got), 5 * kBf16Tol) << "the two settings must be distinguishable";
}

TEST(CudaNorm, QkNormRopeMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    check_qk_norm_rope(0);
    check_qk_norm_rope(1);
    check_qk_norm_rope(0, 256, 128);
    check_qk_norm_rope(1, 256, 256);
    check_qk_norm_rope(0, 256, 64, 1);
    check_qk_norm_rope(0, 128, 64);
    check_qk_norm_rope(1, 128, 128, 1);
    check_qk_norm_rope(0, 96, 64);
    check_qk_norm_rope(0, 128, 64, 0, 32, 4);
    check_qk_norm_rope(1, 96, 64, 0, 32, 4);
}

// dim 128 with a z row stride that keeps 8-byte alignment takes the vectorised kernel; z_pad 2 (a
// misaligned stride) and dim 64 take the strided one.
void check_gated_rmsnorm(int dim, int z_pad) {
    auto rng = fresh_rng("GatedRmsNorm");
    const int rows = 6, max_rows = 8, heads = 32;
    const int64_t z_stride = heads * dim + z_pad;
    auto x = uniform(rng, max_rows * heads * dim, -2, 2);
    auto z = uniform(rng, max_rows * z_stride, -4, 4);
    auto w = uniform(rng, dim, 0.5f, 1.5f, false);
    Dev<uint16_t> dx(to_bf(x)), dz(to_bf(z)), dy(max_rows * heads * dim), dy2(max_rows * heads * dim);
    Dev<float> dw(w);
    Dev<int32_t> dn(std::vector<int32_t>{rows});
    kernels::GatedRmsNormBf16Params p{bf(dx), bf(dz), dw.get(), bf(dy), z_stride, dim, heads, 1e-6f, max_rows, dn.get()};
    CUDA_OK(kernels::gated_rmsnorm_launch(p, nullptr));
    p.y = bf(dy2);
    CUDA_OK(kernels::gated_rmsnorm_launch(p, nullptr));
    auto y = from_bf(dy.download());
    EXPECT_EQ(dy.download(), dy2.download());
    std::vector<double> ref;
    std::vector<float> got;
    for (int r = 0; r < rows; ++r) {
        for (int h = 0; h < heads; ++h) {
            const float* xr = &x[(r * heads + h) * dim];
            double ss = 0;
            for (int i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
            const double rs = 1.0 / std::sqrt(ss / dim + 1e-6);
            for (int i = 0; i < dim; ++i) {
                const double zv = z[r * z_stride + h * dim + i];
                ref.push_back(w[i] * xr[i] * rs * zv / (1.0 + std::exp(-zv)));
                got.push_back(y[(r * heads + h) * dim + i]);
            }
        }
    }
    EXPECT_LE(rel_l2(ref, got), kBf16Tol) << "dim " << dim << " z_pad " << z_pad;
    EXPECT_TRUE(std::isnan(y[rows * heads * dim]));
}

TEST(CudaNorm, GatedRmsNormMatchesReferenceAndIsDeterministic) {
    FROST_SKIP_WITHOUT_CUDA();
    check_gated_rmsnorm(128, 64);  // vectorised
    check_gated_rmsnorm(128, 2);   // strided: misaligned z rows
    check_gated_rmsnorm(64, 64);   // strided: dim 64
}

}  // namespace
}  // namespace frost::test
#endif
