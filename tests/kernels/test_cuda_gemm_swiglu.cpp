// The dense gate|up GEMM with SwiGLU in its epilogue (lm_gemm_swiglu.h, sm_90a) against what it
// replaces, the cuBLASLt projection followed by the SwiGLU kernel (equal but where a different
// summation order rounds g or u to the neighbouring bf16), and against an fp64 product of the
// same bf16 operands; at both column tiles, with M, F and K off the tile grids, padded row strides
// (nothing written into the padding or past M), two runs bitwise equal, and each row's bits
// independent of the rows launched beside it (the engine's chunk invariance relies on that).
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGemmSwiglu, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_gemm_swiglu.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

bool sm90a() {
    cudaDeviceProp prop{};
    return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major == 9 && prop.minor == 0;
}

struct Shape {
    int M, F, K;
    int64_t ldx, ldy;
};

struct Operands {
    std::vector<float> x, w;  // bf16-exact
    Dev<uint16_t> dx, dw;
    Operands(std::mt19937& rng, const Shape& s)
        : x(uniform(rng, size_t(s.M) * s.ldx, -1, 1)), w(uniform(rng, size_t(2) * s.F * s.K, -0.5f, 0.5f)),
          dx(to_bf(x)), dw(to_bf(w)) {}
};

kernels::GemmBf16Params params(const Operands& o, const Shape& s, void* y, int M, int64_t row0 = 0) {
    return kernels::GemmBf16Params{bf(o.dx) + row0 * s.ldx, bf(o.dw), y, s.ldx, s.ldy, M, 2 * s.F, s.K, 0, 0};
}

