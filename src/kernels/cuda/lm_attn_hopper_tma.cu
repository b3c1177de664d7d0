// Hopper attention prefill, warp-specialised with a TMA producer (variants 4 and 5 of
// attn_prefill_hopper_launch; the shared design is in lm_attn_hopper.cu). One elected thread of
// the producer warpgroup issues every load as a bulk tensor copy (cp.async.bulk.tensor, four
// 64-dim column boxes per tile, 128-byte swizzle = the layout the wgmma descriptors read) and
// arms the stage's "full" mbarrier with the tile's byte count. The two consumer warpgroups only
// compute and release stages on "empty" mbarriers; they never meet at a block barrier, so one can
// run its softmax while the other's MMAs occupy the tensor cores. kPingpong (FA3's inter-warpgroup
// schedule): they take turns to issue their MMAs (named barriers 1 and 2). Against a producer
// warpgroup issuing cp.async (removed: 333-337 against 556-611 TFLOP/s) this frees the producer's
// 128 threads of 16 copies each per tile and its registers (24 a thread, the consumers get 240,
// setmaxnreg), and the copy engine writes shared memory through the async proxy that wgmma reads
// (no proxy fence per tile).
// kCluster (variants 8, 9): clusters of two CTAs, q heads 2c and 2c + 1 of one row tile (they
// share a KV head when Hq / Hkv is even): each producer loads two of a K/V tile's four column boxes
// and multicasts them to both CTAs, halving the L2 -> SM traffic of K and V. A stage is refilled
// only when the consumers of both CTAs released it: each producer waits for its own consumers,
// tells the peer's producer (a remote mbarrier arrive), and waits for the peer's word.
// kSplit (variants 4-7 with splits > 1; the launcher's for grids of at most half the SMs): the
// row tile's key tiles are cut into gridDim.z runs as in the mma.sync kernel's split path, each
// block writes its unnormalised fp32 partial and statistics there (lm_attn_split.cuh), and that
// path's combine kernel merges them; a row that sees no key of its split keeps max -inf.
// Keys past the valid length: the tensor map ends at max_seq (zeros beyond), and rows of the last
// tile inside [kv_len, max_seq) hold whatever the cache holds; their scores are masked (set, not
// added: a NaN K row cannot leak), and the V rows are zeroed in shared memory by the consumers
// before the last PV (a NaN V row times a zero probability would be NaN).
#include <cudaTypedefs.h>

#include "kernels/cuda/lm_attn_hopper.cuh"
#include "kernels/cuda/lm_attn_tma.cuh"

