// Quantized decode GEMV (see lm_gemv_quant.h). Like lm_gemv.cu: x staged once per block in shared
// memory, each warp streams weight rows with 16-byte read-only loads and reduces in a fixed
// butterfly order (deterministic). Each warp owns kRows rows so one x fragment read from shared
// memory serves kRows weight chunks (4-bit formats read 4 bytes of x per weight byte). A 16-byte
// chunk holds 16 (fp8) or 32 (4-bit) weights; a chunk never straddles a scale group, so the
// per-chunk dot is computed unscaled and multiplied by its scale once.
// Dequantization in registers: fp8 pairs with the hardware e4m3x2 -> f16x2 conversion (sm_89+;
// emulated below); e2m1 by placing its 3 magnitude bits at fp16 bits 9..11 (that fp16 is exactly
// e2m1 * 2^-14, the 2^14 folded into the group scale); int4 by OR-ing two nibbles into the
// mantissas of fp16 1024.0 and subtracting 1024 + zero point (exact in fp16).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemv_common.cuh"
#include "kernels/cuda/lm_gemv_quant_dispatch.cuh"
#include "kernels/cuda/lm_gemv_quant.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kRows = 2;    // weight rows per warp (x fragment reuse)
constexpr int kUnroll = 2;  // chunks per lane in flight, per row: kRows * kUnroll 16-byte loads
constexpr int kFp8PerChunk = 16, kFp4PerChunk = 32;
constexpr int kNvfp4Group = 16;
constexpr float kE2m1Unscale = 16384.0f;  // 2^14: fp16 with e2m1 bits at 9..11 is value * 2^-14
constexpr uint32_t kInt4Magic = 0x64006400u;  // fp16 1024.0 in both halves
constexpr float kInt4Magic1024 = 1024.0f;
constexpr int kInt4Offset = 8;

template <int F>
constexpr int chunk_elems() { return F == kGemvQuantFp8Block || F == kGemvQuantFp8Channel ? kFp8PerChunk : kFp4PerChunk; }

// x in shared memory, swizzled: lane L reads the P = E/8 16-byte pieces of chunk c = base + L, so
// unswizzled the 8 lanes of a 128-bit access phase would hit only 8/P of the 8 bank groups (P-way
// conflicts). Piece v of chunk c is stored at c*P + (v ^ ((c / (8/P)) % P)): the 8 lanes then
// cover all 8 bank groups for every v.
template <int P>
__device__ inline int x_piece(int c, int v) { return c * P + (v ^ ((c / (8 / P)) % P)); }

__device__ inline uint4 load_chunk(const uint4* p) { return __ldg(p); }
__device__ inline uint32_t word_at(const uint4& q, int i) { return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w; }

__device__ inline float2 fp8x2_to_float2(uint32_t two) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu), __NV_E4M3);
    return __half22float2(*reinterpret_cast<const __half2*>(&r));
}

__device__ inline float fp8_to_float(uint32_t byte) {
    const __half_raw r = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(byte & 0xFFu), __NV_E4M3);
    return __half2float(*reinterpret_cast<const __half*>(&r));
}

// Σ fp8(w_i) * x_i over 16 weights (element i is byte i of the chunk).
__device__ inline float dot_fp8(const uint4& w, const float* xf) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float2 f = fp8x2_to_float2(words[i] >> (16 * h));
            acc += f.x * xf[i * 4 + h * 2] + f.y * xf[i * 4 + h * 2 + 1];
        }
    }
    return acc;
}

// Σ e2m1(w_i) * 2^-14 * x_i over each 16-weight half of a 32-weight chunk (one NVFP4 group each).
// kPaired: words in the paired nibble order (quant4_pair_nibbles_launch).
template <bool kPaired>
__device__ inline float2 dot_fp4(const uint4& w, const float* xf) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float acc[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint32_t h;
            int k0, k1;
            if constexpr (kPaired) {  // nibbles j and j + 4: elements 2j and 2j + 1
                const uint32_t v = words[i] >> (4 * j);
                h = ((v & 0x8u) << 12) | ((v & 0x7u) << 9) | ((v & 0x80000u) << 12) | ((v & 0x70000u) << 9);
                k0 = i * 8 + 2 * j;
                k1 = k0 + 1;
            } else {
                const uint32_t b = words[i] >> (8 * j);  // low nibble: element 2j, high nibble: 2j + 1
                h = ((b & 0x8u) << 12) | ((b & 0x7u) << 9) | ((b & 0x80u) << 24) | ((b & 0x70u) << 21);
                k0 = i * 8 + j * 2;
                k1 = k0 + 1;
            }
            const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
            acc[i / 2] += f.x * xf[k0] + f.y * xf[k1];
        }
    }
    return make_float2(acc[0], acc[1]);
}

