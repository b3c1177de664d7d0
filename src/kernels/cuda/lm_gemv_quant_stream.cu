// Quantized decode GEMV, streamed through shared memory (issue 15; see lm_gemv_quant.h,
// gemv_quant_stream_*). Why: the tensor-core GEMV (lm_gemv_quant_tc.cu) keeps its weights in flight
// in registers, about one 2 KiB step per warp at 80 registers a lane, and ncu puts it at 65 % of
// DRAM with most stalls waiting on those loads (H100 2026-11-25): the FP8 kernels run 1.5x their
// bytes floor and the 9B FP8 decode 1.34x, where bf16 (twice the bytes per load) runs 1.15x.
// Here the bytes in flight are not bounded by registers: per block, one producer warp streams the
// weight rows of its 16-row tiles into a ring of shared-memory stages with bulk copies (one
// cp.async.bulk per row and chunk, completing on the stage's mbarrier), `stages` chunks ahead of
// the consumers, and the blocks are persistent: a block walks tiles blockIdx.x, + gridDim.x, ...
// and its producer runs on into the next tile while the consumers reduce the last one, so a block
// starts its DRAM stream once per launch, not once per tile. The weights do not depend on the
// previous kernel, so the producer starts before the PDL wait.
//
// Consumer warp w (of 8) takes step w of every chunk (a chunk: 8 steps of 128 k of the tile's 16
// rows), i.e. steps w, w + 8, ... in order, the steps the 8-warp tensor-core kernel's warp w takes;
// each step runs qtc::tc_step on the same lane mapping, and the tile's partials are summed in warp
// order. So every output equals gemv_quant_tc_launch_tuned(p, 1, 3, 1, s, 8)'s bit for bit, for
// every format, M and epilogue. A consumer reads its step's fragments from the stage, releases the
// stage (lane 0 arrives on its empty barrier) and only then computes; the scales of its next step
// are loaded one chunk ahead.
//
// Ring layout: stage s holds rows 0..15 of the tile (tile row r = the tc mapping's gid r % 8 of
// half r / 8), each row's chunk bytes at s * stage + r * kRowStride. The row stride is padded past
// the chunk so the two rows of a quarter-warp's 16-byte reads fall in disjoint banks (fp8: a lane
// row spans banks 4t..4t+3 and 4t+8..; +16 bytes moves the next row by 4 banks; 4-bit: a row's
// quarter-warp read spans 16 banks, +64 bytes moves the next row by 16).
#include "kernels/cuda/lm_gemv_quant_tc.cuh"

#include <algorithm>

#include "kernels/cuda/lm_attn_tma.cuh"
#include "kernels/cuda/lm_gemv_common.cuh"
#include "kernels/cuda/lm_mbarrier.cuh"

namespace frost::kernels {
namespace {
using namespace lm;
using namespace qtc;

constexpr int kConsumers = kWarps;  // consumer warp w takes step w of every chunk
constexpr int kStreamThreads = (kConsumers + 1) * kWarp;
constexpr int kMaxStages = 8;

template <int F>
struct Ring {
    static constexpr int kStepBytes = is_fp8<F>() ? kStepK : kStepK / 2;  // one row's bytes of a step
    static constexpr int kChunkRow = kConsumers * kStepBytes;            // one row's bytes of a chunk
    static constexpr int kRowStride = kChunkRow + (is_fp8<F>() ? 16 : 64);
    static constexpr int kStageBytes = kTileRows * kRowStride;
};

__host__ __device__ constexpr int stream_tiles(int N, bool swiglu) {
    return swiglu ? (N / 2 + kTileRows / 2 - 1) / (kTileRows / 2) : (N + kTileRows - 1) / kTileRows;
}

// Tile row r's row of the stored weight (tc_tile_rows' gid r % 8, half r / 8); a row past N reads
// row 0 (its outputs are dropped), so every chunk moves the same bytes.
template <bool kSwiglu>
__device__ inline int tile_row(int tile, int r, int N) {
    int n[2];
    bool ok[2];
    tc_tile_rows<kSwiglu>(tile, r % 8, N, n, ok);
    const bool hi = r >= 8;  // a select, not a runtime index into a local array
    return (hi ? ok[1] : ok[0]) ? (hi ? n[1] : n[0]) : 0;
}

template <int F, bool kSwiglu>
__global__ void __launch_bounds__(kStreamThreads, 2) gemv_quant_stream_kernel(GemvQuantParams p, int stages) {
#if defined(FROST_ATTN_WGMMA)
    using R = Ring<F>;
    constexpr int L = loads_per_row<F>();
    __shared__ __align__(8) uint64_t full_bar[kMaxStages], empty_bar[kMaxStages];
    // Two sets, alternating per tile: a tile's partials are written while the previous tile's may
    // still be read, so one consumer barrier per tile suffices.
    __shared__ float partial[2][kConsumers][kTileRows][kCols];
    extern __shared__ __align__(128) uint8_t ring[];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int tiles = stream_tiles(p.N, kSwiglu != 0);
    const int steps = p.K / kStepK;
    const int chunks = (steps + kConsumers - 1) / kConsumers;
    const uint32_t ring0 = smem_addr(ring);
    const auto full = [&](int s) { return smem_addr(&full_bar[s]); };
    const auto empty = [&](int s) { return smem_addr(&empty_bar[s]); };
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) {
            mbar_init(full(s), 1);              // the producer's expect-tx arrival (+ the copies' bytes)
            mbar_init(empty(s), kConsumers);    // lane 0 of each consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp == kConsumers) {  // the producer
        // Lane r < 16 copies tile row r of every chunk; lane 0 first announces the chunk's bytes.
        int it = 0;  // chunks issued over all of this block's tiles: the ring position
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const uint8_t* src = nullptr;
            if (lane < kTileRows)
                src = static_cast<const uint8_t*>(p.w) + static_cast<int64_t>(tile_row<kSwiglu>(tile, lane, p.N)) *
                                                            (static_cast<int64_t>(steps) * R::kStepBytes);
            for (int c = 0; c < chunks; ++c, ++it) {
                const int s = it % stages;
                if (it >= stages) mbar_wait(empty(s), (it / stages - 1) & 1);
                const int c_steps = min(kConsumers, steps - c * kConsumers);
                const uint32_t row_bytes = static_cast<uint32_t>(c_steps * R::kStepBytes);
                if (lane == 0) attn_hopper::mbar_arrive_expect_tx(full(s), kTileRows * row_bytes);
                __syncwarp();
                if (lane < kTileRows)
                    bulk_g2s(ring0 + s * R::kStageBytes + lane * R::kRowStride, src + c * R::kChunkRow, row_bytes, full(s));
            }
        }
        // The kernel must not complete before its predecessor (lm_common.cuh, pdl_wait).
        pdl_wait();
        pdl_launch_dependents();
        return;
    }

