// Memory-bound elementwise stages of the hybrid LM: embedding gather, SwiGLU, the GDN gates
// (β and log-decay g in fp32), the KV-cache append, the cursor bookkeeping nodes and a prefill's
// tail row.
// 16-byte accesses where rows are 8-aligned; rows come from device memory.
#include <algorithm>

#include "kernels/cuda/lm_act_quant.cuh"
#include "kernels/cuda/lm_common.cuh"
#include "kernels/cuda/lm_kernels.h"

namespace frost::kernels {
namespace {
using namespace lm;

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;  // rows of a row-tiled launch (gridDim.y)

// One thread per 8-element vector of a [rows, dim] output.
__global__ void embed_kernel(EmbedBf16Params p) {
    pdl_wait();  // programmatic launch (decode graphs): ids come from the predecessor
    pdl_launch_dependents();
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int vecs = p.dim / kVec;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<int64_t>(rows) * vecs) return;
    const int row = static_cast<int>(i / vecs);
    const int vi = static_cast<int>(i % vecs);
    const int id = p.ids[row];
    Bf16x8* dst = reinterpret_cast<Bf16x8*>(p.y + static_cast<int64_t>(row) * p.dim) + vi;
    if (id < 0 || id >= p.vocab) {  // invalid id: a defined (zero) row rather than a wild read
        *dst = Bf16x8{};
        return;
    }
    *dst = reinterpret_cast<const Bf16x8*>(p.table + static_cast<int64_t>(id) * p.dim)[vi];
}

// One thread per 8-element vector. Four vectors per thread, a grid stride apart, every load
// issued first, was slower (H100 2026-11-25, 9B 4096 x 12288 chunk, 32 layers: 3634 -> 4463 us
// bf16, 4497 -> 5290 us with the FP8 twin, whose extra cost is arithmetic: the group max and a
// division per element).
// Index: int32_t where rows * F / 8 fits (the launcher's choice), as a 64-bit division costs
// ~70 instructions per thread against ~20. With 16-byte accesses (lm_common.cuh Bf16x8) and this,
// the 9B's 2048-row chunk (32 layers) went 1591 -> 1531 us, 3.16 TB/s (H200, bench_ops, 2026-11-29).
template <typename Index>
__global__ void swiglu_kernel(SwigluBf16Params p) {
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const Index vecs = p.F / kVec;
    const Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
    const bool in = i < static_cast<Index>(rows) * vecs;
    // With the FP8 twin the whole warp stays for the group max (a shuffle); without it, leave.
    if (!in && !p.yq) return;
    const int64_t row = i / vecs;
    const int vi = static_cast<int>(i % vecs);
    float out[kVec] = {};
    if (in) {
        const bf16* x = p.x + row * 2 * p.F;
        float gate[kVec], up[kVec];
        load8(x + vi * kVec, gate);
        load8(x + p.F + vi * kVec, up);
#pragma unroll
        for (int e = 0; e < kVec; ++e) out[e] = silu(gate[e]) * up[e];
        if (!p.yq_only) store8(p.y + row * p.F + vi * kVec, out);  // yq_only: the twin is the only reader's input
    }
    if (p.yq) {  // F a multiple of 128: 16 consecutive threads hold one group of one row
#pragma unroll
        for (int e = 0; e < kVec; ++e) out[e] = bf16_rounded(out[e]);
        act_quant_group<kActGroup / kVec, kVec>(out, in, p.yq + row * p.F + vi * kVec,
                                                p.yq_scale + (vi * kVec / kActGroup) * p.yq_scale_ld + row);
    }
}

// SwiGLU with the FP8 twin (W8A8 prefill; F a multiple of 128), launched only with a twin: the
// row-tiled form. blockIdx.y is the row, so no thread divides its index by F / 8, and each thread
// owns kPer consecutive elements
// (kPer / 8 vectors of gate and of up, every load issued first), so a twin group of 128 is 128 /
// kPer consecutive lanes: fewer shuffle levels and one 16-byte store of e4m3 bytes per thread.
// Same arithmetic per element as swiglu_kernel and the same group max (exact in any order), so
// the same bits (CudaActTwin checks them against the quantizer). Measured (H200, 2026-11-30,
// `bench_ops --rows 4096 --pos 0 --fp8-prefill w8a8` on the 9B FP8 synth, us over the 32 layers,
// two runs): the flat kernel 2804 / 2813 (2.9 TB/s), 8 elements a thread 2377 / 2377, 16: 2082 /
// 2068 (3.9 TB/s). Without a twin the flat kernel stays: the 16-element form measured 599 / 598
// against 592 / 593 us on the 0.8B's 4096-row bf16 chunk (24 layers).
template <int kPer>
__global__ void swiglu_twin_rows_kernel(SwigluBf16Params p) {
    constexpr int kV = kPer / kVec;
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int row = blockIdx.y;
    if (row >= rows) return;
    const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * kPer;
    // F is a multiple of 128, so a group's lanes are all in or all out; every lane stays for the
    // group max (a shuffle).
    const bool in = c0 < p.F;
    float out[kV][kVec] = {};
    if (in) {
        const bf16* x = p.x + static_cast<int64_t>(row) * 2 * p.F + c0;
        float gate[kV][kVec], up[kV][kVec];
#pragma unroll
        for (int v = 0; v < kV; ++v) {
            load8(x + v * kVec, gate[v]);
            load8(x + p.F + v * kVec, up[v]);
        }
#pragma unroll
        for (int v = 0; v < kV; ++v)
#pragma unroll
            for (int e = 0; e < kVec; ++e) out[v][e] = silu(gate[v][e]) * up[v][e];
        // Every product first, then the stores (the measured order: storing each vector as it was
        // done measured 2188 / 2194 us in a later call, not compared in one call).
        if (!p.yq_only) {
#pragma unroll
            for (int v = 0; v < kV; ++v) store8(p.y + static_cast<int64_t>(row) * p.F + c0 + v * kVec, out[v]);
        }
    }
    float q[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) q[e] = bf16_rounded(out[e / kVec][e % kVec]);
    act_quant_group<kActGroup / kPer, kPer>(q, in, p.yq + static_cast<int64_t>(row) * p.F + c0,
                                            p.yq_scale + (c0 / kActGroup) * p.yq_scale_ld + row);
}

__global__ void gdn_gate_kernel(GdnGateBf16Params p) {
    const int rows = launch_rows(p.n_rows, p.max_rows);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * p.heads) return;
    const int row = i / p.heads;
    const int h = i % p.heads;
    float beta, g;
    gdn_gate_values(__bfloat162float(p.b[row * p.in_row_stride + h]), __bfloat162float(p.a[row * p.in_row_stride + h]),
                    p.A_log[h], p.dt_bias[h], beta, g);
    p.beta[i] = beta;
    p.g[i] = g;
}

