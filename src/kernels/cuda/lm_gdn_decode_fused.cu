// The GDN layer's decode step in one launch: conv1d + SiLU + q/k l2norm (lm_conv1d.cu's decode
// kernel), the gated delta-rule step with its gates (lm_gdn_recurrent.cu), and the gated RMSNorm
// (lm_norm.cu's 128-wide kernel). Each of those is a latency-bound launch of ~4 us at decode; one
// launch saves two launches and two trips of the activations through global memory. With
// GdnDecodeBf16Params::gates it also computes the GDN gate projections b and a that a quantized
// checkpoint keeps in bf16 (lm_gdn_gate_dot.cuh, whose dot gdn_gate_dot_launch shares), in place of
// a GEMV launch of their own before it.
//
// Shape of the work: a block per (value head, 32-column slice of dv), as the recurrence's kernel,
// so the state stays spread over Hv * 4 blocks. Every block recomputes the q / k conv + l2norm of
// its key head (256 channels: one per thread, tiny duplicated work) and the v conv of its own 32
// channels. The blocks of one key head (Hv / Hk value heads x 4 slices: 4 for 0.8B, 8 for 9B and
// 35B-A3B, 12 for 27B, at most Hopper's 16) form a thread-block
// cluster: they all read the key head's old q / k conv state, and only the cluster's first block
// writes the new one, after a cluster barrier (no block can read a state another already
// replaced). The gated RMSNorm needs the whole 128-wide head: each slice block puts its o in
// shared memory and after the barrier reads the other three slices' through distributed shared
// memory.
//
// Bits: decode's arithmetic is what prefill is pinned to, so each stage repeats the separate
// kernels' operations exactly: the conv taps, SiLU and l2norm as lm_conv1d.cu's vec_act / vec_l2
// pin them (conv1d_kernel<4>'s SASS), the recurrence's products and its fixed-order warp sums as
// gdn_recurrent_kernel's compiled PTX has them, and the norm's sum of squares, mean and scaling as
// gated_rmsnorm_vec4_kernel's PTX has them (written with _rn intrinsics so no contraction can
// differ). Intermediates pass through bf16 where the three launches store them (conv out, o).
// CudaGdnDecodeFused tests check every output and both states bit for bit against the three
// launches, solo and batched.
//
// Measured (H100, 2026-11-25, bench_ops --rows 64 --pos 1024, op timed alone): 5.7 us per layer
// against 11.5 us for the three launches (9B int4 and 35B-A3B alike). Inside the PDL-chained
// decode graph the three launches already overlap, so the engine gains less: frost bench engine
// --decode 1024, ms/token fused / unfused (FROST_DECODE_FUSE=0), alternating: 0.8B 1.038 1.038 /
// 1.047 1.050; 35B-A3B (40 layers) 3.382 3.417 / 3.434 3.445; 9B int4 3.189 3.186 / 3.166 3.182
// (GDN fusion alone, FROST_DECODE_FUSE=gdn: 3.183 3.192); a second call, three rounds each:
// 0.8B 1.037 1.030 1.031 / 1.051 1.050 1.051; 9B int4 3.179 3.183 3.176 / 3.178 3.178 3.185;
// 35B-A3B 4 layers 0.671 0.676 0.682 / 0.675 0.677 0.673. A gain on the small model, noise on
// the GEMV-bound ones.
// Spreading its blocks, measured flat or slower and not kept (H200, 2026-12-01, 9B FP8 / 0.8B
// decode @1k, ms/token, two rounds alternating): padded to one block per SM (116 KB of dynamic
// shared memory) 2.867 / 2.883 -> 2.946 / 2.938 and 0.817 / 0.817 -> 0.819 / 0.813; the clusters
// launched with cudaClusterSchedulingPolicySpread 2.874 / 2.856 -> 2.865 / 2.868 and 0.809 /
// 0.809 -> 0.811 / 0.811.
// The layer's out projection as this launch's tail, measured and dropped (H200, 2026-12-02,
// forty-fifth session; built, tested, reverted; the patch is kept outside the tree). Each key
// head's cluster multiplied its gated output by its columns of the e4m3 out_proj (block `rank`
// of the cluster taking N / cluster rows, 16-byte chunks of one row per 8 / 16 / 32 lanes, an
// fp32 dot per lane, an xor butterfly per row, the first weights loaded before the wait) into a
// [Hk, N] fp32 share per row, and the post-attention norm became a cluster of 8 blocks that added
// the 16 shares in key-head order before the RMSNorm (one launch fewer per GDN layer). It passed a
// kernel test against fp64 and the GEMV + norm (1, 2 and 4 value heads per key head, block and
// per-row scales, solo and batched) and the engine's batched-equals-solo and kept-FP8 tests.
// `frost bench engine --decode 1024 --decode-steps 64 --reps 3`, 9B FP8, ms/token, alternating:
// separate launches 2.886-2.904; the tail with 16 rounds of weights in registers (223 registers,
// one block per SM) 3.315 / 3.333; with 4 rounds (126 registers, two blocks per SM) 3.170-3.185;
// a probe that wrote zero shares without touching the weights 2.851 / 2.851 (wrong results). So
// the whole launch, norm and separation the fusion could remove was worth ~45 us per token, and
// the weights streamed far too slowly from inside this launch: 8 warps a block and <= 32 KB in
// flight per SM against the GEMV's 24 warps and ~100 KB (graph-ops: 26-31 us per layer for the
// fused op against 6.3 + 7.2 + 1.4 for the three it replaced).
// The folded gate dot before the programmatic wait, measured flat and not kept (H200, 2026-12-02,
// forty-eighth session): its x is the norm's output, two kernels back, so the load, products and
// block sum could run during in_proj's tail (the same bits; this file's test and the quantized
// engine suite passed either way). `frost bench engine --decode 1024 --decode-steps 64 --reps 3`,
// ms/token, three rounds alternating, after -> before the wait: 9B FP8 2.876 / 2.893 / 2.882 ->
// 2.877 / 2.930 / 2.887, INT4 2.515 / 2.510 / 2.531 -> 2.534 / 2.519 / 2.516 (105-114 registers
// instead of 104). The wait itself, not the work after it, is what this launch's chain link costs
// (bench_cuda_kernels --launch-chain: ~0.75 us per programmatic boundary with no work at all).
#include <cooperative_groups.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gdn_gate_dot.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kTaps = 4;                          // Qwen3.5's conv kernel size
constexpr int kSlice = 32;                        // dv columns per block (one per lane)
constexpr int kSlices = kGdnHeadDim / kSlice;     // 4
constexpr int kWarps = 8;                         // dk split of the recurrence
constexpr int kThreads = kWarps * kWarp;          // 256: the q and k channels of one key head
constexpr int kPortableCluster = 8;               // Hv / Hk <= 2
constexpr int kMaxCluster = 16;                   // Hopper's non-portable limit: Hv / Hk <= 4

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the helpers of the sm_90 kernel body
constexpr int kRowsPerWarp = kGdnHeadDim / kWarps;

