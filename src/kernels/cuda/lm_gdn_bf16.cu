// Chunked gated-delta-rule prefill on bf16 tensor cores (spec §5, chunk 64; mma.sync m16n8k16,
// fp32 accumulators), two launches:
//  1. prep, parallel over (chunk, value head): γ = within-chunk cumsum of g;
//     A = β_i (k_i·k_j) e^{γ_i−γ_j} (i > j) and P = (q_i·k_j) e^{γ_i−γ_j} (i ≥ j) on tensor cores
//     (q and k are bf16, so every product is exact and only the fp32 sums round); T = (I+A)⁻¹ in
//     fp32 by 16-blocks, then W = T(β e^γ K), U = T(β V) on tensor cores. W, U, P are stored bf16
//     (the next launch multiplies them on tensor cores anyway), γ fp32.
//  2. state + output, sequential over chunks, parallel over (value head, 32-column dv slice):
//     V' = U − W S₀ and X = Q S₀ share the S₀ fragments; then O = e^γ ⊙ X + P V' is written and
//     S = e^{γ_L} S₀ + Kᵀ (e^{γ_L−γ} ⊙ V'). S stays in fp32 accumulator registers for the whole
//     pass; only its bf16 copy in shared memory is a multiplicand. The next chunks' W, K, Q, U
//     slice, P and γ land by cp.async (three stages) while this one computes. Fusing the output
//     removes the S₀ and V' round trips through memory that the TF32 path pays.
// Measured on the H100 (9B shape: 32 value heads, T = 16k, per layer; kernels_test_cuda_gdn
// --gtest_filter=*NineB*, same run): TF32 path 916 + 880 + 707 = 2511 µs; this path 424 (prep) +
// 577 (state + output) = 993 µs, 2.5x. The state pass is latency-bound (one block per SM, 256
// chunks in sequence): the bulk-copy and cluster-multicast loads measured slower than cp.async
// (1073 and 1204 µs in all), so chunk_cluster = 0 is the default and they stay selectable.
// Round 2 (issue 18; bench_cuda_kernels --gdn, H100, 9B shape, L2 flushed, one run, µs prep +
// state at 2048 / 16384 rows): v1 56.3 + 76.8 / 378.6 + 569.1 → now 57.1 + 74.6 / 383.5 + 554.4
// (twice: 56.4 + 74.1 / 376.5 + 538.7); the session's first run had v1's prep at 59.6 / 401 before
// its block-diagonal solve was unrolled. ldmatrix A fragments and unrolled copies cut the state
// pass's instructions (ncu, 2048 rows: 23.6 M → ~16 M executed, IPC 1.41 → 1.02) but hardly its time:
// it waits on latency (2 warps per scheduler, 0.31 eligible, 7.8 cycles per issue), not issue.
// A 16-warp version with the state (V', S) and output (X, O) products in separate warps, same
// bits, measured slower (83.7 / 611 against 77.2 / 567 µs: each accumulator's chain of dependent
// mma stays as long and the chunk's barriers wait for 16 warps) and was removed. What is left is
// the chain per chunk:
// barrier, 8 dependent mma per accumulator, barrier, 4 more, barrier.
// Round 3: with few value heads (16: the 0.8B shape) this pass has only 64 blocks on 132 SMs;
// lm_gdn_bf16_narrow.cu runs 16-column slices there (128 blocks, copies from a producer warp, same
// bits): state pass 146 → 115 µs at 4096 rows, 0.8B TTFT 2.7-4.5 % lower (numbers there).
// Round 4 (2026-11-30): on sm_90a the default state pass is lm_gdn_wgmma.cu (warpgroup MMA, same
// bits; H200, 9B shape, 4096 rows: 143 -> 85 us); the passes here serve other devices and A/B.
// Round 5 (2026-11-30): the prep's block-diagonal solve four columns per thread and its W / U
// products balanced over the warps (kFast, same bits). H200, bench_cuda_kernels --gdn, L2
// flushed, two runs, against round 2's form (a switch kept for that A/B, then removed): 9B shape
// 4096 rows 96.2-96.4 -> 95.1-95.4 us, 0.8B shape 1024 rows 23.7-23.9 -> 22.9-23.1. Small because
// the solve was never the limit: ncu's stall sampling (9B, 4096 rows) spreads the kernel over its
// phases, none above a quarter: the load issue and gate reads (~21 %),
// K Kᵀ / Q Kᵀ and the decay epilogue (~17 %), the solve (~24 %, half of it barrier waits), the
// W / U products (~24 %), the stores (~9 %); 0.44 issued per scheduler with 5.7 warps resident.
// A clock64 probe (2026-12-01, H200, 16 value heads, thread 0 stamping after each phase's barrier;
// the patch stays out of the tree), mean cycles per block at 1024 / 4096 rows: loads and gates
// 4643 / 6486, cumsum 523 / 769, K Kᵀ / Q Kᵀ and the decay epilogue 4297 / 6161, diagonal solve
// 757 / 994, block diagonals 4614 / 5026, W / U products 5061 / 6446, staging 420 / 902, copy out
// 1536 / 2012; total 21850 / 28797. At 1024 rows (256 blocks, all resident at once) a mean block
// is ~11 us against the launch's 23.6 us (bench_cuda_kernels --gdn 16, L2 flushed), so half of
// that launch is outside a mean block's phases: launch, ramp and the slowest blocks (the probe
// kept no start times).
// A second probe (2026-12-01, %globaltimer at entry and exit, same bench, L2 flushed) answers it:
// at 1024 rows all 256 blocks enter within 0.1-0.2 us of the first, and a block runs 10.4 us
// (shortest) / 15.1 us (median) from entry to exit, against the 23.8 us the events time; the
// phases' clock64 sum (23013 cycles, ~11.6 us) misses the cursor read before them. With 32
// value heads (512 blocks, 3 per SM) the last block enters 17.5 us after the first: two waves.
// Tried and dropped (same day, H200, two runs each, old and new binaries in one call): a 52 KB
// layout (V loaded into A's space after the solve, Y in T's upper blocks, P stored from the
// registers) with 4 blocks per SM (64 registers, 36 bytes of spills), same bits (the GDN kernel
// test and the backend-op parity passed). bench_cuda_kernels --gdn, us, old -> new: 16 heads
// 1024 / 4096 / 16384 rows 23.0-23.1 -> 23.8, 52.4 -> 53.2-53.5, 178.5-178.6 -> 181.2-182.3;
// 32 heads 31.8-31.9 -> 30.1-30.2 (one wave instead of two), 95.3-95.4 -> 96.8-97.0, 344.5-347.2
// -> 353.2-354.9; engine cold TTFT flat (9B 1k / 4k 21.85-22.50 / 95.95-96.06 against 21.83-23.71
// / 95.88-96.21 ms). A fourth block per SM adds no throughput, so a resource the blocks share
// binds, not their residency. The next paragraph says which: not the ~88 KB per block it moves
// through L2 (~1.9 TB/s at 4096 rows and 32 heads; L2 ran at 39 %, DRAM at 23 %). The form is
// kept outside the tree.
// What binds it (ncu, same day, 32 value heads at 4096 rows, clocks at base): the L1 / shared-
// memory data path at 78 % of its peak (issue slots 43 %, tensor pipe 17 %, DRAM 23 %), 14.6 M
// shared wavefronts (~7100 per block) with 2.2 M of them from bank conflicts. Counted per phase,
// the W / U products' T fragments (float2 loads of fp32 T at rows g, columns 2q) were the largest
// share, two-way conflicted at the 68-word pitch (offsets 4g + 2q); the decay epilogue reloaded
// γ and β for each element (its stores into A may alias them) and stored A a float at a time.
// Round 6 (2026-12-01, same bits; the GDN kernel test and the backend-op parity passed): T and A
// at a 72-word pitch (8g + 2q: conflict-free), γ / β in registers before the epilogue and A
// stored as float2, the diagonal substitution's A rows as float4. ncu: 12.7 M wavefronts, 0.63 M
// conflicts, L1 72 %, 122.9 -> 115.2 us; bench_cuda_kernels --gdn 16 (L2 flushed, two runs each,
// old and new in one call) 1024 / 4096 / 16384 rows 22.9-23.2 -> 22.0-22.1, 52.1-52.3 -> 50.0-50.1,
// 177.8-179.4 -> 167.0-168.0 us. Through the engine it is inside the noise (9B 1k / 4k 22.76-22.95
// / 97.61-98.95 against 23.79-24.06 / 97.39-98.26 ms, two rounds; the 1k prompt moved 21.8-23.8 ms
// between processes all session).
// Tried and dropped (2026-12-01, H200): the conv1d + SiLU + l2norm inside this prep (issue 18).
// `frost bench engine --leave-out conv1d+silu` put the conv's own launch at 0.19 ms of the 0.8B's
// 1k prompt, 0.5-0.8 of its 4k, 4.0 of its 16k and 3.65 of the 9B's 4k. Built twice, the same
// bits as conv1d_launch (a bitwise kernel test passed both times, and the backend-op and CUDA
// engine parity tests): each prep block read its chunk's raw q / k / v rows by cp.async, its
// warps convolved rows 8w .. 8w+7 of the three heads in place with conv1d_vec_kernel's row
// functions (the three rows before them from global memory or the conv state), wrote k and q for
// the state pass, and the wgmma state pass shifted the conv state. Engine, FROST_GDN_CONV_FUSE
// 0 -> 1 alternating (ms): every grid, halos per head inside the conv phase: 0.8B 1k 3.34 / 3.36
// -> 3.32 / 3.32, 4k 10.88 / 10.60 -> 10.68 / 10.79, 16k 53.38 / 53.45 -> 53.79 / 53.45, 9B 4k
// 96.01 -> 96.83, 16k 422.25 -> 425.18; grids of at most two blocks per SM only, halos loaded
// beside the copies, the three heads interleaved (128 registers, no spills), three rounds: 512
// rows 2.11-2.14 -> 2.19, 1k 3.34-3.36 -> 3.32-3.33. The conv is issue work (two SFU operations
// per element for SiLU, a shuffle tree per row for the l2norm) wherever it runs: in its own launch
// it has every SM's 20 warps, inside the prep it runs on the block's 8 warps ahead of the prep's
// own phases, so the block's path grows by about what the launch cost; GQA (the 9B) convolves q
// and k twice. What fusing saves is the launch gap and y's round trip, ~1-2 us a layer at 1k.
// The form is kept outside the tree.
// Fragment layouts (PTX ISA, m16n8k16 .bf16), g = lane / 4, q = lane % 4, pairs of bf16 per
// register, the lower index in the low half: A 16x16 row-major: a0 (g, 2q..2q+1), a1 (g+8, 2q..),
// a2 (g, 2q+8..), a3 (g+8, 2q+8..); B 16x8: b0 (k 2q..2q+1, n g), b1 (k 2q+8.., n g);
// C 16x8: c0 c1 (g, 2q..2q+1), c2 c3 (g+8, 2q..2q+1).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gdn_bf16.cuh"
#include "kernels/cuda/lm_kernels.h"
#include "util/env.h"

