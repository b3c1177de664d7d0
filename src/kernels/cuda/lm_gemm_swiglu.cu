// Prefill's dense gate|up GEMM with SwiGLU in its epilogue (lm_gemm_swiglu.h), sm_90a: the
// cuBLASLt path writes the [M, 2F] projection and a separate kernel reads it back for SwiGLU;
// cuBLASLt has no gated epilogue, so this is our own GEMM. What it saves at the 0.8B's 1k prompt
// (H200, 2026-12-04, `frost bench engine --leave-out swiglu`, an in-graph probe): the SwiGLU
// launch costs 0.13 of 3.24 ms (5.4 us a layer), the gate|up GEMM itself 0.56 ms.
//
// Design: the warp-specialised TMA ring of the MoE prefill's grouped GEMM (lm_moe_prefill_tma.cu)
// on a dense problem. A persistent block per SM; warpgroup 0's first thread issues, per 64-wide
// k step, one TMA box of 128 x rows and two of the weights (BH gate rows n0.. and the matching BH
// up rows F + n0..) into a ring of `stages` (128-byte swizzle, full / empty mbarriers); warpgroups
// 1 and 2 each own 64 rows and issue m64n(2 BH)k16 wgmma into fp32 accumulators, so a thread holds
// a gate column and its up column in the same fragment positions. The epilogue rounds both to
// bf16 (the projection the unfused path stores), takes silu(g) * u in fp32 and stores bf16, four
// n8 tiles per 16-byte store (lm_quad_store.cuh); the producer meanwhile fills the ring with the
// next item's steps. Items (row tile, column tile) follow a static schedule both sides compute
// (blockIdx.x, + gridDim.x, ...), in bands of row tiles, column-major inside a band, so the blocks
// running at once share the band's x rows and each weight tile in L2.
// Tiles: BH = 128 (m64n256) or 112 (m64n224: the 0.8B's F = 3584 is 32 x 112, 256 items at 1024
// rows, 1.94 waves of 132 SMs, against 224 items / 1.70 waves at 128); the launcher takes
// gemm_pick.h's gemm_swiglu_tile (112 only where the busiest SM computes 5 % fewer columns).
//
// Measured (H200, 2026-12-04, bench_cuda_kernels --swiglu ROWS 0.8b|9b, L2 flushed, us, two calls;
// "pair" = the engine's cuBLASLt plan for the projection, then the SwiGLU kernel):
//   0.8B (F 3584, K 1024)  512 rows: pair 19.4, fused 17.3-17.5; 1024: 30.9-31.0 against 28.0-28.1
//   (tile 112; 128: 29.4-30.2); 2048: 52.9 against 50.7 (112; 128: 54.0); 4096: 107.5-107.7
//   against 92.3-92.8 (128; 112: 96.7). The projection alone runs 25.0 us at 1024 rows (601
//   TFLOP/s); this GEMM with its epilogue 28.1 (534).
//   9B (F 12288, K 4096)  1024 rows: pair 279.4-279.9 against 263.9-271.1 (128); 4096: 1109.5 /
//   1214.8 (the pair moved between calls) against 1196.5-1210.3 (128), cuBLASLt's projection alone
//   1035-1036 (796 TFLOP/s against this GEMM's 681-689: its main loop is ~86 % of cuBLASLt's
//   there, so the saved pass only breaks even); 16384: 5002 against 4911 (128).
// Engine (`scripts/gpu/ab_env.sh DIR 3 - "FROST_GEMM_SWIGLU=0"`, cold TTFT ms, alternating): 0.8B
// 512 / 1k / 2k / 4k 2.05 / 3.14-3.15 / 5.57-5.59 / 10.50-10.83 against 2.06-2.07 / 3.22-3.23 /
// 5.64-5.65 / 10.82-11.07; the 9B's first 8 layers 1k / 4k / 16k 5.67-5.69 / 21.19-22.45 /
// 99.39-99.71 against 5.80-6.04 / 21.34-21.52 / 99.75-100.19 (two rounds).
// Measured and dropped: each warpgroup keeping a k step of wgmma in flight and releasing stages a
// step later (wgmma.wait_group 1): slower at every shape above (0.8B 1024 / 4096 rows 29.0 /
// 94.3 against 28.1 / 92.8 us; 9B 1024 273.4 against 271.1), as in the MoE GEMM.
//
// Bits: each output is one thread's fixed-order K sum (wgmma k16 steps in order), independent of
// M, of the other rows of its tile and of the grid, so a row's bits do not depend on how many rows
// share the launch (the engine's chunk invariance holds without a reference-row plan). They can
// differ from the unfused path's where cuBLASLt's summation order rounds g or u to the other
// neighbouring bf16; at every shape of kernels_test_cuda_gemm_swiglu (the 0.8B's 1k rows among
// them) no output did (H200).
#include "kernels/cuda/lm_gemm_swiglu.h"

