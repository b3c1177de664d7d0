// Sparse MoE MLP on the GPU, router and decode (lm_moe.h); prefill is lm_moe_prefill.cu.
//
// Decode is bound by the bytes of the active weights: on the 35B-A3B shape (H 2048, E 256, top-8
// + shared, I = Is = 512) ~58 MB per layer, ~19 us at the H100's ~3 TB/s. Three kernels, chained
// by programmatic dependent launch when p.pdl is set:
//   logits  one warp per router row (E experts, then the shared gate), all of a lane's 16-byte
//           loads of the row in flight at once, issued before pdl_wait (the weights do not depend
//           on earlier kernels); kR token rows per block reuse the loaded weights (prefill).
//   gate/up bf16 tensor cores (moe_gate_up_mma_kernel): one 16-warp block per SM and row; every
//           block routes its row itself from the logits (one warp, a lane's entries in
//           registers) instead of a separate top-k launch, then takes 16-row tiles (8 gate rows
//           of a slot and their 8 up rows) with K split over its warps, two register stages.
//           Block 0 of a row writes the router outputs (probs, ids, weights, shared gate).
//   down    one row (op_moe's solo step, sm_90): moe_down_stream_kernel, one block per SM owning
//           R output rows, started beside gate/up as soon as gate/up passes its pdl_wait; it
//           routes the row itself and bulk-copies its R rows of the k + 1 down matrices into
//           shared memory while gate/up streams. Batched rows (or no room): moe_down_kernel, one
//           warp per output element, the weighted partial dots of ALL k + 1 experts per lane.
// FROST_MOE_DECODE=fused (a prototype, opt-in, measured 5 % slower: below): the three in one
// launch (moe_decode_fused_kernel, below the streaming down kernel), the same code for gate/up
// (GateUpBlock) and down (down_rows), so the same bits.
// moe_router_launch (used by prefill) is the logits kernel then a top-k kernel (one warp per row,
// the same routing function as the fused one, so the bits are equal); moe_experts_launch runs
// the same gate/up kernel on ids from memory, then moe_down_kernel.
//
// Determinism: every output is computed in a fixed sequence (gate/up: each warp's mma steps in
// order, then the 16 warp partials in warp order; down: a lane's items in order, then a fixed
// butterfly; both down kernels share that sequence), so a row's bits do not depend on other
// rows, the grid size or timing, and the fused decode equals router + experts bit for bit.
//
// Measured (H100, 2026-11-24, three runs of one helper; old = the base commit's SIMT gate/up, one
// warp per (gate, up) pair, + moe_down_kernel): bench_ops `moe decode` on the 4-layer cut 38.8 / 39.1 -> 36.6 / 36.7 us
// per layer; engine decode (4-layer cut, ms/token, two alternations) 0.676 / 0.681 -> 0.673 /
// 0.674; 40 layers 3.437 -> 3.401 ms/token (1.61x -> 1.58x the active-bytes floor). ncu (caches
// flushed, one launch): the tensor-core gate/up 25.7 us at 1.54 TB/s with 3.3 M instructions; a
// SIMT gate/up with two register stages per warp (one warp per (gate, up) pair, 8 warps per SM)
// was slower than the old one (31.9 us, 1.25 TB/s, 3.7 M instructions, issue-bound at 2 warps per
// scheduler: 0.697 vs 0.672 ms/token) and is gone. The streaming down kernel alone: 20.8 us for
// 18.9 MB (its loads overlap gate/up in the chain; with moe_down_kernel instead, FROST_MOE_DOWN=
// plain, moe decode is 39.5 us per layer). Opt-in A/B switches, both slower or equal in the
// engine: FROST_MOE_GU_L2=1 (bulk L2 prefetch of each gate/up block's later tiles after routing:
// 0.686 / 0.689 ms/token on the 4-layer cut) and FROST_MOE_DOWN=cpasync (the down rows by
// per-thread cp.async instead of the copy engine: 0.677 / 0.679). Routing from registers and one
// partial sum per block instead of a barrier per tile: no measurable change (36.6 -> 36.7 us).
// What is left: gate/up streams at ~1.5-1.9 TB/s whatever the arithmetic (SIMT or tensor cores),
// so the limit is in how the loads are in flight, not in issue; next: a copy-engine (bulk /
// TMA) ring for gate/up too, and stall sampling (ncu source page) of the gate/up loop.
//
// Measured (H100, 2026-11-25, one helper's two device calls; engine = `frost bench engine --model
// M --backend cuda --ttft 1024 --decode 1024 --decode-steps 64 --reps 2` on `frost synth --preset
// 35b-a3b --layers 4 | 20`, ms/token, old/new alternated; ncu = one launch alone, caches flushed,
// clocks unlocked). ncu of the base kernels: gate/up 26.4 us (DRAM 45 %, 1.51 TB/s; L1 hit 30 %:
// the second 16-byte half of a lane's 32-byte sector often hits; 21.4 warp cycles per issued
// instruction, only 8.2 of them on the L1TEX scoreboard; SMs active 82 % of the elapsed cycles),
// down 18.4 us (DRAM 31 %). Tried and dropped (all the same bits unless said):
//  - the streaming down kernel's activations with all of a thread's loads in flight at once after
//    pdl_wait: 4-layer 0.689 / 0.679 -> 0.680 / 0.679 (noise);
//  - balanced gate/up split (4 rounds of 16-row tiles on every block, the remaining 48 tiles cut
//    into 96 8-row halves, A rows 4-7 / 12-15 zero: at most 4.5 instead of 5 tiles per block):
//    4-layer 0.669 -> 0.674; with the by-slot down below, 20 layers 2.127 -> 2.135; ncu (with the
//    load order below) 25.5 -> 26.0 us. The 48 blocks' fifth tile is not what limits gate/up.
//  - load order with whole sectors per load (a lane's 16 bytes at K 32 q + 8 t4 instead of
//    16 t4 + 8 q; other mma positions, so other bits): 4-layer 0.669 -> 0.670 (L1 already merged).
//  - gate/up weights by ld.global.nc.L1::no_allocate.L2::256B: bench_ops `moe decode` 150.0 ->
//    131.7 us (4 layers: back-to-back replays of one layer find more of it in L2), engine 0.669 /
//    0.669 -> 0.677 / 0.672: nothing where each layer's weights are cold.
//  - down slot by slot: the last gate/up warp done with a tile writes its activations, fences and
//    adds its rows to a per-slot counter (zeroed by the logits kernel); the down kernel waits per
//    slot (acquire) and takes each slot's dots while later ones stream, its pdl_wait moved to the
//    end: 4-layer 0.684 -> 0.720, 20 layers 1.940 -> 2.127; ncu gate/up 26.4 -> 31.5 us, down
//    18.4 -> 24.3 us (likely: the gpu-scope fence in a streaming warp waits for that warp's loads
//    in flight, so its register pipeline drains at every tile).
// Left: gate/up streams at ~1.5 TB/s with most warp stalls not on memory; next: per-instruction
// stall sampling (ncu source page) of the routing / loop / epilogue, and a per-kernel timeline of
// the captured decode (nsys with graph nodes did not finish in 50 s here).
//
// Stall sampling of the gate/up kernel (H200, 2026-11-30, ncu --section SourceCounters, one launch
// on `frost synth --preset 35b-a3b --layers 2` under bench_ops, caches flushed): 20.6 us at 1.90
// TB/s (DRAM 39.5 %); the streaming down kernel alone 15.7 us at 1.21 TB/s. Of the gate/up warp
// samples: ~12 % are warps 1-15 waiting at the first barrier while warp 0 routes (plus ~7 % in
// the routing code itself): about 2.6 us of the launch in which only the 64 shared-expert blocks
// have weights in flight; the main loop ~62 %, its top stalls long-scoreboard waits on the
// IABS / CS2R that reuse the address register of a just-issued 16-byte load (the load still
// queued in the LSU: back-pressure, not arithmetic); ~7 % the tail after the loop (24 to 40
// threads sum the partials while the rest wait to exit). So the routing window and the queueing
// of 32 loads per warp, not the mma or the index arithmetic, are what keep it at ~40 % of DRAM:
// next, weights for the routed tiles through a bulk-copy ring (a few deep 16-row stages per
// block, issued by one thread) so fewer requests queue per SM (built in the thirty-second
// session and measured slower: below), and a routing that ends sooner (the top-k over 256
// probabilities by more than one warp, with route_row's bits).
//
// The bulk-copy ring for gate/up, built and measured slower (H200, 2026-11-30, thirty-second
// session; `frost bench engine --ttft 1024 --decode 1024 --decode-steps 64 --reps 3` on `frost
// synth --preset 35b-a3b --layers 20`, ms/token, alternated; bench_ops `moe decode` per layer).
// A 17th (producer) warp issued each 16-row tile as 512-column slabs of 16 KiB (16 one-row
// cp.async.bulk copies per slab, full / empty mbarriers per ring slot), the block's first
// shared-expert tile before pdl_wait; the 16 consumer warps kept this kernel's K split and mma
// order, so the bits were equal (a bitwise test against this kernel passed, PDL included). Beside
// the streaming down block only 3 slabs fit (48 KiB): 1.487-1.496 -> 1.588-1.596 ms/token, 30.2 ->
// 36.8 us per layer. With the plain down kernel (8 slabs, 128 KiB in flight): 1.636-1.640
// against 1.557-1.562 for this kernel beside the same down kernel, 33.4 -> 40.4 us per layer. So
// the depth was not what limited it: one-row bulk copies moved the weights slower than the
// lanes' own 16-byte loads, as the streaming down kernel's bulk copies already suggested (1.21
// TB/s alone under ncu, above). One trap for a next ring: mbarriers tell phases apart by parity
// only, so a consumer that skips a slot's phase (here: the slabs of the other half of the warps)
// can take the next same-parity phase for its own; the first version hung the captured decode
// that way. Every consumer has to wait for and release every stage.
// Re-measured on the H200 in the same session (same command, two rounds): FROST_MOE_DOWN=cpasync
// 1.507-1.516 and FROST_MOE_GU_L2=1 1.544-1.551 against the defaults' 1.490-1.491 ms/token, as on
// the H100: the defaults stay.
//
// Where a layer's ~31 us goes inside the engine's captured decode (H200, 2026-12-03, fifty-fourth
// session; `frost bench engine --ttft 1024 --decode 1024 --decode-steps 64 --reps 3` on `frost
// synth --preset 35b-a3b --layers 20`, ms/token, two rounds in one call). Probes (temporary
// switches, removed) skipped a launch or a stage, so their results were wrong: main 1.481 / 1.482;
// no MoE op at all 0.850 / 0.852 (the op: 31.5 us a layer); no logits launch (gate/up routes
// stale logits) 1.398 / 1.397, so that launch costs 4.2 us a layer for 1 MB of router weights it
// loads before its wait: its link in the chain, not its bytes; gate/up with fixed ids and every
// tile's loads before its wait (no routing window) 1.435 / 1.430, 2.4 us; both 1.363 / 1.359; no
// down launch 1.259 / 1.262, 11 us; gate/up alone (no logits, no down) 1.184 / 1.185, 16.7 us for
// its 36 MB; the streaming down alone 1.112 / 1.109, 13 us for 18 MB.
// A timeline (a harness outside the tree: this file with globaltimer stamps per block, eight
// 35B-A3B layers with their own weights in one captured PDL chain, a GEMV-like launch of 43 MB
// between them; us from the logits launch's first block, medians over blocks, the same in every
// layer and run): the logits blocks pass their wait at ~2.5 (the launch before ends) and finish at
// ~5.6; gate/up passes its wait at ~6.9 and its blocks have routed at ~10.5 (3.3-3.6 us of one
// warp's routing and x staging); the loops end at ~22.8 (21.3 first, 24.6 last block: 12 us of
// streaming at ~4 TB/s counting the down copies that run beside it); gate/up ends at ~23.3; down
// passes its wait at ~26.1 (the last gate/up block + ~0.8), has its activations at ~27.4 and ends
// at ~31.7: 4.1 us of dots from shared memory (3.3 with the loop below). 68-96 of the 128 down
// blocks started beside gate/up (at ~8; all 128 without the launch between the layers); the rest
// only when their SM's gate/up block ended (a carve-out the SM kept, most likely), and
// their routing (7 us, beside a streaming gate/up block) and copies then end the layer ~2.5 us
// later. So the latency a layer pays, outside the ~12 us of streaming: logits ~3, a PDL hop ~1,
// routing ~3.5, the skew between gate/up blocks ~3, down's wait, activations and dots ~8.
// Measured and dropped in that session (A/B switches, the engine command above, alternating;
// removed):
//  - gate/up with more L1 (its loads in flight land in L1; this launcher asks for the largest
//    shared-memory carve-out so the down block fits beside it): the driver's default 1.512 against
//    1.466-1.471; with moe_down_kernel (which needs no room beside gate/up) 1.541, carve-out 0
//    1.534 / 1.537, against 1.534 for moe_down_kernel beside the largest carve-out; 86 % (196 KB)
//    1.466. L1 capacity is not what holds gate/up.
//  - the down matrices prefetched into L2 for moe_down_kernel by the gate/up blocks (each block
//    its 1/132 of the shared expert's before its wait and of the k routed ones after its loop, or
//    right after routing, cp.async.bulk.prefetch.L2): 1.555-1.560 and 1.594 against 1.534-1.541.
//  - the logits kernel with the largest carve-out, so that an SM that ran a logits block lets the
//    down block in beside gate/up: old / new binaries alternating in one call, three rounds,
//    1.453 / 1.460 / 1.454 against 1.454 / 1.463 / 1.458 (a 0.6 % gain in an earlier call was
//    between processes, not the change).
// What this asks of a next design: one launch per layer whose blocks compute their share of the
// router logits, meet at a grid-wide barrier, route with more than one warp, stream gate/up and
// the down weights in one pass and reduce the down outputs without a second launch. Its barrier
// needs device state that is zero when the first step starts and that nothing poisons (the tests
// poison the MoE scratch), and the batched path (moe_down_kernel, whose bits a solo step must
// equal) would have to change with it.
//
// That one-launch decode, built (moe_decode_fused_kernel) and measured (H200, 2026-12-03,
// fifty-fifth session; the engine command above, settings alternated in one process each by
// scripts/gpu/ab_env.sh, ms/token). Bits: kernels_test_cuda_moe (its bitwise test against the
// three launches, plain and PDL-chained) and model_test_cuda_engine_moe passed. Speed: 1.544-1.566
// against the three launches' 1.435-1.444 in one call, 1.512-1.518 against 1.439-1.444 in the next:
// +3.5 to +6 us a layer. The refactor that made gate/up and down shared code did not move the
// three launches (6bfd064's kernels against this file's, alternated: 1.438-1.448 / 1.433-1.444).
// Probes inside the fused kernel (temporary switches, removed; wrong results), same call, three
// rounds, fused itself 1.512-1.518: no router logits and no first barrier (routing stale logits)
// 1.462-1.472, so they cost ~2.5 us a layer against the logits launch's 4.2; no down dots (the
// copies still waited for) 1.420-1.433, 4.5 us; no gate/up stream 1.307-1.327, 10 us (10.7
// with the dots gone too: 1.208-1.213 against 1.420-1.433); what is left with logits, gate/up and
// dots all gone (launch, x, the router and shared-down copies, routing, 18 MB of routed down
// copies issued only after routing, the second barrier) 1.148-1.156 against 0.850 for no MoE op
// (the fifty-fourth session's probe): 15 us a layer.
// So the in-kernel logits and barrier beat the logits launch by ~1.7 us, but the serial skeleton
// (routing, then the down copies, then a barrier, then dots that need every activation) costs more
// than the three launches' overlap: their down blocks copy while gate/up streams and nothing waits
// on a grid-wide barrier twice. What would remove the second barrier and the dots after it: each
// gate/up tile multiplying its own activations into the down columns it owns (the down weights
// streamed with the tile; 16-row tiles, since 8 columns are 16 bytes of a 32-byte sector),
// per-block fp32 partials of the H outputs, and a deterministic reduction of those partials in
// block order (by the next kernel, or each block reducing a slice after one barrier); atomics
// would make the bits depend on timing, which capsules cannot take.
// Built the same session as FROST_MOE_DECODE=cols (moe_decode_cols_kernel: the fused kernel's
// first half, then each block cp.async-copies the H x 8 down columns of its 8-row gate/up tiles
// right after routing, streams gate/up, forms its tiles' activations and a partial of every
// output into global memory; after the second barrier block b sums rows [b R, b R + R) over the
// blocks in block order). Correct: the routing bits and outputs within 1e-5 of the three launches,
// the same bits launch after launch (kernels_test_cuda_moe), model_test_cuda_engine_moe passed
// with it. But slower still: 1.637-1.645 against 1.443-1.453 ms/token (three rounds, one call),
// +10 us a layer. The down columns are 16 bytes at a row stride of I * 2 bytes: 2048 scattered
// half-sectors per tile (the neighbouring tile's block wants the other half, from another SM),
// ~20 cp.async per thread, where the three launches' down reads whole rows. Column ownership
// needs the down matrices stored transposed ([E, I, H]: a tile's 8 columns are 8 contiguous
// rows of H), which the batched down kernel and the prefill GEMM would have to read too.
// Removed after the measurement; the kernel and its test are in commit febc40f.
//
// The router as the quantized decode uses it (moe_router_launch: logits, then top-k), two ways to
// drop a launch, both built, passing bitwise tests, measured slower and removed (H200 2026-11-29,
// `frost bench engine --decode 1024 --decode-steps 64`, 35B-A3B FP8, ms/token, alternated, one
// call): (1) the router in one launch, the last logits block to finish (a fence and an atomic
// count) running the top-k: 8 layers 0.683 / 0.683 -> 0.714 / 0.712, 40 layers 2.353 -> 2.521;
// (2) the post-attention RMSNorm formed inside the logits kernel (every block normalising the row
// with add_rmsnorm's bits, block 0 writing x): 8 layers 0.683 -> 0.703 / 0.704, 40 layers 2.353
// -> 2.468 (bf16 experts: 0.790-0.799 -> 0.788-0.790, noise). As with the norm fusions of
// lm_norm.cu, the separate kernel's work overlaps under PDL; a fused serial tail does not.
//
// Earlier sessions' notes on the older kernels:
// Measured (H100, 2026-11-24, bench_ops on `frost synth --preset 35b-a3b --layers 4`, --pos 1024):
// `moe decode` 38.5 us per layer (1.50 TB/s, 2.0x the ~19 us floor; the one-block router and
// warp-per-row GEMVs before took 160 us). ncu, one row, caches flushed: logits 6.4 us (1 MB),
// gate/up 20.3 us (37.8 MB, 56 % of DRAM peak), down 16.8 us (18.9 MB, 34 %): each phase pays its
// own ramp, routing (~1-2 us) and drain. Tried and dropped: prefetching the shared expert (logits
// kernel) and the selected down matrices (after routing) into L2 with cp.async.bulk.prefetch, the
// gate/up stream loaded evict-first: bench_ops fell to 33 us per layer, but only because
// back-to-back replays of one layer then find its down / shared weights still in L2; the captured
// 4- and 8-layer decode got slower (0.683 -> 0.701 and 1.000 -> 1.027 ms/token). Gate/up grid of
// 1 / 2 / 3 / 4 blocks per SM: 33.8 / 32.8 / 35.4 / 37.2 us per layer (with that prefetch).
// Also tried and dropped (H100, 2026-11-24, engine decode on the 4-layer cut, two alternations):
// the down kernel routing its row itself from the logits (the same route_row) and issuing all its
// routed loads before pdl_wait, so the down weights stream during gate/up's last round: 0.690 ->
// 0.704 ms/token (the extra routing and index arithmetic cost more than the overlap gave); 18
// instead of 12 loads per lane in down: no change. The down kernel's index arithmetic counts: a
// rewrite with a second integer division per item was 2.3 us per layer slower (bench_ops), so
// items are now walked with a cursor and no division (4-layer cut 0.679 -> 0.674 ms/token with the
// gate/up change, about the run's noise). Kept: equal rounds per gate/up warp, the division-free
// down walk (with the PDL / attention changes of the same commit: 40 layers 3.51 -> 3.46 ms/token).
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_grid_barrier.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_common.cuh"