namespace frost::kernels::gdn {
namespace {
using namespace lm;
static_assert(kC == kGdnChunk && kD == kGdnHeadDim, "one chunk grid for every path");

constexpr int kSlice = 32;  // dv columns per state-pass block: 4 blocks per head (lm_gdn_bf16_narrow.cu: 16)
constexpr int kPS = kSlice + 8;
// fp32 A and T rows: float4-aligned, and ≡ 8 mod 32 words, so the W / U products' float2 loads of
// T (rows g, columns 2q: offsets 8g + 2q) hit 16 distinct bank pairs per half-warp; at 68 (≡ 4)
// they met two ways (see the header's round 6).
constexpr int kSolvePitch = kC + 8;

// ---- 1. prep -------------------------------------------------------------------------------
// The UT solve as T = (I+A)⁻¹ once per chunk, blocked by 16 (fp32 on CUDA cores: the diagonal
// blocks by substitution, the rest as T_ij = −T_ii Σ_{j≤k<i} A_ik T_kj by block diagonals), then
// W = (T diag(β e^γ)) K and U = (T diag(β)) V on tensor cores. K and V are bf16 and exact as
// operands; the fp32 T' = T diag(·) enters as two bf16 terms hi + lo (hi = bf16(T'), lo =
// bf16(T' − hi)), built straight into A fragments, so W and U keep ~16 bits before their own
// rounding to bf16 for storage. Shared memory is reused phase by phase (72 KB: 3 blocks per SM)
// and W, U, P leave through shared memory as 16-byte stores.

constexpr int kBlk = 16;          // solve block
constexpr int kNBlk = kC / kBlk;  // 4

struct PrepSmem {
    union {
        bf16 k[kC][kPW];  // K: A, P and W operand
        bf16 p_out[kC][kPP];  // P staged for the store, after the W product
    } u0;
    bf16 v[kC][kPW];
    union {
        bf16 q[kC][kPW];            // Q, until A and P are formed
        float t[kC][kSolvePitch];   // then T = (I+A)⁻¹ (unit lower triangular by 16-blocks)
        bf16 u_out[kC][kPW];        // U staged for the store, after both products
    } u1;
    union {
        float a[kC][kSolvePitch];  // A, strictly lower
        bf16 w_out[kC][kPW];       // W staged for the store, after the solve
    } u2;
    union {
        float y[3][kBlk][kBlk + 1];            // Σ A_ik T_kj of up to three blocks of one block diagonal
        alignas(16) float y4[3][kBlk][kBlk];  // the same for the blocked solve (rows of float4)
    } ys;
    float g[kC];
    alignas(16) float gamma[kC];  // (read as float2)
    float beta[kC];
    float w_scale[kC];  // β e^γ
};

static_assert(3 * (sizeof(PrepSmem) + 1024) <= 228 * 1024, "3 prep blocks per SM (__launch_bounds__ below)");

// hi + lo A fragments of T diag(scale), rows m0.., columns k0.. (k0 ≤ m0: inside the lower blocks).
__device__ inline void t_frags(uint32_t (&hi)[4], uint32_t (&lo)[4], const PrepSmem& sm, const float* scale, int m0,
                               int k0, int g, int q) {
#pragma unroll
    for (int x = 0; x < 4; ++x) {
        const int r = m0 + g + 8 * (x & 1), c = k0 + 2 * q + 8 * (x >> 1);
        const float2 tv = *reinterpret_cast<const float2*>(&sm.u1.t[r][c]);
        const float e0 = tv.x * scale[c], e1 = tv.y * scale[c + 1];
        const __nv_bfloat162 h = __floats2bfloat162_rn(e0, e1);
        const float2 hf = __bfloat1622float2(h);
        hi[x] = *reinterpret_cast<const uint32_t*>(&h);
        lo[x] = pack_bf16(e0 - hf.x, e1 - hf.y);
    }
}

// acc = T diag(scale) [rows m0 .. m0+15] · X[:, n0 .. n0+63]; blocks right of the diagonal are zero.
__device__ inline void tile_product(float (&acc)[8][4], const PrepSmem& sm, const float* scale, const bf16* x, int m0,
                                    int n0, int g, int q, int lane) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
    for (int k0 = 0; k0 <= m0; k0 += 16) {
        uint32_t ah[4], al[4];
        t_frags(ah, al, sm, scale, m0, k0, g, q);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            uint32_t b[4];
            load_b2_t<kPW>(b, x, k0, n0 + 8 * j, lane);
            mma_bf16(acc[j], ah, b[0], b[1]);
            mma_bf16(acc[j + 1], ah, b[2], b[3]);
            mma_bf16(acc[j], al, b[0], b[1]);
            mma_bf16(acc[j + 1], al, b[2], b[3]);
        }
    }
}

