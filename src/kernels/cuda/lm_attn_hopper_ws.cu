// Hopper attention prefill, warp-specialised variants (see lm_attn_hopper.cu for the shared
// design): a producer warpgroup loads, two consumer warpgroups compute; optional FA3 ping-pong.
#include "kernels/cuda/lm_attn_hopper.cuh"

namespace frost::kernels::attn_hopper {
namespace {

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

cudaError_t ws_launch(const AttentionBf16Params& p, cudaStream_t stream, bool pingpong) {
    const auto kernel = pingpong ? attn_prefill_hopper_ws_kernel<true> : attn_prefill_hopper_ws_kernel<false>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWsSmemBytes);
    if (err != cudaSuccess) return err;
    kernel<<<grid(p), kWsThreads, kWsSmemBytes, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels::attn_hopper
