// The FP8 activation quantization of W8A8 prefill (lm_gemm_fp8.h) as a device helper, so the ops
// that produce a GEMM's bf16 input (add_rmsnorm, gated_rmsnorm, swiglu) write its e4m3 twin in the
// same pass instead of a separate act_quant_fp8_launch re-reading the bf16 rows. The arithmetic is
// act_quant_fp8_launch's, step for step, so the bytes are the same: the group's max |v| over the
// bf16-rounded values (max is exact in any order), scale = max / 448 (1 for an all-zero group),
// q = e4m3(v / scale) rounded to nearest even, saturating (e4m3_quotients: the same bytes as the
// division, computed from one reciprocal). act_quant_fp8_launch's kernels use e4m3_quotients too.
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"

namespace frost::kernels::lm {

constexpr float kActE4m3Max = 448.0f;
constexpr int kActGroup = 128;  // kFp8Group: the k width of one activation scale

// A launcher's check of a twin's arguments (lm_params.h yq / yq_scale / yq_scale_ld): K wide,
// `rows` rows, the scales in act_quant_fp8_launch's layout, 8-byte aligned rows.
inline bool act_twin_ok(const uint8_t* yq, const float* yq_scale, int64_t ld, int64_t K, int rows) {
    return yq_scale && K % kActGroup == 0 && ld == act_scale_ld(rows) && reinterpret_cast<uintptr_t>(yq) % 8 == 0;
}

// Bytes a twin of `elems` values writes (the cost model): e4m3 values plus one f32 scale per group.
inline double act_twin_bytes(double elems) { return elems * (1.0 + sizeof(float) / double(kActGroup)); }

// The value a bf16 store of v keeps (what act_quant_fp8_launch would read back).
__device__ inline float bf16_rounded(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// s outside this range takes the plain division in e4m3_quotients (a subnormal s has no finite
// reciprocal, an infinite one a zero one); the exact-quotient identity was checked over it.
constexpr float kExactRcpMinScale = 0x1p-100f, kExactRcpMaxScale = 0x1p+120f;

// The e4m3 bytes of v[e] / s (round to nearest even, saturating), four per word, lowest first:
// what __nv_cvt_float_to_fp8(v[e] / s, ...) gives, for less. The quotient is IEEE division's
// own result rebuilt from one reciprocal per group: r = RN(1/s), q0 = RN(v r), then
// q = RN(q0 + (v - q0 s) r) with the residual exact in an fma. By Markstein's theorem (r within half
// an ulp of 1/s, q0 within one ulp of v/s) that is RN(v/s) wherever the quotient is normal. On
// the host, for every bf16 amax with s in range and every bf16 |v| <= amax (5.2e8 pairs), the two
// are equal except where both quotients are below 2^-11, which e4m3 rounds to zero either way;
// copysignf keeps that zero's sign (v / s has the sign of v). tests/util/test_fp8_quotient.cpp
// keeps that check (on the bytes); the CUDA act-quant tests compare the kernels' bytes with x / s.
// Division per element (div.rn.f32: ~10 instructions and a slow-path check) was the twin's largest
// arithmetic term; the pairs go through one cvt each (cvt.rn.satfinite.e4m3x2.f32).
template <int kPer>
__device__ inline void e4m3_quotients(const float (&v)[kPer], float s, uint32_t (&packed)[kPer / 4]) {
    static_assert(kPer % 4 == 0, "whole words");
    float q[kPer];
    if (s >= kExactRcpMinScale && s <= kExactRcpMaxScale) {
        const float r = __frcp_rn(s);
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
            const float q0 = __fmul_rn(v[e], r);
            q[e] = copysignf(__fmaf_rn(__fmaf_rn(-q0, s, v[e]), r, q0), v[e]);
        }
    } else {
#pragma unroll
        for (int e = 0; e < kPer; ++e) q[e] = __fdiv_rn(v[e], s);
    }
#pragma unroll
    for (int w = 0; w < kPer / 4; ++w) {
        const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(q[4 * w], q[4 * w + 1]), __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(q[4 * w + 2], q[4 * w + 3]), __NV_SATFINITE, __NV_E4M3);
        packed[w] = lo | (hi << 16);
    }
}

// One 128-wide group held by kLanes consecutive lanes of a warp (aligned to kLanes), kPer
// consecutive values each (kLanes * kPer == 128), already bf16-rounded. Every lane of the warp
// must call it (the max is a full-warp butterfly inside each kLanes span); lanes with
// active == false contribute nothing and write nothing, and a group's lanes are all active or
// all not. An active lane writes its kPer bytes at q; the group's first lane writes *scale.
template <int kLanes, int kPer>
__device__ inline void act_quant_group(const float (&v)[kPer], bool active, uint8_t* q, float* scale) {
    static_assert(kLanes * kPer == kActGroup && kLanes <= kWarp && (kPer == 4 || kPer == 8 || kPer == 16), "one group");
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) amax = fmaxf(amax, fabsf(v[e]));
    if (!active) amax = 0.0f;
#pragma unroll
    for (int off = kLanes / 2; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, off));
    if (!active) return;
    const float s = amax > 0.0f ? amax / kActE4m3Max : 1.0f;
    uint32_t packed[kPer / 4];
    e4m3_quotients(v, s, packed);
    if constexpr (kPer == 16)
        *reinterpret_cast<uint4*>(q) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    else if constexpr (kPer == 8)
        *reinterpret_cast<uint2*>(q) = make_uint2(packed[0], packed[1]);
    else
        *reinterpret_cast<uint32_t*>(q) = packed[0];
    if (threadIdx.x % kLanes == 0) *scale = s;
}

}  // namespace frost::kernels::lm
