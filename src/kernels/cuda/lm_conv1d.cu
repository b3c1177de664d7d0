// Causal depthwise conv1d + SiLU of the GDN qkv channels with its K-1 input state (spec §4.1 step 2),
// fused with the q/k l2norm (step 4). One thread per channel slides a K-tap window in registers
// down a tile of rows, so each input is read once per tile; a block is one 128-channel head, so
// the l2norm is one block reduction per row. Prefill and decode share this launcher (decode
// graphs launch it programmatically: weights load before the wait). Prefill chunks with aligned
// rows take the vectorised half-warp-per-row kernel (conv1d_vec_kernel).
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

// Prefill path (many rows, 16-byte aligned input rows): a half-warp per 128-channel head and run
// of kVecRunRows rows, 8 channels per lane, so inputs are 16-byte loads, the K-tap window slides
// in registers down the run (each input read once, plus K-1 rows above the run), the weights are
// loaded once per run, and the head's l2norm is four shuffles instead of a block reduction per
// row. The one-thread-per-channel kernel above ran at ~0.75 TB/s on the 9B shape (2048 rows),
// latency-bound on its two barriers per row. Never updates the state: conv1d_state_kernel runs
// after it.
constexpr int kVecRunRows = 8;
constexpr int kVecLanesPerRow = kConvChannelsPerBlock / 8;         // 16: a half-warp per head
constexpr int kVecThreads = 128;                                    // 8 half-warps
constexpr int kVecRowsPerBlock = kVecRunRows * kVecThreads / kVecLanesPerRow;  // 64

template <int K>
__global__ void __launch_bounds__(kVecThreads) conv1d_vec_kernel(Conv1dBf16Params p) {
    const int lane16 = threadIdx.x % kVecLanesPerRow;
    const int ch0 = blockIdx.x * kConvChannelsPerBlock + lane16 * 8;
    float w[8][K];  // [C, K] fp32: this lane's 8 x K weights are contiguous
#pragma unroll
    for (int q = 0; q < 2 * K; ++q) {
        const float4 f = *reinterpret_cast<const float4*>(p.w + static_cast<int64_t>(ch0) * K + 4 * q);
        w[(4 * q) / K][(4 * q) % K] = f.x;
        w[(4 * q + 1) / K][(4 * q + 1) % K] = f.y;
        w[(4 * q + 2) / K][(4 * q + 2) % K] = f.z;
        w[(4 * q + 3) / K][(4 * q + 3) % K] = f.w;
    }
    pdl_wait();
    pdl_launch_dependents();
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int r0 = blockIdx.y * kVecRowsPerBlock + static_cast<int>(threadIdx.x / kVecLanesPerRow) * kVecRunRows;
    if (r0 >= rows) return;  // uniform per half-warp: the shuffles below stay within live lanes
    const unsigned mask = 0xFFFFu << (threadIdx.x % kWarp & 16);
    const bool l2 = p.l2_dim > 0 && static_cast<int>(blockIdx.x) < p.l2_heads;
    const float head_scale = static_cast<int>(blockIdx.x) < p.l2_q_heads ? p.q_scale : 1.0f;
    float win[K - 1][8];  // win[K-2] is the newest input before the current row
#pragma unroll
    for (int j = 0; j < K - 1; ++j) {
        const int src = r0 - (K - 1) + j;
        if (src >= 0) {
            load8(p.x + src * p.x_row_stride + ch0, win[j]);
        } else {
#pragma unroll
            for (int c = 0; c < 8; ++c) win[j][c] = conv_input<K>(p, ch0 + c, src);
        }
    }
    const int n = min(kVecRunRows, rows - r0);
    float cur[kVecRunRows][8];  // every load of the run issued before the first use
#pragma unroll
    for (int i = 0; i < kVecRunRows; ++i)
        if (i < n) load8(p.x + (r0 + i) * p.x_row_stride + ch0, cur[i]);
#pragma unroll
    for (int i = 0; i < kVecRunRows; ++i) {
        if (i >= n) break;  // uniform per half-warp
        float out[8];
        float ss = 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            float acc = w[c][K - 1] * cur[i][c];
#pragma unroll
            for (int j = 0; j < K - 1; ++j) acc += w[c][j] * win[j][c];
            out[c] = silu(acc);
            // l2norm consumes the bf16-rounded activation, as the unfused pipeline would.
            if (l2) out[c] = __bfloat162float(__float2bfloat16(out[c]));
            ss += out[c] * out[c];
        }
#pragma unroll
        for (int j = 0; j < K - 2; ++j)
#pragma unroll
            for (int c = 0; c < 8; ++c) win[j][c] = win[j + 1][c];
#pragma unroll
        for (int c = 0; c < 8; ++c) win[K - 2][c] = cur[i][c];
        if (l2) {
#pragma unroll
            for (int o = 1; o < kVecLanesPerRow; o <<= 1) ss += __shfl_xor_sync(mask, ss, o);
            const float f = rsqrtf(ss + p.l2_eps) * head_scale;
#pragma unroll
            for (int c = 0; c < 8; ++c) out[c] *= f;
        }
        store8(p.y + static_cast<int64_t>(r0 + i) * p.channels + ch0, out);
    }
}

// The vector path needs 16-byte aligned input rows and more than one row (decode keeps the
// per-channel kernel, whose single tile also updates the state in the same launch).
bool conv1d_vec_ok(const Conv1dBf16Params& p) {
    return !p.batch.slots && p.max_rows > 1 && p.x_row_stride % 8 == 0 &&
           reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.y) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
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

template <int K>
cudaError_t conv1d_dispatch(const Conv1dBf16Params& p, cudaStream_t stream) {
    if (conv1d_vec_ok(p)) {
        const dim3 grid(p.channels / kConvChannelsPerBlock, ceil_div(p.max_rows, kVecRowsPerBlock));
        cudaError_t err = launch_kernel(conv1d_vec_kernel<K>, grid, dim3(kVecThreads), 0,
                                        stream, p.pdl != 0, p);
        if (err == cudaSuccess) err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        conv1d_state_kernel<K><<<p.channels / kConvChannelsPerBlock, kConvChannelsPerBlock, 0, stream>>>(p);
        return cudaGetLastError();
    }
    const bool batched = p.batch.slots != nullptr;
    if (batched && (!p.batch.table || p.batch.B != p.max_rows || p.n_rows)) return cudaErrorInvalidValue;
    const int tiles = batched ? 1 : ceil_div(p.max_rows, kConvRowsPerBlock);  // batched: one row per member
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
