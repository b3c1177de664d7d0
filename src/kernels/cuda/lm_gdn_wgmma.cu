// The bf16 path's state + output pass on warpgroup MMA (Hopper, sm_90a; issue 18). Same math as the
// mma.sync passes (lm_gdn_bf16.cu, lm_gdn_bf16_narrow.cu), per chunk c of a value head's dv slice:
//   V' = U − W S₀ and X = Q S₀            (k over dk)
//   O  = e^γ ⊙ X + P V'                   (k over the chunk's rows)
//   S  = e^{γ_L} S₀ + Kᵀ (e^{γ_L−γ} ⊙ V') (k over the chunk's rows)
// with bf16 multiplicands, fp32 accumulators and an fp32 state held in registers for the pass.
// Why: the mma.sync passes are latency-bound (a chunk is ~500 dependent instructions per warp:
// fragment loads, 56 mma, their chains; ncu on the H100: 0.31 eligible warps per scheduler). Here
// one warpgroup issues 28 wgmma per chunk that read both operands from shared memory, so a chunk
// costs the tensor cores' time on 64 x kN tiles plus two short epilogues.
// Block per (value head, kN-column slice): 128 blocks for the 9B (32 heads, kN = 32) and the 0.8B
// (16 heads, kN = 16). Warpgroup 0 issues the wgmma and runs the epilogues; warpgroup 1 only
// issues the cp.async copies of the next chunks (three stages, handed over through full / empty
// mbarriers), so the consumer's per-chunk chain holds no copy instructions. With one consumer warp
// per scheduler, every instruction of that chain is exposed latency (ncu, H200, 9B shape, 4096
// rows, copies issued by the consumer: 0.36 issued per scheduler and cycle); the wgmma
// descriptors are likewise built once per chunk and moved by constants.
// The chain from one chunk to the next is V' (W S₀) -> its epilogue -> the S update -> the S₀ᵀ
// store, so everything else keeps off it (2026-12-01, H200, bench_cuda_kernels --gdn, L2 flushed,
// µs of this pass, 16 / 32 value heads): the S₀ᵀ store runs while the O products do, and the
// gates' exponentials and the U entries load while the V' products run. 1024 rows 20.7-20.8 /
// 26.1 -> 19.9 / 23.8-23.9, 4096 65.6-65.7 / 84.6-85.1 -> 61.9-62.0 / 75.1-75.3, 16384
// 241.2-242.6 / 319.7-319.9 -> 227.7-228.0 / 278.5-280.5 (the S₀ᵀ store moved alone: 20.4 / 24.8,
// 63.2-63.5 / 78.5, 235.8-236.0 / 293.7-294.5). Same bits: each value is computed as before.
// Not done: issuing the next chunk's V' products before waiting for this chunk's O (so the O wait
// and the output stores leave the chain too). With any wgmma group in flight across the loop's
// back edge, ptxas serialises the kernel's wgmma (C7514, non-wgmma instructions reading
// accumulator registers inside the pipeline stage, most likely the loop-carried copies); an empty
// commit group to make every iteration wait alike gave C7520 instead. It was not run.
// Shared-memory operands, all in wgmma's 128-byte swizzled layout (rows of 64 bf16, 16-byte
// chunk j of row r at j ^ (r % 8), tiles 1024-byte aligned):
//   W, Q: [dk / 64][64 rows][64]   K-major A of V' and X
//   K:    [dk / 64][64 rows][64]   read as Kᵀ: the M-major ("transposed") A of the S update
//   P:    [64 rows][64]            K-major A of O
//   S₀ᵀ:  [dk / 64][kN][64]        K-major B of V' and X (B[k = dk][n] stored by n)
//   V'ᵀ, (e^{γ_L−γ} V')ᵀ: [kN][64] K-major B of O and of the S update
// The transposed B tiles are written from the accumulators by stmatrix.trans: a thread's pairs
// (row, n), (row, n + 1) become column entries of rows n, n + 1 with no shuffle.
// Rows past the launch's length: K and Q load as zeros and W, U, P are zero there (the prep's
// β is zero), so V' is exactly zero and the sums over them add nothing.
#include <cuda_runtime.h>

#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gdn_bf16.cuh"
#include "kernels/cuda/lm_mbarrier.cuh"
#include "util/env.h"

namespace frost::kernels::gdn {
namespace {
using namespace lm;

constexpr int kWgThreads = 128;                 // the consumer warpgroup (wgmma, epilogues)
constexpr int kBlockThreads = 2 * kWgThreads;  // + a producer warpgroup (every cp.async)
constexpr int kWgStages = 3;
constexpr int kRowB = 128;          // one swizzled row: 64 bf16
constexpr int kHalfB = kC * kRowB;  // a 64 x 64 bf16 block (P, or half of W, K, Q): 8 KB

// Byte offsets in the 1024-aligned dynamic shared memory: three stages, then S₀ᵀ, V'ᵀ, (decayed V')ᵀ.
template <int kN>
struct WgLayout {
    static constexpr int kUPitch = kN + 8;  // 4-byte reads at rows g, cols 2t hit distinct banks
    static constexpr int kW = 0, kK = kW + 2 * kHalfB, kQ = kK + 2 * kHalfB, kP = kQ + 2 * kHalfB;
    static constexpr int kU = kP + kHalfB;
    static constexpr int kGamma = kU + kC * kUPitch * 2;
    static constexpr int kStage = (kGamma + kC * 4 + 1023) / 1024 * 1024;
    static constexpr int kS0t = kWgStages * kStage;         // [2][kN][64]
    static constexpr int kVpt = kS0t + 2 * kN * kRowB;      // [kN][64]
    static constexpr int kVdt = kVpt + kN * kRowB;          // [kN][64]
    static constexpr int kBars = kVdt + kN * kRowB;         // full[3], empty[3]: 8 bytes each
    static constexpr int kBytes = kBars + 64 + 1024;        // + slack for the 1024 alignment
    static_assert(kBytes <= 227 * 1024, "one block per SM");
    static_assert((kN * kRowB) % 1024 == 0, "swizzled tiles stay 1024-aligned");
};

#if defined(FROST_ATTN_WGMMA)

template <int kN, int kTA>
__device__ inline void wgmma_tile(float (&d)[kN / 2], uint64_t da, uint64_t db, int accumulate) {
    if constexpr (kN == 32)
        wgmma_n32<kTA>(d, da, db, accumulate);
    else
        wgmma_n16<kTA>(d, da, db, accumulate);
}

// An accumulator tile d[64 x kN] of this warpgroup (warp w: rows 16w..16w+15) stored transposed as
// bf16 into the K-major swizzled tile at `dst` ([kN][64], row n = column n of d), the rows of d
// being its k index. f(i, x) gives the value of register x of n8 tile i (so callers can transform).
template <int kN, class F>
__device__ inline void store_transposed(uint32_t dst, int warp, int lane, F&& f) {
    const int mat = lane >> 3, j = lane & 7;
    const int h = mat & 1;  // row half of d: rows 16w + 8h ..
#pragma unroll
    for (int call = 0; call < kN / 16; ++call) {
        uint32_t r[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const int i = 2 * call + (m >> 1), hh = m & 1;
            r[m] = pack_bf16(f(i, 4 * i + 2 * hh), f(i, 4 * i + 2 * hh + 1));
        }
        const int n = 8 * (2 * call + (mat >> 1)) + j;
        stmatrix_x4_trans(dst + n * kRowB + ((((2 * warp + h) ^ j) & 7) << 4), r);
    }
}

// K-major swizzled descriptor of a [rows][64] tile; moved by `bytes` (the address field counts 16-byte
// units and shared addresses stay below 256 KB, so the sum never carries out of the field). Built
// once and moved by constants: a descriptor from scratch is several instructions, and a chunk
// issues 28 wgmma with two each.
__device__ inline uint64_t kmajor(uint32_t tile) { return smem_desc_sw128(tile, 16, 1024); }
__device__ inline uint64_t moved(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// Chunk c's operands into a stage: W, K, Q (two 64-wide blocks each), P, the U slice, γ; t is the
// thread's index in the producer warpgroup.
template <int kN>
__device__ inline void wg_prefetch(unsigned char* st_ptr, const GdnBf16Params& p, const float* slot,
                                   int start, int len, int kh, int j0, int t) {
    using L = WgLayout<kN>;
    const bf16* w = reinterpret_cast<const bf16*>(slot + kBf16WOff);
    const int64_t head = static_cast<int64_t>(kh) * kD;
#pragma unroll
    for (int it = 0; it < kC * (kD / kVec) / kWgThreads; ++it) {  // 8 rounds of 16-byte chunks
        const int e = t + it * kWgThreads;
        const int r = e / (kD / kVec), ch = e % (kD / kVec);
        const uint32_t off = (ch / 8) * kHalfB + r * kRowB + (((ch % 8) ^ (r % 8)) << 4);
        const bool in = r < len;
        const int64_t row = static_cast<int64_t>(start + (in ? r : 0)) * p.qkv_row_stride + head + ch * kVec;
        cp_async16(st_ptr + L::kW + off, w + r * kD + ch * kVec);
        cp_async16(st_ptr + L::kK + off, p.k + row, in ? 16 : 0);
        cp_async16(st_ptr + L::kQ + off, p.q + row, in ? 16 : 0);
    }
    const bf16* pm = reinterpret_cast<const bf16*>(slot + kBf16POff);
#pragma unroll
    for (int it = 0; it < kC * (kC / kVec) / kWgThreads; ++it) {  // 4 rounds
        const int e = t + it * kWgThreads;
        const int r = e / (kC / kVec), ch = e % (kC / kVec);
        cp_async16(st_ptr + L::kP + r * kRowB + ((ch ^ (r % 8)) << 4), pm + r * kC + ch * kVec);
    }
    const bf16* u = reinterpret_cast<const bf16*>(slot + kBf16UOff);
    constexpr int kUVecs = kN / kVec;
#pragma unroll
    for (int it = 0; it < kC * kUVecs / kWgThreads; ++it) {
        const int e = t + it * kWgThreads;
        const int r = e / kUVecs, ch = e % kUVecs;
        cp_async16(st_ptr + L::kU + (r * L::kUPitch + ch * kVec) * 2, u + r * kD + j0 + ch * kVec);
    }
    if (t < kC / 4) cp_async16(st_ptr + L::kGamma + 16 * t, slot + kBf16GammaOff + 4 * t);
}

#endif  // FROST_ATTN_WGMMA

// The body exists in the sm_90a code only; the portable compute_80 PTX gets an empty one (the
// launcher asks for an sm_90a device first).
template <int kN>
__global__ void __launch_bounds__(kBlockThreads, 1) gdn_state_wgmma_kernel(GdnBf16Params p) {
#if defined(FROST_ATTN_WGMMA)
    using L = WgLayout<kN>;
    constexpr int kR = kN / 2;  // accumulator registers of a 64 x kN tile
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t raw = smem_addr(smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    unsigned char* const base_ptr = smem_raw + (base - raw);
    const uint32_t s0t = base + L::kS0t, vpt = base + L::kVpt, vdt = base + L::kVdt;
    const uint32_t full0 = base + L::kBars, empty0 = full0 + 8 * kWgStages;

    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int h = blockIdx.x, j0 = blockIdx.y * kN;
    const int kh = h / (p.Hv / p.Hk);
    int chunks = 0;
    for (int st, ln; chunks < max_chunks(rows) && chunk_range(chunks, pos, rows, st, ln);) ++chunks;
    auto slot_of = [&](int c) { return p.work + (static_cast<int64_t>(c) * p.Hv + h) * kBf16SlotFloats; };
    if (threadIdx.x == 0)
        for (int b = 0; b < kWgStages; ++b) {
            mbar_init(full0 + 8 * b, kWgThreads);   // every producer thread's copies have landed
            mbar_init(empty0 + 8 * b, kWgThreads);  // every consumer thread is done with the stage
        }
    __syncthreads();  // the only block-wide barrier: the roles part here

    if (threadIdx.x >= kWgThreads) {  // producer: chunk c into stage c % 3 once chunk c - 3 left it
        pdl_wait();  // W, U, P, γ come from the prep launch, which may still run (launch_wgmma)
        for (int c = 0; c < chunks; ++c) {
            const int b = c % kWgStages;
            if (c >= kWgStages) mbar_wait(empty0 + 8 * b, (c / kWgStages - 1) & 1);
            int st, ln;
            chunk_range(c, pos, rows, st, ln);
            wg_prefetch<kN>(base_ptr + b * L::kStage, p, slot_of(c), st, ln, kh, j0, threadIdx.x - kWgThreads);
            mbar_arrive_cp_async(full0 + 8 * b);
        }
        cp_async_wait<0>();
        return;
    }

    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int g = lane / 4, t = lane % 4;
    float* state = p.state + static_cast<int64_t>(h) * kD * kD;
    // The consumer warpgroup's own barrier (id 1; the producer never joins it).
    auto consumer_sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(kWgThreads) : "memory"); };

    // S slice: two 64-row halves of dk, this thread's rows 64 mh + 16 warp + g (+8), columns
    // j0 + 8i + 2t (+1): the accumulator layout of an m64 x kN tile. each_pair(f) calls f on every
    // register pair and its place in the fp32 state (loaded here, stored back after the last chunk).
    float s[2][kR];
    auto each_pair = [&](auto&& f) {
#pragma unroll
        for (int mh = 0; mh < 2; ++mh)
#pragma unroll
            for (int i = 0; i < kN / 8; ++i)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int r = 64 * mh + 16 * warp + g + 8 * hh;
                    f(s[mh][4 * i + 2 * hh], s[mh][4 * i + 2 * hh + 1],
                      reinterpret_cast<float2*>(state + r * kD + j0 + 8 * i + 2 * t));
                }
    };
    each_pair([](float& a, float& b, const float2* at) { a = at->x, b = at->y; });
    // S₀ᵀ for the next products, visible to the async proxy and to every consumer warp.
    auto store_s0 = [&]() {
#pragma unroll
        for (int mh = 0; mh < 2; ++mh)
            store_transposed<kN>(s0t + mh * kN * kRowB, warp, lane, [&](int, int x) { return s[mh][x]; });
        fence_proxy_async();
        consumer_sync();
    };
    store_s0();
    // The state (written by this layer's pass over an earlier chunk, or by a restore, both
    // complete before the conv ahead of the prep began: the conv triggers after its own wait) is in; what the prep writes reaches this warpgroup only
    // through the producer's stages, behind its wait. Waiting here too keeps every thread's
    // contract of pdl_wait (lm_common.cuh), at no cost: the first stage comes later anyway.
    pdl_wait();