namespace frost::kernels::attn_hopper {
namespace {

constexpr int kTmaThreads = 3 * 128;
constexpr int kVStagesTma = 2;

template <int kKStages>
constexpr int tma_smem_bytes() {
    return kQBytes + (kKStages + kVStagesTma) * kKvBytes + 1024 + 128;  // + 1024 alignment slack, + mbarriers
}

struct TmaMaps {
    CUtensorMap q, k, v;
};

// kKStages K tiles in flight (2 or 3: a third fits beside Q and two V stages in 227 KB), the
// producer keeps K kKStages - 1 tiles ahead of V.
// kSplit (not with kCluster): block z of gridDim.z takes its share of the row tile's key tiles
// (split_tiles) and writes an unnormalised fp32 partial to p.work in the mma.sync split path's
// layout, which that path's combine kernel merges (lm_attn_prefill.cu).
template <bool kPingpong, int kKStages, bool kCluster, bool kSplit = false>
__global__ void __launch_bounds__(kTmaThreads, 1)
    attn_prefill_hopper_tma_kernel(AttentionBf16Params p, const __grid_constant__ TmaMaps maps) {
    static_assert(!(kSplit && kCluster), "a cluster's CTAs share their key tiles");
#if defined(FROST_ATTN_WGMMA)
    // 65536 / 384 = 168 registers a thread at launch; 128 x (168 - 24) = 256 x (240 - 168) exactly.
    constexpr int kProducerRegs = 24, kConsumerRegs = 240;
    constexpr int kVS = kVStagesTma;
    constexpr int kLead = kKStages - 1;  // K tiles the producer issues ahead of the V tile
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t sq = base, sk0 = base + kQBytes, sv0 = sk0 + kKStages * kKvBytes;
    // q_full, k_full[KS], v_full[VS], k_empty[KS], v_empty[VS]; cluster: k_peer[KS], v_peer[VS]
    const uint32_t bars = sv0 + kVS * kKvBytes;
    static_assert(8 * (1 + 3 * (kKStages + kVStagesTma)) <= 128, "mbarriers past their 128 bytes");
    const uint32_t q_full = bars;
    auto k_full = [&](int j) { return bars + 8 * (1 + j % kKStages); };
    auto v_full = [&](int j) { return bars + 8 * (1 + kKStages + j % kVS); };
    auto k_empty = [&](int j) { return bars + 8 * (1 + kKStages + kVS + j % kKStages); };
    auto v_empty = [&](int j) { return bars + 8 * (1 + 2 * kKStages + kVS + j % kVS); };
    auto k_peer = [&](int j) { return bars + 8 * (1 + 2 * kKStages + 2 * kVS + j % kKStages); };
    auto v_peer = [&](int j) { return bars + 8 * (1 + 3 * kKStages + 2 * kVS + j % kVS); };
    auto k_stage = [&](int j) { return sk0 + (j % kKStages) * kKvBytes; };
    auto v_stage = [&](int j) { return sv0 + (j % kVS) * kKvBytes; };

    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int pos = p.cursor->pos;
    const int row0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // heaviest row tiles first (see lm_attn_hopper.cu)
    if (row0 >= rows) return;
    const int qh = blockIdx.x;
    const int kvh = qh / (p.Hq / p.Hkv);
    const int kv_len = pos + min(rows, row0 + kRows);
    // Key tiles [j0, j0 + n_tiles) of the row tile's (all of them unsplit).
    int j0 = 0, n_tiles = (kv_len + kKeys - 1) / kKeys;
    if constexpr (kSplit) {
        const int span = attn_split::split_tiles(n_tiles, gridDim.z);
        j0 = blockIdx.z * span;
        if (j0 >= n_tiles) return;  // an empty split: the combine skips it
        n_tiles = min(span, n_tiles - j0);
    }
    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        for (int i = 0; i < kKStages; ++i) {
            mbar_init(k_full(i), 1);
            mbar_init(k_empty(i), 256);
        }
        for (int i = 0; i < kVS; ++i) {
            mbar_init(v_full(i), 1);
            mbar_init(v_empty(i), 256);
        }
        if constexpr (kCluster) {
            for (int i = 0; i < kKStages; ++i) mbar_init(k_peer(i), 1);
            for (int i = 0; i < kVS; ++i) mbar_init(v_peer(i), 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // The peer's copies and arrivals may target this CTA's barriers as soon as it runs.
    if constexpr (kCluster) {
        cluster_sync();
    } else {
        __syncthreads();
    }
    const int wg = threadIdx.x / 128;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        if (threadIdx.x == 0) {
            // One thread: Q and K0 .. K(lead - 1), then K(j + lead) before V(j), the consumers' order.
            tma_prefetch_map(&maps.k);
            tma_prefetch_map(&maps.v);
            auto load = [&](const CUtensorMap* map, uint32_t dst, int r, int col0, int row, uint32_t bar) {
#pragma unroll
                for (int b = 0; b < kD / 64; ++b) tma_load_2d(dst + b * r * kRowBytes, map, col0 + 64 * b, row, bar);
            };
            // A K / V tile into both CTAs: this CTA's half of the column boxes, multicast.
            [[maybe_unused]] const uint32_t rank = kCluster ? cluster_rank() : 0;
            auto load_kv = [&](const CUtensorMap* map, uint32_t dst, int row, uint32_t bar) {
                if constexpr (kCluster) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int b = 2 * static_cast<int>(rank) + h;
                        tma_load_2d_multicast(dst + b * kKeys * kRowBytes, map, kvh * kD + 64 * b, row, bar, 0x3);
                    }
                } else {
                    load(map, dst, kKeys, kvh * kD, row, bar);
                }
            };
            // Stage of tile j free: this CTA's consumers released it (and, in a cluster, the peer's).
            auto wait_free = [&](uint32_t empty, uint32_t peer, int parity) {
                mbar_wait(empty, parity);
                if constexpr (kCluster) {
                    mbar_arrive_remote(peer, rank ^ 1u);
                    mbar_wait_cluster(peer, parity);
                }
            };
            auto load_k = [&](int j) {
                if (j >= kKStages) wait_free(k_empty(j), k_peer(j), (j / kKStages - 1) & 1);
                mbar_arrive_expect_tx(k_full(j), kKvBytes);
                load_kv(&maps.k, k_stage(j), (j0 + j) * kKeys, k_full(j));
            };
            mbar_arrive_expect_tx(q_full, kQBytes);
            load(&maps.q, sq, kRows, static_cast<int>(qh * p.q_head_stride), row0, q_full);
            for (int j = 0; j < kLead && j < n_tiles; ++j) load_k(j);
            for (int j = 0; j < n_tiles; ++j) {
                if (j + kLead < n_tiles) load_k(j + kLead);
                if (j >= kVS) wait_free(v_empty(j), v_peer(j), (j / kVS - 1) & 1);
                mbar_arrive_expect_tx(v_full(j), kKvBytes);
                load_kv(&maps.v, v_stage(j), (j0 + j) * kKeys, v_full(j));
            }
        }
        // In a cluster no CTA may leave while the peer can still copy or arrive into it.
        if constexpr (kCluster) {
            __syncwarp();
            cluster_sync();
        }
        return;
    }
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

