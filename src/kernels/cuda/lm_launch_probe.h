// A ceiling for launch-per-op decode: a captured chain of kernels that do nothing but wait for
// their predecessor (programmatic dependent launch, as every decode-graph kernel does) and write
// one value per block. Its time per kernel is what a launch boundary costs inside a replayed
// graph when no work hides it (bench_cuda_kernels --launch-chain prints it per grid shape and
// trigger order). With a source, each kernel also streams a matrix-sized read before its wait:
// what one launch per matrix can reach at that size, against the bytes' floor. A 9B decode step
// is ~240 launches, so the boundary times that count is the part of the step that no single
// kernel's speed removes.
#pragma once

#include <cuda_runtime.h>

namespace frost::kernels {

struct LaunchChainProbe {
    float* buf = nullptr;  // [blocks] device floats, each block's counter
    int blocks = 1;
    int threads = 32;
    int kernels = 1;  // chain length
    int pdl = 1;      // 0: plain launches; 1: wait, then trigger (the decode default); 2: trigger, then wait
    // Optional: each kernel first streams `bytes` (a multiple of 16) of `src` before its wait, as
    // a decode GEMV streams its weights, kernel i from offset (i * bytes) mod (src_bytes - bytes)
    // rounded down to 16 bytes, so a chain longer than L2 reads DRAM. Null src: no loads.
    const void* src = nullptr;
    size_t src_bytes = 0;
    size_t bytes = 0;
    // How the slice is read (with a source). 0: grid-stride, four 16-byte loads in flight per
    // thread, every warp load 512 contiguous bytes. 1..4: the quantized decode GEMV's loads
    // (lm_gemv_quant_tc.cu) without its arithmetic: `blocks` blocks of 8 warps walk 16-row tiles
    // of a row-major matrix of `row_bytes` per row, a tile's 128-wide K steps interleaved over its
    // warps, `unroll` steps per register group, the next group loaded before the current one is
    // used, the first group before the wait. 1: the 4-bit shape (per step a lane reads 16 bytes of
    // each of its two rows: four lanes cover a 64-byte half line of a row); 2: the fp8 shape (two
    // 16-byte loads per row: a whole 128-byte line per four lanes); 3 / 4: the same bytes per warp
    // step as 1 / 2, stored so that every warp load reads 512 contiguous bytes (a load-time
    // repack). Needs threads 256, unroll 1, 2 or 4, row_bytes a multiple of 64 (1, 3) or 128 (2, 4)
    // and bytes a multiple of 16 rows.
    int pattern = 0;
    int unroll = 1;
    size_t row_bytes = 0;
    // 1: the same `kernels` steps as phases of one launch (what a persistent decode kernel would
    // do in place of a launch per op): the blocks, all resident at once (a grid larger than
    // chain_probe_blocks_per_sm x SMs is refused), meet at a grid barrier (lm_grid_barrier.cuh)
    // between phases; phase i reads kernel i's slice in the same pattern, the part a chain kernel
    // reads before its programmatic wait read between arriving at the barrier and waiting on it.
    // The dependency each phase carries: block b writes its entry of one half of `buf` from its
    // neighbour's (b + 1 mod blocks) entry of the other half, written the phase before, so buf
    // needs 2 x blocks floats and after an even number of phases the first half holds, in every
    // entry, the phases run since it was zeroed (a missed barrier leaves less). Needs pdl 0 or 1.
    int persistent = 0;
    // persistent: the barrier's counter (lm_grid_barrier.cuh), zero or left so by launches of the
    // same grid size (its target is the next multiple of the grid).
    unsigned long long* sync = nullptr;
};

// Enqueues the chain on `stream` (capturable). Invalid shapes: cudaErrorInvalidValue.
cudaError_t launch_chain_probe(const LaunchChainProbe& p, cudaStream_t stream);

// How many of p's blocks an SM holds at once (its registers decide: the loads in flight are
// registers), 0 on a bad shape or error: a GEMV-shaped chain asked for more blocks per SM than
// this runs the rest as later waves; a persistent one is refused.
int chain_probe_blocks_per_sm(const LaunchChainProbe& p);

}  // namespace frost::kernels
