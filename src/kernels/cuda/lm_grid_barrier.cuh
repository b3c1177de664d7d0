// A grid-wide barrier for kernels whose blocks are all resident at once (the launcher checks the
// occupancy; nothing here can), on a 64-bit counter in device memory that only grows: zero at
// allocation, each block adds one per barrier, so it is a multiple of the grid size whenever no
// such launch runs. One launch at a time per counter.
//
// Split in two so a block can issue loads that do not depend on the other blocks (the next
// matrix's weights) between arriving and waiting, as a PDL-chained kernel issues them before its
// programmatic wait: grid_arrive() after the block's writes, grid_wait() before its reads of
// other blocks' writes. grid_barrier() is the two back to back (cooperative groups' grid sync
// pattern: the block's stores ordered before thread 0's fence and arrival, acquire loads after).
// Data another block wrote in the same launch must then be read past L1 (ld.cg / __ldcg, or
// volatile): __ldg's non-coherent path may return a line cached before the barrier.
#pragma once

#include <cstdint>

namespace frost::kernels::lm {

// Every thread of the block calls it after its writes; returns, in thread 0, the count that
// grid_wait waits for (0 in the other threads).
__device__ inline unsigned long long grid_arrive(unsigned long long* sync) {
    __syncthreads();
    unsigned long long target = 0;
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned long long old = atomicAdd(sync, 1ull);
        target = (old / gridDim.x + 1) * gridDim.x;
    }
    return target;
}

// Every thread of the block calls it with grid_arrive's result. A wait that outlasts two seconds
// (a block that never arrives: a counter not a multiple of the grid, a block not resident) traps,
// so the launch fails with an error instead of hanging.
__device__ inline void grid_wait(const unsigned long long* sync, unsigned long long target) {
    if (threadIdx.x == 0) {
        unsigned long long now = 0, t0 = 0, t = 0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        for (unsigned spins = 1;; ++spins) {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(now) : "l"(sync) : "memory");
            if (now >= target) break;
            if (spins % 1024 == 0) {
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
                if (t - t0 > 2000000000ull) __trap();
            }
        }
    }
    __syncthreads();
}

__device__ inline void grid_barrier(unsigned long long* sync) { grid_wait(sync, grid_arrive(sync)); }

}  // namespace frost::kernels::lm