__device__ __forceinline__ float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

// conv1d_kernel<4>'s taps for one channel (the order lm_conv1d.cu's vec_act pins), window shifted.
__device__ __forceinline__ float conv_taps(const float (&w)[kTaps], float (&win)[kTaps - 1], float cur) {
    float acc = __fmaf_rn(w[3], cur, __fmul_rn(w[0], win[0]));
    acc = __fmaf_rn(w[1], win[1], acc);
    acc = __fmaf_rn(w[2], win[2], acc);
    win[0] = win[1];
    win[1] = win[2];
    win[2] = cur;
    return acc;
}

#endif

// kEarly: a solo step loads its recurrent-state slice and conv windows before the programmatic
// wait (gdn_decode_fused_launch says why that is safe); batched steps resolve their members'
// buffers after it either way.
template <bool kEarly>
__global__ void __launch_bounds__(kThreads) gdn_decode_fused_kernel(GdnDecodeBf16Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    __shared__ float qs[kGdnHeadDim], ks[kGdnHeadDim], vs[kSlice];
    __shared__ float red[kWarps][kSlice];
    __shared__ float l2part[kWarps];
    __shared__ float ob[kSlice];  // this slice's o (bf16-rounded), read by the head's other slices
    __shared__ float gate_scratch[kGateDotWarps][2];
    const cg::cluster_group cluster = cg::this_cluster();
    const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
    const int h = blockIdx.x / kSlices, j0 = (blockIdx.x % kSlices) * kSlice;
    const int ratio = p.gdn.Hv / p.gdn.Hk, kh = h / ratio;
    const int Q = p.gdn.Hk * kGdnHeadDim;
    const bool is_q = tid < kGdnHeadDim;
    const int qk_ch = (is_q ? 0 : Q) + kh * kGdnHeadDim + tid % kGdnHeadDim;  // this thread's q or k channel
    const int v_ch = 2 * Q + h * kGdnHeadDim + j0 + lane;                        // warp 0: the slice's v channel
    const int col = h * kGdnHeadDim + j0 + lane;                                 // warp 0: o / z / y column
    // Weights depend on no earlier kernel: loaded before the programmatic wait.
    float wq[kTaps], wv[kTaps];
#pragma unroll
    for (int j = 0; j < kTaps; ++j) {
        wq[j] = p.conv.w[static_cast<int64_t>(qk_ch) * kTaps + j];
        wv[j] = p.conv.w[static_cast<int64_t>(v_ch) * kTaps + j];
    }
    const float A_log = p.gdn.A_log[h], dt_bias = p.gdn.dt_bias[h], nw = p.norm.w[j0 + lane];
    const bool fold_gates = p.gates.w != nullptr;  // [b | a] computed here (lm_gdn_gate_dot.cuh)
    GateDotWeights gw;
    if (fold_gates) gate_dot_load(p.gates, h, gw);
    // The state slice S[warp*16 + i][j0 + lane] and the conv windows of this thread's channels.
    float s[kRowsPerWarp];
    float win[kTaps - 1], vwin[kTaps - 1];
    auto load_state = [&](const float* rec, const bf16* cst) {
        const float* st = rec + static_cast<int64_t>(h) * kGdnHeadDim * kGdnHeadDim;
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) s[i] = st[(warp * kRowsPerWarp + i) * kGdnHeadDim + j0 + lane];
#pragma unroll
        for (int j = 0; j < kTaps - 1; ++j) win[j] = __bfloat162float(cst[static_cast<int64_t>(qk_ch) * (kTaps - 1) + j]);
        if (warp == 0) {
#pragma unroll
            for (int j = 0; j < kTaps - 1; ++j) vwin[j] = __bfloat162float(cst[static_cast<int64_t>(v_ch) * (kTaps - 1) + j]);
        }
    };
    const bool early = kEarly && !p.conv.batch.slots;
    if (early) load_state(p.gdn.state, p.conv.state);
    pdl_wait();
    pdl_launch_dependents();

    const bf16* x = p.conv.x;
    const bf16* gb = p.gdn.gate_b;
    const bf16* ga = p.gdn.gate_a;
    const bf16* z = p.norm.z;
    bf16* conv_y = p.conv.y;
    bf16* conv_state = p.conv.state;
    float* rec_state = p.gdn.state;
    bf16* o = p.gdn.o;
    bf16* y = p.norm.y;
    int rows;
    const int m = p.conv.batch.slots ? static_cast<int>(blockIdx.y) : 0;  // the step row (batched: member)
    if (p.conv.batch.slots) {  // batched decode: member blockIdx.y (the whole cluster shares it)
        conv_state = static_cast<bf16*>(batch_state(p.conv.batch, m, 0));
        rec_state = static_cast<float*>(batch_state(p.gdn.batch, m, 0));
        if (!conv_state || !rec_state) return;  // padding row
        x += m * p.conv.x_row_stride;
        conv_y += static_cast<int64_t>(m) * p.conv.channels;
        gb += m * p.gdn.gate_row_stride;
        ga += m * p.gdn.gate_row_stride;
        o += static_cast<int64_t>(m) * p.gdn.Hv * kGdnHeadDim;
        z += m * p.norm.z_row_stride;
        y += static_cast<int64_t>(m) * p.norm.heads * kGdnHeadDim;
        rows = cursor_rows(&p.gdn.batch.cursors[m], 1);
    } else {
        rows = cursor_rows(p.gdn.cursor, 1);  // conv.n_rows is this cursor's n_tokens (the launcher checks)
    }
    if (rows == 0) return;  // uniform over the cluster: nothing to fold in

    // The recurrent state slice first (unless loaded before the wait): in flight during the conv.
    float* state = rec_state + static_cast<int64_t>(h) * kGdnHeadDim * kGdnHeadDim;
    if (!early) load_state(rec_state, conv_state);
    float2 ba = make_float2(0.0f, 0.0f);  // the gates' b and a (bf16 values) when folded
    if (fold_gates) {
        ba = gate_dot_sum(p.gates, gw, m, gate_scratch);
        if (blockIdx.x % kSlices == 0 && tid == 0) {  // stored once per head, as the GEMV stored them
            bf16* gy = p.gates.y + static_cast<int64_t>(m) * p.gates.y_row_stride;
            gy[h] = __float2bfloat16(ba.x);
            gy[p.gates.Hv + h] = __float2bfloat16(ba.y);
        }
    }

    // q / k conv + SiLU + l2norm of this thread's channel (block_sum's order within each half).
    float out = bf16_round(silu(conv_taps(wq, win, __bfloat162float(x[qk_ch]))));
    const float part_sq = warp_sum_rn(__fmul_rn(out, out));
    if (lane == 0) l2part[warp] = part_sq;
    if (warp == 0) {  // the slice's v channel: conv + SiLU, no l2norm; only this block reads its state
        bf16* vst = conv_state + static_cast<int64_t>(v_ch) * (kTaps - 1);
        const bf16 vo = __float2bfloat16(silu(conv_taps(wv, vwin, __bfloat162float(x[v_ch]))));
        vs[lane] = __bfloat162float(vo);
        conv_y[v_ch] = vo;
#pragma unroll
        for (int j = 0; j < kTaps - 1; ++j) vst[j] = __float2bfloat16(vwin[j]);
    }
    __syncthreads();
    {
        const int w0 = is_q ? 0 : kWarps / 2;
        float ss = 0.0f;
#pragma unroll
        for (int i = 0; i < kWarps / 2; ++i) ss = __fadd_rn(ss, l2part[w0 + i]);
        const float inv = rsqrtf(__fadd_rn(ss, p.conv.l2_eps));
        out = __fmul_rn(__fmul_rn(out, inv), is_q ? p.conv.q_scale : 1.0f);
    }
    const bool writer = cluster.block_rank() == 0;  // the key head's first value head, slice 0
    {
        const bf16 qk = __float2bfloat16(out);
        (is_q ? qs : ks)[tid % kGdnHeadDim] = __bfloat162float(qk);
        if (writer) conv_y[qk_ch] = qk;
    }
    float beta, g;
    gdn_gate_values(fold_gates ? ba.x : __bfloat162float(gb[h]), fold_gates ? ba.y : __bfloat162float(ga[h]), A_log,
                    dt_bias, beta, g);
    const float alpha = expf(g);
    __syncthreads();

    // One recurrent step (gdn_recurrent_kernel's arithmetic): S <- αS; u = Sᵀk; δ = β(v - u);
    // S <- S + kδᵀ; o = Sᵀq.
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        s[i] = __fmul_rn(s[i], alpha);
        part = __fmaf_rn(s[i], ks[warp * kRowsPerWarp + i], part);
    }
    red[warp][lane] = part;
    __syncthreads();
    float u = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) u = __fadd_rn(u, red[w][lane]);
    const float delta = __fmul_rn(beta, __fsub_rn(vs[lane], u));
    part = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        s[i] = __fmaf_rn(delta, ks[warp * kRowsPerWarp + i], s[i]);
        part = __fmaf_rn(s[i], qs[warp * kRowsPerWarp + i], part);
    }
    __syncthreads();  // every warp has read red (u) before it is reused for o
    red[warp][lane] = part;
    __syncthreads();
    if (warp == 0) {
        float ov = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) ov = __fadd_rn(ov, red[w][lane]);
        const bf16 o16 = __float2bfloat16(ov);
        o[col] = o16;
        ob[lane] = __bfloat162float(o16);
    }
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) state[(warp * kRowsPerWarp + i) * kGdnHeadDim + j0 + lane] = s[i];

    // Every block has read the old q / k conv state and written its ob.
    cluster.sync();
    if (writer) {
#pragma unroll
        for (int j = 0; j < kTaps - 1; ++j)
            conv_state[static_cast<int64_t>(qk_ch) * (kTaps - 1) + j] = __float2bfloat16(win[j]);
    }
    if (warp == 0) {
        // Gated RMSNorm of head h: lane L takes columns 4L..4L+3 (slice L / 8), as
        // gated_rmsnorm_vec4_kernel does; its PTX sums the squares as fma(v3, v3, fma(v2, v2,
        // fma(v0, v0, v1 * v1))) and forms the mean as fma(sum, 1/128, eps).
        const float* peer = cluster.map_shared_rank(ob, static_cast<unsigned>((h % ratio) * kSlices + lane / 8));
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = peer[4 * (lane % 8) + e];
        float ss = __fmaf_rn(v[0], v[0], __fmul_rn(v[1], v[1]));
        ss = __fmaf_rn(v[2], v[2], ss);
        ss = __fmaf_rn(v[3], v[3], ss);
        const float rs = rsqrtf(__fmaf_rn(warp_sum_rn(ss), 1.0f / kGdnHeadDim, p.norm.eps));
        const float zc = silu(__bfloat162float(z[col]));
        y[col] = __float2bfloat16(__fmul_rn(__fmul_rn(__fmul_rn(ob[lane], rs), nw), zc));
    }
    cluster.sync();  // no block leaves while a peer may still read its ob
