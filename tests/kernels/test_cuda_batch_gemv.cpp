// The multi-row GEMV of batched decode (issue 16), tensor-core and SIMT forms: every row of an M-row launch (M = 1..8, plain
// bf16 out, fp32 out with the residual accumulate, the SwiGLU epilogue, PDL on) equals the M = 1
// GEMV of that row bit for bit (so a batched member's bits equal its solo step), and the rows
// agree with an fp64 host reference. Skipped without a CUDA device; the GPU machine runs it.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaBatchGemv, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

constexpr double kTol = 1e-2;

double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

// mode 0: bf16 out; 1: fp32 out accumulated into y; 2: SwiGLU (w = [gate | up], N = 2F).
void check(int M, int N, int K, int mode) {
    // (built with append: GCC 12 warns falsely (-Wrestrict) on "s" + std::to_string(...))
    std::string name = "M";
    name.append(std::to_string(M)).append(" N").append(std::to_string(N)).append(" K").append(std::to_string(K));
    name.append(" mode").append(std::to_string(mode));
    SCOPED_TRACE(name);
    auto rng = fresh_rng(name.c_str());
    const int ldx = K + 8;  // a row stride wider than K, as the forward's views have
    auto x = uniform(rng, size_t(M) * ldx, -1, 1);
    auto w = uniform(rng, size_t(N) * K, -1, 1);
    const int outs = mode == 2 ? N / 2 : N;
    const int ldy = outs + (mode == 1 ? 4 : 0);
    auto y0 = uniform(rng, size_t(M) * ldy, -1, 1, false);
    Dev<uint16_t> dx(to_bf(x)), dw(to_bf(w));
    const bool f32 = mode == 1;
    Dev<float> yf(y0), yf_solo(y0);
    Dev<uint16_t> yb(size_t(M) * ldy), yb_solo(size_t(M) * ldy);
    void* y = f32 ? static_cast<void*>(yf.get()) : static_cast<void*>(yb.get());
    kernels::GemmBf16Params p{bf(dx), bf(dw), y, ldx, ldy, M, N, K, f32 ? 1 : 0, f32 ? 1 : 0};
    p.swiglu = mode == 2 ? 1 : 0;
    p.pdl = 1;
    CUDA_OK(kernels::gemv_launch(p, nullptr));
    for (int r = 0; r < M; ++r) {  // each row alone (M = 1) into the solo buffers
        kernels::GemmBf16Params q = p;
        q.M = 1;
        q.x = bf(dx) + size_t(r) * ldx;
        q.y = f32 ? static_cast<void*>(yf_solo.get() + size_t(r) * ldy)
                  : static_cast<void*>(reinterpret_cast<uint16_t*>(yb_solo.get()) + size_t(r) * ldy);
        CUDA_OK(kernels::gemv_launch(q, nullptr));
    }
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref;
    std::vector<float> got;
    if (f32) {
        const auto a = yf.download(), b = yf_solo.download();
        for (int r = 0; r < M; ++r)
            for (int n = 0; n < outs; ++n) EXPECT_EQ(a[size_t(r) * ldy + n], b[size_t(r) * ldy + n]) << r << "," << n;
        for (int r = 0; r < M; ++r)
            for (int n = 0; n < outs; ++n) got.push_back(a[size_t(r) * ldy + n]);
    } else {
        const auto a = yb.download(), b = yb_solo.download();
        for (int r = 0; r < M; ++r)
            for (int n = 0; n < outs; ++n) EXPECT_EQ(a[size_t(r) * ldy + n], b[size_t(r) * ldy + n]) << r << "," << n;
        for (int r = 0; r < M; ++r)
            for (int n = 0; n < outs; ++n) got.push_back(bf2f(a[size_t(r) * ldy + n]));
    }
    const auto xr = from_bf(to_bf(x)), wr = from_bf(to_bf(w));
    auto dot = [&](int r, int n) {
        double s = 0;
        for (int k = 0; k < K; ++k) s += double(xr[size_t(r) * ldx + k]) * wr[size_t(n) * K + k];
        return s;
    };
    for (int r = 0; r < M; ++r)
        for (int n = 0; n < outs; ++n) {
            if (mode == 2) ref.push_back(silu_ref(dot(r, n)) * dot(r, n + outs));
            else if (mode == 1) ref.push_back(y0[size_t(r) * ldy + n] + dot(r, n));
            else ref.push_back(dot(r, n));
        }
    EXPECT_LT(rel_l2(ref, got), kTol);
}

TEST(CudaBatchGemv, EveryRowEqualsItsSoloGemv) {
    FROST_SKIP_WITHOUT_CUDA();
    // K = 1024 takes the tensor-core GEMV (lm_gemv_tc.cu), K = 1000 (not a multiple of 64) the
    // SIMT kernels; N and F that are not multiples of the 16-row tile leave a partial last tile.
    for (int K : {1024, 1000})
        for (int M : {2, 3, 5, 8})
            for (int mode : {0, 1, 2}) check(M, mode == 2 ? 2 * (K == 1024 ? 203 : 200) : 456, K, mode);
}

// The launcher's variants by shape (lm_gemv_tc.cu, pick_variant; on a 132-SM H100 / H200): 8-row
// blocks of 16 warps (N 1000: 63 tiles, at K 2048 with two steps per warp and at K 3584 with four,
// the last group partial: 56 steps), 16-row blocks of 16 warps (N 2000: 125 tiles, at K 1024 /
// 3584; N 2048 at K 4096; the SwiGLU pair of 2 x 1000 at K 4096), the 8-warp tiles (N 4096: 256).
TEST(CudaBatchGemv, NarrowAndWideVariantsAgree) {
    FROST_SKIP_WITHOUT_CUDA();
    const int shapes[][2] = {{1000, 2048}, {1000, 3584}, {2000, 3584}, {2048, 4096}, {4096, 4096}, {2000, 1024}};
    for (const auto& s : shapes)
        for (int M : {1, 4, 8}) {
            check(M, s[0], s[1], 0);
            check(M, s[0], s[1], 1);
        }
    for (int M : {1, 8}) check(M, 2 * 1000, 4096, 2);
}

TEST(CudaBatchGemv, RefusesMoreRowsThanTheBatch) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> dx(64 * 9), dw(64 * 8), dy(8 * 9);
    kernels::GemmBf16Params p{bf(dx), bf(dw), dy.get(), 64, 8, kernels::kGemvMaxRows + 1, 8, 64, 0, 0};
    EXPECT_EQ(kernels::gemv_launch(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace frost::test
#endif
