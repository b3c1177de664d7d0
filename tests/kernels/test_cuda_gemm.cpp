// CUDA GEMMs: cuBLASLt plans (bf16 / fp32 out, fused residual accumulate, strided x) and the
// decode GEMV against an fp64 product of the same bf16 operands; two runs bitwise equal.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGemm, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

constexpr double kBf16Tol = 1e-2;
constexpr double kF32Tol = 1e-4;

struct Shape {
    int M, N, K;
    int64_t ldx, ldy;
    bool out_f32, accumulate, gemv;
};

void run_shape(const Shape& s, const char* name) {
    auto rng = fresh_rng(name);
    auto x = uniform(rng, s.M * s.ldx, -1, 1);
    auto w = uniform(rng, static_cast<size_t>(s.N) * s.K, -1, 1);
    auto y0 = uniform(rng, s.M * s.ldy, -4, 4);
    Dev<uint16_t> dx(to_bf(x)), dw(to_bf(w));
    Dev<float> dyf(s.M * s.ldy), dyf2(s.M * s.ldy);
    Dev<uint16_t> dyb(s.M * s.ldy), dyb2(s.M * s.ldy);
    if (s.accumulate) {
        dyf.upload(y0);
        dyf2.upload(y0);
        dyb.upload(to_bf(y0));
        dyb2.upload(to_bf(y0));
    }
    Dev<uint8_t> ws(kernels::kGemmWorkspaceBytes);
    kernels::GemmLt* lt = nullptr;
    kernels::GemmPlan* plan = nullptr;
    kernels::GemmBf16Params p{bf(dx), bf(dw), nullptr, s.ldx, s.ldy, s.M, s.N, s.K, s.out_f32, s.accumulate};
    if (!s.gemv) {
        CUDA_OK(kernels::gemm_lt_create(ws.get(), ws.size(), &lt));
        CUDA_OK(kernels::gemm_plan_create(lt, p, &plan));
    }
    for (int run = 0; run < 2; ++run) {
        p.y = s.out_f32 ? static_cast<void*>(run ? dyf2.get() : dyf.get()) : static_cast<void*>(run ? dyb2.get() : dyb.get());
        CUDA_OK(s.gemv ? kernels::gemv_launch(p, nullptr) : kernels::gemm_launch(plan, p, nullptr));
    }
    kernels::gemm_plan_destroy(plan);
    kernels::gemm_lt_destroy(lt);
    std::vector<float> y = s.out_f32 ? dyf.download() : from_bf(dyb.download());
    if (s.out_f32) {
        EXPECT_EQ(0, std::memcmp(y.data(), dyf2.download().data(), y.size() * sizeof(float)));
    } else {
        EXPECT_EQ(dyb.download(), dyb2.download());
    }
    std::vector<double> ref;
    std::vector<float> got;
    for (int m = 0; m < s.M; ++m)
        for (int n = 0; n < s.N; ++n) {
            double acc = s.accumulate ? (s.out_f32 ? y0[m * s.ldy + n] : round_bf(y0[m * s.ldy + n])) : 0.0;
            for (int k = 0; k < s.K; ++k) acc += double(x[m * s.ldx + k]) * w[static_cast<size_t>(n) * s.K + k];
            ref.push_back(acc);
            got.push_back(y[m * s.ldy + n]);
        }
    EXPECT_LE(rel_l2(ref, got), s.out_f32 ? kF32Tol : kBf16Tol) << name;
    if (s.ldy > s.N && !s.accumulate) {
        EXPECT_TRUE(std::isnan(y[s.N])) << "wrote into the row padding";
    }
}

TEST(CudaGemm, LtBf16Out) {
    FROST_SKIP_WITHOUT_CUDA();
    run_shape({37, 320, 512, 512 + 64, 320, false, false, false}, "LtBf16");
}
TEST(CudaGemm, LtF32OutStrided) {
    FROST_SKIP_WITHOUT_CUDA();
    run_shape({16, 2048, 4096, 4096, 2048 + 64, true, false, false}, "LtF32");
}
TEST(CudaGemm, LtResidualAccumulate) {
    FROST_SKIP_WITHOUT_CUDA();
    run_shape({64, 256, 1024, 1024, 256, false, true, false}, "LtAccum");
}
TEST(CudaGemm, GemvBf16AndF32) {
    FROST_SKIP_WITHOUT_CUDA();
    run_shape({1, 1000, 4096, 4096, 1000, false, false, true}, "GemvBf16");
    run_shape({1, 777, 12288, 12288, 800, true, true, true}, "GemvF32Accum");
}

