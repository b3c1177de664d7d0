// bfloat16 <-> float32 conversion. float -> bf16 rounds to nearest, ties to even (as PyTorch and
// CUDA's __float2bfloat16_rn); NaN stays a quiet NaN with its sign.
#pragma once
#include <cstdint>
#include <cstring>

namespace frost::util {

inline float bf16_to_f32(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

inline uint16_t f32_to_bf16(float f) {
    constexpr uint32_t kExpMask = 0x7f800000u, kMantMask = 0x007fffffu, kQuietBit = 0x0040u;
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    if ((u & kExpMask) == kExpMask && (u & kMantMask) != 0) return uint16_t((u >> 16) | kQuietBit);
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // ties go to the even upper half
    return uint16_t((u + rounding_bias) >> 16);
}

}  // namespace frost::util
