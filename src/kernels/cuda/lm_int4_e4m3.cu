// INT4 weights as the W8A8 prefill GEMM's operand (W4A8; lm_gemm_fp8.h int4_to_e4m3_launch).
// An INT4 value is q - zp with q and zp in [0, 15] (both stored + 8, so the stored nibble minus the
// stored zero point), an integer in [-15, 15]; e4m3 holds every integer up to 16 exactly, so the
// e4m3 byte carries the value unchanged and the group's scale moves to the GEMM's per-row VEC128
// weight scales: the product is the exact INT4 weight's, only the activations are rounded (the
// e4m3 rounding GemmOp::quant_act declares). Per chunk each INT4 weight is converted again
// (packed bytes read, N x K written: half the bf16 tile's writes) and multiplied by cuBLASLt's
// FP8 GEMM with per-row VEC128 weight scales. Measured (H200, 2026-12-04, sixty-second session,
// `frost bench engine --ttft 1024,4096,16384 --reps 2 [--fp8-prefill w8a8]` on `frost synth
// --preset 9b --quant int4`, two alternating rounds): cold TTFT 26.29 / 80.14-80.15 /
// 366.27-367.37 ms against the exact path's 28.15-28.20 / 97.98-98.31 / 431.21-434.31 (bf16
// tile) and the bf16 checkpoint's 20.78 / 92.25 / 405.61 in the same call. At 1k the conversion
// of 8.5 G weights (~4 ms) is most of what it saves.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"

namespace frost::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kNibbleOffset = 8;  // a symmetric weight's implied zero point, stored + 8 like q

// One thread per 32-bit word (8 values) of a row: consecutive threads take consecutive words, so
// a warp's 8-byte stores are contiguous and its loads are (row-major) or come in 64-byte runs (8-row
// blocks: a row's 4 chunks of one 128-wide step lie together). The thread holding a group's first
// word also moves the group's scale.
__global__ void __launch_bounds__(kThreads) int4_e4m3_kernel(GemvQuantParams p, uint8_t* wq, float* ws, int64_t ld) {
    const int words = p.K / 8;
    const int u = blockIdx.x * kThreads + threadIdx.x;
    if (u >= words) return;
    const int groups = p.K / kFp8Group, g = u / (kFp8Group / 8);
    for (int n = blockIdx.y; n < p.N; n += gridDim.y) {
        const int64_t at = p.row_blocks ? quant4_chunk_index(n, u / 4, p.K, true) * 4 + u % 4
                                        : static_cast<int64_t>(n) * words + u;
        const uint32_t w = __ldg(static_cast<const uint32_t*>(p.w) + at);
        int zp = kNibbleOffset;
        if (p.zero_point) zp = (__ldg(p.zero_point + (n / 8) * groups + g) >> (4 * (n % 8))) & 0xF;
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            // Nibble i: element i in the checkpoint's order; paired, nibbles j and j + 4 hold
            // elements 2j and 2j + 1.
            const int e = p.nibble_pairs ? (i < 4 ? 2 * i : 2 * (i - 4) + 1) : i;
            v[e] = static_cast<float>(static_cast<int>((w >> (4 * i)) & 0xFu) - zp);
        }
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(v[2 * j], v[2 * j + 1]), __NV_SATFINITE, __NV_E4M3);
            if (j < 2) lo |= pair << (16 * j);
            else hi |= pair << (16 * (j - 2));
        }
        *reinterpret_cast<uint2*>(wq + static_cast<int64_t>(n) * p.K + static_cast<int64_t>(u) * 8) = make_uint2(lo, hi);
        if (u % (kFp8Group / 8) == 0)
            ws[g * ld + n] = __bfloat162float(__ldg(static_cast<const bf16*>(p.scale) + static_cast<int64_t>(n) * groups + g));
    }
}

}  // namespace

bool int4_e4m3_ok(const GemvQuantParams& q) {
    return q.format == kGemvQuantInt4 && q.group_size == kFp8Group && q.K > 0 && q.K % kFp8Group == 0 && q.N > 0 &&
           q.w && q.scale && (q.nibble_pairs == 0 || q.nibble_pairs == 1) &&
           (q.row_blocks == 0 || (q.row_blocks == 1 && q.N % 8 == 0));
}

cudaError_t int4_to_e4m3_launch(const GemvQuantParams& q, uint8_t* wq, float* w_scale, cudaStream_t stream) {
    if (!int4_e4m3_ok(q) || !wq || !w_scale || !lm::aligned16(wq)) return cudaErrorInvalidValue;
    const int cols = lm::ceil_div(q.K / 8, kThreads);
    const dim3 grid(cols, std::min(q.N, std::max(1, 65535 / cols)));
    int4_e4m3_kernel<<<grid, kThreads, 0, stream>>>(q, wq, w_scale, act_scale_ld(q.N));
    return cudaGetLastError();
}

}  // namespace frost::kernels
