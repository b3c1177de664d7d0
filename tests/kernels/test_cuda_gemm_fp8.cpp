// FP8 block-scaled prefill GEMM (W8A8: 128x128 or per-row 1x128 weight blocks, 1x128 activation groups) against an
// fp64 reference. Exact case: every activation group is an e4m3 code times a power of two with
// one element at +-448 times it, so the on-the-fly quantization reproduces x bit for bit and the
// GEMM must match the reference to the tensor cores' accumulation (relative L2 <= 1e-3: Hopper's
// FP8 MMA accumulates each 128-k block in reduced precision before the scaled fp32 promotion,
// measured 2.2e-4 on the H100, 2026-11-24; a wrong scale layout is off by O(1)); distinct group and
// block scales make any scale-layout mistake visible. General case: random bf16 x, where the
// activation rounding to e4m3 bounds the error (relative L2 <= 5e-2, the per-element e4m3 step
// 2^-4 averaged over K). Outputs are poisoned first; residual accumulate and fp32 / bf16 out.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGemmFp8, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda_test_util.h"
#include "model/quant/dequant.h"
#include "util/fp8.h"

namespace frost::test {
namespace {

namespace K = frost::kernels;
namespace mq = frost::model::quant;

uint8_t random_fp8(std::mt19937& rng) {
    for (;;) {
        const uint8_t b = uint8_t(rng());
        if ((b & 0x7F) != 0x7F) return b;  // 0x7f / 0xff are NaN
    }
}

struct Lt {
    Dev<uint8_t> ws{K::kGemmWorkspaceBytes};
    K::GemmLt* lt = nullptr;
    Lt() { EXPECT_EQ(K::gemm_lt_create(ws.get(), K::kGemmWorkspaceBytes, &lt), cudaSuccess); }
    ~Lt() { K::gemm_lt_destroy(lt); }
};

// block_n: rows per weight scale, 128 (the checkpoint grid) or 1 (a fused matrix's per-row scales,
// uploaded through w_scale_rows_launch as the ops layer does).
// impl: the plan's GemmFp8Impl; variant >= 0 launches our wgmma kernel's pipeline variant directly.
// grid_rows (block_n 1): rows [0, grid_rows) share one scale per 128-row block, also handed over as
// the 128x128 grid (GemmFp8Params::grid_rows: the split plan), the rest keep their own per row.
void run_case(int M, int N, int Kd, bool exact, bool accumulate, bool out_f32, const char* name, int block_n = 128,
              int impl = K::kFp8ImplCublasLt, int variant = -1, int grid_rows = 0) {
    auto rng = fresh_rng(name);
    std::vector<uint8_t> w(size_t(N) * Kd);
    for (auto& b : w) b = random_fp8(rng);
    const int nb = (N + block_n - 1) / block_n, kb = Kd / 128;
    std::vector<float> ws(size_t(nb) * kb);
    std::uniform_real_distribution<float> pos(0.5f, 2.0f);
    for (auto& v : ws) v = pos(rng) / 448.0f;
    std::vector<float> grid(size_t(grid_rows / 128) * kb);
    for (auto& v : grid) v = pos(rng) / 448.0f;
    for (int n = 0; n < grid_rows; ++n)  // the per-row scales of the grid's rows: their block's
        for (int g = 0; g < kb; ++g) ws[size_t(n) * kb + g] = grid[size_t(n / 128) * kb + g];
    std::vector<float> wf(size_t(N) * Kd);
    mq::dequant_fp8_block(w.data(), ws.data(), N, Kd, block_n, 128, wf.data());
    std::vector<float> x(size_t(M) * Kd);
    if (exact) {
        for (int m = 0; m < M; ++m)
            for (int g = 0; g < kb; ++g) {
                const float s = std::ldexp(1.0f, int(rng() % 9) - 4);  // 2^-4 .. 2^4
                for (int e = 0; e < 128; ++e) x[size_t(m) * Kd + g * 128 + e] = util::e4m3_to_f32(random_fp8(rng)) * s;
                x[size_t(m) * Kd + g * 128 + int(rng() % 128)] = (rng() % 2 ? 448.0f : -448.0f) * s;
            }
    } else {
        x = uniform(rng, x.size(), -2, 2);
    }
    const auto y0 = uniform(rng, size_t(M) * N, -1, 1);  // the residual accumulate adds into this
    std::vector<double> ref(size_t(M) * N);
    const auto ref_rows = [&](int m0, int m1) {
        for (int m = m0; m < m1; ++m)
            for (int n = 0; n < N; ++n) {
                double acc = accumulate ? double(out_f32 ? y0[size_t(m) * N + n] : round_bf(y0[size_t(m) * N + n])) : 0.0;
                for (int k = 0; k < Kd; ++k) acc += double(x[size_t(m) * Kd + k]) * wf[size_t(n) * Kd + k];
                ref[size_t(m) * N + n] = acc;
            }
    };
    {  // the in_proj shape's reference is ~3e9 products: spread over the host's cores
        const int T = int(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
        std::vector<std::thread> pool;
        for (int t = 0; t < T; ++t) pool.emplace_back(ref_rows, M * t / T, M * (t + 1) / T);
        for (auto& th : pool) th.join();
    }
    Dev<uint16_t> dx(to_bf(x));
    Dev<uint8_t> dw(w), dxq(size_t(M) * Kd);
    Dev<float> dws(ws), dxs(K::act_scale_floats(M, Kd));
    Dev<float> dws_rows(block_n == 1 ? std::vector<float>(K::act_scale_floats(N, Kd), std::nanf("")) : std::vector<float>(1));
    Dev<float> dgrid(grid_rows ? grid : std::vector<float>(1));
    ASSERT_EQ(K::act_quant_fp8_launch(bf(dx), Kd, M, Kd, dxq.get(), dxs.get(), nullptr), cudaSuccess);
    Lt lt;
    K::GemmFp8Params p{};
    p.xq = dxq.get();
    p.x_scale = dxs.get();
    p.w = dw.get();
    p.w_scale = block_n == 1 ? dws_rows.get() : dws.get();
    p.w_block_n = block_n;
    p.grid_rows = grid_rows;
    p.w_grid_scale = grid_rows ? dgrid.get() : nullptr;
    p.ldy = N;
    p.M = M;
    p.N = N;
    p.K = Kd;
    p.out_f32 = out_f32 ? 1 : 0;
    p.accumulate = accumulate ? 1 : 0;
    p.impl = impl;
    K::GemmFp8Plan* plan = nullptr;
    int lt_status = 0;
    if (variant < 0) {
        ASSERT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan, &lt_status), cudaSuccess)
            << name << ": no block-scaled FP8 plan (impl " << impl << ", cuBLASLt status " << lt_status << ")";
        ASSERT_EQ(K::gemm_fp8_plan_impl(plan), impl) << name;
    }
    if (block_n == 1) {  // the per-row rows' scales only, from the plan's first per-row row (as the ops layer does)
        const int G = K::gemm_fp8_plan_grid_rows(plan);
        EXPECT_TRUE(G % 128 == 0 && G <= grid_rows && (grid_rows == 0 || G > 0)) << name << ": grid rows " << G;
        if (grid_rows) std::printf("[%s] split: %d rows block-scaled, %d per-row\n", name, G, N - G);
        ASSERT_EQ(K::w_scale_rows_launch(dws.get() + size_t(G) * kb, N - G, Kd, dws_rows.get(), nullptr), cudaSuccess);
    }
    const auto launch = [&] {
        return variant < 0 ? K::gemm_fp8_launch(plan, p, nullptr, &lt_status) : K::gemm_fp8_wgmma_launch(p, nullptr, variant);
    };
    std::vector<float> got, again;
    for (int run = 0; run < 2; ++run) {  // two runs: bitwise equal
        std::vector<float>& out = run ? again : got;
        if (out_f32) {
            Dev<float> y(accumulate ? y0 : std::vector<float>(y0.size(), std::nanf("")));
            p.y = y.get();
            ASSERT_EQ(launch(), cudaSuccess) << name << " status " << lt_status;
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name;
            out = y.download();
        } else {
            Dev<uint16_t> y(accumulate ? to_bf(y0) : std::vector<uint16_t>(y0.size(), 0x7FC0));
            p.y = y.get();
            ASSERT_EQ(launch(), cudaSuccess) << name << " status " << lt_status;
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name;
            out = from_bf(y.download());
        }
    }
    K::gemm_fp8_plan_destroy(plan);
    EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float))) << name << ": not deterministic";
    const double tol = exact ? (out_f32 ? 1e-3 : 1e-2) : 5e-2;
    std::printf("[%s] M %d N %d K %d: rel L2 %.3g\n", name, M, N, Kd, rel_l2(ref, got));
    EXPECT_LE(rel_l2(ref, got), tol) << name;
}

