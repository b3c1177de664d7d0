// OCP e4m3fn (FP8) <-> float32, the one codec of the tree: the checkpoint readers and writers
// (model/quant) and the CPU W8A8 activation bytes (kernels/cpu) use it. Bias 7, no infinities,
// 0x7f / 0xff are NaN, largest finite 448, subnormal step 2^-9.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace frost::util {

inline constexpr float kE4m3Max = 448.0f;

inline float e4m3_to_f32(uint8_t b) {
    const int e = (b >> 3) & 0xF, m = b & 0x7;
    float v;
    if (e == 0xF && m == 0x7) v = std::numeric_limits<float>::quiet_NaN();
    else if (e == 0) v = std::ldexp(float(m), -9);  // subnormal: m/8 * 2^(1-7)
    else v = std::ldexp(1.0f + float(m) / 8.0f, e - 7);
    return (b & 0x80) ? -v : v;
}

// The nearest e4m3, ties to even; |x| beyond 448 saturates to 448 (e4m3fn has no infinity, as
// torch's float8_e4m3fn cast of a clamped value and CUDA's __NV_SATFINITE); NaN -> 0x7f.
inline uint8_t f32_to_e4m3(float x) {
    const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    float a = std::fabs(x);
    if (std::isnan(a)) return 0x7F;
    a = std::min(a, kE4m3Max);
    constexpr float kMinNormal = 0.015625f;  // 2^-6
    if (a < kMinNormal) return sign | uint8_t(std::nearbyint(a * 512.0f));  // subnormal step 2^-9; 8 -> 2^-6
    int k = 0;
    std::frexp(a, &k);                                  // a = f * 2^k, f in [0.5, 1)
    const float mant = std::ldexp(a, 1 - k);            // [1, 2)
    int m = int(std::nearbyint((mant - 1.0f) * 8.0f));  // exact product, so RNE on the 3-bit mantissa
    int e = k - 1 + 7;
    if (m == 8) {
        m = 0;
        ++e;
    }
    return sign | uint8_t(e << 3) | uint8_t(m);
}

}  // namespace frost::util
