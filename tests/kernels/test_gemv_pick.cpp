// How many tiles a block of the quantized tensor-core GEMV takes (kernels/gemv_pick.h), on the
// tile counts of the released shapes' decode GEMVs and on the rule's edges. The kernel variants
// themselves run in test_cuda_gemv_quant.cpp (every tiles-per-block form against the reference);
// these are the choices, which need no GPU. The 9B, 35B-A3B and 0.8B shapes must keep the picks
// they had before the wave rule: the pick sets the partial sums' order, so a change there would
// change those models' decode bits.
#include <gtest/gtest.h>

#include "kernels/gemv_pick.h"

namespace frost::kernels {
namespace {

constexpr int kH100Sms = 132;  // H100 SXM and H200

// 16-row tiles of an N-row GEMV, and of the gate|up GEMV with SwiGLU of F outputs (each tile
// 8 gate and 8 up rows: F / 8 tiles), as gemv_quant_tc_launch counts them.
int tiles(int n) { return (n + 15) / 16; }
int swiglu_tiles(int f) { return (f + 7) / 8; }

TEST(GemvPick, WaveFill) {
    EXPECT_DOUBLE_EQ(gemv_wave_fill(396, kH100Sms), 1.0);
    EXPECT_DOUBLE_EQ(gemv_wave_fill(792, kH100Sms), 1.0);
    EXPECT_NEAR(gemv_wave_fill(544, kH100Sms), 544.0 / 792.0, 1e-6);
    EXPECT_NEAR(gemv_wave_fill(100, kH100Sms), 100.0 / 396.0, 1e-6);
    EXPECT_EQ(gemv_wave_fill(0, kH100Sms), 0.0);
    EXPECT_EQ(gemv_wave_fill(10, 0), 0.0);
}

// The rule measured on the 9B shapes, unchanged where their grids fill whole waves.
TEST(GemvPick, TheNineBShapesKeepTheirPicks) {
    for (bool waves : {false, true}) {
        // gate|up (F 12288): four tiles (FP8, INT4), two for NVFP4 (no four-tile form).
        EXPECT_EQ(gemv_tiles_per_block(swiglu_tiles(12288), true, true, kH100Sms, waves), 4);
        EXPECT_EQ(gemv_tiles_per_block(swiglu_tiles(12288), false, true, kH100Sms, waves), 4);
        EXPECT_EQ(gemv_tiles_per_block(swiglu_tiles(12288), false, false, kH100Sms, waves), 2);
        // W8A8 decode (FP8, no four-tile form): two.
        EXPECT_EQ(gemv_tiles_per_block(swiglu_tiles(12288), true, false, kH100Sms, waves), 2);
        // GDN in_proj qkv | z (N 12288, as the 35B-A3B's): two.
        EXPECT_EQ(gemv_tiles_per_block(tiles(12288), true, true, kH100Sms, waves), 2);
        EXPECT_EQ(gemv_tiles_per_block(tiles(12288), false, true, kH100Sms, waves), 2);
        // attention qkv (N 10240): FP8 two, 4-bit one (below 768 tiles).
        EXPECT_EQ(gemv_tiles_per_block(tiles(10240), true, true, kH100Sms, waves), 2);
        EXPECT_EQ(gemv_tiles_per_block(tiles(10240), false, true, kH100Sms, waves), 1);
        // out / o / down (N 4096): one.
        EXPECT_EQ(gemv_tiles_per_block(tiles(4096), true, true, kH100Sms, waves), 1);
        // The 0.8B's gate|up (F 3584): one.
        EXPECT_EQ(gemv_tiles_per_block(swiglu_tiles(3584), true, true, kH100Sms, waves), 1);
    }
}

// The 27B shape: the rule alone leaves 544 / 512 / 448 blocks (1.1-1.4 waves); the wave rule
// takes fewer tiles per block there, and only with it on.
TEST(GemvPick, TheTwentySevenBShapesFillTheirWaves) {
    const int gate_up = swiglu_tiles(17408), in_proj = tiles(16384), qkv = tiles(2 * 24 * 256 + 2 * 4 * 256);
    EXPECT_EQ(gemv_tiles_per_block(gate_up, true, true, kH100Sms, false), 4);
    EXPECT_EQ(gemv_tiles_per_block(gate_up, true, true, kH100Sms), 2);  // 1088 blocks, 0.92 of 3 waves
    EXPECT_EQ(gemv_tiles_per_block(in_proj, true, true, kH100Sms, false), 2);
    EXPECT_EQ(gemv_tiles_per_block(in_proj, true, true, kH100Sms), 1);  // 1024 blocks
    EXPECT_EQ(gemv_tiles_per_block(in_proj, false, true, kH100Sms), 1);  // INT4 too
    EXPECT_EQ(gemv_tiles_per_block(qkv, true, true, kH100Sms, false), 2);
    EXPECT_EQ(gemv_tiles_per_block(qkv, true, true, kH100Sms), 1);
    // NVFP4's gate|up already takes two (1088 blocks): it stays.
    EXPECT_EQ(gemv_tiles_per_block(gate_up, false, false, kH100Sms), 2);
    // Unknown SM count: the rule alone.
    EXPECT_EQ(gemv_tiles_per_block(gate_up, true, true, 0), 4);
}

// Over every tile count: the pick is one of the tested forms, never more tiles than the rule
// alone, and it moves only when the new grid fills its waves better by the margin.
TEST(GemvPick, MovesOnlyForAWaveGain) {
    for (int sms : {108, 114, 132}) {
        for (int t = 1; t <= 8192; ++t) {
            for (int mask = 0; mask < 4; ++mask) {
                const bool fp8 = mask & 1, four = mask & 2;
                const int rule = gemv_tiles_per_block(t, fp8, four, sms, false);
                const int pick = gemv_tiles_per_block(t, fp8, four, sms, true);
                ASSERT_TRUE(pick == 1 || pick == 2 || pick == 4);
                ASSERT_LE(pick, rule) << t << " tiles";
                if (pick != rule) {
                    ASSERT_GE(gemv_wave_fill((t + pick - 1) / pick, sms),
                              gemv_wave_fill((t + rule - 1) / rule, sms) + kGemvWaveGain) << t << " tiles";
                }
            }
        }
    }
}

}  // namespace
}  // namespace frost::kernels
