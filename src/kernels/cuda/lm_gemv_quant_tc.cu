// Quantized decode GEMV on bf16 tensor cores (see lm_gemv_quant.h, gemv_quant_tc_*), built like
// the bf16 one (lm_gemv_tc.cu): the previous version staged x in shared memory as fp16 scaled by
// a block-wide max|x| (two passes over x and two barriers per block) and ran 2.2-2.5x its bytes
// floor, latency-bound at 37 % occupancy (ncu, H100 2026-11-24). Here nothing is staged: a warp
// dequantizes its weights in registers straight into bf16 mma A fragments, reads x from global
// memory (L1-resident: every warp of the SM reads the same x), keeps `kUnroll` steps of weights
// in flight and the grid has one block per 16-row tile with the blocks per SM set per K.
// Measured (bench_quant_gemv, 9B shapes, back-to-back launches, time over the bytes floor; before
// = the kernels that ran each format before, same run, H100 2026-11-24): fp8 block 1.42-1.59x ->
// 1.38-1.50x at N >= 10240 (2.13x -> 1.97x at 4096 x 4096), NVFP4 2.15-2.38x -> 1.68-1.90x
// (3.17x -> 2.65x), INT4 2.30-2.80x -> 1.94-2.16x (3.43x -> 3.02x), bf16 1.11-1.14x (1.33x).
// Round 2 (issue 15): ncu of the int4 kernel at 12288 x 4096 showed ~300 instructions per warp
// step (1 KiB of weights) with the schedulers 58 % busy: a signed integer division per step for
// the group index, 64-bit address arithmetic per scale load, the nibble mask and the 128.0 OR in
// two LOP3s, the zero-point bias through float. Those are gone (group_of, srow / zrow, and_or,
// integer bias): 5.9 M instead of 7.3 M instructions, and the default loop is pipelined. Now
// (same bench, H100): fp8 block 1.36-1.44x (1.81x at 4096 x 4096), NVFP4 1.70-1.89x (2.52x),
// INT4 1.82-2.06x (2.78x), with or without zero points. Tried and dropped (no gain, same bench):
// two 16-row tiles per block sharing each x fragment (int4 1.98x vs 1.92x; more registers), and x
// loaded together with its group's weights with the weights not kept in L1 (int4 2.21x vs 2.17x).
// Round 3 (H100, 2026-11-25, A/B switches in one call, then removed): ncu of fp8 block 12288 x
// 4096 puts the kernel at 65 % of DRAM with no eligible warp in 55 % of the cycles and 56 % of the
// stall cycles on the L1TEX scoreboard: latency, not the conversion pipe. (1) fp8 by bit placement
// (byte_perm, shift, LOP3 to e4m3 * 2^-120 as bf16, one HMUL2 by 2^120; the same bits) instead of
// the two conversions: 7.23 M instead of 6.84 M instructions, 25.1 vs 24.2 us, engine 9B fp8 decode
// 4.098-4.111 vs 3.994-4.004 ms/token. (2) Each block's whole tile bulk-prefetched into L2 at block
// start (cp.async.bulk.prefetch.L2): slower everywhere, bench_quant_gemv fp8 block 1.37 -> 1.47x,
// int4 1.85 -> 1.97x; engine decode 9B fp8 3.993 -> 4.51, int4 3.20 -> 3.60 ms/token, and in the
// bf16 GEMV 9B bf16 6.11 -> 7.03.
//
// Mapping. A block owns 16 weight rows (SwiGLU: 8 gate rows and their 8 up rows) and its 8 warps
// split K in 128-wide steps, interleaved (step s = warp + i * 8). Lane L holds rows L/4 and
// L/4 + 8 of the tile and, in a step, the 32 consecutive weights k0 + 32*(L%4) .. +32 of both
// rows (one 16-byte load per row for the 4-bit formats, two for fp8): 16 bf16 pairs per row. A
// dot product does not care how k is permuted as long as A and B agree, so mma m of the step
// takes the lane's pairs 2m and 2m+1 as its k slots {2t, 2t+1} and {2t+8, 2t+9}; the lane reads
// column L/4 of B (row L/4 of x, M <= 8) at the same offsets. fp8 pairs are adjacent weights;
// 4-bit pairs are nibbles (j, j+4) of a 32-bit word (what one mask extracts): in the paired nibble
// order the engine's load writes (GemvQuantParams::nibble_pairs, quant4_pair_nibbles_launch) those
// hold elements (2j, 2j+1) and x's pairs are taken as they are; in the checkpoint's order they
// hold elements (j, j+4), and x's pairs are permuted to match (one byte_perm per x pair,
// amortised over the two rows). A warp's weight load (one row per group of 4 lanes) is 8 x 64 bytes:
// row-major, eight half lines one row apart; with the rows in 8-row blocks (row_blocks,
// quant4_chunk_index, written at load for every 4-bit weight whose shape allows it) 512
// contiguous bytes. Measured (H200, 2026-12-02, fiftieth session, bench_quant_gemv --pdl, µs per
// launch back to back): INT4 gate+up SwiGLU 20.4 -> 19.2, down 10.6 -> 9.9, NVFP4 gate+up 21.7 ->
// 20.9; 9B decode @1k INT4 2.34-2.37 -> 2.25-2.28 ms/token, NVFP4 2.60 -> 2.52.
// The INT4 bias folded into the mma, measured slower and removed (H200, 2026-12-02, fifty-first
// session; both forms passed this kernel's test). The pair was taken as 128 + c (the LOP3 alone,
// no HSUB2) and after each mma a second one over the same x pairs with A = the two rows'
// −(128 + z) added the bias back, 16 k at a time: 32 HSUB2 out and 8 mma in per lane and step,
// ~20 % fewer instructions, 80 registers with 12 bytes of spills. bench_quant_gemv --pdl --only
// int4, µs per launch, two rounds, folded against the per-pair subtraction: gate+up SwiGLU
// 20.7 against 19.1, down 11.1-11.2 against 9.9, in_proj 11.0 against 10.1, out_proj 5.1-5.2
// against 4.6-4.7; `frost bench engine --decode 1024`, 9B INT4: 2.402 / 2.407 against 2.244 /
// 2.240 ms/token. A first form summed Σx by eight mmas against an all-ones A into separate
// accumulators (84 bytes of spills) and was not timed. Each accumulator chain grew from 4 to 8
// dependent mmas: the tensor pipe's latency, not the dequantization's instruction count alone,
// is on this kernel's path.
// The bias folded out of the mma instead, also slower and removed (built in the sixty-sixth
// session, measured H200 2026-12-05, sixty-eighth): the mmas took 128 + q and each step's fp32
// partial lost (128 + z) x Σx of that step, Σx staged once per block in shared memory (32 HSUB2
// out, 4 FMA and a shared load in per lane and step; 80 registers, no spills; the test passed
// both forms). `frost bench engine --decode 1024 --decode-steps 64 --reps 3`, 9B INT4, same call:
// 2.519 ms/token folded against 2.334 unfolded (1.71x against 1.61x the floor); prefill
// unchanged. Fewer ALU instructions again bought nothing: the staging's block barrier and the
// extra shared loads sit on the same short per-block path that bounds these launches.
//
// Dequantization, exact in bf16: fp8 -> fp16 (hardware pair conversion) -> fp32 -> bf16; int4 by
// OR-ing two nibbles into the mantissas of bf16 128.0 and subtracting 128 + zero point; e2m1 by
// placing its sign and 3 magnitude bits at bf16 bits 15 and 6..8 (that bf16 is e2m1 * 2^-126,
// subnormal for the smallest codes) and multiplying by the group scale * 2^117: e2m1 * scale *
// 2^-9, a 2-bit by 4-bit significand product in [2^-19, 6 * 448 * 2^-9], exact. The 2^9 and the
// global scale are applied to the fp32 row sum. fp8 block and int4 group scales span whole steps
// (block_k, group a multiple of 128): they multiply each step's fp32 partial sum.
//
// W8A8 (GemvQuantParams::act_fp8, FP8 formats): the block first quantizes its x rows per 128-wide
// group to e4m3 in shared memory (stage_act8, GemmOp::quant_act's bytes), then mma m16n8k32
// e4m3 x e4m3 takes the stored weight bytes as they are: no conversion at all, and each step's
// fp32 partial takes weight scale x x-group scale. Built to test whether the conversions bound
// the fp8 kernel; they do not (bench_quant_gemv, H200 2026-11-29, time over the bytes floor):
// W8A16 1.49-1.68x, W8A8 1.60-2.01x on the 9B shapes (the staging costs more than the
// conversions saved), and the engine's 9B FP8 decode 3.318 ms/token W8A16 against 3.661 W8A8.
// It stays as the opt-in that runs the checkpoint's declared activation scheme end to end.
//
// What a launch can reach (H200, 2026-11-29, a standalone probe, not kept: only the loads, back to
// back over eight rotating copies of the 9B's INT4 matrices, so nothing stays in L2): a plain
// coalesced read takes 14.3 / 8.7 / 4.9 us for gate|up (50 MB) / down (25 MB) / out_proj (8.4 MB),
// 1.36 / 1.66 / 2.79x their bytes floor, the fixed start, ramp and drain of a launch (~3.5-4 us)
// being most of a small matrix's floor; this kernel's load pattern alone reads as fast (14.6-15.1,
// 9.1-9.6, 4.9-5.2 us with 8 warps per tile; two warps per tile, as four-tile blocks run, 15.1-15.4
// on gate|up, 13-19 on down); a producer warp streaming 16-row stages into a 3-8 deep shared-memory
// ring by bulk copies is slower (15.8-17.2, 9.4-10.8, 5.4-6.8). Inside the decode graph the gate|up
// launch costs 25 us (a probe that left it out of the step). So the loads are not what this kernel
// lacks; its arithmetic is, and one launch per matrix cannot approach 1.2x the floor at these sizes.
// Registers (ptxas -v, sm_90a, 2026-11-29): the default {1,3,1} uses 80 registers without spills
// in every format; {2,4,0}, capped at 64 by its 4 blocks per SM, spills 92-116 bytes per thread
// (fp8 2.10x where {1,3,1} runs 1.60x; a {1,4,1} tried this session, under the same cap, ran
// 2.08x), and the W8A8 kernels spill 24-40 bytes at 80. At 80 registers an SM holds 25 warps: 3 blocks of 8. The 4096-row
// matrices have 256 tiles, i.e. ~16 warps per SM on 132 SMs, and the two ways to give them more
// warps (split K over more blocks, or 16-warp blocks) hit that register cap; a 16-warp variant
// at 2 blocks per SM was built, compiled to 64 registers with 84-116 bytes of spills, and dropped
// unmeasured. A fix has to cut the registers per lane first (fewer weight words in flight per
// lane, more lanes).
//
// Exactness of batching. Each output (weight row, x row) is a fixed sequence: per warp its steps
// in order, then the tile's warp partials summed in warp order (8 warps, 4 with two tiles per
// block, 2 with four: gemv_quant_tc_launch picks by N and format only). Column c of an mma depends only on
// column c of B, so a row's bits do not depend on M or on the other rows: a batched member's
// outputs equal its solo launch's (padding columns read zeros).
#include "kernels/cuda/lm_gemv_quant_tc.cuh"

