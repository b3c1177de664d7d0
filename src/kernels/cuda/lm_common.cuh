// Device helpers shared by the hybrid-LM kernels: row counts read from device memory, 16-byte
// bf16 vector loads/stores, fixed-order warp and block reductions (deterministic by construction).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels::lm {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kVec = 8;  // bf16 per 16-byte access

// Rows of this launch: *n_rows clamped to [0, max_rows], or max_rows when n_rows is null.
__device__ inline int launch_rows(const int32_t* n_rows, int max_rows) {
    if (!n_rows) return max_rows;
    const int n = *n_rows;
    return n < 0 ? 0 : (n > max_rows ? max_rows : n);
}

// Batched decode: member r's state buffer at the table column (+ extra), null for padding.
__device__ inline void* batch_state(const BatchRef& b, int r, int extra) {
    const int s = b.slots[r];
    if (s < 0 || s >= b.sessions) return nullptr;
    return b.table[static_cast<int64_t>(s) * b.stride + b.column + extra];
}

__device__ inline int cursor_rows(const StepCursor* c, int max_rows) {
    const int n = c->n_tokens;
    return n < 0 ? 0 : (n > max_rows ? max_rows : n);
}

// Eight bf16 as one uint4, so that a copy, load or store of it is one 16-byte access. (A struct of
// four __nv_bfloat162, its form until 2026-11-29, compiled to four 4-byte accesses: every row
// kernel's "16-byte" loads were ld.global.v2.u16 and its stores st.global.u32 in the PTX.) The
// address must be 16-byte aligned, as it always had to be; the old form happened to tolerate 4.
struct alignas(16) Bf16x8 {
    uint4 u;
    // Elements 2i and 2i + 1 as floats (exact: a bf16 is the high half of its fp32).
    __device__ float2 f2(int i) const {
        const uint32_t w = i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
        return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
    }
};

// Two floats rounded to bf16 (round to nearest even, as __floats2bfloat162_rn), low half first.
__device__ inline uint32_t pack_bf162(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t w;
    memcpy(&w, &h, sizeof(w));
    return w;
}

__device__ inline void load8(const bf16* p, float (&v)[kVec]) {
    const Bf16x8 pack = *reinterpret_cast<const Bf16x8*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = pack.f2(i);
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
    }
}

__device__ inline void store8(bf16* p, const float (&v)[kVec]) {
    Bf16x8 pack;
    pack.u = make_uint4(pack_bf162(v[0], v[1]), pack_bf162(v[2], v[3]), pack_bf162(v[4], v[5]), pack_bf162(v[6], v[7]));
    *reinterpret_cast<Bf16x8*>(p) = pack;
}

// Eight floats from p (eight scalar loads unless `vec`: p 16-byte aligned, then two float4).
__device__ inline void load8f(const float* p, bool vec, float (&v)[kVec]) {
    if (vec) {
        const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        return;
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = p[e];
}

__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(kFullMask, v, off);
    return v;
}

__device__ inline float warp_max(float v) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024): warp butterflies, then warp 0 sums
// the warp partials in index order. `scratch` holds >= 32 floats. Every thread gets the result.
__device__ inline float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    const int warps = blockDim.x / kWarp;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < warps; ++i) total += scratch[i];
    return total;
}

// SiLU from the hardware's exp2 and reciprocal approximations (MUFU.EX2, MUFU.RCP): five
// instructions where expf and an IEEE division compile to ~18 with a slow-path branch. Its
// relative error (ex2.approx's 2^-22 plus the rounding of -x * log2 e, ~6e-7 at |x| = 10) sits far
// below the bf16 rounding every caller applies to what it returns; x < -87 gives -0 (the exact
// value is below 1e-36). One definition for every CUDA kernel, so decode and prefill, fused and
// separate launches keep computing the same bits. Measured against the exact form (H200,
// 2026-11-29, old and new binaries alternating, `frost bench engine --reps 2`, ms): 0.8B 1k / 4k /
// 16k 3.86 / 11.99 / 57.03 -> 3.72 / 11.59 / 55.20; 9B FP8 W8A8 4k / 16k 67.29 / 312.80 -> 66.33 /
// 308.47; 9B bf16 16k / 32k 413.54 / 911.93 -> 407.59 / 901.95; 35B-A3B (20 layers) 4k 34.22 ->
// 33.54 (conv1d, SwiGLU and the gated RMSNorm issue one per element).
__device__ inline float silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }
__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

inline int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// GDN gates of one (row, head) (family GdnGateParams): β = sigmoid(b), g = -exp(A_log) *
// softplus(a + dt_bias). One definition for the gate kernel and the decode recurrence that fuses
// it, so both produce the same bits.
constexpr float kSoftplusLinear = 20.0f;  // torch softplus returns x above this
__device__ inline void gdn_gate_values(float b, float a_raw, float A_log, float dt_bias, float& beta, float& g) {
    const float a = a_raw + dt_bias;
    const float softplus = a > kSoftplusLinear ? a : log1pf(expf(a));
    beta = sigmoid(b);
    g = -expf(A_log) * softplus;
}