// The unfused path: cuBLASLt's [M, 2F] projection, then the SwiGLU kernel into [M, F] (contiguous).
void unfused(const Operands& o, const Shape& s, std::vector<uint16_t>* out) {
    Dev<uint16_t> proj(size_t(s.M) * 2 * s.F), y(size_t(s.M) * s.F);
    Dev<uint8_t> ws(kernels::kGemmWorkspaceBytes);
    kernels::GemmLt* lt = nullptr;
    kernels::GemmPlan* plan = nullptr;
    const kernels::GemmBf16Params g{bf(o.dx), bf(o.dw), proj.get(), s.ldx, 2 * s.F, s.M, 2 * s.F, s.K, 0, 0};
    CUDA_OK(kernels::gemm_lt_create(ws.get(), ws.size(), &lt));
    CUDA_OK(kernels::gemm_plan_create(lt, g, &plan));
    CUDA_OK(kernels::gemm_launch(plan, g, nullptr));
    kernels::SwigluBf16Params sw{bf(proj), bf(y), s.F, s.M, nullptr};
    CUDA_OK(kernels::swiglu_launch(sw, nullptr));
    kernels::gemm_plan_destroy(plan);
    kernels::gemm_lt_destroy(lt);
    *out = y.download();
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

void check_shape(const Shape& s, int tile, const char* name) {
    SCOPED_TRACE(std::string(name) + " tile " + std::to_string(tile));
    auto rng = fresh_rng(name);
    const Operands o(rng, s);
    const int pad_rows = 3;  // rows past M, poisoned: nothing may land there
    Dev<uint16_t> y1(size_t(s.M + pad_rows) * s.ldy), y2(size_t(s.M + pad_rows) * s.ldy);
    CUDA_OK(kernels::gemm_swiglu_launch(params(o, s, y1.get(), s.M), nullptr, tile));
    CUDA_OK(kernels::gemm_swiglu_launch(params(o, s, y2.get(), s.M), nullptr, tile));
    const std::vector<uint16_t> a = y1.download();
    EXPECT_EQ(a, y2.download()) << "two runs";
    for (int m = 0; m < s.M + pad_rows; ++m)
        for (int64_t c = m < s.M ? s.F : 0; c < s.ldy; ++c)
            ASSERT_EQ(a[size_t(m) * s.ldy + c], 0xFFFF) << "wrote row " << m << " column " << c;

    // Against the unfused path, every element.
    std::vector<uint16_t> ref_bits;
    unfused(o, s, &ref_bits);
    ASSERT_FALSE(ref_bits.empty());
    const std::vector<float> got = from_bf(a), ref = from_bf(ref_bits);
    size_t differ = 0;
    for (int m = 0; m < s.M; ++m)
        for (int c = 0; c < s.F; ++c) {
            const float g = got[size_t(m) * s.ldy + c], r = ref[size_t(m) * s.F + c];
            ASSERT_TRUE(std::isfinite(g)) << "row " << m << " column " << c;
            if (g == r) continue;
            ++differ;
            // One bf16 step of g or u moves the output by about one step of its own (a few at most).
            EXPECT_LE(std::fabs(g - r), std::ldexp(std::max(std::fabs(g), std::fabs(r)), -6) + 1e-6)
                << "row " << m << " column " << c << ": " << g << " against " << r;
        }
    const double frac = double(differ) / (double(s.M) * s.F);
    std::printf("gemm+swiglu %s tile %d: %zu of %lld outputs differ from cuBLASLt + SwiGLU (%.2e)\n", name, tile, differ,
                (long long)s.M * s.F, frac);
    EXPECT_LE(frac, 0.01) << "more than rounding-order differences";

    // Against fp64 on a sample of rows (the first, the last and some between).
    std::vector<double> exact;
    std::vector<float> sampled;
    for (int m = 0; m < s.M; m += std::max(1, s.M / 24)) {
        for (int c = 0; c < s.F; ++c) {
            double gate = 0, up = 0;
            for (int k = 0; k < s.K; ++k) {
                const double xv = o.x[size_t(m) * s.ldx + k];
                gate += xv * o.w[size_t(c) * s.K + k];
                up += xv * o.w[size_t(s.F + c) * s.K + k];
            }
            exact.push_back(silu(gate) * up);
            sampled.push_back(got[size_t(m) * s.ldy + c]);
        }
    }
    EXPECT_LE(rel_l2(exact, sampled), 1e-2);
}

TEST(CudaGemmSwiglu, MatchesProjectionThenSwiglu) {
    FROST_SKIP_WITHOUT_CUDA();
    if (!sm90a()) GTEST_SKIP() << "an sm_90a kernel";
    for (int tile : {112, 128}) {
        check_shape({1024, 3584, 1024, 1024, 3584}, tile, "0.8b gate|up");  // the 0.8B's MLP at 1k rows
        check_shape({333, 264, 136, 200, 272}, tile, "off-grid");           // M, F, K off every tile, padded strides
        check_shape({64, 120, 64, 64, 128}, tile, "one tile");
        check_shape({130, 232, 2048, 2048 + 8, 232}, tile, "long K");
        check_shape({200, 136, 64, 64, 136}, tile, "one k step");
    }
}

// A row's bits do not depend on the rows launched with it: rows [r0, r0 + n) of x launched alone
// (M = n, x from row r0) equal the same rows of a launch over all M.
TEST(CudaGemmSwiglu, RowsDoNotDependOnTheLaunch) {
    FROST_SKIP_WITHOUT_CUDA();
    if (!sm90a()) GTEST_SKIP() << "an sm_90a kernel";
    const Shape s{700, 352, 512, 512, 352};
    auto rng = fresh_rng("GemmSwigluRows");
    const Operands o(rng, s);
    for (int tile : {112, 128}) {
        Dev<uint16_t> all(size_t(s.M) * s.ldy);
        CUDA_OK(kernels::gemm_swiglu_launch(params(o, s, all.get(), s.M), nullptr, tile));
        const auto whole = all.download();
        for (const auto& [r0, n] : {std::pair{0, 1}, std::pair{0, 97}, std::pair{128, 300}, std::pair{333, 367}, std::pair{699, 1}}) {
            Dev<uint16_t> part(size_t(n) * s.ldy);
            CUDA_OK(kernels::gemm_swiglu_launch(params(o, s, part.get(), n, r0), nullptr, tile));
            const auto p = part.download();
            EXPECT_EQ(0, std::memcmp(p.data(), whole.data() + size_t(r0) * s.ldy, p.size() * sizeof(uint16_t)))
                << "rows " << r0 << " + " << n << " tile " << tile;
        }
    }
}

TEST(CudaGemmSwiglu, RefusesWhatItCannotRun) {
    FROST_SKIP_WITHOUT_CUDA();
    if (!sm90a()) {
        Dev<uint16_t> b(64);
        const kernels::GemmBf16Params p{bf(b), bf(b), b.get(), 8, 8, 1, 16, 8, 0, 0};
        EXPECT_EQ(kernels::gemm_swiglu_launch(p, nullptr), cudaErrorNotSupported);
        return;
    }
    Dev<uint16_t> x(64 * 64), w(2 * 64 * 64), y(64 * 64);
    const kernels::GemmBf16Params ok{bf(x), bf(w), y.get(), 64, 64, 64, 128, 64, 0, 0};
    EXPECT_TRUE(kernels::gemm_swiglu_supported(ok));
    auto refused = [&](kernels::GemmBf16Params p, const char* what) {
        EXPECT_FALSE(kernels::gemm_swiglu_supported(p)) << what;
        EXPECT_EQ(kernels::gemm_swiglu_launch(p, nullptr), cudaErrorInvalidValue) << what;
    };
    auto p = ok;
    p.N = 120;  // F = 60: not a multiple of 8
    refused(p, "F % 8");
    p = ok;
    p.K = 60;
    refused(p, "K % 8");
    p = ok;
    p.x = bf(x) + 4;
    refused(p, "unaligned x");
    p = ok;
    p.out_f32 = 1;
    refused(p, "fp32 out");
    p = ok;
    p.accumulate = 1;
    refused(p, "accumulate");
    p = ok;
    p.y = nullptr;
    refused(p, "no y");
    EXPECT_EQ(kernels::gemm_swiglu_launch(ok, nullptr, 96), cudaErrorInvalidValue) << "no such tile";
    // The tile pick: the 0.8B's F = 3584 at 1024 rows fills 1.94 waves of 132 SMs with 112 columns, 1.70 with 128.
    EXPECT_EQ(kernels::gemm_swiglu_pick_tile(1024, 3584, 132), 112);
    EXPECT_EQ(kernels::gemm_swiglu_pick_tile(1024, 4096, 132), 128);  // 256 items: 2 rounds of 128 against 3 x 112
}

}  // namespace
}  // namespace frost::test
#endif
