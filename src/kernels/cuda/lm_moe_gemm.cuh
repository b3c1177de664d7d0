// The tensor-core tile of the MoE prefill's GEMMs (lm_moe_prefill.cu, lm_moe_prefill_router.cu):
// acc[BM x 128] = A[BM, K] · B[128, K]^T, bf16 operands, fp32 accumulation, mma.sync m16n8k16
// fed by ldmatrix from a multi-stage cp.async shared-memory pipeline. Every A and B row is
// addressed through its own pointer in a shared-memory table, so the caller gathers rows (token
// rows of an expert's group, interleaved gate/up weight rows) inside the loads, with no copy; a
// null row pointer, or columns past K, load as zeros. 256 threads = 8 warps in a 2 (rows) x 4
// (columns) grid, each warp BM/2 x 32. BK = 32 (4 stages, rows padded to 80 bytes) or 64 (3
// stages, 128-byte rows with the 16-byte chunks XOR-swizzled by row): both keep the 8 row
// addresses of one ldmatrix phase in distinct bank groups.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_common.cuh"

namespace frost::kernels::moe {

constexpr int kGemmThreads = 256;
constexpr int kBN = 128;  // tile columns (B rows)

template <int BK>
constexpr int kStages = BK == 32 ? 4 : 3;  // cp.async stages in flight (all but one loading)
template <int BK>
constexpr int kRowElems = BK == 32 ? 40 : 64;  // shared row stride in bf16 (padding or swizzle)

template <int BM>
constexpr int kMFrags = BM / 32;  // m16 fragments per warp (the warp covers BM/2 rows)
constexpr int kNFrags = 4;        // n8 fragments per warp (32 columns)

// The row-pointer table (BM + 128 pointers: A rows, then B rows) first, then the stages.
template <int BM, int BK>
constexpr size_t gemm_smem_bytes() {
    return sizeof(const bf16*) * (BM + kBN) +
           static_cast<size_t>(kStages<BK>) * (BM + kBN) * kRowElems<BK> * sizeof(bf16);
}

// Element offset of 16-byte chunk `c` of tile row `r` inside a stage.
template <int BK>
__device__ inline int chunk_at(int r, int c) {
    if constexpr (BK == 64) return r * 64 + ((c ^ (r & 7)) * 8);
    else return r * kRowElems<BK> + c * 8;
}

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(lm::smem_addr(p)));
}

// d += a · b for one m16n8k16 bf16 fragment (fp32 accumulators).
__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Copies K columns [k0, k0 + BK) of every tile row into one stage: thread t copies chunk t % (BK/8)
// of rows t / (BK/8), + 256 / (BK/8), ... `fallback` is any valid global address (a zero-byte
// cp.async still names one).
template <int BM, int BK>
__device__ inline void load_stage(bf16* stage, const bf16* const* rows, int k0, int K, const bf16* fallback) {
    constexpr int chunks = BK / 8, step = kGemmThreads / chunks;
    const int c = threadIdx.x % chunks, col = k0 + c * 8;
    const bool in_k = col < K;  // K % 8 == 0: a 16-byte chunk is wholly inside or outside
#pragma unroll
    for (int i = 0; i < (BM + kBN) / step; ++i) {
        const int r = threadIdx.x / chunks + i * step;
        const bf16* src = rows[r];
        const bool ok = in_k && src;
        lm::cp_async16(stage + chunk_at<BK>(r, c), ok ? src + col : fallback, ok ? 16 : 0);
    }
}

// acc += A · B^T over all of K. `smem` holds gemm_smem_bytes<BM, BK>() bytes, the caller has
// filled its row table (gemm_rows) and synchronised. acc[mf][nf] is the m16n8 fragment of warp
// rows 16 mf.., columns 8 nf..: (row lane/4, cols 2 (lane%4) +0/1) in [0..1], row + 8 in [2..3]
// (PTX mma layout).
template <int BM, int BK>
__device__ inline void tile_mainloop(float (&acc)[kMFrags<BM>][kNFrags][4], int K, const bf16* fallback,
                                     unsigned char* smem) {
    constexpr int S = kStages<BK>, stage_elems = (BM + kBN) * kRowElems<BK>;
    const bf16* const* rows = reinterpret_cast<const bf16* const*>(smem);
    bf16* stages = reinterpret_cast<bf16*>(smem + sizeof(const bf16*) * (BM + kBN));
    const int warp = threadIdx.x / lm::kWarp, lane = threadIdx.x % lm::kWarp;
    const int wm = warp / 4, wn = warp % 4;
    const int k_tiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles) load_stage<BM, BK>(stages + s * stage_elems, rows, s * BK, K, fallback);
        lm::cp_async_commit();  // empty groups keep the wait count uniform
    }
    // ldmatrix lane rows / chunks (A: 16 rows x 16 k per x4; B: 16 columns x 16 k, after A).
    const int a_row = wm * (BM / 2) + lane % 16, a_chunk = lane / 16;
    const int b_row = BM + wn * 32 + (lane % 8) + (lane / 16) * 8, b_chunk = (lane / 8) % 2;
    for (int kt = 0; kt < k_tiles; ++kt) {
        lm::cp_async_wait<S - 2>();  // stage kt has landed (this thread's copies)
        __syncthreads();             // ... everyone's; and stage kt - 1 is no longer read
        const int next = kt + S - 1;
        if (next < k_tiles) load_stage<BM, BK>(stages + (next % S) * stage_elems, rows, next * BK, K, fallback);
        lm::cp_async_commit();
        const bf16* st = stages + (kt % S) * stage_elems;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            uint32_t a[kMFrags<BM>][4], b[kNFrags / 2][4];
#pragma unroll
            for (int mf = 0; mf < kMFrags<BM>; ++mf)
                ldmatrix_x4(a[mf], st + chunk_at<BK>(a_row + 16 * mf, 2 * kk + a_chunk));
#pragma unroll
            for (int np = 0; np < kNFrags / 2; ++np)
                ldmatrix_x4(b[np], st + chunk_at<BK>(b_row + 16 * np, 2 * kk + b_chunk));
#pragma unroll
            for (int mf = 0; mf < kMFrags<BM>; ++mf)
#pragma unroll
                for (int nf = 0; nf < kNFrags; ++nf)
                    mma_16816(acc[mf][nf], a[mf], b[nf / 2][(nf % 2) * 2], b[nf / 2][(nf % 2) * 2 + 1]);
        }
    }
    lm::cp_async_wait<0>();  // no copy may still target smem when the block exits
}

// The row table at the start of `smem`: A rows [0, BM), then B rows [BM, BM + 128).
__device__ inline const bf16** gemm_rows(unsigned char* smem) { return reinterpret_cast<const bf16**>(smem); }

}  // namespace frost::kernels::moe
