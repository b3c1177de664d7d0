// The bf16 path's state + output pass on 16-column dv slices (issue 18): grid (value heads, 8)
// instead of (value heads, 4), for models with few value heads. The pass is sequential over chunks
// and latency-bound, one block per SM: at 16 heads the 32-column pass runs 64 blocks on the H100's
// 132 SMs, this one 128. Each block computes the same products as the 32-column kernel
// (lm_gdn_bf16.cu) on half the columns, in the same order per element: V' = U − W S₀ and
// X = Q S₀ (k over dk ascending), O = e^γ ⊙ X + P V', S = e^{γ_L} S₀ + Kᵀ (e^{γ_L−γ} ⊙ V'), so
// output and state are bit-identical to it (the tests compare bytes).
// Warp roles (8 warps, 64 rows x 16 columns): warp w owns rows 16 (w/2) of V' (w even, A = W) or
// of X and O (w odd, A = Q), both n-tiles of the slice; S rows 16 w .. +15, both n-tiles, as fp32
// accumulators for the whole pass. Per chunk a warp issues half the mma and B loads of the
// 32-column kernel, and each A fragment is loaded by one warp instead of two.
// Shared memory: three stages of W, K, Q (full rows: every slice needs them), the U slice, P, γ
// (63.3 KB each), the bf16 S₀ copy and V', e^{γ_L−γ} V' (202 KB in all: one block per SM).
// Copies: by default a ninth (producer) warp issues them and hands each stage over through
// mbarriers (kProducer below); chunk_producer = -1 has the 8 compute warps issue them between
// their products (prefetch_narrow), as the 32-column pass does.
// Measured (H100, bench_cuda_kernels --gdn 16, L2 flushed, two runs, µs of the state pass at 4096 /
// 16384 rows; one call): 32-column pass 146.4 / 544-569, 16-column with the compute warps copying
// 121.7 / 468-479 (an earlier call), with the producer warp 114.6-115.1 / 453.9-457.2. What limits
// it now (ncu, 4096 rows, producer): L2 throughput 81 % (every slice block reads the head's full W,
// K, Q and P: 8 x 56 KB per chunk and head), 0.22 instructions issued per scheduler per cycle.
#include <cuda_runtime.h>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gdn_bf16.cuh"

namespace frost::kernels::gdn {
namespace {
using namespace lm;

constexpr int kNarrow = 16;          // dv columns per block
constexpr int kPN = kNarrow + 8;     // 48-byte rows: 8 consecutive rows hit 8 distinct 16-byte groups
constexpr int kNStages = 3;

struct NarrowBuf {
    bf16 w[kC][kPW];
    bf16 k[kC][kPW];
    bf16 q[kC][kPW];
    bf16 u[kC][kPN];  // this block's U slice
    bf16 p[kC][kPP];
    float gamma[kC];
};
struct NarrowSmem {
    NarrowBuf buf[kNStages];
    bf16 s[kD][kPN];   // S₀ slice, bf16: the B operand of W S₀ and Q S₀
    bf16 vp[kC][kPN];  // V'
    bf16 vd[kC][kPN];  // e^{γ_L−γ} ⊙ V'
    uint64_t full[kNStages];   // producer mode: a stage's copies have landed
    uint64_t empty[kNStages];  // producer mode: the compute warps are done with a stage
};

// Chunk c's operands into a stage (constant trip counts: 4 rounds of W, K, Q rows per thread, one
// of the U slice or γ, two of P); K and Q rows past len are zero-filled (never read: V' is zero there).
__device__ inline void prefetch_narrow(NarrowBuf& b, const GdnBf16Params& p, const float* slot, int start, int len,
                                       int kh, int j0) {
    constexpr int kSliceVecs = kNarrow / kVec;
    static_assert(kC * kSliceVecs + kC / 4 <= kThreads, "one round of the U slice and gamma");
    const int t = threadIdx.x;
    prefetch_wkq(b, p, slot, start, len, kh);
    if (t < kC * kSliceVecs) {
        const int r = t / kSliceVecs, dd = (t % kSliceVecs) * kVec;
        cp_async16(&b.u[r][dd], reinterpret_cast<const bf16*>(slot + kBf16UOff) + r * kD + j0 + dd);
    } else if (t < kC * kSliceVecs + kC / 4) {
        const int e = 4 * (t - kC * kSliceVecs);
        cp_async16(&b.gamma[e], slot + kBf16GammaOff + e);
    }
    prefetch_p(b, slot);
}

// ---- Producer mode (kProducer): a ninth warp issues every copy and hands each stage over through
// mbarriers (full: its cp.async have landed, tracked by cp.async.mbarrier.arrive; empty: all 8
// compute warps have read it), so the compute warps' per-chunk chain holds no copy instructions
// and their block-wide barriers become a named barrier of the 256 compute threads.
constexpr int kComputeThreads = kThreads;
constexpr int kProducerThreads = kThreads + kWarp;

__device__ inline void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ inline void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// The arrival fires when this thread's earlier cp.async have completed (.noinc: counted in init).
__device__ inline void mbar_arrive_cp_async(uint64_t* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ inline void mbar_wait_parity(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
#else
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
#endif
    }
}
// Barrier of the 256 compute threads only (id 1; id 0 is __syncthreads).
__device__ inline void compute_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kComputeThreads) : "memory"); }

