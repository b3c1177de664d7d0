// Causal depthwise conv1d + SiLU of the GDN qkv channels with its K-1 input state (spec §4.1 step 2),
// fused with the q/k l2norm (step 4). One thread per channel slides a K-tap window in registers
// down a tile of rows, so each input is read once per tile; a block is one 128-channel head, so
// the l2norm is one block reduction per row. Prefill and decode share this launcher (decode
// graphs launch it programmatically: weights load before the wait).
#include <cstdlib>
#include <string>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kConvRowsPerBlock = 16;

__device__ inline float bf16_at(const bf16* p) { return __bfloat162float(*p); }

// Input of virtual row r (relative to the launch) on channel ch: x for r >= 0, the state before.
template <int K>
__device__ inline float conv_input(const Conv1dBf16Params& p, int ch, int r) {
    if (r >= 0) return bf16_at(p.x + r * p.x_row_stride + ch);
    return bf16_at(p.state + static_cast<int64_t>(ch) * (K - 1) + (K - 1 + r));
}

template <int K>
__global__ void __launch_bounds__(kConvChannelsPerBlock) conv1d_kernel(Conv1dBf16Params p, int update_state) {
    __shared__ float scratch[kWarp];
    const int ch = blockIdx.x * kConvChannelsPerBlock + threadIdx.x;
    float w[K];  // weights depend on no earlier kernel: loaded before the programmatic wait
#pragma unroll
    for (int j = 0; j < K; ++j) w[j] = p.w[static_cast<int64_t>(ch) * K + j];
    pdl_wait();
    pdl_launch_dependents();
    if (p.batch.slots) {  // batched decode: member row blockIdx.z, one token, its own state
        const int m = blockIdx.z;
        p.state = static_cast<bf16*>(batch_state(p.batch, m, 0));
        if (!p.state) return;  // padding row
        p.x += m * p.x_row_stride;
        p.y += static_cast<int64_t>(m) * p.channels;
        p.max_rows = 1;
        p.n_rows = nullptr;
    }
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int r0 = blockIdx.y * kConvRowsPerBlock;
    if (r0 >= rows && !update_state) return;
    float win[K - 1];  // win[K-2] is the newest input before the current row
#pragma unroll
    for (int j = 0; j < K - 1; ++j) win[j] = conv_input<K>(p, ch, r0 - (K - 1) + j);
    const bool l2 = p.l2_dim > 0 && static_cast<int>(blockIdx.x) < p.l2_heads;
    const float head_scale = (l2 && static_cast<int>(blockIdx.x) < p.l2_q_heads) ? p.q_scale : 1.0f;
    const int r_end = min(rows, r0 + kConvRowsPerBlock);
    for (int r = r0; r < r_end; ++r) {
        const float cur = bf16_at(p.x + r * p.x_row_stride + ch);
        float acc = w[K - 1] * cur;
#pragma unroll
        for (int j = 0; j < K - 1; ++j) acc += w[j] * win[j];
#pragma unroll
        for (int j = 0; j < K - 2; ++j) win[j] = win[j + 1];
        win[K - 2] = cur;
        float out = silu(acc);
        if (l2) {
            // l2norm consumes the bf16-rounded activation, as the unfused pipeline would.
            out = __bfloat162float(__float2bfloat16(out));
            const float ss = block_sum(out * out, scratch);
            out = out * rsqrtf(ss + p.l2_eps) * head_scale;
        }
        p.y[static_cast<int64_t>(r) * p.channels + ch] = __float2bfloat16(out);
    }
    if (update_state) {
        // Single row tile: this thread saw every row, so its window is the new state.
        if (rows == 0) return;
#pragma unroll
        for (int j = 0; j < K - 1; ++j) p.state[static_cast<int64_t>(ch) * (K - 1) + j] = __float2bfloat16(win[j]);
    }
}

// Multi-tile launches: after every tile has read the old state, shift the last K-1 inputs in.
template <int K>
__global__ void conv1d_state_kernel(Conv1dBf16Params p) {
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= p.channels || rows == 0) return;
    float next[K - 1];
#pragma unroll
    for (int j = 0; j < K - 1; ++j) next[j] = conv_input<K>(p, ch, rows - (K - 1) + j);
