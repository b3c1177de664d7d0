// Probes for tests of programmatic dependent launch (PDL): a kernel launched with the attribute
// may start while its predecessor still runs, so whatever it reads before its pdl_wait must not
// come from that predecessor. A missing or misplaced wait is a race that ordinary runs rarely
// lose (the predecessor is usually done), so these probes make it lose: the predecessor lets its
// dependents start at once and writes its outputs only after a long delay.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace frost::kernels {

// The slow predecessor. Every block first lets its dependents start, then spins on the global
// timer for `delay_us`, then copies each region's `bytes` from src to dst. A kernel launched
// programmatically after it that reads a dst before its wait reads what dst held before (a test
// poisons it); after its wait, the copies. Launched plainly itself, so it follows everything
// enqueued before it. Regions with bytes 0 are skipped; others need 16-byte aligned pointers and
// sizes (cudaErrorInvalidValue otherwise).
struct LateCopyProbe {
    struct Region {
        void* dst = nullptr;
        const void* src = nullptr;
        size_t bytes = 0;
    };
    static constexpr int kRegions = 4;
    Region regions[kRegions];
    int delay_us = 200;
};
cudaError_t late_copy_probe_launch(const LateCopyProbe& p, cudaStream_t stream);

// The control: one warp launched programmatically (on sm_90 and newer) that stores the word at
// `src` as it reads it before its pdl_wait into out[0] and after it into out[1]. Behind a
// LateCopyProbe whose region covers src, out[0] != out[1] shows the window is real on this device
// (a dependent did start early), so a test that found no race did look for one.
cudaError_t early_read_probe_launch(const uint32_t* src, uint32_t* out, cudaStream_t stream);

}  // namespace frost::kernels