__global__ void kv_append_kernel(KvAppendBf16Params p) {
    pdl_wait();  // programmatic launch (decode graphs): k / v rows and the cursor come from predecessors
    pdl_launch_dependents();
    const bool batched = p.batch.slots != nullptr;
    const int rows = batched ? p.max_rows : cursor_rows(p.cursor, p.max_rows);
    const int vecs = p.kv_dim / kVec;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<int64_t>(rows) * vecs) return;
    const int row = static_cast<int>(i / vecs);
    const int vi = static_cast<int>(i % vecs);
    if (batched) {  // row = member: its caches and its own position
        p.k_cache = static_cast<bf16*>(batch_state(p.batch, row, 0));
        p.v_cache = static_cast<bf16*>(batch_state(p.batch, row, 1));
        if (!p.k_cache || !p.v_cache) return;  // padding row
    }
    const int pos = batched ? p.batch.cursors[row].pos : p.cursor->pos + row;
    if (pos < 0 || pos >= p.max_seq) return;  // planner guarantees room; never write out of bounds
    const int64_t src = row * p.src_row_stride + vi * kVec;
    const int64_t dst = static_cast<int64_t>(pos) * p.kv_dim + vi * kVec;
    *reinterpret_cast<Bf16x8*>(p.k_cache + dst) = *reinterpret_cast<const Bf16x8*>(p.k + src);
    *reinterpret_cast<Bf16x8*>(p.v_cache + dst) = *reinterpret_cast<const Bf16x8*>(p.v + src);
}

__global__ void cursor_kernel(CursorParams p) {
    StepCursor* c = p.cursor;
    if (p.op == kCursorDecodeBegin) {
        p.ids[0] = c->last_token;
        c->n_tokens = 1;
    } else if (p.op == kCursorAdvance) {
        c->pos += c->n_tokens;
        c->steps += 1;
    }
}

