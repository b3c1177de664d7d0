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
// at R = 16 (the default), 49.5 at 32, 48.6 at 64, the loop kernel 71.4; capping registers at 80
// for 6 blocks per SM changed nothing. (8 channels per thread and a half-warp per head measured
// 50 us: 128 registers, a quarter occupancy and spills.)
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

// kMinBlocks > 0 caps the registers for that many blocks per SM (6: 80 registers); 0 leaves the
// compiler its 93 (5 blocks).
template <int R, int kMinBlocks>
__global__ void __launch_bounds__(kVecThreads, kMinBlocks > 0 ? kMinBlocks : 1) conv1d_vec_kernel(Conv1dBf16Params p) {
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
#pragma unroll
        for (int i = 0; i < kVecGroup; ++i) {
            const int r = rg + i;
            if (r >= r_end) break;  // uniform over the warp
            float cur[kVecCh], out[kVecCh];
            unpack4(in[i], cur);
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
            if (l2) {
                float sq[kVecCh];
#pragma unroll
                for (int c = 0; c < kVecCh; ++c) {
                    out[c] = __bfloat162float(__float2bfloat16(out[c]));
                    sq[c] = __fmul_rn(out[c], out[c]);
                }
#pragma unroll
                for (int off = 4; off > 0; off /= 2)
#pragma unroll
                    for (int c = 0; c < kVecCh; ++c) sq[c] = __fadd_rn(sq[c], __shfl_xor_sync(kFullMask, sq[c], off));
                const float part = __fadd_rn(__fadd_rn(sq[0], sq[2]), __fadd_rn(sq[1], sq[3]));
                float ss = 0.0f;
#pragma unroll
                for (int k = 0; k < 4; ++k) ss = __fadd_rn(ss, __shfl_sync(kFullMask, part, 8 * k));
                const float inv = rsqrtf(__fadd_rn(ss, p.l2_eps));
#pragma unroll
                for (int c = 0; c < kVecCh; ++c) out[c] = __fmul_rn(__fmul_rn(out[c], inv), head_scale);
            }
            *reinterpret_cast<uint2*>(p.y + static_cast<int64_t>(r) * p.channels + ch0) =
                make_uint2(pack_bf16(out[0], out[1]), pack_bf16(out[2], out[3]));
        }
    }
}

// The vector kernel applies: K = 4, 8-byte aligned x rows and y, 16-byte aligned weights.
bool vec_applies(const Conv1dBf16Params& p) {
    return p.kernel == kVecTaps && p.x_row_stride % kVecCh == 0 && reinterpret_cast<uintptr_t>(p.x) % 8 == 0 &&
           reinterpret_cast<uintptr_t>(p.y) % 8 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
}

template <int R, int kMinBlocks = 0>
cudaError_t conv1d_vec_launch(const Conv1dBf16Params& p, cudaStream_t stream) {
    const dim3 grid(p.channels / kConvChannelsPerBlock, ceil_div(p.max_rows, kVecTiles * R));
    cudaError_t err = launch_kernel(conv1d_vec_kernel<R, kMinBlocks>, grid, dim3(kVecThreads), 0, stream, p.pdl != 0, p);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    conv1d_state_kernel<kVecTaps><<<p.channels / kConvChannelsPerBlock, kConvChannelsPerBlock, 0, stream>>>(p);
    return cudaGetLastError();
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
        switch (p.tile_rows) {
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
