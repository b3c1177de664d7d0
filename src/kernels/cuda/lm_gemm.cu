// cuBLASLt bf16 GEMM plans (see lm_gemm.h). Row-major y[M,N] = x[M,K] W[N,K]ᵀ is computed as the
// column-major product yᵀ[N,M] = op_T(W) op_N(x): the "TN" layout cuBLASLt serves best.
#include "kernels/cuda/lm_gemm.h"

#include <cublasLt.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/lm_gemm_lt.h"
#include "kernels/gemm_pick.h"

namespace frost::kernels {

struct GemmPlan {
    GemmLt* lt = nullptr;
    GemmBf16Params shape{};
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace_bytes = 0;
    GemmPlanInfo info{};
};

namespace {

constexpr uint32_t kMinAlignmentBytes = 16;  // views into fused projection outputs are 16-aligned

bool same_shape(const GemmBf16Params& a, const GemmBf16Params& b) {
    return a.M == b.M && a.N == b.N && a.K == b.K && a.ldx == b.ldx && a.ldy == b.ldy &&
           a.out_f32 == b.out_f32 && a.accumulate == b.accumulate;
}

}  // namespace

cudaError_t gemm_lt_create(void* workspace, size_t workspace_bytes, GemmLt** out, int* lt_status) {
    if (!out || (workspace_bytes > 0 && !workspace)) return cudaErrorInvalidValue;
    *out = nullptr;
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t st = cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_fail(st, lt_status);
    *out = new GemmLt{h, workspace, workspace_bytes};
    return cudaSuccess;
}

void gemm_lt_destroy(GemmLt* lt) {
    if (!lt) return;
    cublasLtDestroy(lt->handle);
    delete lt;
}

void gemm_plan_destroy(GemmPlan* plan) {
    if (!plan) return;
    lt_destroy(plan->op, plan->a, plan->b, plan->c);
    delete plan;
}

namespace {

constexpr int kMaxRank = 16;  // heuristic answers a plan may take (rank)
// In-place split-K reductions accumulate with atomics in a varying order: not deterministic.
constexpr uint32_t kDeterministicSchemes =
    CUBLASLT_REDUCTION_SCHEME_MASK & ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE);

bool valid_shape(const GemmLt* lt, const GemmBf16Params& s) {
    return lt && s.M > 0 && s.N > 0 && s.K > 0 && s.ldx >= s.K && s.ldy >= s.N;
}

// A plan holding the descriptors of `s` (M rows), no algorithm yet; null on failure (*st says why).
GemmPlan* plan_with_descs(GemmLt* lt, const GemmBf16Params& s, cublasStatus_t* st) {
    auto* plan = new GemmPlan{};
    plan->lt = lt;
    plan->shape = s;
    plan->shape.x = nullptr;
    plan->shape.w = nullptr;
    plan->shape.y = nullptr;
    const cudaDataType_t out_type = s.out_f32 ? CUDA_R_32F : CUDA_R_16BF;
    *st = lt_tn_descs(&plan->op, &plan->a, &plan->b, &plan->c, CUDA_R_16BF, out_type, s.N, s.M, s.K, s.ldx, s.ldy);
    if (*st != CUBLAS_STATUS_SUCCESS) {
        gemm_plan_destroy(plan);
        return nullptr;
    }
    return plan;
}

// The heuristic's first `n` answers (at most kMaxRank) for plan's descriptors, among algorithms
// whose reduction scheme is in `schemes`, into results; how many it gave in *found. False when it
// fails (*st says why).
bool heuristic_answers(const GemmPlan* plan, uint32_t schemes, int n, cublasLtMatmulHeuristicResult_t* results,
                       int* found, cublasStatus_t* st) {
    cublasLtMatmulPreference_t pref = nullptr;
    *st = lt_preference(plan->lt, &pref);
    if (*st == CUBLAS_STATUS_SUCCESS)
        *st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                   sizeof(schemes));
    const uint32_t align = kMinAlignmentBytes;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
        if (*st == CUBLAS_STATUS_SUCCESS) *st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
    }
    *found = 0;
    if (*st == CUBLAS_STATUS_SUCCESS)
        *st = cublasLtMatmulAlgoGetHeuristic(plan->lt->handle, plan->op, plan->a, plan->b, plan->c, plan->c, pref,
                                             n < kMaxRank ? n : kMaxRank, results, found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    return *st == CUBLAS_STATUS_SUCCESS;
}