template <int P>
__device__ inline void stage_tile(bf16 (*out)[P], const float (&acc)[8][4], int m0, int n0, int g, int q) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi)
            *reinterpret_cast<uint32_t*>(&out[m0 + g + 8 * hi][n0 + 8 * j + 2 * q]) =
                pack_bf16(acc[j][2 * hi], acc[j][2 * hi + 1]);
}

// The W / U products with the work balanced over the warps: in tile_product the warps of the last
// row block run four k-steps and those of the first one, so the launch waits on the slowest pair
// of warps. Here warp w takes 32 columns (n0) of two row blocks, lo = w / 4 (0 or 1) and
// hi = 3 − lo: five k-steps for every warp, the B fragments of a k-step loaded once for both
// blocks. Each accumulator sums the same products in the same order (k-step ascending, the hi
// term before the lo term), so the bits are tile_product's.
__device__ inline int pair_block(int lo, int b) { return b ? kNBlk - 1 - lo : lo; }

__device__ inline void tile_product_pair(float (&acc)[2][4][4], const PrepSmem& sm, const float* scale, const bf16* x,
                                         int lo, int n0, int g, int q, int lane) {
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[b][j][e] = 0.0f;
    const int hi = kNBlk - 1 - lo;
    for (int kb = 0; kb <= hi; ++kb) {
        uint32_t bf[2][4];
        load_b2_t<kPW>(bf[0], x, kBlk * kb, n0, lane);
        load_b2_t<kPW>(bf[1], x, kBlk * kb, n0 + 16, lane);
#pragma unroll
        for (int b = 1; b >= 0; --b) {
            if (b == 0 && kb > lo) continue;  // right of the lo block's diagonal: T is zero
            uint32_t ah[4], al[4];
            t_frags(ah, al, sm, scale, kBlk * pair_block(lo, b), kBlk * kb, g, q);
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                mma_bf16(acc[b][j], ah, bf[j / 2][0], bf[j / 2][1]);
                mma_bf16(acc[b][j + 1], ah, bf[j / 2][2], bf[j / 2][3]);
                mma_bf16(acc[b][j], al, bf[j / 2][0], bf[j / 2][1]);
                mma_bf16(acc[b][j + 1], al, bf[j / 2][2], bf[j / 2][3]);
            }
        }
    }
}

template <int P>
__device__ inline void stage_tile_pair(bf16 (*out)[P], const float (&acc)[2][4][4], int lo, int n0, int g, int q) {
#pragma unroll
    for (int b = 0; b < 2; ++b) {
        const int m0 = kBlk * pair_block(lo, b);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi)
                *reinterpret_cast<uint32_t*>(&out[m0 + g + 8 * hi][n0 + 8 * j + 2 * q]) =
                    pack_bf16(acc[b][j][2 * hi], acc[b][j][2 * hi + 1]);
    }
}

// Block diagonals d = 1, 2, 3 of T as in the kernel's unblocked form, four columns per thread:
// thread (r, c4) of block pair j (64 threads per pair, the pairs of a diagonal at once) keeps
// four accumulators, so each float4 of A's row and each float4 of a T row serves four FMAs (the
// unblocked form loads two operands per FMA: ~6x the shared loads). Every element sums the same
// products in the same order (kb, then m, ascending), so T's bits do not change.
__device__ inline void fma4(float (&acc)[4], float a, const float4& b) {
    acc[0] = __fmaf_rn(a, b.x, acc[0]);
    acc[1] = __fmaf_rn(a, b.y, acc[1]);
    acc[2] = __fmaf_rn(a, b.z, acc[2]);
    acc[3] = __fmaf_rn(a, b.w, acc[3]);
}

// acc[x] += Σ_m a_row[m] b[m][x] over m = 0..15 in order: a_row a 16-float row, b four columns of
// 16 rows with pitch `pitch` floats (both float4-aligned).
__device__ inline void row_times_block4(float (&acc)[4], const float* a_row, const float* b, int pitch) {
#pragma unroll
    for (int m0 = 0; m0 < kBlk; m0 += 4) {
        const float4 a = *reinterpret_cast<const float4*>(a_row + m0);
        const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int mm = 0; mm < 4; ++mm) fma4(acc, av[mm], *reinterpret_cast<const float4*>(b + (m0 + mm) * pitch));
    }
}

__device__ inline void solve_block_diagonals(PrepSmem& sm, int t) {
    const int j = t / (kBlk * kBlk / 4), r = (t / 4) % kBlk, c4 = 4 * (t % 4);
#pragma unroll
    for (int d = 1; d < kNBlk; ++d) {
        const int i = j + d;
        const bool mine = j < kNBlk - d;
        if (mine) {  // Y_j = Σ_{j ≤ kb < i} A_i,kb T_kb,j
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int e = 0; e < d; ++e) {
                const int kb = j + e;
                row_times_block4(acc, &sm.u2.a[kBlk * i + r][kBlk * kb], &sm.u1.t[kBlk * kb][kBlk * j + c4],
                                 kSolvePitch);
            }
            *reinterpret_cast<float4*>(&sm.ys.y4[j][r][c4]) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        }
        __syncthreads();
        if (mine) {  // T_ij = −T_ii Y_j
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            row_times_block4(acc, &sm.u1.t[kBlk * i + r][kBlk * i], &sm.ys.y4[j][0][c4], kBlk);
            *reinterpret_cast<float4*>(&sm.u1.t[kBlk * i + r][kBlk * j + c4]) =
                make_float4(-acc[0], -acc[1], -acc[2], -acc[3]);
        }
        __syncthreads();  // (last round: T is complete and A is dead)
    }
}

// Rows of `cols` bf16 from shared memory (pitch P) to global (pitch cols), 16 bytes per thread.
template <int P, int kCols>
__device__ inline void copy_out(bf16* dst, const bf16 (*src)[P]) {
    constexpr int kVecs = kCols / kVec;
    for (int e = threadIdx.x; e < kC * kVecs; e += kThreads) {
        const int r = e / kVecs, d = (e % kVecs) * kVec;
        *reinterpret_cast<uint4*>(dst + r * kCols + d) = *reinterpret_cast<const uint4*>(&src[r][d]);
    }
}

