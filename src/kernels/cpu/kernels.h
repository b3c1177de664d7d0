// CPU fp32 reference kernels: one function per params struct of kernels/params.h. Each runs
// synchronously on the calling thread (spreading work over the kernels' thread pool) and returns
// FROST_OK, or FROST_ERR_INVALID_ARG / FROST_ERR_OUT_OF_RANGE for data it refuses (a token id
// outside the vocabulary, a position past max_seq); the op layer names the failure.
#pragma once
#include "frost/exec.h"
#include "kernels/params.h"

namespace frost::kernels::cpu {

// Rows a launch processes (see params.h): *n_rows clamped to [0, max_rows], or max_rows.
inline int32_t launch_rows(const int32_t* n_rows, int32_t max_rows) {
    if (!n_rows) return max_rows;
    int32_t n = *n_rows;
    return n < 0 ? 0 : (n > max_rows ? max_rows : n);
}

frost_status embed(const EmbedParams& p);
frost_status rmsnorm(const RmsNormParams& p);
frost_status gated_rmsnorm(const GatedRmsNormParams& p);
frost_status gemm(const GemmParams& p);
// W8A8's activation side (ops GemmOp::quant_act): each row's 128-wide groups of x [rows, K]
// (row stride ld, K a multiple of 128) replaced in place by e4m3(x / s) * s, s = max|x| / 448
// (1 for an all-zero group); e4m3 rounding to nearest even, saturating at 448 (CUDA's
// __nv_cvt_float_to_fp8 with __NV_SATFINITE).
frost_status quantize_act_e4m3(float* x, int32_t rows, int32_t K, int64_t ld);
// e4m3 (OCP fn) value nearest to v, ties to even, |v| beyond 448 saturating to 448.
float round_e4m3_satfinite(float v);
// The same quantization with the bytes the FP8 GEMM reads (ops Fp8Act, kernels/cuda/lm_gemm_fp8.h
// act_quant_fp8_launch's layout): q [rows, K] e4m3 bits (row stride K) and the group scales at
// scale[g * scale_ld + r] (group g of row r). util::e4m3_to_f32(q) * scale is exactly what
// quantize_act_e4m3 writes in place.
frost_status quantize_act_e4m3_bytes(const float* x, int32_t rows, int32_t K, int64_t ld, uint8_t* q, float* scale,
                                     int64_t scale_ld);
frost_status conv1d(const Conv1dParams& p);
frost_status l2norm(const L2NormParams& p);
frost_status gdn_gates(const GdnGateParams& p);
frost_status gdn_chunked(const GdnParams& p);
frost_status gdn_recurrent(const GdnParams& p);
frost_status rope(const RopeParams& p);
frost_status kv_append(const KvAppendParams& p);
frost_status attention(const AttentionParams& p);
frost_status swiglu(const SwigluParams& p);
frost_status sample(const SampleParams& p);
frost_status cursor_op(const CursorParams& p);
frost_status tail_row(const TailRowParams& p);

// bf16 (stored as uint16 bits) to fp32: exact.
inline float bf16_to_f32(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

// fp32 to the nearest bf16 value (ties to even), returned as fp32. Inputs are finite here.
inline float round_to_bf16(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    float r;
    __builtin_memcpy(&r, &u, sizeof r);
    return r;
}

// SplitMix64 finaliser; the sampler's uniform draw is splitmix64(seed ^ splitmix64(counter)).
// Plain integer arithmetic, so the CUDA kernel reproduces every draw exactly.
inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
// Uniform in [0, 1) with 24 random bits (exactly representable in fp32).
inline float rng_uniform(uint64_t seed, uint64_t counter) {
    uint64_t r = splitmix64(seed ^ splitmix64(counter));
    return static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
}

}  // namespace frost::kernels::cpu
