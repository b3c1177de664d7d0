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

// The same box multicast to every CTA of the cluster in `mask`, at the same shared-memory offset,
// completing on the mbarrier at the same offset in each.
__device__ inline void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar,
                                             uint16_t mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
        "%3}], [%4], %5;\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
}

__device__ inline uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster (release / acquire: the barrier inits, the stages).
__device__ inline void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Arrives on the mbarrier at offset `bar` of the cluster's CTA `rank`.
__device__ inline void mbar_arrive_remote(uint32_t bar, uint32_t rank) {
    asm volatile(
        "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

// Waits for the phase of parity `parity` with cluster-scope acquire (arrivals from another CTA).
__device__ inline void mbar_wait_cluster(uint32_t bar, int parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, "
            "p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ inline void tma_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
#endif

// A 2D tensor map of `dtype` (elements of elem_bytes) over rows x cols elements (row stride
// `row_stride` elements, 16 bytes a multiple), boxes of box_rows x (128 / elem_bytes) elements:
// 128 bytes a row, the 128-byte swizzle wgmma reads. Host code only: safe inside a stream capture.
// cudaErrorNotSupported when the driver has no cuTensorMapEncodeTiled, cudaErrorInvalidValue when
// it refuses the shape.
cudaError_t encode_swizzled_map(CUtensorMap* map, CUtensorMapDataType dtype, int elem_bytes, const void* base,
                                int64_t cols, int64_t rows, int64_t row_stride, int box_rows);
// The general form: boxes of box_rows x box_cols elements, rows packed (box_cols * elem_bytes
// bytes apart in shared memory) without swizzle, or 128-byte swizzled (box_cols * elem_bytes
// = 128). encode_swizzled_map is encode_box_map(..., 128 / elem_bytes, box_rows, true).
cudaError_t encode_box_map(CUtensorMap* map, CUtensorMapDataType dtype, int elem_bytes, const void* base, int64_t cols,
                           int64_t rows, int64_t row_stride, int box_cols, int box_rows, bool swizzle128);
// The bf16 form (attention's Q and K / V cache).
inline cudaError_t encode_tile_map(CUtensorMap* map, const void* base, int64_t cols, int64_t rows, int64_t row_stride,
                                   int box_rows) {
    return encode_swizzled_map(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, cols, rows, row_stride, box_rows);
}

}  // namespace frost::kernels::attn_hopper
