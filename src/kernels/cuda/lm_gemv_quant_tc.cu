// Quantized decode GEMV on tensor cores (see lm_gemv_quant.h, gemv_quant_tc_*). The SIMT kernel
// of lm_gemv_quant.cu widens every weight to fp32 and spends two FMAs per pair; on the 4-bit
// formats it is issue-bound (ncu, H100 2026-11-24, int4 12288x4096: 127 registers, 25 % occupancy,
// a warp issuing every 5.7 cycles, DRAM 31 % busy). Here a warp dequantizes into fp16 mma
// fragments (one lop3 + one hsub2 / hmul2 per pair, or one cvt for fp8) and mma.m16n8k16 does the
// multiply-adds with fp32 accumulation: column 0 of B holds x, the other seven columns are
// don't-cares whose results are dropped. Measured (bench_quant_gemv, back-to-back launches): NVFP4
// 2.2-2.5x its bytes floor against the SIMT kernel's 2.6-3.1x; fp8 and int4 within +-5 % of SIMT
// (the kernel is latency-bound: 80 registers, 37 % occupancy, no eligible warp 72 % of cycles), so
// gemv_quant_launch sends only NVFP4 here.
//
// Mapping. A block owns a tile of 16 weight rows (SwiGLU: 8 gate rows and their 8 up rows) and its
// warps split K in 128-wide steps. Lane L holds rows L/4 and L/4 + 8 of the tile and, in a step,
// the 32 consecutive weights k0 + 32*(L%4) .. +32 of both rows (one 16-byte load per row for the
// 4-bit formats, two for fp8). A dot product does not care how k is permuted as long as A and B
// agree, so mma j of the step takes that lane's pairs 2j and 2j+1 as its k slots {2t, 2t+1} and
// {2t+8, 2t+9}; x is staged in shared memory already in that pair order (4-bit pairs are elements
// (m, m+4) of an 8-element word, as one lop3 extracts them; fp8 pairs are adjacent), so a lane
// reads its 16 pairs with four 16-byte loads.
//
// Exactness. fp8 -> fp16, int4 - zp and e2m1 * 2^-14 are exact in fp16; an NVFP4 weight times
// its e4m3 group scale is too (a 2-bit by 4-bit significand product, rounded only below fp16's
// subnormal step: 2^-11 of the row maximum / global scale at worst). x is scaled by a power of
// two so max|x| lands in [2^14, 2^15) before its fp16 rounding, which is then exact for every bf16
// value above 2^-29 of the maximum; the power of two is undone in fp32. Block / group scales that
// span a whole 128-wide step (fp8 block, int4 group) multiply each step's fp32 partial sum.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemv_quant.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kStepK = 128;       // k per step: 4 lanes x 32 weights
constexpr int kTileRows = 16;     // mma M
constexpr int kPairs = 16;        // fp16 pairs per lane per row per step
constexpr int kInt4Magic = 0x64006400;  // fp16 1024.0 in both halves

template <int F>
constexpr bool is_fp8() { return F == kGemvQuantFp8Block || F == kGemvQuantFp8Channel; }
// uint4 loads per row per step.
template <int F>
constexpr int loads_per_row() { return is_fp8<F>() ? 2 : 1; }

__device__ inline uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ inline __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

__device__ inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The 16 fp16 pairs of one row's 32 weights in this step (the k order of the file comment).
struct RowParams {
    __half2 bias;      // INT4: 1024 + zero point in both halves
    __half2 s[2];      // NVFP4: the two group scales of the lane's 32 weights, broadcast
};

template <int F>
__device__ inline void dequant_pairs(const uint4 (&w)[loads_per_row<F>()], const RowParams& rp, uint32_t (&out)[kPairs]) {
    if constexpr (is_fp8<F>()) {
        const uint32_t words[8] = {w[0].x, w[0].y, w[0].z, w[0].w, w[loads_per_row<F>() - 1].x,
                                   w[loads_per_row<F>() - 1].y, w[loads_per_row<F>() - 1].z, w[loads_per_row<F>() - 1].w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
                    static_cast<__nv_fp8x2_storage_t>((words[i] >> (16 * h)) & 0xFFFFu), __NV_E4M3);
                out[2 * i + h] = *reinterpret_cast<const uint32_t*>(&r);
            }
        }
    } else {
        const uint32_t words[4] = {w[0].x, w[0].y, w[0].z, w[0].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const uint32_t v = words[i] >> (4 * m);  // nibbles m and m + 4 at bits 0 and 16
                if constexpr (F == kGemvQuantNvfp4) {
                    const uint32_t h = ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);  // e2m1 * 2^-14
                    out[4 * i + m] = h2_bits(__hmul2(bits_h2(h), rp.s[i / 2]));
                } else {
                    out[4 * i + m] = h2_bits(__hsub2(bits_h2((v & 0x000F000Fu) | kInt4Magic), rp.bias));
                }
            }
        }
    }
}