// kFast (the default; false is v1, before round 2): fragments by ldmatrix (load_a_ldsm,
// load_bt2) instead of 32-bit loads, same registers; the block diagonals of the solve four columns
// per thread and the W / U products balanced over the warps (solve_block_diagonals,
// tile_product_pair; round 5). Same bits either way.
// kPerSm: the blocks per SM its launch allows (3, or 2 / 1 with padded shared memory:
// prep_per_sm); the body does not depend on it, each value is its own function so that each
// keeps its own shared-memory limit, and its own register cap: three blocks an SM cap it at 80
// registers, where ptxas spills 24 bytes; one or two leave it 113-114 and no spills (the same
// bits). Measured flat (H200, 2026-12-02, fifty-second session, against the cap of 3 for every
// variant, two rounds alternating in one call): `bench_ops --preset 0.8b --rows 1024` gdn_chunk
// 771-772 -> 766-769 us over 18 layers, 0.8B cold TTFT 512 / 1024 2.11-2.12 / 3.31-3.32 ->
// 2.11-2.13 / 3.29-3.32 ms. Only short prompts launch them (two blocks an SM or fewer).
template <bool kFast, int kPerSm>
__global__ void __launch_bounds__(kThreads, kPerSm) gdn_bf16_prep_kernel(GdnBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    PrepSmem& sm = *reinterpret_cast<PrepSmem*>(smem_raw);
    // The wgmma state pass (launched programmatically, lm_gdn_wgmma.cu) may start once every prep
    // block has: it then takes SMs as the last prep blocks leave and loads its state before its
    // wait (its wait covers this whole launch, this launch's own wait included).
    pdl_launch_dependents();
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int c = blockIdx.x, h = blockIdx.y;
    int start, len;
    if (!chunk_range(c, p.cursor->pos, rows, start, len)) {
        pdl_wait();  // (pdl_wait's contract: no block completes before the predecessor)
        return;
    }
    const int kh = h / (p.Hv / p.Hk);
    const int t = threadIdx.x;
    const int warp = t / kWarp, lane = t % kWarp, g = lane / 4, q = lane % 4;

    // K, Q, V by cp.async: all twelve 16-byte copies of a thread in flight at once (rows past len
    // zero-filled from a valid address). As plain loads each of the four rounds waited for its
    // loads before its stores: four L2 round trips in a row, a fifth for g and β (ncu, 0.8B shape
    // at 1024 rows: 20 % of the kernel's stall samples on those stores). H200, bench_cuda_kernels
    // --gdn 16, 1024 rows: prep 24.1-24.4 -> 23.4-23.7 us (two calls). The rest of this kernel's
    // time at that size (same ncu run: 22.6 us, 0.69 waves, 0.31 issued per scheduler and cycle):
    // the block-diagonal solve below, 26 % of the samples, MIO-throttled on its one shared load per
    // FMA (the row operand already loads as LDS.128), and the A / P decay expf, 8 %.
    // This launch may be programmatic after the conv (launch_prep): the cursor and the raw gate
    // projections b / a (the in_proj GEMM's output, complete before the conv began) are read
    // before the wait; q, k, v (the conv's output) and gates from a separate gate launch after it.
    const auto read_gates = [&] {
        if (t < kC) {
            float beta = 0.0f, g = 0.0f;
            if (t < len) gdn_row_gates(p, start + t, h, beta, g);
            sm.g[t] = g;
            sm.beta[t] = beta;
        }
    };
    if (p.gate_b) read_gates();
    pdl_wait();
    if (!p.gate_b) read_gates();
    constexpr int kRowVecs = kD / kVec;  // 16-byte vectors per row of 128
    static_assert(kC * kRowVecs % kThreads == 0, "whole load rounds");
#pragma unroll
    for (int it = 0; it < kC * kRowVecs / kThreads; ++it) {
        const int e = t + it * kThreads;
        const int r = e / kRowVecs, d = (e % kRowVecs) * kVec;
        const bool in = r < len;
        const int64_t row = static_cast<int64_t>(start + (in ? r : 0)) * p.qkv_row_stride;
        const int bytes = in ? 16 : 0;
        cp_async16(&sm.u0.k[r][d], p.k + row + kh * kD + d, bytes);
        cp_async16(&sm.u1.q[r][d], p.q + row + kh * kD + d, bytes);
        cp_async16(&sm.v[r][d], p.v + row + h * kD + d, bytes);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if (t == 0) {  // sequential cumsum: one fixed order (γ is constant past len: g is zero there)
        float acc = 0.0f;
#pragma unroll
        for (int r = 0; r < kC; ++r) {
            acc += sm.g[r];
            sm.gamma[r] = acc;
        }
    }
    __syncthreads();
    if (t < kC) sm.w_scale[t] = sm.beta[t] * expf(sm.gamma[t]);

    // K Kᵀ and Q Kᵀ: warp w owns rows 16 (w/2), columns 32 (w%2) .. +31 as four m16n8 tiles. P
    // stays in registers (bf16 pairs) until the staged store at the end.
    float* slot = p.work + (static_cast<int64_t>(c) * p.Hv + h) * kBf16SlotFloats;
    constexpr int kTiles = 4;
    const int pm0 = 16 * (warp / 2), pn0 = kTiles * 8 * (warp % 2);
    uint32_t pk[kTiles][2];
    {
        float kk[kTiles][4] = {}, qk[kTiles][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < kD; k0 += 16) {
            uint32_t ka[4], qa[4];
            if constexpr (kFast) {
                load_a_ldsm<kPW>(ka, &sm.u0.k[0][0], pm0, k0, lane);
                load_a_ldsm<kPW>(qa, &sm.u1.q[0][0], pm0, k0, lane);
#pragma unroll
                for (int j = 0; j < kTiles; j += 2) {
                    uint32_t b[4];
                    load_bt2<kPW>(b, &sm.u0.k[0][0], pn0 + 8 * j, k0, lane);
                    mma_bf16(kk[j], ka, b[0], b[1]);
                    mma_bf16(qk[j], qa, b[0], b[1]);
                    mma_bf16(kk[j + 1], ka, b[2], b[3]);
                    mma_bf16(qk[j + 1], qa, b[2], b[3]);
                }
            } else {
                load_a<kPW>(ka, &sm.u0.k[0][0], pm0, k0, g, q);
                load_a<kPW>(qa, &sm.u1.q[0][0], pm0, k0, g, q);
#pragma unroll
                for (int j = 0; j < kTiles; ++j) {
                    const int n = pn0 + 8 * j + g;  // Kᵀ as B: B[k][n] = K[n][k], pairs along k
                    const uint32_t b0 = ld32(&sm.u0.k[n][k0 + 2 * q]), b1 = ld32(&sm.u0.k[n][k0 + 2 * q + 8]);
                    mma_bf16(kk[j], ka, b0, b1);
                    mma_bf16(qk[j], qa, b0, b1);
                }
            }
        }
        // The rows' γ and β and the columns' γ into registers first: read between the stores into
        // A, they were loaded again for every element (the stores may alias them).
        float gam_i[2], beta_i[2], gam_j[kTiles][2];
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            gam_i[hi] = sm.gamma[pm0 + g + 8 * hi];
            beta_i[hi] = sm.beta[pm0 + g + 8 * hi];
        }
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            const float2 gj = *reinterpret_cast<const float2*>(&sm.gamma[pn0 + 8 * j + 2 * q]);
            gam_j[j][0] = gj.x, gam_j[j][1] = gj.y;
        }
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int i = pm0 + g + 8 * hi, j0 = pn0 + 8 * j + 2 * q;
                float av[2], pv[2];
#pragma unroll
                for (int x = 0; x < 2; ++x) {
                    const int jj = j0 + x;
                    const float decay = i >= jj ? expf(gam_i[hi] - gam_j[j][x]) : 0.0f;
                    av[x] = i > jj ? beta_i[hi] * kk[j][2 * hi + x] * decay : 0.0f;
                    pv[x] = qk[j][2 * hi + x] * decay;
                }
                *reinterpret_cast<float2*>(&sm.u2.a[i][j0]) = make_float2(av[0], av[1]);
                pk[j][hi] = pack_bf16(pv[0], pv[1]);
            }
    }
    if (t < kC) slot[kBf16GammaOff + t] = sm.gamma[t];
    __syncthreads();  // A is complete; Q is dead (its space becomes T)

    // Diagonal blocks of T by substitution: thread (block b, column cc), 16 rows in registers.
    if (t < kC) {
        const int b0 = kBlk * (t / kBlk), cc = t % kBlk;
        float x[kBlk];
#pragma unroll
        for (int r = 0; r < kBlk; ++r) {
            float arow[kBlk];  // row b0 + r of the block, as float4 loads (one per 4 entries used)
#pragma unroll
            for (int m4 = 0; m4 < (r + 3) / 4; ++m4) {
                const float4 v4 = *reinterpret_cast<const float4*>(&sm.u2.a[b0 + r][b0 + 4 * m4]);
                arow[4 * m4] = v4.x, arow[4 * m4 + 1] = v4.y, arow[4 * m4 + 2] = v4.z, arow[4 * m4 + 3] = v4.w;
            }
            float v = r == cc ? 1.0f : 0.0f;
#pragma unroll
            for (int m = 0; m < r; ++m) v -= arow[m] * x[m];
            x[r] = v;
        }
#pragma unroll
        for (int r = 0; r < kBlk; ++r) sm.u1.t[b0 + r][b0 + cc] = x[r];
    }
    __syncthreads();
    // Block diagonals d = 1, 2, 3: Y = Σ_{j≤k<i} A_ik T_kj, then T_ij = −T_ii Y (block indices).
    // One element of a 16x16 block per thread, block pair j per round: every loop below has a
    // constant trip count and every index is a constant plus (r, cc), so it unrolls into straight
    // loads and FMAs (the looped form was a third of the kernel's instructions).
    static_assert(kBlk * kBlk == kThreads, "one element of a 16x16 block per thread");
    if constexpr (kFast) {
        solve_block_diagonals(sm, t);
    } else {
        const int r = t / kBlk, cc = t % kBlk;
#pragma unroll
        for (int d = 1; d < kNBlk; ++d) {
#pragma unroll
            for (int j = 0; j < kNBlk - d; ++j) {  // (i, j) = (j + d, j)
                const int i = j + d;
                float acc = 0.0f;
#pragma unroll
                for (int kb = j; kb < i; ++kb)
#pragma unroll
                    for (int m = 0; m < kBlk; ++m)
                        acc = __fmaf_rn(sm.u2.a[kBlk * i + r][kBlk * kb + m], sm.u1.t[kBlk * kb + m][kBlk * j + cc],
                                        acc);
                sm.ys.y[j][r][cc] = acc;
            }
            __syncthreads();
#pragma unroll
            for (int j = 0; j < kNBlk - d; ++j) {
                const int i = j + d;
                float acc = 0.0f;
#pragma unroll
                for (int m = 0; m < kBlk; ++m)
                    acc = __fmaf_rn(sm.u1.t[kBlk * i + r][kBlk * i + m], sm.ys.y[j][m][cc], acc);
                sm.u1.t[kBlk * i + r][kBlk * j + cc] = -acc;
            }
            __syncthreads();  // (last round: T is complete and A is dead)
        }
    }
    // W = T diag(β e^γ) K, then U = T diag(β) V: warp w owns rows 16 (w/2), columns 64 (w%2) .. +63
    // (kFast: 32 columns 32 (w%4) .. of row blocks w/4 and 3 − w/4).
    if constexpr (kFast) {
        const int lo = warp / 4, n0 = 32 * (warp % 4);
        float acc[2][4][4];
        tile_product_pair(acc, sm, sm.w_scale, &sm.u0.k[0][0], lo, n0, g, q, lane);
        stage_tile_pair<kPW>(sm.u2.w_out, acc, lo, n0, g, q);
        tile_product_pair(acc, sm, sm.beta, &sm.v[0][0], lo, n0, g, q, lane);
        __syncthreads();  // every read of T and K is done
        stage_tile_pair<kPW>(sm.u1.u_out, acc, lo, n0, g, q);
    } else {
        const int m0 = 16 * (warp / 2), n0 = 64 * (warp % 2);
        float acc[8][4];
        tile_product(acc, sm, sm.w_scale, &sm.u0.k[0][0], m0, n0, g, q, lane);
        stage_tile<kPW>(sm.u2.w_out, acc, m0, n0, g, q);
        tile_product(acc, sm, sm.beta, &sm.v[0][0], m0, n0, g, q, lane);
        __syncthreads();  // every read of T and K is done
        stage_tile<kPW>(sm.u1.u_out, acc, m0, n0, g, q);
    }
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi)
            *reinterpret_cast<uint32_t*>(&sm.u0.p_out[pm0 + g + 8 * hi][pn0 + 8 * j + 2 * q]) = pk[j][hi];
    __syncthreads();
    copy_out<kPW, kD>(reinterpret_cast<bf16*>(slot + kBf16WOff), sm.u2.w_out);
    copy_out<kPW, kD>(reinterpret_cast<bf16*>(slot + kBf16UOff), sm.u1.u_out);
    copy_out<kPP, kC>(reinterpret_cast<bf16*>(slot + kBf16POff), sm.u0.p_out);
}