#pragma unroll
    for (int j = 0; j < K - 1; ++j) p.state[static_cast<int64_t>(ch) * (K - 1) + j] = __float2bfloat16(next[j]);
}

// ---- Prefill: 4 channels per thread (K = 4) ---------------------------------------------------
// The per-channel kernel above spends ~80 instructions and two block barriers per element on its
// 128-thread l2norm reduction; issue-bound, it moves ~0.9 TB/s (71 us for a 2048-row 9B chunk). Here
// a thread owns 4 adjacent channels (8-byte loads and stores), a warp one 128-channel head and one
// tile of R rows, so the l2norm is a warp shuffle tree with no barrier; the next group of 8 rows is
// loaded while this one computes. H100, 2048 x 8192 (bench_cuda_kernels --conv, one run): 43.2 us
// at R = 16 (round 1, kMode 0 below), 49.5 at 32, 48.6 at 64, the loop kernel 71.4; capping
// registers at 80 for 6 blocks per SM changed nothing. (8 channels per thread and a half-warp per
// head measured 50 us: 128 registers, a quarter occupancy and spills.)
// Bits: every row is computed exactly as conv1d_kernel<4> computes it (the decode step's kernel),
// so a prompt's outputs do not depend on how it was cut. Its SASS (sm_90a, nvcc 13.0) computes
//   acc = fma(w3, x_t, w0 * x_{t-3}), then fma(w1, x_{t-2}, acc), fma(w2, x_{t-1}, acc);
// silu() as written; then for the l2norm the bf16-rounded o, o*o without contraction, the warp
// butterfly over channel offsets 16, 8, 4, 2, 1 (each level adds the partner's partial) and the
// four warp partials in index order from 0. The _rn intrinsics below pin that arithmetic: channel
// offsets 16, 8, 4 are lane offsets 4, 2, 1 here, offsets 2 and 1 lie inside the thread, and the
// old warp partials are those of lanes 0, 8, 16, 24. CudaConv1d tests check it bit for bit.
constexpr int kVecTaps = 4;
constexpr int kVecCh = 4;                              // channels per thread
constexpr int kVecThreads = 128;                       // 4 row tiles of one head per block
constexpr int kVecTiles = kVecThreads / kWarp;         // warps per block
constexpr int kVecGroup = 8;                           // rows loaded ahead at once

__device__ inline void unpack4(const uint2& u, float (&v)[kVecCh]) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

// One row of 4 channels in three steps, the arithmetic the comment above pins, shared by the vector
// kernels: conv taps and SiLU (slides the window), the head's l2norm over the warp, packing.
__device__ __forceinline__ void vec_act(const float (&w)[kVecCh][kVecTaps], float (&win)[kVecTaps - 1][kVecCh],
                                        const float (&cur)[kVecCh], float (&out)[kVecCh]) {
#pragma unroll
    for (int c = 0; c < kVecCh; ++c) {
        float acc = __fmaf_rn(w[c][3], cur[c], __fmul_rn(w[c][0], win[0][c]));
        acc = __fmaf_rn(w[c][1], win[1][c], acc);
        acc = __fmaf_rn(w[c][2], win[2][c], acc);
        win[0][c] = win[1][c];
        win[1][c] = win[2][c];
        win[2][c] = cur[c];
        out[c] = silu(acc);
    }
}

