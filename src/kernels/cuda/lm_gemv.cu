// Decode GEMV: y[n] = Σ_k x[k] W[n, k] for one row of x, the weight-streaming step of batch-1
// decode. x is staged once per block in shared memory; each warp streams whole weight rows with
// 16-byte loads (four in flight per lane) and reduces in a fixed butterfly order. Decode variants:
// programmatic dependent launch, and the MLP gate_up projection fused with SwiGLU.
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_gemv_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kUnroll = 4;  // 16-byte loads in flight per lane (8 measured no faster for N = 4096, 2026-11-22 H100)
constexpr int kMaxK = 20480;  // x staged in 40 KiB of shared memory (under the 48 KiB default with the static arrays); 27B down_proj K = 17408
constexpr int kMinBlocksPerSm = 4;  // <= 64 registers: four blocks per SM, as the plain GEMV reaches

// This SIMT GEMV is the fallback for K not a multiple of 128 (gemv_launch: the tensor-core GEMV
// takes every released shape). Since Bf16x8 became one uint4 (lm_common.cuh) its x reads are
// 16-byte and ptxas gives it 61-64 registers instead of 48-64, one multi-row form spilling 44
// bytes; not measured, as no benchmarked shape runs it.
__device__ inline void dot8(float& acc, const Bf16x8& wv, const Bf16x8& xv) {
#pragma unroll
    for (int h = 0; h < 4; ++h) {
        const float2 a = wv.f2(h);
        const float2 b = xv.f2(h);
        acc += a.x * b.x + a.y * b.y;
    }
}

__device__ inline Bf16x8 load_w(const Bf16x8* w) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(w));
    return *reinterpret_cast<const Bf16x8*>(&raw);
}

// x is staged once per block in shared memory (measured 1-5% faster than every warp reading it
// through the read-only cache, 2026-11-22 H100). The weights do not depend on earlier kernels, so
// each warp issues its first kUnroll loads before pdl_wait(): under programmatic launch they
// overlap the predecessor's tail. kSwiglu: warps [0, kWarps/2) take gate rows, the others the
// matching up rows, and the block combines them into the [F] activation. (Folding the RMSNorm
// that produces x into this staging, from the residual stream, was measured slower than the norm
// kernel: 9B decode @1k 6.144 vs 6.121 ms, H100 2026-11-22; every block repeats the norm.)
template <bool kSwiglu, bool kMultiRow>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) gemv_kernel(GemmBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ float row_sum[kWarps];
    bf16* xs = reinterpret_cast<bf16*>(smem_raw);
    // Multi-row (batched decode, M <= kGemvMaxRows): consecutive blocks are the M rows of one
    // weight-row group, so the group's weights are read from DRAM once and from L2 by the other
    // rows; each row's arithmetic is exactly the M = 1 GEMV's (a member's bits equal its solo step).
    // A separate instantiation: folding the row offset into the M = 1 kernel made every decode
    // step 8 % slower (9B bf16 6.12 -> 6.64 ms/token, H100 2026-11-24).
    int bx = blockIdx.x;
    if constexpr (kMultiRow) {
        const int row = blockIdx.x % p.M;
        bx = blockIdx.x / p.M;
        p.x += row * p.ldx;
        p.y = static_cast<char*>(p.y) + row * p.ldy * (p.out_f32 && !kSwiglu ? sizeof(float) : sizeof(bf16));
    }
    const int vecs = p.K / kVec;
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    constexpr int kHalf = kWarps / 2;
    const int F = p.N / 2;
    const int j = bx * kHalf + warp % kHalf;  // swiglu: activation index of this warp
    const int n = kSwiglu ? (warp < kHalf ? j : F + j) : bx * kWarps + warp;
    const bool valid = kSwiglu ? j < F : n < p.N;
    const Bf16x8* w = reinterpret_cast<const Bf16x8*>(p.w + static_cast<int64_t>(valid ? n : 0) * p.K);
    const bool first_group = valid && lane + (kUnroll - 1) * kWarp < vecs;
    Bf16x8 wv0[kUnroll];
    if (first_group) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv0[u] = load_w(w + lane + u * kWarp);
    }
    pdl_wait();
    pdl_launch_dependents();
    for (int i = threadIdx.x; i < vecs; i += kThreads) reinterpret_cast<Bf16x8*>(xs)[i] = reinterpret_cast<const Bf16x8*>(p.x)[i];
    __syncthreads();
    const Bf16x8* xv = reinterpret_cast<const Bf16x8*>(xs);
    float acc = 0.0f;
    int i = lane;
    if (first_group) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) dot8(acc, wv0[u], xv[i + u * kWarp]);
        i += kUnroll * kWarp;
    }
    if (valid) {
        for (; i + (kUnroll - 1) * kWarp < vecs; i += kUnroll * kWarp) {
            Bf16x8 wv[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) wv[u] = load_w(w + i + u * kWarp);
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) dot8(acc, wv[u], xv[i + u * kWarp]);
        }
        for (; i < vecs; i += kWarp) dot8(acc, w[i], xv[i]);
    }
    acc = warp_sum(acc);
    if constexpr (kSwiglu) {
        if (lane == 0) row_sum[warp] = acc;
        __syncthreads();
        if (threadIdx.x >= kHalf) return;
        const int jj = bx * kHalf + threadIdx.x;
        if (jj >= F) return;
        static_cast<bf16*>(p.y)[jj] = swiglu_from_sums(row_sum[threadIdx.x], row_sum[kHalf + threadIdx.x]);
    } else {
        if (lane != 0 || !valid) return;
        store_gemv_out(p, n, acc);
    }
}