#include "kernels/cuda/lm_act_quant.cuh"
#include "kernels/cuda/lm_gemv_common.cuh"
#include "kernels/cuda/lm_gemv_quant_dispatch.cuh"
#include "kernels/gemv_pick.h"
#include "util/env.h"

namespace frost::kernels {
namespace {
using namespace lm;
using namespace qtc;

// W8A8 (GemvQuantParams::act_fp8): the block's x rows (`rows` of them, ldx apart) quantized into
// shared memory, row r's e4m3 bytes at sq + r * (K + 16) and its group scales at ss + r * (K / 128).
// 16 threads hold a 128-wide group, 8 values each (act_quant_group: the bytes act_quant_fp8_launch
// and the CPU's quantize_act_e4m3_bytes make of the same row). Once per block: the 16 rows of a
// tile then read it 16 times from shared memory, where quantizing per warp step would divide 32
// values per lane per step.
template <int kBlockThreads>
__device__ inline void stage_act8(const bf16* x, int64_t ldx, int rows, int K, uint8_t* sq, float* ss) {
    constexpr int kPerGroup = kActGroup / kVec;  // threads per group
    const int chunks = K / kVec, groups = K / kActGroup;
    for (int r = 0; r < rows; ++r) {
        for (int c0 = 0; c0 < chunks; c0 += kBlockThreads) {  // uniform bounds: every lane reaches the shuffles
            const int c = c0 + static_cast<int>(threadIdx.x);
            const bool active = c < chunks;
            float v[kVec] = {};
            if (active) load8(x + r * ldx + c * kVec, v);
            act_quant_group<kPerGroup, kVec>(v, active, sq + r * (K + 16) + c * kVec, ss + r * groups + c / kPerGroup);
        }
    }
}

// kPipe: two register buffers of kUnroll steps; the next group's loads are issued before the
// current group is computed, so a warp keeps weights in flight while it dequantizes (without it a
// warp loads a group, waits, computes it, and only then loads the next).
// kAct8 (FP8 formats, act_fp8): x staged as e4m3 (stage_act8) and the steps run on FP8 mma.
// kTileWarps: warps per 16-row tile; an 8-warp block holds kWarps / kTileWarps tiles (8: one tile
// whose 8 warps split K; 4 / 2: two / four tiles, each warp two / four times the steps), so a
// block moves more weight bytes per fixed cost (start, x staging, the partial-sum barrier) at the
// same registers per lane;
// 12: a 12-warp block of one tile (more warps per SM for grids of few tiles).
// kPaired: 4-bit words in the paired nibble order (GemvQuantParams::nibble_pairs): x pairs are
// adjacent bf16, no byte_perm.
template <int F, bool kSwiglu, int kUnroll, int kMinBlocks, bool kPipe, bool kAct8, int kTileWarps, bool kPaired>
__global__ void __launch_bounds__((kTileWarps > kWarps ? kTileWarps : kWarps) * kWarp, kMinBlocks)
    gemv_quant_tc_kernel(GemvQuantParams p) {
    static_assert(!kAct8 || is_fp8<F>(), "W8A8 needs e4m3 weights");
    // 8-warp blocks of one, two or four tiles, or (kTileWarps 12) one tile of 12 warps.
    constexpr int kBlockWarps = kTileWarps > kWarps ? kTileWarps : kWarps;
    constexpr int kBlockThreads = kBlockWarps * kWarp;
    static_assert(kBlockWarps % kTileWarps == 0, "whole tiles per block");
    constexpr int kBlockTiles = kBlockWarps / kTileWarps;
    __shared__ float partial[kBlockWarps][kTileRows][kCols];
    extern __shared__ __align__(16) uint8_t act8[];  // kAct8: stage_act8's rows, then their scales
    constexpr int L = loads_per_row<F>();
    // warp: this warp's index among its tile's kTileWarps (it splits K with them).
    const int warp = (threadIdx.x / kWarp) % kTileWarps, lane = threadIdx.x % kWarp;
    const int sub = threadIdx.x / kWarp / kTileWarps;  // the tile within the block
    const int t = lane % 4, gid = lane / 4;
    const int F2 = p.N / 2;
    const int tile = blockIdx.x * kBlockTiles + sub;
    const int entry = blockIdx.y;  // routed experts: this block's (x row, expert) entry; else 0
    int n[2];  // the lane's two weight rows (in the expert, for routed experts)
    bool ok[2];
    tc_tile_rows<kSwiglu>(tile, gid, p.N, n, ok);
    // Routed experts: the entry's expert is the router's output, so it is read after the wait for
    // the previous kernel and nothing is preloaded before it. A folded shared expert's entries
    // (GemvQuantParams::routed_entries) read their own weights, known before the wait.
    const bool shared_entry = p.expert_ids && p.routed_entries > 0 && entry >= p.routed_entries;
    if (shared_entry) {
        p.w = p.shared_w;
        p.scale = p.shared_scale;
        p.zero_point = p.shared_zero_point;
        p.row_global_scale = p.shared_row_global_scale;
    }
    int row0 = 0;  // the expert's first row in the stacked weight
    if (p.expert_ids && !shared_entry) {
        pdl_wait();
        row0 = __ldg(p.expert_ids + entry) * p.N;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) n[r] = ok[r] ? row0 + n[r] : row0;  // a dropped row reads the first row
    const int steps = p.K / kStepK;
    const int my_steps = warp < steps ? (steps - warp + kTileWarps - 1) / kTileWarps : 0;
    const uint4* wrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) wrow[r] = lane_row<F>(p.w, n[r], p.K, t, p.row_blocks);
    const int wstep = step_stride<F>(p.row_blocks);

