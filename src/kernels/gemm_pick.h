// Which of cuBLASLt's first answers for a bf16 GEMM shape the engine's plan takes (lm_gemm.cu's
// gemm_plan_create). Host-only arithmetic on what the heuristic reports, so the CPU tests check it.
//
// Why not always its first answer: on Hopper the heuristic ranks its nvjet kernels without
// regard to how their output tiles fill the last wave of SMs. Measured on the H200 (2026-12-03,
// `bench_cuda_kernels --gemm 1024 0.8b`, random operands, TFLOP/s at ranks 0-3, cuBLASLt of CUDA
// 13.0): the 0.8B's MLP gate|up at 1024 rows (N 7168, K 1024) 528 / 540 / 608 / 581 with tiles
// 256x128 / 128x256 / 112x128 / 448x64: the first two make 224 tiles, 1.70 waves of 132 SMs (85 %
// of the last wave's slots busy), the other two 512 and 256 tiles (97 %). So a first answer that
// leaves more than a tenth of its last wave idle gives way to the first answer among the next few
// that fills it best. The choice is a function of the shape and of what the heuristic reports, so
// a process and its restarts take the same algorithm (timing-based autotuning would not, and the
// GEMM's bits follow its algorithm: capsules and replay need them equal).
// K split was measured too and is not taken: the same call's N = 1024 projections with K split 2, 3
// or 4 ways (CUBLASLT_ALGO_CONFIG_SPLITK_NUM, reduced in the compute or output type) ran 259-347
// against 374-499 TFLOP/s unsplit. Our own split K was built and dropped too (2026-12-04, sixty-fourth
// session, H200): 128 x 128 tiles on the gate|up GEMM's TMA ring, K split over a cluster of 2 or 4
// CTAs whose fp32 partials were added through distributed shared memory. us at 1024 rows, the
// residual epilogue, cuBLASLt / unsplit / 2 / 4 ways: down (K 3584) 16.1 / 33.0 / 22.2 / 41.8,
// out_proj (K 2048) 11.5 / 24.6 / 17.2 / 34.9; the 0.8B's 1k prompt 3.05-3.08 -> 3.33-3.35 ms. Even
// unsplit, one CTA took ~0.6 us per 64-wide k step (32 KB of operands), most likely what one SM
// draws from L2: a 128 x 128 tile fed without multicast keeps the tensor cores about half busy. It
// was not committed; a split that could win would start from a tile whose operands arrive by
// multicast.
#pragma once

#include <cmath>

namespace frost::kernels {

constexpr int kGemmPickCandidates = 4;   // heuristic answers considered
constexpr double kGemmPickMinFill = 0.9; // the first answer stays when its last wave is this full
constexpr double kGemmPickTolerance = 0.02;

// The share of the last wave's SM slots a kernel's tiles occupy (waves: tiles over the SMs'
// concurrent tiles, cuBLASLt's wavesCount); 0 when unknown (waves <= 0).
inline double gemm_wave_fill(float waves) {
    return waves > 0.0f ? static_cast<double>(waves) / std::ceil(static_cast<double>(waves)) : 0.0;
}

// waves[i]: the heuristic's wavesCount of its answer i, n answers. Returns the answer to take: 0
// unless answer 0 runs at least one full wave and fills less than kGemmPickMinFill of its last
// one (a shape below one wave has idle SMs whatever the tile, and the heuristic already weighs
// splitting those); then the first answer whose fill is within kGemmPickTolerance of the best.
inline int gemm_pick_rank(const float* waves, int n) {
    if (n <= 1 || waves[0] < 1.0f || gemm_wave_fill(waves[0]) >= kGemmPickMinFill) return 0;
    const int m = n < kGemmPickCandidates ? n : kGemmPickCandidates;
    double best = 0.0;
    for (int i = 0; i < m; ++i) best = std::fmax(best, gemm_wave_fill(waves[i]));
    for (int i = 0; i < m; ++i)
        if (gemm_wave_fill(waves[i]) >= best - kGemmPickTolerance) return i;
    return 0;
}

// The fused gate|up + SwiGLU GEMM's column tile (lm_gemm_swiglu.cu): 112 or 128 output columns
// per item (128-row items, M rows, F columns, on `sms` SMs). Its cost model is the columns the
// busiest SM computes, ceil(items / sms) x tile; 112 only where that is kSwigluTileMargin fewer,
// since per column m64n224 runs slower than m64n256 (H200, 2026-12-04, bench_cuda_kernels
// --swiglu: the 9B's 4096 rows, 3024 against 3072 columns, 1254.6 against 1210.3 us; the 0.8B's
// 1024 rows, 224 against 256 columns, 28.0 against 29.4 us).
constexpr double kSwigluTileMargin = 0.95;
inline int gemm_swiglu_tile(int M, int F, int sms) {
    if (M <= 0 || F <= 0 || sms <= 0) return 128;
    auto cost = [&](int tile) {
        const long long items = static_cast<long long>((M + 127) / 128) * ((F + tile - 1) / tile);
        return static_cast<double>((items + sms - 1) / sms * tile);
    };
    return cost(112) < kSwigluTileMargin * cost(128) ? 112 : 128;
}

}  // namespace frost::kernels
