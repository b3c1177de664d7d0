// mbarrier primitives on shared-memory addresses (PTX ISA, "Parallel synchronization and
// communication: mbarrier"), for the warp-specialised Hopper kernels: producers signal a ring
// stage full, consumers signal it empty. One definition for the attention and MoE kernels.
#pragma once
#include <cstdint>

#include "kernels/cuda/lm_attn_wgmma.cuh"

namespace frost::kernels::lm {

#if defined(FROST_ATTN_WGMMA)
__device__ inline void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ inline void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives once every cp.async this thread issued so far has landed (count set at init).
__device__ inline void mbar_arrive_cp_async(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Spins until the phase with this parity has completed.
__device__ inline void mbar_wait(uint32_t bar, int parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// A ring of S stages of kStageBytes each at `base` (a shared-memory address), its S "full" then S
// "empty" barriers at `bars` (8 bytes each). `it` counts ring positions over a block's whole run:
// stage it % S, phase parity (it / S) & 1.
template <int S, uint32_t kStageBytes>
struct StageRing {
    uint32_t base, bars;
    __device__ uint32_t stage(uint32_t it) const { return base + (it % S) * kStageBytes; }
    __device__ uint32_t full(uint32_t it) const { return bars + (it % S) * 8; }
    __device__ uint32_t empty(uint32_t it) const { return bars + (S + it % S) * 8; }
    __device__ static int phase(uint32_t it) { return static_cast<int>((it / S) & 1); }
};
#endif  // FROST_ATTN_WGMMA

}  // namespace frost::kernels::lm