// One block per segment of a prefill's tail (TailRowParams): row n - 1 to row 0, 16 bytes a
// thread where the row and its stride allow (every bf16 view of the forward), else 2; block 0's
// thread 0 also writes the tail cursor. n == 1 moves nothing (row 0 is the last row).
__global__ void tail_row_kernel(TailRowParams p) {
    const int n = max(1, launch_rows(&p.cursor->n_tokens, p.max_rows));
    const int i = blockIdx.x;
    if (n > 1 && i < p.segments) {
        char* row0 = static_cast<char*>(p.base[i]);
        const char* last = row0 + static_cast<int64_t>(n - 1) * p.ld_bytes[i];
        const int64_t bytes = p.row_bytes[i];
        if (reinterpret_cast<uintptr_t>(row0) % 16 == 0 && bytes % 16 == 0 && p.ld_bytes[i] % 16 == 0) {
            for (int64_t o = 16 * static_cast<int64_t>(threadIdx.x); o < bytes; o += 16 * blockDim.x)
                *reinterpret_cast<uint4*>(row0 + o) = *reinterpret_cast<const uint4*>(last + o);
        } else {
            for (int64_t o = 2 * static_cast<int64_t>(threadIdx.x); o < bytes; o += 2 * blockDim.x)
                *reinterpret_cast<uint16_t*>(row0 + o) = *reinterpret_cast<const uint16_t*>(last + o);
        }
    }
    if (i == 0 && threadIdx.x == 0) {
        StepCursor t = *p.cursor;
        t.pos += n - 1;
        t.n_tokens = 1;
        *p.tail = t;
    }
}

// One thread per row of a batched decode step (BatchCursorParams).
__global__ void batch_cursor_kernel(BatchCursorParams p) {
    const int r = threadIdx.x;
    if (r >= p.batch.B) return;
    const int s = p.batch.slots[r];
    const bool member = s >= 0 && s < p.batch.sessions;
    StepCursor* own = member ? static_cast<StepCursor*>(p.batch.table[static_cast<int64_t>(s) * p.batch.stride]) : nullptr;
    StepCursor* c = &p.batch.cursors[r];
    if (p.op == kCursorDecodeBegin) {
        if (member) {
            *c = *own;
        } else {
            *c = StepCursor{};  // padding: greedy at position 0, never written back
        }
        p.ids[r] = c->last_token;
        c->n_tokens = 1;
    } else if (p.op == kCursorAdvance) {
        c->pos += c->n_tokens;
        c->steps += 1;
        if (member) *own = *c;
    }
}


}  // namespace

