// The MoE prefill's grouped GEMMs on the warp-specialised persistent tile (tile shape 4,
// lm_moe_gemm_ws.cuh; sm_90a): the same inputs, outputs and bits-per-element contract as the
// other shapes' gate|up and down kernels in lm_moe_prefill.cu (each output element is one
// thread's fixed-order K sum, no atomics), on 128 x 256 tiles. A block per SM walks the work
// items (row tile of the device-side tile table x column tile) with a stride of the grid, so no
// grid is sized for the capacity and the row tiles of one expert run side by side (its weights
// come from L2 the second time).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_moe_gemm_ws.cuh"

namespace frost::kernels::moe {
namespace {

__host__ __device__ inline int ws_width(const MoeBf16Params& p) { return p.I > p.Is ? p.I : p.Is; }
// Column tiles per row tile: gate|up 128 activation columns (256 B rows: 128 gate, then the
// matching 128 up), down 256 output columns.
__host__ __device__ inline int ws_col_tiles(const MoeBf16Params& p, bool down) {
    return down ? (p.H + WsTile::BN - 1) / WsTile::BN : (ws_width(p) + WsTile::BN / 2 - 1) / (WsTile::BN / 2);
}

// kDown false: ag[e, n0 .. n0 + 128) = bf16(silu(x_r · Wg^T) * (x_r · Wu^T)), x_r gathered
// through entry_row. kDown true: yg[e, n0 .. n0 + 256) = bf16(ag[e, :F] · Wd^T).
template <bool kDown>
__global__ void __launch_bounds__(WsTile::threads, 1) moe_ws_kernel(MoeBf16Params p) {
#if defined(FROST_ATTN_WGMMA)
    using T = WsTile;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t bars[2 * T::stages];
    const WsRing ring{(lm::smem_addr(smem_raw) + 1023u) & ~1023u, lm::smem_addr(bars),
                      lm::smem_addr(bars + T::stages)};
    if (threadIdx.x == 0)
        for (int s = 0; s < T::stages; ++s) {
            lm::mbar_init(ring.full + 8 * s, 128);   // every producer thread's cp.async arrival
            lm::mbar_init(ring.empty + 8 * s, 256);  // every consumer thread
        }
    __syncthreads();
    const int width = ws_width(p), nt = ws_col_tiles(p, kDown), total = p.tile_table[0] * nt;
    const int wg = threadIdx.x / 128;
    uint32_t it = 0;
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        const int t = w / nt, group = p.tile_table[1 + 2 * t], row0 = p.tile_table[2 + 2 * t];
        const int row_end = min(row0 + T::BM, p.group_offsets[group + 1]);
        const bool shared = group == p.E;
        const int F = shared ? p.Is : p.I, n0 = (w % nt) * (kDown ? T::BN : T::BN / 2);
        if (!kDown && n0 >= F) continue;  // a narrower shared (or routed) FFN: the same test on every side
        const bf16* wt = kDown ? (shared ? p.shared_down : p.experts_down + static_cast<int64_t>(group) * p.H * p.I)
                               : (shared ? p.shared_gate_up : p.experts_gate_up + static_cast<int64_t>(group) * 2 * p.I * p.H);
        const int K = kDown ? F : p.H;
        if (wg == 0) {
            const int r0 = threadIdx.x / 8;
            const bf16* a[8];
            const bf16* b[16];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int e = row0 + r0 + 16 * i;
                a[i] = e >= row_end ? nullptr
                       : kDown      ? p.ag + static_cast<int64_t>(e) * width
                                    : p.x + static_cast<int64_t>(p.entry_row[e]) * p.H;
            }
#pragma unroll
            for (int i = 0; i < 16; ++i) {
                const int j = r0 + 16 * i;
                if (kDown) {
                    b[i] = n0 + j < p.H ? wt + static_cast<int64_t>(n0 + j) * F : nullptr;
                } else {
                    const int col = n0 + j % (T::BN / 2);
                    b[i] = col < F ? wt + static_cast<int64_t>(j >= T::BN / 2 ? F + col : col) * p.H : nullptr;
                }
            }
            ws_produce(ring, it, a, b, K, wt);
        } else {
            const int cw = wg - 1;
            float acc[128];
            if (row0 + 64 * cw >= row_end) {  // warpgroup-uniform: no rows of this tile
                ws_consume<false>(ring, it, acc, K, cw);
                continue;
            }
            ws_consume<true>(ring, it, acc, K, cw);
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int e = row0 + 64 * cw + ws_row(half);
                if (e >= row_end) continue;
                if (kDown) {
                    bf16* dst = p.yg + static_cast<int64_t>(e) * p.H;
#pragma unroll
                    for (int i = 0; i < 32; ++i) {
                        const int col = n0 + ws_col(i);
                        if (col < p.H)
                            *reinterpret_cast<__nv_bfloat162*>(dst + col) =
                                __floats2bfloat162_rn(acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
                    }
                } else {
                    bf16* dst = p.ag + static_cast<int64_t>(e) * width;
#pragma unroll
                    for (int i = 0; i < 16; ++i) {
                        const int col = n0 + ws_col(i);
                        const float g0 = acc[4 * i + 2 * half], g1 = acc[4 * i + 2 * half + 1];
                        const float u0 = acc[4 * (i + 16) + 2 * half], u1 = acc[4 * (i + 16) + 2 * half + 1];
                        if (col < F)
                            *reinterpret_cast<__nv_bfloat162*>(dst + col) =
                                __floats2bfloat162_rn(lm::silu(g0) * u0, lm::silu(g1) * u1);
                    }
                }
            }
        }
    }
    if (wg == 0) lm::cp_async_wait<0>();  // no copy may still target shared memory at exit
#else
    __trap();  // not launched: the wgmma shapes run only on compute capability 9.0 (the sm_90a code)
#endif
}

// One persistent block per SM (132, the H100's, if the runtime cannot say).
int sm_count() { return lm::device_sm_count() > 0 ? lm::device_sm_count() : 132; }

}  // namespace

cudaError_t ws_gemms_launch(const MoeBf16Params& p, int tile_capacity, cudaStream_t stream) {
    constexpr auto up = moe_ws_kernel<false>, down = moe_ws_kernel<true>;
    const int smem = static_cast<int>(WsTile::smem);
    cudaError_t e = cudaFuncSetAttribute(up, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(down, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    const int64_t cap_up = int64_t(tile_capacity) * ws_col_tiles(p, false);
    const int64_t cap_down = int64_t(tile_capacity) * ws_col_tiles(p, true);
    up<<<static_cast<int>(std::min<int64_t>(sm_count(), cap_up)), WsTile::threads, WsTile::smem, stream>>>(p);
    down<<<static_cast<int>(std::min<int64_t>(sm_count(), cap_down)), WsTile::threads, WsTile::smem, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels::moe