    const RowScales<F> rs(p, p.scale, p.zero_point, n);
    // Weights and scales are loaded kUnroll steps at a time (a group). Without kPipe a warp loads
    // a group, waits for it, computes it, then loads the next: while it dequantizes it has nothing
    // in flight. With kPipe the next group is loaded into the other buffer first (the default:
    // kUnroll 1, i.e. one step computed while the next one loads; see gemv_quant_tc_launch).
    constexpr int kBufs = kPipe ? 2 : 1;
    uint4 w[kBufs * kUnroll][2][L];  // [slot][row][load]; buffer b holds slots b * kUnroll ..
    StepRaw sr[kBufs * kUnroll][2];
    auto load_step = [&](int u, int i) {  // this warp's step i into slot u
        const int s = warp + i * kTileWarps;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int l = 0; l < L; ++l) w[u][r][l] = __ldg(wrow[r] + static_cast<int64_t>(s) * wstep + l);
            sr[u][r] = rs.load(r, s);
        }
    };
    auto load_group = [&](int b, int i0) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            if (i0 + u < my_steps) load_step(b * kUnroll + u, i0 + u);
    };
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
        if (u < my_steps) load_step(u, u);  // weights and scales do not depend on the previous kernel
    // The 4-bit formats (one 16-byte load per row and step) load the second register buffer before
    // the wait too. It pays only where the norm before triggers early (lm_norm.cu), so the blocks
    // wait longer: H200, 2026-11-30, `frost bench engine --decode 1024 --decode-steps 64 --reps 3`,
    // ms/token, alternating: 9B INT4 2.558-2.572 with neither, 2.560-2.568 with early triggers
    // alone (there also in the GDN step and the attention merge), 2.556-2.563 with this alone,
    // 2.517-2.525 with both; NVFP4 2.760-2.769 / 2.758-2.760 / 2.766-2.770 / 2.734-2.737. fp8
    // (two loads per row and step) went 2.874-2.888 -> 2.886-2.895 with it: it keeps one buffer.
    // Also for fp8's 12-warp tiles (the 4096 x 4096 out / o projections, 1.7-1.8x their floor in
    // the graph, two to three steps per warp), with the GDN step and the attention merge triggering
    // them early: 2.889 / 2.905 / 2.893 -> 2.913 / 2.903 / 2.913 ms/token, so not either.
    constexpr bool kPre2 = kPipe && L == 1;
    if constexpr (kPre2) load_group(1, kUnroll);
    pdl_wait();
    pdl_launch_dependents();

    // Column gid of B: row gid of x (zeros past M).
    const bool x_ok = gid < p.M;
    const int ldx = p.ldx > 0 ? p.ldx : p.K;
    const int x_row = !p.expert_ids  ? (x_ok ? gid : 0)
                      : shared_entry ? p.shared_x_row0 + (entry - p.routed_entries)
                                     : entry / p.x_entry_div;
    const uint4* xrow = reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(x_row) * ldx) + 4 * t;
    // kAct8: the staged rows (one per routed entry, else M), this lane's column and the scales of
    // its accumulator columns 2t and 2t + 1 (0 past the rows: those columns are zeros).
    const int act_rows = p.expert_ids ? 1 : p.M, act_groups = p.K / kActGroup;
    const uint8_t* sq = act8;
    const float* ss = reinterpret_cast<const float*>(act8 + static_cast<int64_t>(act_rows) * (p.K + 16));
    if constexpr (kAct8) {
        stage_act8<kBlockThreads>(p.x + (p.expert_ids ? static_cast<int64_t>(x_row) * ldx : 0), ldx, act_rows, p.K, act8,
                   reinterpret_cast<float*>(act8 + static_cast<int64_t>(act_rows) * (p.K + 16)));
        __syncthreads();
    }
    const uint4* xq_row = reinterpret_cast<const uint4*>(sq + (gid < act_rows ? gid : 0) * (p.K + 16)) + 2 * t;
    // Two accumulator chains (even / odd mmas) halve the dependent mma sequence; every variant adds
    // them in the same order, so all variants give the same bits.
    // kBf16Magic128 where ptxas cannot see the constant (N > 0 here), so and_or stays one LOP3.
    const uint32_t magic = kBf16Magic128 ^ (static_cast<uint32_t>(p.N) & 0x80000000u);
    float acc[2][4] = {};
    // Computes this warp's steps i0 .. i0 + kUnroll (those below my_steps) from buffer b.
    auto compute_group = [&](int b, int i0) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int i = i0 + u;
            if (i >= my_steps) break;
            const int s = warp + i * kTileWarps;
            const int slot = b * kUnroll + u;
            if constexpr (kAct8) {
                const StepScale st0 = step_scale<F>(sr[slot][0]), st1 = step_scale<F>(sr[slot][1]);
                // The lane's 32 weights of each row are k0 + 32t .. +32: mma m takes bytes 8m .. 8m+7
                // as its slots 4t..4t+3 (a0 / a1) and 4t+16..4t+19 (a2 / a3), x's staged bytes alike.
                const bool col_ok = gid < act_rows;
                uint4 xb[2];
#pragma unroll
                for (int q = 0; q < 2; ++q) xb[q] = col_ok ? xq_row[s * (kStepK / 16) + q] : make_uint4(0, 0, 0, 0);
                float d[2][4] = {};
#pragma unroll
                for (int m = 0; m < kLaneK / 8; ++m) {
                    const int q = m / 2, wd = 2 * (m % 2);
                    mma_e4m3(d[m % 2], word_of(w[slot][0][q], wd), word_of(w[slot][1][q], wd), word_of(w[slot][0][q], wd + 1),
                             word_of(w[slot][1][q], wd + 1), word_of(xb[q], wd), word_of(xb[q], wd + 1));
                }
                const float xs[2] = {2 * t < act_rows ? ss[2 * t * act_groups + s] : 0.0f,
                                     2 * t + 1 < act_rows ? ss[(2 * t + 1) * act_groups + s] : 0.0f};
                const float ws[2] = {F == kGemvQuantFp8Block ? st0.s : 1.0f, F == kGemvQuantFp8Block ? st1.s : 1.0f};
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[0][e] += (ws[e / 2] * xs[e % 2]) * (d[0][e] + d[1][e]);
            } else {
                uint4 xv[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) xv[q] = x_ok ? xrow[s * (kStepK / kVec) + q] : make_uint4(0, 0, 0, 0);
                tc_step<F, kPaired>(w[slot], sr[slot], xv, magic, acc);
            }
        }
    };
    if constexpr (kPipe) {
        // Buffer 0 holds group i0 on entry; group i0 + kUnroll goes to buffer 1 before group i0 is
        // computed, group i0 + 2 kUnroll to buffer 0 before group i0 + kUnroll is.
        for (int i0 = 0; i0 < my_steps; i0 += 2 * kUnroll) {
            if (i0 > 0 || !kPre2) load_group(1, i0 + kUnroll);
            compute_group(0, i0);
            load_group(0, i0 + 2 * kUnroll);
            compute_group(1, i0 + kUnroll);
        }
    } else {
        for (int i0 = 0; i0 < my_steps; i0 += kUnroll) {
            if (i0 > 0) load_group(0, i0);
            compute_group(0, i0);
        }
    }
    // acc: (row gid, col 2t), (gid, 2t + 1), (gid + 8, 2t), (gid + 8, 2t + 1).
    const int pw = threadIdx.x / kWarp;  // [tile][warp] of the block
    partial[pw][gid][2 * t] = acc[0][0] + acc[1][0];
    partial[pw][gid][2 * t + 1] = acc[0][1] + acc[1][1];
    partial[pw][gid + 8][2 * t] = acc[0][2] + acc[1][2];
    partial[pw][gid + 8][2 * t + 1] = acc[0][3] + acc[1][3];
    __syncthreads();
    // Row factor applied to the summed row: fp8 channel scale, NVFP4 2^9 / global scale. nr: the
    // row in the stacked weight (row0 + the output row); st: the tile within the block.
    auto row_value = [&](int st, int row, int col, int nr) {
        float v = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kTileWarps; ++wi) v += partial[st * kTileWarps + wi][row][col];
        return row_factor<F>(v, nr, p.scale, p.row_global_scale, p.global_scale);
    };
    // The block's outputs (kBlockTiles x 16 rows x 8 columns), one per thread per round: one
    // round up to two tiles per block, two with four.
    if constexpr (kSwiglu) {
        constexpr int kOuts = (kTileRows / 2) * kCols;
        for (int o = threadIdx.x; o < kBlockTiles * kOuts; o += kBlockThreads) {
            const int st = o / kOuts, g = o % kOuts / kCols, col = o % kCols;
            const int j = (blockIdx.x * kBlockTiles + st) * (kTileRows / 2) + g;
            if (col >= p.M || j >= F2) continue;
            const int ldy = p.ldy > 0 ? p.ldy : F2;
            static_cast<bf16*>(p.y)[static_cast<int64_t>(col + entry) * ldy + j] =
                swiglu_from_sums(row_value(st, g, col, row0 + j), row_value(st, g + 8, col, row0 + F2 + j));
        }
    } else {
        constexpr int kOuts = kTileRows * kCols;
        for (int o = threadIdx.x; o < kBlockTiles * kOuts; o += kBlockThreads) {
            const int st = o / kOuts, row = o % kOuts / kCols, col = o % kCols;
            const int nr = (blockIdx.x * kBlockTiles + st) * kTileRows + row;
            if (col >= p.M || nr >= p.N) continue;
            const int ldy = p.ldy > 0 ? p.ldy : p.N;
            store_gemv_out(p, static_cast<int64_t>(col + entry) * ldy + nr, row_value(st, row, col, row0 + nr));
        }
    }
}