#endif
}

}  // namespace

bool gdn_decode_fused_applies(const GdnDecodeBf16Params& p) {
    static const bool sm90a = device_runs_sm90a();
    const Conv1dBf16Params& c = p.conv;
    const GdnBf16Params& d = p.gdn;
    const GatedRmsNormBf16Params& n = p.norm;
    if (!sm90a || !c.x || !c.w || !c.state || !c.y || !d.state || !d.o || !d.cursor || !d.gate_b || !d.gate_a ||
        !d.A_log || !d.dt_bias || !n.z || !n.w || !n.y)
        return false;
    if (d.dk != kGdnHeadDim || d.dv != kGdnHeadDim || d.Hk <= 0 || d.Hv % d.Hk != 0 ||
        kSlices * (d.Hv / d.Hk) > kMaxCluster)
        return false;
    const int64_t Q = int64_t(d.Hk) * kGdnHeadDim, V = int64_t(d.Hv) * kGdnHeadDim;
    // The conv is the GDN's: q | k | v channels, K = 4, q / k l2-normed, its output what the step reads.
    if (c.kernel != kTaps || c.channels != 2 * Q + V || c.l2_dim != kGdnHeadDim || c.l2_heads != 2 * d.Hk ||
        c.l2_q_heads != d.Hk || d.q != c.y || d.k != c.y + Q || d.v != c.y + 2 * Q || d.qkv_row_stride != c.channels)
        return false;
    // The norm is over the step's o, 128 wide, where the vectorised norm kernel runs (its bits),
    // with no FP8 twin (a prefill GEMM's input).
    if (n.yq || n.x != d.o || n.dim != kGdnHeadDim || n.heads != d.Hv || n.z_row_stride % 4 != 0 ||
        reinterpret_cast<uintptr_t>(n.z) % 8 != 0 || reinterpret_cast<uintptr_t>(n.x) % 8 != 0 ||
        reinterpret_cast<uintptr_t>(n.y) % 8 != 0 || reinterpret_cast<uintptr_t>(n.w) % 16 != 0)
        return false;
    const bool batched = c.batch.slots != nullptr;
    if (c.max_rows != d.max_rows || n.max_rows != d.max_rows) return false;
    if (p.gates.w && (!gdn_gate_dot_valid(p.gates) || p.gates.Hv != d.Hv || p.gates.rows != d.max_rows)) return false;
    if (batched) {  // one row per member, both state columns of the same members and cursors
        return c.batch.table && d.batch.table == c.batch.table && d.batch.slots == c.batch.slots &&
               d.batch.cursors && d.batch.B == c.batch.B && c.batch.B == c.max_rows && !c.n_rows && !n.n_rows;
    }
    // Solo: one row, counted by the cursor the step reads.
    return !d.batch.slots && c.max_rows == 1 && c.n_rows == &d.cursor->n_tokens && n.n_rows == c.n_rows;
}

namespace {
// One block per (value head, row): gate_dot_sum's bits, stored where the GEMV stored b and a.
__global__ void __launch_bounds__(kGateDotThreads) gdn_gate_dot_kernel(GdnGateDotParams p) {
    __shared__ float scratch[kGateDotWarps][2];
    const int h = static_cast<int>(blockIdx.x), row = static_cast<int>(blockIdx.y);
    GateDotWeights w;
    gate_dot_load(p, h, w);
    pdl_wait();  // programmatic launch (decode graphs): x comes from the predecessors
    pdl_launch_dependents();
    const float2 ba = gate_dot_sum(p, w, row, scratch);
    if (threadIdx.x == 0) {
        bf16* y = p.y + static_cast<int64_t>(row) * p.y_row_stride;
        y[h] = __float2bfloat16(ba.x);
        y[p.Hv + h] = __float2bfloat16(ba.y);
    }
}
}  // namespace

bool gdn_gate_dot_valid(const GdnGateDotParams& p) {
    const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    return p.w && p.x && p.y && a16(p.w) && a16(p.x) && p.K > 0 && p.K % kVec == 0 && p.K <= kGdnGateDotMaxK &&
           p.Hv > 0 && p.rows > 0 && (p.rows == 1 || (p.x_row_stride >= p.K && p.x_row_stride % kVec == 0)) &&
           (p.rows == 1 || p.y_row_stride >= 2 * p.Hv);
}