// kScatter = false: each level of the butterfly shuffles all 4 channels (12 shuffles + 12 adds).
// kScatter = true: the same sums with a reduce-scatter: at channel offset 16 (lane offset 4) a lane
// keeps 2 of its 4 channels and sends the other 2, at offset 8 it keeps 1, at 4 it adds its
// partner's copy of that channel; then lane offsets 4 and 2 combine the 4 channel totals as the
// in-thread offsets 2 and 1 did. Every add has the same two operands as in the butterfly (fp add
// commutes exactly), so the bits are those of conv1d_kernel<4>: 6 shuffles and 6 adds.
template <bool kScatter>
__device__ __forceinline__ void vec_l2(float (&out)[kVecCh], float head_scale, float eps) {
    float sq[kVecCh];
#pragma unroll
    for (int c = 0; c < kVecCh; ++c) {
        out[c] = __bfloat162float(__float2bfloat16(out[c]));
        sq[c] = __fmul_rn(out[c], out[c]);
    }
    float part;
    if constexpr (kScatter) {
        const int lane = threadIdx.x % kWarp;
        const bool hi2 = lane & 4, hi1 = lane & 2;
        float s1[2];
#pragma unroll
        for (int k = 0; k < 2; ++k) {  // keep channels 2 * hi2 + k
            const float keep = hi2 ? sq[2 + k] : sq[k], send = hi2 ? sq[k] : sq[2 + k];
            s1[k] = __fadd_rn(keep, __shfl_xor_sync(kFullMask, send, 4));
        }
        const float keep = hi1 ? s1[1] : s1[0], send = hi1 ? s1[0] : s1[1];  // channel 2 * hi2 + hi1
        float t = __fadd_rn(keep, __shfl_xor_sync(kFullMask, send, 2));
        t = __fadd_rn(t, __shfl_xor_sync(kFullMask, t, 1));           // T_c over the 8 lanes
        const float u = __fadd_rn(t, __shfl_xor_sync(kFullMask, t, 4));  // T0 + T2 (hi1 = 0), T1 + T3
        part = __fadd_rn(u, __shfl_xor_sync(kFullMask, u, 2));           // (T0 + T2) + (T1 + T3)
    } else {
#pragma unroll
        for (int off = 4; off > 0; off /= 2)
#pragma unroll
            for (int c = 0; c < kVecCh; ++c) sq[c] = __fadd_rn(sq[c], __shfl_xor_sync(kFullMask, sq[c], off));
        part = __fadd_rn(__fadd_rn(sq[0], sq[2]), __fadd_rn(sq[1], sq[3]));
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) ss = __fadd_rn(ss, __shfl_sync(kFullMask, part, 8 * k));
    const float inv = rsqrtf(__fadd_rn(ss, eps));
#pragma unroll
    for (int c = 0; c < kVecCh; ++c) out[c] = __fmul_rn(__fmul_rn(out[c], inv), head_scale);
}

__device__ __forceinline__ uint2 pack4(const float (&out)[kVecCh]) {
    return make_uint2(pack_bf16(out[0], out[1]), pack_bf16(out[2], out[3]));
}

template <bool kScatter = false>
__device__ __forceinline__ uint2 vec_row(const float (&w)[kVecCh][kVecTaps], float (&win)[kVecTaps - 1][kVecCh],
                                         const float (&cur)[kVecCh], bool l2, float head_scale, float eps) {
    float out[kVecCh];
    vec_act(w, win, cur, out);
    if (l2) vec_l2<kScatter>(out, head_scale, eps);
    return pack4(out);
}

// The last K - 1 inputs of a launch (raw, as bf16) for the 4 channels from ch0 into the state, by
// the thread that read the old state (it may be among them when rows < K - 1).
__device__ __forceinline__ void vec_write_state(const Conv1dBf16Params& p, const bf16* xc, int ch0, int rows) {
    constexpr int K = kVecTaps;
    bf16 next[K - 1][kVecCh];
#pragma unroll
    for (int j = 0; j < K - 1; ++j) {
        const int r = rows - (K - 1) + j;
#pragma unroll
        for (int c = 0; c < kVecCh; ++c)
            next[j][c] = r >= 0 ? xc[r * p.x_row_stride + c]
                                : p.state[static_cast<int64_t>(ch0 + c) * (K - 1) + (K - 1 + r)];
    }
#pragma unroll
    for (int c = 0; c < kVecCh; ++c)
#pragma unroll
        for (int j = 0; j < K - 1; ++j) p.state[static_cast<int64_t>(ch0 + c) * (K - 1) + j] = next[j][c];
}