// Chunk c's operands into a stage by one warp: 117 16-byte copies per lane, each warp instruction
// 512 contiguous bytes of W, K or Q (two rows) or of P, U, γ; K and Q rows past len zero-filled.
__device__ inline void produce_narrow(NarrowBuf& b, const GdnBf16Params& p, const float* slot, int start, int len,
                                      int kh, int j0, int lane) {
    const int hr = lane >> 4, v = (lane & 15) * kVec;  // row parity, column
    const int64_t stride = p.qkv_row_stride;
    const int64_t first = static_cast<int64_t>(start) * stride + kh * kD + v;
    const bf16* k_first = p.k + first;  // a valid source for zero-filled rows
    const bf16* q_first = p.q + first;
    const bf16* kr = k_first + hr * stride;
    const bf16* qr = q_first + hr * stride;
    const bf16* w = reinterpret_cast<const bf16*>(slot + kBf16WOff) + hr * kD + v;
#pragma unroll 8
    for (int i = 0; i < kC / 2; ++i) {
        const int r = 2 * i + hr;
        const bool in = r < len;
        cp_async16(&b.w[r][v], w + i * 2 * kD);
        cp_async16(&b.k[r][v], in ? kr : k_first, in ? 16 : 0);
        cp_async16(&b.q[r][v], in ? qr : q_first, in ? 16 : 0);
        kr += 2 * stride;
        qr += 2 * stride;
    }
    const bf16* pm = reinterpret_cast<const bf16*>(slot + kBf16POff) + (lane >> 3) * kC + (lane & 7) * kVec;
#pragma unroll
    for (int i = 0; i < kC / 4; ++i) cp_async16(&b.p[4 * i + (lane >> 3)][(lane & 7) * kVec], pm + i * 4 * kC);
    const bf16* u = reinterpret_cast<const bf16*>(slot + kBf16UOff) + (lane >> 1) * kD + j0 + (lane & 1) * kVec;
#pragma unroll
    for (int i = 0; i < kC / 16; ++i) cp_async16(&b.u[16 * i + (lane >> 1)][(lane & 1) * kVec], u + i * 16 * kD);
    if (lane < kC / 4) cp_async16(&b.gamma[4 * lane], slot + kBf16GammaOff + 4 * lane);
}

static_assert(sizeof(NarrowBuf) % 16 == 0, "16-byte copies into every stage");

