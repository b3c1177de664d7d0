// FP8 block-scaled prefill GEMM (see lm_gemm_fp8.h). Row-major y[M,N] = x[M,K] W[N,K]ᵀ is the
// column-major yᵀ[N,M] = op_T(W) op_N(x), as in lm_gemm.cu: cuBLASLt's A is the weight (its
// 128x128 scale grid is the checkpoint's [N/128][K/128] array) and B the activations (one scale
// per column and 128-wide k group).
#include <cuda_fp8.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/lm_act_quant.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_gemm_lt.h"

namespace frost::kernels {

struct GemmFp8Plan {
    GemmLt* lt = nullptr;
    GemmFp8Params shape{};
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace_bytes = 0;
    int impl = kFp8ImplCublasLt;  // kFp8ImplWgmma: no cuBLASLt objects, gemm_fp8_wgmma_launch
    int variant = 0;              // gemm_fp8_wgmma_launch's; FROST_FP8_WGMMA_VARIANT (benches) overrides
    // shape.grid_rows > 0: the block-scaled plan of rows [0, grid_rows) and the per-row plan of
    // the rest; this plan then has no cuBLASLt objects of its own.
    GemmFp8Plan* head = nullptr;
    GemmFp8Plan* tail = nullptr;
    int32_t split_rows = 0;  // the grid rows the head takes (gemm_fp8_plan_grid_rows)
};

namespace {
using namespace lm;

constexpr float kE4m3Max = 448.0f;

// One warp per (row, 128-wide group): 4 elements per lane.
__global__ void act_quant_kernel(const bf16* x, int64_t ldx, int32_t M, int32_t K, uint8_t* xq, float* xs,
                                 int64_t ld_scale) {
    const int groups = K / kFp8Group;
    const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (item >= static_cast<int64_t>(M) * groups) return;
    const int64_t m = item / groups;
    const int g = static_cast<int>(item % groups);
    const bf16* src = x + m * ldx + g * kFp8Group + lane * 4;
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = __bfloat162float(src[e]);
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
    amax = warp_max(amax);
    const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    uint32_t packed[1];
    e4m3_quotients(v, scale, packed);
    *reinterpret_cast<uint32_t*>(xq + m * K + g * kFp8Group + lane * 4) = packed[0];
    if (lane == 0) xs[g * ld_scale + m] = scale;
}

// The same quantization, 16 lanes per (row, group) with 16-byte loads (8 bf16 a lane) and a block
// of 32 rows x one group, so a block's 32 scales land in one contiguous 128-byte line: ~1.5x the
// bandwidth of act_quant_kernel (its 8-byte loads and scattered scale stores), which stays for
// rows not 16-byte aligned.
constexpr int kQuantRows = 32;
__global__ void __launch_bounds__(kQuantRows * 16) act_quant16_kernel(const bf16* x, int64_t ldx, int32_t M, int32_t K,
                                                                       uint8_t* xq, float* xs, int64_t ld_scale) {
    const int64_t m = static_cast<int64_t>(blockIdx.x) * kQuantRows + threadIdx.x / 16;
    const int g = blockIdx.y, l = threadIdx.x % 16;
    if (m >= M) return;  // whole 16-lane groups leave together: the shuffles below stay within one
    const uint4 raw = *reinterpret_cast<const uint4*>(x + m * ldx + g * kFp8Group + l * 8);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
    float v[8];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(h[e]);
        v[2 * e] = f.x;
        v[2 * e + 1] = f.y;
    }
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
    const unsigned mask = __activemask();
#pragma unroll
    for (int off = 8; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(mask, amax, off));
    const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    uint32_t packed[2];
    e4m3_quotients(v, scale, packed);
    *reinterpret_cast<uint2*>(xq + m * K + g * kFp8Group + l * 8) = make_uint2(packed[0], packed[1]);
    if (l == 0) xs[g * ld_scale + m] = scale;
}

// out[g][n] (row stride ld) = s[n * row_stride + g * group_stride]: per-row scales [N][groups]
// (row_stride groups, group_stride 1) or one scale per row broadcast to every group (1, 0).
__global__ void w_scale_rows_kernel(const float* s, int32_t N, int32_t groups, int32_t row_stride, int32_t group_stride,
                                    float* out, int64_t ld) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // over [groups][N]
    if (i >= static_cast<int64_t>(N) * groups) return;
    const int64_t g = i / N, n = i % N;
    out[g * ld + n] = s[n * row_stride + g * group_stride];
}