namespace frost::kernels {
namespace {

using namespace lm;
using moe::store_out;
using moe::valid;

constexpr int kLogitV = 8;        // 16-byte router loads per lane in flight: H 2048 in one go
constexpr int kLogitRows = 4;     // token rows per logits block when max_rows > 1 (8 spilled: x loads hoisted)
constexpr int kDecodeLogitWarps = 4;  // max_rows 1: 65 blocks for 257 router rows, spread over SMs
constexpr int kPrefillLogitWarps = 8;
constexpr int kTopkWarps = 8;     // rows per top-k block
constexpr int kDownWarps = 8;     // down: warps per block, one output element each
constexpr int kDownU = 12;        // 16-byte loads per lane in flight (35B-A3B: 18 per lane, 2 rounds)
constexpr size_t kDownSmemMax = 48u << 10;  // activations staged when (k + 1) * width fp32 fit

__host__ __device__ inline int ffn_width(const MoeBf16Params& p) { return p.I > p.Is ? p.I : p.Is; }
__device__ inline int ceil_div_dev(int a, int b) { return (a + b - 1) / b; }

// acc += Σ w[i] * x[i] over one 16-byte vector of bf16 weights and bf16 inputs, in index order.
// By value: with x a reference into global memory the pair casts below compiled to eight 4-byte
// loads of it (ld.global.v2.u16) instead of one 16-byte load.
__device__ inline void fma8(float& acc, const uint4 w, const uint4 x) {
    const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&w);
    const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 fa = __bfloat1622float2(a[i]), fb = __bfloat1622float2(b[i]);
        acc = fmaf(fa.x, fb.x, acc);
        acc = fmaf(fa.y, fb.y, acc);
    }
}