    const uint64_t d_s0 = kmajor(s0t), d_vp = kmajor(vpt), d_vd = kmajor(vdt);
    float v[kR], x[kR];
    for (int c = 0; c < chunks; ++c) {
        const int b = c % kWgStages;
        mbar_wait(full0 + 8 * b, (c / kWgStages) & 1);  // chunk c has landed
        fence_proxy_async();                             // ... visible to the async proxy too
        const uint32_t st = base + b * L::kStage;
        const unsigned char* st_ptr = base_ptr + b * L::kStage;
        const bf16* ub = reinterpret_cast<const bf16*>(st_ptr + L::kU);
        const float* gamma = reinterpret_cast<const float*>(st_ptr + L::kGamma);
        const uint64_t d_w = kmajor(st + L::kW), d_q = kmajor(st + L::kQ), d_p = kmajor(st + L::kP);
        const uint64_t d_k = smem_desc_sw128(st + L::kK, kHalfB, 1024);  // read as Kᵀ (M-major)
        int start, len;
        chunk_range(c, pos, rows, start, len);
        // V' = W S₀ and X = Q S₀, eight k-steps over dk each, as two commit groups: the V'
        // epilogue (the chain to the next chunk) starts while X is still on the tensor cores.
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)
            wgmma_tile<kN, 0>(v, moved(d_w, (kk / 4) * kHalfB + (kk % 4) * 32),
                              moved(d_s0, (kk / 4) * kN * kRowB + (kk % 4) * 32), kk > 0);
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)
            wgmma_tile<kN, 0>(x, moved(d_q, (kk / 4) * kHalfB + (kk % 4) * 32),
                              moved(d_s0, (kk / 4) * kN * kRowB + (kk % 4) * 32), kk > 0);
        wgmma_commit();
        // While they run: what the epilogues need that the products do not give, the gates'
        // exponentials and this thread's U entries. So only the subtraction, the V' stores and
        // the decay of S stand between the V' products and the S update, the chain to the next chunk.
        const float gamma_last = gamma[len - 1];
        float tail[2], eg[2];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const float gr = gamma[16 * warp + g + 8 * hh];
            tail[hh] = expf(gamma_last - gr);
            eg[hh] = expf(gr);
        }
        __nv_bfloat162 uu[kN / 8][2];
