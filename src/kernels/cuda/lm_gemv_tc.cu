// Decode GEMV on bf16 tensor cores, for one row and for a batched decode step alike (M <= 8
// rows of x against the same weights). The SIMT kernels of lm_gemv.cu spend one conversion and
// one FMA per weight per row: at M = 4 the multi-row one ran at ~5.5 TFLOP/s whatever M was
// (bench_ops --batch, 9B, H100 2026-11-24), so a batched step cost M weight reads' worth of time.
// Here mma.m16n8k16 does the multiply-adds: A is a tile of 16 weight rows, B's eight columns are
// the (up to) eight rows of x, so a step reads the weights once whatever M is.
//
// Mapping. A block owns 16 weight rows (SwiGLU: 8 gate rows and their 8 up rows, so one lane holds
// a gate and its up value) and its 8 warps split K in 64-wide steps, interleaved (step s = warp +
// i * 8). Lane L holds rows L/4 and L/4 + 8 of the tile and, in a step, the 16 consecutive weights
// k0 + 16*(L%4) .. +16 of both rows (two 16-byte loads per row). A dot product does not care how k
// is permuted as long as A and B agree, so mma j of the step takes the lane's pairs 2j and 2j+1 as
// its k slots {2t, 2t+1} and {2t+8, 2t+9}; the lane reads column L/4 of B (row L/4 of x) at the
// same 16 offsets, straight from global memory (L1-resident: every warp of the SM reads the same x).
//
// Exactness. bf16 products are exact in the fp32 accumulators. Each output (weight row, x row)
// is a fixed sequence: per warp its steps in order, then the block's warp partials (8, or 16 for
// the narrow matrices' variants below) summed in warp order.
// Column c of an mma depends only on column c of B, so a row's bits do not depend on M or on the
// other rows: a batched member's logits equal its solo step's (padding columns read zeros).
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemv_common.cuh"
#include "kernels/cuda/lm_kernels.h"
#include "util/env.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kWarps = 8;
constexpr int kStepK = 64;     // k per warp step: 4 lanes x 16 weights
constexpr int kTileRows = 16;  // mma M
constexpr int kCols = 8;       // mma N: the x rows

// Two 16-byte words of one row and the matching two of x: four mmas (pairs 4q .. 4q+3 of word q
// feed mmas 2q and 2q+1).
__device__ inline void mma_step(float (&d)[4], const uint4 (&lo)[2], const uint4 (&hi)[2], const uint4 (&xv)[2]) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        mma_bf16(d, lo[q].x, hi[q].x, lo[q].y, hi[q].y, xv[q].x, xv[q].y);
        mma_bf16(d, lo[q].z, hi[q].z, lo[q].w, hi[q].w, xv[q].z, xv[q].w);
    }
}