// The same with fp32 inputs (the activations between the expert GEMVs stay fp32).
__device__ inline float dot8f(const uint4& w, const float4& lo, const float4& hi) {
    const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&w);
    const float2 f0 = __bfloat1622float2(a[0]), f1 = __bfloat1622float2(a[1]);
    const float2 f2 = __bfloat1622float2(a[2]), f3 = __bfloat1622float2(a[3]);
    float d = f0.x * lo.x;
    d = fmaf(f0.y, lo.y, d); d = fmaf(f1.x, lo.z, d); d = fmaf(f1.y, lo.w, d);
    d = fmaf(f2.x, hi.x, d); d = fmaf(f2.y, hi.y, d); d = fmaf(f3.x, hi.z, d); d = fmaf(f3.y, hi.w, d);
    return d;
}

__device__ inline uint4 ldg16(const bf16* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// ---- router -------------------------------------------------------------------------------------

// Where the logits kernel writes: logit (r, e) at dst[r * ld + e] for e < E, the shared gate's at
// dst_shared[r * ld_shared].
struct LogitsOut {
    float* dst;
    int ld;
    float* dst_shared;
    int ld_shared;
};

// grid: (ceil((E + 1) / warps), ceil(max_rows / kR)). Warp w of block b: router row b * warps + w
// (row E = shared_gate) against token rows [blockIdx.y * kR, + kR). A lane holds kLogitV vectors
// of the weight row at a time (the whole row for H <= 2048) and reuses them for every token row.
template <int kR>
__global__ void __launch_bounds__(256, 1) moe_logits_kernel(MoeBf16Params p, LogitsOut o) {
    const int lane = threadIdx.x % kWarp, warps = blockDim.x / kWarp;
    const int e = blockIdx.x * warps + threadIdx.x / kWarp;
    const bool ok = e <= p.E;
    const bf16* w = !ok ? p.router : e < p.E ? p.router + static_cast<int64_t>(e) * p.H : p.shared_gate;
    const int nvec = p.H / kVec;
    uint4 wv[kLogitV];
    auto load = [&](int c0) {
#pragma unroll
        for (int u = 0; u < kLogitV; ++u) {
            const int v = c0 + lane + u * kWarp;
            if (ok && v < nvec) wv[u] = ldg16(w + v * kVec);
        }
    };
    load(0);  // the weights do not depend on the previous kernel
    pdl_wait();
    pdl_launch_dependents();
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int r0 = blockIdx.y * kR;
    if (!ok || r0 >= rows) return;
    float acc[kR];
#pragma unroll
    for (int rr = 0; rr < kR; ++rr) acc[rr] = 0.0f;
    for (int c0 = 0;;) {
#pragma unroll
        for (int rr = 0; rr < kR; ++rr) {
            if (r0 + rr >= rows) continue;
            const bf16* x = p.x + static_cast<int64_t>(r0 + rr) * p.H;
#pragma unroll
            for (int u = 0; u < kLogitV; ++u) {
                const int v = c0 + lane + u * kWarp;
                if (v < nvec) fma8(acc[rr], wv[u], *reinterpret_cast<const uint4*>(x + v * kVec));
            }
        }
        c0 += kLogitV * kWarp;
        if (c0 >= nvec) break;
        load(c0);
    }
#pragma unroll
    for (int rr = 0; rr < kR; ++rr) {
        if (r0 + rr >= rows) continue;
        const float s = warp_sum(acc[rr]);
        if (lane == 0) {
            const int64_t r = r0 + rr;
            if (e < p.E) o.dst[r * o.ld + e] = s;
            else o.dst_shared[r * o.ld_shared] = s;
        }
    }
}

// The k rounds of top-k over a warp's keys (a probability's bits as an int; ties to the lowest
// id): each round is two warp redux instructions (largest key, then lowest id holding it); lane j
// keeps round j's id and probability; the id's owner lane (id % 32) clears it and rescans its own
// entries (`take(id)`, which recomputes best / best_e: shared memory or registers).
template <class Take>
__device__ inline void pick_topk(const MoeBf16Params& p, int& best, int& best_e, int& my_id, float& my_p, Take&& take) {
    const int lane = threadIdx.x % kWarp;
    for (int j = 0; j < p.k; ++j) {
        const int m = __reduce_max_sync(kFullMask, best);
        int id = __reduce_min_sync(kFullMask, best == m ? best_e : INT_MAX);
        if (id < 0 || id >= p.E) id = 0;  // unreachable for k <= E; never an id outside the experts
        if (lane == j) {
            my_id = id;
            my_p = __int_as_float(m);
        }
        if (id % kWarp == lane) {  // the owner marks it taken and rescans its entries
            best = INT_MIN;
            best_e = INT_MAX;
            take(id);
        }
    }
}

// The routing's outputs from lane j's pick (my_id, my_p): mixing weights (renormalised over the
// k picks, summed in round order, where the config says), into shared memory and / or the row's
// topk_ids / topk_w, and the shared expert's sigmoid gate.
__device__ inline void finish_route(const MoeBf16Params& p, int r, float shared_logit, int my_id, float my_p,
                                    int32_t* ids_smem, bool write, float* w_smem) {
    const int lane = threadIdx.x % kWarp;
    float s = 0.0f;
    for (int j = 0; j < p.k; ++j) s += __shfl_sync(kFullMask, my_p, j);
    if (lane < p.k) {
        const float w = p.norm_topk ? my_p / s : my_p;
        if (ids_smem) ids_smem[lane] = my_id;
        if (w_smem) w_smem[lane] = w;
        if (write) {
            p.topk_ids[static_cast<int64_t>(r) * p.k + lane] = my_id;
            p.topk_w[static_cast<int64_t>(r) * p.k + lane] = w;
        }
    }
    if (write && lane == 0) p.shared_w[r] = sigmoid(shared_logit);
}

// One warp routes row r: probs = softmax_fp32(logits[0, E)), the k largest (ties: lower id
// first), their weights (renormalised when norm_topk). keys: [E] shared-memory scratch of this
// warp. Entry e belongs to lane e % 32 throughout (only that lane reads or writes keys[e], so the
// warp needs no barrier). A probability is >= +0, so its bits order like the value as an int:
// each round is two warp redux instructions (largest key, then lowest id holding it). ids_smem
// (may be null) receives the ids, w_smem (may be null) the mixing weights (topk_w's values); `write`
// stores probs / topk_ids / topk_w / shared_w of row r.
// `logits` may alias p.probs' row (the top-k kernel converts it in place: same lane, same entry).
__device__ void route_row_smem(const MoeBf16Params& p, int r, const float* logits, float shared_logit, int* keys,
                               int32_t* ids_smem, bool write, float* w_smem) {
    const int lane = threadIdx.x % kWarp;
    float mx = -INFINITY;
    for (int e = lane; e < p.E; e += kWarp) mx = fmaxf(mx, logits[e]);
    mx = warp_max(mx);
    float part = 0.0f;
    for (int e = lane; e < p.E; e += kWarp) {
        const float v = expf(logits[e] - mx);
        keys[e] = __float_as_int(v);
        part += v;
    }
    const float sum = warp_sum(part);
    float* probs = p.probs + static_cast<int64_t>(r) * p.E;
    int best = INT_MIN, best_e = INT_MAX;
    for (int e = lane; e < p.E; e += kWarp) {
        const float pr = __int_as_float(keys[e]) / sum;
        keys[e] = __float_as_int(pr);
        if (write) probs[e] = pr;
        if (keys[e] > best) {  // ascending e: the first of equal values stays
            best = keys[e];
            best_e = e;
        }
    }
    int my_id = 0;
    float my_p = 0.0f;
    pick_topk(p, best, best_e, my_id, my_p, [&](int id) {
        keys[id] = INT_MIN;
        for (int e = lane; e < p.E; e += kWarp)
            if (keys[e] > best) {
                best = keys[e];
                best_e = e;
            }
    });
    finish_route(p, r, shared_logit, my_id, my_p, ids_smem, write, w_smem);
}

// route_row_smem's arithmetic with a lane's kPer entries (e = lane + 32 i) held in registers
// (E <= 32 kPer): the logits are loaded at once and each top-k round rescans registers instead
// of shared memory, so routing (on the critical path of every decode step's gate/up) is about
// half as long. Same operations in the same order, so the same bits.
template <int kPer>
__device__ void route_row_reg(const MoeBf16Params& p, int r, const float* logits, float shared_logit,
                              int32_t* ids_smem, bool write, float* w_smem) {
    const int lane = threadIdx.x % kWarp;
    float v[kPer];
    int key[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int e = lane + i * kWarp;
        v[i] = e < p.E ? logits[e] : -INFINITY;
    }
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
        if (lane + i * kWarp < p.E) mx = fmaxf(mx, v[i]);
    mx = warp_max(mx);
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
        if (lane + i * kWarp < p.E) {
            v[i] = expf(v[i] - mx);
            part += v[i];
        }
    const float sum = warp_sum(part);
    float* probs = p.probs + static_cast<int64_t>(r) * p.E;
    int best = INT_MIN, best_e = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int e = lane + i * kWarp;
        key[i] = INT_MIN;
        if (e < p.E) {
            const float pr = v[i] / sum;
            key[i] = __float_as_int(pr);
            if (write) probs[e] = pr;
            if (key[i] > best) {
                best = key[i];
                best_e = e;
            }
        }
    }
    int my_id = 0;
    float my_p = 0.0f;
    pick_topk(p, best, best_e, my_id, my_p, [&](int id) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const int e = lane + i * kWarp;
            if (e == id) key[i] = INT_MIN;
            if (e < p.E && key[i] > best) {
                best = key[i];
                best_e = e;
            }
        }
    });
    finish_route(p, r, shared_logit, my_id, my_p, ids_smem, write, w_smem);
}