template <int F, int kUnroll, int kMinBlocks, bool kPipe, bool kAct8 = false, int kTileWarps = kWarps>
cudaError_t launch_variant(const GemvQuantParams& p, cudaStream_t stream) {
    const int tiles = p.swiglu ? ceil_div(p.N / 2, kTileRows / 2) : ceil_div(p.N, kTileRows);
    constexpr int kBlockWarps = kTileWarps > kWarps ? kTileWarps : kWarps;
    const dim3 grid(ceil_div(tiles, kBlockWarps / kTileWarps), p.expert_ids ? p.entries : 1);
    // W8A8's staging stays within kGemvAct8MaxSmem (eligibility): under the 48 KiB default.
    const size_t smem = kAct8 ? static_cast<size_t>(gemv_act8_smem_bytes(p.expert_ids ? 1 : p.M, p.K)) : 0;
    constexpr bool k4 = !is_fp8<F>();  // only the 4-bit formats have a paired order
    auto kernel = p.swiglu ? (k4 && p.nibble_pairs ? gemv_quant_tc_kernel<F, true, kUnroll, kMinBlocks, kPipe, kAct8, kTileWarps, k4>
                                                   : gemv_quant_tc_kernel<F, true, kUnroll, kMinBlocks, kPipe, kAct8, kTileWarps, false>)
                           : (k4 && p.nibble_pairs ? gemv_quant_tc_kernel<F, false, kUnroll, kMinBlocks, kPipe, kAct8, kTileWarps, k4>
                                                   : gemv_quant_tc_kernel<F, false, kUnroll, kMinBlocks, kPipe, kAct8, kTileWarps, false>);
    return launch_kernel(kernel, grid, dim3(kBlockWarps * kWarp), smem, stream, p.pdl != 0, p);
}

