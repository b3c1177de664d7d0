// Warpgroup MMA wrappers for the Hopper kernels (attention, the MoE prefill GEMMs, the GDN state
// pass, and through lm_gemm_fp8_wgmma.cuh the FP8 GEMM; PTX ISA "wgmma.mma_async", sm_90a): bf16 operands, fp32
// accumulators in registers. The fragment layout of d is that of
// mma.sync m16n8 per warp (warp w of the warpgroup holds rows 16w..16w+15), n8 tile i in
// d[4i..4i+3]: (row g, cols 8i+2t, +1), (row g+8, same cols), g = lane/4, t = lane%4.
#pragma once
#include <cstdint>

namespace frost::kernels::lm {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FROST_ATTN_WGMMA 1

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ inline void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins accumulator registers at this point of the program, so the compiler cannot move their
// reads or writes across a wgmma issue or wait (which it does not see as touching them).
template <int N>
__device__ inline void reg_fence(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Shared-memory matrix descriptor (PTX "Matrix Descriptor Format"): start address, leading and
// stride byte offsets in 16-byte units, 128-byte swizzle (mode 1 in bits 62-63). Tiles are
// 1024-byte aligned, so the base-offset field stays 0.
__device__ inline uint64_t smem_desc_sw128(uint32_t addr, uint32_t lead_bytes, uint32_t stride_bytes) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>((lead_bytes >> 4) & 0x3FFF) << 16 |
           static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | 1ull << 62;
}

// Inline PTX must name every accumulator register: FROST_WGMMA_D<n> is the operand list "%0, ..,
// %<n-1>" of an n-register fragment (built from the 16-register runs FROST_WGMMA_R<first>) and FROST_WGMMA_ACC<n>(d) binds d[0..n) to it, so each
// wrapper below states only its instruction, its operands after the fragment and their numbers.
#define FROST_WGMMA_ACC8(d) \
    "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]), "+f"((d)[4]), "+f"((d)[5]), "+f"((d)[6]), "+f"((d)[7])
#define FROST_WGMMA_ACC16(d) FROST_WGMMA_ACC8(d), FROST_WGMMA_ACC8((d) + 8)
#define FROST_WGMMA_ACC32(d) FROST_WGMMA_ACC16(d), FROST_WGMMA_ACC16((d) + 16)
#define FROST_WGMMA_ACC64(d) FROST_WGMMA_ACC32(d), FROST_WGMMA_ACC32((d) + 32)
#define FROST_WGMMA_ACC112(d) FROST_WGMMA_ACC64(d), FROST_WGMMA_ACC32((d) + 64), FROST_WGMMA_ACC16((d) + 96)
#define FROST_WGMMA_ACC128(d) FROST_WGMMA_ACC64(d), FROST_WGMMA_ACC64((d) + 64)

#define FROST_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define FROST_WGMMA_R16 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FROST_WGMMA_R32 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define FROST_WGMMA_R48 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FROST_WGMMA_R64 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define FROST_WGMMA_R80 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FROST_WGMMA_R96 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define FROST_WGMMA_R112 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define FROST_WGMMA_D32 FROST_WGMMA_R0 ", " FROST_WGMMA_R16
#define FROST_WGMMA_D64 FROST_WGMMA_D32 ", " FROST_WGMMA_R32 ", " FROST_WGMMA_R48
#define FROST_WGMMA_D112 FROST_WGMMA_D64 ", " FROST_WGMMA_R64 ", " FROST_WGMMA_R80 ", " FROST_WGMMA_R96
#define FROST_WGMMA_D128 FROST_WGMMA_D64 ", " FROST_WGMMA_R64 ", " FROST_WGMMA_R80 ", " FROST_WGMMA_R96 ", " FROST_WGMMA_R112

// d[64x64] (+)= A[64x16] * B[16x64], both K-major in shared memory; accumulate = 0 overwrites d.
__device__ inline void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" FROST_WGMMA_D32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : FROST_WGMMA_ACC32(d)
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// d[64x128] += A[64x16] · B[128x16]^T, both K-major in shared memory (128-byte swizzle).
__device__ inline void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" FROST_WGMMA_D64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : FROST_WGMMA_ACC64(d)
                 : "l"(desc_a), "l"(desc_b));
}

// d[64x224] += A[64x16] · B[224x16]^T, both K-major in shared memory (128-byte swizzle): the
// gate|up + SwiGLU GEMM's 112 + 112-row tile (lm_gemm_swiglu.cu).
__device__ inline void wgmma_m64n224k16_ss(float (&d)[112], uint64_t desc_a, uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n224k16.f32.bf16.bf16 {" FROST_WGMMA_D112 "}, %112, %113, p, 1, 1, 0, 0;\n}\n"
                 : FROST_WGMMA_ACC112(d)
                 : "l"(desc_a), "l"(desc_b));
}

// d[64x256] += A[64x16] · B[256x16]^T, both K-major in shared memory (128-byte swizzle).
__device__ inline void wgmma_m64n256k16_ss(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" FROST_WGMMA_D128 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : FROST_WGMMA_ACC128(d)
                 : "l"(desc_a), "l"(desc_b));
}

// d[64x256] += A[64x16] * B[16x256]: A from registers (the m16n8k16 A fragment per warp), B
// N-major (transposed: row-major [k][n]) in shared memory.
__device__ inline void wgmma_m64n256k16_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" FROST_WGMMA_D128 "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
                 : FROST_WGMMA_ACC128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// One 64-wide k step of a warpgroup's tile from a ring stage (128-byte swizzled, K-major A rows
// at a0 and B rows at b0, 128 bytes a row): four k16 `mma` (a wrapper above, acc += A · Bᵀ), then
// waits for them, so the stage may go back to its producer. Waiting at every step measured faster
// than keeping a step in flight and releasing stages a step later (the gate|up + SwiGLU GEMM, H200,
// 2026-12-04: 0.8B shape 1024 / 4096 rows 28.1 / 92.8 against 29.0 / 94.3 us; the MoE grouped GEMM,
// 4096 rows 0.637 against 0.660 ms).
template <int N, class Mma>
__device__ inline void wgmma_k64_step(float (&acc)[N], uint32_t a0, uint32_t b0, Mma mma) {
    reg_fence(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mma(acc, smem_desc_sw128(a0 + kk * 32, 16, 1024), smem_desc_sw128(b0 + kk * 32, 16, 1024));
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(acc);
}

// d[64 x 32] (wgmma_n32) or d[64 x 16] (wgmma_n16) (+)= A[64 x 16] · B[16 x N], both from shared
// memory; accumulate = 0 overwrites d. kTA = 1: A stored M-major (the PTX "transpose" immediate);
// B K-major.
template <int kTA>
__device__ inline void wgmma_n32(float (&d)[16], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {" FROST_WGMMA_R0 "}, %16, %17, p, 1, 1, %19, 0;\n}\n"
                 : FROST_WGMMA_ACC16(d)
                 : "l"(da), "l"(db), "r"(accumulate), "n"(kTA));
}
template <int kTA>
__device__ inline void wgmma_n16(float (&d)[8], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, "
                 "%11, 0;\n}\n"
                 : FROST_WGMMA_ACC8(d)
                 : "l"(da), "l"(db), "r"(accumulate), "n"(kTA));
}
// cp.async, stmatrix and plain stores write shared memory through the generic proxy; wgmma reads it
// through the async proxy. This fence, after those writes are visible to the thread (its own, or
// others' after a barrier or an mbarrier wait), orders them before its later wgmma.
__device__ inline void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Four 8x8 bf16 matrices to shared memory, transposed: lanes 8i..8i+7 give the addresses of the
// stored rows of matrix i; a thread's register i holds (row g, columns 2t, 2t+1) of matrix i,
// which land in stored rows 2t, 2t+1 at column g.
__device__ inline void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}
#endif

}  // namespace frost::kernels::lm