// Routes row r (see route_row_smem) with the register version where E allows (keys unused then).
__device__ void route_row(const MoeBf16Params& p, int r, const float* logits, float shared_logit, int* keys,
                          int32_t* ids_smem, bool write, float* w_smem = nullptr) {
    if (p.E <= 8 * kWarp) route_row_reg<8>(p, r, logits, shared_logit, ids_smem, write, w_smem);
    else if (p.E <= 16 * kWarp) route_row_reg<16>(p, r, logits, shared_logit, ids_smem, write, w_smem);
    else route_row_smem(p, r, logits, shared_logit, keys, ids_smem, write, w_smem);
}

// Router top-k for moe_router_launch: one warp per row, in place over the logits the logits
// kernel left in probs (and the shared gate's in shared_w). grid: ceil(max_rows / kTopkWarps);
// dynamic smem: kTopkWarps * E ints.
__global__ void __launch_bounds__(kTopkWarps * kWarp) moe_topk_kernel(MoeBf16Params p) {
    extern __shared__ int topk_keys[];
    pdl_wait();
    pdl_launch_dependents();
    const int warp = threadIdx.x / kWarp;
    const int r = blockIdx.x * kTopkWarps + warp;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    route_row(p, r, p.probs + static_cast<int64_t>(r) * p.E, p.shared_w[r], topk_keys + warp * p.E, nullptr, true);
}

// ---- decode experts -------------------------------------------------------------------------------

// Decode scratch in p.act: the activations [max_rows, k + 1, width], then the fused path's
// logits [max_rows, E + 1] (experts, then the shared gate).
__host__ __device__ inline float* logits_of(const MoeBf16Params& p) {
    return p.act + static_cast<int64_t>(p.max_rows) * (p.k + 1) * ffn_width(p);
}

// Gate/up on bf16 tensor cores (mma.m16n8k16, fp32 accumulation), lm_gemv_tc.cu's mapping. A
// tile is 16 weight rows: 8 gate rows j0 .. j0 + 7 of one slot (the shared expert, then the k
// routed ones) and their 8 up rows, so lane L's accumulators d[0] / d[2] (rows L / 4 and L / 4 + 8,
// column 0) are a gate and its up value. B's column 0 is x (lanes 0-3 give it; the other columns
// are zeros). The block's 16 warps split K in 64-wide steps, interleaved (step s = warp + 16 i);
// a lane loads 2 x 16 bytes of each of its two rows per step, two steps per stage, and the next
// tile's stage is in flight while the current one is multiplied (two register stages). Each
// warp keeps its partials of the block's tiles in shared memory; after the last tile the 16 warp
// partials of each gate row are summed in warp order: act = silu(g) * u (fp32). A SIMT version
// with two register stages (one warp per (gate, up) pair) was issue-bound: 3.7 M instructions for
// the 35B-A3B layer's 38 MB, 1.25 TB/s under ncu (H100, 2026-11-24).
// grid: (blocks <= SMs, max_rows); dynamic smem: gm_smem_bytes (x, route keys, warp partials).
// kRoute: the block routes row r from the logits itself; otherwise it reads p.topk_ids. The
// bits of a row depend only on that row (not on max_rows or the grid). l2_prefetch
// (FROST_MOE_GU_L2=1, an A/B switch, measured slower): the block's tiles past the first two are
// bulk-prefetched into L2 after routing.
constexpr int kGmWarps = 16;  // one 512-thread block per SM
constexpr int kGmU = 2;       // 64-wide k steps per warp per register stage
constexpr int kGmStepK = 64;
constexpr int kGmRegs = 96;   // 512 x 96 + the streaming down block's 256 x 56 fit the 64 K registers

// `bytes` (a multiple of 16, 16-byte aligned) from global memory into L2, no completion to wait on.
__device__ inline void prefetch_l2_bulk(const void* ptr, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(ptr), "r"(bytes) : "memory");
#endif
}

__host__ __device__ inline size_t gm_x_bytes(const MoeBf16Params& p) {
    return (static_cast<size_t>(p.H) * sizeof(bf16) + 15) / 16 * 16;
}

// One block's gate/up work: its tiles (blockIdx.x + n * gridDim.x), their loads, mma order and partial
// sums, as described above. moe_gate_up_mma_kernel and the one-launch decode share it, so their
// bits are equal. ids: the row's k expert ids (shared memory) by the time the first routed tile
// loads; xs: the row's x (shared memory); partial (set before stream): [my_tiles][kGmWarps][16]
// floats.
struct GateUpBlock {
    using Stage = uint4[kGmU][2][2];  // [step][row gid / gid + 8][word]
    const MoeBf16Params& p;
    const int32_t* ids;
    const bf16* xs;
    float* partial;
    int warp, t4, gid, groups, tiles_s, tiles_r, tiles, my_tiles, items;
    float d[4];
    __device__ __forceinline__ GateUpBlock(const MoeBf16Params& p_, const int32_t* ids_, const bf16* xs_)
        : p(p_), ids(ids_), xs(xs_), partial(nullptr) {
        warp = threadIdx.x / kWarp;
        const int lane = threadIdx.x % kWarp;
        t4 = lane % 4;
        gid = lane / 4;
        const int steps = ceil_div_dev(p.H, kGmStepK);
        groups = ceil_div_dev(steps, kGmWarps * kGmU);  // stages per tile (1 for H <= 2048)
        tiles_s = p.Is / 8;
        tiles_r = p.I / 8;
        tiles = tiles_s + p.k * tiles_r;
        my_tiles = blockIdx.x < tiles ? ceil_div_dev(tiles - blockIdx.x, gridDim.x) : 0;
        items = my_tiles * groups;
    }
    // Tile `tile`: slot (k = the shared expert) and its first FFN row j0.
    __device__ __forceinline__ void tile_of(int tile, int& slot, int& j0) const {
        if (tile < tiles_s) {
            slot = p.k;
            j0 = tile * 8;
        } else {
            slot = (tile - tiles_s) / tiles_r;
            j0 = (tile - tiles_s - slot * tiles_r) * 8;
        }
    }
    // The weights of item n (tile n / groups, K stage n % groups) into registers.
    __device__ __forceinline__ void load(Stage& w, int n) const {
        int slot, j0;
        tile_of(blockIdx.x + (n / groups) * gridDim.x, slot, j0);
        const int grp = n % groups;
        const bool shared = slot == p.k;
        const int F = shared ? p.Is : p.I;
        const bf16* base =
            shared ? p.shared_gate_up : p.experts_gate_up + static_cast<int64_t>(ids[slot]) * 2 * p.I * p.H;
        const bf16* g_row = base + static_cast<int64_t>(j0 + gid) * p.H;
        const bf16* u_row = base + static_cast<int64_t>(F + j0 + gid) * p.H;
#pragma unroll
        for (int u = 0; u < kGmU; ++u) {
            const int s = warp + kGmWarps * (grp * kGmU + u);
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const int kk = s * kGmStepK + 16 * t4 + 8 * q;
                const bool ok = kk < p.H;
                w[u][0][q] = ok ? ldg16(g_row + kk) : make_uint4(0, 0, 0, 0);
                w[u][1][q] = ok ? ldg16(u_row + kk) : make_uint4(0, 0, 0, 0);
            }
        }
    }
    __device__ __forceinline__ void consume(const Stage& w, int n) {
        const int grp = n % groups;
        if (grp == 0) d[0] = d[1] = d[2] = d[3] = 0.0f;
#pragma unroll
        for (int u = 0; u < kGmU; ++u) {
            const int s = warp + kGmWarps * (grp * kGmU + u);
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const int kk = s * kGmStepK + 16 * t4 + 8 * q;
                uint4 xv = make_uint4(0, 0, 0, 0);
                if (gid == 0 && kk < p.H) xv = *reinterpret_cast<const uint4*>(xs + kk);
                mma_bf16(d, w[u][0][q].x, w[u][1][q].x, w[u][0][q].y, w[u][1][q].y, xv.x, xv.y);
                mma_bf16(d, w[u][0][q].z, w[u][1][q].z, w[u][0][q].w, w[u][1][q].w, xv.z, xv.w);
            }
        }
        if (grp != groups - 1 || t4 != 0) return;
        float* part = partial + ((n / groups) * kGmWarps + warp) * 16;
        part[gid] = d[0];
        part[gid + 8] = d[2];
    }
    // Every item, wa holding item 0 already: the next item's loads go out before n's mmas.
    __device__ __forceinline__ void stream(Stage& wa, Stage& wb) {
        d[0] = d[1] = d[2] = d[3] = 0.0f;
        for (int n = 0;;) {
            if (n + 1 < items) load(wb, n + 1);
            consume(wa, n);
            if (++n >= items) break;
            if (n + 1 < items) load(wa, n + 1);
            consume(wb, n);
            if (++n >= items) break;
        }
    }
    // After a block barrier: the 16 warp partials of each gate row summed in warp order, act =
    // silu(g) * u into row r's [k + 1, width] activations.
    __device__ __forceinline__ void write_act(int r, int width) const {
        for (int i = threadIdx.x; i < my_tiles * 8; i += blockDim.x) {
            const int it = i / 8, g = i % 8;
            int slot, j0;
            tile_of(blockIdx.x + it * gridDim.x, slot, j0);
            p.act[(static_cast<int64_t>(r) * (p.k + 1) + slot) * width + j0 + g] = act_of(it, g);
        }
    }
    // Activation g (0-7) of the block's tile it: its 16 warp partials in warp order, silu(g) * u.
    __device__ __forceinline__ float act_of(int it, int g) const {
        const float* part = partial + it * kGmWarps * 16;
        float gs = 0.0f, up = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kGmWarps; ++wi) {
            gs += part[wi * 16 + g];
            up += part[wi * 16 + g + 8];
        }
        return silu(gs) * up;
    }
};