// Scale map of a row: where its per-step scale lives (fp8 block, int4) and the per-row factors.
struct RowScale {
    const void* s = nullptr;
    const int32_t* zp = nullptr;
    int zshift = 0;
    float row_mul = 1.0f;  // FP8 channel: the row scale; NVFP4: 2^14 / global scale
};

template <int F>
__device__ inline RowScale row_scale(const GemvQuantParams& p, int n) {
    RowScale r;
    if constexpr (F == kGemvQuantFp8Block) {
        r.s = static_cast<const float*>(p.scale) + (n / p.block_n) * ((p.K + p.block_k - 1) / p.block_k);
    } else if constexpr (F == kGemvQuantFp8Channel) {
        r.row_mul = __ldg(static_cast<const float*>(p.scale) + n);
    } else if constexpr (F == kGemvQuantNvfp4) {
        r.s = static_cast<const uint16_t*>(p.scale) + static_cast<int64_t>(n) * (p.K / 32);  // 2 groups per u16
        r.row_mul = 16384.0f / (p.row_global_scale ? __ldg(p.row_global_scale + n) : p.global_scale);
    } else {
        const int groups = p.K / p.group_size;
        r.s = static_cast<const bf16*>(p.scale) + static_cast<int64_t>(n) * groups;
        if (p.zero_point) {
            r.zp = p.zero_point + (n / 8) * groups;
            r.zshift = 4 * (n % 8);
        }
    }
    return r;
}

// Stages x * 2^e as fp16 in the pair order, e chosen from max|x| (identical in every block).
// Returns 2^-e.
template <int F>
__device__ inline float stage_x(const GemvQuantParams& p, __half* xs, float* scratch) {
    const int vecs = p.K / kVec;
    float m = 0.0f;
    for (int i = threadIdx.x; i < vecs; i += kThreads) {
        float v[kVec];
        load8(p.x + i * kVec, v);
#pragma unroll
        for (int e = 0; e < kVec; ++e) m = fmaxf(m, fabsf(v[e]));
    }
    m = warp_max(m);
    if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = m;
    __syncthreads();
    m = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
    const int e = m > 0.0f && isfinite(m) ? 14 - ilogbf(m) : 0;
    for (int i = threadIdx.x; i < vecs; i += kThreads) {
        float v[kVec];
        load8(p.x + i * kVec, v);
        __half h[kVec];
#pragma unroll
        for (int q = 0; q < kVec; ++q) {
            // 4-bit: the 8-element word's pairs are (0,4) (1,5) (2,6) (3,7).
            const int src = is_fp8<F>() ? q : (q / 2) + 4 * (q % 2);
            h[q] = __float2half_rn(scalbnf(v[src], e));
        }
        *reinterpret_cast<uint4*>(xs + i * kVec) = *reinterpret_cast<const uint4*>(h);
    }
    __syncthreads();
    return scalbnf(1.0f, -e);
}

// Steps whose weights one warp loads into registers together (128 bytes per lane in flight).
// A ring of cp.async stages in shared memory instead (3-6 stages, 48 KB per block) measured
// slower on every shape (fp8 2.2x the floor against 1.45x, H100 2026-11-24).
template <int F>
constexpr int kBatch() { return is_fp8<F>() ? 2 : 4; }