// Σ (q_i - zp) * x_i over 32 weights; word i holds elements 8i..8i+7, element 8i+j at bits 4j
// (kPaired: element 8i + 2j at bits 4j, 8i + 2j + 1 at bits 16 + 4j).
template <bool kPaired>
__device__ inline float dot_int4(const uint4& w, const float* xf, __half2 bias) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t h = ((words[i] >> (4 * j)) & 0x000F000Fu) | kInt4Magic;  // nibbles j and j + 4
            const float2 f = __half22float2(__hsub2(*reinterpret_cast<const __half2*>(&h), bias));
            if constexpr (kPaired) acc += f.x * xf[i * 8 + 2 * j] + f.y * xf[i * 8 + 2 * j + 1];
            else acc += f.x * xf[i * 8 + j] + f.y * xf[i * 8 + j + 4];
        }
    }
    return acc;
}

// What a row needs to scale its chunks, computed once per row (not per chunk: the runtime
// divisions of the block / group index cost more ALU than the 4-bit dot itself). Chunk c of the
// row lies in scale group c >> gshift (groups are a power-of-two number of chunks; otherwise
// gdiv divides).
struct RowScale {
    const void* s = nullptr;        // the row's first scale
    const int32_t* zp = nullptr;    // INT4: the row's zero-point word column, or null
    int zshift = 0;                 // INT4: bit offset of the row in a zero-point word
    float mul = 0.0f;               // NVFP4: 2^14 / global scale; FP8 channel: the row scale
};

__device__ inline int ilog2_exact(int v) { return (v & (v - 1)) == 0 ? __ffs(v) - 1 : -1; }

template <int F>
struct ScaleMap {
    int gshift = 0, gdiv = 1;  // chunk -> scale group
    int groups = 0;            // scale groups per row (zero-point column stride)
    __device__ ScaleMap(const GemvQuantParams& p) {
        int cpg = 1;  // chunks per scale group
        if constexpr (F == kGemvQuantFp8Block) {
            cpg = p.block_k / kFp8PerChunk;
            groups = (p.K + p.block_k - 1) / p.block_k;
        } else if constexpr (F == kGemvQuantInt4) {
            cpg = p.group_size / kFp4PerChunk;
            groups = p.K / p.group_size;
        }
        gshift = ilog2_exact(cpg);
        gdiv = cpg;
    }
    __device__ int group(int c) const { return gshift >= 0 ? c >> gshift : c / gdiv; }

    __device__ RowScale row(const GemvQuantParams& p, int n) const {
        RowScale r;
        if constexpr (F == kGemvQuantFp8Block) {
            r.s = static_cast<const float*>(p.scale) + (n / p.block_n) * groups;
        } else if constexpr (F == kGemvQuantFp8Channel) {
            r.mul = __ldg(static_cast<const float*>(p.scale) + n);
        } else if constexpr (F == kGemvQuantNvfp4) {
            r.s = static_cast<const uint8_t*>(p.scale) + static_cast<int64_t>(n) * (p.K / kNvfp4Group);
            const float gs = p.row_global_scale ? __ldg(p.row_global_scale + n) : p.global_scale;
            r.mul = kE2m1Unscale / gs;
        } else {
            r.s = static_cast<const bf16*>(p.scale) + static_cast<int64_t>(n) * groups;
            if (p.zero_point) {
                r.zp = p.zero_point + (n / 8) * groups;
                r.zshift = 4 * (n % 8);
            }
        }
        return r;
    }
};

