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
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/lm_attn_wgmma.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kD = kAttnHeadDim;  // 256
constexpr int kWgRows = 64;       // query rows per consumer warpgroup (wgmma M)
constexpr int kWgs = 2;
constexpr int kRows = kWgs * kWgRows;  // query rows per block
constexpr int kKeys = 64;              // keys per K/V tile
constexpr int kThreads = kWgs * 128;
constexpr int kQBytes = kRows * kD * 2;
constexpr int kKvBytes = kKeys * kD * 2;
constexpr int kStages = 2;
constexpr int kSmemBytes = kQBytes + 2 * kStages * kKvBytes + 1024;  // + slack for 1024 alignment

#if defined(FROST_ATTN_WGMMA)

constexpr int kRowBytes = 128;      // one swizzled row: 64 bf16
constexpr int kChunks = kD / kVec;  // 16-byte chunks per row of 256 dims
constexpr float kLog2e = 1.4426950408889634f;

__device__ inline uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ inline void cp_async16_s(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

// cp.async writes through the generic proxy; wgmma reads through the async proxy.
__device__ inline void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Issues the copy of R rows x 256 dims into the swizzled layout at `dst`; global row r is
// src + r * stride (elements); rows r >= valid become zeros.
// Spread over kLoaders threads; `tid` is this thread's index among them. The consumers' copy
// is unrolled (few registers to spare, but fewer instructions between MMAs); the producer's is a
// plain loop, which keeps it within its small register budget.
template <int R, int kLoaders = kThreads>
__device__ inline void load_tile(uint32_t dst, const bf16* src, int64_t stride, int valid, int tid = threadIdx.x) {
    auto one = [&](int i) {
        const int e = tid + i * kLoaders;
        const int r = e / kChunks, ch = e % kChunks;
        const bool in = r < valid;
        const uint32_t off = (ch / 8) * (R * kRowBytes) + r * kRowBytes + (((ch % 8) ^ (r % 8)) << 4);
        cp_async16_s(dst + off, src + (in ? r * stride : 0) + ch * kVec, in ? 16 : 0);
    };
    constexpr int kIters = R * kChunks / kLoaders;
    if constexpr (kLoaders == kThreads) {
#pragma unroll
        for (int i = 0; i < kIters; ++i) one(i);
    } else {
#pragma unroll 1
        for (int i = 0; i < kIters; ++i) one(i);
    }
}

// Online-softmax step for one S tile held as wgmma accumulators (rows g and g+8 of this warp):
// masks keys past each row's position, updates the running max m (raw score units) and the
// thread's partial row sums l, leaves the probabilities in s and returns the
// factors exp(m_old - m_new) by which the output accumulators must be scaled.
__device__ inline void softmax_tile(float (&s)[32], int key0, int qpos_lo, bool mask,
                                    float scale_log2, float (&m)[2], float (&l)[2], float (&alpha)[2]) {
    const int t = threadIdx.x % 4;
    if (mask) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int key = key0 + 8 * i + 2 * t + e;
                if (key > qpos_lo) s[4 * i + e] = -INFINITY;
                if (key > qpos_lo + 8) s[4 * i + 2 + e] = -INFINITY;
            }
        }
    }
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(kFullMask, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(kFullMask, mx[h], 2));
        // Every row sees key 0 in the first tile, so mx is finite; m = -inf only before it.
        alpha[h] = exp2f((m[h] - mx[h]) * scale_log2);
        m[h] = mx[h];
    }
    const float base0 = mx[0] * scale_log2, base1 = mx[1] * scale_log2;
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        s[4 * i] = exp2f(fmaf(s[4 * i], scale_log2, -base0));
        s[4 * i + 1] = exp2f(fmaf(s[4 * i + 1], scale_log2, -base0));
        s[4 * i + 2] = exp2f(fmaf(s[4 * i + 2], scale_log2, -base1));
        s[4 * i + 3] = exp2f(fmaf(s[4 * i + 3], scale_log2, -base1));
        sum[0] += s[4 * i] + s[4 * i + 1];
        sum[1] += s[4 * i + 2] + s[4 * i + 3];
    }
    l[0] = l[0] * alpha[0] + sum[0];
    l[1] = l[1] * alpha[1] + sum[1];
}

