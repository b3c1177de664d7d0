// Params structs of the robot policy kernels (fp32, small MLP + flow-matching integration).
// One plain struct per kernel family, shared by the CPU reference (cpu/policy_kernels.*) and the
// CUDA launchers (cuda/policy_kernels.*), so a test fills the same struct for both.
// Pointers are in the memory of the backend that runs the kernel (host for cpu, device for cuda).
#pragma once
#include <cstdint>

namespace frost::kernels {

// Activation applied as an epilogue (linear) or standalone (policy_act).
enum class PolicyAct : int32_t { none = 0, silu = 1, gelu = 2 };

// y[r, o] = act(sum_i x[r, i] * w[o, i] + b[o]); the sum runs over i in increasing order.
struct PolicyLinearParams {
    const float* x;  // [rows, in]
    const float* w;  // [out, in] row-major (y = x W^T)
    const float* b;  // [out] or null (no bias)
    float* y;        // [rows, out]; must not alias x
    int32_t rows;
    int32_t in;
    int32_t out;
    PolicyAct act;
};

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * g; y may alias x.
struct PolicyRmsNormParams {
    const float* x;  // [rows, dim]
    const float* g;  // [dim] gain
    float* y;        // [rows, dim]
    int32_t rows;
    int32_t dim;
    float eps;
};

// x[i] = act(x[i]) in place.
struct PolicyActParams {
    float* x;  // [n]
    int32_t n;
    PolicyAct act;
};

// Sinusoidal embedding of the flow time t: with half = dim / 2 and f_i = max_period^(-i / half),
// out[i] = sin(t * time_scale * f_i), out[half + i] = cos(t * time_scale * f_i). dim must be even.
struct PolicyTimeEmbedParams {
    float* out;  // [dim]
    int32_t dim;
    float t;
    float time_scale;
    float max_period;
};

// x[i] += a * v[i]: the Euler step of the flow (a = dt) and the warm-start blend.
struct PolicyAxpyParams {
    float* x;        // [n]
    const float* v;  // [n]; must not alias x
    int32_t n;
    float a;
};

// Counter-based Gaussian noise: out[i] = scale * N(seed, counter, i), where rng = {seed, counter}
// is read from memory at run time (so one captured graph draws fresh noise at every replay).
// Integer-only generator (kernels/cpu/policy_noise.h): CPU and CUDA draw bit-identical noise.
struct PolicyNoiseParams {
    float* out;           // [n]
    const uint64_t* rng;  // [2]: seed, counter
    int32_t n;
    float scale;
};

// rng[1] += 1: advances the noise counter inside the captured step.
struct PolicyCounterParams {
    uint64_t* rng;  // [2]: seed, counter
};

}  // namespace frost::kernels