// The scaled contribution of chunk c of a row.
template <int F, bool kPaired>
__device__ inline float chunk_dot(const ScaleMap<F>& m, const RowScale& r, const uint4& w, const float* xf, int c) {
    if constexpr (F == kGemvQuantFp8Block) {
        return __ldg(static_cast<const float*>(r.s) + m.group(c)) * dot_fp8(w, xf);
    } else if constexpr (F == kGemvQuantFp8Channel) {
        return dot_fp8(w, xf);  // the row scale is applied once after the reduction
    } else if constexpr (F == kGemvQuantNvfp4) {
        const uint16_t s2 = __ldg(static_cast<const uint16_t*>(r.s) + c);  // the chunk's two group scales
        const float2 s = fp8x2_to_float2(s2);
        const float2 d = dot_fp4<kPaired>(w, xf);
        return r.mul * (s.x * d.x + s.y * d.y);
    } else {
        const int g = m.group(c);
        const float s = __bfloat162float(__ldg(static_cast<const bf16*>(r.s) + g));
        int zp = kInt4Offset;
        if (r.zp) zp = (__ldg(r.zp + g) >> r.zshift) & 0xF;
        const __half2 bias = __float2half2_rn(kInt4Magic1024 + static_cast<float>(zp));
        return s * dot_int4<kPaired>(w, xf, bias);
    }
}

// Grid-stride over row groups: a block stages x once and its warps then walk many row groups, so
// the x staging (K * 2 bytes, as much as a whole 4-bit row group at kRows = 4) and its barrier are
// paid once per block rather than once per 16 rows (measured: the 4-bit kernels ran at 2.6-4.4x
// their floor when every block staged x for one row group). The first group's weights are loaded
// before pdl_wait(): they do not depend on the previous kernel. Each row's chunks are summed in
// the same lane order as before, so results do not depend on the grid size.
template <int F, bool kPaired>
__global__ void __launch_bounds__(kThreads) gemv_quant_kernel(GemvQuantParams p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* xs = reinterpret_cast<bf16*>(smem_raw);
    constexpr int E = chunk_elems<F>();
    constexpr int P = E / kVec;  // 16-byte x pieces per chunk
    const int chunks = p.K / E;
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    static_assert(kRows == 2, "the SwiGLU form gives a warp the gate row and its up row");
    const int n_groups = p.swiglu ? p.N / 2 : (p.N + kRows - 1) / kRows;
    const int stride = gridDim.x * kWarps;
    const ScaleMap<F> map(p);
    int grp = blockIdx.x * kWarps + warp;
    // Routed experts (GemvQuantParams::expert_ids): blockIdx.y is the entry; its expert comes from
    // the router, the previous kernel, so it is read after the wait and nothing is preloaded.
    const int entry = blockIdx.y;
    int row0 = 0;  // the expert's first row in the stacked weight
    if (p.expert_ids) {
        pdl_wait();
        row0 = __ldg(p.expert_ids + entry) * p.N;
    }
    const bf16* x = p.x + (p.expert_ids ? static_cast<int64_t>(entry / p.x_entry_div) * p.ldx : 0);
    bf16* const y16 = static_cast<bf16*>(p.y) + static_cast<int64_t>(entry) * p.ldy;  // entry 0 / plain: y

    // Rows of group g: SwiGLU pairs gate row g with up row g + N/2 (in the expert: row0 + that).
    auto row_of = [&](int g, int r) { return row0 + (p.swiglu ? g + r * (p.N / 2) : g * kRows + r); };
    auto row_valid = [&](int g, int r) { return g < n_groups && (p.swiglu || g * kRows + r < p.N); };
    // Chunk c of row n at row_base(n) + chunk_off(c): row-major, or in 8-row blocks (row_blocks,
    // quant4_chunk_index; 4-bit only, 4 chunks per 128-wide step): c = c / 4 * 4 + c % 4 row-major.
    const int64_t block_stride = p.row_blocks ? 32 : 4;
    auto row_base = [&](int64_t n) {
        return static_cast<const uint4*>(p.w) + (p.row_blocks ? (n >> 3) * (chunks / 4) * 32 + (n & 7) * 4 : n * chunks);
    };
    auto chunk_off = [&](int c) { return (c >> 2) * block_stride + (c & 3); };
    uint4 first[kUnroll][kRows];
    if (grp < n_groups && !p.expert_ids) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                const int c = lane + u * kWarp;
                if (c < chunks && row_valid(grp, r)) first[u][r] = load_chunk(row_base(row_of(grp, r)) + chunk_off(c));
            }
    }
    pdl_wait();
    pdl_launch_dependents();
    for (int i = threadIdx.x; i < p.K / kVec; i += kThreads)
        reinterpret_cast<Bf16x8*>(xs)[x_piece<P>(i / P, i % P)] = reinterpret_cast<const Bf16x8*>(x)[i];
    __syncthreads();
    for (bool is_first = true; grp < n_groups; grp += stride, is_first = false) {
        const uint4* rows[kRows];
        RowScale rs[kRows];
        bool valid[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            valid[r] = row_valid(grp, r);
            const int n = valid[r] ? row_of(grp, r) : row0;
            rows[r] = row_base(n);
            rs[r] = map.row(p, n);
        }
        float acc[kRows] = {};
        for (int c = lane; c < chunks; c += kWarp * kUnroll) {
            uint4 wv[kUnroll][kRows];
            if (is_first && c == lane && !p.expert_ids) {
#pragma unroll
                for (int u = 0; u < kUnroll; ++u)
#pragma unroll
                    for (int r = 0; r < kRows; ++r) wv[u][r] = first[u][r];
            } else {
#pragma unroll
                for (int u = 0; u < kUnroll; ++u)
#pragma unroll
                    for (int r = 0; r < kRows; ++r)
                        if (c + u * kWarp < chunks && valid[r]) wv[u][r] = load_chunk(rows[r] + chunk_off(c + u * kWarp));
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int cc = c + u * kWarp;
                if (cc >= chunks) break;
                float xf[E];
#pragma unroll
                for (int v = 0; v < P; ++v) {
                    const Bf16x8 xv = reinterpret_cast<const Bf16x8*>(xs)[x_piece<P>(cc, v)];
#pragma unroll
                    for (int h = 0; h < 4; ++h) {
                        const float2 f = xv.f2(h);
                        xf[v * kVec + 2 * h] = f.x;
                        xf[v * kVec + 2 * h + 1] = f.y;
                    }
                }
#pragma unroll
                for (int r = 0; r < kRows; ++r)
                    if (valid[r]) acc[r] += chunk_dot<F, kPaired>(map, rs[r], wv[u][r], xf, cc);
            }
        }
        float sum[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            sum[r] = warp_sum(acc[r]);
            if constexpr (F == kGemvQuantFp8Channel) sum[r] *= rs[r].mul;
        }
        if (lane != 0) continue;
        if (p.swiglu) {
            if (!valid[0]) continue;
            y16[grp] = swiglu_from_sums(sum[0], sum[1]);
            continue;
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (!valid[r]) continue;
            store_gemv_out(p, static_cast<int64_t>(entry) * p.ldy + grp * kRows + r, sum[r]);
        }
    }
}

