// Helpers for the CUDA kernel tests (see cuda_test_util.h). Compiles to nothing without CUDA,
// since every kernels test links the layer's *_util.cpp files.
#if FROST_WITH_CUDA
#include "kernels/cuda_test_util.h"

#include <cmath>
#include <cstdio>

namespace frost::test {

bool cuda_device_present() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

uint16_t f2bf(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    if (std::isnan(f)) return 0x7FC0;
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

float bf2f(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

std::mt19937 fresh_rng(const char* what) {
    const unsigned seed = std::random_device{}();
    std::printf("[%s] seed %u\n", what, seed);
    return std::mt19937(seed);
}

std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi, bool bf16_round) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = bf16_round ? round_bf(d(rng)) : d(rng);
    return v;
}

std::vector<uint16_t> to_bf(const std::vector<float>& v) {
    std::vector<uint16_t> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = f2bf(v[i]);
    return o;
}

std::vector<float> from_bf(const std::vector<uint16_t>& v) {
    std::vector<float> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = bf2f(v[i]);
    return o;
}

double rel_l2(const std::vector<double>& ref, const std::vector<float>& got) {
    if (ref.size() != got.size()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace frost::test
#endif
