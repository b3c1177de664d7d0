// The identity the CUDA activation quantization relies on (src/kernels/cuda/lm_act_quant.cuh
// e4m3_quotients): for s = RN(amax / 448) in [2^-100, 2^120] and r = RN(1 / s), the quotient rebuilt
// from one reciprocal, q0 = RN(v r), q = RN(q0 + fma(-q0, s, v) r), equals IEEE division's RN(v / s)
// (Markstein's theorem), and where it does not (quotients far below e4m3's least step) both round
// to the same e4m3 byte, sign included. Checked here on the host in IEEE binary32 with fma, for
// every positive normal bf16 amax in range and every bf16 |v| <= amax whose quotient e4m3 does not
// flush (|v| >= amax 2^-24), plus a random sample of the rest; the CUDA tests check the kernels'
// bytes against x / scale on adversarial groups.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "util/fp8.h"

namespace {

float bf16_bits(uint32_t h) {
    const uint32_t b = h << 16;
    float f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
}

// The kernels' sequence, written with the host's correctly rounded operations.
float quotient_from_reciprocal(float v, float s, float r) {
    const float q0 = v * r;
    return std::copysign(std::fma(std::fma(-q0, s, v), r, q0), v);
}

TEST(Fp8Quotient, OneReciprocalGivesTheDivisionsE4m3Bytes) {
    std::mt19937 rng(20261129);
    long checked = 0, equal_f32 = 0, mismatched_bytes = 0;
    for (uint32_t ah = 0x0080; ah < 0x7F80; ++ah) {  // positive normal bf16
        const float amax = bf16_bits(ah);
        const float s = amax / 448.0f;
        if (!(s >= 0x1p-100f && s <= 0x1p+120f)) continue;  // the kernels divide outside this range
        const float r = 1.0f / s;
        const int exp_a = int((ah >> 7) & 0xFF);
        auto check = [&](uint32_t vh) {
            for (const float sign : {1.0f, -1.0f}) {
                const float v = sign * bf16_bits(vh);
                const float want = v / s, got = quotient_from_reciprocal(v, s, r);
                ++checked;
                if (want == got && std::signbit(want) == std::signbit(got)) {
                    ++equal_f32;
                    continue;
                }
                if (frost::util::f32_to_e4m3(want) != frost::util::f32_to_e4m3(got)) {
                    if (++mismatched_bytes < 5)
                        ADD_FAILURE() << "amax " << amax << " v " << v << ": " << want << " vs " << got;
                }
            }
        };
        // Every v from amax 2^-24 up to amax (below it, v / s < 2^-15: e4m3 zero either way).
        const uint32_t lo = exp_a > 24 ? uint32_t(exp_a - 24) << 7 : 1;
        for (uint32_t vh = lo; vh <= ah; ++vh) check(vh);
        for (int i = 0; i < 4 && lo > 1; ++i) check(1 + rng() % (lo - 1));  // a sample of the flushed rest
    }
    EXPECT_EQ(mismatched_bytes, 0);
    EXPECT_GT(checked, 100000000);
    // The rebuilt quotient differs from the division's only in the flushed region.
    EXPECT_GT(equal_f32, checked - checked / 100);
}

}  // namespace