// NVFP4's divisor of row n: per row when the params carry one (fused projections), else global.
__device__ inline float global_scale_of(const GemvQuantParams& p, int n) {
    return p.row_global_scale ? __ldg(p.row_global_scale + n) : p.global_scale;
}

// Weights 8u .. 8u + 7 of row n of a 4-bit weight, from their stored word w: each the exact
// value times its scale in fp32 (one rounding, the CPU reference's order). The scale is loaded
// here for each word: a form that took one scale per 16-byte chunk outside dequant_blocked_kernel's
// word loop (the same bits) compiled it to 38-40 registers instead of 32, and at 32 forced it ran
// INT4 1.33-1.34x its bytes floor against this form's 1.28-1.29x (`bench_quant_gemv --dequant`).
template <int F>
__device__ inline void dequant_word4(const GemvQuantParams& p, uint32_t w, int n, int u, float (&v)[kVec]) {
    if constexpr (F == kGemvQuantNvfp4) {
        const uint8_t sb = __ldg(static_cast<const uint8_t*>(p.scale) + static_cast<int64_t>(n) * (p.K / kNvfp4Group) + u / 2);
        const float s = __fdiv_rn(fp8_to_float(sb), global_scale_of(p, n));
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            // Elements 2j and 2j + 1: byte j in the checkpoint's order, nibbles j and j + 4 paired.
            const uint32_t b = p.nibble_pairs ? w >> (4 * j) : w >> (8 * j);
            const uint32_t hi = p.nibble_pairs ? b >> 16 : b >> 4;
            const uint32_t h = ((b & 0x8u) << 12) | ((b & 0x7u) << 9) | ((hi & 0x8u) << 28) | ((hi & 0x7u) << 25);
            const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
            v[2 * j] = (f.x * kE2m1Unscale) * s;
            v[2 * j + 1] = (f.y * kE2m1Unscale) * s;
        }
    } else {
        const int groups = p.K / p.group_size;
        const int g = u * kVec / p.group_size;
        const float s = __bfloat162float(__ldg(static_cast<const bf16*>(p.scale) + static_cast<int64_t>(n) * groups + g));
        int zp = kInt4Offset;
        if (p.zero_point) zp = (__ldg(p.zero_point + (n / 8) * groups + g) >> (4 * (n % 8))) & 0xF;
        const __half2 bias = __float2half2_rn(kInt4Magic1024 + static_cast<float>(zp));
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t h = ((w >> (4 * j)) & 0x000F000Fu) | kInt4Magic;
            const float2 f = __half22float2(__hsub2(*reinterpret_cast<const __half2*>(&h), bias));
            // Nibbles j and j + 4: elements j and j + 4, or 2j and 2j + 1 in the paired order.
            // Constant indices in each branch keep v in registers: the one expression with a
            // runtime index (p.nibble_pairs ? 2 * j : j) put v in local memory (a 32-byte stack
            // frame). What that cost (H200, 2026-12-02, fifty-first session, `frost bench engine
            // --ttft 1024,4096`, the fix alone and with the blocked kernel below): 9B INT4 cold
            // TTFT 1k / 4k 34.8-35.3 / 104.9-105.8 -> 27.6-28.5 / 100.0-101.2 ms; the 35B-A3B
            // INT4 cut (20 layers, every expert dequantized per chunk) at 1k, rows row-major,
            // 30.8-31.4 -> 24.3 ms.
            if (p.nibble_pairs) {
                v[2 * j] = f.x * s;
                v[2 * j + 1] = f.y * s;
            } else {
                v[j] = f.x * s;
                v[j + 4] = f.y * s;
            }
        }
    }
}

