// Our own FP8 block-scaled prefill GEMM for Hopper (issue 15; the cuBLASLt path is lm_gemm_fp8.cu):
// y[M,N] (+)= x[M,K] W[N,K]ᵀ with x e4m3 in 1x128 groups (scale per row and 128-wide k block,
// act_quant_fp8 layout) and W e4m3 in 128x128 blocks (the checkpoint's weight_scale_inv grid).
//
// Design (DeepSeek's DeepGEMM recipe, our code): 128x128 output tiles, 128-wide k blocks. A
// persistent grid (one CTA per SM) walks the tiles in bands of kBandM row tiles (the CTAs running
// at once share A rows and W rows in L2). Warp-specialised: warpgroup 0's first thread issues TMA
// copies (128-byte swizzle, the layout wgmma's descriptors read) of the A and B 128x128 byte tiles
// into a kStages-deep mbarrier ring; warpgroups 1 and 2 each own 64 rows of the tile and run four
// wgmma m64n128k32 per k block into an fp32 accumulator, which is then scaled by
// x_scale[row, kb] * w_scale[nb, kb] and added into a second fp32 register tile ("promotion": the
// tensor cores accumulate FP8 products in reduced precision, so no more than 128 of K ever sum
// inside them; the scales differ per k block anyway). kOverlap: two accumulators, the wgmmas of
// block kb run while block kb-1 is promoted, so the tensor cores do not idle during the FMAs.
// The epilogue stores bf16 or fp32 straight from registers (residual add: y is read first).
// Measured on the H100 (2026-11-25, bench_cuda_kernels --fp8 [2048], the GEMM alone): 779-910
// TFLOP/s on the 9B's N = 4096 shapes (down, out_proj, o_proj; M 2048 and 4096) against cuBLASLt's
// 1169-1307 (bitwise the same products), 830-950 on the wide ones against 1234-1278, so it is
// opt-in (FROST_FP8_GEMM=wgmma). ncu at 4096^3 (source view): tensor pipe 47% busy (cuBLASLt
// 72%, with the same 128x128x128 tile, 6 stages and 2-CTA clusters: nvjet ..._128x128_128x6_1x2_
// ..._coopA); our top stalls are the scale product's FMUL waiting on the scales' global loads
// just before the next block's wgmmas (kFar below), and the residual's loads in the epilogue
// (~9%; cuBLASLt stages its tile through shared memory and adds the residual with a TMA
// reduce-add store, and reads its scales from shared memory). Variants 6-10 (2x2 clusters, the
// epilogue overlapped with the next tile's first block) measured no faster; 12 and 13 (the scales
// loaded three k blocks ahead) are the fastest, 3-7 % over variant 0 (timings in lm_gemm_fp8.h).
#include <cuda_fp8.h>

#include <cstdlib>

#include "kernels/cuda/lm_attn_tma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_gemm_fp8_wgmma.cuh"
#include "kernels/cuda/lm_mbarrier.cuh"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kTile = 128;                       // BM = BN = BK
constexpr int kTileBytes = kTile * kTile;        // one 128x128 e4m3 tile
constexpr int kStageBytes = 2 * kTileBytes;      // A and B
constexpr int kThreads = 3 * 128;                // producer warpgroup + 2 consumer warpgroups
[[maybe_unused]] constexpr int kBandM = 16;                       // row tiles per raster band

template <int kStages>
constexpr int smem_bytes() {
    return kStages * kStageBytes + 1024 + 256;  // + alignment slack, + mbarriers
}