cudaError_t embed_launch(const EmbedBf16Params& p, cudaStream_t stream) {
    if (!p.table || !p.ids || !p.y || p.dim <= 0 || p.dim % kVec != 0 || p.max_rows <= 0 ||
        !lm::aligned16(p.table) || !lm::aligned16(p.y))
        return cudaErrorInvalidValue;
    const int64_t n = static_cast<int64_t>(p.max_rows) * (p.dim / kVec);
    const cudaError_t err = launch_kernel(embed_kernel, dim3(ceil_div(n, kThreads)), dim3(kThreads), 0, stream, p.pdl != 0, p);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

KernelCost embed_cost(const EmbedBf16Params& p, int rows) {
    return {static_cast<double>(rows) * p.dim * sizeof(bf16) * 2.0 + rows * sizeof(int32_t), 0.0};
}

cudaError_t swiglu_launch(const SwigluBf16Params& p, cudaStream_t stream) {
    if (!p.x || !p.y || p.F <= 0 || p.F % kVec != 0 || p.max_rows <= 0 || !lm::aligned16(p.x) ||
        !lm::aligned16(p.y))
        return cudaErrorInvalidValue;
    if (p.yq && !act_twin_ok(p.yq, p.yq_scale, p.yq_scale_ld, p.F, p.max_rows)) return cudaErrorInvalidValue;
    if (p.yq_only && !p.yq) return cudaErrorInvalidValue;
    if (p.yq && p.max_rows <= kMaxGridY) {  // act_twin_ok: F is a multiple of 128
        constexpr int kPer = 16, kRowThreads = 128;
        swiglu_twin_rows_kernel<kPer><<<dim3(ceil_div(p.F, kRowThreads * kPer), p.max_rows), kRowThreads, 0, stream>>>(p);
        return cudaGetLastError();
    }
    const int64_t n = static_cast<int64_t>(p.max_rows) * (p.F / kVec);
    if (n + kThreads <= INT32_MAX)
        swiglu_kernel<int32_t><<<ceil_div(n, kThreads), kThreads, 0, stream>>>(p);
    else
        swiglu_kernel<int64_t><<<ceil_div(n, kThreads), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
}

KernelCost swiglu_cost(const SwigluBf16Params& p, int rows) {
    const double elems = static_cast<double>(rows) * p.F;
    const double twin = p.yq ? act_twin_bytes(elems) : 0.0;
    return {elems * sizeof(bf16) * (p.yq_only ? 2.0 : 3.0) + twin, elems * 6.0};
}

cudaError_t gdn_gate_launch(const GdnGateBf16Params& p, cudaStream_t stream) {
    if (!p.b || !p.a || !p.A_log || !p.dt_bias || !p.beta || !p.g || p.heads <= 0 || p.max_rows <= 0)
        return cudaErrorInvalidValue;
    gdn_gate_kernel<<<ceil_div(static_cast<int64_t>(p.max_rows) * p.heads, kThreads), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
}

KernelCost gdn_gate_cost(const GdnGateBf16Params& p, int rows) {
    const double elems = static_cast<double>(rows) * p.heads;
    return {elems * (2 * sizeof(bf16) + 2 * sizeof(float)), elems * 12.0};
}

cudaError_t kv_append_launch(const KvAppendBf16Params& p, cudaStream_t stream) {
    if (!p.k || !p.v || !p.k_cache || !p.v_cache || !p.cursor || p.kv_dim <= 0 ||
        p.kv_dim % kVec != 0 || p.src_row_stride % kVec != 0 || p.max_rows <= 0 ||
        !lm::aligned16(p.k) || !lm::aligned16(p.v) || !lm::aligned16(p.k_cache) || !lm::aligned16(p.v_cache))
        return cudaErrorInvalidValue;
    if (p.batch.slots && (!p.batch.table || !p.batch.cursors || p.batch.B != p.max_rows)) return cudaErrorInvalidValue;
    const int64_t n = static_cast<int64_t>(p.max_rows) * (p.kv_dim / kVec);
    const cudaError_t err =
        launch_kernel(kv_append_kernel, dim3(ceil_div(n, kThreads)), dim3(kThreads), 0, stream, p.pdl != 0, p);
    if (err != cudaSuccess) return err;
    return cudaGetLastError();
}

KernelCost kv_append_cost(const KvAppendBf16Params& p, int rows) {
    return {static_cast<double>(rows) * p.kv_dim * sizeof(bf16) * 4.0, 0.0};
}

cudaError_t batch_cursor_launch(const BatchCursorParams& p, cudaStream_t stream) {
    if (!p.batch.table || !p.batch.slots || !p.batch.cursors || p.batch.B <= 0 || p.batch.B > 1024 ||
        p.batch.stride <= 0 || (p.op == kCursorDecodeBegin && !p.ids))
        return cudaErrorInvalidValue;
    batch_cursor_kernel<<<1, p.batch.B, 0, stream>>>(p);
    return cudaGetLastError();
}

cudaError_t cursor_launch(const CursorParams& p, cudaStream_t stream) {
    if (!p.cursor || (p.op == kCursorDecodeBegin && !p.ids)) return cudaErrorInvalidValue;
    cursor_kernel<<<1, 1, 0, stream>>>(p);
    return cudaGetLastError();
}

cudaError_t tail_row_launch(const TailRowParams& p, cudaStream_t stream) {
    if (!p.cursor || !p.tail || p.max_rows <= 0 || p.segments < 0 || p.segments > kTailSegments)
        return cudaErrorInvalidValue;
    for (int i = 0; i < p.segments; ++i)
        if (!p.base[i] || p.row_bytes[i] <= 0 || p.row_bytes[i] % 2 != 0 || p.ld_bytes[i] < p.row_bytes[i] ||
            p.ld_bytes[i] % 2 != 0 || reinterpret_cast<uintptr_t>(p.base[i]) % 2 != 0)
            return cudaErrorInvalidValue;
    tail_row_kernel<<<std::max(1, p.segments), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
}

}  // namespace frost::kernels
