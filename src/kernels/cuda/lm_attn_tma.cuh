// Tensor Memory Accelerator pieces of the Hopper attention prefill (lm_attn_hopper_tma.cu): the
// bulk tensor copy into shared memory with mbarrier completion (PTX "cp.async.bulk.tensor"), the
// expect-tx arrival, and the host side that encodes a 2D tensor map through the driver entry point
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace frost::kernels::attn_hopper {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Arrives on `bar` (one of its expected arrivals) and adds `bytes` to the transactions it waits for.
__device__ inline void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// One box of a 2D tensor map, element coordinates (c0 innermost, c1 rows), into shared memory at
// `dst` (1024-byte aligned for the 128-byte swizzle); its bytes complete on `bar`. Rows or columns
// outside the map's extent arrive as zeros.
__device__ inline void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

__device__ inline void tma_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
#endif

// A 2D bf16 tensor map over rows x cols elements (row stride `row_stride` elements, a multiple of
// 8), boxes of box_rows x 64 (128 bytes a row, the 128-byte swizzle wgmma reads). Host code only:
// safe inside a stream capture. cudaErrorNotSupported when the driver has no cuTensorMapEncodeTiled,
// cudaErrorInvalidValue when it refuses the shape.
cudaError_t encode_tile_map(CUtensorMap* map, const void* base, int64_t cols, int64_t rows, int64_t row_stride,
                            int box_rows);

}  // namespace frost::kernels::attn_hopper