// The probabilities as bf16 A fragments: k-step ks of PV covers keys 16ks..16ks+15 = n8 tiles
// 2ks, 2ks+1 of S.
__device__ inline void pack_p(const float (&s)[32], uint32_t (&pa)[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        pa[ks][0] = pack_bf16(s[8 * ks], s[8 * ks + 1]);
        pa[ks][1] = pack_bf16(s[8 * ks + 2], s[8 * ks + 3]);
        pa[ks][2] = pack_bf16(s[8 * ks + 4], s[8 * ks + 5]);
        pa[ks][3] = pack_bf16(s[8 * ks + 6], s[8 * ks + 7]);
    }
}

__device__ inline void reg_fence_u(uint32_t (&r)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// S = Q Kᵀ for this warpgroup's 64 rows against one K tile (issued, not waited).
__device__ inline void issue_qk(float (&s)[32], uint32_t sq_wg, uint32_t sk) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t koff = (kk % 4) * 32;  // 16 dims = 32 bytes into the swizzled row
        const uint64_t da = smem_desc_sw128(sq_wg + (kk / 4) * (kRows * kRowBytes) + koff, 16, 1024);
        const uint64_t db = smem_desc_sw128(sk + (kk / 4) * (kKeys * kRowBytes) + koff, 16, 1024);
        wgmma_m64n64k16_ss(s, da, db, kk > 0);
    }
}

// O += P V over one V tile: k-step ks covers keys 16ks..16ks+15 (two 8-row groups, 1024 bytes
// apart: the stride offset); the four 64-dim column blocks of N = 256 are kKeys * 128 bytes apart
// (the leading offset of an N-major operand).
__device__ inline void issue_pv(float (&o)[128], const uint32_t (&pa)[4][4], uint32_t sv) {
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
        const uint64_t db = smem_desc_sw128(sv + ks * 16 * kRowBytes, kKeys * kRowBytes, 1024);
        wgmma_m64n256k16_rs(o, pa[ks], db);
    }
}

// Epilogue: row sums reduced over the quad, O normalised, gated, stored as bf16 (rows r_lo and
// r_lo + 8 of this thread; rows past the valid count are not written).
__device__ inline void store_output(const AttentionBf16Params& p, const float (&o)[128], float (&l)[2], int r_lo,
                                    int rows, int qh, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
        l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
    }
    const int out_stride = p.Hq * kD;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r_lo + 8 * h;
        if (r >= rows) continue;
        const float inv = 1.0f / l[h];
        bf16* out = p.o + static_cast<int64_t>(r) * out_stride + qh * kD;
        const bf16* gate = p.gate ? p.gate + r * p.q_row_stride + qh * p.q_head_stride : nullptr;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int d = 8 * i + 2 * t;
            float v0 = o[4 * i + 2 * h] * inv, v1 = o[4 * i + 2 * h + 1] * inv;
            if (gate) {
                const float2 gv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(gate + d));
                v0 *= sigmoid(gv.x);
                v1 *= sigmoid(gv.y);
            }
            *reinterpret_cast<__nv_bfloat162*>(out + d) = __floats2bfloat162_rn(v0, v1);
        }
    }
}

#endif  // FROST_ATTN_WGMMA

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
    wgmma_wait<0>();
    reg_fence(o);

    store_output(p, o, l, row0 + wg * kWgRows + warp * 16 + g, rows, qh, t);
#endif  // FROST_ATTN_WGMMA
}

#if defined(FROST_ATTN_WGMMA)
// mbarrier primitives (PTX "Parallel synchronization and communication: mbarrier").
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
#endif

// Warp-specialised variant: warpgroup 0 only loads (cp.async into the same two-stage ring,
// completion signalled on "full" mbarriers), warpgroups 1 and 2 only compute and release stages
// on "empty" mbarriers. The consumers never meet at a block barrier, so one can run its softmax
// while the other's MMAs occupy the tensor cores. Registers move to the consumers (setmaxnreg).
constexpr int kWsThreads = 3 * 128;
constexpr int kWsSmemBytes = kSmemBytes + 128;          // + mbarriers