// ---- 2. state pass + output -----------------------------------------------------------------

struct StageBuf {
    bf16 w[kC][kPW];
    bf16 k[kC][kPW];
    bf16 q[kC][kPW];
    bf16 u[kC][kPS];  // this block's U slice
    bf16 p[kC][kPP];
    float gamma[kC];
};
// Three stages: chunk c + 2 is in flight while c computes, so two chunk times hide the loads
// (W, U, P written by the prep long before: mostly from DRAM; 60 KB per block per chunk).
constexpr int kStages = 3;
struct StateSmem {
    StageBuf buf[kStages];
    bf16 s[kD][kPS];    // S₀ slice, bf16: the B operand of W S₀ and Q S₀
    bf16 vp[kC][kPS];   // V'
    bf16 vd[kC][kPS];   // e^{γ_L−γ} ⊙ V'
    uint64_t full[kStages];  // cluster mode: the multicast rows of a buffer have landed
};

// ---- Bulk mode (kCl = 1, 2, 4): the operands every slice block of a head needs (W, K, Q, P:
// 56 of the 60 KB per chunk) arrive as one bulk copy per row (cp.async.bulk, completion counted
// in bytes on the block's mbarrier) instead of 16-byte cp.async: a quarter of the issue work. With
// kCl = 2 or 4 the slice blocks of a head form a thread-block cluster; each fetches 1/kCl of the
// rows and multicasts them into every block of the cluster, so L2 delivers each shared byte kCl
// times less often. kCl = 0 is the plain cp.async mode.
constexpr int kMaxCluster = kD / kSlice;  // 4

// Hopper-only instructions; the portable compute_80 PTX of this file gets empty bodies (the
// launcher never picks cluster mode on a device without cluster launch).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GDN_SM90(...) __VA_ARGS__
#else
#define GDN_SM90(...)
#endif
__device__ inline uint32_t cluster_rank() {
    uint32_t r = 0;
    GDN_SM90(asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));)
    return r;
}
__device__ inline void cluster_arrive() {
    GDN_SM90(asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");)
}
__device__ inline void cluster_wait() {
    GDN_SM90(asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");)
}
__device__ inline void cluster_fences() {
    GDN_SM90(asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");)
}
__device__ inline void mbar_init(uint64_t* bar, uint32_t count) {
    GDN_SM90(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");)
}
__device__ inline void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    GDN_SM90(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                          : "memory");)
}
__device__ inline void mbar_wait(uint64_t* bar, uint32_t parity) {
    GDN_SM90(uint32_t done = 0; while (!done) asm volatile(
                 "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");)
}
// bytes from global src into dst of every block in mask (same offsets), completing on bar there.
__device__ inline void bulk_multicast(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint16_t mask) {
    GDN_SM90(asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
                          "[%1], %2, [%3], %4;\n" ::"r"(smem_addr(dst)),
                          "l"(src), "r"(bytes), "r"(smem_addr(bar)), "h"(mask)
                          : "memory");)
}

// Bytes each cluster block receives per chunk: every row of W and P, the valid rows of K and Q.
__device__ inline uint32_t shared_bytes(int len) {
    return static_cast<uint32_t>(kC * (kD + kC) * sizeof(bf16) + len * 2 * kD * sizeof(bf16));
}

// One row into this block's shared memory (kCl = 1) or into every block of the cluster.
template <int kCl>
__device__ inline void bulk_row(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    if constexpr (kCl == 1) {
        GDN_SM90(asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                              "[%0], [%1], %2, [%3];\n" ::"r"(smem_addr(dst)),
                              "l"(src), "r"(bytes), "r"(smem_addr(bar))
                              : "memory");)
    } else {
        bulk_multicast(dst, src, bytes, bar, static_cast<uint16_t>((1u << kCl) - 1));
    }
}

// This block's share of the rows of W, K, Q, P of chunk c (rows 64/kCl rank .. +64/kCl-1; one
// row of one operand per thread); thread 0 first announces the bytes its own buffer will receive.
template <int kCl>
__device__ inline void bulk_chunk(StageBuf& b, uint64_t* bar, const GdnBf16Params& p, const float* slot, int start,
                                  int len, int kh, uint32_t rank) {
    constexpr int kRowsPer = kC / kCl;
    static_assert(4 * kRowsPer <= kThreads, "one row per thread");
    const int t = threadIdx.x;
    if (t == 0) mbar_arrive_expect_tx(bar, shared_bytes(len));
    if (t >= 4 * kRowsPer) return;
    const int which = t / kRowsPer, r = kRowsPer * static_cast<int>(rank) + t % kRowsPer;
    constexpr uint32_t kRow = kD * sizeof(bf16);
    if (which == 0) {
        bulk_row<kCl>(&b.w[r][0], reinterpret_cast<const bf16*>(slot + kBf16WOff) + r * kD, kRow, bar);
    } else if (which == 3) {
        bulk_row<kCl>(&b.p[r][0], reinterpret_cast<const bf16*>(slot + kBf16POff) + r * kC, kC * sizeof(bf16), bar);
    } else if (r < len) {  // rows past len keep finite stale values: V' is exactly zero there
        const bf16* src = (which == 1 ? p.k : p.q) + static_cast<int64_t>(start + r) * p.qkv_row_stride + kh * kD;
        bulk_row<kCl>(which == 1 ? &b.k[r][0] : &b.q[r][0], src, kRow, bar);
    }
}