// The whole weight as bf16 (the operand of a prefill GEMM on 4-bit or exact-FP8 weights): each
// value the exact one times its scale in fp32 (one rounding, the CPU reference's order), stored as
// bf16. One thread per 8 weights of a row (16 bytes out), consecutive threads on consecutive units
// of the row, blockIdx.y walking rows: a warp's loads (4 or 8 bytes each) and its 16-byte stores
// are contiguous. Measured (H100, 2026-11-25, same run, FROST_DEQUANT A/B): the kernel before it
// gave each thread a 16-byte chunk of weights (32 4-bit or 16 fp8 values), so a warp's stores
// were 64 (or 32) bytes apart and its loads 16 bytes per lane 16 bytes apart; it ran at ~0.3 TB/s
// of bf16 written. bench_ops 9B int4, 2048-row chunk: GEMMs with dequantization 80.2 -> 45.8 ms
// (in_proj 588 -> 338 us per call); cold TTFT 1k / 4k: int4 67.3-67.6 -> 30.3-31.0 ms, 178.5-178.6
// -> 113.9-114.6 ms, NVFP4 the same, exact FP8 46.7 -> 31.2-31.5, 137.9-138.1 -> 112.9-113.6 ms
// (bf16 24.8 / 102.2 ms in that run).
template <int F>
__global__ void __launch_bounds__(kThreads) dequant_rows_kernel(GemvQuantParams p, bf16* out) {
    const int units = p.K / kVec;
    const int u = blockIdx.x * kThreads + threadIdx.x;
    if (u >= units) return;
    for (int n = blockIdx.y; n < p.N; n += gridDim.y) {
        float v[kVec];
        if constexpr (F == kGemvQuantFp8Block || F == kGemvQuantFp8Channel) {
            const uint2 w = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.w) + static_cast<int64_t>(n) * p.K) + u);
            float s;
            if constexpr (F == kGemvQuantFp8Block) {
                const int scale_cols = (p.K + p.block_k - 1) / p.block_k;
                s = __ldg(static_cast<const float*>(p.scale) + (n / p.block_n) * scale_cols + u * kVec / p.block_k);
            } else {
                s = __ldg(static_cast<const float*>(p.scale) + n);
            }
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const float2 f = fp8x2_to_float2((q < 2 ? w.x : w.y) >> (16 * (q % 2)));
                v[2 * q] = f.x * s;
                v[2 * q + 1] = f.y * s;
            }
        } else {
            dequant_word4<F>(p, __ldg(static_cast<const uint32_t*>(p.w) + static_cast<int64_t>(n) * units + u), n, u, v);
        }
        store8(out + static_cast<int64_t>(n) * p.K + static_cast<int64_t>(u) * kVec, v);
    }
}