// kMinBlocks > 0 caps the registers for that many blocks per SM (6: 80 registers); 0 leaves the
// compiler its 93 (5 blocks).
// kMode 0: round 1 as measured (the state by a second launch). 1: tile 0's warp, the only reader of
// the old state, writes the new one at its end (one launch). 2: and the reduce-scatter l2norm. 3: and
// rows in pairs (two rows' activations, then both l2norms: two independent dependency chains), the
// default. H100 (2026-11-25, bench_cuda_kernels --conv, one process, two runs; L2 flushed), us per
// launch, 16 rows per warp, modes 0 / 1 / 2 / 3 (3 at 32 rows):
//   9B, 2048 x 8192:      42.8-43.0 / 40.1-40.8 / 40.5-40.7 / 38.0-38.5 (42.7-43.1)
//   0.8B, 4096 x 6144:    60.7-60.8 / 58.5     / 59.0-59.1 / 55.5-55.7 (58.0-58.1)
//   0.8B, 16384 x 6144:   200.6-204 / 201-203.5 / 203-206  / 191.3-193.4 (186.8-189.1)
// (a device-to-device copy of the same bytes: 21.1 / 31.4 / 130.7 us, ~3.1-3.2 TB/s). Round 1 under
// ncu (9B): issue slots 61 % busy, 183 instructions per warp and row (the pinned expf and IEEE
// division of silu were most of them), the largest stall a fixed-latency dependency: the kernel is
// bound by issue and dependent arithmetic, not by loads in flight (see the cp.async ring note
// below). Two rows' chains side by side are what helped; since 2026-11-29 silu() is five
// instructions (lm_common.cuh), which took the 0.8B's prefill 3-4 % faster.
template <int R, int kMinBlocks, int kMode>
__global__ void __launch_bounds__(kVecThreads, kMinBlocks > 0 ? kMinBlocks : 1) conv1d_vec_kernel(Conv1dBf16Params p) {
    constexpr bool kScatter = kMode >= 2;
    constexpr int K = kVecTaps;
    const int lane = threadIdx.x % kWarp, tile = threadIdx.x / kWarp;
    const int head = blockIdx.x;
    const int ch0 = head * kConvChannelsPerBlock + lane * kVecCh;
    float w[kVecCh][K];  // weights depend on no earlier kernel: loaded before the programmatic wait
#pragma unroll
    for (int c = 0; c < kVecCh; ++c) {
        const float4 f = reinterpret_cast<const float4*>(p.w + static_cast<int64_t>(ch0) * K)[c];
        w[c][0] = f.x, w[c][1] = f.y, w[c][2] = f.z, w[c][3] = f.w;
    }
    pdl_wait();
    pdl_launch_dependents();
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int r0 = (blockIdx.y * kVecTiles + tile) * R;
    if (r0 >= rows) return;  // the whole warp leaves together
    const int r_end = min(rows, r0 + R);
    const bf16* xc = p.x + ch0;
    auto load_group = [&](uint2 (&dst)[kVecGroup], int rg) {
#pragma unroll
        for (int i = 0; i < kVecGroup; ++i)
            dst[i] = rg + i < r_end ? *reinterpret_cast<const uint2*>(xc + (rg + i) * p.x_row_stride)
                                    : make_uint2(0, 0);
    };
    uint2 next[kVecGroup];
    load_group(next, r0);
    float win[K - 1][kVecCh];  // win[K-2] is the newest input before the current row
#pragma unroll
    for (int j = 0; j < K - 1; ++j) {
        const int r = r0 - (K - 1) + j;
        if (r >= 0) {
            unpack4(*reinterpret_cast<const uint2*>(xc + r * p.x_row_stride), win[j]);
        } else {
#pragma unroll
            for (int c = 0; c < kVecCh; ++c)
                win[j][c] = bf16_at(p.state + static_cast<int64_t>(ch0 + c) * (K - 1) + (K - 1 + r));
        }
    }
    const bool l2 = p.l2_dim > 0 && head < p.l2_heads;
    const float head_scale = (l2 && head < p.l2_q_heads) ? p.q_scale : 1.0f;
    for (int rg = r0; rg < r_end; rg += kVecGroup) {
        uint2 in[kVecGroup];
#pragma unroll
        for (int i = 0; i < kVecGroup; ++i) in[i] = next[i];
        if (rg + kVecGroup < r_end) load_group(next, rg + kVecGroup);
        if constexpr (kMode == 3) {
#pragma unroll
            for (int i = 0; i < kVecGroup; i += 2) {
                const int r = rg + i;
                if (r >= r_end) break;  // uniform over the warp
                float cur[kVecCh], o0[kVecCh], o1[kVecCh];
                unpack4(in[i], cur);
                vec_act(w, win, cur, o0);
                unpack4(in[i + 1], cur);  // zeros past the tile: computed, not stored (the state is read from x)
                vec_act(w, win, cur, o1);
                if (l2) {
                    vec_l2<true>(o0, head_scale, p.l2_eps);
                    vec_l2<true>(o1, head_scale, p.l2_eps);
                }
                *reinterpret_cast<uint2*>(p.y + static_cast<int64_t>(r) * p.channels + ch0) = pack4(o0);
                if (r + 1 < r_end)
                    *reinterpret_cast<uint2*>(p.y + static_cast<int64_t>(r + 1) * p.channels + ch0) = pack4(o1);
            }
        } else {
#pragma unroll
            for (int i = 0; i < kVecGroup; ++i) {
                const int r = rg + i;
                if (r >= r_end) break;  // uniform over the warp
                float cur[kVecCh];
                unpack4(in[i], cur);
                *reinterpret_cast<uint2*>(p.y + static_cast<int64_t>(r) * p.channels + ch0) =
                    vec_row<kScatter>(w, win, cur, l2, head_scale, p.l2_eps);
            }
        }
    }
    if (kMode >= 1 && r0 == 0) vec_write_state(p, xc, ch0, rows);
}