#if defined(FROST_ATTN_WGMMA)
// Arrives on the mbarrier at offset `bar` of the cluster's CTA `rank` with the default (CTA-scope
// release) semantics. Not attn_hopper::mbar_arrive_remote: its cluster-scope release waits for
// this thread's earlier global stores (the previous tile's epilogue) to become visible cluster-
// wide, which stalled every consumer warp once per k block (measured 2.7x slower, 2026-11-24).
// The stage's reads were the wgmmas', complete at wgmma.wait_group.
__device__ inline void mbar_arrive_peer(uint32_t bar, uint32_t rank) {
    asm volatile(
        "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

// Bulk prefetch of `bytes` (a multiple of 16, 16-byte aligned) of global memory into L2.
__device__ inline void l2_prefetch_bulk(const void* src, int bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}
#endif

struct Fp8Maps {
    CUtensorMap a, b;
};

struct TileCoord {
    int mb, nb;
};

// Work unit id -> (row unit, column tile): bands of kBandM row units, column-major inside a band.
[[maybe_unused]] __device__ inline TileCoord tile_coord(int id, int num_m, int num_n, int band_m) {
    const int band = id / (band_m * num_n);
    const int first_m = band * band_m;
    const int gm = min(band_m, num_m - first_m);
    const int local = id - band * band_m * num_n;
    return {first_m + local % gm, local / gm};
}

// Clusters of kCm x kCn CTAs (rank r: row offset r % kCm, column offset r / kCm) run one work
// unit of kCm row tiles x kCn column tiles. The CTAs of one column tile (kCm 2) share its B tile:
// each loads a 128/kCm-row part and multicasts it to all of them; the CTAs of one row tile (kCn 2)
// share the A tile the same way. L2 -> SM traffic per k block a CTA: 32 KB alone, 24 KB at 2x1,
// 16 KB at 2x2 (128x128 FP8 tiles are bound by it). A stage is refilled only when the consumers of
// every CTA of the cluster released it: they arrive on every CTA's "empty" barriers.
// kEpi: the next tile's first two k blocks are issued before this tile's epilogue, so the tensor
// cores work through the stores (and the residual's loads) instead of idling; same products, same
// promotion order, so the same bits as without.
// kCtaWait (clusters): the producer waits for "empty" with the default CTA-scope acquire, as
// CUTLASS's cluster pipelines do, instead of cluster scope: on sm_90 the cluster-scope acquire
// compiles to CCTL.IVALL, an L1 invalidate after every wait (ncu source view of variant 0,
// 2026-11-25: the producer's wait samples sit on it), i.e. once per k block, which also drops
// the consumers' L1-cached scales (their scale FMUL was the top long-scoreboard stall). The
// peers' arrivals follow their wgmma.wait_group, so their reads of the stage are complete either
// way. Measured alone (variant 11): about variant 0's speed; with kFar (13) the fastest.
template <int kStages, bool kOverlap, int kCm, int kCn, bool kEpi, bool kCtaWait, bool kFar>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_fp8_wgmma_kernel(GemmFp8Params p, const __grid_constant__ Fp8Maps maps) {
#if defined(FROST_ATTN_WGMMA)
    static_assert(!kEpi || kOverlap, "the epilogue overlap needs the two accumulators");
    constexpr int kCluster = kCm * kCn;
    constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128 x 40 + 256 x 232 <= 65536
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t bars = base + kStages * kStageBytes;
    auto full = [&](int s) { return bars + 8 * s; };
    auto empty = [&](int s) { return bars + 8 * (kStages + s); };
    auto stage_a = [&](int s) { return base + s * kStageBytes; };
    auto stage_b = [&](int s) { return base + s * kStageBytes + kTileBytes; };

    // Work units: kCm row tiles x kCn column tiles, one per cluster at a time.
    const int num_m = (p.M + kTile * kCm - 1) / (kTile * kCm), num_n = (p.N + kTile * kCn - 1) / (kTile * kCn);
    const int col_tiles = (p.N + kTile - 1) / kTile;
    const int units = num_m * num_n;
    const int kblocks = p.K / kTile;
    const int unit0 = blockIdx.x / kCluster, unit_step = gridDim.x / kCluster;
    [[maybe_unused]] const uint32_t rank = kCluster > 1 ? attn_hopper::cluster_rank() : 0;
    const int rm = static_cast<int>(rank) % kCm, rn = static_cast<int>(rank) / kCm;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 8 * kCluster);  // lane 0 of each consumer warp of the cluster
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // The peer's copies and arrivals may target this CTA's barriers as soon as it runs.
    if constexpr (kCluster > 1) {
        attn_hopper::cluster_sync();
    } else {
        __syncthreads();
    }
    const int wg = threadIdx.x / 128;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        if (threadIdx.x != 0) return;
        attn_hopper::tma_prefetch_map(&maps.a);
        attn_hopper::tma_prefetch_map(&maps.b);
        int it = 0;  // k blocks issued by this CTA, over all its tiles: the ring position
        for (int t = unit0; t < units; t += unit_step) {
            const TileCoord c = tile_coord(t, num_m, num_n, kBandM / kCm);
            const int mb = c.mb * kCm + rm, nb = c.nb * kCn + rn;
            if constexpr (kEpi) {
                // The residual tile into L2 now, so the epilogue's loads (after ~kblocks k blocks)
                // hit L2 instead of waiting on DRAM while only one k block of MMAs covers them.
                // Rows of whole 16-byte pieces only (the bulk prefetch's unit).
                const int elt = p.out_f32 ? 4 : 2;
                const int cols = min(kTile, p.N - nb * kTile);
                if (p.accumulate && cols > 0 && (cols * elt) % 16 == 0 && (p.ldy * elt) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(p.y) % 16 == 0) {
                    const char* y0 = static_cast<const char*>(p.y) + (static_cast<int64_t>(nb) * kTile) * elt;
                    const int rows = min(kTile, p.M - mb * kTile);
                    for (int r = 0; r < rows; ++r)
                        l2_prefetch_bulk(y0 + (static_cast<int64_t>(mb) * kTile + r) * p.ldy * elt, cols * elt);
                }
            }
            for (int kb = 0; kb < kblocks; ++kb, ++it) {
                const int s = it % kStages;
                if (it >= kStages) {
                    // Released by every CTA's consumers (the peers' arrivals: cluster-scope acquire).
                    if constexpr (kCluster > 1 && !kCtaWait) {
                        attn_hopper::mbar_wait_cluster(empty(s), (it / kStages - 1) & 1);
                    } else {
                        mbar_wait(empty(s), (it / kStages - 1) & 1);
                    }
                }
                // Both tiles' bytes, the peers' multicast parts included; out-of-range rows
                // (M, N tails, a cluster's tiles past M or N) arrive as zeros.
                attn_hopper::mbar_arrive_expect_tx(full(s), kStageBytes);
                if constexpr (kCn > 1) {
                    // A: part rn of this row tile, to the CTAs of the same row offset rm.
                    constexpr int kPart = kTile / kCn;
                    uint16_t mask = 0;
#pragma unroll
                    for (int j = 0; j < kCn; ++j) mask |= static_cast<uint16_t>(1u << (rm + kCm * j));
                    attn_hopper::tma_load_2d_multicast(stage_a(s) + rn * kPart * kTile, &maps.a, kb * kTile,
                                                       mb * kTile + rn * kPart, full(s), mask);
                } else {
                    attn_hopper::tma_load_2d(stage_a(s), &maps.a, kb * kTile, mb * kTile, full(s));
                }
                if constexpr (kCm > 1) {
                    // B: part rm of this column tile, to the CTAs of the same column offset rn.
                    constexpr int kPart = kTile / kCm;
                    const uint16_t mask = static_cast<uint16_t>(((1u << kCm) - 1) << (kCm * rn));
                    attn_hopper::tma_load_2d_multicast(stage_b(s) + rm * kPart * kTile, &maps.b, kb * kTile,
                                                       nb * kTile + rm * kPart, full(s), mask);
                } else {
                    attn_hopper::tma_load_2d(stage_b(s), &maps.b, kb * kTile, nb * kTile, full(s));
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int cw = wg - 1;                 // consumer warpgroup: rows 64 cw .. 64 cw + 63 of the tile
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, tq = lane % 4;
    const int64_t ld_scale = (p.M + 3) / 4 * 4;  // act_scale_ld (host-only)
    // One output tile of this CTA: its row / column tile, this thread's two rows, its weight
    // scales, and `it`, the ring position of its k block 0.
    struct Tile {
        int mb, nb, row0, row1, it;
        const float* ws;
    };
    const auto make_tile = [&](int t, int it) {
        const TileCoord c = tile_coord(t, num_m, num_n, kBandM / kCm);
        Tile T;
        T.mb = c.mb * kCm + rm;
        T.nb = c.nb * kCn + rn;
        T.row0 = T.mb * kTile + cw * 64 + warp * 16 + g;
        T.row1 = T.row0 + 8;
        T.it = it;
        // A cluster's column tile past N (kCn 2, odd column tiles) computes zeros and stores
        // nothing; its scale row is clamped so it reads inside the grid.
        T.ws = p.w_scale + static_cast<int64_t>(min(T.nb, col_tiles - 1)) * kblocks;
        return T;
    };
    // A k block's scales for this thread's two rows: activation (a0, a1) and weight (w).
    // !kFar (variants 0-11, measured): issue() loads them before waiting for the stage and returns
    // their products ({a0 w, a1 w, 1}). ncu's source view (2026-11-25) shows ptxas then places the
    // product's FMUL just before the next block's WARPGROUP.ARRIVE, where it waits out the L2
    // latency of the loads every k block (the kernel's top stall, 7% of samples; tensor pipe 47%
    // busy against cuBLASLt's 72%, whose scales come from shared memory). kFar: each block's
    // scales are loaded three blocks before its promotion (a rotation of raw scales in
    // registers), so wherever ptxas puts the FMUL the loads have landed. Same products either way.
    struct Scales {
        float a0, a1, w;
    };
    const auto load_scales = [&](const Tile& T, int kb) -> Scales {
        if (kb >= kblocks) return {0.0f, 0.0f, 0.0f};
        return {T.row0 < p.M ? __ldg(p.x_scale + kb * ld_scale + T.row0) : 0.0f,
                T.row1 < p.M ? __ldg(p.x_scale + kb * ld_scale + T.row1) : 0.0f, __ldg(T.ws + kb)};
    };
    // Waits for k block kb's stage and issues its four wgmmas into acc (!kFar: returns the
    // block's scale products, loaded before the wait).
    const auto issue = [&](const Tile& T, int kb, float(&acc)[64]) -> Scales {
        const int i = T.it + kb, s = i % kStages;
        Scales raw{};
        if constexpr (!kFar) raw = load_scales(T, kb);
        mbar_wait(full(s), (i / kStages) & 1);
        reg_fence(acc);
        wgmma_fence();
        const uint32_t a = stage_a(s) + cw * 64 * kTile, b = stage_b(s);
#pragma unroll
        for (int k = 0; k < kTile / 32; ++k)
            wgmma_m64n128k32_e4m3(acc, smem_desc_sw128(a + 32 * k, 16, 1024), smem_desc_sw128(b + 32 * k, 16, 1024), k);
        wgmma_commit();
        return {raw.a0 * raw.w, raw.a1 * raw.w, 1.0f};
    };
    // Block kb's MMAs are complete: release its stage, add acc x (activation x weight scale) into
    // out (the scale product rounded to fp32 first, in both modes).
    const auto finish = [&](const Tile& T, int kb, float(&acc)[64], Scales sc, float(&out)[64]) {
        reg_fence(acc);
        __syncwarp();
        if (lane == 0) {
            if constexpr (kCluster > 1) {
#pragma unroll
                for (int r = 0; r < kCluster; ++r) mbar_arrive_peer(empty((T.it + kb) % kStages), r);
            } else {
                mbar_arrive(empty((T.it + kb) % kStages));
            }
        }
        const float s0 = kFar ? sc.a0 * sc.w : sc.a0, s1 = kFar ? sc.a1 * sc.w : sc.a1;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            out[4 * j + 0] = fmaf(acc[4 * j + 0], s0, out[4 * j + 0]);
            out[4 * j + 1] = fmaf(acc[4 * j + 1], s0, out[4 * j + 1]);
            out[4 * j + 2] = fmaf(acc[4 * j + 2], s1, out[4 * j + 2]);
            out[4 * j + 3] = fmaf(acc[4 * j + 3], s1, out[4 * j + 3]);
        }
    };
    // Issues block 0 of a tile into acc0; returns its scales (loaded here when kFar).
    const auto first_block = [&](const Tile& T, float(&acc)[64]) -> Scales {
        if constexpr (kFar) {
            const Scales sc = load_scales(T, 0);
            issue(T, 0, acc);
            return sc;
        } else {
            return issue(T, 0, acc);
        }
    };
    // kOverlap's k loop for one tile, block 0 already issued into acc0 with its scales in sc0:
    // block kb + 1's MMAs run while block kb is promoted. kFar: sc2 / sc3 hold the scales of the
    // next even / odd block, loaded two blocks ahead of sc0 / sc1.
    const auto overlap_loop = [&](const Tile& T, Scales sc0, float(&acc0)[64], float(&acc1)[64], float(&out)[64]) {
        Scales sc1{}, sc2{}, sc3{};
        if constexpr (kFar) {
            sc1 = load_scales(T, 1);
            sc2 = load_scales(T, 2);
            sc3 = load_scales(T, 3);
        }
        const auto issue_to = [&](int kb, float(&acc)[64], Scales& sc) {
            if constexpr (kFar) {
                issue(T, kb, acc);
            } else {
                sc = issue(T, kb, acc);
            }
        };
        int kb = 1;
        for (; kb + 1 < kblocks; kb += 2) {
            issue_to(kb, acc1, sc1);
            wgmma_wait<1>();
            finish(T, kb - 1, acc0, sc0, out);
            if constexpr (kFar) {
                sc0 = sc2;
                sc2 = load_scales(T, kb + 3);
            }
            issue_to(kb + 1, acc0, sc0);
            wgmma_wait<1>();
            finish(T, kb, acc1, sc1, out);
            if constexpr (kFar) {
                sc1 = sc3;
                sc3 = load_scales(T, kb + 4);
            }
        }
        if (kb < kblocks) {
            issue_to(kb, acc1, sc1);
            wgmma_wait<1>();
            finish(T, kb - 1, acc0, sc0, out);
            wgmma_wait<0>();
            finish(T, kb, acc1, sc1, out);
        } else {
            wgmma_wait<0>();
            finish(T, kb - 1, acc0, sc0, out);
        }
    };
    // Epilogue: thread holds (row0 | row1, cols 8j + 2tq, +1) for j < 16. The residual's pairs
    // are loaded before the stores of their group (kGroups of 32 / kGroups pairs): interleaved,
    // the compiler must assume a store may alias the next load and waits out each load's latency
    // in turn (measured: the residual GEMMs ran at 60% of the plain ones). kEpi stores in two
    // groups: the in-flight accumulators leave no registers for all 32 pairs at once.
    const auto epilogue = [&](const Tile& T, float(&out)[64]) {
        constexpr int kGroups = kEpi ? 2 : 1, kPer = 16 / kGroups;
        const int col_base = T.nb * kTile + 2 * tq;
        const auto offset = [&](int h, int j) {
            return static_cast<int64_t>(h ? T.row1 : T.row0) * p.ldy + col_base + 8 * j;
        };
        const auto inside = [&](int h, int j) { return (h ? T.row1 : T.row0) < p.M && col_base + 8 * j < p.N; };
#pragma unroll
        for (int q = 0; q < kGroups; ++q) {
            if (p.accumulate) {
                float2 old[2 * kPer];
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int jj = 0; jj < kPer; ++jj) {
                        const int j = q * kPer + jj;
                        float2 v = make_float2(0.0f, 0.0f);
                        if (inside(h, j))
                            v = p.out_f32 ? *reinterpret_cast<const float2*>(static_cast<const float*>(p.y) + offset(h, j))
                                          : __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(
                                                static_cast<const bf16*>(p.y) + offset(h, j)));
                        old[kPer * h + jj] = v;
                    }
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int jj = 0; jj < kPer; ++jj) {
                        const int j = q * kPer + jj;
                        out[4 * j + 2 * h] += old[kPer * h + jj].x;
                        out[4 * j + 2 * h + 1] += old[kPer * h + jj].y;
                    }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int jj = 0; jj < kPer; ++jj) {
                    const int j = q * kPer + jj;
                    if (!inside(h, j)) continue;
                    const float v0 = out[4 * j + 2 * h], v1 = out[4 * j + 2 * h + 1];
                    if (p.out_f32)
                        *reinterpret_cast<float2*>(static_cast<float*>(p.y) + offset(h, j)) = make_float2(v0, v1);
                    else
                        *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.y) + offset(h, j)) =
                            __floats2bfloat162_rn(v0, v1);
                }
        }
    };

    float out[64];
    float acc0[64];
    if constexpr (!kEpi) {
        int it = 0;
        for (int t = unit0; t < units; t += unit_step) {
            const Tile T = make_tile(t, it);
#pragma unroll
            for (int i = 0; i < 64; ++i) out[i] = 0.0f;
            if constexpr (!kOverlap) {
                // kFar: sc, n1, n2 hold the scales of blocks kb, kb + 1, kb + 2.
                Scales sc{}, n1{}, n2{};
                if constexpr (kFar) {
                    sc = load_scales(T, 0);
                    n1 = load_scales(T, 1);
                    n2 = load_scales(T, 2);
                }
                for (int kb = 0; kb < kblocks; ++kb) {
                    if constexpr (kFar) {
                        issue(T, kb, acc0);
                    } else {
                        sc = issue(T, kb, acc0);
                    }
                    wgmma_wait<0>();
                    finish(T, kb, acc0, sc, out);
                    if constexpr (kFar) {
                        sc = n1;
                        n1 = n2;
                        n2 = load_scales(T, kb + 3);
                    }
                }
            } else {
                float acc1[64];
                const Scales sc0 = first_block(T, acc0);
                overlap_loop(T, sc0, acc0, acc1, out);
            }
            it += kblocks;
            epilogue(T, out);
        }
    } else if (unit0 < units) {
        // Software-pipelined over tiles: on entry to each round, the tile's k block 0 is issued
        // into acc0 and `out` holds the previous tile's sums (has_prev), stored while block 0
        // runs on the tensor cores (block 1 too would leave too few registers: spills, and the
        // compiler then waits for the MMAs itself).
        float acc1[64];
        Tile cur = make_tile(unit0, 0), prev = cur;
        bool has_prev = false;
        Scales sc0 = first_block(cur, acc0);
        for (;;) {
            if (has_prev) epilogue(prev, out);
#pragma unroll
            for (int i = 0; i < 64; ++i) out[i] = 0.0f;
            overlap_loop(cur, sc0, acc0, acc1, out);
            const int t_next = unit0 + unit_step * (1 + (cur.it / kblocks));
            if (t_next >= units) break;
            prev = cur;
            has_prev = true;
            cur = make_tile(t_next, cur.it + kblocks);
            sc0 = first_block(cur, acc0);
        }
        epilogue(cur, out);
    }
    // The peers may still arrive on this CTA's barriers: none leaves before all are done.
    if constexpr (kCluster > 1) attn_hopper::cluster_sync();
