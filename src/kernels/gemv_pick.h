// How many 16-row tiles one block of the quantized tensor-core GEMV takes (lm_gemv_quant_tc.cu's
// gemv_quant_tc_launch): host-only arithmetic on the grid's shape, so the CPU tests check it.
//
// The rule measured on the 9B shapes (H200, 2026-11-29, bench_quant_gemv --tune): four tiles per
// 8-warp block from 1536 tiles (the gate|up GEMV, N 2 x 12288) for every format but NVFP4 and the
// W8A8 forms, two from 512 tiles for FP8 and from 768 for the 4-bit formats, else one. Those
// grids are one whole wave (384 blocks of 3 x 132 slots). At the 27B shape (hidden 5120, F 17408,
// GDN in_proj N 16384) the same rule left 544 / 512 / 448 blocks for gate|up, in_proj and the
// attention qkv, 1.1-1.4 waves with the last one mostly empty, and those GEMVs ran at 1.22-1.33x
// their bytes inside the decode graph where the 9B's sit at 0.98-1.15x. So the pick then moves
// to fewer tiles per block where that fills the waves better by kGemvWaveGain or more. H200,
// 2026-12-05 (seventieth session), 27B / 32 layers, decode @1k, ms/token, old pick -> this one:
// FP8 5.087-5.099 -> 4.735-4.744, INT4 3.835-3.851 -> 3.668-3.675, NVFP4 4.063-4.084 ->
// 3.935-3.954. The 9B, 35B-A3B and 0.8B shapes keep their picks.
//
// The partial sums of a tile are added in warp order, so the pick sets the output's bits. It
// depends on the tile count, the format and the SM count only, never on the rows M: a batched
// decode member's bits stay its solo launch's. (A device with another SM count may pick otherwise,
// as the 12-warp form's rule already does.)
#pragma once

#include "kernels/gemm_pick.h"

namespace frost::kernels {

constexpr int kGemvFourTilesFrom = 1536;  // tiles
constexpr int kGemvSlotsPerSm = 3;        // the pick's launches: 3 blocks per SM
constexpr double kGemvWaveGain = 0.15;    // of a wave

// The share of its waves' block slots a grid of `blocks` fills (1 for whole waves): the GEMM
// pick's wave fill over this kernel's slots.
inline double gemv_wave_fill(int blocks, int sms) {
    if (blocks <= 0 || sms <= 0) return 0.0;
    return gemm_wave_fill(static_cast<float>(blocks) / static_cast<float>(kGemvSlotsPerSm * sms));
}

// Tiles per block (4, 2 or 1) for a GEMV of `tiles` 16-row tiles. fp8: the weight is FP8 (two
// tiles from 512, not 768); four_ok: the format and form allow four (not NVFP4, not W8A8);
// fill_waves: the wave rule above (off: the 9B-measured rule alone; FROST_GEMV_WAVES=0 for A/B);
// sms <= 0 (unknown) keeps the rule alone.
inline int gemv_tiles_per_block(int tiles, bool fp8, bool four_ok, int sms, bool fill_waves = true) {
    int tpb = 1;
    if (tiles >= kGemvFourTilesFrom && four_ok) tpb = 4;
    else if (tiles >= (fp8 ? 512 : 768)) tpb = 2;
    if (!fill_waves || sms <= 0) return tpb;
    const double fill = gemv_wave_fill((tiles + tpb - 1) / tpb, sms);
    for (int t = tpb / 2; t >= 1; t /= 2)
        if (gemv_wave_fill((tiles + t - 1) / t, sms) >= fill + kGemvWaveGain) return t;
    return tpb;
}

}  // namespace frost::kernels
