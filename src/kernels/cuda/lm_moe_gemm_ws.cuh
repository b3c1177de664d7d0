// The warp-specialised persistent tile of the MoE prefill's grouped GEMMs (tile shape 4,
// lm_moe_prefill_ws.cu), sm_90a only: acc[128 x 256] = A[128, K] · B[256, K]^T, bf16 operands,
// fp32 accumulation. One producer warpgroup copies A and B rows (each through its own pointer, so
// the caller gathers token rows and interleaves gate/up weight rows with no copy) with cp.async
// into a 4-stage shared-memory ring, each stage completing on an mbarrier; two consumer
// warpgroups each issue m64n256k16 wgmma over 64 of the rows and release a stage once the wgmma
// that read it has retired (one group kept in flight). The ring and its barrier phases run on
// across the tiles a persistent block takes, so the producer fetches the next tile while the
// consumers run the epilogue of this one.
//
// Against WgTile (lm_moe_gemm.cuh; every thread loads, a block barrier before each stage, each
// warpgroup waiting for its own MMAs) it loads fewer bytes per FLOP and overlaps the epilogue,
// yet measured no faster (H100, 35B-A3B shape, whole launch: 4k rows 1.16 against 1.06 ms, 16k
// 3.17 against 3.32; Qwen3-Next-80B slower at both), so the launcher does not pick it. ncu at 16k
// rows: SM, L2 and DRAM throughput all ~40 %, none saturated, one block per SM: latency bound,
// the ring's ~150 KB in flight per SM too little for the gathered rows' L2 misses. What would
// move it: TMA for the weight tiles with multicast over a 2-block cluster (half the B bytes per
// block), a deeper ring, fewer nearly-empty second tiles at ~128 rows per expert.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_mbarrier.cuh"
#include "kernels/cuda/lm_moe.h"

namespace frost::kernels::moe {

struct WsTile {
    static constexpr int BM = 128, BN = 256, BK = 64, stages = 4;
    static constexpr int threads = 384;  // warpgroup 0 produces, 1 and 2 consume
    static constexpr int a_bytes = BM * BK * 2, b_bytes = BN * BK * 2, stage_bytes = a_bytes + b_bytes;
    // Stages 1024-byte aligned (the 128-byte swizzle's period), so the slack.
    static constexpr size_t smem = 1024 + size_t(stages) * stage_bytes;
};

// Gate|up, then down, on WsTile (lm_moe_prefill_ws.cu), after the grouping built the tile table
// at WsTile::BM rows; `tile_capacity` bounds the table's tile count. Enqueues only.
cudaError_t ws_gemms_launch(const MoeBf16Params& p, int tile_capacity, cudaStream_t stream);

#if defined(FROST_ATTN_WGMMA)
// The ring: stage s at base + s * stage_bytes (A rows, then B rows, 128-byte rows with the 16-byte
// chunk c of row r at c ^ (r % 8)); full[s] completes when the producer's 128 threads' copies
// into s have landed, empty[s] when the 256 consumer threads have retired the wgmma reading s.
// `it` counts k-steps over the block's whole run: stage it % S, phase (it / S) & 1.
struct WsRing {
    uint32_t base, full, empty;  // shared-memory addresses; full / empty: S barriers of 8 bytes
    __device__ uint32_t stage(uint32_t it) const { return base + (it % WsTile::stages) * WsTile::stage_bytes; }
    __device__ uint32_t full_bar(uint32_t it) const { return full + (it % WsTile::stages) * 8; }
    __device__ uint32_t empty_bar(uint32_t it) const { return empty + (it % WsTile::stages) * 8; }
    __device__ static uint32_t phase(uint32_t it) { return (it / WsTile::stages) & 1; }
};

// Producer thread t (0..127) copies 16-byte chunk t % 8 of A rows t / 8 + 16 i (i < 8) and of B
// rows t / 8 + 16 i (i < 16) for each of the tile's k-steps. A null row is not copied (its
// products land only in outputs the epilogue drops); chunks past K are zero-filled (they would
// enter every output). `fallback`: any valid global address.
__device__ inline void ws_produce(const WsRing& ring, uint32_t& it, const bf16* const (&a)[8],
                                  const bf16* const (&b)[16], int K, const bf16* fallback) {
    const int t = threadIdx.x % 128, c = t % 8, r0 = t / 8;
    const int k_tiles = (K + WsTile::BK - 1) / WsTile::BK;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        if (it >= WsTile::stages) lm::mbar_wait(ring.empty_bar(it), WsRing::phase(it) ^ 1);
        const uint32_t st = ring.stage(it);
        const int col = kt * WsTile::BK + c * 8;
        const bool in_k = col < K;  // K % 8 == 0: a chunk is wholly inside or outside
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int r = r0 + 16 * i;
            const uint32_t dst = st + r * 128 + ((c ^ (r & 7)) * 16);
            if (!in_k)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 0;\n" ::"r"(dst), "l"(fallback));
            else if (a[i])
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(a[i] + col));
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int r = r0 + 16 * i;
            const uint32_t dst = st + WsTile::a_bytes + r * 128 + ((c ^ (r & 7)) * 16);
            if (!in_k)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 0;\n" ::"r"(dst), "l"(fallback));
            else if (b[i])
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(b[i] + col));
        }
        lm::mbar_arrive_cp_async(ring.full_bar(it));
    }
}

// Consumer warpgroup wg (0 or 1, rows 64 wg..) over one tile's k-steps: acc = A · B^T. Each
// stage goes back to the producer as soon as the MMAs that read it retire (the other
// warpgroup's MMAs keep the tensor cores busy meanwhile; keeping one group in flight and
// releasing a step late measured the same at 4k rows and 2 % slower at 16k). kMma false (all
// the warpgroup's rows past the group's end) still walks the ring, so the barrier phases stay in
// step, but issues no MMA. Two instantiations rather than a branch around the wgmma: ptxas
// serialises wgmma on a divergent path (C7518).
template <bool kMma>
__device__ inline void ws_consume(const WsRing& ring, uint32_t& it, float (&acc)[128], int K, int wg) {
    const int k_tiles = (K + WsTile::BK - 1) / WsTile::BK;
    if constexpr (kMma) {
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    }
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        lm::mbar_wait(ring.full_bar(it), WsRing::phase(it));
        if constexpr (kMma) {
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async (generic) -> wgmma (async)
            const uint32_t st = ring.stage(it), a0 = st + wg * 64 * 128, b0 = st + WsTile::a_bytes;
            lm::reg_fence(acc);
            lm::wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WsTile::BK / 16; ++kk)
                lm::wgmma_m64n256k16_ss(acc, lm::smem_desc_sw128(a0 + kk * 32, 16, 1024),
                                    lm::smem_desc_sw128(b0 + kk * 32, 16, 1024));
            lm::wgmma_commit();
            lm::wgmma_wait<0>();
            lm::reg_fence(acc);
        }
        lm::mbar_arrive(ring.empty_bar(it));
    }
}

// acc of a consumer thread: n8 tile i (columns 8 i..) in acc[4 i .. 4 i + 3]: (row g, columns
// 8 i + 2 t, + 1), (row g + 8, same), g = 16 (warp in warpgroup) + lane / 4, t = lane % 4.
__device__ inline int ws_row(int half) { return ((threadIdx.x % 128) / 32) * 16 + (threadIdx.x % 32) / 4 + half * 8; }
__device__ inline int ws_col(int i) { return i * 8 + (threadIdx.x % 4) * 2; }
#endif  // FROST_ATTN_WGMMA

}  // namespace frost::kernels::moe
