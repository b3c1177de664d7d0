// The mix of a quantized MoE decode step (lm_moe.h moe_combine_launch): the routed experts' and
// the shared expert's down outputs, computed by the quantized GEMV with expert indirection
// (lm_gemv_quant.h GemvQuantParams::expert_ids), weighted by the router's outputs and added to the
// residual stream. One thread per (row, hidden unit); the sum runs in slot order, then the shared
// expert, in fp32, and the residual is rounded to bf16 once: a row's bits do not depend on the
// other rows (batched decode members keep their solo bits).
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_moe.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) moe_combine_kernel(MoeCombineParams p) {
    pdl_wait();
    pdl_launch_dependents();
    const int h = blockIdx.x * kThreads + threadIdx.x, r = blockIdx.y;
    if (h >= p.H) return;
    const int64_t H = p.H;
    float total = 0.0f;
    for (int j = 0; j < p.k; ++j) {
        const int64_t e = static_cast<int64_t>(r) * p.k + j;
        total = fmaf(p.topk_w[e], p.routed[e * H + h], total);  // fused, as the down-and-mix launch adds
    }
    total = fmaf(p.shared_w[r], p.shared[r * H + h], total);
    const int64_t at = r * H + h;
    p.out[at] = __float2bfloat16_rn(__bfloat162float(p.out[at]) + total);
}

}  // namespace

cudaError_t moe_combine_launch(const MoeCombineParams& p, cudaStream_t stream) {
    if (!p.routed || !p.shared || !p.topk_w || !p.shared_w || !p.out || p.rows < 1 || p.k < 1 || p.H < 1)
        return cudaErrorInvalidValue;
    const dim3 grid(ceil_div(p.H, kThreads), p.rows);
    const cudaError_t e = launch_kernel(moe_combine_kernel, grid, dim3(kThreads), 0, stream, p.pdl != 0, p);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

}  // namespace frost::kernels