// kPingpong (FA3's inter-warpgroup schedule): the consumers take turns to issue their MMAs
// (named barriers 1 and 2), so one warpgroup's softmax runs while the other's MMAs run.
template <bool kPingpong>
__global__ void __launch_bounds__(kWsThreads, 1) attn_prefill_hopper_ws_kernel(AttentionBf16Params p) {
#if defined(FROST_ATTN_WGMMA)
    // The block is launched with 168 registers a thread (65536 / 384, rounded down to 8): what
    // the producer frees must cover what the consumers take, 128 x (168 - 40) = 256 x (232 - 168),
    // or setmaxnreg.inc waits forever (seen: 32 / 240 hung).
    constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t sq = base, sk0 = base + kQBytes, sv0 = sk0 + kStages * kKvBytes;
    const uint32_t bars = sv0 + kStages * kKvBytes;  // q_full, k_full[2], v_full[2], k_empty[2], v_empty[2]
    const uint32_t q_full = bars;
    auto k_full = [&](int j) { return bars + 8 * (1 + j % kStages); };
    auto v_full = [&](int j) { return bars + 8 * (3 + j % kStages); };
    auto k_empty = [&](int j) { return bars + 8 * (5 + j % kStages); };
    auto v_empty = [&](int j) { return bars + 8 * (7 + j % kStages); };
    auto k_stage = [&](int j) { return sk0 + (j % kStages) * kKvBytes; };
    auto v_stage = [&](int j) { return sv0 + (j % kStages) * kKvBytes; };

    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int row0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // heaviest row tiles first (see above)
    if (row0 >= rows) return;
    const int qh = blockIdx.x;
    const int kvh = qh / (p.Hq / p.Hkv);
    const int64_t kv_dim = static_cast<int64_t>(p.Hkv) * kD;
    const int kv_len = pos + min(rows, row0 + kRows);
    const int n_tiles = (kv_len + kKeys - 1) / kKeys;
    const bf16* kc = p.k_cache + kvh * kD;
    const bf16* vc = p.v_cache + kvh * kD;
    if (threadIdx.x == 0) {
        mbar_init(q_full, 128);
        for (int i = 0; i < kStages; ++i) {
            mbar_init(k_full(i), 128);
            mbar_init(v_full(i), 128);
            mbar_init(k_empty(i), 256);
            mbar_init(v_empty(i), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;

    if (wg == 0) {
        // Producer: Q, K0, then K(j+1) before V(j), the order the consumers need them.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        const int tid = threadIdx.x;
        load_tile<kRows, 128>(sq, p.q + row0 * p.q_row_stride + qh * p.q_head_stride, p.q_row_stride, rows - row0, tid);
        mbar_arrive_cp_async(q_full);
        load_tile<kKeys, 128>(k_stage(0), kc, kv_dim, kv_len, tid);
        mbar_arrive_cp_async(k_full(0));
        for (int j = 0; j < n_tiles; ++j) {
            const int jk = j + 1;
            if (jk < n_tiles) {
                if (jk >= kStages) mbar_wait(k_empty(jk), (jk / kStages - 1) & 1);
                load_tile<kKeys, 128>(k_stage(jk), kc + jk * kKeys * kv_dim, kv_dim, kv_len - jk * kKeys, tid);
                mbar_arrive_cp_async(k_full(jk));
            }
            if (j >= kStages) mbar_wait(v_empty(j), (j / kStages - 1) & 1);
            load_tile<kKeys, 128>(v_stage(j), vc + j * kKeys * kv_dim, kv_dim, kv_len - j * kKeys, tid);
            mbar_arrive_cp_async(v_full(j));
        }
        cp_async_wait<0>();
    } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int cw = wg - 1;  // consumer index: rows cw * 64 ..
    const int warp = (threadIdx.x % 128) / kWarp;
    const int lane = threadIdx.x % kWarp;
    const int g = lane / 4, t = lane % 4;
    const int wg_qpos0 = pos + row0 + cw * kWgRows;
    const int qpos_lo = wg_qpos0 + warp * 16 + g;
    const float scale_log2 = p.scale * kLog2e;
    const uint32_t sq_wg = sq + cw * kWgRows * kRowBytes;

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;
    uint32_t pa[4][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, alpha[2];

    // Turns: warpgroup cw waits on barrier 1 + cw and passes to the other on 2 - cw; n + 1
    // issue rounds each (QK(0), n - 1 overlapped rounds, the last PV); consumer 0 goes first and
    // consumer 1 skips its last pass, so every arrival is matched.
    auto turn_wait = [&] {
        if constexpr (kPingpong) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + cw) : "memory");
    };
    auto turn_pass = [&](bool last) {
        if constexpr (kPingpong) {
            if (!(last && cw == 1)) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - cw) : "memory");
        }
    };
    if constexpr (kPingpong) {
        if (cw == 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
    }

    mbar_wait(q_full, 0);
    mbar_wait(k_full(0), 0);
    fence_proxy_async();  // cp.async (generic proxy) data, read next by wgmma (async proxy)
    turn_wait();
    wgmma_fence();
    issue_qk(s, sq_wg, k_stage(0));
    wgmma_commit();
    turn_pass(false);
    wgmma_wait<0>();
    reg_fence(s);
    mbar_arrive(k_empty(0));
    softmax_tile(s, 0, qpos_lo, kKeys - 1 > wg_qpos0, scale_log2, m, l, alpha);
    pack_p(s, pa);

    for (int j = 0; j + 1 < n_tiles; ++j) {
        mbar_wait(k_full(j + 1), ((j + 1) / kStages) & 1);
        mbar_wait(v_full(j), (j / kStages) & 1);
        fence_proxy_async();
        reg_fence(o);
        reg_fence_u(pa);
        turn_wait();
        wgmma_fence();
        issue_qk(s, sq_wg, k_stage(j + 1));
        wgmma_commit();
        issue_pv(o, pa, v_stage(j));
        wgmma_commit();
        turn_pass(false);
        wgmma_wait<1>();
        reg_fence(s);
        mbar_arrive(k_empty(j + 1));
        const int key0 = (j + 1) * kKeys;
        softmax_tile(s, key0, qpos_lo, key0 + kKeys - 1 > wg_qpos0, scale_log2, m, l, alpha);
        reg_fence(s);
        reg_fence(m);
        reg_fence(l);
        reg_fence(alpha);
        wgmma_wait<0>();
        reg_fence(o);
        reg_fence_u(pa);
        mbar_arrive(v_empty(j));
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            o[4 * i] *= alpha[0];
            o[4 * i + 1] *= alpha[0];
            o[4 * i + 2] *= alpha[1];
            o[4 * i + 3] *= alpha[1];
        }
        pack_p(s, pa);  // PV(j) is done with the old fragments
    }
    mbar_wait(v_full(n_tiles - 1), ((n_tiles - 1) / kStages) & 1);
    fence_proxy_async();
    reg_fence(o);
    reg_fence_u(pa);
    turn_wait();
    wgmma_fence();
    issue_pv(o, pa, v_stage(n_tiles - 1));
    wgmma_commit();
    turn_pass(true);
    wgmma_wait<0>();
    reg_fence(o);
    store_output(p, o, l, row0 + cw * kWgRows + warp * 16 + g, rows, qh, t);
    }