    // Consumers: warp w, lane (gid, t) as in the tensor-core kernel.
    const int t = lane % 4, gid = lane / 4;
    const int F2 = p.N / 2;
    pdl_wait();
    pdl_launch_dependents();
    const int ldx = p.ldx > 0 ? p.ldx : p.K;
    const uint4* xrow = reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(gid < p.M ? gid : 0) * ldx) + 4 * t;
    const bool x_ok = gid < p.M;
    const uint32_t magic = kBf16Magic128 ^ (static_cast<uint32_t>(p.N) & 0x80000000u);  // see tc_step
    // The lane's two rows of a tile (a dropped row reads row 0) and their scale pointers.
    const auto rows_of = [&](int tile, int (&n)[2]) {
        bool ok[2];
        tc_tile_rows<kSwiglu>(tile, gid, p.N, n, ok);
#pragma unroll
        for (int r = 0; r < 2; ++r) n[r] = ok[r] ? n[r] : 0;
    };
    // Scale data one chunk ahead: (pt, pc) is the chunk whose step `warp` the prefetch holds.
    int pt = blockIdx.x, pc = 0;
    int n_pf[2];
    rows_of(pt, n_pf);
    RowScales<F> rs_pf(p, p.scale, p.zero_point, n_pf);
    StepRaw pf[2];
    const auto prefetch = [&] {
        const int s = pc * kConsumers + warp;
        if (pt < tiles && s < steps) {
            pf[0] = rs_pf.load(0, s);
            pf[1] = rs_pf.load(1, s);
        }
    };
    prefetch();
    int it = 0, buf = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
        float acc[2][4] = {};
        for (int c = 0; c < chunks; ++c, ++it) {
            const StepRaw sr[2] = {pf[0], pf[1]};
            if (++pc == chunks) {
                pc = 0;
                pt += gridDim.x;
                if (pt < tiles) {
                    rows_of(pt, n_pf);
                    rs_pf = RowScales<F>(p, p.scale, p.zero_point, n_pf);
                }
            }
            prefetch();
            const int s = it % stages, step = c * kConsumers + warp;
            mbar_wait(full(s), (it / stages) & 1);
            uint4 w[2][L];
            if (step < steps) {
                const uint32_t at = ring0 + s * R::kStageBytes + warp * R::kStepBytes + t * (L * 16);
#pragma unroll
                for (int r = 0; r < 2; ++r)
#pragma unroll
                    for (int l = 0; l < L; ++l) {
                        const uint32_t a = at + (gid + 8 * r) * R::kRowStride + l * 16;
                        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                     : "=r"(w[r][l].x), "=r"(w[r][l].y), "=r"(w[r][l].z), "=r"(w[r][l].w)
                                     : "r"(a));
                    }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(empty(s));
            if (step < steps) {
                uint4 xv[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) xv[q] = x_ok ? xrow[step * (kStepK / kVec) + q] : make_uint4(0, 0, 0, 0);
                tc_step<F>(w, sr, xv, magic, acc);
            }
        }
        // acc: (row gid, col 2t), (gid, 2t + 1), (gid + 8, 2t), (gid + 8, 2t + 1).
        float(&part)[kConsumers][kTileRows][kCols] = partial[buf];
        part[warp][gid][2 * t] = acc[0][0] + acc[1][0];
        part[warp][gid][2 * t + 1] = acc[0][1] + acc[1][1];
        part[warp][gid + 8][2 * t] = acc[0][2] + acc[1][2];
        part[warp][gid + 8][2 * t + 1] = acc[0][3] + acc[1][3];
        named_bar_sync(1, kConsumers * kWarp);
        const auto row_value = [&](int row, int col, int nr) {
            float v = 0.0f;
#pragma unroll
            for (int wi = 0; wi < kConsumers; ++wi) v += part[wi][row][col];
            return row_factor<F>(v, nr, p.scale, p.row_global_scale, p.global_scale);
        };
        if constexpr (kSwiglu) {
            constexpr int kOuts = (kTileRows / 2) * kCols;
            const int g = threadIdx.x / kCols, col = threadIdx.x % kCols;
            const int j = tile * (kTileRows / 2) + g;
            if (threadIdx.x < kOuts && col < p.M && j < F2) {
                const int ldy = p.ldy > 0 ? p.ldy : F2;
                static_cast<bf16*>(p.y)[static_cast<int64_t>(col) * ldy + j] =
                    swiglu_from_sums(row_value(g, col, j), row_value(g + 8, col, F2 + j));
            }
        } else {
            constexpr int kOuts = kTileRows * kCols;
            const int row = threadIdx.x / kCols, col = threadIdx.x % kCols;
            const int nr = tile * kTileRows + row;
            if (threadIdx.x < kOuts && col < p.M && nr < p.N) {
                const int ldy = p.ldy > 0 ? p.ldy : p.N;
                store_gemv_out(p, static_cast<int64_t>(col) * ldy + nr, row_value(row, col, nr));
            }
        }
    }