// 4-bit rows in 8-row blocks (row_blocks): a unit is kUnitSteps 128-wide steps of one 8-row
// group (the last unit of a group may be shorter), contiguous in that layout (4 KB packed). Each
// thread dequantizes one 16-byte chunk (32 weights of one row) into shared memory, then the block
// writes the unit's 8 row pieces from there, 16 bytes per thread: a warp's loads read 512
// contiguous bytes and its stores write 512.
// Measured (H200, 2026-12-02, fifty-first session). `bench_quant_gemv --dequant`, time over the
// bytes floor (packed weight and scales read, bf16 written, at the copy rate), 9B shapes: INT4
// 1.28-1.32x against 1.40-1.42x row-major, NVFP4 1.37-1.40x against 1.34-1.37x. Through the
// engine (`frost bench engine --ttft 1024,4096 --decode 1024`, FROST_QUANT4_ROW_BLOCKS=1 / 0 in
// one call): 9B INT4 1k / 4k 27.58 / 100.05 ms against 28.52 / 101.20 row-major; the 35B-A3B INT4
// cut, whose prefill dequantizes every expert of the stack per chunk (~2 GB a layer, K 2048 and
// 512), 25.04 / 40.76 against 24.30 / 39.06 ms, while its decode gains from the layout (1.094
// against 1.102 ms/token). Tried in the same session and dropped: one word per thread over the
// group, in stored order (a warp's loads 128 contiguous bytes, its stores two 256-byte row
// pieces; 35B-A3B 1k 32.3 against 30.8 ms) or along each row (loads of two 64-byte pieces 512
// bytes apart; 36.5 against 31.4), both measured beside the row-major kernel before its
// local-memory fix (dequant_word4); units of several whole groups where a group has fewer than
// kUnitSteps steps (the 35B-A3B's down, K 512), which needed 47-56 registers: 1.54x INT4 and
// 1.59x NVFP4 on the 9B shapes even at 32 forced, the 35B-A3B 1k 27.1 ms.
constexpr int kUnitSteps = 8;  // 8 rows x 1024 weights: 16 KB of bf16 staged, one 16-byte chunk per thread
static_assert(kUnitSteps * 32 == kThreads, "one chunk per thread");
template <int F>
__global__ void __launch_bounds__(kThreads) dequant_blocked_kernel(GemvQuantParams p, bf16* out) {
    __shared__ __align__(16) bf16 rows[8][kUnitSteps * 128];
    const int steps = p.K / 128, slices = (steps + kUnitSteps - 1) / kUnitSteps;
    const int64_t units = static_cast<int64_t>(p.N / 8) * slices;
    const int t = threadIdx.x;
    for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
        const int64_t g = unit / slices;
        const int s0 = static_cast<int>(unit % slices) * kUnitSteps;
        const int ns = min(kUnitSteps, steps - s0);
        const uint4* src = static_cast<const uint4*>(p.w) + (g * steps + s0) * 32;
        if (t < ns * 32) {  // chunk t of the unit: step s0 + t / 32, row t / 4 % 8, part t % 4
            const uint4 q = __ldg(src + t);
            const int r = t / 4 % 8, part = t % 4;
            const int n = static_cast<int>(8 * g) + r, col = (t / 32) * 128 + part * 32;  // col: within the unit
#pragma unroll
            for (int wi = 0; wi < 4; ++wi) {
                float v[kVec];
                dequant_word4<F>(p, word_at(q, wi), n, (s0 * 128 + col) / kVec + wi, v);
                store8(&rows[r][col + wi * kVec], v);
            }
        }
        __syncthreads();
        const int per_row = ns * 128 / kVec;  // 16-byte pieces of a row in this unit
        for (int i = t; i < 8 * per_row; i += kThreads) {
            const int r = i / per_row, c = i % per_row;
            *reinterpret_cast<uint4*>(out + (8 * g + r) * p.K + s0 * 128 + c * kVec) =
                *reinterpret_cast<const uint4*>(&rows[r][c * kVec]);
        }
        __syncthreads();
    }
}


// The format checks shared by both launchers.
bool supported(const GemvQuantParams& p) {
    if (!p.w || !p.scale || p.N <= 0 || p.K <= 0 || !lm::aligned16(p.w)) return false;
    if (p.nibble_pairs != 0 && p.nibble_pairs != 1) return false;
    if (p.row_blocks != 0 && (p.row_blocks != 1 || p.K % 128 != 0 ||
                              (p.format != kGemvQuantNvfp4 && p.format != kGemvQuantInt4)))
        return false;
    switch (p.format) {
        case kGemvQuantFp8Block:
            return p.K % kFp8PerChunk == 0 && p.block_n > 0 && p.block_k > 0 && p.block_k % kFp8PerChunk == 0;
        case kGemvQuantFp8Channel:
            return p.K % kFp8PerChunk == 0;
        case kGemvQuantNvfp4:
            return p.K % kFp4PerChunk == 0 && (p.row_global_scale || p.global_scale > 0.0f);
        case kGemvQuantInt4:
            return p.K % kFp4PerChunk == 0 && p.group_size > 0 && p.group_size % kFp4PerChunk == 0 &&
                   p.K % p.group_size == 0;
        default:
            return false;
    }
}

}  // namespace

// Blocks of `kernel` that fit on the device at once (all SMs, full occupancy for this shared-memory
// size): the grid-stride kernel needs no more; fewer row groups than that launch fewer blocks.
template <typename Kernel>
cudaError_t resident_blocks(Kernel kernel, size_t smem, int* out) {
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem);
    *out = std::max(1, sms * per_sm);
    return e;
}

template <int F>
cudaError_t launch_gemv_quant(const GemvQuantParams& p, size_t smem, cudaStream_t stream) {
    const int groups = p.swiglu ? p.N / 2 : ceil_div(p.N, kRows);
    constexpr bool k4 = F == kGemvQuantNvfp4 || F == kGemvQuantInt4;
    auto kernel = k4 && p.nibble_pairs ? gemv_quant_kernel<F, k4> : gemv_quant_kernel<F, false>;
    int resident = 0;
    const cudaError_t e = resident_blocks(kernel, smem, &resident);
    if (e != cudaSuccess) return e;
    // Routed experts: one row of blocks per entry, the resident blocks shared among them.
    const int entries = p.expert_ids ? p.entries : 1;
    const dim3 grid(std::min(ceil_div(groups, kWarps), std::max(1, resident / entries)), entries);
    return launch_kernel(kernel, grid, dim3(kThreads), smem, stream, p.pdl != 0, p);
}

cudaError_t gemv_quant_launch(const GemvQuantParams& p, cudaStream_t stream) {
    if (supported(p) && gemv_quant_tc_eligible(p)) return gemv_quant_tc_launch(p, stream);
    return gemv_quant_simt_launch(p, stream);
}

bool gemv_quant_entries_valid(const GemvQuantParams& p) {
    if (!p.expert_ids) return p.entries == 0 && p.routed_entries == 0;
    const int out = p.swiglu ? p.N / 2 : p.N;
    if (p.routed_entries != 0 &&
        (p.routed_entries < 0 || p.routed_entries >= p.entries || p.shared_x_row0 < 0 || !p.shared_w || !p.shared_scale ||
         reinterpret_cast<uintptr_t>(p.shared_w) % 16 != 0 || (p.zero_point == nullptr) != (p.shared_zero_point == nullptr) ||
         (p.row_global_scale == nullptr) != (p.shared_row_global_scale == nullptr)))
        return false;
    return p.entries > 0 && p.M == 1 && p.x_entry_div >= 1 && p.ldx >= p.K && p.ldx % kVec == 0 && p.ldy >= out;
}

cudaError_t gemv_quant_simt_launch(const GemvQuantParams& p, cudaStream_t stream) {
    if (!supported(p) || !p.x || !p.y || p.M != 1 || p.K > kGemvQuantMaxK || !lm::aligned16(p.x)) return cudaErrorInvalidValue;
    // W8A8 and a folded shared expert: tensor cores only.
    if (!gemv_quant_entries_valid(p) || p.act_fp8 || p.routed_entries != 0) return cudaErrorInvalidValue;
    if (p.swiglu && (p.N % 2 != 0 || p.out_f32 || p.accumulate)) return cudaErrorInvalidValue;
    const size_t smem = static_cast<size_t>(p.K) * sizeof(bf16);
    return launch_for_format(p.format, [&](auto f) { return launch_gemv_quant<decltype(f)::value>(p, smem, stream); });
}

cudaError_t dequant_bf16_launch(const GemvQuantParams& p, bf16* out, cudaStream_t stream, int max_blocks) {
    if (!supported(p) || !out || !lm::aligned16(out) || max_blocks < 1) return cudaErrorInvalidValue;
    const int limit = std::min(max_blocks, 65535);
    if (p.row_blocks != 0) {  // supported(): 4-bit, K a multiple of 128
        if (p.N % 8 != 0) return cudaErrorInvalidValue;
        const int64_t units = static_cast<int64_t>(p.N / 8) * ceil_div(p.K / 128, kUnitSteps);
        const int blocks = static_cast<int>(std::min<int64_t>(units, limit));
        return launch_for_format(p.format, [&](auto f) {
            constexpr int kF = decltype(f)::value;
            if constexpr (kF == kGemvQuantNvfp4 || kF == kGemvQuantInt4) dequant_blocked_kernel<kF><<<blocks, kThreads, 0, stream>>>(p, out);
            return cudaGetLastError();
        });
    }
    const int cols = ceil_div(p.K / kVec, kThreads);
    const dim3 grid(cols, std::min(p.N, std::max(1, limit / cols)));
    return launch_for_format(p.format, [&](auto f) {
        dequant_rows_kernel<decltype(f)::value><<<grid, kThreads, 0, stream>>>(p, out);
        return cudaSuccess;
    });
}

KernelCost gemv_quant_cost(const GemvQuantParams& p) {
    const double N = p.N, K = p.K;
    double w = 0, s = 0;
    switch (p.format) {
        case kGemvQuantFp8Block:
            w = N * K;
            s = std::ceil(N / p.block_n) * std::ceil(K / p.block_k) * sizeof(float);
            break;
        case kGemvQuantFp8Channel:
            w = N * K;
            s = N * sizeof(float);
            break;
        case kGemvQuantNvfp4:
            w = N * K / 2;
            s = N * K / kNvfp4Group + (p.row_global_scale ? N * sizeof(float) : 0);
            break;
        default:
            w = N * K / 2;
            s = N * (K / p.group_size) * sizeof(bf16) + (p.zero_point ? std::ceil(N / 8) * (K / p.group_size) * 4 : 0);
            break;
    }
    const double M = p.M > 1 ? p.M : 1;
    const double outs = M * (p.swiglu ? N / 2 : N);
    const double bytes = w + s + M * K * sizeof(bf16) + outs * (p.out_f32 ? sizeof(float) : sizeof(bf16)) * (p.accumulate ? 2 : 1);
    return {bytes, 2.0 * M * N * K};
}

namespace {
// quant4_pair_nibbles over n words, grid-stride (a load-time pass: one read and one write).
__global__ void pair_nibbles_kernel(uint32_t* w, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        w[i] = quant4_pair_nibbles(w[i]);
}

// quant4_row_blocks_launch: one 8-row group per block (grid-stride), staged whole in shared memory
// (the group spans the same bytes in both layouts), then written back block by block.
__global__ void __launch_bounds__(kThreads) row_blocks_kernel(uint4* w, int64_t groups, int K) {
    extern __shared__ uint4 group[];
    const int per_row = K / 32, n = 8 * per_row;  // uint4 per row, per group
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        uint4* base = w + g * n;
        for (int i = threadIdx.x; i < n; i += kThreads) group[i] = base[i];
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += kThreads) {  // i = (step * 8 + row) * 4 + part
            const int step = i / 32, row = i / 4 % 8, part = i % 4;
            base[i] = group[row * per_row + step * 4 + part];
        }
        __syncthreads();
    }
}
}  // namespace

cudaError_t quant4_row_blocks_launch(void* w, int64_t rows, int64_t K, cudaStream_t stream) {
    if (!w || reinterpret_cast<uintptr_t>(w) % 16 != 0 || !quant4_row_blocks_eligible(rows, K)) return cudaErrorInvalidValue;
    const int smem = static_cast<int>(4 * K);  // 8 rows of K / 2 bytes
    cudaError_t e = cudaFuncSetAttribute(row_blocks_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    const int64_t groups = rows / 8;
    const int blocks = static_cast<int>(std::min<int64_t>(groups, 4096));
    row_blocks_kernel<<<blocks, kThreads, smem, stream>>>(static_cast<uint4*>(w), groups, static_cast<int>(K));
    return cudaGetLastError();
}

cudaError_t quant4_pair_nibbles_launch(void* w, size_t bytes, cudaStream_t stream) {
    if (!w || bytes % 4 != 0 || reinterpret_cast<uintptr_t>(w) % 4 != 0) return cudaErrorInvalidValue;
    const int64_t n = static_cast<int64_t>(bytes / 4);
    if (n == 0) return cudaSuccess;
    const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(n, int64_t(kThreads)), 4096));
    pair_nibbles_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(w), n);
    return cudaGetLastError();
}

}  // namespace frost::kernels
