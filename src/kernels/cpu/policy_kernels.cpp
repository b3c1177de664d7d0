// CPU reference implementations of the robot policy kernels (see cpu/policy_kernels.h).
// Plain loops in a fixed order: they are the oracle the CUDA kernels are tested against.
#include "kernels/cpu/policy_kernels.h"

#include <cmath>

#include "kernels/cpu/policy_noise.h"

namespace frost::kernels {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
}

float policy_act_scalar(float x, PolicyAct act) {
    switch (act) {
        case PolicyAct::silu: return x / (1.0f + std::exp(-x));
        case PolicyAct::gelu: return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));  // exact GELU
        case PolicyAct::none: break;
    }
    return x;
}

void policy_linear_cpu(const PolicyLinearParams& p) {
    for (int32_t r = 0; r < p.rows; ++r) {
        const float* xr = p.x + static_cast<int64_t>(r) * p.in;
        float* yr = p.y + static_cast<int64_t>(r) * p.out;
        for (int32_t o = 0; o < p.out; ++o) {
            const float* wo = p.w + static_cast<int64_t>(o) * p.in;
            float acc = 0.0f;
            for (int32_t i = 0; i < p.in; ++i) acc += xr[i] * wo[i];
            if (p.b) acc += p.b[o];
            yr[o] = policy_act_scalar(acc, p.act);
        }
    }
}

void policy_rmsnorm_cpu(const PolicyRmsNormParams& p) {
    for (int32_t r = 0; r < p.rows; ++r) {
        const float* xr = p.x + static_cast<int64_t>(r) * p.dim;
        float* yr = p.y + static_cast<int64_t>(r) * p.dim;
        float ss = 0.0f;
        for (int32_t i = 0; i < p.dim; ++i) ss += xr[i] * xr[i];
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(p.dim) + p.eps);
        for (int32_t i = 0; i < p.dim; ++i) yr[i] = xr[i] * inv * p.g[i];
    }
}

void policy_act_cpu(const PolicyActParams& p) {
    for (int32_t i = 0; i < p.n; ++i) p.x[i] = policy_act_scalar(p.x[i], p.act);
}

void policy_time_embed_cpu(const PolicyTimeEmbedParams& p) {
    const int32_t half = p.dim / 2;
    const float log_period = std::log(p.max_period);
    for (int32_t i = 0; i < half; ++i) {
        const float freq = std::exp(-log_period * static_cast<float>(i) / static_cast<float>(half));
        const float arg = p.t * p.time_scale * freq;
        p.out[i] = std::sin(arg);
        p.out[half + i] = std::cos(arg);
    }
}

void policy_axpy_cpu(const PolicyAxpyParams& p) {
    for (int32_t i = 0; i < p.n; ++i) p.x[i] += p.a * p.v[i];
}

void policy_noise_cpu(const PolicyNoiseParams& p) {
    const uint64_t seed = p.rng[0];
    const uint64_t counter = p.rng[1];
    for (int32_t i = 0; i < p.n; ++i)
        p.out[i] = p.scale * policy_noise_normal(seed, counter, static_cast<uint32_t>(i));
}

void policy_counter_cpu(const PolicyCounterParams& p) { p.rng[1] += 1; }

}  // namespace frost::kernels