#else
    __trap();  // gemv_quant_stream_eligible refuses devices without sm_90a code
#endif
}

template <int F>
cudaError_t launch_format(const GemvQuantParams& p, int stages, int blocks_per_sm, int max_blocks, cudaStream_t stream) {
    const size_t smem = static_cast<size_t>(stages) * Ring<F>::kStageBytes;
    auto kernel = p.swiglu ? gemv_quant_stream_kernel<F, true> : gemv_quant_stream_kernel<F, false>;
    // Above the 48 KiB default: allowed per kernel once (the largest any launch asks).
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   kMaxStages * Ring<F>::kStageBytes);
        e != cudaSuccess)
        return e;
    const int sms = device_sm_count();
    int grid = stream_tiles(p.N, p.swiglu != 0);
    if (sms > 0) grid = std::min(grid, blocks_per_sm * sms);
    if (max_blocks > 0) grid = std::min(grid, max_blocks);
    return launch_kernel(kernel, dim3(grid), dim3(kStreamThreads), smem, stream, p.pdl != 0, p, stages);
}

}  // namespace

bool gemv_quant_stream_eligible(const GemvQuantParams& p) {
    static const bool sm90a = device_runs_sm90a();  // one GPU model per process
    return !p.expert_ids && !p.act_fp8 && gemv_quant_tc_eligible(p) && sm90a;
}

cudaError_t gemv_quant_stream_launch_tuned(const GemvQuantParams& p, int stages, int blocks_per_sm, cudaStream_t stream,
                                           int max_blocks) {
    if (!gemv_quant_stream_eligible(p) || stages < 2 || stages > kMaxStages || blocks_per_sm < 1 || blocks_per_sm > 2 ||
        max_blocks < 0)
        return cudaErrorInvalidValue;
    cudaError_t e;
    switch (p.format) {
        case kGemvQuantFp8Block: e = launch_format<kGemvQuantFp8Block>(p, stages, blocks_per_sm, max_blocks, stream); break;
        case kGemvQuantFp8Channel: e = launch_format<kGemvQuantFp8Channel>(p, stages, blocks_per_sm, max_blocks, stream); break;
        case kGemvQuantNvfp4: e = launch_format<kGemvQuantNvfp4>(p, stages, blocks_per_sm, max_blocks, stream); break;
        default: e = launch_format<kGemvQuantInt4>(p, stages, blocks_per_sm, max_blocks, stream); break;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // a refused launch must not surface in the next launch's check
        return e;
    }
    return cudaGetLastError();
}

cudaError_t gemv_quant_stream_launch(const GemvQuantParams& p, cudaStream_t stream) {
    return gemv_quant_stream_launch_tuned(p, p.format == kGemvQuantFp8Block || p.format == kGemvQuantFp8Channel ? 6 : 8, 2, stream);
}

}  // namespace frost::kernels
