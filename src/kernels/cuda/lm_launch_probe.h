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
};

// Enqueues the chain on `stream` (capturable). Invalid shapes: cudaErrorInvalidValue.
cudaError_t launch_chain_probe(const LaunchChainProbe& p, cudaStream_t stream);

}  // namespace frost::kernels