// kW warps split a tile's K; kHalf (not SwiGLU) gives a block 8 weight rows instead of 16 (the
// mma's rows 8-15 are zeros), so a narrow matrix spreads over twice the blocks. kUnroll steps per
// warp are in flight at once (the next group is loaded after the current one is multiplied).
template <bool kSwiglu, int kW, bool kHalf, int kUnroll, int kMinBlocks>
__global__ void __launch_bounds__(kW * kWarp, kMinBlocks) gemv_tc_kernel(GemmBf16Params p) {
    static_assert(!(kSwiglu && kHalf), "a SwiGLU tile pairs 8 gate rows with their 8 up rows");
    constexpr int kRows = kHalf ? kTileRows / 2 : kTileRows;  // weight rows per block
    __shared__ float partial[kW][kTileRows][kCols];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int t = lane % 4, gid = lane / 4;
    const int F = p.N / 2;
    const int tile = blockIdx.x;
    int n[2];  // the lane's two weight rows
    bool ok[2];
    if constexpr (kHalf) {
        n[0] = n[1] = tile * kRows + gid;
        ok[0] = n[0] < p.N;
        ok[1] = false;
    } else {
        tc_tile_rows<kSwiglu>(tile, gid, p.N, n, ok);
    }
    const int steps = p.K / kStepK;
    const int my_steps = warp < steps ? (steps - warp + kW - 1) / kW : 0;
    const int64_t row_words = p.K / kVec;  // uint4 per weight row
    const uint4* wrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) wrow[r] = reinterpret_cast<const uint4*>(p.w) + (ok[r] ? n[r] : 0) * row_words + 2 * t;

    uint4 w[kUnroll][2][2];  // [step][row][word]
    auto load_group = [&](int i0) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int s = warp + (i0 + u) * kW;
            if (i0 + u >= my_steps) break;
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    w[u][r][q] = kHalf && r == 1 ? make_uint4(0, 0, 0, 0) : __ldg(wrow[r] + s * (kStepK / kVec) + q);
        }
    };
    load_group(0);  // the weights do not depend on the previous kernel
    pdl_wait();
    pdl_launch_dependents();

    // Column gid of B: row gid of x (zeros past M).
    const bool x_ok = gid < p.M;
    const uint4* xrow = reinterpret_cast<const uint4*>(p.x + (x_ok ? gid : 0) * p.ldx) + 2 * t;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i0 = 0; i0 < my_steps; i0 += kUnroll) {
        if (i0 > 0) load_group(i0);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (i0 + u >= my_steps) break;
            const int s = warp + (i0 + u) * kW;
            uint4 xv[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
            if (x_ok) {
                xv[0] = xrow[s * (kStepK / kVec)];
                xv[1] = xrow[s * (kStepK / kVec) + 1];
            }
            mma_step(d, w[u][0], w[u][1], xv);
        }
    }
    // d: (row gid, col 2t), (gid, 2t + 1), (gid + 8, 2t), (gid + 8, 2t + 1).
    partial[warp][gid][2 * t] = d[0];
    partial[warp][gid][2 * t + 1] = d[1];
    partial[warp][gid + 8][2 * t] = d[2];
    partial[warp][gid + 8][2 * t + 1] = d[3];
    __syncthreads();
    auto sum_of = [&](int row, int col) {
        float s = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kW; ++wi) s += partial[wi][row][col];
        return s;
    };
    if constexpr (kSwiglu) {
        if (threadIdx.x >= (kTileRows / 2) * kCols) return;
        const int g = threadIdx.x / kCols, col = threadIdx.x % kCols;
        const int j = tile * (kTileRows / 2) + g;
        if (col >= p.M || j >= F) return;
        static_cast<bf16*>(p.y)[col * p.ldy + j] = swiglu_from_sums(sum_of(g, col), sum_of(g + 8, col));
    } else {
        if (threadIdx.x >= kRows * kCols) return;
        const int row = threadIdx.x / kCols, col = threadIdx.x % kCols;
        const int nr = tile * kRows + row;
        if (col >= p.M || nr >= p.N) return;
        store_gemv_out(p, col * p.ldy + nr, sum_of(row, col));
    }
}

}  // namespace

bool gemv_tc_supports(const GemmBf16Params& p) {
    return p.K % kStepK == 0 && p.M >= 1 && p.M <= kCols && (p.M == 1 || p.ldx % kVec == 0);
}

template <int kW, bool kHalf, int kUnroll, int kMinBlocks>
cudaError_t launch_variant(const GemmBf16Params& p, cudaStream_t stream) {
    constexpr int rows = kHalf ? kTileRows / 2 : kTileRows;
    const int tiles = p.swiglu ? ceil_div(p.N / 2, kTileRows / 2) : ceil_div(p.N, rows);
    constexpr int threads = kW * kWarp;
    const bool pdl = p.pdl != 0;
    if constexpr (kHalf)
        return launch_kernel(gemv_tc_kernel<false, kW, true, kUnroll, kMinBlocks>, dim3(tiles), dim3(threads), 0, stream, pdl, p);
    return p.swiglu
               ? launch_kernel(gemv_tc_kernel<true, kW, false, kUnroll, kMinBlocks>, dim3(tiles), dim3(threads), 0, stream, pdl, p)
               : launch_kernel(gemv_tc_kernel<false, kW, false, kUnroll, kMinBlocks>, dim3(tiles), dim3(threads), 0, stream, pdl, p);
}

// Narrow matrices (at most one 16-row tile per SM: the 35B-A3B's out / o projections, 128 tiles;
// the 0.8B's, 64) ran 1.7-3.2x their bytes floor inside the decode graph with 8-warp tiles: one
// 8-warp block per SM, each warp walking its K in rounds of two steps, one memory round trip per
// round. Here a tile's K is split over 16 warps with all of a warp's steps (K <= 4096: at most
// four) in flight at once, issued before the programmatic wait; below half the SMs' worth of
// tiles a block takes 8 rows (kHalf) so twice the SMs stream. A row's bits depend on the variant
// (its K split), and the variant on N and K only, so a batched member keeps its solo bits.
// Measured (H200, 2026-12-02, forty-seventh session; `frost bench engine --ttft 1024 --decode 1024
// --decode-steps 64 --reps 3`, ms/token, two rounds alternating with FROST_GEMV_WIDE=0 in one
// call): 0.8B 0.806 / 0.800 -> 0.724 / 0.725 (2.01x -> 1.84x its bytes floor); 35B-A3B, first 20
// layers, 1.483 / 1.477 -> 1.453 / 1.456. Inside the 35B-A3B graph (`frost bench graph-ops`) the
// GDN out projection went 7.1 -> 4.9 us per launch (1.68x -> 1.17x its floor) and the attention
// o_proj 8.0 -> 2.8 us (what leaving it out saves, now below its floor: it overlaps). 8-row
// blocks for the 35B-A3B's 128 tiles as well (FROST_GEMV_WIDE=half): 1.448 / 1.455, the same.
// FROST_GEMV_WIDE=0 keeps the 8-warp tiles for every shape, =half takes 8-row blocks up to one
// 16-row tile per SM (A/B runs; read once).
enum class TcVariant { Base, Wide, WideHalf };
TcVariant pick_variant(const GemmBf16Params& p) {
    static const int mode = util::env_is("FROST_GEMV_WIDE", "0") ? 0 : util::env_is("FROST_GEMV_WIDE", "half") ? 2 : 1;
    const int sms = device_sm_count(), steps = p.K / kStepK;
    if (mode == 0 || sms <= 0 || steps > 4 * 16) return TcVariant::Base;
    const int tiles = p.swiglu ? ceil_div(p.N / 2, kTileRows / 2) : ceil_div(p.N, kTileRows);
    if (!p.swiglu && (mode == 2 ? tiles : 2 * tiles) <= sms) return TcVariant::WideHalf;
    return tiles <= sms ? TcVariant::Wide : TcVariant::Base;
}

// Otherwise two steps in flight per warp; three blocks per SM where K is large, four for the small
// matrices of the 0.8B-style model. Measured in the engine against the SIMT GEMV (H100,
// 2026-11-24, ms/token at B = 1 / 4): unroll 4 with 2 blocks 6.27 / 6.77 (9B), unroll 2 with 3
// blocks 6.13 / 6.48 (SIMT 6.15 at B = 1), unroll 2 with 4 blocks 6.22 / 6.55 (9B) and 1.120 (0.8B,
// SIMT 1.127), unroll 4 with 3 blocks 6.90.
cudaError_t gemv_tc_launch(const GemmBf16Params& p, cudaStream_t stream) {
    if (!gemv_tc_supports(p)) return cudaErrorInvalidValue;
    const TcVariant v = pick_variant(p);
    const bool two = p.K / kStepK <= 2 * 16;  // a 16-warp tile's steps per warp: <= 2, else <= 4
    cudaError_t e;
    if (v == TcVariant::WideHalf) e = two ? launch_variant<16, true, 2, 1>(p, stream) : launch_variant<16, true, 4, 1>(p, stream);
    else if (v == TcVariant::Wide) e = two ? launch_variant<16, false, 2, 1>(p, stream) : launch_variant<16, false, 4, 1>(p, stream);
    else e = p.K <= 2048 ? launch_variant<kWarps, false, 2, 4>(p, stream) : launch_variant<kWarps, false, 2, 3>(p, stream);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

}  // namespace frost::kernels