#pragma unroll
        for (int i = 0; i < kN / 8; ++i)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
                uu[i][hh] = *reinterpret_cast<const __nv_bfloat162*>(ub + (16 * warp + g + 8 * hh) * L::kUPitch + 8 * i + 2 * t);
        const float decay = expf(gamma_last);
        wgmma_wait<1>();  // V' is done; X may still run
        reg_fence(v);

        // V' = U − W S₀ in place of v (fp32), as in the mma.sync passes.
#pragma unroll
        for (int i = 0; i < kN / 8; ++i)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const float2 u2 = __bfloat1622float2(uu[i][hh]);
                v[4 * i + 2 * hh] = u2.x - v[4 * i + 2 * hh];
                v[4 * i + 2 * hh + 1] = u2.y - v[4 * i + 2 * hh + 1];
            }
        store_transposed<kN>(vpt, warp, lane, [&](int, int e) { return v[e]; });
        store_transposed<kN>(vdt, warp, lane, [&](int, int e) { return v[e] * tail[(e >> 1) & 1]; });
        // (S decayed here, not while the products run: ptxas then waits for them before touching
        // registers a wgmma wrote in the previous chunk, C7517.)
#pragma unroll
        for (int mh = 0; mh < 2; ++mh)
#pragma unroll
            for (int e = 0; e < kR; ++e) s[mh][e] *= decay;
        fence_proxy_async();
        consumer_sync();  // V'ᵀ and its decayed copy are complete

        // S += Kᵀ (e^{γ_L−γ} V') per dk half (four k-steps over the rows); then, once X is done,
        // O = e^γ X + P V'. The S₀ᵀ store for the next chunk overlaps the O products.
        reg_fence(s[0]);
        reg_fence(s[1]);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kC / 16; ++ks)