// Multi-row GEMV for a batched decode step (M <= kGemvMaxRows rows of x, every row against the
// same weights): each warp loads its weight row once and multiplies it with all M staged x rows,
// so a step reads the weights from DRAM once. Every row's accumulation runs in exactly the order
// of the M = 1 kernel above (same lane / chunk sequence, same butterfly, same epilogue), so a
// member's bits equal its solo step. x rows take M * K * 2 bytes of shared memory.
template <bool kSwiglu>
__global__ void __launch_bounds__(kThreads) gemv_rows_kernel(GemmBf16Params p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ float row_sum[kGemvMaxRows][kWarps];
    bf16* xs = reinterpret_cast<bf16*>(smem_raw);
    const int M = p.M;
    const int vecs = p.K / kVec;
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    constexpr int kHalf = kWarps / 2;
    const int F = p.N / 2;
    const int j = blockIdx.x * kHalf + warp % kHalf;
    const int n = kSwiglu ? (warp < kHalf ? j : F + j) : blockIdx.x * kWarps + warp;
    const bool valid = kSwiglu ? j < F : n < p.N;
    const Bf16x8* w = reinterpret_cast<const Bf16x8*>(p.w + static_cast<int64_t>(valid ? n : 0) * p.K);
    const bool first_group = valid && lane + (kUnroll - 1) * kWarp < vecs;
    Bf16x8 wv0[kUnroll];
    if (first_group) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv0[u] = load_w(w + lane + u * kWarp);
    }
    pdl_wait();
    pdl_launch_dependents();
    for (int r = 0; r < M; ++r) {
        const Bf16x8* src = reinterpret_cast<const Bf16x8*>(p.x + r * p.ldx);
        for (int i = threadIdx.x; i < vecs; i += kThreads) reinterpret_cast<Bf16x8*>(xs + static_cast<int64_t>(r) * p.K)[i] = src[i];
    }
    __syncthreads();
    float acc[kGemvMaxRows];
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r) acc[r] = 0.0f;
    auto dot_rows = [&](const Bf16x8& wv, int at) {
#pragma unroll
        for (int r = 0; r < kGemvMaxRows; ++r)
            if (r < M) dot8(acc[r], wv, reinterpret_cast<const Bf16x8*>(xs + static_cast<int64_t>(r) * p.K)[at]);
    };
    int i = lane;
    if (first_group) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) dot_rows(wv0[u], i + u * kWarp);
        i += kUnroll * kWarp;
    }
    if (valid) {
        for (; i + (kUnroll - 1) * kWarp < vecs; i += kUnroll * kWarp) {
            Bf16x8 wv[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) wv[u] = load_w(w + i + u * kWarp);
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) dot_rows(wv[u], i + u * kWarp);
        }
        for (; i < vecs; i += kWarp) dot_rows(w[i], i);
    }
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r)
        if (r < M) acc[r] = warp_sum(acc[r]);
    if constexpr (kSwiglu) {
        if (lane == 0)
            for (int r = 0; r < M; ++r) row_sum[r][warp] = acc[r];
        __syncthreads();
        if (threadIdx.x >= kHalf) return;
        const int jj = blockIdx.x * kHalf + threadIdx.x;
        if (jj >= F) return;
        for (int r = 0; r < M; ++r)
            static_cast<bf16*>(p.y)[r * p.ldy + jj] = swiglu_from_sums(row_sum[r][threadIdx.x], row_sum[r][kHalf + threadIdx.x]);
    } else {
        if (lane != 0 || !valid) return;
        for (int r = 0; r < M; ++r) store_gemv_out(p, static_cast<int64_t>(r) * p.ldy + n, acc[r]);
    }
}

