// The tensor-core tile of the MoE prefill's GEMMs (lm_moe_prefill.cu, lm_moe_prefill_router.cu):
// acc[BM x 128] = A[BM, K] · B[128, K]^T, bf16 operands, fp32 accumulation, mma.sync m16n8k16
// fed by ldmatrix from a multi-stage cp.async shared-memory pipeline. Every A and B row is
// addressed through its own pointer in a shared-memory table, so the caller gathers rows (token
// rows of an expert's group, interleaved gate/up weight rows) inside the loads, with no copy; a
// null row pointer, or columns past K, load as zeros.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_common.cuh"

namespace frost::kernels::moe {

constexpr int kBN = 128;  // tile columns (B rows)

// An mma.sync tile: BM rows, K 64 per stage in 3 stages (128-byte rows, the 16-byte chunks
// XOR-swizzled by row), 8 warps in a 2 x 4 grid, each BM/2 x 32. Measured on the H100 against
// K 32 in 4 padded stages and 2 x 2 warps of BM/2 x 64 (bench_moe_prefill, 35B-A3B and
// Qwen3-Next shapes, 1k-16k rows): these were the fastest mma.sync shapes at every size.
template <int BM_>
struct Tile {
    static constexpr int BM = BM_, BK = 64, WN = 4;
    static constexpr int threads = 2 * WN * 32;
    static constexpr int WC = kBN / WN;   // columns per warp
    static constexpr int MF = BM / 32;    // m16 fragments per warp
    static constexpr int NF = WC / 8;     // n8 fragments per warp
    static constexpr int stages = 3;
    static constexpr int row_elems = 64;
    static constexpr int stage_elems = (BM + kBN) * row_elems;
    // The row-pointer table (BM + 128 pointers: A rows, then B rows) first, then the stages.
    static constexpr size_t smem = sizeof(const bf16*) * (BM + kBN) + sizeof(bf16) * stages * stage_elems;
    static constexpr bool wgmma = false;
    struct Acc {
        float v[MF][NF][4];
    };
    // f(row, col, v0, v1) for every accumulator pair of this thread: tile row, columns col, col + 1.
    template <class F>
    __device__ static void visit(const Acc& a, F&& f) {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / WN, wn = warp % WN;
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
                for (int nf = 0; nf < NF; ++nf)
                    f(wm * (BM / 2) + mf * 16 + lane / 4 + half * 8, wn * WC + nf * 8 + (lane % 4) * 2,
                      a.v[mf][nf][half * 2], a.v[mf][nf][half * 2 + 1]);
    }
    // Column owners of WC columns hold WC/2 gate columns, then the matching up columns (see
    // gate_up_col): f(row, act col, gate0, gate1, up0, up1) with act col < 64.
    template <class F>
    __device__ static void visit_pairs(const Acc& a, F&& f) {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / WN, wn = warp % WN;
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
                for (int nf = 0; nf < NF / 2; ++nf)
                    f(wm * (BM / 2) + mf * 16 + lane / 4 + half * 8, wn * (WC / 2) + nf * 8 + (lane % 4) * 2,
                      a.v[mf][nf][half * 2], a.v[mf][nf][half * 2 + 1], a.v[mf][nf + NF / 2][half * 2],
                      a.v[mf][nf + NF / 2][half * 2 + 1]);
    }
};

// Warpgroup-MMA tile (sm_90a, lm_attn_wgmma.cuh): 128 rows x 128 columns, K 64 per stage, 3
// stages; warpgroup w owns rows 64 w.. and all 128 columns as two m64n64k16 accumulators (A and
// B K-major in shared memory, 128-byte swizzle: the layout of Tile, 1024-byte aligned).
struct WgTile {
    static constexpr int BM = 128, BK = 64, WN = 1, WC = kBN;
    static constexpr int threads = 256;
    static constexpr int stages = 3;
    static constexpr int row_elems = 64;
    static constexpr int stage_elems = (BM + kBN) * row_elems;
    // The row table, slack to align the stages to 1024 bytes, the stages.
    static constexpr size_t table_bytes = sizeof(const bf16*) * (BM + kBN);
    static constexpr size_t smem = table_bytes + 1024 + sizeof(bf16) * stages * stage_elems;
    static constexpr bool wgmma = true;
    struct Acc {
        float v[2][32];
    };
    // wgmma accumulators: warp q of the warpgroup holds rows 16 q.., n8 tile i in v[h][4i..4i+3].
    template <class F>
    __device__ static void visit(const Acc& a, F&& f) {
        const int wg = threadIdx.x / 128, q = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    f(wg * 64 + q * 16 + lane / 4 + half * 8, h * 64 + i * 8 + (lane % 4) * 2, a.v[h][4 * i + half * 2],
                      a.v[h][4 * i + half * 2 + 1]);
    }
    template <class F>
    __device__ static void visit_pairs(const Acc& a, F&& f) {
        const int wg = threadIdx.x / 128, q = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int i = 0; i < 8; ++i)
                f(wg * 64 + q * 16 + lane / 4 + half * 8, i * 8 + (lane % 4) * 2, a.v[0][4 * i + half * 2],
                  a.v[0][4 * i + half * 2 + 1], a.v[1][4 * i + half * 2], a.v[1][4 * i + half * 2 + 1]);
    }
};