// The block's own U slice and γ (cp.async, one commit group per chunk).
__device__ inline void prefetch_own(StageBuf& b, const float* slot, int j0) {
    constexpr int kSliceVecs = kSlice / kVec;
    const bf16* u = reinterpret_cast<const bf16*>(slot + kBf16UOff);
    for (int e = threadIdx.x; e < kC * kSliceVecs; e += kThreads) {
        const int r = e / kSliceVecs, d = (e % kSliceVecs) * kVec;
        cp_async16(&b.u[r][d], u + r * kD + j0 + d);
    }
    if (threadIdx.x < kC / 4) cp_async16(&b.gamma[4 * threadIdx.x], slot + kBf16GammaOff + 4 * threadIdx.x);
}

// Chunk c's operands into a staging buffer; K and Q rows past len are zero-filled (never read).
// kT: the block's threads.
template <int kT = kThreads>
__device__ inline void prefetch(StageBuf& b, const GdnBf16Params& p, const float* slot, int start, int len, int kh,
                                int j0) {
    constexpr int kRowVecs = kD / kVec, kSliceVecs = kSlice / kVec, kPVecs = kC / kVec;
    const bf16* w = reinterpret_cast<const bf16*>(slot + kBf16WOff);
    const bf16* u = reinterpret_cast<const bf16*>(slot + kBf16UOff);
    const bf16* pm = reinterpret_cast<const bf16*>(slot + kBf16POff);
    for (int e = threadIdx.x; e < kC * kRowVecs; e += kT) {
        const int r = e / kRowVecs, d = (e % kRowVecs) * kVec;
        cp_async16(&b.w[r][d], w + r * kD + d);
        const bool in = r < len;
        const int64_t row = static_cast<int64_t>(in ? start + r : start) * p.qkv_row_stride + kh * kD + d;
        cp_async16(&b.k[r][d], p.k + row, in ? 16 : 0);
        cp_async16(&b.q[r][d], p.q + row, in ? 16 : 0);
    }
    for (int e = threadIdx.x; e < kC * kSliceVecs; e += kT) {
        const int r = e / kSliceVecs, d = (e % kSliceVecs) * kVec;
        cp_async16(&b.u[r][d], u + r * kD + j0 + d);
    }
    for (int e = threadIdx.x; e < kC * kPVecs; e += kT) {
        const int r = e / kPVecs, d = (e % kPVecs) * kVec;
        cp_async16(&b.p[r][d], pm + r * kC + d);
    }
    if (threadIdx.x < kC / 4) cp_async16(&b.gamma[4 * threadIdx.x], slot + kBf16GammaOff + 4 * threadIdx.x);
}

// prefetch() with every trip count a constant (one 256-thread block: 4 rounds of W, K, Q rows, one
// of the U slice, two of P), so each thread's offsets are computed once per chunk and the copies
// unroll: the looped form's 64-bit index arithmetic was most of the state pass's instructions.
// Round 3 tried rows of 64 contiguous bytes per lane group (every source one row pointer plus a
// constant: a fifth of the address instructions): slower on the H100 (9B shape, 16384 rows: state
// 598-610 against 537-569 µs; 8 rows per warp instruction instead of 2), so this form stays.
__device__ inline void prefetch_fast(StageBuf& b, const GdnBf16Params& p, const float* slot, int start, int len,
                                     int kh, int j0) {
    constexpr int kSliceVecs = kSlice / kVec;
    static_assert(kC * kSliceVecs == kThreads, "one round of the U slice");
    const int t = threadIdx.x;
    prefetch_wkq(b, p, slot, start, len, kh);
    {
        const int r = t / kSliceVecs, dd = (t % kSliceVecs) * kVec;
        cp_async16(&b.u[r][dd], reinterpret_cast<const bf16*>(slot + kBf16UOff) + r * kD + j0 + dd);
    }
    prefetch_p(b, slot);
    if (t < kC / 4) cp_async16(&b.gamma[4 * t], slot + kBf16GammaOff + 4 * t);
}

// Block (value head, 32-column dv slice), 8 warps. Warp w: V', X and O tiles rows 16 (w/2),
// columns 16 (w%2) .. +15 of the slice (two n-tiles); S rows 16 w .. +15, all 32 columns (four
// n-tiles) as fp32 accumulators for the whole pass. kCl: the copy mode above (kCl >= 2: launched
// as clusters of kCl slices of a head along grid y).
// kFast (cp.async mode only): prefetch_fast and ldmatrix A fragments; the same bytes, registers
// and products as kFast = false.
template <int kCl, bool kFast = false>
__global__ void __launch_bounds__(kThreads) gdn_bf16_state_kernel(GdnBf16Params p) {
    static_assert(!kFast || kCl == 0, "the fast copies are the cp.async mode's");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    StateSmem& sm = *reinterpret_cast<StateSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int h = blockIdx.x, j0 = blockIdx.y * kSlice;
    const int kh = h / (p.Hv / p.Hk);
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int g = lane / 4, q = lane % 4;
    const int m0 = 16 * (warp / 2), nb = 16 * (warp % 2);  // V' / O tile
    const int ms = 16 * warp;                              // S rows
    float* state = p.state + static_cast<int64_t>(h) * kD * kD;

    float s[4][4];
    load_state_slice(s, state, sm.s, ms, g, q, j0);
    int chunks = 0;
    for (int st, ln; chunks < max_chunks(rows) && chunk_range(chunks, pos, rows, st, ln);) ++chunks;
    auto slot_of = [&](int c) { return p.work + (static_cast<int64_t>(c) * p.Hv + h) * kBf16SlotFloats; };
    constexpr bool kBulk = kCl >= 1, kClustered = kCl >= 2;
    const uint32_t rank = kClustered ? cluster_rank() : 0;
    auto stage = [&](int c) {
        int st, ln;
        chunk_range(c, pos, rows, st, ln);
        if constexpr (kBulk) {
            bulk_chunk<kCl>(sm.buf[c % kStages], &sm.full[c % kStages], p, slot_of(c), st, ln, kh, rank);
            prefetch_own(sm.buf[c % kStages], slot_of(c), j0);
        } else if constexpr (kFast) {
            prefetch_fast(sm.buf[c % kStages], p, slot_of(c), st, ln, kh, j0);
        } else {
            prefetch(sm.buf[c % kStages], p, slot_of(c), st, ln, kh, j0);
        }
    };
    if constexpr (kBulk) {
        // Stale rows past len must be finite (they meet zero rows of V'): zero every buffer once;
        // the barriers must be initialised in every block of the cluster before any copy lands.
        constexpr int kBufVecs = static_cast<int>(sizeof(StageBuf) * kStages / 16);
        for (int e = threadIdx.x; e < kBufVecs; e += kThreads)
            reinterpret_cast<uint4*>(&sm.buf[0])[e] = make_uint4(0, 0, 0, 0);
        if (threadIdx.x == 0)
            for (int i = 0; i < kStages; ++i) mbar_init(&sm.full[i], 1);
        cluster_fences();
        __syncthreads();
        if constexpr (kClustered) {
            cluster_arrive();
            cluster_wait();
        }
    }
#pragma unroll
    for (int c = 0; c < kStages - 1; ++c) {
        if (c < chunks) stage(c);
        cp_async_commit();
    }
    if constexpr (kClustered) cluster_arrive();  // "chunk -1 is done": pairs with the wait in chunk 0
    for (int c = 0; c < chunks; ++c) {
        if constexpr (!kBulk) {
            if (c + kStages - 1 < chunks) stage(c + kStages - 1);  // into the buffer chunk c - 1 used
            cp_async_commit();
            cp_async_wait<kStages - 1>();  // chunk c has landed
        } else {
            cp_async_wait<kStages - 2>();  // the own part of chunk c (the next one is issued mid-chunk)
            mbar_wait(&sm.full[c % kStages], static_cast<uint32_t>((c / kStages) & 1));
        }
        __syncthreads();  // chunk c is visible to every thread, and so is the previous S copy
        const StageBuf& b = sm.buf[c % kStages];
        int start, len;
        chunk_range(c, pos, rows, start, len);

        // V' = U − W S₀ and X = Q S₀ on this warp's two tiles (k over dk).
        float v[2][4] = {}, o[2][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < kD; k0 += 16) {
            uint32_t aw[4], aq[4], bs[4];
            if constexpr (kFast) {
                load_a_ldsm<kPW>(aw, &b.w[0][0], m0, k0, lane);
                load_a_ldsm<kPW>(aq, &b.q[0][0], m0, k0, lane);
            } else {
                load_a<kPW>(aw, &b.w[0][0], m0, k0, g, q);
                load_a<kPW>(aq, &b.q[0][0], m0, k0, g, q);
            }
            load_b2_t<kPS>(bs, &sm.s[0][0], k0, nb, lane);
            mma_bf16(v[0], aw, bs[0], bs[1]);
            mma_bf16(v[1], aw, bs[2], bs[3]);
            mma_bf16(o[0], aq, bs[0], bs[1]);
            mma_bf16(o[1], aq, bs[2], bs[3]);
        }
        const float gamma_last = b.gamma[len - 1];
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = m0 + g + 8 * hi;
            const float eg = expf(b.gamma[r]), tail = expf(gamma_last - b.gamma[r]);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int col = nb + 8 * j + 2 * q;
                const float2 uu = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b.u[r][col]));
                const float v0 = uu.x - v[j][2 * hi], v1 = uu.y - v[j][2 * hi + 1];
                *reinterpret_cast<uint32_t*>(&sm.vp[r][col]) = pack_bf16(v0, v1);
                *reinterpret_cast<uint32_t*>(&sm.vd[r][col]) = pack_bf16(v0 * tail, v1 * tail);
                o[j][2 * hi] *= eg;
                o[j][2 * hi + 1] *= eg;
            }
        }
        __syncthreads();  // V' is complete and every read of the S₀ copy is done
        if constexpr (kBulk) {
            // Every block of the cluster has finished chunk c - 1, whose buffer now takes c + 2
            // (one block: the barrier that ended chunk c - 1 says so).
            if constexpr (kClustered) cluster_wait();
            if (c + kStages - 1 < chunks) stage(c + kStages - 1);
            cp_async_commit();
        }

        // S = e^{γ_L} S₀ + Kᵀ (e^{γ_L−γ} ⊙ V') (k over the chunk's rows; rows past len are zero).
        const float decay = expf(gamma_last);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int x = 0; x < 4; ++x) s[j][x] *= decay;