template <bool kRoute>
__global__ void __maxnreg__(kGmRegs) moe_gate_up_mma_kernel(MoeBf16Params p, int l2_prefetch) {
    extern __shared__ __align__(16) unsigned char gm_smem[];
    bf16* xs = reinterpret_cast<bf16*>(gm_smem);
    int* keys = reinterpret_cast<int*>(gm_smem + gm_x_bytes(p));
    __shared__ int32_t ids[kMoeMaxTopK];
    GateUpBlock t(p, ids, xs);
    const int warp = t.warp, r = blockIdx.y;
    const int width = ffn_width(p);
    // [my_tiles][kGmWarps][16] warp partials, summed once at the end: no barrier per tile, so
    // every warp streams its slices of the block's tiles at its own pace.
    t.partial = reinterpret_cast<float*>(gm_smem + gm_x_bytes(p) + (kRoute ? sizeof(int) * p.E : 0));
    GateUpBlock::Stage wa, wb;
    const bool preloaded = kRoute && t.items > 0 && blockIdx.x < t.tiles_s;  // shared rows need no routing
    if (preloaded) t.load(wa, 0);
    pdl_wait();               // logits / ids and x come from earlier kernels
    pdl_launch_dependents();  // the down grid may start now (the streaming one loads its weights)
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const bf16* x = p.x + static_cast<int64_t>(r) * p.H;
    const int nvec = p.H / kVec;
    if constexpr (kRoute) {
        if (warp == 0) {
            const float* lg = logits_of(p) + static_cast<int64_t>(r) * (p.E + 1);
            route_row(p, r, lg, lg[p.E], keys, ids, blockIdx.x == 0);
        } else {
            for (int i = threadIdx.x - kWarp; i < nvec; i += blockDim.x - kWarp)
                reinterpret_cast<uint4*>(xs)[i] = reinterpret_cast<const uint4*>(x)[i];
        }
    } else {
        if (threadIdx.x < p.k) {
            const int e = p.topk_ids[static_cast<int64_t>(r) * p.k + threadIdx.x];
            ids[threadIdx.x] = e < 0 || e >= p.E ? 0 : e;  // never read outside the expert tensors
        }
        for (int i = threadIdx.x; i < nvec; i += blockDim.x)
            reinterpret_cast<uint4*>(xs)[i] = reinterpret_cast<const uint4*>(x)[i];
    }
    __syncthreads();
    if (t.items == 0) return;
    if (!preloaded) t.load(wa, 0);
    if (l2_prefetch) {  // FROST_MOE_GU_L2=1: the block's tiles past the two register stages into L2
        for (int i = threadIdx.x; i < (t.my_tiles - 2) * 16; i += blockDim.x) {  // one row (H bf16) each
            const int it = 2 + i / 16, row = i % 16;
            int slot, j0;
            t.tile_of(blockIdx.x + it * gridDim.x, slot, j0);
            const bool shared = slot == p.k;
            const int F = shared ? p.Is : p.I;
            const bf16* base =
                shared ? p.shared_gate_up : p.experts_gate_up + static_cast<int64_t>(ids[slot]) * 2 * p.I * p.H;
            const int fr = row < 8 ? j0 + row : F + j0 + row - 8;
            prefetch_l2_bulk(base + static_cast<int64_t>(fr) * p.H, p.H * sizeof(bf16));
        }
    }
    t.stream(wa, wb);
    __syncthreads();
    t.write_act(r, width);
}

// grid: (ceil(H / kDownWarps), max_rows); dynamic smem: the row's (k + 1) x width activations
// when kSmemAct (else they are read from global memory through L2). Warp w: output h. A lane's
// items are the 16-byte vectors f = lane + 32 t of the flattened [the shared row of Is, then the
// k routed rows of I], each weighted by its slot's mixing weight into one fp32 partial, then one
// warp sum. The shared row comes first: its loads of the first round are issued before pdl_wait.
template <bool kSmemAct>
__global__ void __launch_bounds__(kDownWarps * kWarp, 2) moe_down_kernel(MoeBf16Params p) {
    extern __shared__ __align__(16) float act_s[];
    __shared__ const bf16* rows_of[kMoeMaxTopK + 1];  // slot -> its [H, I] (or [H, Is]) matrix
    __shared__ float mix[kMoeMaxTopK + 1];
    const int lane = threadIdx.x % kWarp;
    const int h = blockIdx.x * kDownWarps + threadIdx.x / kWarp;
    const int nI = p.I / kVec, nIs = p.Is / kVec, total = nIs + p.k * nI;
    uint4 wv[kDownU];
    int slot[kDownU], off[kDownU];
#pragma unroll
    for (int u = 0; u < kDownU; ++u) {  // the first round's shared-expert loads
        const int f = lane + u * kWarp;
        if (h < p.H && f < nIs) wv[u] = ldg16(p.shared_down + static_cast<int64_t>(h) * p.Is + f * kVec);
    }
    pdl_wait();
    pdl_launch_dependents();
    const int r = blockIdx.y;
    if (r >= launch_rows(p.n_rows, p.max_rows)) return;
    const int width = ffn_width(p);
    const float* act_g = p.act + static_cast<int64_t>(r) * (p.k + 1) * width;
    if (threadIdx.x < p.k) {
        int e = p.topk_ids[static_cast<int64_t>(r) * p.k + threadIdx.x];
        e = e < 0 || e >= p.E ? 0 : e;  // never read outside the expert tensors
        rows_of[threadIdx.x] = p.experts_down + static_cast<int64_t>(e) * p.H * p.I;
        mix[threadIdx.x] = p.topk_w[static_cast<int64_t>(r) * p.k + threadIdx.x];
    } else if (threadIdx.x == p.k) {
        rows_of[p.k] = p.shared_down;
        mix[p.k] = p.shared_w[r];
    }
    if constexpr (kSmemAct) {
        const int n4 = (p.k + 1) * width / 4;
        for (int i = threadIdx.x; i < n4; i += blockDim.x)
            reinterpret_cast<float4*>(act_s)[i] = __ldcg(reinterpret_cast<const float4*>(act_g) + i);
    }
    __syncthreads();
    if (h >= p.H) return;
    // The lane's item f as a cursor (segment, vector): segment -1 = the shared row (nIs vectors),
    // s >= 0 = routed slot s (nI), moved on by 32 vectors per item with compares and subtracts
    // rather than a division per item (the integer divisions were a large share of this
    // kernel's instructions; same items in the same order, so the same bits).
    int seg = -1, v = lane;
    auto settle = [&] {
        while (seg < p.k && v >= (seg < 0 ? nIs : nI)) {
            v -= seg < 0 ? nIs : nI;
            ++seg;
        }
    };
    settle();
    float acc = 0.0f;
    for (int t0 = 0; t0 * kWarp < total; t0 += kDownU) {
#pragma unroll
        for (int u = 0; u < kDownU; ++u) {
            const int f = lane + (t0 + u) * kWarp;
            slot[u] = -1;
            if (f < total) {
                const bool shared = seg < 0;
                slot[u] = shared ? p.k : seg;
                off[u] = v * kVec;
                if (!shared || t0 > 0)
                    wv[u] = ldg16(rows_of[slot[u]] + static_cast<int64_t>(h) * (shared ? p.Is : p.I) + off[u]);
            }
            v += kWarp;
            settle();
        }
#pragma unroll
        for (int u = 0; u < kDownU; ++u) {
            if (slot[u] < 0) continue;
            const float* a = (kSmemAct ? act_s : act_g) + slot[u] * width + off[u];
            float4 lo, hi;
            if constexpr (kSmemAct) {
                lo = *reinterpret_cast<const float4*>(a);
                hi = *reinterpret_cast<const float4*>(a + 4);
            } else {
                lo = __ldcg(reinterpret_cast<const float4*>(a));
                hi = __ldcg(reinterpret_cast<const float4*>(a + 4));
            }
            acc = fmaf(mix[slot[u]], dot8f(wv[u], lo, hi), acc);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        const int64_t at = static_cast<int64_t>(r) * p.H + h;
        if (p.out) p.out[at] = acc;
        if (p.out_bf16) store_out(p, at, acc);
    }
}

// ---- one-row decode: a down grid that loads its weights while gate/up runs -------------------
//
// For max_rows 1 (op_moe's solo decode step) on sm_90. Same arithmetic per output as
// moe_down_kernel, so the same bits (a batched member, which takes that kernel, equals its solo
// step). Each block owns R consecutive output rows (one block per SM). It starts as soon as
// gate/up has passed its pdl_wait (and sits beside it on the SM: gate/up leaves registers and
// shared memory for it), routes the row itself from the logits, and has the copy engine bring its
// R rows of the shared and the k routed down matrices into shared memory (cp.async.bulk, one
// mbarrier): the down weights stream during gate/up. After its pdl_wait only the activations are
// read (L2) and the dots run from shared memory.

// mbarrier and bulk-copy primitives (PTX ISA: mbarrier, cp.async.bulk), one barrier per block.
__device__ inline void mbar_init_one(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// The single arrival, announcing `bytes` of bulk copies that complete on this barrier.
__device__ inline void mbar_arrive_expect(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory.
__device__ inline void bulk_load(void* dst, const void* src, uint32_t bytes, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
#endif
}
__device__ inline void mbar_wait_phase0(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar)
            : "memory");
    } while (!done);
#endif
}

constexpr int kDsWarps = 8;   // streaming down: warps per block, two output rows at a time each
constexpr int kDsRegs = 80;

// The shared-memory layout of the streaming down block (R rows): logits [E + 1] f32, keys [E]
// i32, then (16-byte aligned) the activations as [k + 1, width / 8] 16-byte halves (lo then hi
// arrays, so a warp's reads are contiguous), then the weights: routed slot s at s * R * I
// (R x I), the shared expert's R x Is after them.
struct DsLayout {
    size_t act, act_hi, w, bytes;
};
__host__ __device__ inline DsLayout ds_layout(const MoeBf16Params& p, int R) {
    DsLayout l{};
    const size_t halves = static_cast<size_t>(p.k + 1) * (ffn_width(p) / kVec) * 16;  // bytes of one half array
    l.act = (sizeof(float) * (2 * static_cast<size_t>(p.E) + 1) + 15) / 16 * 16;
    l.act_hi = l.act + halves;
    l.w = l.act_hi + halves;
    l.bytes = l.w + sizeof(bf16) * static_cast<size_t>(R) * (static_cast<size_t>(p.k) * p.I + p.Is);
    return l;
}