TEST(CudaGemmFp8, ExactActivationsMatchToFp32) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case(64, 256, 512, true, false, true, "fp8_exact_f32");
    run_case(200, 384, 1024, true, false, true, "fp8_exact_f32_odd_m");
    run_case(64, 384, 512, true, true, true, "fp8_exact_accumulate_k512_n384");
}
TEST(CudaGemmFp8, Bf16OutAndRandomActivations) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case(128, 512, 1024, true, true, false, "fp8_exact_bf16_residual");
    run_case(256, 512, 2048, false, false, true, "fp8_random_x");
}
// A fused matrix with per-row scales (the GDN in_proj: [qkv | z | b | a], b and a 32 rows each):
// VEC128 weight scales, every row its own; N not a multiple of 128.
TEST(CudaGemmFp8, PerRowWeightScales) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case(128, 320, 512, true, false, true, "fp8_rows_exact_f32", 1);
    run_case(256, 448, 1024, true, true, false, "fp8_rows_exact_bf16_residual", 1);
    run_case(192, 384, 2048, false, false, true, "fp8_rows_random_x", 1);
}
// The same fused matrix with its leading whole 128-row blocks also given as a 128x128 grid: the
// split plan (block-scaled rows, then per-row rows into the columns after them), on the 9B GDN
// in_proj's shape (K 4096, N 12352 = qkv 8192 | z 4096 | b 32 | a 32, grid 12288) and on
// small ones with residual accumulate and bf16 out. The reference dequantizes with the per-row
// scales: the grid must reproduce them.
TEST(CudaGemmFp8, PerRowWeightScalesWithGrid) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case(128, 320, 512, true, false, true, "fp8_grid_exact_f32", 1, K::kFp8ImplCublasLt, -1, 256);
    run_case(256, 448, 1024, true, true, false, "fp8_grid_exact_bf16_residual", 1, K::kFp8ImplCublasLt, -1, 384);
    run_case(64, 12352, 4096, true, false, true, "fp8_grid_in_proj_9b_exact_f32", 1, K::kFp8ImplCublasLt, -1, 12288);
    run_case(128, 12352, 4096, false, true, false, "fp8_grid_in_proj_9b_random_bf16_residual", 1, K::kFp8ImplCublasLt, -1,
             12288);
}
// Activation quantization against a host reference (scale = max|x| / 448 per row and 128-wide
// group, 1 for an all-zero group; q = e4m3 RNE-saturating of x / scale, bit for bit), through both kernels:
// 16-byte rows (act_quant16_kernel) and rows whose stride is not a multiple of 8 (the fallback).
// M not a multiple of the 32-row block.
TEST(CudaGemmFp8, ActQuantMatchesReferenceBothPaths) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("fp8_act_quant");
    const int M = 77, Kd = 384;
    std::vector<float> x = uniform(rng, size_t(M) * Kd, -3, 3);
    for (int e = 0; e < 128; ++e) x[size_t(5) * Kd + 128 + e] = 0.0f;  // an all-zero group
    // Groups where the kernels' division from one reciprocal (lm_act_quant.cuh e4m3_quotients)
    // could part from x / scale if it were not exact: e4m3 ties (v / scale = 1.0625, 2.125 with
    // scale 3), a huge amax beside tiny values of both signs (quotients far below e4m3's least
    // step, where -0 must stay 0x80), scales past the reciprocal's range (a subnormal one, one
    // near bf16's largest), and random magnitudes over 2^-60 .. 2^60 with random signs.
    auto group = [&](int m, int g) { return x.data() + size_t(m) * Kd + g * 128; };
    std::uniform_real_distribution<float> expo(-60.0f, 60.0f);
    for (int e = 0; e < 128; ++e) {
        const float sign = (e & 1) ? -1.0f : 1.0f;
        group(9, 0)[e] = e == 0 ? 1344.0f : sign * 3.0f * (e % 3 == 0 ? 1.0625f : 2.125f);  // scale 3
        group(10, 1)[e] = e == 0 ? round_bf(1e30f) : sign * round_bf(1e-30f * float(e));
        group(11, 2)[e] = round_bf(sign * 1e-38f * float(e % 7 + 1));  // amax / 448 subnormal
        group(12, 0)[e] = round_bf(sign * 3.0e38f * float(e % 5 + 1) / 5.0f);
        group(13, 1)[e] = round_bf(sign * std::exp2(expo(rng)));
    }
    std::vector<float> ref_s(K::act_scale_floats(M, Kd), 0.0f);
    std::vector<uint8_t> ref_q(size_t(M) * Kd);
    for (int m = 0; m < M; ++m)
        for (int g = 0; g < Kd / 128; ++g) {
            float amax = 0;
            for (int e = 0; e < 128; ++e) amax = std::max(amax, std::fabs(x[size_t(m) * Kd + g * 128 + e]));
            const float sc = amax > 0 ? amax / 448.0f : 1.0f;
            ref_s[size_t(g) * K::act_scale_ld(M) + m] = sc;
            for (int e = 0; e < 128; ++e)
                ref_q[size_t(m) * Kd + g * 128 + e] = util::f32_to_e4m3(x[size_t(m) * Kd + g * 128 + e] / sc);
        }
    for (const int ldx : {Kd, Kd + 4}) {
        std::vector<float> xp(size_t(M) * ldx, 0.0f);
        for (int m = 0; m < M; ++m)
            for (int k = 0; k < Kd; ++k) xp[size_t(m) * ldx + k] = x[size_t(m) * Kd + k];
        Dev<uint16_t> dx(to_bf(xp));
        Dev<uint8_t> q(std::vector<uint8_t>(size_t(M) * Kd, 0x7F));
        Dev<float> s(std::vector<float>(ref_s.size(), std::nanf("")));
        ASSERT_EQ(K::act_quant_fp8_launch(bf(dx), ldx, M, Kd, q.get(), s.get(), nullptr), cudaSuccess) << ldx;
        const auto got_q = q.download();
        const auto got_s = s.download();
        int bad_q = 0, bad_s = 0;
        for (size_t i = 0; i < ref_q.size(); ++i) bad_q += got_q[i] != ref_q[i];
        for (int g = 0; g < Kd / 128; ++g)
            for (int m = 0; m < M; ++m) {
                const size_t i = size_t(g) * K::act_scale_ld(M) + m;
                bad_s += !(got_s[i] == ref_s[i]);
            }
        EXPECT_EQ(bad_q, 0) << "ldx " << ldx;
        EXPECT_EQ(bad_s, 0) << "ldx " << ldx;
    }
}
TEST(CudaGemmFp8, RefusesBadShapes) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> x(64);
    Dev<uint8_t> q(64);
    Dev<float> s(64);
    EXPECT_EQ(K::act_quant_fp8_launch(bf(x), 64, 1, 64, q.get(), s.get(), nullptr), cudaErrorInvalidValue);  // K % 128
    Lt lt;
    K::GemmFp8Params p{};
    p.M = 4; p.N = 128; p.K = 100; p.ldy = 128;
    p.impl = K::kFp8ImplCublasLt;
    K::GemmFp8Plan* plan = nullptr;
    EXPECT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan), cudaErrorInvalidValue);
    p.K = 512;
    p.w_block_n = 64;  // rows per weight scale: 128 or 1
    EXPECT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan), cudaErrorInvalidValue);
    p.w_block_n = 128;
    // grid_rows: per-row weights only, whole 128-row blocks, below N.
    p.grid_rows = 128;
    EXPECT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan), cudaErrorInvalidValue);
    p.w_block_n = 1;
    p.grid_rows = 64;
    EXPECT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan), cudaErrorInvalidValue);
    p.grid_rows = 128;  // = N
    EXPECT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan), cudaErrorInvalidValue);
    {  // a split plan launched without the grid's scales
        K::GemmFp8Params g = p;
        g.M = 128; g.N = 320; g.ldy = 320; g.grid_rows = 256;
        ASSERT_EQ(K::gemm_fp8_plan_create(lt.lt, g, &plan), cudaSuccess);
        g.xq = q.get(); g.x_scale = s.get(); g.w = q.get(); g.w_scale = s.get(); g.y = x.get();
        EXPECT_EQ(K::gemm_fp8_launch(plan, g, nullptr), cudaErrorInvalidValue);
        K::gemm_fp8_plan_destroy(plan);
        plan = nullptr;
    }
    p.grid_rows = 0;
    p.w_block_n = 128;
    EXPECT_EQ(K::w_scale_rows_launch(s.get(), 4, 100, s.get() + 32, nullptr), cudaErrorInvalidValue);
    // K below kFp8MinK (wrong products from cuBLASLt, see lm_gemm_fp8.h) and shapes cuBLASLt has
    // no block-scaled algorithm for are "not supported" (the ops layer then dequantizes), never a
    // crash or a wrong result.
    p.K = 256;
    EXPECT_EQ(K::gemm_fp8_plan_create(lt.lt, p, &plan), cudaErrorNotSupported);
    for (auto [m, n] : {std::pair{77, 384}, std::pair{64, 300}}) {
        p.M = m;
        p.N = n;
        p.ldy = n;
        p.K = 512;
        const cudaError_t e = K::gemm_fp8_plan_create(lt.lt, p, &plan);
        EXPECT_TRUE(e == cudaErrorNotSupported || e == cudaSuccess) << m << "x" << n << ": " << cudaGetErrorString(e);
        if (e == cudaSuccess) {
            K::gemm_fp8_plan_destroy(plan);
            run_case(m, n, 512, true, false, true, "fp8_exact_unusual_shape");  // then it must be right
        }
    }
}