#include <cuda.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/lm_act_quant.cuh"
#include "kernels/cuda/lm_attn_tma.cuh"
#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_mbarrier.cuh"
#include "kernels/cuda/lm_quad_store.cuh"
#include "kernels/gemm_pick.h"
#include "util/env.h"

namespace frost::kernels {
namespace {

// BH gate + BH up weight rows per tile, 128 x rows, 64-wide k steps.
template <int BH_>
struct SwigluTile {
    static constexpr int BM = 128, BH = BH_, BN = 2 * BH_, BK = 64;
    static constexpr int threads = 384;  // warpgroup 0 produces, 1 and 2 consume
    static constexpr uint32_t a_bytes = BM * BK * 2, b_bytes = BN * BK * 2, stage_bytes = a_bytes + b_bytes;
    static constexpr int stages = (220 * 1024) / stage_bytes;  // 4 at 128 (48 KB), 5 at 112 (44 KB)
    static constexpr size_t smem = 1024 + size_t(stages) * stage_bytes + 2 * stages * 8;
    static_assert(BH == 128 || BH == 112, "wgmma m64n256 / m64n224");
    static_assert(smem <= 227 * 1024, "one block per SM");
};

struct SwigluMaps {
    CUtensorMap a, b;  // x [M, K] in 128-row boxes; W [2F, K] in BH-row boxes
};

constexpr int kBandM = 8;  // row tiles per raster band

// Item id -> (row tile, column tile): bands of kBandM row tiles, column-major inside a band.
__device__ inline void item_coord(int id, int num_m, int num_n, int& mb, int& nb) {
    const int band = id / (kBandM * num_n), first = band * kBandM;
    const int gm = min(kBandM, num_m - first), local = id - band * kBandM * num_n;
    mb = first + local % gm;
    nb = local / gm;
}

#if defined(FROST_ATTN_WGMMA)
// m64n(2 BH)k16: the accumulators of BH gate and BH up columns (BH / 2 registers each).
template <int BH>
__device__ inline void wgmma_tile(float (&d)[BH], uint64_t da, uint64_t db) {
    if constexpr (BH == 128) lm::wgmma_m64n256k16_ss(d, da, db);
    else lm::wgmma_m64n224k16_ss(d, da, db);
}
#endif

template <class T>
__global__ void __launch_bounds__(T::threads, 1) gemm_swiglu_kernel(GemmBf16Params p, const __grid_constant__ SwigluMaps maps) {
#if defined(FROST_ATTN_WGMMA)
    constexpr int S = T::stages;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (lm::smem_addr(smem_raw) + 1023u) & ~1023u, bars = base + S * T::stage_bytes;
    const lm::StageRing<S, T::stage_bytes> ring{base, bars};
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) {
            lm::mbar_init(bars + 8 * s, 1);        // the producer's expect-tx arrival
            lm::mbar_init(bars + 8 * (S + s), 8);  // lane 0 of each consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int F = p.N / 2;
    const int num_m = (p.M + T::BM - 1) / T::BM, num_n = (F + T::BH - 1) / T::BH, total = num_m * num_n;
    const int k_tiles = (p.K + T::BK - 1) / T::BK;
    const int wg = threadIdx.x / 128;
    uint32_t it = 0;  // k steps over the block's whole run: the ring position
    if (wg == 0) {
        if (threadIdx.x != 0) return;
        attn_hopper::tma_prefetch_map(&maps.a);
        attn_hopper::tma_prefetch_map(&maps.b);
        for (int w = blockIdx.x; w < total; w += gridDim.x) {
            int mb, nb;
            item_coord(w, num_m, num_n, mb, nb);
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                if (it >= S) lm::mbar_wait(ring.empty(it), ring.phase(it) ^ 1);
                const uint32_t st = ring.stage(it);
                const int k0 = kt * T::BK;
                // Rows past M, columns past K and weight rows past 2F arrive as zeros; gate rows
                // past F are up rows, whose products land only in columns the epilogue drops.
                attn_hopper::mbar_arrive_expect_tx(ring.full(it), T::stage_bytes);
                attn_hopper::tma_load_2d(st, &maps.a, k0, mb * T::BM, ring.full(it));
                attn_hopper::tma_load_2d(st + T::a_bytes, &maps.b, k0, nb * T::BH, ring.full(it));
                attn_hopper::tma_load_2d(st + T::a_bytes + T::BH * 128, &maps.b, k0, F + nb * T::BH, ring.full(it));
            }
        }
        return;
    }
    const int cw = wg - 1, lane = threadIdx.x % 32, q = lane % 4;
    bf16* y = static_cast<bf16*>(p.y);
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        int mb, nb;
        item_coord(w, num_m, num_n, mb, nb);
        float acc[T::BH];
#pragma unroll
        for (int i = 0; i < T::BH; ++i) acc[i] = 0.0f;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            lm::mbar_wait(ring.full(it), ring.phase(it));
            const uint32_t st = ring.stage(it);
            lm::wgmma_k64_step(acc, st + cw * 64 * 128, st + T::a_bytes, wgmma_tile<T::BH>);
            if (lane == 0) lm::mbar_arrive(ring.empty(it));
        }
        // acc: n8 tile i in acc[4 i .. 4 i + 3] = (row g, columns 8 i + 2 q, + 1), (row g + 8,
        // same); gate tiles 0 .. BH / 8 - 1, their up tiles BH / 8 later.
        constexpr int n8 = T::BH / 8;  // 16 or 14 output tiles
        const int n0 = nb * T::BH;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = mb * T::BM + cw * 64 + (threadIdx.x % 128) / 32 * 16 + lane / 4 + 8 * half;
            const bool row_ok = row < p.M;
            bf16* dst = y + static_cast<int64_t>(row) * p.ldy;
            uint32_t wv[n8];
#pragma unroll
            for (int i = 0; i < n8; ++i) {
                const float g0 = lm::bf16_rounded(acc[4 * i + 2 * half]), g1 = lm::bf16_rounded(acc[4 * i + 2 * half + 1]);
                const float u0 = lm::bf16_rounded(acc[4 * (i + n8) + 2 * half]),
                            u1 = lm::bf16_rounded(acc[4 * (i + n8) + 2 * half + 1]);
                wv[i] = lm::pack_bf162(lm::silu(g0) * u0, lm::silu(g1) * u1);
            }
#pragma unroll
            for (int i0 = 0; i0 + 4 <= n8; i0 += 4) {  // four tiles a 16-byte store (every lane shuffles)
                const uint32_t w4[4] = {wv[i0], wv[i0 + 1], wv[i0 + 2], wv[i0 + 3]};
                const uint4 v = lm::quad_gather(w4, q);
                const int col = n0 + 8 * (i0 + q);
                if (row_ok && col < F) *reinterpret_cast<uint4*>(dst + col) = v;
            }
#pragma unroll
            for (int i = n8 / 4 * 4; i < n8; ++i) {  // 112: the last two tiles a pair each
                const int col = n0 + 8 * i + 2 * q;
                if (row_ok && col < F) *reinterpret_cast<uint32_t*>(dst + col) = wv[i];
            }
        }
    }