#endif  // FROST_ATTN_WGMMA
}

}  // namespace

bool attn_prefill_hopper_supported(const AttentionBf16Params& p) {
    (void)p;
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return major == 9 && minor == 0;  // the sm_90a machine code; no PTX fallback for wgmma
}

cudaError_t attn_prefill_hopper_launch(const AttentionBf16Params& p, cudaStream_t stream, int variant) {
    if (!p.q || !p.k_cache || !p.v_cache || !p.o || !p.cursor || p.head_dim != kD || p.Hq <= 0 || p.Hkv <= 0 ||
        p.Hq % p.Hkv != 0 || p.max_rows <= 0 || p.q_row_stride % kVec != 0 || p.q_head_stride % kVec != 0 ||
        variant < 0 || variant > 3)
        return cudaErrorInvalidValue;
    if (!attn_prefill_hopper_supported(p)) return cudaErrorNotSupported;
    const dim3 grid(p.Hq, ceil_div(p.max_rows, kRows));
    if (variant == 0) variant = kAttnPrefillHopperVariant;
    if (variant >= 2) {
        const auto kernel = variant == 3 ? attn_prefill_hopper_ws_kernel<true> : attn_prefill_hopper_ws_kernel<false>;
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWsSmemBytes);
        if (err != cudaSuccess) return err;
        kernel<<<grid, kWsThreads, kWsSmemBytes, stream>>>(p);
        return cudaGetLastError();
    }
    cudaError_t err = cudaFuncSetAttribute(attn_prefill_hopper_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
    attn_prefill_hopper_kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels
