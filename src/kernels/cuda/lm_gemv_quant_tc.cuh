// The tensor-core quantized GEMV's building blocks (lm_gemv_quant_tc.cu describes the mapping
// and the exact dequantization): a lane's two weight rows of a 16-row tile, 32 weights of each per
// 128-wide step, dequantized into bf16 mma A fragments against x in column L/4 of B. Shared by the
// plain / routed GEMV (lm_gemv_quant_tc.cu) and the MoE down-and-mix launch
// (lm_gemv_quant_moe.cu), so a step's arithmetic (hence its bits) is written once.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemv_quant.h"

namespace frost::kernels::qtc {
using namespace lm;

constexpr int kWarps = 8;
constexpr int kStepK = 128;    // k per warp step: 4 lanes x 32 weights
constexpr int kLaneK = 32;     // weights of one row per lane per step
constexpr int kTileRows = 16;  // mma M
constexpr int kCols = 8;       // mma N: the x rows
constexpr int kMmas = kLaneK / 4;                 // mma k16 per step: two pairs of each row per mma
constexpr uint32_t kBf16Magic128 = 0x43004300u;   // bf16 128.0 in both halves
constexpr float kNvfp4ScaleBias = 0x1p117f;       // e2m1 bits * (scale * 2^117) = e2m1 * scale * 2^-9
constexpr float kNvfp4RowBias = 512.0f;           // the 2^9 back, on the row sum

template <int F>
constexpr bool is_fp8() { return F == kGemvQuantFp8Block || F == kGemvQuantFp8Channel; }
// uint4 loads per row per step.
template <int F>
constexpr int loads_per_row() { return is_fp8<F>() ? 2 : 1; }
// Formats whose scale changes every step (fp8 block, int4 group): a fresh partial per step.
template <int F>
constexpr bool step_scaled() { return F == kGemvQuantFp8Block || F == kGemvQuantInt4; }

// A lane's weights of row n (n: the stored row, stacked for routed experts): its first uint4
// (lane part t: weights 32t .. 32t + 31 of a 128-wide step), and the uint4 stride between the
// row's steps. Row-major, or for 4-bit weights in 8-row blocks (GemvQuantParams::row_blocks,
// quant4_chunk_index): one step of a block's 8 rows is 32 consecutive uint4, so a warp's load
// (8 groups of 4 lanes, one row each) reads 512 contiguous bytes.
template <int F>
__device__ inline const uint4* lane_row(const void* w, int64_t n, int K, int t, bool row_blocks) {
    if (!is_fp8<F>() && row_blocks)
        return static_cast<const uint4*>(w) + ((n >> 3) * (K / kStepK)) * 32 + (n & 7) * 4 + t;
    return static_cast<const uint4*>(w) + n * (K / (is_fp8<F>() ? 16 : 32)) + t * loads_per_row<F>();
}
template <int F>
__device__ inline int step_stride(bool row_blocks) { return !is_fp8<F>() && row_blocks ? 32 : 4 * loads_per_row<F>(); }

__device__ inline uint32_t bits_of(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ inline __nv_bfloat162 bf2_of(uint32_t u) { return *reinterpret_cast<__nv_bfloat162*>(&u); }
__device__ inline uint32_t word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The scale data of one row for one step, loaded with its weights (raw, converted at use).
struct StepRaw {
    uint32_t a = 0;  // fp8 block: the f32 scale bits; int4: the bf16 scale; nvfp4: the two e4m3 group scales
    uint32_t z = 8;  // int4: the stored zero point (8: symmetric)
};

// What dequant_pair needs of a row in a step.
struct StepScale {
    float s = 1.0f;         // fp8 block / int4: multiplies the step's partial sum
    __nv_bfloat162 bias;    // int4: 128 + zero point in both halves
    __nv_bfloat162 g[2];    // nvfp4: scale * 2^117 of elements 0..15 / 16..31, in both halves
};

template <int F>
__device__ inline StepScale step_scale(const StepRaw& r) {
    StepScale st;
    if constexpr (F == kGemvQuantFp8Block) {
        st.s = __uint_as_float(r.a);
    } else if constexpr (F == kGemvQuantInt4) {
        st.s = __uint_as_float(r.a << 16);         // bf16 -> f32: the bits in the high half
        st.bias = bf2_of(0x43004300u + r.z * 0x10001u);  // bf16 128 + z (z < 128: mantissa units of 1)
    } else if constexpr (F == kGemvQuantNvfp4) {
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(r.a & 0xFFFFu), __NV_E4M3);
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hr));
        st.g[0] = __float2bfloat162_rn(f.x * kNvfp4ScaleBias);
        st.g[1] = __float2bfloat162_rn(f.y * kNvfp4ScaleBias);
    }
    return st;
}

// Pair p (0..15) of a row's 32 weights in this step as bf16x2 (the k order of the file comment).
// (a & mask) | c in one LOP3: with both masks immediates ptxas emits two (SASS LOP3 takes one
// immediate), so `c` comes in a register.
__device__ inline uint32_t and_or(uint32_t a, uint32_t c) {
    uint32_t d;
    asm("lop3.b32 %0, %1, 0x000F000F, %2, 0xEA;\n" : "=r"(d) : "r"(a), "r"(c));
    return d;
}

// magic: kBf16Magic128 in a register (see and_or).
template <int F>
__device__ inline uint32_t dequant_pair(const uint4 (&w)[loads_per_row<F>()], int p, const StepScale& st, uint32_t magic) {
    if constexpr (is_fp8<F>()) {
        const uint32_t word = word_of(w[p / 8], (p / 2) % 4);
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(
            static_cast<__nv_fp8x2_storage_t>((word >> (16 * (p % 2))) & 0xFFFFu), __NV_E4M3);
        return bits_of(__float22bfloat162_rn(__half22float2(*reinterpret_cast<const __half2*>(&hr))));
    } else {
        const uint32_t word = word_of(w[0], p / 4);
        const int j = p % 4;  // nibbles j and j + 4: bits 4j.. and 16 + 4j..
        if constexpr (F == kGemvQuantNvfp4) {
            // Magnitude bits 4j..4j+2 to bf16 bits 6..8, sign bit 4j+3 to 15: one shift each (the
            // shift counts are constants per j), then one masked OR (LOP3). e2m1 * 2^-126.
            const uint32_t mag = j == 0 ? word << 6 : j == 1 ? word << 2 : word >> (4 * j - 6);
            const uint32_t sgn = (word << (12 - 4 * j)) & 0x80008000u;
            return bits_of(__hmul2(bf2_of((mag & 0x01C001C0u) | sgn), st.g[p / 8]));
        } else {
            const uint32_t v = word >> (4 * j);
            return bits_of(__hsub2(bf2_of(and_or(v, magic)), st.bias));
        }
    }
}

// x pair p of the lane's 32 values (xv: four 16-byte words of 8 bf16): adjacent for fp8 and for
// 4-bit weights in the paired nibble order (kPaired, GemvQuantParams::nibble_pairs: the nibbles
// j and j + 4 that dequant_pair extracts hold elements 2j and 2j + 1), elements (j, j+4) of word
// p/4 for 4-bit weights in the checkpoint's order (one byte_perm per pair).
template <int F, bool kPaired = false>
__device__ inline uint32_t x_pair(const uint4 (&xv)[4], int p) {
    if constexpr (is_fp8<F>() || kPaired) {
        return word_of(xv[p / 4], p % 4);
    } else {
        const uint4& q = xv[p / 4];
        const int j = p % 4;
        const uint32_t lo = j < 2 ? q.x : q.y, hi = j < 2 ? q.z : q.w;  // elements (j, j+4) live in words j/2 and j/2 + 2
        return __byte_perm(lo, hi, j % 2 == 0 ? 0x5410 : 0x7632);
    }
}

// Where a lane's two rows (n: rows of the stored weight, i.e. stacked rows for routed experts)
// keep their per-step scale data, so a step adds only its group index. scale / zero_point: the
// weight's own (p's, or a folded shared expert's); p gives the format's sizes.
template <int F>
struct RowScales {
    const void* srow[2];
    const int32_t* zrow[2];
    int zshift[2];
    int steps_per_group;
    float rcp_spg;