#endif
}

// A 2D e4m3 tensor map over rows x cols bytes (row stride = cols), boxes of box_rows x 128 bytes
// with the 128-byte swizzle (the attention kernels' encoder, byte elements).
cudaError_t encode_fp8_map(CUtensorMap* map, const void* base, int64_t cols, int64_t rows, int box_rows) {
    return attn_hopper::encode_swizzled_map(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, base, cols, rows, cols, box_rows);
}

template <int kStages, bool kOverlap, int kCm, int kCn = 1, bool kEpi = false, bool kCtaWait = false, bool kFar = false>
cudaError_t launch_t(const GemmFp8Params& p, cudaStream_t stream) {
    auto kernel = gemm_fp8_wgmma_kernel<kStages, kOverlap, kCm, kCn, kEpi, kCtaWait, kFar>;
    constexpr int kCluster = kCm * kCn;
    constexpr int smem = smem_bytes<kStages>();
    static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
    Fp8Maps maps;
    cudaError_t err = encode_fp8_map(&maps.a, p.xq, p.K, p.M, kTile / kCn);
    if (err == cudaSuccess) err = encode_fp8_map(&maps.b, p.w, p.K, p.N, kTile / kCm);
    if (err != cudaSuccess) return err;
    cudaLaunchAttribute la[1];
    la[0].id = cudaLaunchAttributeClusterDimension;
    la[0].val.clusterDim.x = kCluster;
    la[0].val.clusterDim.y = 1;
    la[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = la;
    cfg.numAttrs = 1;
    // Persistent: as many clusters as fit at once (one CTA per SM), at most one per work unit.
    static const int resident = [&] {
        int n = 0;
        cudaLaunchConfig_t q = cfg;
        q.gridDim = dim3(kCluster * 1024);
        if (cudaOccupancyMaxActiveClusters(&n, kernel, &q) != cudaSuccess) {
            cudaGetLastError();
            n = 0;
        }
        return n;
    }();
    if (resident <= 0) return cudaErrorNotSupported;
    const int units = ((p.M + kTile * kCm - 1) / (kTile * kCm)) * ((p.N + kTile * kCn - 1) / (kTile * kCn));
    cfg.gridDim = dim3(kCluster * (units < resident ? units : resident));
    return cudaLaunchKernelEx(&cfg, kernel, p, maps);
}

}  // namespace