// The key of a variant: tile_warps * 1000 + unroll * 100 + min_blocks * 10 + pipe.
int variant_key(int unroll, int min_blocks, int pipe, int tile_warps) {
    return tile_warps * 1000 + unroll * 100 + min_blocks * 10 + pipe;
}

// W8A8 (act_fp8): the default's two forms (one or two tiles per block).
template <int F>
cudaError_t launch_act8(const GemvQuantParams& p, int key, cudaStream_t stream) {
    if constexpr (is_fp8<F>()) {
        switch (key) {
            case 8131: return launch_variant<F, 1, 3, true, true>(p, stream);
            case 4131: return launch_variant<F, 1, 3, true, true, 4>(p, stream);
            case 12121: return launch_variant<F, 1, 2, true, true, 12>(p, stream);
            default: return cudaErrorInvalidValue;
        }
    }
    return cudaErrorInvalidValue;
}

// The instantiated variants: {unroll, min blocks, pipe, tile warps} (see the header).
template <int F>
cudaError_t launch_format(const GemvQuantParams& p, int unroll, int min_blocks, int pipe, int tile_warps, cudaStream_t stream) {
    const int key = variant_key(unroll, min_blocks, pipe, tile_warps);
    if (p.act_fp8) return launch_act8<F>(p, key, stream);
    switch (key) {
        case 8220: return launch_variant<F, 2, 2, false>(p, stream);
        case 8230: return launch_variant<F, 2, 3, false>(p, stream);
        case 8240: return launch_variant<F, 2, 4, false>(p, stream);
        case 8420: return launch_variant<F, 4, 2, false>(p, stream);
        case 8121: return launch_variant<F, 1, 2, true>(p, stream);
        case 8131: return launch_variant<F, 1, 3, true>(p, stream);
        case 8221: return launch_variant<F, 2, 2, true>(p, stream);
        case 8231: return launch_variant<F, 2, 3, true>(p, stream);
        case 4131: return launch_variant<F, 1, 3, true, false, 4>(p, stream);
        case 12121: return launch_variant<F, 1, 2, true, false, 12>(p, stream);
        case 2131: return launch_variant<F, 1, 3, true, false, 2>(p, stream);
        default: return cudaErrorInvalidValue;
    }
}

bool multiple_of(int v, int of) { return v > 0 && v % of == 0; }
bool is_fp8_format(int f) { return f == kGemvQuantFp8Block || f == kGemvQuantFp8Channel; }