// Row 0's [k + 1, wv] activations (fp32, 8 per 16-byte pair) from global memory (through L2) into
// shared memory as separate lo and hi 16-byte halves, so a warp's reads of either are contiguous.
__device__ __forceinline__ void stage_act(const MoeBf16Params& p, unsigned char* lo_bytes, unsigned char* hi_bytes,
                                          int wv) {
    const float4* act_g = reinterpret_cast<const float4*>(p.act);
    uint4* lo = reinterpret_cast<uint4*>(lo_bytes);
    uint4* hi = reinterpret_cast<uint4*>(hi_bytes);
    for (int i = threadIdx.x; i < (p.k + 1) * wv; i += blockDim.x) {
        const float4 a = __ldcg(act_g + 2 * i), b = __ldcg(act_g + 2 * i + 1);
        lo[i] = *reinterpret_cast<const uint4*>(&a);
        hi[i] = *reinterpret_cast<const uint4*>(&b);
    }
}

// Rows [h0, h0 + nr) of the down output from shared memory: ws holds the k routed slots' R x I
// rows, ws_shared the shared expert's R x Is, act_lo / act_hi the activations as [k + 1, wv]
// 16-byte halves, mix the k + 1 mixing weights. Warp w of nwarps takes rows hr = 2w, 2w + 1, then
// + 2 * nwarps: per output moe_down_kernel's sequence (a lane's items in order, one warp sum), so
// its bits. moe_down_stream_kernel and the one-launch decode share it.
__device__ __forceinline__ void down_rows(const MoeBf16Params& p, int R, int h0, int nr, int nwarps, const bf16* ws,
                                          const bf16* ws_shared, const uint4* act_lo, const uint4* act_hi,
                                          const float* mix, int wv) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int nI = p.I / kVec, nIs = p.Is / kVec, total = nIs + p.k * nI;
    for (int hr = 2 * warp; hr < nr; hr += 2 * nwarps) {
        const bool two = hr + 1 < nr;
        int seg = -1, v = lane;  // moe_down_kernel's cursor: segment -1 = the shared row
        auto settle = [&] {
            while (seg < p.k && v >= (seg < 0 ? nIs : nI)) {
                v -= seg < 0 ? nIs : nI;
                ++seg;
            }
        };
        settle();
        float a0 = 0.0f, a1 = 0.0f;
        if (nIs % kWarp == 0 && nI % kWarp == 0) {
            // Every segment a whole number of lane rounds (Is, I multiples of 256): a lane's items
            // are v = lane + 32 j of each segment in turn, the cursor's order (the loop below), so
            // the same bits, without its data-dependent walk, so consecutive items' loads and
            // dots overlap. Measured (H200, 2026-12-03, a timeline harness of the 35B-A3B shape's
            // captured MoE decode, globaltimer stamps per block, this loop's text against the
            // cursor's): copies landed -> last dot 4.1 -> 3.3 us, 32.5 -> 31.6 us per MoE layer
            // back to back, 56.4 -> 55.6 with a GEMV-like launch between the layers; the outputs'
            // bits equal.
            for (int s2 = -1; s2 < p.k; ++s2) {
                const bool sh = s2 < 0;
                const int slot = sh ? p.k : s2;
                const int F = sh ? p.Is : p.I;
                const int n = sh ? nIs : nI;
                const bf16* wrow = (sh ? ws_shared : ws + static_cast<size_t>(s2) * R * p.I) + hr * F;
                const uint4* alo = act_lo + slot * wv;
                const uint4* ahi = act_hi + slot * wv;
                const float m = mix[slot];
#pragma unroll 2
                for (int v2 = lane; v2 < n; v2 += kWarp) {
                    const uint4 ua = alo[v2], ub = ahi[v2];
                    const float4 flo = *reinterpret_cast<const float4*>(&ua);
                    const float4 fhi = *reinterpret_cast<const float4*>(&ub);
                    const uint4 w0 = *reinterpret_cast<const uint4*>(wrow + v2 * kVec);
                    a0 = fmaf(m, dot8f(w0, flo, fhi), a0);
                    if (two) a1 = fmaf(m, dot8f(*reinterpret_cast<const uint4*>(wrow + F + v2 * kVec), flo, fhi), a1);
                }
            }
        } else
        for (int f = lane; f < total; f += kWarp) {
            const bool shared = seg < 0;
            const int slot = shared ? p.k : seg;
            const int F = shared ? p.Is : p.I;
            const bf16* w = (shared ? ws_shared : ws + static_cast<size_t>(seg) * R * p.I) + hr * F + v * kVec;
            const uint4 ua = act_lo[slot * wv + v], ub = act_hi[slot * wv + v];
            const float4 flo = *reinterpret_cast<const float4*>(&ua), fhi = *reinterpret_cast<const float4*>(&ub);
            const float m = mix[slot];
            a0 = fmaf(m, dot8f(*reinterpret_cast<const uint4*>(w), flo, fhi), a0);
            if (two) a1 = fmaf(m, dot8f(*reinterpret_cast<const uint4*>(w + F), flo, fhi), a1);
            v += kWarp;
            settle();
        }
        a0 = warp_sum(a0);
        a1 = warp_sum(a1);
        if (lane == 0) {
            const int h = h0 + hr;
            if (p.out) p.out[h] = a0;
            if (p.out_bf16) store_out(p, h, a0);
            if (two) {
                if (p.out) p.out[h + 1] = a1;
                if (p.out_bf16) store_out(p, h + 1, a1);
            }
        }
    }
}

// grid: (ceil(H / R)); dynamic smem: ds_layout(p, R).bytes. Row 0 only. Output h = block * R +
// hr; warp w takes rows hr = 2w, 2w + 1 (then + 2 * kDsWarps): per lane the items f = lane + 32 t
// of [the shared row (Is / 8 vectors), then the k routed rows (I / 8 each)] in order, weighted by
// the slot's mixing weight, then one warp sum: moe_down_kernel's sequence, so its bits. bulk 0
// (FROST_MOE_DOWN=cpasync, an A/B switch, no faster): the rows come by per-thread cp.async.
__global__ void __maxnreg__(kDsRegs) moe_down_stream_kernel(MoeBf16Params p, int R, int bulk) {
    extern __shared__ __align__(16) unsigned char ds_smem[];
    __shared__ __align__(8) uint64_t bar_storage;
    __shared__ int32_t ids[kMoeMaxTopK];
    __shared__ float mix[kMoeMaxTopK + 1];
    const DsLayout L = ds_layout(p, R);
    float* lg = reinterpret_cast<float*>(ds_smem);
    int* keys = reinterpret_cast<int*>(lg + p.E + 1);
    const uint4* act_lo = reinterpret_cast<const uint4*>(ds_smem + L.act);
    const uint4* act_hi = reinterpret_cast<const uint4*>(ds_smem + L.act_hi);
    bf16* ws = reinterpret_cast<bf16*>(ds_smem + L.w);
    bf16* ws_shared = ws + static_cast<size_t>(p.k) * R * p.I;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int h0 = blockIdx.x * R;
    const int nr = min(R, p.H - h0);
    const uint32_t bar = smem_addr(&bar_storage);
    if (threadIdx.x == 0) mbar_init_one(bar);
    __syncthreads();
    // Before pdl_wait: nothing an earlier kernel of this launch still writes. The logits are
    // final (the gate/up grid let this grid start only after its own wait on the logits kernel).
    if (bulk && threadIdx.x == 0) {
        mbar_arrive_expect(bar, static_cast<uint32_t>(sizeof(bf16) * nr * (static_cast<size_t>(p.k) * p.I + p.Is)));
        bulk_load(ws_shared, p.shared_down + static_cast<int64_t>(h0) * p.Is, sizeof(bf16) * nr * p.Is, bar);
    }
    if (!bulk)  // FROST_MOE_DOWN=cpasync: 16-byte cp.async by every thread instead of the copy engine
        for (int i = threadIdx.x; i < nr * p.Is / kVec; i += blockDim.x)
            cp_async16(ws_shared + i * kVec, p.shared_down + static_cast<int64_t>(h0) * p.Is + i * kVec);
    if (warp == 0) {
        const float* lg_g = logits_of(p);
        for (int e = lane; e <= p.E; e += kWarp) lg[e] = __ldcg(lg_g + e);
        __syncwarp();
        route_row(p, 0, lg, lg[p.E], keys, ids, false, mix);  // ids always in [0, E)
        __syncwarp();
        if (bulk && lane < p.k)
            bulk_load(ws + static_cast<size_t>(lane) * R * p.I,
                      p.experts_down + (static_cast<int64_t>(ids[lane]) * p.H + h0) * p.I, sizeof(bf16) * nr * p.I, bar);
        if (lane == 0) mix[p.k] = sigmoid(lg[p.E]);  // shared_w's value
    }
    if (!bulk) {
        __syncthreads();  // ids
        for (int j = 0; j < p.k; ++j) {
            const bf16* src = p.experts_down + (static_cast<int64_t>(ids[j]) * p.H + h0) * p.I;
            for (int i = threadIdx.x; i < nr * p.I / kVec; i += blockDim.x)
                cp_async16(ws + static_cast<size_t>(j) * R * p.I + i * kVec, src + i * kVec);
        }
        cp_async_commit();
    }
    pdl_wait();  // the activations (gate/up) and the output buffer
    pdl_launch_dependents();
    const bool live = launch_rows(p.n_rows, 1) > 0;
    const int width = ffn_width(p), wv = width / kVec;
    if (live) stage_act(p, ds_smem + L.act, ds_smem + L.act_hi, wv);
    if (bulk) mbar_wait_phase0(bar);  // never leave with copies into this block's shared memory in flight
    else cp_async_wait<0>();
    __syncthreads();  // the activations (and the cp.async copies of every thread)
    if (!live) return;
    down_rows(p, R, h0, nr, kDsWarps, ws, ws_shared, act_lo, act_hi, mix, wv);
}