    // Turns: warpgroup cw waits on barrier 1 + cw and passes to the other on 2 - cw; n + 1 issue
    // rounds each (QK(0), n - 1 overlapped rounds, the last PV); consumer 0 goes first and
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
    turn_wait();
    wgmma_fence();
    issue_qk(s, sq_wg, k_stage(0));
    wgmma_commit();
    turn_pass(false);
    wgmma_wait<0>();
    reg_fence(s);
    mbar_arrive(k_empty(0));
    softmax_tile<kSplit>(s, j0 * kKeys, qpos_lo, (j0 + 1) * kKeys - 1 > wg_qpos0, scale_log2, m, l, alpha);
    pack_p(s, pa);

    for (int j = 0; j + 1 < n_tiles; ++j) {
        mbar_wait(k_full(j + 1), ((j + 1) / kKStages) & 1);
        mbar_wait(v_full(j), (j / kVS) & 1);
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
        const int key0 = (j0 + j + 1) * kKeys;
        softmax_tile<kSplit>(s, key0, qpos_lo, key0 + kKeys - 1 > wg_qpos0, scale_log2, m, l, alpha);
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
    const int last = n_tiles - 1;
    mbar_wait(v_full(last), (last / kVS) & 1);
    const int tail = min(kKeys, kv_len - (j0 + last) * kKeys);  // valid keys of the last tile, 1 .. 64
    if (tail < kKeys) {
        // Zero the cache rows past kv_len (both consumers split the 16-byte chunks), then make the
        // generic-proxy stores visible to wgmma (async proxy) and to the other warpgroup.
        const int chunks = (kKeys - tail) * (kD / kVec);
        for (int e = threadIdx.x - 128; e < chunks; e += 256) {
            const int r = tail + e / (kD / kVec), c = e % (kD / kVec);
            const uint32_t addr = v_stage(last) + (c / 8) * (kKeys * kRowBytes) + r * kRowBytes + (c % 8) * 16;
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u) : "memory");
        }
        fence_proxy_async();
        asm volatile("bar.sync 3, 256;\n" ::: "memory");
    }
    reg_fence(o);
    reg_fence_u(pa);
    turn_wait();
    wgmma_fence();
    issue_pv(o, pa, v_stage(last));
    wgmma_commit();
    turn_pass(true);
    const int r_lo = row0 + cw * kWgRows + warp * 16 + g;
    if constexpr (kSplit) {
        wgmma_wait<0>();
        reg_fence(o);
        store_partial(p, o, m, l, scale_log2, r_lo, rows, qh, t);
        return;
    }
    uint32_t gv[2][32];
    load_gate(p, r_lo, rows, qh, t, gv);  // in flight while the last PV runs
    wgmma_wait<0>();
    reg_fence(o);
    store_output(p, o, l, gv, r_lo, rows, qh, t);
    if constexpr (kCluster) {
        __syncwarp();
        cluster_sync();
    }
#endif  // FROST_ATTN_WGMMA
}