bool gemm_fp8_wgmma_supported(const GemmFp8Params& s) {
    if (s.w_block_n != kFp8Group || s.M <= 0 || s.N <= 0 || s.K < kFp8Group || s.K % kFp8Group != 0 || s.N % 2 != 0 ||
        s.ldy < s.N || s.ldy % 2 != 0)
        return false;
    static const bool hopper = lm::device_runs_sm90a();
    return hopper;
}

cudaError_t gemm_fp8_wgmma_launch(const GemmFp8Params& p, cudaStream_t stream, int variant) {
    if (!p.xq || !p.x_scale || !p.w || !p.w_scale || !p.y) return cudaErrorInvalidValue;
    if (!gemm_fp8_wgmma_supported(p)) return cudaErrorNotSupported;
    const auto aligned = [](const void* ptr, uintptr_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
    if (!aligned(p.xq, 16) || !aligned(p.w, 16) || !aligned(p.y, p.out_f32 ? 8 : 4)) return cudaErrorInvalidValue;
    switch (variant) {
        case 1: return launch_t<6, false, 1>(p, stream);
        case 2: return launch_t<4, true, 1>(p, stream);
        case 3: return launch_t<6, true, 1>(p, stream);
        case 4: return launch_t<6, false, 2>(p, stream);
        case 5: return launch_t<4, true, 2>(p, stream);
        case 6: return launch_t<6, true, 2, 1, true>(p, stream);
        case 7: return launch_t<6, true, 2, 2, false>(p, stream);
        case 8: return launch_t<6, true, 2, 2, true>(p, stream);
        case 9: return launch_t<7, true, 2, 1, true>(p, stream);
        case 10: return launch_t<6, true, 1, 1, true>(p, stream);
        case 11: return launch_t<6, true, 2, 1, false, true>(p, stream);
        case 12: return launch_t<6, true, 2, 1, false, false, true>(p, stream);
        case 13: return launch_t<6, true, 2, 1, false, true, true>(p, stream);
        case 14: return launch_t<6, true, 1, 1, false, false, true>(p, stream);
        case 15: return launch_t<6, false, 2, 1, false, true, true>(p, stream);
        default: return launch_t<6, true, 2>(p, stream);
    }
}

}  // namespace frost::kernels