#pragma unroll
        for (int k0 = 0; k0 < kC; k0 += 16) {
            uint32_t ak[4], b01[4], b23[4];
            load_at<kPW>(ak, &b.k[0][0], ms, k0, lane);
            load_b2_t<kPS>(b01, &sm.vd[0][0], k0, 0, lane);
            load_b2_t<kPS>(b23, &sm.vd[0][0], k0, 16, lane);
            mma_bf16(s[0], ak, b01[0], b01[1]);
            mma_bf16(s[1], ak, b01[2], b01[3]);
            mma_bf16(s[2], ak, b23[0], b23[1]);
            mma_bf16(s[3], ak, b23[2], b23[3]);
        }
        // O += P V' (P is zero above the diagonal: k-blocks past this tile's rows add nothing).
        for (int k0 = 0; k0 <= m0; k0 += 16) {
            uint32_t ap[4], bv[4];
            if constexpr (kFast)
                load_a_ldsm<kPP>(ap, &b.p[0][0], m0, k0, lane);
            else
                load_a<kPP>(ap, &b.p[0][0], m0, k0, g, q);
            load_b2_t<kPS>(bv, &sm.vp[0][0], k0, nb, lane);
            mma_bf16(o[0], ap, bv[0], bv[1]);
            mma_bf16(o[1], ap, bv[2], bv[3]);
        }
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = m0 + g + 8 * hi;
            if (r >= len) continue;
            bf16* out = p.o + (static_cast<int64_t>(start + r) * p.Hv + h) * kD + j0 + nb + 2 * q;
#pragma unroll
            for (int j = 0; j < 2; ++j)
                *reinterpret_cast<uint32_t*>(out + 8 * j) = pack_bf16(o[j][2 * hi], o[j][2 * hi + 1]);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi)
                *reinterpret_cast<uint32_t*>(&sm.s[ms + g + 8 * hi][8 * j + 2 * q]) =
                    pack_bf16(s[j][2 * hi], s[j][2 * hi + 1]);
        __syncthreads();  // this buffer is free for the prefetch of chunk c + 3; V' may be rewritten
        if constexpr (kClustered) cluster_arrive();
    }
    if constexpr (kClustered) cluster_wait();  // no block leaves while multicasts may target it
    store_state_slice(s, state, ms, g, q, j0);
}

template <int kCl>
cudaLaunchConfig_t state_config(const GdnBf16Params& p, cudaStream_t stream, cudaLaunchAttribute* attr) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = kCl;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(p.Hv, kD / kSlice);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = sizeof(StateSmem);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = kCl >= 2 ? 1 : 0;
    return cfg;
}

// Clusters of kCl state-pass blocks resident at once on this device (0 without cluster launch).
// Asked once per process and size: one GPU model.
template <int kCl>
int cluster_capacity() {
    static const int max_clusters = [] {
        int dev = 0, ok = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&ok, cudaDevAttrClusterLaunch, dev) != cudaSuccess || !ok)
            return 0;
        GdnBf16Params probe{};
        probe.Hv = 32;
        cudaLaunchAttribute attr[1];
        const cudaLaunchConfig_t cfg = state_config<kCl>(probe, nullptr, attr);
        if (cudaFuncSetAttribute(gdn_bf16_state_kernel<kCl>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(sizeof(StateSmem))) != cudaSuccess ||
            cudaOccupancyMaxActiveClusters(&n, gdn_bf16_state_kernel<kCl>, &cfg) != cudaSuccess)
            n = 0;
        cudaGetLastError();  // a refused query leaves no sticky error behind
        return n;
    }();
    return max_clusters;
}

// Every cluster resident at once (a second wave of clusters would double the sequential pass).
template <int kCl>
bool clusters_fit(int heads) {
    return cluster_capacity<kCl>() >= heads * (kMaxCluster / kCl);
}

template <int kCl, bool kFast = false>
cudaError_t launch_state(const GdnBf16Params& p, cudaStream_t stream) {
    cudaError_t err = cudaFuncSetAttribute(gdn_bf16_state_kernel<kCl, kFast>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(sizeof(StateSmem)));
    if (err != cudaSuccess) return err;
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = state_config<kCl>(p, stream, attr);
    return cudaLaunchKernelEx(&cfg, gdn_bf16_state_kernel<kCl, kFast>, p);
}

// FROST_GDN_PREFILL (read once per process), for A/B runs of one binary through the engine:
//  old  - the kernels as they were before round 2 (kFast = false here; the per-channel conv1d in
//         lm_conv1d.cu);
//  wide - the 32-column mma.sync state pass at every head count (round 2's default);
//  mma  - the mma.sync state passes where the wgmma one would run by default.
bool prefill_is(const char* mode) {
    static const std::string env = [] {
        const char* e = std::getenv("FROST_GDN_PREFILL");
        return std::string(e ? e : "");
    }();
    return env == mode;
}
bool prefill_old() { return prefill_is("old"); }
bool prefill_wide() { return prefill_is("wide"); }