// ---- one-row decode in one launch (prototype: FROST_MOE_DECODE=fused) ---------------------------
//
// moe_decode_launch's three launches as one grid of one 512-thread block per SM, every block
// resident at once (the launcher checks), meeting twice at a grid-wide barrier:
//   before the programmatic wait: the block's share of the router rows (e = block + i * grid, row E
//   the shared gate) and its R output rows of the shared expert's down matrix come by bulk copies
//   into shared memory; blocks holding a shared-expert gate/up tile load its first stage.
//   logits: each block's rows against x (staged in shared memory), the logits kernel's arithmetic.
//   barrier 1; every block routes the row from the logits (route_row, one warp), then its R rows of
//   the k routed down matrices come by bulk copies while gate/up streams (moe_gate_up_mma_kernel's
//   tiles and arithmetic).
//   barrier 2 (every activation written); the next launch may start; the block's R down outputs
//   from shared memory (moe_down_stream_kernel's arithmetic).
// So its bits are the three launches' bits. What it was to remove (lm_moe.cu's records,
// 2026-12-03): the logits launch's link in the chain (~4 us a layer), the down launch's wait and
// the down blocks that could not start beside gate/up (~3-5 us). Measured the next session: 5 %
// slower than the three launches (the records above say where).
// sync: a 64-bit counter that only grows; a multiple of the grid size whenever no launch runs (zero
// at allocation; each barrier adds one per block). One launch at a time per counter.
constexpr int kFuWarps = kGmWarps;  // gate/up's K split over 16 warps: its bits
constexpr int kFuMaxRouterRows = 4;

struct FuLayout {
    size_t xs, keys, lg, partial, router, act, act_hi, w, bytes;
};
__host__ __device__ inline size_t fu_take(size_t& off, size_t bytes) {
    const size_t at = off;
    off += (bytes + 15) / 16 * 16;
    return at;
}
__host__ __device__ inline int fu_router_rows(const MoeBf16Params& p, int G) { return (p.E + 1 + G - 1) / G; }
__host__ __device__ inline FuLayout fu_layout(const MoeBf16Params& p, int G, int R) {
    FuLayout l{};
    size_t off = 0;
    const int tiles = p.Is / 8 + p.k * (p.I / 8);
    const size_t halves = static_cast<size_t>(p.k + 1) * (ffn_width(p) / kVec) * 16;
    l.xs = fu_take(off, sizeof(bf16) * p.H);
    l.keys = fu_take(off, sizeof(int) * p.E);
    l.lg = fu_take(off, sizeof(float) * (p.E + 1));
    l.partial = fu_take(off, sizeof(float) * ((tiles + G - 1) / G) * kFuWarps * 16);
    l.router = fu_take(off, sizeof(bf16) * static_cast<size_t>(fu_router_rows(p, G)) * p.H);
    l.act = fu_take(off, halves);
    l.act_hi = fu_take(off, halves);
    l.w = fu_take(off, sizeof(bf16) * static_cast<size_t>(R) * (static_cast<size_t>(p.k) * p.I + p.Is));
    l.bytes = off;
    return l;
}

// Thread 0: the block's router rows (expert blockIdx.x + i * grid, row E the shared gate) into
// rrows by bulk copies on bar, which also expects `extra` bytes of the caller's own copies.
__device__ inline void fu_copy_router(const MoeBf16Params& p, bf16* rrows, int rows_b, uint32_t bar, uint32_t extra) {
    uint32_t bytes = extra;
    for (int i = 0; i < rows_b; ++i)
        if (blockIdx.x + i * gridDim.x <= p.E) bytes += static_cast<uint32_t>(sizeof(bf16) * p.H);
    mbar_arrive_expect(bar, bytes);
    for (int i = 0; i < rows_b; ++i) {
        const int e = blockIdx.x + i * gridDim.x;
        if (e <= p.E)
            bulk_load(rrows + static_cast<size_t>(i) * p.H,
                      e < p.E ? p.router + static_cast<int64_t>(e) * p.H : p.shared_gate, sizeof(bf16) * p.H, bar);
    }
}

// Warp w < rows_b: the block's router row w against x (both in shared memory) with the logits
// kernel's arithmetic (lane vectors v = c0 + lane + 32 u in order, one warp sum), into row 0's
// logits lg_g ([E] experts, then the shared gate).
__device__ inline void fu_logits(const MoeBf16Params& p, const bf16* rrows, const bf16* xs, int rows_b, float* lg_g) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int e = blockIdx.x + warp * gridDim.x, nvec = p.H / kVec;
    if (warp >= rows_b || e > p.E) return;
    const bf16* w = rrows + static_cast<size_t>(warp) * p.H;
    float acc = 0.0f;
    for (int c0 = 0; c0 < nvec; c0 += kLogitV * kWarp) {
#pragma unroll
        for (int u = 0; u < kLogitV; ++u) {
            const int v = c0 + lane + u * kWarp;
            if (v < nvec)
                fma8(acc, *reinterpret_cast<const uint4*>(w + v * kVec), *reinterpret_cast<const uint4*>(xs + v * kVec));
        }
    }
    const float sum = warp_sum(acc);
    if (lane == 0) lg_g[e] = sum;
}

// Before the programmatic wait gate/up's first stage when it needs no routing (preloaded: the
// block's first tile is the shared expert's), then the wait (x comes from the kernel before);
// false, once the copies on bar have landed (none may be in flight at exit), when the row is
// not live: uniform over the grid, so every block leaves and none waits at a barrier.
__device__ inline bool fu_begin(const MoeBf16Params& p, const GateUpBlock& t, GateUpBlock::Stage& wa, bool preloaded,
                                uint32_t bar) {
    if (preloaded) t.load(wa, 0);
    pdl_wait();
    if (launch_rows(p.n_rows, 1) > 0) return true;
    mbar_wait_phase0(bar);
    return false;
}

// After the programmatic wait, with a live row: x into shared memory (xs), the block's router
// logits once its router rows have landed (bar), the first grid barrier (every logit written),
// then warp 0 routes the row (route_row: ids and mixing weights into shared memory; block 0
// writes the router outputs) and sets mix[k] to the shared expert's gate. lgs, keys: [E + 1] /
// [E] shared-memory scratch.
__device__ inline void fu_route(const MoeBf16Params& p, bf16* xs, const bf16* rrows, int rows_b, uint32_t bar,
                                unsigned long long* sync, float* lgs, int* keys, int32_t* ids, float* mix) {
    const int lane = threadIdx.x % kWarp;
    for (int i = threadIdx.x; i < p.H / kVec; i += blockDim.x)
        reinterpret_cast<uint4*>(xs)[i] = reinterpret_cast<const uint4*>(p.x)[i];
    __syncthreads();
    mbar_wait_phase0(bar);
    float* lg_g = logits_of(p);
    fu_logits(p, rrows, xs, rows_b, lg_g);
    grid_barrier(sync);
    if (threadIdx.x >= kWarp) return;
    for (int e = lane; e <= p.E; e += kWarp) lgs[e] = __ldcg(lg_g + e);
    __syncwarp();
    route_row(p, 0, lgs, lgs[p.E], keys, ids, blockIdx.x == 0, mix);  // ids always in [0, E)
    if (lane == 0) mix[p.k] = sigmoid(lgs[p.E]);                      // shared_w's value
}

__global__ void __launch_bounds__(kFuWarps * kWarp, 1)
    moe_decode_fused_kernel(MoeBf16Params p, int R, unsigned long long* sync) {
    extern __shared__ __align__(16) unsigned char fu_smem[];
    __shared__ __align__(8) uint64_t bars[2];
    __shared__ int32_t ids[kMoeMaxTopK];
    __shared__ float mix[kMoeMaxTopK + 1];
    const int G = gridDim.x;
    const FuLayout L = fu_layout(p, G, R);
    bf16* xs = reinterpret_cast<bf16*>(fu_smem + L.xs);
    int* keys = reinterpret_cast<int*>(fu_smem + L.keys);
    float* lgs = reinterpret_cast<float*>(fu_smem + L.lg);
    float* partial = reinterpret_cast<float*>(fu_smem + L.partial);
    bf16* rrows = reinterpret_cast<bf16*>(fu_smem + L.router);
    const uint4* act_lo = reinterpret_cast<const uint4*>(fu_smem + L.act);
    const uint4* act_hi = reinterpret_cast<const uint4*>(fu_smem + L.act_hi);
    bf16* ws = reinterpret_cast<bf16*>(fu_smem + L.w);
    bf16* ws_shared = ws + static_cast<size_t>(p.k) * R * p.I;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int h0 = blockIdx.x * R;
    const int nr = max(0, min(R, p.H - h0));
    const int rows_b = fu_router_rows(p, G);
    const uint32_t bar_a = smem_addr(&bars[0]), bar_b = smem_addr(&bars[1]);
    if (threadIdx.x == 0) {
        mbar_init_one(bar_a);
        mbar_init_one(bar_b);
    }
    __syncthreads();
    // Before the wait: only weights (no earlier kernel writes them).
    if (threadIdx.x == 0) {
        fu_copy_router(p, rrows, rows_b, bar_a, static_cast<uint32_t>(sizeof(bf16) * nr * p.Is));
        if (nr > 0) bulk_load(ws_shared, p.shared_down + static_cast<int64_t>(h0) * p.Is, sizeof(bf16) * nr * p.Is, bar_a);
    }
    GateUpBlock t(p, ids, xs);  // gate/up as moe_gate_up_mma_kernel runs it: its bits
    t.partial = partial;
    const int width = ffn_width(p);
    GateUpBlock::Stage wa, wb;
    const bool preloaded = t.items > 0 && blockIdx.x < t.tiles_s;  // shared rows need no routing
    if (!fu_begin(p, t, wa, preloaded, bar_a)) return;
    fu_route(p, xs, rrows, rows_b, bar_a, sync, lgs, keys, ids, mix);
    if (warp == 0) {
        if (lane == 0 && nr > 0) mbar_arrive_expect(bar_b, static_cast<uint32_t>(sizeof(bf16) * nr * p.k * p.I));
        __syncwarp();
        if (nr > 0 && lane < p.k)
            bulk_load(ws + static_cast<size_t>(lane) * R * p.I,
                      p.experts_down + (static_cast<int64_t>(ids[lane]) * p.H + h0) * p.I, sizeof(bf16) * nr * p.I,
                      bar_b);
    }
    __syncthreads();  // ids, mix
    if (t.items > 0) {
        if (!preloaded) t.load(wa, 0);
        t.stream(wa, wb);
    }
    __syncthreads();
    t.write_act(0, width);
    grid_barrier(sync);  // every activation written
    pdl_launch_dependents();
    if (nr == 0) return;
    const int wv = width / kVec;
    stage_act(p, fu_smem + L.act, fu_smem + L.act_hi, wv);
    mbar_wait_phase0(bar_b);
    __syncthreads();
    down_rows(p, R, h0, nr, kFuWarps, ws, ws_shared, act_lo, act_hi, mix, wv);  // its bits
}

