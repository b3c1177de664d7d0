// Causal GQA prefill attention for Hopper (sm_90a), head_dim 256, sigmoid output gate fused: the
// FlashAttention-3 structure with warpgroup MMA (PTX "wgmma.mma_async").
// A block is 128 query rows of one q head: two consumer warpgroups of 64 rows each. Q (128 x 256),
// and a two-stage ring of K and V tiles (64 keys x 256) live in shared memory in the 128-byte
// swizzled layout wgmma reads directly: a tile of R rows is stored as four column blocks of 64
// dims, [block][row][64], each row 128 bytes with its 16-byte chunk c at c ^ (row % 8).
//   S = Q Kᵀ: m64n64k16, A (Q) and B (K) K-major from shared memory, 16 k-steps over d.
//   O += P V: m64n256k16, A (P, bf16) from registers (the S accumulator layout is the A fragment
//   layout), B (V) N-major from shared memory (row-major [key][d] is the transposed B).
// Software pipeline inside each warpgroup (FA3's intra-warpgroup overlap): the QKᵀ of tile j+1 is
// issued together with the PV of tile j, and the softmax of tile j+1 runs while PV(j) is on the
// tensor cores. Loads are cp.async issued by all threads one tile ahead; one block barrier per tile
// both publishes the landed tile and releases the stage consumed in the previous iteration.
// Keys past the valid length load as zeros (cp.async zero-fill), so a NaN in an unwritten cache
// row never meets a zero probability. Positions and row counts come from the device cursor.
// The warp-specialised variants (a TMA producer, mbarriers, optional ping-pong) are in
// lm_attn_hopper_tma.cu, the default since 2026-11-24. Measured on the H100 (bench_cuda_kernels
// --attn, 9B shape): this kernel 462 / 423 TFLOP/s at (16384 rows, position 0) / (2048, 30720), the
// TMA ping-pong kernel 556-561 / 605-611 in the same run. A warp-specialised variant whose
// producer warpgroup issued cp.async (variants 2 and 3 until then) ran 333-337 and was removed.
#include <cstdlib>

#include "kernels/cuda/lm_attn_hopper.cuh"
#include "kernels/cuda/lm_attn_split.cuh"