// The vector kernel applies: K = 4, 8-byte aligned x rows and y, 16-byte aligned weights.
bool vec_applies(const Conv1dBf16Params& p) {
    return p.kernel == kVecTaps && p.x_row_stride % kVecCh == 0 && reinterpret_cast<uintptr_t>(p.x) % 8 == 0 &&
           reinterpret_cast<uintptr_t>(p.y) % 8 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
}

template <int R, int kMinBlocks = 0, int kMode = 0>
cudaError_t conv1d_vec_launch(const Conv1dBf16Params& p, cudaStream_t stream) {
    const dim3 grid(p.channels / kConvChannelsPerBlock, ceil_div(p.max_rows, kVecTiles * R));
    cudaError_t err =
        launch_kernel(conv1d_vec_kernel<R, kMinBlocks, kMode>, grid, dim3(kVecThreads), 0, stream, p.pdl != 0, p);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess || kMode >= 1) return err;
    conv1d_state_kernel<kVecTaps><<<p.channels / kConvChannelsPerBlock, kConvChannelsPerBlock, 0, stream>>>(p);
    return cudaGetLastError();
}

// Tried and dropped (commit 9124c9d of branch wt-conv3 has it): a kernel that streams each warp's
// tile through a shared-memory ring of 8-row groups by 16-byte cp.async (2-3 groups of loads in
// flight, tiles up to one wave of resident warps, history 3 / R, the state by tile 0). Same bits,
// but slower at every shape: H100 (2026-11-25, us per launch, 9B 2048 rows / 0.8B 4096 / 16384)
// 4 stages one wave 52.5 / 68.3 / 240, 3 stages at 64 rows 47.3-48.0 / 64.8-65.9 / 197-199, round 1
// 43 / 61 / 202; under ncu it executes as many instructions as round 1 with fewer warps. Loads in
// flight were not what limited round 1.
// Also dropped (2026-12-01): this conv run inside the GDN chunk prep instead of its own launch;
// measured flat to slower (lm_gdn_bf16.cu's header has the numbers).

// The default prefill kernel (Conv1dBf16Params::prefill_kernel numbering: kMode + 1).
constexpr int kConvDefaultKernel = 4;  // row pairs, 16 rows per warp

// FROST_GDN_PREFILL=conv_v1 runs the round-1 vector kernel (kMode 0: the state by a second launch)
// as the default, for A/B through the engine; read once per process.
bool conv_prefill_v1() {
    static const bool v1 = [] {
        const char* e = std::getenv("FROST_GDN_PREFILL");
        return e && std::string(e) == "conv_v1";
    }();
    return v1;
}

// FROST_GDN_PREFILL=old runs the previous prefill kernels of the GDN layer (here the per-channel
// loop; lm_gdn_bf16.cu reads it too) for A/B runs of one binary through the engine; read once per
// process.
bool gdn_prefill_old() {
    static const bool old = [] {
        const char* e = std::getenv("FROST_GDN_PREFILL");
        return e && std::string(e) == "old";
    }();
    return old;
}