// gemm_plan_create_row_invariant (EngineOptions::chunk_invariant): the first rows of x, launched as
// M = 64 ... 4096 rows with a plan made for each M, get the same bits as in the largest launch;
// the fp32-out and residual forms too. Shapes of the 0.8B / 9B projections, whose small-M plans
// the plain heuristic serves with other algorithms (split-K among them).
void expect_rows_invariant(int N, int K, bool out_f32, bool accumulate, const char* name) {
    SCOPED_TRACE(testing::Message() << name << ": N " << N << " K " << K << " f32 " << out_f32 << " acc " << accumulate);
    constexpr int kRows[] = {64, 128, 320, 1088, 4096};
    constexpr int kMaxRows = 4096;
    auto rng = fresh_rng(name);
    const auto x = to_bf(uniform(rng, static_cast<size_t>(kMaxRows) * K, -1, 1));
    const auto w = to_bf(uniform(rng, static_cast<size_t>(N) * K, -1, 1));
    const auto y0 = uniform(rng, static_cast<size_t>(kMaxRows) * N, -4, 4);
    Dev<uint16_t> dx(x), dw(w);
    Dev<uint8_t> ws(kernels::kGemmWorkspaceBytes);
    kernels::GemmLt* lt = nullptr;
    CUDA_OK(kernels::gemm_lt_create(ws.get(), ws.size(), &lt));
    const size_t elem = out_f32 ? sizeof(float) : sizeof(uint16_t);
    std::vector<std::vector<uint8_t>> outs;
    for (int M : kRows) {
        Dev<uint8_t> dy(static_cast<size_t>(M) * N * elem);
        if (accumulate) {
            if (out_f32) {
                cudaMemcpy(dy.get(), y0.data(), static_cast<size_t>(M) * N * elem, cudaMemcpyHostToDevice);
            } else {
                const auto yb = to_bf(std::vector<float>(y0.begin(), y0.begin() + static_cast<size_t>(M) * N));
                cudaMemcpy(dy.get(), yb.data(), yb.size() * elem, cudaMemcpyHostToDevice);
            }
        }
        kernels::GemmBf16Params p{bf(dx), bf(dw), dy.get(), K, N, M, N, K, out_f32, accumulate};
        kernels::GemmPlan* plan = nullptr;
        CUDA_OK(kernels::gemm_plan_create_row_invariant(lt, p, kernels::kGemmRowInvariantRefRows, &plan));
        CUDA_OK(kernels::gemm_launch(plan, p, nullptr));
        kernels::gemm_plan_destroy(plan);
        outs.push_back(dy.download());
    }
    kernels::gemm_lt_destroy(lt);
    const std::vector<uint8_t>& all = outs.back();
    for (size_t i = 0; i + 1 < outs.size(); ++i) {
        const size_t bytes = outs[i].size();
        EXPECT_EQ(0, std::memcmp(outs[i].data(), all.data(), bytes)) << "rows of the " << kRows[i] << "-row launch";
    }
    // And the values are the product (the plan is a real GEMM, not just a consistent one).
    std::vector<double> ref;
    std::vector<float> got;
    for (int m = 0; m < kMaxRows; m += 509)
        for (int n = 0; n < N; n += 7) {
            double acc = accumulate ? (out_f32 ? y0[static_cast<size_t>(m) * N + n] : round_bf(y0[static_cast<size_t>(m) * N + n])) : 0.0;
            for (int k = 0; k < K; ++k)
                acc += double(bf2f(x[static_cast<size_t>(m) * K + k])) * bf2f(w[static_cast<size_t>(n) * K + k]);
            ref.push_back(acc);
            const size_t at = static_cast<size_t>(m) * N + n;
            float v = 0;
            if (out_f32) std::memcpy(&v, all.data() + at * sizeof(float), sizeof(float));
            else {
                uint16_t b = 0;
                std::memcpy(&b, all.data() + at * sizeof(uint16_t), sizeof(uint16_t));
                v = bf2f(b);
            }
            got.push_back(v);
        }
    EXPECT_LE(rel_l2(ref, got), out_f32 ? kF32Tol : kBf16Tol);
}

TEST(CudaGemm, RowInvariantPlansGiveEachRowTheSameBitsAtEveryM) {
    FROST_SKIP_WITHOUT_CUDA();
    expect_rows_invariant(6144, 1024, false, false, "RowInvariant08bInProj");
    expect_rows_invariant(1024, 3584, false, true, "RowInvariant08bDownResidual");
    expect_rows_invariant(12288, 4096, false, false, "RowInvariant9bGateUp");
    expect_rows_invariant(256, 1024, true, false, "RowInvariantF32Out");
}

}  // namespace
}  // namespace frost::test
#endif
