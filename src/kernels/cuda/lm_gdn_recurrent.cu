// Recurrent gated delta rule (spec §4.1 step 7), the decode kernel: token by token,
//   S <- α S;  u = Sᵀk;  δ = β (v − u);  S <- S + k δᵀ;  o = Sᵀq,
// with the fp32 state [Hv, dk, dv] held in registers for the whole launch. A block owns one value
// head and a 32-column slice of dv (columns are independent); its 8 warps split dk, and the two
// dk-reductions per token go through shared memory in warp order (deterministic). Decode graphs
// fuse the GDN gates in (β, g from the raw projections) and launch it programmatically.
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kSlice = 32;                       // dv columns per block (one per lane)
constexpr int kWarps = 8;                        // dk split
constexpr int kRowsPerWarp = kGdnHeadDim / kWarps;

__global__ void __launch_bounds__(kWarps * kWarp) gdn_recurrent_kernel(GdnBf16Params p) {
    __shared__ float qs[kGdnHeadDim], ks[kGdnHeadDim], vs[kSlice];
    __shared__ float red[kWarps][kSlice];
    pdl_wait();  // everything below (cursor, q/k/v, gates, state) may come from the predecessor
    pdl_launch_dependents();
    if (p.batch.slots) {  // batched decode: this block's member is row blockIdx.z, one token
        const int m = blockIdx.z;
        p.state = static_cast<float*>(batch_state(p.batch, m, 0));
        if (!p.state) return;  // padding row
        p.cursor = &p.batch.cursors[m];
        p.q += m * p.qkv_row_stride;
        p.k += m * p.qkv_row_stride;
        p.v += m * p.qkv_row_stride;
        p.o += static_cast<int64_t>(m) * p.Hv * kGdnHeadDim;
        if (p.gate_b) {
            p.gate_b += m * p.gate_row_stride;
            p.gate_a += m * p.gate_row_stride;
        } else {
            p.beta += static_cast<int64_t>(m) * p.Hv;
            p.g += static_cast<int64_t>(m) * p.Hv;
        }
        p.max_rows = 1;
    }
    const int rows = cursor_rows(p.cursor, p.max_rows);
    const int h = blockIdx.x;
    const int j0 = blockIdx.y * kSlice;
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    const int kh = h / (p.Hv / p.Hk);
    float* state = p.state + static_cast<int64_t>(h) * kGdnHeadDim * kGdnHeadDim;
    float s[kRowsPerWarp];  // S[warp*16 + i][j0 + lane]
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) s[i] = state[(warp * kRowsPerWarp + i) * kGdnHeadDim + j0 + lane];

    for (int r = 0; r < rows; ++r) {
        const int64_t row = r * p.qkv_row_stride;
        for (int d = threadIdx.x; d < kGdnHeadDim; d += blockDim.x) {
            qs[d] = __bfloat162float(p.q[row + kh * kGdnHeadDim + d]);
            ks[d] = __bfloat162float(p.k[row + kh * kGdnHeadDim + d]);
        }
        if (threadIdx.x < kSlice) vs[threadIdx.x] = __bfloat162float(p.v[row + h * kGdnHeadDim + j0 + threadIdx.x]);
        float beta, g;
        gdn_row_gates(p, r, h, beta, g);
        const float alpha = expf(g);
        __syncthreads();
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
            s[i] *= alpha;
            part += s[i] * ks[warp * kRowsPerWarp + i];
        }
        red[warp][lane] = part;
        __syncthreads();
        float u = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) u += red[w][lane];
        const float delta = beta * (vs[lane] - u);
        part = 0.0f;
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
            s[i] += ks[warp * kRowsPerWarp + i] * delta;
            part += s[i] * qs[warp * kRowsPerWarp + i];
        }
        __syncthreads();  // every warp has read red (u) before it is reused for o
        red[warp][lane] = part;
        __syncthreads();
        if (warp == 0) {
            float o = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) o += red[w][lane];
            p.o[(static_cast<int64_t>(r) * p.Hv + h) * kGdnHeadDim + j0 + lane] = __float2bfloat16(o);
        }
        __syncthreads();  // qs/ks/vs/red are rewritten by the next token
    }
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) state[(warp * kRowsPerWarp + i) * kGdnHeadDim + j0 + lane] = s[i];
}

}  // namespace

cudaError_t gdn_recurrent_launch(const GdnBf16Params& p, cudaStream_t stream) {
    const bool fused_gate = p.gate_b != nullptr;
    if (fused_gate ? (!p.gate_a || !p.A_log || !p.dt_bias) : (!p.beta || !p.g)) return cudaErrorInvalidValue;
    if (!p.q || !p.k || !p.v || !p.state || !p.o || !p.cursor ||
        p.dk != kGdnHeadDim || p.dv != kGdnHeadDim || p.Hk <= 0 || p.Hv <= 0 || p.Hv % p.Hk != 0 ||
        p.max_rows <= 0)
        return cudaErrorInvalidValue;
    if (p.batch.slots && (!p.batch.table || !p.batch.cursors || p.batch.B != p.max_rows)) return cudaErrorInvalidValue;
    const dim3 grid(p.Hv, kGdnHeadDim / kSlice, p.batch.slots ? p.batch.B : 1);
    const cudaError_t err = launch_kernel(gdn_recurrent_kernel, grid, dim3(kWarps * kWarp), 0, stream, p.pdl != 0, p);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

KernelCost gdn_recurrent_cost(const GdnBf16Params& p, int rows) {
    const double state = static_cast<double>(p.Hv) * p.dk * p.dv * sizeof(float) * 2.0;
    const double io = static_cast<double>(rows) *
                      ((2.0 * p.Hk * p.dk + p.Hv * p.dv) * sizeof(bf16) + 2.0 * p.Hv * (p.gate_b ? sizeof(bf16) : sizeof(float)) +
                       p.Hv * p.dv * sizeof(bf16));
    return {state + io, static_cast<double>(rows) * p.Hv * p.dk * p.dv * 6.0};
}

}  // namespace frost::kernels
