// The FP8 activation quantization of W8A8 prefill (lm_gemm_fp8.h) as a device helper, so the ops
// that produce a GEMM's bf16 input (add_rmsnorm, gated_rmsnorm, swiglu) write its e4m3 twin in the
// same pass instead of a separate act_quant_fp8_launch re-reading the bf16 rows. The arithmetic is
// act_quant_fp8_launch's, step for step, so the bytes are the same: the group's max |v| over the
// bf16-rounded values (max is exact in any order), scale = max / 448 (1 for an all-zero group),
// q = e4m3(v / scale) rounded to nearest even, saturating.
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

// One 128-wide group held by kLanes consecutive lanes of a warp (aligned to kLanes), kPer
// consecutive values each (kLanes * kPer == 128), already bf16-rounded. Every lane of the warp
// must call it (the max is a full-warp butterfly inside each kLanes span); lanes with
// active == false contribute nothing and write nothing, and a group's lanes are all active or
// all not. An active lane writes its kPer bytes at q; the group's first lane writes *scale.
template <int kLanes, int kPer>
__device__ inline void act_quant_group(const float (&v)[kPer], bool active, uint8_t* q, float* scale) {
    static_assert(kLanes * kPer == kActGroup && kLanes <= kWarp && (kPer == 4 || kPer == 8), "one group");
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) amax = fmaxf(amax, fabsf(v[e]));
    if (!active) amax = 0.0f;
#pragma unroll
    for (int off = kLanes / 2; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, off));
    if (!active) return;
    const float s = amax > 0.0f ? amax / kActE4m3Max : 1.0f;
    uint32_t packed[kPer / 4] = {};
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
        const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(v[e] / s, __NV_SATFINITE, __NV_E4M3);
        packed[e / 4] |= static_cast<uint32_t>(b) << (8 * (e % 4));
    }
    if constexpr (kPer == 8)
        *reinterpret_cast<uint2*>(q) = make_uint2(packed[0], packed[1]);
    else
        *reinterpret_cast<uint32_t*>(q) = packed[0];
    if (threadIdx.x % kLanes == 0) *scale = s;
}

}  // namespace frost::kernels::lm