    __device__ inline RowScales(const GemvQuantParams& p, const void* scale, const int32_t* zero_point, const int (&n)[2]) {
        const int groups = F == kGemvQuantFp8Block ? (p.K + p.block_k - 1) / p.block_k
                           : F == kGemvQuantInt4   ? p.K / p.group_size
                                                   : 0;
        steps_per_group = F == kGemvQuantFp8Block ? p.block_k / kStepK : F == kGemvQuantInt4 ? p.group_size / kStepK : 1;
        rcp_spg = 1.0f / static_cast<float>(steps_per_group);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            if constexpr (F == kGemvQuantFp8Block) srow[r] = static_cast<const float*>(scale) + static_cast<int64_t>(n[r] / p.block_n) * groups;
            else if constexpr (F == kGemvQuantInt4) srow[r] = static_cast<const bf16*>(scale) + static_cast<int64_t>(n[r]) * groups;
            else if constexpr (F == kGemvQuantNvfp4) srow[r] = static_cast<const uint16_t*>(scale) + static_cast<int64_t>(n[r]) * (p.K / 32) + (threadIdx.x % 4);
            else srow[r] = nullptr;
            zrow[r] = zero_point ? zero_point + static_cast<int64_t>(n[r] / 8) * groups : nullptr;
            zshift[r] = 4 * (n[r] % 8);
        }
    }
    // s / steps_per_group without an integer division per step (~30 instructions): s < 2^16 and
    // the quotient's fraction is at least 0.5 / steps_per_group away from an integer, far above
    // the float product's error.
    __device__ inline int group_of(int s) const {
        return steps_per_group == 1 ? s : __float2int_rz((static_cast<float>(s) + 0.5f) * rcp_spg);
    }
    // Row r's scale data of step s (raw; step_scale converts it at use).
    __device__ inline StepRaw load(int r, int s) const {
        StepRaw raw;
        if constexpr (F == kGemvQuantFp8Block) {
            raw.a = __float_as_uint(__ldg(static_cast<const float*>(srow[r]) + group_of(s)));
        } else if constexpr (F == kGemvQuantInt4) {
            const int g = group_of(s);
            raw.a = __bfloat16_as_ushort(__ldg(static_cast<const bf16*>(srow[r]) + g));
            if (zrow[r]) raw.z = (__ldg(zrow[r] + g) >> zshift[r]) & 0xFu;
        } else if constexpr (F == kGemvQuantNvfp4) {
            // the lane's two 16-weight groups: u16 (k0 + 32t) / 32 of the row's K / 16 bytes
            raw.a = __ldg(static_cast<const uint16_t*>(srow[r]) + s * 4);
        }
        return raw;
    }
};

// One 128-wide step of a lane's two rows (w: [row][load], sr: their scale data) against its x
// values xv (zeros outside column 0..M-1 of B), added into the two accumulator chains: formats
// whose scale changes every step take a fresh partial scaled into acc[0]; the others run the
// mmas straight into acc[0] (even) and acc[1] (odd). The one step of bf16 (W8A16) arithmetic.
// magic: kBf16Magic128 in a register (see and_or). kPaired: 4-bit words in the paired order.
template <int F, bool kPaired = false>
__device__ inline void tc_step(const uint4 (&w)[2][loads_per_row<F>()], const StepRaw (&sr)[2], const uint4 (&xv)[4],
                               uint32_t magic, float (&acc)[2][4]) {
    const StepScale st0 = step_scale<F>(sr[0]), st1 = step_scale<F>(sr[1]);
    auto mma_step = [&](float(&d0)[4], float(&d1)[4]) {
#pragma unroll
        for (int m = 0; m < kMmas; ++m)
            mma_bf16(m % 2 == 0 ? d0 : d1, dequant_pair<F>(w[0], 2 * m, st0, magic), dequant_pair<F>(w[1], 2 * m, st1, magic),
                     dequant_pair<F>(w[0], 2 * m + 1, st0, magic), dequant_pair<F>(w[1], 2 * m + 1, st1, magic),
                     x_pair<F, kPaired>(xv, 2 * m), x_pair<F, kPaired>(xv, 2 * m + 1));
    };
    if constexpr (!step_scaled<F>()) {
        mma_step(acc[0], acc[1]);
    } else {
        float d[2][4] = {};
        mma_step(d[0], d[1]);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][e] += (e < 2 ? st0.s : st1.s) * (d[0][e] + d[1][e]);
    }
}

// The row factor of a finished row sum (nr: its row in the stored weight; scale and
// row_global_scale the weight's own): the fp8 channel scale, NVFP4's 2^9 over the global scale;
// none for the step-scaled formats.
template <int F>
__device__ inline float row_factor(float v, int nr, const void* scale, const float* row_global_scale, float global_scale) {
    if constexpr (F == kGemvQuantFp8Channel) v *= __ldg(static_cast<const float*>(scale) + nr);
    if constexpr (F == kGemvQuantNvfp4) v *= kNvfp4RowBias / (row_global_scale ? __ldg(row_global_scale + nr) : global_scale);
    return v;
}

}  // namespace frost::kernels::qtc
