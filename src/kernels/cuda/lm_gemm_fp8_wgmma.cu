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
// Measured on the H100 (2026-11-24, M 4096, bench_cuda_kernels --fp8): 831-928 TFLOP/s on the 9B's
// shapes against cuBLASLt's 1194-1300 (bitwise the same products), so it is opt-in
// (FROST_FP8_GEMM=wgmma). Likely next steps: ping-pong consumers (one tile each, so one
// warpgroup's epilogue overlaps the other's MMAs) and a shared-memory + TMA-store epilogue.
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

// kCluster 2: clusters of two CTAs on row tiles 2i, 2i + 1 of one column tile; each loads its own
// A tile and one 64-row half of the shared B tile, multicast into both CTAs, so the L2 -> SM
// traffic per k block is 24 KB a CTA instead of 32 (128x128 FP8 tiles are bound by it). A stage
// is refilled only when the consumers of both CTAs released it: they arrive on both CTAs'
// "empty" barriers.
template <int kStages, bool kOverlap, int kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_fp8_wgmma_kernel(GemmFp8Params p, const __grid_constant__ Fp8Maps maps) {
#if defined(FROST_ATTN_WGMMA)
    constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128 x 40 + 256 x 232 <= 65536
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t bars = base + kStages * kStageBytes;
    auto full = [&](int s) { return bars + 8 * s; };
    auto empty = [&](int s) { return bars + 8 * (kStages + s); };
    auto stage_a = [&](int s) { return base + s * kStageBytes; };
    auto stage_b = [&](int s) { return base + s * kStageBytes + kTileBytes; };

    // Work units: kCluster row tiles x 1 column tile, one per cluster at a time.
    const int num_m = (p.M + kTile * kCluster - 1) / (kTile * kCluster), num_n = (p.N + kTile - 1) / kTile;
    const int units = num_m * num_n;
    const int kblocks = p.K / kTile;
    const int unit0 = blockIdx.x / kCluster, unit_step = gridDim.x / kCluster;
    [[maybe_unused]] const uint32_t rank = kCluster > 1 ? attn_hopper::cluster_rank() : 0;
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
            const TileCoord c = tile_coord(t, num_m, num_n, kBandM / kCluster);
            const int mb = c.mb * kCluster + static_cast<int>(rank);
            for (int kb = 0; kb < kblocks; ++kb, ++it) {
                const int s = it % kStages;
                if (it >= kStages) {
                    // Released by both CTAs' consumers (the peer's arrivals: cluster-scope acquire).
                    if constexpr (kCluster > 1) {
                        attn_hopper::mbar_wait_cluster(empty(s), (it / kStages - 1) & 1);
                    } else {
                        mbar_wait(empty(s), (it / kStages - 1) & 1);
                    }
                }
                // Both tiles' bytes, the peer's multicast half of B included; out-of-range rows
                // (M, N tails, a cluster's second row tile past M) arrive as zeros.
                attn_hopper::mbar_arrive_expect_tx(full(s), kStageBytes);
                attn_hopper::tma_load_2d(stage_a(s), &maps.a, kb * kTile, mb * kTile, full(s));
                if constexpr (kCluster > 1) {
                    constexpr int kPart = kTile / kCluster;
                    attn_hopper::tma_load_2d_multicast(stage_b(s) + rank * kPart * kTile, &maps.b, kb * kTile,
                                                       c.nb * kTile + static_cast<int>(rank) * kPart, full(s),
                                                       static_cast<uint16_t>((1u << kCluster) - 1));
                } else {
                    attn_hopper::tma_load_2d(stage_b(s), &maps.b, kb * kTile, c.nb * kTile, full(s));
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
    int it = 0;
    for (int t = unit0; t < units; t += unit_step) {
        const TileCoord c = tile_coord(t, num_m, num_n, kBandM / kCluster);
        const int mb = c.mb * kCluster + static_cast<int>(rank);
        const int row0 = mb * kTile + cw * 64 + warp * 16 + g, row1 = row0 + 8;
        const float* ws = p.w_scale + static_cast<int64_t>(c.nb) * kblocks;
        float out[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) out[i] = 0.0f;
        struct Scales {
            float s0, s1;
        };
        // Waits for k block kb's stage and issues its four wgmmas into acc; returns the block's
        // row scales (activation x weight), loaded while the MMAs run.
        auto issue = [&](int kb, float(&acc)[64]) -> Scales {
            const int i = it + kb, s = i % kStages;
            const float sw = __ldg(ws + kb);
            const float a0 = row0 < p.M ? __ldg(p.x_scale + kb * ld_scale + row0) : 0.0f;
            const float a1 = row1 < p.M ? __ldg(p.x_scale + kb * ld_scale + row1) : 0.0f;
            mbar_wait(full(s), (i / kStages) & 1);
            reg_fence(acc);
            wgmma_fence();
            const uint32_t a = stage_a(s) + cw * 64 * kTile, b = stage_b(s);
#pragma unroll
            for (int k = 0; k < kTile / 32; ++k)
                wgmma_m64n128k32_e4m3(acc, smem_desc_sw128(a + 32 * k, 16, 1024), smem_desc_sw128(b + 32 * k, 16, 1024),
                                      k);
            wgmma_commit();
            return {a0 * sw, a1 * sw};
        };
        // Block kb's MMAs are complete: release its stage, add acc x scales into out.
        auto finish = [&](int kb, float(&acc)[64], Scales sc) {
            reg_fence(acc);
            __syncwarp();
            if (lane == 0) {
                if constexpr (kCluster > 1) {
#pragma unroll
                    for (int r = 0; r < kCluster; ++r) mbar_arrive_peer(empty((it + kb) % kStages), r);
                } else {
                    mbar_arrive(empty((it + kb) % kStages));
                }
            }
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                out[4 * j + 0] = fmaf(acc[4 * j + 0], sc.s0, out[4 * j + 0]);
                out[4 * j + 1] = fmaf(acc[4 * j + 1], sc.s0, out[4 * j + 1]);
                out[4 * j + 2] = fmaf(acc[4 * j + 2], sc.s1, out[4 * j + 2]);
                out[4 * j + 3] = fmaf(acc[4 * j + 3], sc.s1, out[4 * j + 3]);
            }
        };
        float acc0[64];
        if constexpr (!kOverlap) {
            for (int kb = 0; kb < kblocks; ++kb) {
                const Scales sc = issue(kb, acc0);
                wgmma_wait<0>();
                finish(kb, acc0, sc);
            }
        } else {
            float acc1[64];
            Scales sc0 = issue(0, acc0), sc1{};
            int kb = 1;
            for (; kb + 1 < kblocks; kb += 2) {
                sc1 = issue(kb, acc1);
                wgmma_wait<1>();
                finish(kb - 1, acc0, sc0);
                sc0 = issue(kb + 1, acc0);
                wgmma_wait<1>();
                finish(kb, acc1, sc1);
            }
            if (kb < kblocks) {
                sc1 = issue(kb, acc1);
                wgmma_wait<1>();
                finish(kb - 1, acc0, sc0);
                wgmma_wait<0>();
                finish(kb, acc1, sc1);
            } else {
                wgmma_wait<0>();
                finish(kb - 1, acc0, sc0);
            }
        }
        it += kblocks;

        // Epilogue: thread holds (row0 | row1, cols 8j + 2tq, +1) for j < 16. The residual's 32
        // pairs are all loaded before the first store: interleaved, the compiler must assume a
        // store may alias the next load and waits out each load's latency in turn (measured:
        // the residual GEMMs ran at 60% of the plain ones).
        const int col_base = c.nb * kTile + 2 * tq;
        const auto offset = [&](int h, int j) {
            return static_cast<int64_t>(h ? row1 : row0) * p.ldy + col_base + 8 * j;
        };
        const auto inside = [&](int h, int j) { return (h ? row1 : row0) < p.M && col_base + 8 * j < p.N; };
        if (p.accumulate) {
            float2 old[32];
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int j = 0; j < 16; ++j) {
                    float2 v = make_float2(0.0f, 0.0f);
                    if (inside(h, j))
                        v = p.out_f32 ? *reinterpret_cast<const float2*>(static_cast<const float*>(p.y) + offset(h, j))
                                      : __bfloat1622float2(
                                            *reinterpret_cast<const __nv_bfloat162*>(static_cast<const bf16*>(p.y) + offset(h, j)));
                    old[16 * h + j] = v;
                }
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int j = 0; j < 16; ++j) {
                    out[4 * j + 2 * h] += old[16 * h + j].x;
                    out[4 * j + 2 * h + 1] += old[16 * h + j].y;
                }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                if (!inside(h, j)) continue;
                const float v0 = out[4 * j + 2 * h], v1 = out[4 * j + 2 * h + 1];
                if (p.out_f32)
                    *reinterpret_cast<float2*>(static_cast<float*>(p.y) + offset(h, j)) = make_float2(v0, v1);
                else
                    *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.y) + offset(h, j)) = __floats2bfloat162_rn(v0, v1);
            }
    }
    // The peer may still arrive on this CTA's barriers: neither leaves before both are done.
    if constexpr (kCluster > 1) attn_hopper::cluster_sync();
#endif
}

// A 2D e4m3 tensor map over rows x cols bytes (row stride = cols), boxes of box_rows x 128 bytes
// with the 128-byte swizzle (the attention kernels' encoder, byte elements).
cudaError_t encode_fp8_map(CUtensorMap* map, const void* base, int64_t cols, int64_t rows, int box_rows) {
    return attn_hopper::encode_swizzled_map(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, base, cols, rows, cols, box_rows);
}

template <int kStages, bool kOverlap, int kCluster>
cudaError_t launch_t(const GemmFp8Params& p, cudaStream_t stream) {
    auto kernel = gemm_fp8_wgmma_kernel<kStages, kOverlap, kCluster>;
    constexpr int smem = smem_bytes<kStages>();
    static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
    Fp8Maps maps;
    cudaError_t err = encode_fp8_map(&maps.a, p.xq, p.K, p.M, kTile);
    if (err == cudaSuccess) err = encode_fp8_map(&maps.b, p.w, p.K, p.N, kTile / kCluster);
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
    const int units = ((p.M + kTile * kCluster - 1) / (kTile * kCluster)) * ((p.N + kTile - 1) / kTile);
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
        default: return launch_t<6, true, 2>(p, stream);
    }
}

}  // namespace frost::kernels
