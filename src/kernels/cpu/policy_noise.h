// Counter-based Gaussian noise shared by the CPU and CUDA policy kernels (one inline definition,
// compiled by both compilers). Integer-only until one exact int->float conversion, so both
// backends draw bit-identical noise for the same (seed, counter, index).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define FROST_POLICY_HD __host__ __device__
#else
#define FROST_POLICY_HD
#endif

namespace frost::kernels {

// SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer with good avalanche.
FROST_POLICY_HD inline uint64_t policy_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

constexpr int kPolicyNoiseUniformBits = 24;   // bits per uniform draw
constexpr int kPolicyNoiseDraws = 12;         // Irwin-Hall order: 12 uniforms have variance 1
constexpr uint64_t kPolicyNoiseStreamMul = 0xD1B54A32D192ED03ull;  // separates counters

// Approximately standard normal: the centred sum of 12 uniform 24-bit integers (Irwin-Hall),
// scaled by 2^-24. Mean 0, variance 1 - 2^-48, support [-6, 6]. Chosen over Box-Muller because
// it needs no transcendental function, whose last bit differs between libm and CUDA.
FROST_POLICY_HD inline float policy_noise_normal(uint64_t seed, uint64_t counter, uint32_t index) {
    const uint64_t key = policy_mix64(seed ^ policy_mix64(counter * kPolicyNoiseStreamMul + index));
    const uint64_t mask = (1ull << kPolicyNoiseUniformBits) - 1;
    int64_t sum = 0;
    for (int j = 0; j < kPolicyNoiseDraws / 2; ++j) {
        const uint64_t r = policy_mix64(key + static_cast<uint64_t>(j));
        sum += static_cast<int64_t>(r >> (64 - kPolicyNoiseUniformBits));
        sum += static_cast<int64_t>(r & mask);
    }
    const int64_t mean2 = static_cast<int64_t>(kPolicyNoiseDraws) * static_cast<int64_t>(mask);
    // 2 * (sum - mean) is an exact integer; halving after conversion keeps it exact.
    const float centred2 = static_cast<float>(2 * sum - mean2);
    return centred2 * (0.5f / static_cast<float>(1ull << kPolicyNoiseUniformBits));
}

}  // namespace frost::kernels