template <bool kProducer>
__global__ void __launch_bounds__(kProducer ? kProducerThreads : kThreads)
    gdn_bf16_state_narrow_kernel(GdnBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    NarrowSmem& sm = *reinterpret_cast<NarrowSmem*>(smem_raw);
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int h = blockIdx.x, j0 = blockIdx.y * kNarrow;
    const int kh = h / (p.Hv / p.Hk);
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int g = lane / 4, q = lane % 4;
    int chunks = 0;
    for (int st, ln; chunks < max_chunks(rows) && chunk_range(chunks, pos, rows, st, ln);) ++chunks;
    auto slot_of = [&](int c) { return p.work + (static_cast<int64_t>(c) * p.Hv + h) * kBf16SlotFloats; };
    if constexpr (kProducer) {
        if (threadIdx.x == 0)
            for (int i = 0; i < kNStages; ++i) {
                mbar_init(&sm.full[i], kWarp);            // the producer's 32 lanes
                mbar_init(&sm.empty[i], kThreads / kWarp);  // one arrival per compute warp
            }
        __syncthreads();  // the barriers are initialised before anyone uses them
        if (warp == kThreads / kWarp) {
            for (int c = 0; c < chunks; ++c) {
                const int st = c % kNStages;
                if (c >= kNStages) mbar_wait_parity(&sm.empty[st], static_cast<uint32_t>((c / kNStages - 1) & 1));
                int start, len;
                chunk_range(c, pos, rows, start, len);
                produce_narrow(sm.buf[st], p, slot_of(c), start, len, kh, j0, lane);
                mbar_arrive_cp_async(&sm.full[st]);
            }
            cp_async_wait<0>();  // leave no copy in flight
            return;
        }
    }
    const int m0 = 16 * (warp / 2);   // V' or X / O rows
    const bool out_warp = warp & 1;   // warp-uniform: X and O (A = Q), else V' (A = W)
    const int ms = 16 * warp;         // S rows
    float* state = p.state + static_cast<int64_t>(h) * kD * kD;

    float s[2][4];
    load_state_slice(s, state, sm.s, ms, g, q, j0);
    auto stage = [&](int c) {
        int st, ln;
        chunk_range(c, pos, rows, st, ln);
        prefetch_narrow(sm.buf[c % kNStages], p, slot_of(c), st, ln, kh, j0);
    };
    if constexpr (!kProducer) {
#pragma unroll
        for (int c = 0; c < kNStages - 1; ++c) {
            if (c < chunks) stage(c);
            cp_async_commit();
        }
    }
    for (int c = 0; c < chunks; ++c) {
        if constexpr (kProducer) {
            // chunk c has landed (the previous S copy is visible: the barrier ending chunk c - 1)
            mbar_wait_parity(&sm.full[c % kNStages], static_cast<uint32_t>((c / kNStages) & 1));
            if (c == 0) compute_sync();  // the S₀ copy written above
        } else {
            if (c + kNStages - 1 < chunks) stage(c + kNStages - 1);  // into the buffer chunk c - 1 used
            cp_async_commit();
            cp_async_wait<kNStages - 1>();  // chunk c has landed
            __syncthreads();                // ... for every thread, and so has the previous S copy
        }
        const NarrowBuf& b = sm.buf[c % kNStages];
        int start, len;
        chunk_range(c, pos, rows, start, len);

        // V' = U − W S₀ or X = Q S₀ on this warp's 16 x 16 tile (k over dk).
        const bf16* a_base = out_warp ? &b.q[0][0] : &b.w[0][0];
        float acc[2][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < kD; k0 += 16) {
            uint32_t a[4], bs[4];
            load_a_ldsm<kPW>(a, a_base, m0, k0, lane);
            load_b2_t<kPN>(bs, &sm.s[0][0], k0, 0, lane);
            mma_bf16(acc[0], a, bs[0], bs[1]);
            mma_bf16(acc[1], a, bs[2], bs[3]);
        }
        const float gamma_last = b.gamma[len - 1];
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int r = m0 + g + 8 * hi;
            if (out_warp) {
                const float eg = expf(b.gamma[r]);
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    acc[j][2 * hi] *= eg;
                    acc[j][2 * hi + 1] *= eg;
                }
            } else {
                const float tail = expf(gamma_last - b.gamma[r]);
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int col = 8 * j + 2 * q;
                    const float2 uu = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b.u[r][col]));
                    const float v0 = uu.x - acc[j][2 * hi], v1 = uu.y - acc[j][2 * hi + 1];
                    *reinterpret_cast<uint32_t*>(&sm.vp[r][col]) = pack_bf16(v0, v1);
                    *reinterpret_cast<uint32_t*>(&sm.vd[r][col]) = pack_bf16(v0 * tail, v1 * tail);
                }
            }
        }
        if constexpr (kProducer)
            compute_sync();
        else
            __syncthreads();  // V' is complete and every read of the S₀ copy is done

        // S = e^{γ_L} S₀ + Kᵀ (e^{γ_L−γ} ⊙ V') (k over the chunk's rows; rows past len are zero).
        const float decay = expf(gamma_last);
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int x = 0; x < 4; ++x) s[j][x] *= decay;
#pragma unroll
        for (int k0 = 0; k0 < kC; k0 += 16) {
            uint32_t ak[4], bv[4];
            load_at<kPW>(ak, &b.k[0][0], ms, k0, lane);
            load_b2_t<kPN>(bv, &sm.vd[0][0], k0, 0, lane);
            mma_bf16(s[0], ak, bv[0], bv[1]);
            mma_bf16(s[1], ak, bv[2], bv[3]);
        }
        if (out_warp) {
            // O += P V' (P is zero above the diagonal: k-blocks past this tile's rows add nothing).
            for (int k0 = 0; k0 <= m0; k0 += 16) {
                uint32_t ap[4], bv[4];
                load_a_ldsm<kPP>(ap, &b.p[0][0], m0, k0, lane);
                load_b2_t<kPN>(bv, &sm.vp[0][0], k0, 0, lane);
                mma_bf16(acc[0], ap, bv[0], bv[1]);
                mma_bf16(acc[1], ap, bv[2], bv[3]);
            }
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int r = m0 + g + 8 * hi;
                if (r >= len) continue;
                bf16* out = p.o + (static_cast<int64_t>(start + r) * p.Hv + h) * kD + j0 + 2 * q;
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    *reinterpret_cast<uint32_t*>(out + 8 * j) = pack_bf16(acc[j][2 * hi], acc[j][2 * hi + 1]);
            }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi)
                *reinterpret_cast<uint32_t*>(&sm.s[ms + g + 8 * hi][8 * j + 2 * q]) =
                    pack_bf16(s[j][2 * hi], s[j][2 * hi + 1]);
        if constexpr (kProducer) {
            compute_sync();  // V' may be rewritten, the S copy is complete
            if (lane == 0) mbar_arrive(&sm.empty[c % kNStages]);  // this warp is done with the stage
        } else {
            __syncthreads();  // this buffer is free for the prefetch of chunk c + 3; V' may be rewritten
        }
    }
    store_state_slice(s, state, ms, g, q, j0);
}

}  // namespace

cudaError_t chunk_bf16_launch_state_narrow(const GdnBf16Params& p, cudaStream_t stream, bool producer) {
    constexpr int kSmem = static_cast<int>(sizeof(NarrowSmem));
    const auto kernel = producer ? gdn_bf16_state_narrow_kernel<true> : gdn_bf16_state_narrow_kernel<false>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
    kernel<<<dim3(p.Hv, kD / kNarrow), producer ? kProducerThreads : kThreads, kSmem, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels::gdn