#pragma unroll
            for (int mh = 0; mh < 2; ++mh)
                wgmma_tile<kN, 1>(s[mh], moved(d_k, mh * kHalfB + ks * 16 * kRowB), moved(d_vd, ks * 32), 1);
        wgmma_commit();
        wgmma_wait<1>();  // X is done (groups complete in order); the S update may still run
        reg_fence(x);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
            for (int i = 0; i < kN / 8; ++i) {
                x[4 * i + 2 * hh] *= eg[hh];
                x[4 * i + 2 * hh + 1] *= eg[hh];
            }
        reg_fence(x);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kC / 16; ++ks) wgmma_tile<kN, 0>(x, moved(d_p, ks * 32), moved(d_vp, ks * 32), 1);
        wgmma_commit();
        wgmma_wait<1>();  // the S update is done; O may still run
        reg_fence(s[0]);
        reg_fence(s[1]);
        // The next chunk's B operand, while O runs: O reads P and V'ᵀ only, and every read of the
        // old S₀ᵀ ended at the first waits.
        store_s0();
        wgmma_wait<0>();  // O is done: every read of this stage has ended
        reg_fence(x);
        mbar_arrive(empty0 + 8 * b);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int r = 16 * warp + g + 8 * hh;
            if (r >= len) continue;
            bf16* out = p.o + (static_cast<int64_t>(start + r) * p.Hv + h) * kD + j0 + 2 * t;
#pragma unroll
            for (int i = 0; i < kN / 8; ++i)
                *reinterpret_cast<uint32_t*>(out + 8 * i) = pack_bf16(x[4 * i + 2 * hh], x[4 * i + 2 * hh + 1]);
        }
    }
    each_pair([](float& a, float& b, float2* at) { *at = make_float2(a, b); });
#else
    (void)p;
#endif  // FROST_ATTN_WGMMA
}

template <int kN>
cudaError_t launch_wgmma(const GdnBf16Params& p, cudaStream_t stream) {
    constexpr int kSmem = WgLayout<kN>::kBytes;
    cudaError_t err = cudaFuncSetAttribute(gdn_state_wgmma_kernel<kN>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
    // Programmatically after the prep (which triggers at its start): the blocks take SMs as the
    // prep's last blocks leave, set up their barriers and load their state slice before the
    // wait. FROST_GDN_STATE_PDL=0 launches it plainly (A/B runs). Measured (H200, 2026-12-03,
    // ab_env.sh, four rounds alternating, cold TTFT ms): 0.8B 512 / 1k / 2k 2.09-2.11 / 3.25-3.27 /
    // 5.67-5.70 against 2.11-2.13 / 3.28-3.29 / 5.71-5.72 plain; 35B-A3B (20 layers) 4k inside its
    // noise (26.62-27.71 against 26.52-27.26). Same bits: the wait sits before every read of the
    // prep's outputs.
    static const bool pdl = !util::env_is("FROST_GDN_STATE_PDL", "0");
    return launch_kernel(gdn_state_wgmma_kernel<kN>, dim3(p.Hv, kD / kN), dim3(kBlockThreads), kSmem, stream, pdl, p);
}

}  // namespace

cudaError_t chunk_bf16_launch_state_wgmma(const GdnBf16Params& p, cudaStream_t stream, int slice) {
    if (!device_runs_sm90a()) return cudaErrorNotSupported;
    if (slice == 16) return launch_wgmma<16>(p, stream);
    if (slice == 32) return launch_wgmma<32>(p, stream);
    return cudaErrorInvalidValue;
}

}  // namespace frost::kernels::gdn