// B row j of a gate|up tile: activation column (j / WC) WC/2 + (j % WC) % (WC/2) of the tile,
// from the up half when (j % WC) >= WC/2: each column owner sees gate and up of the same columns.
template <class T>
__device__ inline int gate_up_col(int j, bool& up) {
    const int within = j % T::WC;
    up = within >= T::WC / 2;
    return (j / T::WC) * (T::WC / 2) + within % (T::WC / 2);
}

// Element offset of 16-byte chunk `c` of tile row `r` inside a stage: rows of 128 bytes, chunk c
// at c ^ (r % 8), so the 8 row addresses of one ldmatrix phase hit distinct bank groups (and the
// layout is wgmma's 128-byte swizzle).
template <class T>
__device__ inline int chunk_at(int r, int c) {
    static_assert(T::BK == 64 && T::row_elems == 64, "128-byte swizzled rows");
    return r * 64 + ((c ^ (r & 7)) * 8);
}

// Copies K columns [k0, k0 + BK) of every tile row into one stage: thread t copies chunk t % (BK/8)
// of rows t / (BK/8), + threads / (BK/8), ... `fallback` is any valid global address (a zero-byte
// cp.async still names one).
template <class T>
__device__ inline void load_stage(bf16* stage, const bf16* const* rows, int k0, int K, const bf16* fallback) {
    constexpr int chunks = T::BK / 8, step = T::threads / chunks;
    const int c = threadIdx.x % chunks, col = k0 + c * 8;
    const bool in_k = col < K;  // K % 8 == 0: a 16-byte chunk is wholly inside or outside
#pragma unroll
    for (int i = 0; i < (T::BM + kBN) / step; ++i) {
        const int r = threadIdx.x / chunks + i * step;
        const bf16* src = rows[r];
        const bool ok = in_k && src;
        lm::cp_async16(stage + chunk_at<T>(r, c), ok ? src + col : fallback, ok ? 16 : 0);
    }
}

// acc += A · B^T over all of K. `smem` holds T::smem bytes, the caller has filled its row table
// (gemm_rows) and synchronised. Warp (wm, wn) = (warp / WN, warp % WN) owns rows wm BM/2.. and
// columns wn WC..; acc[mf][nf] is its m16n8 fragment at rows 16 mf.., columns 8 nf..: (row
// lane/4, cols 2 (lane%4) +0/1) in [0..1], row + 8 in [2..3] (PTX mma layout).
template <class T>
__device__ inline void tile_mainloop(typename T::Acc& acc, int K, const bf16* fallback, unsigned char* smem) {
    constexpr int S = T::stages;
    const bf16* const* rows = reinterpret_cast<const bf16* const*>(smem);
    bf16* stages = reinterpret_cast<bf16*>(smem + sizeof(const bf16*) * (T::BM + kBN));
    const int warp = threadIdx.x / lm::kWarp, lane = threadIdx.x % lm::kWarp;
    const int wm = warp / T::WN, wn = warp % T::WN;
    const int k_tiles = (K + T::BK - 1) / T::BK;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles) load_stage<T>(stages + s * T::stage_elems, rows, s * T::BK, K, fallback);
        lm::cp_async_commit();  // empty groups keep the wait count uniform
    }
    // ldmatrix lane rows / chunks (A: 16 rows x 16 k per x4; B: 16 columns x 16 k, after A).
    const int a_row = wm * (T::BM / 2) + lane % 16, a_chunk = lane / 16;
    const int b_row = T::BM + wn * T::WC + (lane % 8) + (lane / 16) * 8, b_chunk = (lane / 8) % 2;
    for (int kt = 0; kt < k_tiles; ++kt) {
        lm::cp_async_wait<S - 2>();  // stage kt has landed (this thread's copies)
        __syncthreads();             // ... everyone's; and stage kt - 1 is no longer read
        const int next = kt + S - 1;
        if (next < k_tiles) load_stage<T>(stages + (next % S) * T::stage_elems, rows, next * T::BK, K, fallback);
        lm::cp_async_commit();
        const bf16* st = stages + (kt % S) * T::stage_elems;
#pragma unroll
        for (int kk = 0; kk < T::BK / 16; ++kk) {
            uint32_t a[T::MF][4], b[T::NF / 2][4];
#pragma unroll
            for (int mf = 0; mf < T::MF; ++mf) lm::ldmatrix_x4(a[mf], st + chunk_at<T>(a_row + 16 * mf, 2 * kk + a_chunk));
#pragma unroll
            for (int np = 0; np < T::NF / 2; ++np)
                lm::ldmatrix_x4(b[np], st + chunk_at<T>(b_row + 16 * np, 2 * kk + b_chunk));
#pragma unroll
            for (int mf = 0; mf < T::MF; ++mf)
#pragma unroll
                for (int nf = 0; nf < T::NF; ++nf)
                    lm::mma_bf16(acc.v[mf][nf], a[mf], b[nf / 2][(nf % 2) * 2], b[nf / 2][(nf % 2) * 2 + 1]);
        }
    }
    lm::cp_async_wait<0>();  // no copy may still target smem when the block exits
}