// One block per 16-row tile (grid-stride over tiles), its 8 warps splitting K: warp w takes
// steps w, w + 8, ... and the block adds the 8 partial sums in warp order (deterministic). A warp
// per tile would leave most SMs idle at N = 4096 (256 tiles).
template <int F>
__global__ void __launch_bounds__(kThreads) gemv_quant_tc_kernel(GemvQuantParams p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ float scratch[kWarps];
    __shared__ float partial[kWarps][kTileRows];
    __half* xs = reinterpret_cast<__half*>(smem_raw);
    constexpr int L = loads_per_row<F>();
    constexpr int B = kBatch<F>();
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int t = lane % 4, gid = lane / 4;
    const int half_n = p.N / 2;
    const int n_tiles = p.swiglu ? (half_n + kTileRows / 2 - 1) / (kTileRows / 2) : (p.N + kTileRows - 1) / kTileRows;
    const int steps = p.K / kStepK;
    const int64_t row_vecs = static_cast<int64_t>(p.K) / (is_fp8<F>() ? 16 : 32);  // uint4 per row

    // Row r (0: lane row gid, 1: gid + 8) of tile tl (SwiGLU: gate row j and up row N/2 + j).
    auto row_of = [&](int tl, int r, int g) {
        return p.swiglu ? (r == 0 ? tl * (kTileRows / 2) + g : half_n + tl * (kTileRows / 2) + g) : tl * kTileRows + g + 8 * r;
    };
    auto row_valid = [&](int tl, int r, int g) {
        return (p.swiglu ? tl * (kTileRows / 2) + g < half_n : true) && row_of(tl, r, g) < p.N;
    };
    // This warp's steps i0 .. i0 + B - 1 (step s = warp + i * kWarps).
    auto load_batch = [&](const uint4* const (&base)[2], const bool (&ok)[2], int i0, uint4 (&w)[B][2][L]) {
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int s = warp + (i0 + b) * kWarps;
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int l = 0; l < L; ++l)
                    if (ok[r] && s < steps) w[b][r][l] = __ldg(base[r] + s * (4 * L) + t * L + l);
        }
    };
    auto setup_rows = [&](int tl, int (&n)[2], bool (&ok)[2], const uint4* (&base)[2]) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            n[r] = row_of(tl, r, gid);
            ok[r] = row_valid(tl, r, gid);
            base[r] = static_cast<const uint4*>(p.w) + (ok[r] ? n[r] : 0) * row_vecs;
        }
    };

    uint4 w[B][2][L];
    int n[2];
    bool ok[2];
    const uint4* base[2];
    int tile = blockIdx.x;
    if (tile < n_tiles) {  // the first batch does not depend on the previous kernel
        setup_rows(tile, n, ok, base);
        load_batch(base, ok, 0, w);
    }
    pdl_wait();
    pdl_launch_dependents();
    const float x_unscale = stage_x<F>(p, xs, scratch);
    const int my_steps = warp < steps ? (steps - warp + kWarps - 1) / kWarps : 0;

    for (bool first = true; tile < n_tiles; tile += gridDim.x, first = false) {
        setup_rows(tile, n, ok, base);
        RowScale rs[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) rs[r] = row_scale<F>(p, ok[r] ? n[r] : 0);
        float acc[2] = {0.0f, 0.0f};
        for (int i0 = 0; i0 < my_steps; i0 += B) {
            if (!(first && i0 == 0)) load_batch(base, ok, i0, w);
#pragma unroll
            for (int b = 0; b < B; ++b) {
                if (i0 + b >= my_steps) break;
                const int s = warp + (i0 + b) * kWarps;
                RowParams rp[2];
                float step_scale[2] = {1.0f, 1.0f};
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    if constexpr (F == kGemvQuantFp8Block) {
                        step_scale[r] = __ldg(static_cast<const float*>(rs[r].s) + s * kStepK / p.block_k);
                    } else if constexpr (F == kGemvQuantNvfp4) {
                        const uint16_t s2 = __ldg(static_cast<const uint16_t*>(rs[r].s) + s * 4 + t);
                        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(s2), __NV_E4M3);
                        const __half2 both = *reinterpret_cast<const __half2*>(&hr);
                        rp[r].s[0] = __low2half2(both);
                        rp[r].s[1] = __high2half2(both);
                    } else if constexpr (F == kGemvQuantInt4) {
                        const int g = s * kStepK / p.group_size;
                        step_scale[r] = __bfloat162float(__ldg(static_cast<const bf16*>(rs[r].s) + g));
                        int zp = 8;
                        if (rs[r].zp) zp = (__ldg(rs[r].zp + g) >> rs[r].zshift) & 0xF;
                        rp[r].bias = __float2half2_rn(1024.0f + static_cast<float>(zp));
                    }
                }
                uint32_t a[2][kPairs];
#pragma unroll
                for (int r = 0; r < 2; ++r) dequant_pairs<F>(w[b][r], rp[r], a[r]);
                const uint4* xv = reinterpret_cast<const uint4*>(xs + s * kStepK + 32 * t);
                float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const uint4 xq = xv[q];  // pairs 4q .. 4q+3: mmas 2q and 2q+1
                    const uint32_t a0[4] = {a[0][4 * q], a[1][4 * q], a[0][4 * q + 1], a[1][4 * q + 1]};
                    mma16816(d, a0, xq.x, xq.y);
                    const uint32_t a1[4] = {a[0][4 * q + 2], a[1][4 * q + 2], a[0][4 * q + 3], a[1][4 * q + 3]};
                    mma16816(d, a1, xq.z, xq.w);
                }
                acc[0] += step_scale[0] * d[0];  // column 0: lanes with t == 0 hold the rows
                acc[1] += step_scale[1] * d[2];
            }
        }
        if (t == 0) {
            partial[warp][gid] = acc[0];
            partial[warp][gid + 8] = acc[1];
        }
        __syncthreads();
        if (threadIdx.x < kTileRows) {
            const int g = threadIdx.x % 8, r = threadIdx.x / 8;
            const int nr = row_of(tile, r, g);
            const bool valid = row_valid(tile, r, g);
            float sum = 0.0f;
#pragma unroll
            for (int wi = 0; wi < kWarps; ++wi) sum += partial[wi][threadIdx.x];
            const float v = sum * x_unscale * row_scale<F>(p, valid ? nr : 0).row_mul;
            if (p.swiglu) {
                partial[0][threadIdx.x] = v;  // each thread read its own column above; now publish it
                __syncwarp(0xFFFFu);
                if (r == 0 && valid) {
                    // The unfused pipeline rounds both projections to bf16, then swiglu's arithmetic.
                    const float gate = __bfloat162float(__float2bfloat16(v));
                    const float up = __bfloat162float(__float2bfloat16(partial[0][threadIdx.x + 8]));
                    static_cast<bf16*>(p.y)[nr] = __float2bfloat16(silu(gate) * up);
                }
            } else if (valid) {
                if (p.out_f32) {
                    float* y = static_cast<float*>(p.y) + nr;
                    *y = p.accumulate ? *y + v : v;
                } else {
                    bf16* y = static_cast<bf16*>(p.y) + nr;  // residual: one rounding of the fp32 sum
                    *y = __float2bfloat16(p.accumulate ? __bfloat162float(*y) + v : v);
                }
            }
        }
        __syncthreads();  // partial is reused by the next tile
    }
}

