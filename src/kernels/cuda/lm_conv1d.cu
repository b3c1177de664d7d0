// Causal depthwise conv1d + SiLU of the GDN qkv channels with its K-1 input state (spec §4.1 step 2),
// fused with the q/k l2norm (step 4). One thread per channel slides a K-tap window in registers
// down a tile of rows, so each input is read once per tile; a block is one 128-channel head, so
// the l2norm is one block reduction per row. Prefill and decode share this launcher (decode
// graphs launch it programmatically: weights load before the wait).
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

template <int K>
cudaError_t conv1d_dispatch(const Conv1dBf16Params& p, cudaStream_t stream) {
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