#if defined(FROST_ATTN_WGMMA)
// WgTile's mainloop: the same cp.async pipeline as tile_mainloop (all threads load), one block
// barrier per stage, then each warpgroup issues its 4 k-steps x 2 column halves and waits for
// them before the next barrier (which releases the stage for reloading).
__device__ inline void tile_mainloop_wgmma(WgTile::Acc& acc, int K, const bf16* fallback, unsigned char* smem) {
    using T = WgTile;
    constexpr int S = T::stages;
    const bf16* const* rows = reinterpret_cast<const bf16* const*>(smem);
    const uint32_t base = (lm::smem_addr(smem + T::table_bytes) + 1023u) & ~1023u;
    bf16* stages = reinterpret_cast<bf16*>(smem + T::table_bytes + (base - lm::smem_addr(smem + T::table_bytes)));
    constexpr uint32_t stage_bytes = T::stage_elems * sizeof(bf16), row_bytes = T::row_elems * sizeof(bf16);
    const int wg = threadIdx.x / 128;
    const int k_tiles = (K + T::BK - 1) / T::BK;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 32; ++i) acc.v[h][i] = 0.0f;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles) load_stage<T>(stages + s * T::stage_elems, rows, s * T::BK, K, fallback);
        lm::cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        lm::cp_async_wait<S - 2>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async (generic) -> wgmma (async)
        __syncthreads();
        const int next = kt + S - 1;
        if (next < k_tiles) load_stage<T>(stages + (next % S) * T::stage_elems, rows, next * T::BK, K, fallback);
        lm::cp_async_commit();
        const uint32_t st = base + (kt % S) * stage_bytes;
        const uint32_t a0 = st + wg * 64 * row_bytes, b0 = st + T::BM * row_bytes;
        lm::reg_fence(acc.v[0]);
        lm::reg_fence(acc.v[1]);
        lm::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < T::BK / 16; ++kk) {
            const uint64_t da = lm::smem_desc_sw128(a0 + kk * 32, 16, 1024);  // 16 k = 32 bytes into the row
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint64_t db = lm::smem_desc_sw128(b0 + h * 64 * row_bytes + kk * 32, 16, 1024);
                lm::wgmma_m64n64k16_ss(acc.v[h], da, db, 1);
            }
        }
        lm::wgmma_commit();
        lm::wgmma_wait<0>();
        lm::reg_fence(acc.v[0]);
        lm::reg_fence(acc.v[1]);
    }
    lm::cp_async_wait<0>();
}
#endif

// acc = A · B^T for either tile kind (acc zeroed by the caller).
template <class T>
__device__ inline void tile_run(typename T::Acc& acc, int K, const bf16* fallback, unsigned char* smem) {
    if constexpr (T::wgmma) {
#if defined(FROST_ATTN_WGMMA)
        tile_mainloop_wgmma(acc, K, fallback, smem);
#else
        __trap();  // not launched: moe_prefill_launch picks WgTile only on sm_90 (the sm_90a code)
#endif
    } else {
        tile_mainloop<T>(acc, K, fallback, smem);
    }
}

// The row table at the start of `smem`: A rows [0, BM), then B rows [BM, BM + 128).
__device__ inline const bf16** gemm_rows(unsigned char* smem) { return reinterpret_cast<const bf16**>(smem); }

}  // namespace frost::kernels::moe