cudaError_t gdn_gate_dot_launch(const GdnGateDotParams& p, int pdl, cudaStream_t stream) {
    if (!gdn_gate_dot_valid(p)) return cudaErrorInvalidValue;
    const cudaError_t err = launch_kernel(gdn_gate_dot_kernel, dim3(p.Hv, p.rows), dim3(kGateDotThreads), 0, stream,
                                          pdl != 0, p);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

// A solo step's recurrent state and conv windows are loaded before the programmatic wait. Only
// this layer's GDN op writes them inside a step (its decode op or prefill's chunked rule), and
// host-side copies (restore, fork, reset) finish before a graph starts; under PDL every kernel
// but the immediate predecessor (here in_proj, which does not touch them) has completed when a
// kernel starts. So the loads overlap in_proj's tail instead of following the wait.
// FROST_GDN_EARLY_STATE=0 loads them after the wait, for A/B runs of one binary (the same bits).
// Measured (H200, 2026-11-30, `frost bench engine --decode 1024`, alternating on one machine,
// after -> before the wait): 0.8B 0.827 / 0.833 / 0.831 -> 0.814 / 0.817 / 0.817 ms/token; 9B INT4
// 2.578 / 2.598 / 2.572 -> 2.561 / 2.572 / 2.585 (noise).
cudaError_t gdn_decode_fused_launch(const GdnDecodeBf16Params& p, cudaStream_t stream) {
    if (!gdn_decode_fused_applies(p)) return cudaErrorInvalidValue;
    static const bool early = [] {
        const char* e = std::getenv("FROST_GDN_EARLY_STATE");
        return !(e && std::strcmp(e, "0") == 0);
    }();
    auto kernel = early ? gdn_decode_fused_kernel<true> : gdn_decode_fused_kernel<false>;
    const int cluster = kSlices * (p.gdn.Hv / p.gdn.Hk);
    if (cluster > kPortableCluster) {  // 27B's 3 value heads per key head: 12 blocks
        static const cudaError_t allowed = [] {
            const cudaError_t e =
                cudaFuncSetAttribute(gdn_decode_fused_kernel<true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
            return e != cudaSuccess ? e
                                    : cudaFuncSetAttribute(gdn_decode_fused_kernel<false>,
                                                           cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        }();
        if (allowed != cudaSuccess) return allowed;
    }
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(p.gdn.Hv * kSlices, p.conv.batch.slots ? p.conv.batch.B : 1);
    cfg.blockDim = dim3(kThreads);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = p.pdl ? 2 : 1;
    const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, p);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

}  // namespace frost::kernels