// Auto selection: FROST_FP8_GEMM (cublas | cublaslt | wgmma) first, then the measured default.
int resolve_impl(const GemmFp8Params& s) {
    if (s.impl != kFp8ImplAuto) return s.impl;
    const char* env = std::getenv("FROST_FP8_GEMM");
    if (env && (std::strcmp(env, "cublaslt") == 0 || std::strcmp(env, "cublas") == 0)) return kFp8ImplCublasLt;
    const bool want = (env && std::strcmp(env, "wgmma") == 0) || gemm_fp8_prefers_wgmma(s);
    return want && gemm_fp8_wgmma_supported(s) ? kFp8ImplWgmma : kFp8ImplCublasLt;
}

bool same_shape(const GemmFp8Params& a, const GemmFp8Params& b) {
    return a.M == b.M && a.N == b.N && a.K == b.K && a.ldy == b.ldy && a.out_f32 == b.out_f32 &&
           a.accumulate == b.accumulate && a.w_block_n == b.w_block_n && a.grid_rows == b.grid_rows;
}

// The two GEMMs of a grid_rows split (GemmFp8Params::grid_rows): rows [0, grid_rows) with the
// 128x128 grid, rows [grid_rows, N) with per-row scales, each writing its own columns of y.
GemmFp8Params split_head(const GemmFp8Params& p, int32_t rows) {
    GemmFp8Params h = p;
    h.N = rows;
    h.w_scale = p.w_grid_scale;
    h.w_block_n = kFp8Group;
    h.grid_rows = 0;
    h.w_grid_scale = nullptr;
    return h;
}
GemmFp8Params split_tail(const GemmFp8Params& p, int32_t rows) {
    GemmFp8Params t = p;
    t.N = p.N - rows;
    if (p.w) t.w = p.w + static_cast<int64_t>(rows) * p.K;
    if (p.y) t.y = static_cast<uint8_t*>(p.y) + static_cast<int64_t>(rows) * (p.out_f32 ? 4 : 2);
    t.w_block_n = 1;
    t.grid_rows = 0;
    t.w_grid_scale = nullptr;
    return t;
}

}  // namespace

cudaError_t act_quant_fp8_launch(const bf16* x, int64_t ldx, int32_t M, int32_t K, uint8_t* xq, float* x_scale,
                                 cudaStream_t stream) {
    if (!x || !xq || !x_scale || M <= 0 || K <= 0 || K % kFp8Group != 0 || ldx < K || ldx % 4 != 0)
        return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 8 == 0) {
        const dim3 grid(ceil_div(M, kQuantRows), K / kFp8Group);
        act_quant16_kernel<<<grid, kQuantRows * 16, 0, stream>>>(x, ldx, M, K, xq, x_scale, act_scale_ld(M));
        return cudaGetLastError();
    }
    constexpr int kThreads = 256;
    const int64_t threads = static_cast<int64_t>(M) * (K / kFp8Group) * kWarp;
    act_quant_kernel<<<ceil_div(threads, kThreads), kThreads, 0, stream>>>(x, ldx, M, K, xq, x_scale, act_scale_ld(M));
    return cudaGetLastError();
}

namespace {
cudaError_t w_scale_layout(const float* w_scale, int32_t N, int32_t K, bool channel, float* out, cudaStream_t stream) {
    if (!w_scale || !out || N <= 0 || K <= 0 || K % kFp8Group != 0) return cudaErrorInvalidValue;
    constexpr int kThreads = 256;
    const int32_t groups = K / kFp8Group;
    const int64_t n = static_cast<int64_t>(N) * groups;
    w_scale_rows_kernel<<<ceil_div(n, kThreads), kThreads, 0, stream>>>(w_scale, N, groups, channel ? 1 : groups,
                                                                        channel ? 0 : 1, out, act_scale_ld(N));
    return cudaGetLastError();
}
}  // namespace