// ---- launchers ----------------------------------------------------------------------------------

cudaError_t launch_logits(const MoeBf16Params& p, const LogitsOut& o, cudaStream_t stream) {
    const bool pdl = p.pdl != 0;
    if (p.max_rows == 1) {
        const dim3 grid(ceil_div(p.E + 1, kDecodeLogitWarps), 1);
        return launch_kernel(moe_logits_kernel<1>, grid, dim3(kDecodeLogitWarps * kWarp), 0, stream, pdl, p, o);
    }
    const dim3 grid(ceil_div(p.E + 1, kPrefillLogitWarps), ceil_div(p.max_rows, kLogitRows));
    return launch_kernel(moe_logits_kernel<kLogitRows>, grid, dim3(kPrefillLogitWarps * kWarp), 0, stream, pdl, p, o);
}

// Shared memory above the 48 KiB default needs the kernel's limit raised (idempotent, capturable).
template <class K>
cudaError_t allow_smem(K kernel, size_t bytes) {
    if (bytes <= (48u << 10)) return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

int sm_count(cudaError_t& e) {
    int dev = 0, sms = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    return sms;
}

int gm_blocks(const MoeBf16Params& p, int sms) { return std::min(sms, p.Is / 8 + p.k * (p.I / 8)); }
// x, the route keys (kRoute) and the warp partials of the block's tiles.
size_t gm_smem_bytes(const MoeBf16Params& p, bool route, int sms) {
    const int tiles = p.Is / 8 + p.k * (p.I / 8);
    const size_t partials = sizeof(float) * ceil_div(tiles, gm_blocks(p, sms)) * kGmWarps * 16;
    return gm_x_bytes(p) + (route ? sizeof(int) * p.E : 0) + partials;
}

// One 512-thread block per SM (per row), each taking tiles blockIdx.x + n * gridDim.x; the
// largest shared-memory carve-out, so a streaming down block fits beside it on the SM.
template <bool kRoute>
cudaError_t launch_gate_up(const MoeBf16Params& p, cudaStream_t stream) {
    cudaError_t e = cudaSuccess;
    const int sms = sm_count(e);
    if (e != cudaSuccess) return e;
    const dim3 grid(gm_blocks(p, sms), p.max_rows);
    const size_t smem = gm_smem_bytes(p, kRoute, sms);
    e = allow_smem(moe_gate_up_mma_kernel<kRoute>, smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(moe_gate_up_mma_kernel<kRoute>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    if (e != cudaSuccess) return e;
    const char* l2 = std::getenv("FROST_MOE_GU_L2");  // "1": L2 prefetch of later tiles (A/B runs, same bits)
    const int l2_prefetch = l2 && std::strcmp(l2, "1") == 0 ? 1 : 0;
    return launch_kernel(moe_gate_up_mma_kernel<kRoute>, grid, dim3(kGmWarps * kWarp), smem, stream, p.pdl != 0, p,
                         l2_prefetch);
}

cudaError_t launch_down(const MoeBf16Params& p, cudaStream_t stream) {
    const dim3 grid(ceil_div(p.H, kDownWarps), p.max_rows);
    const size_t act_bytes = sizeof(float) * (p.k + 1) * ffn_width(p);
    if (act_bytes <= kDownSmemMax)
        return launch_kernel(moe_down_kernel<true>, grid, dim3(kDownWarps * kWarp), act_bytes, stream, p.pdl != 0, p);
    return launch_kernel(moe_down_kernel<false>, grid, dim3(kDownWarps * kWarp), 0, stream, p.pdl != 0, p);
}

// The streaming down kernel for a one-row decode when this device and shape allow it: an sm_90a
// device (bulk copies) and its shared memory fitting beside the gate/up block's on one SM.
// Otherwise moe_down_kernel (the same bits; FROST_MOE_DOWN=plain forces it, for A/B runs).
// R: output rows per block, one block per SM.
cudaError_t plan_stream_down(const MoeBf16Params& p, int& R, size_t& smem, bool& ok) {
    ok = false;
    const char* env = std::getenv("FROST_MOE_DOWN");  // "plain": moe_down_kernel (A/B runs, same bits)
    if (p.max_rows != 1 || (env && std::strcmp(env, "plain") == 0)) return cudaSuccess;
    int dev = 0, sms = 0, per_sm = 0, per_block = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    // The bulk copies exist only in this build's sm_90a code: a newer GPU runs the compute_80 PTX,
    // where they compile to nothing (a major >= 9 test took the kernel there).
    if (e != cudaSuccess || !device_runs_sm90a()) return e;
    R = ceil_div(p.H, sms);
    smem = ds_layout(p, R).bytes;
    const size_t gu_smem = gm_smem_bytes(p, true, sms);
    const size_t copied = sizeof(bf16) * R * (static_cast<size_t>(p.k) * p.I + p.Is);
    const size_t reserve = 4u << 10;  // static shared memory and the per-block reservations
    ok = copied < (1u << 20) &&       // an mbarrier phase counts at most 2^20 - 1 bytes
         smem <= static_cast<size_t>(per_block) && smem + gu_smem + reserve <= static_cast<size_t>(per_sm);
    return cudaSuccess;
}

cudaError_t launch_stream_down(const MoeBf16Params& p, int R, size_t smem, cudaStream_t stream) {
    cudaError_t e =
        cudaFuncSetAttribute(moe_down_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(moe_down_stream_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    if (e != cudaSuccess) return e;
    const char* env = std::getenv("FROST_MOE_DOWN");
    const int bulk = env && std::strcmp(env, "cpasync") == 0 ? 0 : 1;
    return launch_kernel(moe_down_stream_kernel, dim3(ceil_div(p.H, R)), dim3(kDsWarps * kWarp), smem, stream,
                         p.pdl != 0, p, R, bulk);
}

bool experts_ok(const MoeBf16Params& p) {
    return valid(p) && p.act && (p.out || p.out_bf16) && lm::aligned16(p.act) &&
           static_cast<size_t>(p.H) * sizeof(bf16) + sizeof(int) * p.E <= (200u << 10);
}

}  // namespace

size_t moe_act_floats(const MoeBf16Params& p) {
    const size_t acts = static_cast<size_t>(p.max_rows) * (p.k + 1) * ffn_width(p);
    return acts + static_cast<size_t>(p.max_rows) * (p.E + 1);
}

cudaError_t moe_router_launch(const MoeBf16Params& p, cudaStream_t stream) {
    if (!valid(p)) return cudaErrorInvalidValue;
    cudaError_t e = launch_logits(p, LogitsOut{p.probs, p.E, p.shared_w, 1}, stream);
    if (e != cudaSuccess) return e;
    const size_t smem = sizeof(int) * kTopkWarps * p.E;
    e = allow_smem(moe_topk_kernel, smem);
    if (e != cudaSuccess) return e;
    e = launch_kernel(moe_topk_kernel, dim3(ceil_div(p.max_rows, kTopkWarps)), dim3(kTopkWarps * kWarp), smem, stream,
                      p.pdl != 0, p);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

cudaError_t moe_experts_launch(const MoeBf16Params& p, cudaStream_t stream) {
    if (!experts_ok(p)) return cudaErrorInvalidValue;
    cudaError_t e = launch_gate_up<false>(p, stream);
    if (e == cudaSuccess) e = launch_down(p, stream);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

// One grid of `bytes` dynamic shared memory per block, every block resident at once (the grid
// barriers need each of them): false (nothing launched, no error) when it does not fit.
template <class K, class... Args>
cudaError_t launch_resident(K kernel, int G, size_t bytes, const MoeBf16Params& p, cudaStream_t stream, bool& ran,
                            Args... args) {
    int dev = 0, per_block = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess || bytes > static_cast<size_t>(per_block)) return e;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kFuWarps * kWarp, bytes);
    if (e != cudaSuccess || per_sm < 1) return e;
    e = launch_kernel(kernel, dim3(G), dim3(kFuWarps * kWarp), bytes, stream, p.pdl != 0, p, args...);
    ran = e == cudaSuccess;
    return e;
}

// The one-launch prototype where it can run (FROST_MOE_DECODE=fused, read at launch, for A/B
// runs): one row, a sync counter, sm_90a, one block per SM within a block's shared memory, the
// bytes a block copies on one mbarrier within one phase. Otherwise ran = false: the three
// launches.
cudaError_t launch_fused(const MoeBf16Params& p, cudaStream_t stream, bool& ran) {
    ran = false;
    const char* env = std::getenv("FROST_MOE_DECODE");
    if (!env || std::strcmp(env, "fused") != 0 || p.max_rows != 1 || !p.sync || !device_runs_sm90a())
        return cudaSuccess;
    cudaError_t e = cudaSuccess;
    const int G = sm_count(e);
    if (e != cudaSuccess || fu_router_rows(p, G) > kFuMaxRouterRows) return e;
    const size_t router_bytes = sizeof(bf16) * static_cast<size_t>(fu_router_rows(p, G)) * p.H;
    const int R = ceil_div(p.H, G);
    const size_t copied_a = router_bytes + sizeof(bf16) * static_cast<size_t>(R) * p.Is;
    const size_t copied_b = sizeof(bf16) * static_cast<size_t>(R) * p.k * p.I;
    if (copied_a >= (1u << 20) || copied_b >= (1u << 20)) return cudaSuccess;
    return launch_resident(moe_decode_fused_kernel, G, fu_layout(p, G, R).bytes, p, stream, ran, R, p.sync);
}

cudaError_t moe_decode_launch(const MoeBf16Params& p, cudaStream_t stream) {
    if (!experts_ok(p)) return cudaErrorInvalidValue;
    bool fused = false;
    cudaError_t fe = launch_fused(p, stream, fused);
    if (fe != cudaSuccess) return fe;
    if (fused) return cudaGetLastError();
    float* lg = logits_of(p);
    int R = 0;
    size_t ds_smem = 0;
    bool stream_down = false;
    cudaError_t e = plan_stream_down(p, R, ds_smem, stream_down);
    if (e == cudaSuccess) e = launch_logits(p, LogitsOut{lg, p.E + 1, lg + p.E, p.E + 1}, stream);
    if (e == cudaSuccess) e = launch_gate_up<true>(p, stream);
    if (e == cudaSuccess) e = stream_down ? launch_stream_down(p, R, ds_smem, stream) : launch_down(p, stream);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

}  // namespace frost::kernels