// The heuristic's answer number `rank` (kGemmRankPick: gemm_pick_rank's choice among the first
// kGemmPickCandidates) into *out and its number into *taken; false when it offers fewer (*st stays
// success) or fails (*st says why).
bool heuristic_algo(const GemmPlan* plan, uint32_t schemes, int rank, cublasLtMatmulHeuristicResult_t* out,
                    int* taken, cublasStatus_t* st) {
    cublasLtMatmulHeuristicResult_t results[kMaxRank]{};
    int found = 0;
    const int want = rank == kGemmRankPick ? kGemmPickCandidates : rank + 1;
    if (!heuristic_answers(plan, schemes, want, results, &found, st)) return false;
    if (rank == kGemmRankPick) {
        const char* env = std::getenv("FROST_GEMM_PICK");
        float waves[kGemmPickCandidates] = {};
        for (int i = 0; i < found && i < kGemmPickCandidates; ++i) waves[i] = results[i].wavesCount;
        rank = env && std::strcmp(env, "first") == 0 ? 0 : gemm_pick_rank(waves, found);
    }
    if (found <= rank) return false;
    *out = results[rank];
    *taken = rank;
    return true;
}

// A failed plan: NotSupported where cuBLASLt answered but offered nothing, else its status.
cudaError_t plan_fail(GemmPlan* plan, cublasStatus_t st, int* lt_status) {
    gemm_plan_destroy(plan);
    if (st == CUBLAS_STATUS_SUCCESS) return cudaErrorNotSupported;
    return lt_fail(st, lt_status);
}

}  // namespace

cudaError_t gemm_plan_create(GemmLt* lt, const GemmBf16Params& s, GemmPlan** out, int* lt_status, int rank) {
    if ((rank != kGemmRankPick && (rank < 0 || rank >= kMaxRank)) || !out || !valid_shape(lt, s))
        return cudaErrorInvalidValue;
    *out = nullptr;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    GemmPlan* plan = plan_with_descs(lt, s, &st);
    if (!plan) return lt_fail(st, lt_status);
    cublasLtMatmulHeuristicResult_t result{};
    int taken = 0;
    if (!heuristic_algo(plan, kDeterministicSchemes, rank, &result, &taken, &st)) return plan_fail(plan, st, lt_status);
    plan->algo = result.algo;
    plan->workspace_bytes = result.workspaceSize;
    plan->info = {taken, result.wavesCount};
    *out = plan;
    return cudaSuccess;
}

GemmPlanInfo gemm_plan_info(const GemmPlan* plan) { return plan ? plan->info : GemmPlanInfo{}; }

cudaError_t gemm_plan_create_row_invariant(GemmLt* lt, const GemmBf16Params& s, int ref_rows, GemmPlan** out,
                                           int* lt_status) {
    if (ref_rows <= 0 || !out || !valid_shape(lt, s)) return cudaErrorInvalidValue;
    *out = nullptr;
    GemmBf16Params ref_shape = s;
    ref_shape.M = ref_rows;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    GemmPlan* ref = plan_with_descs(lt, ref_shape, &st);
    if (!ref) return lt_fail(st, lt_status);
    cublasLtMatmulHeuristicResult_t result{};
    // Algorithms without a reduction first; where the mask leaves none, the deterministic ones
    // with their split turned off below.
    int taken = 0;
    bool found = heuristic_algo(ref, CUBLASLT_REDUCTION_SCHEME_NONE, 0, &result, &taken, &st);
    if (!found && st == CUBLAS_STATUS_SUCCESS)
        found = heuristic_algo(ref, kDeterministicSchemes, 0, &result, &taken, &st);
    gemm_plan_destroy(ref);
    if (!found) return plan_fail(nullptr, st, lt_status);
    // No split of K whatever the heuristic meant for ref_rows (a split's partial sums would add
    // the K products in another order).
    const int32_t one = 1;
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    st = cublasLtMatmulAlgoConfigSetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoConfigSetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                                  sizeof(none));
    if (st != CUBLAS_STATUS_SUCCESS) return lt_fail(st, lt_status);
    GemmPlan* plan = plan_with_descs(lt, s, &st);
    if (!plan) return lt_fail(st, lt_status);
    cublasLtMatmulHeuristicResult_t checked{};
    st = cublasLtMatmulAlgoCheck(lt->handle, plan->op, plan->a, plan->b, plan->c, plan->c, &result.algo, &checked);
    if (st != CUBLAS_STATUS_SUCCESS || checked.workspaceSize > lt->workspace_bytes) {
        gemm_plan_destroy(plan);
        if (lt_status) *lt_status = static_cast<int>(st);
        return cudaErrorNotSupported;
    }
    plan->algo = result.algo;
    plan->workspace_bytes = checked.workspaceSize;
    plan->info = {0, checked.wavesCount};
    *out = plan;
    return cudaSuccess;
}

cudaError_t gemm_launch(const GemmPlan* plan, const GemmBf16Params& p, cudaStream_t stream, int* lt_status) {
    if (!plan || !p.x || !p.w || !p.y || !same_shape(plan->shape, p)) return cudaErrorInvalidValue;
    const float alpha = 1.0f, beta = p.accumulate ? 1.0f : 0.0f;
    const cublasStatus_t st =
        cublasLtMatmul(plan->lt->handle, plan->op, &alpha, p.w, plan->a, p.x, plan->b, &beta, p.y, plan->c, p.y,
                       plan->c, &plan->algo, plan->lt->workspace, plan->workspace_bytes, stream);
    return lt_fail(st, lt_status);
}

}  // namespace frost::kernels