#else
    __trap();  // not launched: the launcher answers NotSupported off sm_90a
#endif
}

int sm_count() { return lm::device_sm_count() > 0 ? lm::device_sm_count() : 132; }

template <int BH>
cudaError_t launch_tile(const GemmBf16Params& p, cudaStream_t stream) {
    using T = SwigluTile<BH>;
    constexpr auto kernel = gemm_swiglu_kernel<T>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::smem));
    if (e != cudaSuccess) return e;
    SwigluMaps maps{};
    e = attn_hopper::encode_tile_map(&maps.a, p.x, p.K, p.M, p.ldx, T::BM);
    if (e == cudaSuccess) e = attn_hopper::encode_tile_map(&maps.b, p.w, p.K, p.N, p.K, T::BH);
    if (e != cudaSuccess) return e;
    const int64_t items = int64_t((p.M + T::BM - 1) / T::BM) * ((p.N / 2 + BH - 1) / BH);
    const int grid = static_cast<int>(std::min<int64_t>(sm_count(), items));
    kernel<<<grid, T::threads, T::smem, stream>>>(p, maps);
    return cudaGetLastError();
}

}  // namespace

bool gemm_swiglu_supported(const GemmBf16Params& p) {
    return lm::device_runs_sm90a() && p.x && p.w && p.y && p.M > 0 && p.K > 0 && p.N > 0 && p.N % 16 == 0 &&
           p.K % 8 == 0 && p.ldx % 8 == 0 && p.ldy % 8 == 0 && p.ldx >= p.K && p.ldy >= p.N / 2 && !p.out_f32 &&
           !p.accumulate && lm::aligned16(p.x) && lm::aligned16(p.w) && lm::aligned16(p.y);
}

int gemm_swiglu_pick_tile(int M, int F, int sms) {
    if (util::env_is("FROST_GEMM_SWIGLU_TILE", "112")) return 112;  // A/B runs
    if (util::env_is("FROST_GEMM_SWIGLU_TILE", "128")) return 128;
    return gemm_swiglu_tile(M, F, sms);
}

cudaError_t gemm_swiglu_launch(const GemmBf16Params& p, cudaStream_t stream, int tile) {
    if (!gemm_swiglu_supported(p)) return lm::device_runs_sm90a() ? cudaErrorInvalidValue : cudaErrorNotSupported;
    if (tile == 0) tile = gemm_swiglu_pick_tile(p.M, p.N / 2, sm_count());
    if (tile == 112) return launch_tile<112>(p, stream);
    if (tile == 128) return launch_tile<128>(p, stream);
    return cudaErrorInvalidValue;
}

}  // namespace frost::kernels