template <bool kPingpong, int kKStages, bool kCluster = false, bool kSplit = false>
cudaError_t tma_launch_t(const AttentionBf16Params& p, const TmaMaps& maps, cudaStream_t stream, int splits = 1) {
    const auto kernel = attn_prefill_hopper_tma_kernel<kPingpong, kKStages, kCluster, kSplit>;
    constexpr int smem = tma_smem_bytes<kKStages>();
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    if constexpr (!kCluster) {
        dim3 g = grid(p);
        g.z = kSplit ? splits : 1;
        kernel<<<g, kTmaThreads, smem, stream>>>(p, maps);
        return cudaGetLastError();
    }
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid(p);
    cfg.blockDim = dim3(kTmaThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, p, maps);
}

}  // namespace

cudaError_t encode_swizzled_map(CUtensorMap* map, CUtensorMapDataType dtype, int elem_bytes, const void* base,
                                int64_t cols, int64_t rows, int64_t row_stride, int box_rows) {
    return encode_box_map(map, dtype, elem_bytes, base, cols, rows, row_stride, 128 / elem_bytes, box_rows, true);
}

cudaError_t encode_box_map(CUtensorMap* map, CUtensorMapDataType dtype, int elem_bytes, const void* base, int64_t cols,
                           int64_t rows, int64_t row_stride, int box_cols, int box_rows, bool swizzle128) {
    // Resolved once; a later call reuses the pointer (no driver call inside a capture after the first).
    static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult q{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            cudaGetLastError();
            fn = nullptr;
        }
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    if (!encode) return cudaErrorNotSupported;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * static_cast<cuuint64_t>(elem_bytes)};
    const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t elem_strides[2] = {1, 1};
    const CUresult r = encode(map, dtype, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t tma_launch(const AttentionBf16Params& p, cudaStream_t stream, bool pingpong, int k_stages, bool cluster,
                       int splits) {
    // TMA needs 16-byte aligned bases and row strides; the maps end at the cache's and the bucket's
    // extents, so no box reads outside an allocation.
    const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
    if (!aligned(p.q) || !aligned(p.k_cache) || !aligned(p.v_cache) || p.max_seq <= 0) return cudaErrorInvalidValue;
    TmaMaps maps;
    const int64_t kv_dim = static_cast<int64_t>(p.Hkv) * kD;
    cudaError_t err = encode_tile_map(&maps.q, p.q, p.q_row_stride, p.max_rows, p.q_row_stride, kRows);
    if (err == cudaSuccess) err = encode_tile_map(&maps.k, p.k_cache, kv_dim, p.max_seq, kv_dim, kKeys);
    if (err == cudaSuccess) err = encode_tile_map(&maps.v, p.v_cache, kv_dim, p.max_seq, kv_dim, kKeys);
    if (err != cudaSuccess) return err;
    if (splits > 1) {  // (the caller checked: not clustered, p.work sized)
        if (k_stages == 3)
            return pingpong ? tma_launch_t<true, 3, false, true>(p, maps, stream, splits)
                            : tma_launch_t<false, 3, false, true>(p, maps, stream, splits);
        return pingpong ? tma_launch_t<true, 2, false, true>(p, maps, stream, splits)
                        : tma_launch_t<false, 2, false, true>(p, maps, stream, splits);
    }
    // A cluster pairs q heads 2c, 2c + 1: they must share their KV head.
    if (cluster && (p.Hq / p.Hkv) % 2 == 0)
        return pingpong ? tma_launch_t<true, 2, true>(p, maps, stream) : tma_launch_t<false, 2, true>(p, maps, stream);
    if (k_stages == 3) return pingpong ? tma_launch_t<true, 3>(p, maps, stream) : tma_launch_t<false, 3>(p, maps, stream);
    return pingpong ? tma_launch_t<true, 2>(p, maps, stream) : tma_launch_t<false, 2>(p, maps, stream);
}

}  // namespace frost::kernels::attn_hopper