// FP8 mma is sm_89+, and the build carries it only in the sm_90a binary (the portable compute_80
// PTX traps): W8A8 runs on a compute-capability 9.x device, read once per process.
bool act8_device() {
    static const bool ok = [] {
        int dev = 0, major = 0;
        return cudaGetDevice(&dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9;
    }();
    return ok;
}

}  // namespace

bool gemv_quant_tc_eligible(const GemvQuantParams& p) {
    if (!p.x || !p.w || !p.scale || !p.y || !lm::aligned16(p.x) || !lm::aligned16(p.w)) return false;
    if (p.nibble_pairs != 0 && p.nibble_pairs != 1) return false;
    if (p.row_blocks != 0 && (p.row_blocks != 1 || is_fp8_format(p.format))) return false;
    if (p.N <= 0 || !multiple_of(p.K, kStepK) || p.M < 1 || p.M > kCols) return false;
    if (!gemv_quant_entries_valid(p)) return false;
    if (p.M > 1 && ((p.ldx != 0 && (p.ldx < p.K || p.ldx % kVec != 0)) || (p.ldy != 0 && p.ldy < (p.swiglu ? p.N / 2 : p.N))))
        return false;
    if (p.swiglu && (p.N % 2 != 0 || p.out_f32 || p.accumulate)) return false;
    if (p.act_fp8 && (!(p.format == kGemvQuantFp8Block || p.format == kGemvQuantFp8Channel) || p.K % kActGroup != 0 ||
                      gemv_act8_smem_bytes(p.expert_ids ? 1 : p.M, p.K) > kGemvAct8MaxSmem || !act8_device()))
        return false;
    switch (p.format) {
        case kGemvQuantFp8Block: return multiple_of(p.block_k, kStepK) && p.block_n > 0;
        case kGemvQuantFp8Channel: return true;
        case kGemvQuantNvfp4: return p.row_global_scale || p.global_scale > 0.0f;
        case kGemvQuantInt4: return multiple_of(p.group_size, kStepK) && p.K % p.group_size == 0;
        default: return false;
    }
}

cudaError_t gemv_quant_tc_launch_tuned(const GemvQuantParams& p, int unroll, int min_blocks, int pipe, cudaStream_t stream,
                                       int tile_warps) {
    if (!gemv_quant_tc_eligible(p)) return cudaErrorInvalidValue;
    return launch_for_format(p.format, [&](auto f) {
        return launch_format<decltype(f)::value>(p, unroll, min_blocks, pipe, tile_warps, stream);
    });
}

// Pipelined one step per buffer (a step computed while the next one loads), three blocks per SM,
// every K. Measured (bench_quant_gemv --tune, H100 2026-11-24, time over the bytes floor, 9B
// shapes): it was the best variant or within 2 % of it for every format and shape (the loop before
// it, unroll 2 without the pipeline: int4 2.17x -> 2.00x at 4096 x 12288, 3.04x -> 2.90x at 4096 x
// 4096; fp8 block 1.43x -> 1.39x at 4096 x 12288).
//
// Two tiles per block (tile_warps 4) where the grid has many tiles: bench_quant_gemv --tune, H200
// 2026-11-29, time over the bytes floor, 9B shapes (tiles = 16-row tiles): fp8 block gate/up
// (1536 tiles) 1.61 -> 1.51x, in_proj (772) 1.60 -> 1.51x, attention qkv (640) 1.78 -> 1.65x;
// int4 gate/up 2.51 -> 2.30x, in_proj 2.49 -> 2.30x, qkv 2.80 -> 2.72x; NVFP4 gate/up 2.36 ->
// 2.27x, in_proj 2.35 -> 2.26x but qkv 2.49 -> 2.67x; and slower everywhere at 256 tiles (the
// 4096-row out / o / down projections: fp8 down 1.69 -> 2.51x), where half the blocks leave SMs
// idle. Tried and dropped in the same runs: the weights through a cp.async shared-memory ring of
// 3-6 steps per warp (fp8 2.65-2.8x, 4-bit within 5 % of the registers), and 4 blocks per SM.
//
// One tile of 12 warps, two blocks per SM ({1,2,1}, tile_warps 12) where the grid has at most two
// tiles per SM and K has >= 24 steps: the 4096-row matrices of the 9B shapes (256 tiles) ran ~16
// warps per SM as 8-warp blocks and run 24 this way (the same 80 registers). bench_quant_gemv
// --tune, H200 2026-11-29, time over the bytes floor: down (4096 x 12288) fp8 block 1.67 -> 1.48x,
// NVFP4 2.39 -> 2.12x, INT4 2.76 -> 2.27x; out / o (4096 x 4096) fp8 2.39 -> 2.23x, NVFP4 3.57 ->
// 3.39x, INT4 3.96 -> 3.61x; slower at 640+ tiles (qkv fp8 1.62 -> 1.86x: 2.4 waves of blocks).
// Tried in the same calls and dropped: x staged in shared memory as bf16 once per block (within
// +-5 %, mixed by format), and fp8 loads laid out so each load instruction covers whole 32-byte
// sectors of a row (no change: L1 serves the two half-sector loads).
//
// Streamed through shared memory (H200, 2026-11-29, commit d2415d8, reverted): persistent blocks
// whose producer warp bulk-copied (cp.async.bulk, one per row and 8-step chunk) the weight rows of
// its tiles into a ring of 2-8 stages completing on mbarriers, while 8 consumer warps ran these
// steps from it (bitwise this kernel's 8-warp form), so the bytes in flight were not bounded by
// registers. Slower everywhere: bench_quant_gemv --pdl (one call), time over the floor, tensor
// core -> streamed (best ring): fp8 block gate/up 1.26 -> 1.42x (4 stages; 6 stages 1.50x, 8
// stages fit one block per SM: 1.93x), down 1.27 -> 1.40x, 4096 x 4096 1.60 -> 1.99x, NVFP4
// gate/up 1.96 -> 2.39x, INT4 1.95 -> 2.50x; engine 9B decode FP8 3.169-3.184 -> 3.560-3.582 ms/token, INT4 2.757-2.759 -> 3.244-3.279.
// ncu (cold, fp8 block gate/up): 47 % of DRAM against this kernel's 57 %, the L2 hit rate 20 %
// against 2 %; not resolved within the session. Launched with PDL (as the decode graph launches
// it) this kernel runs 1.23-1.39x its floor at N >= 10240 against 1.47-1.61x without: much of the
// gap the earlier rounds measured was the drain between back-to-back launches, which the graph
// already overlaps.
//
// The unpipelined loop unrolled twice, one tile per block ({2,3,0}), on the wide matrices: under
// PDL the micro-bench put it ahead for NVFP4 gate/up and in_proj (1.84-1.86x the floor against
// 1.94-1.96x), but not through the engine (H200 2026-11-29, 9B decode @1k, ms/token, alternating
// runs in one call, the variant forced by a temporary switch): NVFP4 3.035-3.074 against the
// shipped 2.954-2.971, INT4 2.814-2.828 against 2.752-2.762, FP8 block 3.333-3.335 against
// 3.141-3.151. Not taken.
//
// Four tiles per block (tile_warps 2: each warp runs 16 of a tile's 32 steps at K 4096) on the
// widest matrices, FP8 and INT4 only. H200 2026-11-29, 9B decode @1k through the engine, ms/token,
// alternating runs, two calls, the 9B gate/up (1536 tiles) switched by a temporary variable: FP8
// block 3.173-3.177 -> 3.102-3.126 (both calls), INT4 2.795-2.823 -> 2.770-2.772, NVFP4 2.944-2.952
// -> 2.982-3.001 (slower: NVFP4 keeps two tiles). bench_quant_gemv --tune --pdl agrees on the
// fused SwiGLU shape the decode runs ("mlp gate+up SwiGLU", added for this; time over the floor,
// two -> four tiles): fp8 block 1.22 -> 1.14x, INT4 1.88 -> 1.84x, NVFP4 1.82 -> 1.84x; its
// 12288-row "mlp gate|up (x2)" row (768 tiles, 192 blocks) runs 1.27 -> 1.64x. At most one wave
// of blocks at 3 per SM then (384 blocks on 132 SMs); narrower matrices leave SMs idle: the form
// from 640 tiles on (the GDN in_proj's 772 and attention qkv's 640 too; a later call) ran FP8
// 3.244-3.254 against 3.093-3.118 and INT4 2.924-2.943 against 2.768-2.812.
// Probes in the same micro-bench (9B gate/up under PDL, time over the bytes floor, wrong results,
// not kept): the NVFP4 / INT4 kernel 1.97x / 1.93x; the same loads and mmas without the
// dequantization and the x permutation 1.39x / 1.46x; the loads alone 1.49x / 1.54x (fp8 block:
// 1.27x, loads alone 1.14x). So about a third of a 4-bit GEMV's time is the dequantization's
// instructions, and its loads alone already run ~1.5x the floor at this occupancy: the next 4-bit
// gain needs both fewer instructions per weight and more bytes in flight per lane. ncu of the
// shipped kernel on that matrix (one launch, clocks unlocked), NVFP4 / INT4 / fp8 block: 39 / 39
// / 62 % of DRAM, 0.56 / 0.54 / 0.46 warps issued per scheduler and cycle, no eligible warp in
// 44 / 46 / 54 % of the cycles at 37.5 % occupancy (76-80 registers); per issued instruction the
// long scoreboard stalls 3.3 / 3.7 / 6.8 cycles, not-selected ~1.4, the math pipe ~1.2.
// The lead of the forty-eighth session, separated and built (H200, 2026-12-02, forty-ninth
// session). `bench_cuda_kernels --launch-chain` now also times this kernel's loads alone in a
// PDL chain (lm_launch_probe.h, patterns 1-4), 50.3 MB per kernel, 3-4 blocks of 8 warps per SM,
// time over the bytes floor: the 4-bit shape (four lanes per 64-byte half line of 8 rows)
// 1.14-1.19x at one or two steps in flight per lane, the same bytes stored so that each warp load
// reads 512 contiguous bytes 1.02-1.08x (1.18x in one of the four configurations); the fp8 shape
// (whole lines) and its contiguous twin alike, 1.02-1.40x depending on the grid (wave effects,
// not the shape). So the half lines cost the
// 4-bit loads ~7 %, and the kernel's own time (INT4 gate+up SwiGLU 21.9 us against ~14 us for its
// loads alone) is mostly its arithmetic. Two timing probes of this kernel (wrong results, same
// call, 9B decode @1k through the engine, two rounds): x pairs taken as they are (no byte_perm,
// as a nibble reorder allows) INT4 2.494 / 2.496 -> 2.369 / 2.380 ms/token; a tile-contiguous
// layout (every warp load 512 contiguous bytes) 2.390 / 2.390; both 2.245 / 2.264 (NVFP4 2.698 /
// 2.718 -> 2.466 / 2.492). Kept: the first, as the paired nibble order (exact, size-preserving,
// any N and K; the engine rewrites each 4-bit weight once at load): INT4 2.345 / 2.355, NVFP4
// 2.573 / 2.577 ms/token in the next call (bench_quant_gemv --pdl, INT4 gate+up SwiGLU 21.9 ->
// 20.4 us). The tile-contiguous layout is the next step: it needs N padded to whole 16-row tiles
// and every 4-bit reader (SIMT, dequantization, MoE) addressing tiles. Measured and dropped in
// the same session: each warp prefetching its step i + D into L2 when it loads step i
// (prefetch.global.L2 for every lane's 16 bytes, D = 2 / 4 / 8). bench_quant_gemv --pdl: fp8
// slower at every D (block gate+up 1.14 -> 1.39 / 1.46 / 1.67x); 4-bit mixed at D = 2 (gate+up
// INT4 1.81 -> 1.79x, NVFP4 1.82 -> 1.75x; down INT4 1.87 -> 1.98x, NVFP4 1.74 -> 1.85x) and
// slower at 4 and 8. Through the engine, at D = 4 only: 9B FP8 2.875 / 2.879 -> 3.308 / 3.309,
// INT4 2.496 / 2.514 -> 2.569 / 2.576 ms/token.
//
// The FP8 GDN in_proj (qkv | z with per-row scales, 1.28x its floor inside the 25th session's
// graph against 1.00-1.09x for the block-scaled MLP GEMVs) with its leading whole 128-row blocks'
// scales read from the prefill GEMM's 128 x 128 grid (one address per tile and step instead of
// one per row; the same values, a bitwise-equal GEMV): no change (H200, 2026-11-30, thirty-second
// session, 9B FP8 decode @1k, ms/token, three rounds alternating: 2.877 / 2.884 / 2.899 against
// 2.888 / 2.887 / 2.885 per-row; bench_ops in_proj 14.3 us per launch either way, 3.5 TB/s, as
// fast as the MLP GEMVs alone). Not kept: the per-row scales are not what costs the in_proj.
// Preloaded into shared memory before the wait (H200, 2026-12-01, thirty-fourth session; built,
// tested bitwise against the same tiling, measured, reverted): for the 4096 x 4096 out / o
// projections, 128 blocks of 32 rows (two 4-warp tiles), each block's rows brought by one bulk
// copy per row (cp.async.bulk + one mbarrier, 131.6 KB of shared memory at K 4096 fp8) before its
// programmatic wait, so the weights would stream while the GDN step / the attention merge run and
// leave HBM idle. `frost bench engine --decode 1024 --decode-steps 64 --reps 3`, ms/token,
// alternating, two rounds: 9B FP8 2.864 / 2.868 -> 2.996 / 2.971, INT4 2.501 / 2.514 -> 2.631 /
// 2.655; inside the graph (`frost bench graph-ops`) out_proj 7.55 -> 9.71 us and o_proj 7.22 ->
// 10.74 per launch. A block that needs 132 KB cannot join an SM whose shared-memory carve-out the
// small kernel before it (and the GEMVs before that) set for L1, so the blocks started only after
// the predecessor had drained and the copies ran serially. Preferring the largest carve-out for
// every launch (cudaSharedmemCarveoutMaxShared) costs the GEMVs their L1 (x is read from L1 every
// step): 9B FP8 2.888 -> 3.238-3.245 ms/token without preloading, 3.303-3.319 with it (gate/up 25.9
// -> 31.1 us); the largest L1 for every launch is worse still (2.889-2.899 -> 4.445-4.460), so the
// launches keep the driver's default. The same rows as an L2 prefetch issued by the GDN step and
// the attention split (cp.async.bulk.prefetch.L2 of out_proj / o_proj, after or before their wait)
// made those projections 1.4-2.6 us faster per launch, yet the step slower: 2.864-2.879 ->
// 2.902-2.913 after the wait, 2.904-2.905 before it, 2.877 with 8 MB of each matrix (bf16: 4.365
// -> 4.386-4.432).
// Preloaded again, in blocks small enough to sit beside the GDN step (H200, 2026-12-01,
// forty-second session; built, measured, removed; the form is kept outside the tree): the one-
// tile 12-warp form of the 4096 x 4096 projections rebuilt as 6-warp blocks (each warp playing two
// of the 12 warps, same step order and partial sums, so the same bits), 16 rows copied into
// shared memory by bulk copies and the rows' scales read into registers before the wait, 82-94
// registers, so two such blocks (66 KB each) fit beside a GDN step block (256 threads x 104
// registers) by registers; the kernel before (the GDN step, the attention merge) optionally asked
// for the largest carve-out. `frost bench engine --decode 1024 --decode-steps 64 --reps 3`,
// ms/token, two rounds alternating: 9B FP8 2.858 / 2.875 -> 3.215 / 3.217 (preload), 3.236 /
// 3.229 (with the predecessors' carve-out); INT4 2.481 / 2.498 -> 2.839 / 2.825, 2.830 / 2.809.
// Inside the graph (`frost bench graph-ops`, with the carve-out): out_proj 9.1 us and o_proj 14.0
// per launch (7.1 / 6.1 before), and the next GEMVs slower too (gate / up 30.2 against 26.3-26.9
// us, down 16.1 against 14.6): a block asking for 66 KB sets its SM's carve-out, and the GEMVs
// after it then run with less L1. So the fixed cost of these launches is not their weights'
// latency alone, and shared memory cannot hold them without costing the neighbours.
// Every step in flight before the wait, as the bf16 GEMV's narrow matrices do (lm_gemv_tc.cu),
// measured slower and removed (H200, 2026-12-02, forty-eighth session): the 256-tile 4096 x 4096
// projections as one tile of 16 warps per block, both of a warp's two steps loaded before the
// wait ({2,2,0}, tile_warps 16, two blocks per SM, so the whole matrix was in flight before the
// wait). It passed the batched-equals-solo checks of this kernel's test; 64 registers with 116
// bytes of spills for fp8 block (4 fp8 channel, 0 NVFP4, 96 INT4). `frost bench engine --decode
// 1024 --decode-steps 64 --reps 3`, ms/token, two rounds alternating: 9B FP8 2.844 / 2.840 ->
// 2.959 / 2.959, INT4 2.487 / 2.497 -> 2.569 / 2.565. Most likely because two such blocks take the
// whole register file (2 x 512 x 64), so neither fits an SM beside the GDN step or attention merge
// before it (not profiled); the bf16 form that gained runs one tile per SM.
// Tiles per block: kernels/gemv_pick.h (the rule, the wave fill and their measurements).
cudaError_t gemv_quant_tc_launch(const GemvQuantParams& p, cudaStream_t stream) {
    const int tiles = p.swiglu ? ceil_div(p.N / 2, kTileRows / 2) : ceil_div(p.N, kTileRows);
    const int sms = device_sm_count();
    static const bool fill_waves = !util::env_is("FROST_GEMV_WAVES", "0");
    const int tpb = gemv_tiles_per_block(tiles, is_fp8_format(p.format),
                                         p.format != kGemvQuantNvfp4 && !p.act_fp8, sms, fill_waves);
    if (tpb > 1) return gemv_quant_tc_launch_tuned(p, 1, 3, 1, stream, kWarps / tpb);
    if (sms > 0 && tiles <= 2 * sms && p.K / kStepK >= 24) return gemv_quant_tc_launch_tuned(p, 1, 2, 1, stream, 12);
    return gemv_quant_tc_launch_tuned(p, 1, 3, 1, stream, kWarps);
}

}  // namespace frost::kernels