template <int K>
cudaError_t conv1d_dispatch(const Conv1dBf16Params& p, cudaStream_t stream) {
    const bool batched = p.batch.slots != nullptr;
    if (batched && (!p.batch.table || p.batch.B != p.max_rows || p.n_rows)) return cudaErrorInvalidValue;
    const int tiles = batched ? 1 : ceil_div(p.max_rows, kConvRowsPerBlock);  // batched: one row per member
    if (tiles > 1 && !p.prefill_loop && !gdn_prefill_old() && vec_applies(p)) {  // prefill only: decode keeps the kernel below
        const int kind = p.prefill_kernel != 0 ? p.prefill_kernel : (conv_prefill_v1() ? 1 : kConvDefaultKernel);
        if (kind < 1 || kind > 4) return cudaErrorInvalidValue;
        if (kind > 1) {  // one launch: modes 1, 2, 3 at 16 or 32 rows per warp, 5 blocks per SM (96
                         // registers; the reduce-scatter takes 98 unbounded, which would leave 4)
            if (kind == 3 && p.tile_rows == -16) return conv1d_vec_launch<16, 6, 2>(p, stream);  // 80 registers (bench)
            if (p.tile_rows != 0 && p.tile_rows != 16 && p.tile_rows != 32) return cudaErrorInvalidValue;
            const bool t32 = p.tile_rows == 32;
            switch (kind) {
                case 2: return t32 ? conv1d_vec_launch<32, 5, 1>(p, stream) : conv1d_vec_launch<16, 5, 1>(p, stream);
                case 3: return t32 ? conv1d_vec_launch<32, 5, 2>(p, stream) : conv1d_vec_launch<16, 5, 2>(p, stream);
                default: return t32 ? conv1d_vec_launch<32, 5, 3>(p, stream) : conv1d_vec_launch<16, 5, 3>(p, stream);
            }
        }
        switch (p.tile_rows) {  // the round-1 vector kernel
            case 0:
            case 16: return conv1d_vec_launch<16>(p, stream);
            case 32: return conv1d_vec_launch<32>(p, stream);
            case 64: return conv1d_vec_launch<64>(p, stream);
            case -32: return conv1d_vec_launch<32, 6>(p, stream);  // 80 registers, 6 blocks per SM
            case -16: return conv1d_vec_launch<16, 6>(p, stream);
            default: return cudaErrorInvalidValue;
        }
    }
    const dim3 grid(p.channels / kConvChannelsPerBlock, tiles, batched ? p.batch.B : 1);
    cudaError_t err = launch_kernel(conv1d_kernel<K>, grid, dim3(kConvChannelsPerBlock), 0, stream, p.pdl != 0, p,
                                    tiles == 1 ? 1 : 0);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess || tiles == 1) return err;
    conv1d_state_kernel<K><<<p.channels / kConvChannelsPerBlock, kConvChannelsPerBlock, 0, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace

cudaError_t conv1d_launch(const Conv1dBf16Params& p, cudaStream_t stream) {
    if (!p.x || !p.w || !p.state || !p.y || p.channels <= 0 || p.channels % kConvChannelsPerBlock != 0 ||
        p.max_rows <= 0 || (p.l2_dim != 0 && p.l2_dim != kConvChannelsPerBlock) ||
        p.l2_heads * p.l2_dim > p.channels || p.l2_q_heads > p.l2_heads)
        return cudaErrorInvalidValue;
    switch (p.kernel) {  // the supported tap counts: 2, 3, 4
        case 2: return conv1d_dispatch<2>(p, stream);
        case 3: return conv1d_dispatch<3>(p, stream);
        case 4: return conv1d_dispatch<4>(p, stream);
        default: return cudaErrorInvalidValue;
    }
}

KernelCost conv1d_cost(const Conv1dBf16Params& p, int rows) {
    const double elems = static_cast<double>(rows) * p.channels;
    const double state = static_cast<double>(p.channels) * (p.kernel - 1) * sizeof(bf16) * 2.0;
    return {elems * sizeof(bf16) * 2.0 + state + p.channels * p.kernel * sizeof(float),
            elems * (2.0 * p.kernel + 8.0)};
}

}  // namespace frost::kernels