// β and g of launch row `row`, value head h, for a gated-delta-rule kernel: the gate kernel's
// output (p.beta, p.g), or with p.gate_b set the raw projections through gdn_gate_values (the
// same values), so the rule needs no gate launch (the decode recurrence, the chunked prep).
__device__ inline void gdn_row_gates(const GdnBf16Params& p, int64_t row, int h, float& beta, float& g) {
    if (p.gate_b) {
        const int64_t i = row * p.gate_row_stride + h;
        gdn_gate_values(__bfloat162float(p.gate_b[i]), __bfloat162float(p.gate_a[i]), p.A_log[h], p.dt_bias[h], beta, g);
    } else {
        beta = p.beta[row * p.Hv + h];
        g = p.g[row * p.Hv + h];
    }
}

// Programmatic dependent launch (Hopper). A kernel launched with the programmatic-serialisation
// attribute may start while its predecessor still runs; pdl_wait() returns once the predecessor
// has completed and its writes are visible, so nothing a predecessor writes may be touched (read
// or written) before it. Every thread calls it before any early return, so the kernel never
// completes before its predecessor (later kernels rely on that order). Without the attribute
// it returns at once.
__device__ inline void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel start early when it was launched with the attribute (its own pdl_wait
// still covers all of this kernel). Called after pdl_wait() so at most one kernel runs ahead,
// except where pdl_wait_and_trigger says otherwise.
__device__ inline void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream
// serialisation when pdl is set (recorded as a programmatic edge by stream capture).
template <class... KArgs, class... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool pdl, Args&&... args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args&&>(args)...);
}

// Whether the current device runs this build's sm_90a machine code (Hopper: wgmma, TMA; the
// build carries no PTX fallback for them). A failed query answers false and leaves no sticky error.
inline bool device_runs_sm90a() {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return major == 9 && minor == 0;
}

// Whether a pointer meets the 16-byte alignment of the vector loads, TMA and cp.async (host side,
// in the launchers' checks).
inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Streaming multiprocessors of the current device, asked once per process (a process drives one
// GPU model); 0 when the runtime cannot say (its error is cleared).
inline int device_sm_count() {
    static const int n = [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            cudaGetLastError();
            v = 0;
        }
        return v;
    }();
    return n;
}

// Shared memory per SM in bytes (the most the SM's carve-out can give its blocks together), asked
// once per process like device_sm_count; 0 when the runtime cannot say (its error is cleared).
inline int device_smem_per_sm() {
    static const int n = [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess) {
            cudaGetLastError();
            v = 0;
        }
        return v;
    }();
    return n;
}

// pdl_wait then pdl_launch_dependents, or (pdl == 2) the trigger first: the dependent then starts
// while this kernel still waits for its own predecessor, so two kernels can run ahead of a
// running one. Safe only where the dependent reads nothing but weights before its wait (a GEMV),
// since its wait still covers this kernel and, through it, everything before.
__device__ inline void pdl_wait_and_trigger(int pdl) {
    if (pdl == 2) pdl_launch_dependents();
    pdl_wait();
    if (pdl != 2) pdl_launch_dependents();
}

// Shared-memory address of a generic pointer, for PTX operands.
__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// 16-byte global -> shared copy that bypasses registers; src_bytes < 16 zero-fills the rest, 0
// writes zeros without reading (PTX ISA cp.async).
__device__ inline void cp_async16(void* dst, const void* src, int src_bytes = 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- tensor-core fragments (PTX mma.sync / ldmatrix), shared by every mma.sync kernel -------

// d += a · b for one m16n8k16 bf16 fragment, fp32 accumulators (row-major A, column-major B).
__device__ inline void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// The same tile shape over k = 32 e4m3 values (sm_89+): a0 / a2 hold rows gid's k slots 4t..4t+3
// / 4t+16..4t+19 (four e4m3 each), a1 / a3 those of row gid + 8; b0 / b1 column gid at the same
// slots. The products are exact; the sum is fp32 (Hopper's FP8 mma adds with fewer mantissa bits:
// callers keep chains short and sum the chains in fp32).
__device__ inline void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap();  // the portable compute_80 PTX has no FP8 mma; launchers run it on sm_90 only
#endif
}
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_bf16(d, a[0], a[1], a[2], a[3], b0, b1);
}

// Four 8x8 bf16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
// The same, transposed: lane l gets (rows 2(l%4)..+1, column l/4) of each matrix (B fragments).
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// Two bf16 values as one 32-bit fragment register (round to nearest even), and a 32-bit load of
// two adjacent bf16.
__device__ inline uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ inline uint32_t ld32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

}  // namespace frost::kernels::lm