// 16 dv columns per block when the Hv x 8 blocks of that width (one per SM) are all resident at
// once, so the sequential pass runs in one wave (a second wave would double it; H100: Hv <= 16).
bool narrow_fits(const GdnBf16Params& p) { return p.Hv * (kD / 16) <= lm::device_sm_count(); }

// The 16-column mma.sync state pass (cp.async mode of round 2 or later): forced by chunk_slice =
// 16, or by default where it fits (above).
bool use_narrow(const GdnBf16Params& p) {
    if (p.chunk_slice == 32) return false;
    return p.chunk_slice == 16 || (!prefill_wide() && narrow_fits(p));
}

// The wgmma state pass: forced by chunk_wgmma = 1; by default on sm_90a when every other state-pass
// switch is at its default (so each of them still selects the mma.sync pass it names).
bool use_wgmma(const GdnBf16Params& p) {
    if (p.chunk_wgmma != 0) return p.chunk_wgmma > 0;
    return p.chunk_cluster == 0 && p.chunk_slice == 0 && p.chunk_producer == 0 && !p.chunk_v1 && !prefill_old() &&
           !prefill_wide() && !prefill_is("mma") && lm::device_runs_sm90a();
}
// Its dv slice per block: 16 columns where the narrow pass fits (16 value heads: the 0.8B), else
// 32. Re-measured on the H200 (2026-11-30, `bench_cuda_kernels --gdn 16 32`, L2 flushed, state
// pass alone): Hv 16 at 2048 / 4096 / 16384 rows 35.6-36.0 / 65.6-65.8 / 242.6-243.8 us at 16
// columns against 44.3 / 83.4 / 316.7 at 32; Hv 32 at 2048 rows 45.6-45.7 at 32 against 68.2 at 16.
int wgmma_slice(const GdnBf16Params& p) {
    return p.chunk_slice == 16 || p.chunk_slice == 32 ? p.chunk_slice : narrow_fits(p) ? 16 : 32;
}

}  // namespace


// The prep's dynamic shared memory at `per` blocks per SM: its own layout at 3, else padded so
// that one block more (each with its 1 KB reservation) does not fit.
size_t prep_smem_at(int per) {
    if (per >= 3) return sizeof(PrepSmem);
    return std::max(sizeof(PrepSmem), static_cast<size_t>(device_smem_per_sm()) / static_cast<size_t>(per + 1) + 1024);
}
// Blocks per SM for a prep grid of `blocks` (a start at a multiple of 64: the launcher counts
// the aligned chunks): 3 where the grid fills three per SM, else ceil(blocks / SMs), by padding
// (the same kernel, so the same bits). A smaller grid was not spread evenly by the hardware: at
// 1024 rows and 16 value heads (256 blocks, the 0.8B's 1k prompt) all blocks enter at once, yet a
// block ran 10.4 us (shortest) to 15.1 us (median) against the launch's ~23 us, most likely those
// packed three to an SM, whose L1 / shared path binds (see the header), while other SMs idle.
// Measured (H200, 2026-12-01, bench_cuda_kernels --gdn 16, L2 flushed, two runs each, us, plain ->
// spread): 1024 rows 22.0-22.1 -> 18.2-18.3 (two per SM), 512 rows 17.1 -> 13.4-13.5 (one per
// SM); with the largest shared-memory carve-out forced on the spread launch 18.4-18.5, so the
// spread is what gains, not a larger L1. Forcing two per SM where the grid needs three is slower
// (2048 rows 30.0-30.2 -> 31.4-31.5; 32 heads at 1024 rows, two waves either way, 30.4-30.6 ->
// 30.8), hence the rule. Engine (0.8B, `frost bench engine --ttft 512,1024,2048 --reps 5`, two
// rounds alternating): 2.18-2.19 -> 2.11-2.12, 3.42 -> 3.34-3.36, 5.69-5.72 -> 5.69-5.70 ms.
// A first version counted the grid's extra chunk (17 x 16 = 272 blocks at 1024 rows, more than
// two per SM), so it never padded: measured flat, which is how the count was found.
// FROST_GDN_PREP_SPREAD=0 keeps the plain launch (A/B runs).
int prep_per_sm(int64_t blocks) {
    const int sms = device_sm_count();
    if (sms <= 0 || device_smem_per_sm() <= 0 || util::env_is("FROST_GDN_PREP_SPREAD", "0")) return 3;
    return static_cast<int>(std::clamp<int64_t>((blocks + sms - 1) / sms, 1, 3));
}

template <bool kFast, int kPerSm>
cudaError_t launch_prep(const GdnBf16Params& p, dim3 grid, cudaStream_t stream) {
    const size_t smem = prep_smem_at(kPerSm);
    auto kernel = gdn_bf16_prep_kernel<kFast, kPerSm>;
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
    // Programmatic after the conv (which triggers at its start): the blocks take SMs as the conv's
    // blocks leave and read the cursor and gates before the wait. FROST_GDN_PREP_PDL=0: plain.
    // Measured (H200, 2026-12-03, ab_env.sh, three rounds alternating, the state pass
    // programmatic in both, cold TTFT ms): 0.8B 512 / 1k / 2k 2.06-2.08 / 3.22-3.23 / 5.62-5.65
    // against 2.07-2.09 / 3.24-3.26 / 5.67 plain; 35B-A3B (20 layers) 4k 27.49-27.89 against
    // 27.48-28.33 (noise).
    static const bool pdl = device_runs_sm90a() && !util::env_is("FROST_GDN_PREP_PDL", "0");
    return launch_kernel(kernel, grid, dim3(kThreads), smem, stream, pdl, p);
}

cudaError_t chunk_bf16_launch_stages(const GdnBf16Params& p, cudaStream_t stream, int stages) {
    const bool fast = !p.chunk_v1 && !prefill_old();
    const dim3 prep_grid(max_chunks(p.max_rows), p.Hv);
    cudaError_t err = cudaSuccess;
    if (stages & kGdnStagePrep) {
        // The grid has a chunk more than a start at a multiple of 64 uses (its blocks return at
        // once): the spread counts the aligned chunks (an unaligned start's extra Hv blocks may
        // then wait for a free slot, about one block's time).
        const int64_t aligned_blocks = static_cast<int64_t>(prep_grid.x - 1) * prep_grid.y;
        if (!fast) err = launch_prep<false, 3>(p, prep_grid, stream);
        else switch (prep_per_sm(aligned_blocks)) {
                case 1: err = launch_prep<true, 1>(p, prep_grid, stream); break;
                case 2: err = launch_prep<true, 2>(p, prep_grid, stream); break;
                default: err = launch_prep<true, 3>(p, prep_grid, stream); break;
            }
        if (err != cudaSuccess) return err;
    }
    if (stages & (kGdnStageState | kGdnStageOut)) {
        // The largest requested cluster whose clusters all fit; bulk copies need sm_90.
        const int want = p.chunk_cluster;
        if (use_wgmma(p))
            err = chunk_bf16_launch_state_wgmma(p, stream, wgmma_slice(p));
        else if (want >= 4 && clusters_fit<4>(p.Hv))
            err = launch_state<4>(p, stream);
        else if (want >= 2 && clusters_fit<2>(p.Hv))
            err = launch_state<2>(p, stream);
        else if (want >= 1 && cluster_capacity<2>() > 0)
            err = launch_state<1>(p, stream);
        else if (fast && use_narrow(p))
            err = chunk_bf16_launch_state_narrow(p, stream, p.chunk_producer >= 0);
        else if (fast)
            err = launch_state<0, true>(p, stream);
        else
            err = launch_state<0>(p, stream);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

}  // namespace frost::kernels::gdn

namespace frost::kernels {
int gdn_chunk_bf16_max_clusters(int size) {
    return size == 4 ? gdn::cluster_capacity<4>() : size == 2 ? gdn::cluster_capacity<2>() : 0;
}
}  // namespace frost::kernels