template <int F>
cudaError_t launch_tc(const GemvQuantParams& p, cudaStream_t stream) {
    const size_t smem = static_cast<size_t>(p.K) * sizeof(__half);
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_quant_tc_kernel<F>, kThreads, smem);
    if (e != cudaSuccess) return e;
    const int tiles = p.swiglu ? ceil_div(p.N / 2, kTileRows / 2) : ceil_div(p.N, kTileRows);
    const dim3 grid(std::max(1, std::min(tiles, sms * per_sm)));
    return launch_kernel(gemv_quant_tc_kernel<F>, grid, dim3(kThreads), smem, stream, p.pdl != 0, p);
}

bool multiple_of(int v, int of) { return v > 0 && v % of == 0; }

}  // namespace

bool gemv_quant_tc_eligible(const GemvQuantParams& p) {
    if (p.K % kStepK != 0 || p.K > kGemvQuantMaxK || p.N <= 0) return false;
    if (p.swiglu && p.N % 2 != 0) return false;
    switch (p.format) {
        case kGemvQuantFp8Block: return multiple_of(p.block_k, kStepK) && p.block_n > 0;
        case kGemvQuantFp8Channel: return true;
        case kGemvQuantNvfp4: return true;
        case kGemvQuantInt4: return multiple_of(p.group_size, kStepK) && p.K % p.group_size == 0;
        default: return false;
    }
}

cudaError_t gemv_quant_tc_launch(const GemvQuantParams& p, cudaStream_t stream) {
    if (!gemv_quant_tc_eligible(p)) return cudaErrorInvalidValue;
    switch (p.format) {
        case kGemvQuantFp8Block: return launch_tc<kGemvQuantFp8Block>(p, stream);
        case kGemvQuantFp8Channel: return launch_tc<kGemvQuantFp8Channel>(p, stream);
        case kGemvQuantNvfp4: return launch_tc<kGemvQuantNvfp4>(p, stream);
        default: return launch_tc<kGemvQuantInt4>(p, stream);
    }
}

}  // namespace frost::kernels