cudaError_t w_scale_rows_launch(const float* w_scale, int32_t N, int32_t K, float* out, cudaStream_t stream) {
    return w_scale_layout(w_scale, N, K, false, out, stream);
}

cudaError_t w_scale_channel_launch(const float* w_scale, int32_t N, int32_t K, float* out, cudaStream_t stream) {
    return w_scale_layout(w_scale, N, K, true, out, stream);
}

int gemm_fp8_plan_impl(const GemmFp8Plan* plan) { return plan ? plan->impl : kFp8ImplAuto; }
int32_t gemm_fp8_plan_grid_rows(const GemmFp8Plan* plan) { return plan ? plan->split_rows : 0; }

// The narrow-N prefill shapes (N <= 4096 at K >= 4096 and M >= 2048: the 9B's down, out_proj and
// o_proj) would go to our kernel when kFp8PreferWgmmaNarrow is on. It is off: on the H100
// (2026-11-25, bench_cuda_kernels --fp8, the GEMM alone) cuBLASLt ran them at 1169-1307 TFLOP/s
// (M 2048 / 4096) and our best variant at 779-910; the ~900 quoted for cuBLASLt before was
// activation quantization + GEMM (973-1104). FROST_FP8_GEMM=wgmma opts in everywhere.
bool gemm_fp8_prefers_wgmma(const GemmFp8Params& s) {
    return kFp8PreferWgmmaNarrow && s.w_block_n == kFp8Group && s.M >= 2048 && s.N <= 4096 && s.K >= 4096;
}

void gemm_fp8_plan_destroy(GemmFp8Plan* plan) {
    if (!plan) return;
    gemm_fp8_plan_destroy(plan->head);
    gemm_fp8_plan_destroy(plan->tail);
    lt_destroy(plan->op, plan->a, plan->b, plan->c);
    delete plan;
}

namespace {
// A plan keeps the shape a launch must match, never the pointers of the call that made it.
GemmFp8Params shape_only(GemmFp8Params s) {
    s.xq = nullptr;
    s.x_scale = nullptr;
    s.w = nullptr;
    s.w_scale = nullptr;
    s.w_grid_scale = nullptr;
    s.y = nullptr;
    return s;
}
}  // namespace