namespace frost::kernels {
namespace {
using namespace attn_hopper;

__global__ void __launch_bounds__(kThreads, 1) attn_prefill_hopper_kernel(AttentionBf16Params p) {
#if defined(FROST_ATTN_WGMMA)
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t sq = base, sk0 = base + kQBytes, sv0 = sk0 + kStages * kKvBytes;

    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    // Heaviest row tiles first, all heads of a row tile together (x is dispatched fastest): the
    // hardware's in-order block dispatch then approximates longest-first scheduling, and heads
    // sharing a KV head run side by side (L2 reuse).
    const int row0 = (gridDim.y - 1 - blockIdx.y) * kRows;
    if (row0 >= rows) return;
    const int qh = blockIdx.x;
    const int kvh = qh / (p.Hq / p.Hkv);
    const int64_t kv_dim = static_cast<int64_t>(p.Hkv) * kD;
    const int wg = threadIdx.x / 128;
    const int warp = (threadIdx.x % 128) / kWarp;
    const int lane = threadIdx.x % kWarp;
    const int g = lane / 4, t = lane % 4;
    const int kv_len = pos + min(rows, row0 + kRows);
    const int n_tiles = (kv_len + kKeys - 1) / kKeys;
    const int wg_qpos0 = pos + row0 + wg * kWgRows;  // smallest position of this warpgroup's rows
    const int qpos_lo = wg_qpos0 + warp * 16 + g;
    const float scale_log2 = p.scale * kLog2e;
    const bf16* kc = p.k_cache + kvh * kD;
    const bf16* vc = p.v_cache + kvh * kD;
    auto k_stage = [&](int j) { return sk0 + (j % kStages) * kKvBytes; };
    auto v_stage = [&](int j) { return sv0 + (j % kStages) * kKvBytes; };

    // Groups: {Q, K0}, then {K1, V0}; in iteration j: {K(j+2), V(j+1)}.
    load_tile<kRows>(sq, p.q + row0 * p.q_row_stride + qh * p.q_head_stride, p.q_row_stride, rows - row0);
    load_tile<kKeys>(k_stage(0), kc, kv_dim, kv_len);
    cp_async_commit();
    if (n_tiles > 1) load_tile<kKeys>(k_stage(1), kc + kKeys * kv_dim, kv_dim, kv_len - kKeys);
    load_tile<kKeys>(v_stage(0), vc, kv_dim, kv_len);
    cp_async_commit();

    const uint32_t sq_wg = sq + wg * kWgRows * kRowBytes;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;
    uint32_t pa[4][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, alpha[2];

    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    wgmma_fence();
    issue_qk(s, sq_wg, k_stage(0));
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(s);
    softmax_tile(s, 0, qpos_lo, kKeys - 1 > wg_qpos0, scale_log2, m, l, alpha);
    pack_p(s, pa);

    // Tiles 0 .. n-2: PV(j) overlapped with QKᵀ(j+1) and its softmax. No branch around a wgmma
    // (a wgmma issued on one path only makes ptxas serialise all of them).
    for (int j = 0; j + 1 < n_tiles; ++j) {
        cp_async_wait<0>();  // K(j+1) and V(j) have landed
        fence_proxy_async();
        __syncthreads();     // ... for every thread; and every warpgroup is done with K(j), V(j-1)
        // The rescaled o and the new pa must be final before the fence that hands them to wgmma.
        reg_fence(o);
        reg_fence_u(pa);
        wgmma_fence();
        issue_qk(s, sq_wg, k_stage(j + 1));
        wgmma_commit();
        issue_pv(o, pa, v_stage(j));
        wgmma_commit();
        // Next loads, issued while the tensor cores work (stages no warpgroup reads any more).
        if (j + 2 < n_tiles)
            load_tile<kKeys>(k_stage(j + 2), kc + (j + 2) * kKeys * kv_dim, kv_dim, kv_len - (j + 2) * kKeys);
        load_tile<kKeys>(v_stage(j + 1), vc + (j + 1) * kKeys * kv_dim, kv_dim, kv_len - (j + 1) * kKeys);
        cp_async_commit();
        wgmma_wait<1>();  // S(j+1) is ready; PV(j) may still run
        reg_fence(s);
        const int key0 = (j + 1) * kKeys;
        softmax_tile(s, key0, qpos_lo, key0 + kKeys - 1 > wg_qpos0, scale_log2, m, l, alpha);
        // Pin the softmax results here: the compiler would otherwise sink the exponentials past
        // the wait below (register arithmetic moves freely across asm), losing the overlap. They
        // stay fp32 in s until PV(j) has released pa.
        reg_fence(s);
        reg_fence(m);
        reg_fence(l);
        reg_fence(alpha);
        wgmma_wait<0>();
        reg_fence(o);
        reg_fence_u(pa);  // PV(j) read pa asynchronously: its registers stay live until here
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            o[4 * i] *= alpha[0];
            o[4 * i + 1] *= alpha[0];
            o[4 * i + 2] *= alpha[1];
            o[4 * i + 3] *= alpha[1];
        }
        pack_p(s, pa);  // PV(j) is done with the old fragments
    }
    // Last tile: PV only.
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    reg_fence(o);
    reg_fence_u(pa);
    wgmma_fence();
    issue_pv(o, pa, v_stage(n_tiles - 1));
    wgmma_commit();
    const int r_lo = row0 + wg * kWgRows + warp * 16 + g;
    uint32_t gv[2][32];
    load_gate(p, r_lo, rows, qh, t, gv);  // in flight while the last PV runs
    wgmma_wait<0>();
    reg_fence(o);
    store_output(p, o, l, gv, r_lo, rows, qh, t);
#endif  // FROST_ATTN_WGMMA
}

}  // namespace

bool attn_prefill_hopper_supported(const AttentionBf16Params& p) {
    (void)p;
    return lm::device_runs_sm90a();
}

// The variant a launch with variant 0 runs: kAttnPrefillHopperVariant, or FROST_ATTN_HOPPER=1, 4..9
// (for A/B measurement of the same binary through the engine and bench_ops; read once per process).
static int default_variant() {
    static const int v = [] {
        const char* e = std::getenv("FROST_ATTN_HOPPER");
        const int n = e ? std::atoi(e) : 0;
        return n == 1 || (n >= 4 && n <= 9) ? n : kAttnPrefillHopperVariant;
    }();
    return v;
}

cudaError_t attn_prefill_hopper_launch(const AttentionBf16Params& p, cudaStream_t stream, int variant, int splits) {
    if (!p.q || !p.k_cache || !p.v_cache || !p.o || !p.cursor || p.head_dim != kD || p.Hq <= 0 || p.Hkv <= 0 ||
        p.Hq % p.Hkv != 0 || p.max_rows <= 0 || p.q_row_stride % kVec != 0 || p.q_head_stride % kVec != 0 ||
        variant < 0 || variant > 9 || variant == 2 || variant == 3 ||  // 2, 3: removed (see above)
        splits < 1 || splits > kAttnPrefillMaxSplits || (splits > 1 && !p.work))
        return cudaErrorInvalidValue;
    if (!attn_prefill_hopper_supported(p)) return cudaErrorNotSupported;
    const bool chosen = variant == 0;  // the launcher's variant: one that cannot split runs unsplit
    if (chosen) variant = default_variant();
    if (splits > 1 && (variant < 4 || variant > 7)) {
        if (!chosen) return cudaErrorInvalidValue;
        splits = 1;
    }
    if (splits > 1) {  // the TMA variants without clusters split their keys; the combine merges
        const cudaError_t err = attn_hopper::tma_launch(p, stream, variant % 2 == 1, variant >= 6 ? 3 : 2, false, splits);
        return err != cudaSuccess ? err : attn_split::combine_launch(p, stream, splits, attn_hopper::kRows);
    }
    if (variant >= 4)
        return attn_hopper::tma_launch(p, stream, variant % 2 == 1, variant == 6 || variant == 7 ? 3 : 2, variant >= 8);
    cudaError_t err = cudaFuncSetAttribute(attn_prefill_hopper_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
    attn_prefill_hopper_kernel<<<grid(p), kThreads, kSmemBytes, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels
