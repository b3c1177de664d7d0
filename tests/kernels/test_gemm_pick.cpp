// Which cuBLASLt answer the engine's bf16 GEMM plan takes (kernels/gemm_pick.h), on the wavesCount
// lists the H200's heuristic reported for the 0.8B's prefill GEMMs at 1024 rows, and on the rule's
// edges; and the fused gate|up + SwiGLU GEMM's column tile. The plans and the GEMM run in the CUDA
// tests; these are the choices, which need no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/gemm_pick.h"

namespace frost::kernels {
namespace {

TEST(GemmPick, WaveFill) {
    EXPECT_DOUBLE_EQ(gemm_wave_fill(2.0f), 1.0);
    EXPECT_NEAR(gemm_wave_fill(1.7f), 0.85, 1e-6);
    EXPECT_NEAR(gemm_wave_fill(0.5f), 0.5, 1e-6);
    EXPECT_EQ(gemm_wave_fill(0.0f), 0.0);
    EXPECT_EQ(gemm_wave_fill(-1.0f), 0.0);
}

// The 0.8B's gate|up (N 7168, K 1024): tiles 256x128 / 128x256 / 112x128 / 448x64 make 224 / 224 /
// 512 / 256 tiles on 132 SMs; the third answer measured 608 against the first's 528 TFLOP/s.
TEST(GemmPick, TakesTheAnswerThatFillsItsLastWave) {
    const float waves[] = {224 / 132.0f, 224 / 132.0f, 512 / 132.0f, 256 / 132.0f};
    EXPECT_EQ(gemm_pick_rank(waves, 4), 2);
}

// The 0.8B's in_proj (N 8224): 260 tiles, 98.5 % of the last wave: the first answer stays.
TEST(GemmPick, KeepsAFullFirstAnswer) {
    const float waves[] = {260 / 132.0f, 264 / 132.0f, 392 / 132.0f, 232 / 132.0f};
    EXPECT_EQ(gemm_pick_rank(waves, 4), 0);
}

// N 1024 projections: 128 tiles, less than one wave; the heuristic's own choice stays.
TEST(GemmPick, KeepsASubWaveFirstAnswer) {
    const float waves[] = {128 / 132.0f, 128 / 132.0f, 104 / 132.0f, 104 / 132.0f};
    EXPECT_EQ(gemm_pick_rank(waves, 4), 0);
    const float small[] = {0.3f, 0.9f};
    EXPECT_EQ(gemm_pick_rank(small, 2), 0);
}

TEST(GemmPick, UnknownOrSingleAnswers) {
    const float unknown[] = {0.0f, 3.9f};
    EXPECT_EQ(gemm_pick_rank(unknown, 2), 0);
    const float one[] = {1.5f};
    EXPECT_EQ(gemm_pick_rank(one, 1), 0);
    EXPECT_EQ(gemm_pick_rank(one, 0), 0);
}

// Within the tolerance of the best fill the lower rank wins; answers past the candidates are not read.
TEST(GemmPick, ToleranceAndCandidateLimit) {
    const float close[] = {1.5f, 1.99f, 2.0f, 1.5f};  // fills 0.75, 0.995, 1.0, 0.75
    EXPECT_EQ(gemm_pick_rank(close, 4), 1);
    const float late[] = {1.5f, 1.5f, 1.5f, 1.5f, 2.0f};
    EXPECT_EQ(gemm_pick_rank(late, 5), 0);
    const float unknown_later[] = {1.5f, 0.0f, -2.0f, 1.5f};
    EXPECT_EQ(gemm_pick_rank(unknown_later, 4), 0);
}

// On random lists the pick is always a candidate, never fills less than the first answer, and fills
// within the tolerance of the best candidate whenever it moves off the first.
TEST(GemmPick, RandomListsKeepTheRule) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> w(0.0f, 8.0f);
    std::uniform_int_distribution<int> count(1, 8);
    for (int trial = 0; trial < 2000; ++trial) {
        std::vector<float> waves(count(rng));
        for (float& v : waves) v = w(rng);
        const int n = static_cast<int>(waves.size());
        const int r = gemm_pick_rank(waves.data(), n);
        ASSERT_GE(r, 0);
        ASSERT_LT(r, std::min(n, kGemmPickCandidates));
        ASSERT_GE(gemm_wave_fill(waves[r]), gemm_wave_fill(waves[0]) - 1e-12);
        if (r != 0) {
            double best = 0.0;
            for (int i = 0; i < std::min(n, kGemmPickCandidates); ++i) best = std::fmax(best, gemm_wave_fill(waves[i]));
            EXPECT_GE(gemm_wave_fill(waves[r]), best - kGemmPickTolerance);
            EXPECT_GE(waves[0], 1.0f);
            EXPECT_LT(gemm_wave_fill(waves[0]), kGemmPickMinFill);
        }
    }
}

// The fused gate|up + SwiGLU GEMM's tile: 112 where its busiest SM computes at least 5 % fewer
// columns than with 128, else 128 (the measured cases first, then the rule on random shapes).
TEST(GemmPick, SwigluTile) {
    EXPECT_EQ(gemm_swiglu_tile(1024, 3584, 132), 112);    // 0.8B, 1k: 2 x 112 against 2 x 128 columns
    EXPECT_EQ(gemm_swiglu_tile(2048, 3584, 132), 112);    // 4 x 112 against 4 x 128
    EXPECT_EQ(gemm_swiglu_tile(4096, 3584, 132), 128);    // 8 x 112 = 896 against 7 x 128 = 896
    EXPECT_EQ(gemm_swiglu_tile(4096, 12288, 132), 128);   // 9B, 4k: 27 x 112 = 3024 against 24 x 128 = 3072
    EXPECT_EQ(gemm_swiglu_tile(16384, 12288, 132), 128);  // 107 x 112 against 94 x 128
    EXPECT_EQ(gemm_swiglu_tile(1024, 4096, 132), 128);    // 3 x 112 against 2 x 128
    EXPECT_EQ(gemm_swiglu_tile(0, 3584, 132), 128);       // degenerate inputs: the default tile
    EXPECT_EQ(gemm_swiglu_tile(1024, 3584, 0), 128);
    std::mt19937 rng(20261204);
    for (int i = 0; i < 2000; ++i) {
        const int M = 1 + int(rng() % 40000), F = 8 * (1 + int(rng() % 4000)), sms = 1 + int(rng() % 200);
        const int tile = gemm_swiglu_tile(M, F, sms);
        ASSERT_TRUE(tile == 112 || tile == 128);
        auto cols = [&](int t) {
            const long long items = (long long)((M + 127) / 128) * ((F + t - 1) / t);
            return double((items + sms - 1) / sms * t);
        };
        EXPECT_EQ(tile == 112, cols(112) < 0.95 * cols(128)) << M << " " << F << " " << sms;
    }
}

}  // namespace
}  // namespace frost::kernels