// Our TMA + wgmma kernel (lm_gemm_fp8_wgmma.cu) against the same fp64 reference and tolerances.
// Shapes: M not a multiple of the 128-row tile, N not a multiple of 128 (the weight's last block
// partial), K below cuBLASLt's minimum, K = 4096 and 12288 (the 9B's), more tiles than SMs (the
// persistent loop's second round and the ring's phases across tiles).
TEST(CudaGemmFp8Wgmma, ExactActivationsMatchToFp32) {
    FROST_SKIP_WITHOUT_CUDA();
    const int w = K::kFp8ImplWgmma;
    run_case(64, 256, 512, true, false, true, "wg_exact_f32", 128, w);
    run_case(200, 384, 1024, true, false, true, "wg_exact_f32_odd_m", 128, w);
    run_case(64, 320, 256, true, true, true, "wg_exact_accumulate_k256_n320", 128, w);
    run_case(77, 128, 128, true, false, true, "wg_exact_k128_m77", 128, w);
    run_case(300, 384, 4096, true, false, true, "wg_exact_k4096", 128, w);
    run_case(130, 256, 12288, true, true, true, "wg_exact_accumulate_k12288", 128, w);
}
TEST(CudaGemmFp8Wgmma, Bf16OutRandomActivationsAndManyTiles) {
    FROST_SKIP_WITHOUT_CUDA();
    const int w = K::kFp8ImplWgmma;
    run_case(128, 512, 1024, true, true, false, "wg_exact_bf16_residual", 128, w);
    run_case(256, 512, 2048, false, false, true, "wg_random_x", 128, w);
    run_case(333, 256, 4096, false, false, false, "wg_random_x_bf16_k4096", 128, w);
    run_case(1100, 2560, 512, true, false, true, "wg_exact_many_tiles", 128, w);  // 9 x 20 = 180 tiles
}
// Every pipeline variant the bench sweeps computes the same products.
TEST(CudaGemmFp8Wgmma, PipelineVariants) {
    FROST_SKIP_WITHOUT_CUDA();
    for (int v = 0; v < K::kFp8WgmmaVariants; ++v) {
        const std::string name = "wg_variant_" + std::to_string(v);
        run_case(1100, 2560, 384, true, true, false, name.c_str(), 128, K::kFp8ImplWgmma, v);
        run_case(100, 256, 1024, true, false, true, (name + "_k1024").c_str(), 128, K::kFp8ImplWgmma, v);
        run_case(300, 384, 640, false, false, false, (name + "_odd_row_units").c_str(), 128, K::kFp8ImplWgmma, v);
    }
}
// The variants differ only in scheduling (clusters, stages, the overlapped epilogue): each must
// give variant 0's output bit for bit, fresh operands, bf16 residual and fp32 out. Shapes: row and
// column tiles odd (a 2x2 cluster's tiles past M and past N), and more tiles than SMs with K 4096
// (the overlapped epilogue crosses tiles, the residual prefetch runs on many rows).
TEST(CudaGemmFp8Wgmma, VariantsBitwiseEqual) {
    FROST_SKIP_WITHOUT_CUDA();
    struct Case { int M, N, K; bool accumulate, out_f32; };
    for (const Case c : {Case{300, 384, 1024, true, false}, Case{333, 640, 512, false, true},
                         Case{1536, 2688, 4096, true, false}}) {
        auto rng = fresh_rng("wg_variants_bitwise");
        std::vector<uint8_t> x(size_t(c.M) * c.K), w(size_t(c.N) * c.K);
        for (auto& b : x) b = random_fp8(rng);
        for (auto& b : w) b = random_fp8(rng);
        std::uniform_real_distribution<float> pos(0.25f, 4.0f);
        std::vector<float> xs(K::act_scale_floats(c.M, c.K)), ws(size_t((c.N + 127) / 128) * (c.K / 128));
        for (auto& v : xs) v = pos(rng) / 448.0f;
        for (auto& v : ws) v = pos(rng) / 448.0f;
        const auto y0 = uniform(rng, size_t(c.M) * c.N, -4, 4);
        Dev<uint8_t> dx(x), dw(w);
        Dev<float> dxs(xs), dws(ws);
        K::GemmFp8Params p{};
        p.xq = dx.get(); p.x_scale = dxs.get(); p.w = dw.get(); p.w_scale = dws.get();
        p.ldy = c.N; p.M = c.M; p.N = c.N; p.K = c.K;
        p.out_f32 = c.out_f32; p.accumulate = c.accumulate;
        const auto run = [&](int v) {
            std::vector<float> out;
            if (c.out_f32) {
                Dev<float> y(c.accumulate ? y0 : std::vector<float>(y0.size(), std::nanf("")));
                p.y = y.get();
                EXPECT_EQ(K::gemm_fp8_wgmma_launch(p, nullptr, v), cudaSuccess) << "variant " << v;
                EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "variant " << v;
                out = y.download();
            } else {
                Dev<uint16_t> y(c.accumulate ? to_bf(y0) : std::vector<uint16_t>(y0.size(), 0x7FC0));
                p.y = y.get();
                EXPECT_EQ(K::gemm_fp8_wgmma_launch(p, nullptr, v), cudaSuccess) << "variant " << v;
                EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "variant " << v;
                out = from_bf(y.download());
            }
            return out;
        };
        const std::vector<float> base = run(0);
        size_t nan = 0;
        for (float v : base) nan += std::isnan(v) ? 1 : 0;
        EXPECT_EQ(nan, 0u) << "variant 0 left outputs unwritten, M " << c.M << " N " << c.N;
        for (int v = 1; v < K::kFp8WgmmaVariants; ++v) {
            const std::vector<float> got = run(v);
            size_t diff = 0;
            for (size_t i = 0; i < got.size(); ++i) diff += std::memcmp(&got[i], &base[i], sizeof(float)) != 0 ? 1 : 0;
            EXPECT_EQ(diff, 0u) << "variant " << v << " differs from variant 0 in " << diff << " of " << got.size()
                                << " outputs, M " << c.M << " N " << c.N << " K " << c.K;
        }
    }
}
// Selection: an explicit impl, FROST_FP8_GEMM for the automatic one; per-row weight scales
// (w_block_n 1) are not ours.
TEST(CudaGemmFp8Wgmma, Selection) {
    FROST_SKIP_WITHOUT_CUDA();
    Lt lt;
    K::GemmFp8Params p{};
    p.M = 256; p.N = 512; p.K = 1024; p.ldy = 512;
    const auto impl_of = [&](int impl) {
        p.impl = impl;
        K::GemmFp8Plan* plan = nullptr;
        const cudaError_t e = K::gemm_fp8_plan_create(lt.lt, p, &plan);
        const int got = e == cudaSuccess ? K::gemm_fp8_plan_impl(plan) : -int(e);
        K::gemm_fp8_plan_destroy(plan);
        return got;
    };
    EXPECT_EQ(impl_of(K::kFp8ImplWgmma), K::kFp8ImplWgmma);
    EXPECT_EQ(impl_of(K::kFp8ImplCublasLt), K::kFp8ImplCublasLt);
    const char* old = std::getenv("FROST_FP8_GEMM");
    const std::string saved = old ? old : "";
    setenv("FROST_FP8_GEMM", "wgmma", 1);
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), K::kFp8ImplWgmma);
    setenv("FROST_FP8_GEMM", "cublaslt", 1);
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), K::kFp8ImplCublasLt);
    p.w_block_n = 1;
    EXPECT_EQ(impl_of(K::kFp8ImplWgmma), -int(cudaErrorNotSupported));
    setenv("FROST_FP8_GEMM", "wgmma", 1);  // asked for, but not ours: cuBLASLt
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), K::kFp8ImplCublasLt);
    p.w_block_n = 128;
    p.K = 256;  // below cuBLASLt's minimum: ours runs it
    EXPECT_EQ(impl_of(K::kFp8ImplWgmma), K::kFp8ImplWgmma);
    EXPECT_EQ(impl_of(K::kFp8ImplCublasLt), -int(cudaErrorNotSupported));
    // The measured default: ours on the narrow-N shapes (the 9B's down / out_proj at a 2048-row
    // chunk), cuBLASLt on the wide ones; FROST_FP8_GEMM=cublas keeps cuBLASLt everywhere.
    unsetenv("FROST_FP8_GEMM");
    p.M = 2048; p.N = 4096; p.K = 12288; p.ldy = 4096;
    const int narrow = K::kFp8PreferWgmmaNarrow ? K::kFp8ImplWgmma : K::kFp8ImplCublasLt;
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), narrow);
    p.K = 4096;
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), narrow);
    p.N = 24576; p.ldy = 24576;
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), K::kFp8ImplCublasLt);
    p.N = 4096; p.ldy = 4096;
    setenv("FROST_FP8_GEMM", "cublas", 1);
    EXPECT_EQ(impl_of(K::kFp8ImplAuto), K::kFp8ImplCublasLt);
    if (old) setenv("FROST_FP8_GEMM", saved.c_str(), 1); else unsetenv("FROST_FP8_GEMM");
}

}  // namespace
}  // namespace frost::test
#endif