cudaError_t gemm_fp8_plan_create(GemmLt* lt, const GemmFp8Params& s, GemmFp8Plan** out, int* lt_status, int rank) {
    constexpr int kMaxRank = 16;
    if (rank < 0 || rank >= kMaxRank || !lt || !out || s.M <= 0 || s.N <= 0 || s.K <= 0 || s.K % kFp8Group != 0 || s.ldy < s.N ||
        (s.w_block_n != kFp8Group && s.w_block_n != 1) ||
        (s.grid_rows != 0 &&
         (s.w_block_n != 1 || s.grid_rows < 0 || s.grid_rows % kFp8Group != 0 || s.grid_rows >= s.N)))
        return cudaErrorInvalidValue;
    *out = nullptr;
    if (s.grid_rows > 0) {
        // Both parts or neither: NotSupported from either leaves the caller the unsplit plan.
        auto* plan = new GemmFp8Plan{};
        plan->lt = lt;
        plan->shape = shape_only(s);
        // The per-row rest may be too narrow for cuBLASLt (the 9B in_proj's is 64 rows): then
        // the split moves whole blocks from the head into it until a plan exists.
        cudaError_t e = cudaErrorNotSupported;
        for (int32_t rows = s.grid_rows; rows > 0 && e == cudaErrorNotSupported; rows -= kFp8Group) {
            gemm_fp8_plan_destroy(plan->tail);
            plan->tail = nullptr;
            e = gemm_fp8_plan_create(lt, split_tail(s, rows), &plan->tail, lt_status, 0);
            plan->split_rows = rows;
        }
        if (e == cudaSuccess)
            e = gemm_fp8_plan_create(lt, split_head(s, plan->split_rows), &plan->head, lt_status, rank);
        if (e != cudaSuccess) {
            gemm_fp8_plan_destroy(plan);
            return e;
        }
        plan->impl = plan->head->impl;
        *out = plan;
        return cudaSuccess;
    }
    const int impl = resolve_impl(s);
    if (impl != kFp8ImplCublasLt && impl != kFp8ImplWgmma) return cudaErrorInvalidValue;
    if (impl == kFp8ImplWgmma && (rank != 0 || !gemm_fp8_wgmma_supported(s))) return cudaErrorNotSupported;
    if (impl == kFp8ImplCublasLt && s.K < kFp8MinK) return cudaErrorNotSupported;
    auto* plan = new GemmFp8Plan{};
    plan->lt = lt;
    plan->impl = impl;
    plan->shape = shape_only(s);
    if (impl == kFp8ImplWgmma) {
        const char* v = std::getenv("FROST_FP8_WGMMA_VARIANT");
        plan->variant = v ? std::atoi(v) : kFp8WgmmaDefaultVariant;
        *out = plan;
        return cudaSuccess;
    }
    const cudaDataType_t out_type = s.out_f32 ? CUDA_R_32F : CUDA_R_16BF;
    const int32_t a_mode = s.w_block_n == 1 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                                            : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    // xq is packed: its row stride is K.
    cublasStatus_t st = lt_tn_descs(&plan->op, &plan->a, &plan->b, &plan->c, CUDA_R_8F_E4M3, out_type, s.N, s.M,
                                    s.K, s.K, s.ldy);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode));
    cublasLtMatmulPreference_t pref = nullptr;
    if (st == CUBLAS_STATUS_SUCCESS) st = lt_preference(lt, &pref);
    // The heuristic refuses block-scaled FP8 without scale pointers (INVALID_VALUE); any device
    // pointer stands in until a launch sets the weight's own. Unlike the bf16 plans, no reduction
    // scheme mask: with it the heuristic offers no block-scaled algorithm (the test checks two
    // runs are bitwise equal instead).
    const void* placeholder = lt->workspace;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
                                            sizeof(placeholder));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
                                            sizeof(placeholder));
    cublasLtMatmulHeuristicResult_t results[kMaxRank]{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt->handle, plan->op, plan->a, plan->b, plan->c, plan->c, pref, rank + 1,
                                            results, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    const cublasLtMatmulHeuristicResult_t& result = results[rank];
    if (st != CUBLAS_STATUS_SUCCESS || found <= rank) {
        gemm_fp8_plan_destroy(plan);
        if (lt_status) *lt_status = static_cast<int>(st);
        return cudaErrorNotSupported;
    }
    plan->algo = result.algo;
    plan->workspace_bytes = result.workspaceSize;
    *out = plan;
    return cudaSuccess;
}

cudaError_t gemm_fp8_launch(GemmFp8Plan* plan, const GemmFp8Params& p, cudaStream_t stream, int* lt_status) {
    if (!plan || !p.xq || !p.x_scale || !p.w || !p.w_scale || !p.y || !same_shape(plan->shape, p))
        return cudaErrorInvalidValue;
    if (plan->head) {
        if (!p.w_grid_scale) return cudaErrorInvalidValue;
        const cudaError_t e = gemm_fp8_launch(plan->head, split_head(p, plan->split_rows), stream, lt_status);
        return e != cudaSuccess ? e : gemm_fp8_launch(plan->tail, split_tail(p, plan->split_rows), stream, lt_status);
    }
    if (plan->impl == kFp8ImplWgmma) {
        if (lt_status) *lt_status = 0;
        return gemm_fp8_wgmma_launch(p, stream, plan->variant);
    }
    // The scale pointers differ per weight: set on the (host-side) descriptor before each enqueue.
    cublasStatus_t st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p.w_scale,
                                                       sizeof(p.w_scale));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.x_scale,
                                            sizeof(p.x_scale));
    if (st != CUBLAS_STATUS_SUCCESS) return lt_fail(st, lt_status);
    const float alpha = 1.0f, beta = p.accumulate ? 1.0f : 0.0f;
    st = cublasLtMatmul(plan->lt->handle, plan->op, &alpha, p.w, plan->a, p.xq, plan->b, &beta, p.y, plan->c, p.y,
                        plan->c, &plan->algo, plan->lt->workspace, plan->workspace_bytes, stream);
    return lt_fail(st, lt_status);
}

}  // namespace frost::kernels