template <bool kSwiglu>
cudaError_t launch_rows(const GemmBf16Params& p, size_t smem, cudaStream_t stream) {
    const cudaError_t e = cudaFuncSetAttribute(gemv_rows_kernel<kSwiglu>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    const dim3 grid(p.swiglu ? ceil_div(p.N / 2, kWarps / 2) : ceil_div(p.N, kWarps));
    return launch_kernel(gemv_rows_kernel<kSwiglu>, grid, dim3(kThreads), smem, stream, p.pdl != 0, p);
}

// x rows of the multi-row kernel at most this many bytes of shared memory (beyond it: one block
// per row and weight group, the weights then come from L2 for all but the first row).
constexpr size_t kRowsSmemMax = 160u << 10;
}  // namespace

// The tensor-core GEMV (lm_gemv_tc.cu) serves every shape it supports, one row or a batched
// step's M rows alike, so a member's bits equal its solo step. FROST_GEMV=simt keeps these SIMT
// kernels (for A/B measurement; read once per process).
bool use_tc_gemv() {
    static const bool tc = [] {
        const char* v = std::getenv("FROST_GEMV");
        return !(v && std::strcmp(v, "simt") == 0);
    }();
    return tc;
}

cudaError_t gemv_launch(const GemmBf16Params& p, cudaStream_t stream) {
    if (!p.x || !p.w || !p.y || p.M < 1 || p.M > kGemvMaxRows || p.N <= 0 || p.K <= 0 || p.K % kVec != 0 || p.K > kMaxK ||
        reinterpret_cast<uintptr_t>(p.x) % 16 != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0)
        return cudaErrorInvalidValue;
    if (p.swiglu && (p.N % 2 != 0 || p.out_f32 || p.accumulate)) return cudaErrorInvalidValue;
    if (p.M > 1 && (p.ldx % kVec != 0 || p.ldx < p.K || p.ldy < (p.swiglu ? p.N / 2 : p.N))) return cudaErrorInvalidValue;
    if (use_tc_gemv() && gemv_tc_supports(p)) return gemv_tc_launch(p, stream);
    const size_t smem = static_cast<size_t>(p.K) * sizeof(bf16);
    const bool pdl = p.pdl != 0;
    const dim3 grid((p.swiglu ? ceil_div(p.N / 2, kWarps / 2) : ceil_div(p.N, kWarps)) * p.M);
    cudaError_t err;
    const bool multi = p.M > 1;
    if (multi && static_cast<size_t>(p.M) * smem <= kRowsSmemMax) {
        const size_t rows_smem = static_cast<size_t>(p.M) * smem;
        err = p.swiglu ? launch_rows<true>(p, rows_smem, stream) : launch_rows<false>(p, rows_smem, stream);
        if (err != cudaSuccess) return err;
        return cudaGetLastError();
    }
    switch ((multi ? 2 : 0) + (p.swiglu ? 1 : 0)) {
        case 0: err = launch_kernel(gemv_kernel<false, false>, grid, dim3(kThreads), smem, stream, pdl, p); break;
        case 1: err = launch_kernel(gemv_kernel<true, false>, grid, dim3(kThreads), smem, stream, pdl, p); break;
        case 2: err = launch_kernel(gemv_kernel<false, true>, grid, dim3(kThreads), smem, stream, pdl, p); break;
        default: err = launch_kernel(gemv_kernel<true, true>, grid, dim3(kThreads), smem, stream, pdl, p); break;
    }
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

KernelCost gemm_cost(const GemmBf16Params& p) {
    const double out_bytes = p.out_f32 ? sizeof(float) : sizeof(bf16);
    const double outs = p.swiglu ? p.N / 2 : p.N;  // the fused SwiGLU writes one value per row pair
    const double bytes = static_cast<double>(p.N) * p.K * sizeof(bf16) + static_cast<double>(p.M) * p.K * sizeof(bf16) +
                         static_cast<double>(p.M) * outs * out_bytes * (p.accumulate ? 2.0 : 1.0);
    return {bytes, 2.0 * p.M * static_cast<double>(p.N) * p.K};
}

}  // namespace frost::kernels
