// The CUDA op table: thin wrappers that turn each op's tensor views into the bf16 params of the
// launchers in src/kernels/cuda (lm_kernels.h) and enqueue them on the stream's native CUDA
// stream. Activations / big weights / KV / conv state are bf16, recurrent state, beta / g, small
// weights and logits fp32: a view of another dtype is refused naming the op and the tensor.
// The backend object owns the per-engine cuBLASLt handle, its workspace and the plan cache (one
// plan per GEMM shape, created on first use, i.e. while the graphs are captured at load).
#include "ops/ops.h"

#include "exec/error.h"

#if FROST_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_gemm_swiglu.h"
#include "kernels/cuda/lm_gemv_quant.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda/lm_moe.h"
#include "util/env.h"
#endif

namespace frost::ops {

#if !FROST_WITH_CUDA

frost_status make_cuda_backend(frost_ctx*, frost_stream*, std::unique_ptr<Backend>*) {
    return fail(FROST_ERR_UNSUPPORTED, "ops: this build has no CUDA (configure with -DFROST_CUDA=ON)");
}

#else

namespace {

namespace K = kernels;
using K::bf16;

// M, N, K, ldx, ldy, out_f32, accumulate.
using GemmShapeKey = std::array<int64_t, 7>;
using Fp8ShapeKey = std::array<int64_t, 8>;  // GemmShapeKey's fields with w_block_n, + grid_rows

const OpTable& cuda_op_table();

// The buffers of a decode step over quantized experts (moe_quant_decode), for
// min(rows, kGemvMaxRows) rows: each routed entry's SwiGLU activation and down output, the shared
// expert's right after them (so a launch that folds the shared expert in as entries rows * k ..
// writes them in place).
struct MoeQuantScratch {
    bf16* act = nullptr;     // [rows * k, I]
    bf16* act_s = nullptr;   // [rows, Is], at act + rows * k * I
    float* routed = nullptr; // [rows * k, H]
    float* shared = nullptr; // [rows, H], at routed + rows * k * H
};

// MoeOp::work on CUDA, carved in this order (each piece 256-byte aligned): the shared expert's
// gate [rows], the decode GEMVs' activations, then the prefill grouping buffers sized for
// rows x (k + 1) entries (fixed capacity: a captured graph never reallocates), then the quantized
// decode's buffers (MoeQuantScratch). Returns the f32 count; with a base it also points p's
// scratch members (and *q's) into it.
size_t moe_carve(K::MoeBf16Params& p, float* base, MoeQuantScratch* q = nullptr) {
    size_t off = 0;
    auto take = [&](size_t bytes) {
        float* at = base ? base + off : nullptr;
        off += (bytes + 255) / 256 * 64;  // whole 256-byte units, in floats
        return at;
    };
    p.shared_w = take(sizeof(float) * size_t(p.max_rows));
    p.act = take(sizeof(float) * K::moe_act_floats(p));
    const K::MoePrefillScratch ps = K::moe_prefill_scratch(p);
    auto ints = [&](size_t n) { return reinterpret_cast<int32_t*>(take(sizeof(int32_t) * n)); };
    p.group_offsets = ints(ps.offsets_ints);
    p.chunk_base = ints(ps.chunk_ints);
    p.tile_table = ints(ps.tile_ints);
    p.entry_row = ints(ps.entry_row_ints);
    p.entry_pos = ints(ps.entry_pos_ints);
    p.ag = reinterpret_cast<bf16*>(take(sizeof(bf16) * ps.ag_elems));
    p.yg = reinterpret_cast<bf16*>(take(sizeof(bf16) * ps.yg_elems));
    // Prefill's router logits (moe: a dense GEMM over every row of the bucket).
    p.logits = p.max_rows > K::kGemvMaxRows ? take(sizeof(float) * size_t(p.max_rows) * size_t(p.E)) : nullptr;
    const size_t dr = size_t(std::min(p.max_rows, K::kGemvMaxRows)), H = size_t(p.H);
    MoeQuantScratch qs;
    const size_t routed_act = dr * size_t(p.k) * size_t(p.I);
    qs.act = reinterpret_cast<bf16*>(take(sizeof(bf16) * (routed_act + dr * size_t(p.Is))));
    qs.act_s = qs.act ? qs.act + routed_act : nullptr;
    qs.routed = take(sizeof(float) * dr * size_t(p.k + 1) * H);
    qs.shared = qs.routed ? qs.routed + dr * size_t(p.k) * H : nullptr;
    if (q) *q = qs;
    return off + 64;  // + one unit: the base itself may sit up to 255 bytes before an aligned address
}

class CudaBackend final : public Backend {
public:
    CudaBackend() : Backend(FROST_BACKEND_CUDA, &cuda_op_table()) {}
    ~CudaBackend() override {
        for (auto& [shape, plan] : plans_) K::gemm_plan_destroy(plan);
        for (auto& [shape, plan] : fp8_plans_) K::gemm_fp8_plan_destroy(plan);
        K::gemm_lt_destroy(lt_);
        if (workspace_) frost_buffer_free(workspace_);
        if (tile_) frost_buffer_free(tile_);
        if (moe_sync_) frost_buffer_free(moe_sync_);
    }
    frost_status init(frost_ctx* ctx) {
        FROST_TRY(frost_buffer_alloc(ctx, "ops.gemm_workspace", K::kGemmWorkspaceBytes, FROST_SPACE_DEVICE,
                                     &workspace_));
        // The one-launch MoE decode's grid-barrier counter (MoeBf16Params::sync): zero before any
        // launch, never in a scratch buffer that tests poison.
        FROST_TRY(frost_buffer_alloc(ctx, "ops.moe_sync", 256, FROST_SPACE_DEVICE, &moe_sync_));
        if (cudaMemset(frost_buffer_ptr(moe_sync_), 0, 256) != cudaSuccess)
            return fail(FROST_ERR_BACKEND, "cuda ops: zeroing the MoE decode counter failed");
        int lt_status = 0;
        const cudaError_t e = K::gemm_lt_create(frost_buffer_ptr(workspace_), K::kGemmWorkspaceBytes, &lt_, &lt_status);
        if (e != cudaSuccess)
            return fail(FROST_ERR_BACKEND, "cuda ops: cuBLASLt handle: %s (status %d)", cudaGetErrorString(e), lt_status);
        return FROST_OK;
    }
    DType act_dtype() const override { return DType::BF16; }
    size_t sample_work_floats(int vocab) const override { return K::sample_work_floats(vocab); }
    size_t sample_idx_ints(int) const override { return 0; }
    size_t gdn_work_floats(int Hv, int max_rows) const override {
        K::GdnBf16Params p{};
        p.Hv = Hv;
        p.max_rows = max_rows;
        return K::gdn_chunk_work_floats(p);
    }
    size_t attn_work_floats(int Hq, int max_seq, int max_rows) const override {
        K::AttentionBf16Params p{};
        p.Hq = Hq;
        p.max_seq = max_seq;
        p.max_rows = max_rows;  // prefill buckets 64..C_p may split their keys
        return std::max(K::attn_decode_work_floats(p), K::attn_prefill_work_floats(p));
    }
    size_t moe_work_floats(int H, int E, int k, int I, int Is, int max_rows) const override {
        K::MoeBf16Params p{};
        p.H = H; p.E = E; p.k = k; p.I = I; p.Is = Is; p.max_rows = max_rows;
        return moe_carve(p, nullptr);
    }
    size_t gemm_plans() const override { return plans_.size(); }
    frost_status set_chunk_invariant(bool on) override {
        if (on != chunk_invariant() && (!plans_.empty() || !fp8_plans_.empty()))
            return fail(FROST_ERR_INVALID_ARG, "cuda ops: chunk_invariant must be set before the first GEMM is planned");
        return Backend::set_chunk_invariant(on);
    }
    bool gemm_reads_twin(const GemmOp& p) override;  // below, beside the FP8 GEMM it mirrors
    bool gemm_fuses_swiglu(const GemmOp& p) override;  // below, beside gemm_bf16
    uint64_t owned_bytes() const override { return K::kGemmWorkspaceBytes + tile_elems_ * sizeof(bf16); }
    frost_status reserve_dequant_scratch(frost_ctx* ctx, size_t elems) override {
        if (elems <= tile_elems_) return FROST_OK;
        if (tile_) frost_buffer_free(tile_);
        tile_ = nullptr;
        tile_elems_ = 0;
        FROST_TRY(frost_buffer_alloc(ctx, "ops.dequant_tile", elems * sizeof(bf16), FROST_SPACE_DEVICE, &tile_));
        tile_elems_ = elems;
        return FROST_OK;
    }
    frost_status prepare_quant_weight(frost_stream* stream, Tensor* w) override;  // below, beside quant_params
    // The bf16 tile a prefill GEMM dequantizes a weight of `elems` elements into, or null.
    bf16* tile(size_t elems) const { return elems <= tile_elems_ && tile_ ? static_cast<bf16*>(frost_buffer_ptr(tile_)) : nullptr; }

    // The plan of this GEMM's shape, created once.
    cudaError_t plan(const K::GemmBf16Params& p, K::GemmPlan** out) {
        const GemmShapeKey key{p.M, p.N, p.K, p.ldx, p.ldy, p.out_f32, p.accumulate};
        auto it = plans_.find(key);
        if (it == plans_.end()) {
            K::GemmPlan* plan = nullptr;
            const cudaError_t e = chunk_invariant()
                                      ? K::gemm_plan_create_row_invariant(lt_, p, K::kGemmRowInvariantRefRows, &plan)
                                      : K::gemm_plan_create(lt_, p, &plan);
            if (e != cudaSuccess) return e;
            it = plans_.emplace(key, plan).first;
        }
        *out = it->second;
        return cudaSuccess;
    }

    // The FP8 block-scaled plan of this shape, or null when cuBLASLt has none for it (remembered:
    // the caller falls back to the dequantized bf16 GEMM). Only a failure other than "no
    // algorithm" is an error.
    cudaError_t fp8_plan(const K::GemmFp8Params& p, K::GemmFp8Plan** out) {
        const Fp8ShapeKey key{p.M, p.N, p.K, p.w_block_n, p.ldy, p.out_f32, p.accumulate, p.grid_rows};
        auto it = fp8_plans_.find(key);
        if (it == fp8_plans_.end()) {
            K::GemmFp8Plan* plan = nullptr;
            const cudaError_t e = K::gemm_fp8_plan_create(lt_, p, &plan);
            if (e != cudaSuccess && e != cudaErrorNotSupported) return e;
            it = fp8_plans_.emplace(key, plan).first;
        }
        *out = it->second;
        return cudaSuccess;
    }
    size_t tile_bytes() const { return tile_elems_ * sizeof(bf16); }
    unsigned long long* moe_sync() const { return static_cast<unsigned long long*>(frost_buffer_ptr(moe_sync_)); }

private:
    std::map<Fp8ShapeKey, K::GemmFp8Plan*> fp8_plans_;
    frost_buffer* workspace_ = nullptr;
    frost_buffer* tile_ = nullptr;  // bf16 dequant tile (reserve_dequant_scratch)
    frost_buffer* moe_sync_ = nullptr;
    size_t tile_elems_ = 0;
    K::GemmLt* lt_ = nullptr;
    std::map<GemmShapeKey, K::GemmPlan*> plans_;
};

cudaStream_t native(const Exec& ex) { return static_cast<cudaStream_t>(frost_stream_native(ex.stream)); }

// Converts a launcher's refusal into a status naming the op.
// Batched decode (ops.h BatchSlots) as the kernels' BatchRef (off when the op is not batched).
K::BatchRef batch_ref(const BatchSlots& b) {
    K::BatchRef r;
    if (!b.on()) return r;
    r.table = b.table; r.slots = b.slots; r.cursors = b.cursors;
    r.stride = b.stride; r.column = b.column; r.sessions = b.sessions; r.B = b.B;
    return r;
}

frost_status check(cudaError_t e, const char* op) {
    if (e == cudaSuccess) return FROST_OK;
    cudaGetLastError();  // clear the sticky launch error so later captures start clean
    if (e == cudaErrorInvalidValue || e == cudaErrorNotSupported)
        return fail(FROST_ERR_UNSUPPORTED, "op_%s (cuda): the kernel refuses this shape (%s)", op, cudaGetErrorString(e));
    return fail(FROST_ERR_BACKEND, "op_%s (cuda): launch failed: %s", op, cudaGetErrorString(e));
}

// Typed pointer of a view of the dtype this backend's kernel takes; else a refusal naming both.
#define NEED(view, dt, op)                                                                                  \
    do {                                                                                                    \
        if ((view).empty() || (view).dtype != (dt))                                                         \
            return fail(FROST_ERR_UNSUPPORTED, "op_%s (cuda): %s must be a %s view, got %s", op, #view,      \
                        dtype_name(dt), (view).empty() ? "none" : dtype_name((view).dtype));                 \
    } while (0)

bf16* B(const Tensor& t) { return t.as<bf16>(); }
float* F(const Tensor& t) { return t.as<float>(); }

// An FP8 twin (ops.h Fp8Act) of `rows` rows of `cols` columns, in act_quant_fp8_launch's layout: the
// launchers' fields (null when t is off); false when the views do not have that layout.
bool twin_args(const Fp8Act& t, int64_t rows, int64_t cols, uint8_t** q, float** scale, int64_t* ld) {
    *q = nullptr;
    *scale = nullptr;
    *ld = 0;
    if (!t.on()) return true;
    if (!t.fits(rows, cols)) return false;
    *q = t.q.as<uint8_t>();
    *scale = F(t.scale);
    *ld = t.scale.stride[0];
    return true;
}
#define NEED_TWIN(t, rows, cols, dst, op)                                                                       \
    do {                                                                                                        \
        if (!twin_args((t), (rows), (cols), &(dst).yq, &(dst).yq_scale, &(dst).yq_scale_ld))                    \
            return fail(FROST_ERR_UNSUPPORTED, "op_%s (cuda): yq must be an Fp8Act of [%lld, %lld]", op,        \
                        (long long)(rows), (long long)(cols));                                                  \
    } while (0)

// Programmatic dependent launch for the ops whose op struct carries no pdl hint: on for
// decode-sized launches (<= kGemvMaxRows rows: a solo or batched decode step, whose neighbours are
// all kernels) on a created stream (never the legacy one), as op_moe does.
int32_t decode_pdl(const Exec& ex, int max_rows) { return native(ex) != nullptr && max_rows <= K::kGemvMaxRows ? 1 : 0; }

frost_status embed(const Exec& ex, const EmbedOp& p) {
    NEED(p.table, DType::BF16, "embed");
    NEED(p.y, DType::BF16, "embed");
    K::EmbedBf16Params e{B(p.table), p.ids, B(p.y), int32_t(p.table.shape[0]), int32_t(p.table.shape[1]),
                         p.rows.max, p.rows.n};
    e.pdl = decode_pdl(ex, p.rows.max);
    return check(K::embed_launch(e, native(ex)), "embed");
}

frost_status add_rmsnorm(const Exec& ex, const AddRmsNormOp& p) {
    NEED(p.h, DType::BF16, "add_rmsnorm");
    NEED(p.y, DType::BF16, "add_rmsnorm");
    if (!p.delta.empty()) NEED(p.delta, DType::BF16, "add_rmsnorm");
    if (p.h.stride[0] != p.h.shape[1])
        return fail(FROST_ERR_UNSUPPORTED, "op_add_rmsnorm (cuda): h must be contiguous rows");
    K::AddRmsNormBf16Params n{B(p.h), p.delta.empty() ? nullptr : B(p.delta), F(p.w), B(p.y), int32_t(p.h.shape[1]),
                              p.zero_centred, p.eps, p.rows.max, p.rows.n, p.last_row_only};
    n.pdl = p.pdl;
    NEED_TWIN(p.yq, p.rows.max, p.h.shape[1], n, "add_rmsnorm");
    n.yq_only = n.yq && p.yq_only ? 1 : 0;
    return check(K::add_rmsnorm_launch(n, native(ex)), "add_rmsnorm");
}

// FROST_DECODE_FUSE=0 runs the fused decode ops (GDN decode step, q/k norm + RoPE + KV append)
// as their separate launches, for A/B runs of one binary; =gdn keeps only the GDN one fused, =qkkv
// only the attention one. Read once per process.
int decode_fuse_mode() {  // bit 0: GDN decode step fused, bit 1: q/k norm + RoPE + KV append fused
    static const int mode = util::env_is("FROST_DECODE_FUSE", "0")      ? 0
                            : util::env_is("FROST_DECODE_FUSE", "gdn")  ? 1
                            : util::env_is("FROST_DECODE_FUSE", "qkkv") ? 2
                                                                        : 3;
    return mode;
}

K::QkNormRopeBf16Params qk_params(const Exec& ex, const QkNormRopeOp& p) {
    K::QkNormRopeBf16Params q{B(p.q), B(p.k), F(p.q_w), F(p.k_w), p.q.stride[0], p.q.stride[1], p.k.stride[0],
                              p.k.stride[1], int32_t(p.q.shape[1]), int32_t(p.k.shape[1]), int32_t(p.q.shape[2]),
                              p.rotary_dim, 1, p.eps, p.theta, p.max_rows, p.cursor, p.inv_freq_bf16};
    q.batch = batch_ref(p.batch);
    q.pdl = decode_pdl(ex, p.max_rows);
    return q;
}

frost_status qk_norm_rope(const Exec& ex, const QkNormRopeOp& p) {
    NEED(p.q, DType::BF16, "qk_norm_rope");
    NEED(p.k, DType::BF16, "qk_norm_rope");
    return check(K::qk_norm_rope_launch(qk_params(ex, p), native(ex)), "qk_norm_rope");
}

K::Conv1dBf16Params conv_params(const Conv1dSiluL2Op& p) {
    K::Conv1dBf16Params c{B(p.x), F(p.w), B(p.state), B(p.y), p.x.stride[0], int32_t(p.w.shape[0]),
                          int32_t(p.w.shape[1]), p.l2_dim, p.l2_heads, p.l2_q_heads, p.l2_eps, p.q_scale,
                          p.rows.max, p.rows.n};
    c.pdl = p.pdl;
    c.batch = batch_ref(p.batch);
    return c;
}

frost_status conv1d_silu_l2(const Exec& ex, const Conv1dSiluL2Op& p) {
    NEED(p.x, DType::BF16, "conv1d_silu_l2");
    NEED(p.state, DType::BF16, "conv1d_silu_l2");
    NEED(p.y, DType::BF16, "conv1d_silu_l2");
    return check(K::conv1d_launch(conv_params(p), native(ex)), "conv1d_silu_l2");
}

frost_status gdn_gate(const Exec& ex, const GdnGateOp& p) {
    NEED(p.a, DType::BF16, "gdn_gate");
    NEED(p.b, DType::BF16, "gdn_gate");
    K::GdnGateBf16Params g{B(p.b), B(p.a), F(p.A_log), F(p.dt_bias), F(p.beta), F(p.g), p.a.stride[0],
                           int32_t(p.a.shape[1]), p.rows.max, p.rows.n};
    return check(K::gdn_gate_launch(g, native(ex)), "gdn_gate");
}

K::GdnBf16Params gdn_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, const Tensor& g,
                            const Tensor& state, const Tensor& o, const Tensor& work, int32_t max_rows,
                            const StepCursor* cursor) {
    return K::GdnBf16Params{B(q), B(k), B(v), F(beta), F(g), F(state), B(o), work.empty() ? nullptr : F(work),
                            q.stride[0], int32_t(q.shape[1]), int32_t(v.shape[1]), int32_t(q.shape[2]),
                            int32_t(v.shape[2]), K::kGdnChunk, max_rows, cursor};
}

#define NEED_QKVO(p, op)                  \
    NEED((p).q, DType::BF16, op);         \
    NEED((p).k, DType::BF16, op);         \
    NEED((p).v, DType::BF16, op);         \
    NEED((p).o, DType::BF16, op)

// FROST_PREFILL_FUSE=0: prefill's GDN gate (GdnChunkOp::gate) and its q/k norm + KV append
// (QkRopeKvAppendOp) as launches of their own, for A/B runs.
bool prefill_fuse() {
    static const bool on = !util::env_is("FROST_PREFILL_FUSE", "0");
    return on;
}

// With a gate, the chunk prep computes beta and g from the raw projections (no gate launch, the
// gate kernel's formulas, the same values); beta / g stay unwritten.
frost_status gdn_chunk(const Exec& ex, const GdnChunkOp& p) {
    NEED_QKVO(p, "gdn_chunk");
    NEED(p.work, DType::F32, "gdn_chunk");
    K::GdnBf16Params d = gdn_params(p.q, p.k, p.v, p.beta, p.g, p.state, p.o, p.work, p.max_rows, p.cursor);
    d.chunk = p.chunk;
    if (!p.gate.b.empty()) {
        NEED(p.gate.a, DType::BF16, "gdn_chunk");
        NEED(p.gate.b, DType::BF16, "gdn_chunk");
        if (prefill_fuse()) {
            d.gate_b = B(p.gate.b);
            d.gate_a = B(p.gate.a);
            d.A_log = F(p.gate.A_log);
            d.dt_bias = F(p.gate.dt_bias);
            d.gate_row_stride = p.gate.a.stride[0];
        } else {
            FROST_TRY(gdn_gate(ex, p.gate));
        }
    }
    return check(K::gdn_chunk_launch(d, native(ex)), "gdn_chunk");
}

// The recurrence computes beta and g itself from the raw projections: one launch fewer.
K::GdnBf16Params gdn_step_params(const GdnStepOp& p) {
    K::GdnBf16Params d = gdn_params(p.q, p.k, p.v, p.beta, p.g, p.state, p.o, Tensor{}, p.max_rows, p.cursor);
    d.gate_b = B(p.b);
    d.gate_a = B(p.a);
    d.A_log = F(p.A_log);
    d.dt_bias = F(p.dt_bias);
    d.gate_row_stride = p.a.stride[0];
    d.pdl = p.pdl;
    d.batch = batch_ref(p.batch);
    return d;
}

frost_status gdn_step(const Exec& ex, const GdnStepOp& p) {
    NEED_QKVO(p, "gdn_step");
    NEED(p.a, DType::BF16, "gdn_step");
    NEED(p.b, DType::BF16, "gdn_step");
    return check(K::gdn_recurrent_launch(gdn_step_params(p), native(ex)), "gdn_step");
}

K::GatedRmsNormBf16Params gated_params(const GatedRmsNormOp& p) {
    K::GatedRmsNormBf16Params g{B(p.x), B(p.z), F(p.w), B(p.y), p.z.stride[0], p.dim, p.heads, p.eps,
                                p.rows.max, p.rows.n};
    g.pdl = p.pdl;
    return g;
}

frost_status gated_rmsnorm(const Exec& ex, const GatedRmsNormOp& p) {
    NEED(p.x, DType::BF16, "gated_rmsnorm");
    NEED(p.z, DType::BF16, "gated_rmsnorm");
    NEED(p.y, DType::BF16, "gated_rmsnorm");
    K::GatedRmsNormBf16Params g = gated_params(p);
    NEED_TWIN(p.yq, p.rows.max, int64_t(p.heads) * p.dim, g, "gated_rmsnorm");
    g.yq_only = g.yq && p.yq_only ? 1 : 0;
    return check(K::gated_rmsnorm_launch(g, native(ex)), "gated_rmsnorm");
}


frost_status gemm(const Exec& ex, const GemmOp& p);

// The op's gate projections as the gate-dot kernels read them (empty w: none, or a shape they do
// not take, which then runs as a GEMM).
K::GdnGateDotParams gate_dot_params(const GemmOp& g, int32_t Hv) {
    K::GdnGateDotParams d{};
    if (g.w.empty() || g.w.dtype != DType::BF16 || g.x.dtype != DType::BF16 || g.y.dtype != DType::BF16) return d;
    d.w = B(g.w); d.x = B(g.x); d.y = B(g.y);
    d.x_row_stride = g.x.stride[0]; d.y_row_stride = g.y.stride[0];
    d.K = int32_t(g.w.shape[1]); d.Hv = Hv; d.rows = int32_t(g.x.shape[0]);
    return K::gdn_gate_dot_valid(d) ? d : K::GdnGateDotParams{};
}

// One launch where the fused kernel takes the shapes (Qwen3.5's: K = 4, dk = dv = 128, Hv / Hk
// <= 2, Hopper), else the three ops' launches; the same bits either way. The gate projections
// (GdnDecodeOp::gates) go into that launch, or a gate-dot launch of their own before the three,
// with the same bits (lm_gdn_gate_dot.cuh); a shape the gate dot does not take runs as a GEMM.
frost_status gdn_decode(const Exec& ex, const GdnDecodeOp& p) {
    NEED(p.conv.x, DType::BF16, "gdn_decode");
    NEED(p.conv.state, DType::BF16, "gdn_decode");
    NEED(p.conv.y, DType::BF16, "gdn_decode");
    NEED_QKVO(p.step, "gdn_decode");
    NEED(p.step.a, DType::BF16, "gdn_decode");
    NEED(p.step.b, DType::BF16, "gdn_decode");
    NEED(p.norm.x, DType::BF16, "gdn_decode");
    NEED(p.norm.z, DType::BF16, "gdn_decode");
    NEED(p.norm.y, DType::BF16, "gdn_decode");
    K::GdnDecodeBf16Params f{conv_params(p.conv), gdn_step_params(p.step), gated_params(p.norm), p.step.pdl};
    NEED_TWIN(p.norm.yq, p.norm.rows.max, int64_t(p.norm.heads) * p.norm.dim, f.norm, "gdn_decode");
    const bool gates = !p.gates.w.empty();
    f.gates = gate_dot_params(p.gates, int32_t(p.step.b.shape[1]));
    if ((decode_fuse_mode() & 1) && (!gates || f.gates.w) && K::gdn_decode_fused_applies(f))
        return check(K::gdn_decode_fused_launch(f, native(ex)), "gdn_decode");
    if (gates && f.gates.w)
        FROST_TRY(check(K::gdn_gate_dot_launch(f.gates, p.step.pdl, native(ex)), "gdn_decode gates"));
    else if (gates)
        FROST_TRY(gemm(ex, p.gates));
    FROST_TRY(conv1d_silu_l2(ex, p.conv));
    FROST_TRY(gdn_step(ex, p.step));
    return gated_rmsnorm(ex, p.norm);
}

K::KvAppendBf16Params kv_params(const Exec& ex, const KvAppendOp& p) {
    K::KvAppendBf16Params k{B(p.k), B(p.v), B(p.k_cache), B(p.v_cache), p.k.stride[0], int32_t(p.k.shape[1]),
                            int32_t(p.k_cache.shape[0]), p.max_rows, p.cursor};
    k.batch = batch_ref(p.batch);
    k.pdl = decode_pdl(ex, p.max_rows);
    return k;
}

frost_status kv_append(const Exec& ex, const KvAppendOp& p) {
    NEED(p.k, DType::BF16, "kv_append");
    NEED(p.v, DType::BF16, "kv_append");
    NEED(p.k_cache, DType::BF16, "kv_append");
    NEED(p.v_cache, DType::BF16, "kv_append");
    return check(K::kv_append_launch(kv_params(ex, p), native(ex)), "kv_append");
}

// One launch where the params allow (qk_norm_rope_kv_applies), else the two; the same bits. A/B
// switches: FROST_DECODE_FUSE (decode launches, PDL: at most kGemvMaxRows rows) and
// FROST_PREFILL_FUSE (larger launches).
frost_status qk_rope_kv_append(const Exec& ex, const QkRopeKvAppendOp& p) {
    NEED(p.qk.q, DType::BF16, "qk_rope_kv_append");
    NEED(p.qk.k, DType::BF16, "qk_rope_kv_append");
    NEED(p.kv.k, DType::BF16, "qk_rope_kv_append");
    NEED(p.kv.v, DType::BF16, "qk_rope_kv_append");
    NEED(p.kv.k_cache, DType::BF16, "qk_rope_kv_append");
    NEED(p.kv.v_cache, DType::BF16, "qk_rope_kv_append");
    const K::QkRopeKvBf16Params f{qk_params(ex, p.qk), kv_params(ex, p.kv)};
    const bool fuse = f.qk.pdl ? (decode_fuse_mode() & 2) != 0 : prefill_fuse();
    if (fuse && K::qk_norm_rope_kv_applies(f))
        return check(K::qk_norm_rope_kv_launch(f, native(ex)), "qk_rope_kv_append");
    FROST_TRY(qk_norm_rope(ex, p.qk));
    return kv_append(ex, p.kv);
}

frost_status attention_params(const AttentionOp& p, const char* op, K::AttentionBf16Params* out) {
    NEED(p.q, DType::BF16, op);
    NEED(p.k_cache, DType::BF16, op);
    NEED(p.v_cache, DType::BF16, op);
    NEED(p.o, DType::BF16, op);
    if (!p.gate.empty()) NEED(p.gate, DType::BF16, op);
    *out = K::AttentionBf16Params{B(p.q), p.gate.empty() ? nullptr : B(p.gate), B(p.k_cache), B(p.v_cache), B(p.o),
                                  p.work.empty() ? nullptr : F(p.work), p.q.stride[0], p.q.stride[1],
                                  int32_t(p.q.shape[1]), int32_t(p.k_cache.shape[1]), int32_t(p.q.shape[2]),
                                  p.scale, int32_t(p.k_cache.shape[0]), p.max_rows, p.cursor};
    return FROST_OK;
}

frost_status attention_prefill(const Exec& ex, const AttentionOp& p) {
    K::AttentionBf16Params a{};
    FROST_TRY(attention_params(p, "attention_prefill", &a));
    if (ex.backend && ex.backend->chunk_invariant())
        return check(K::attn_prefill_invariant_launch(a, native(ex)), "attention_prefill");
    return check(K::attn_prefill_launch(a, native(ex)), "attention_prefill");
}

frost_status attention_decode(const Exec& ex, const AttentionOp& p) {
    K::AttentionBf16Params a{};
    FROST_TRY(attention_params(p, "attention_decode", &a));
    a.batch = batch_ref(p.batch);
    a.pdl = decode_pdl(ex, 1);
    return check(K::attn_decode_launch(a, native(ex)), "attention_decode");
}

// The quantized GEMV params of weight view w (ops/tensor.h layouts), x and y unset.
frost_status quant_params(const Tensor& w, K::GemvQuantParams* q) {
    *q = K::GemvQuantParams{};
    q->w = w.data;
    q->scale = w.scale;
    q->N = int32_t(w.shape[0]);
    q->K = int32_t(w.shape[1]);
    switch (w.dtype) {
        case DType::FP8_E4M3:
            if (w.scale_rows == 1 && w.scale_block == w.shape[1]) {
                q->format = K::kGemvQuantFp8Channel;
            } else {
                q->format = K::kGemvQuantFp8Block;
                q->block_n = w.scale_rows;
                q->block_k = w.scale_block;
            }
            return FROST_OK;
        case DType::NVFP4:
            q->format = K::kGemvQuantNvfp4;
            q->row_global_scale = w.global_scale;
            q->nibble_pairs = w.nibble_pairs;
            q->row_blocks = w.row_blocks;
            return FROST_OK;
        case DType::INT4:
            q->format = K::kGemvQuantInt4;
            q->group_size = w.scale_block;
            q->zero_point = w.zero_point;
            q->nibble_pairs = w.nibble_pairs;
            q->row_blocks = w.row_blocks;
            return FROST_OK;
        default:
            return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): w is a %s view", dtype_name(w.dtype));
    }
}

// The 4-bit formats in the paired nibble order (K::quant4_pair_nibbles_launch): the decode GEMV
// then takes x's bf16 pairs as they are instead of permuting them per weight pair. Then, where
// the shape allows (rows a multiple of 8, K of 128; K::quant4_row_blocks_eligible), in 8-row
// blocks (K::quant4_row_blocks_launch): a warp's weight load reads 512 contiguous bytes.
frost_status CudaBackend::prepare_quant_weight(frost_stream* stream, Tensor* w) {
    if (w->dtype != DType::INT4 && w->dtype != DType::NVFP4) return FROST_OK;
    if (w->rank != 2 || w->stride[0] != w->shape[1] || w->shape[1] % 8 != 0)
        return fail(FROST_ERR_INVALID_ARG, "prepare_quant_weight (cuda): a %s weight must be whole contiguous rows of "
                    "32-bit words", dtype_name(w->dtype));
    const auto st = static_cast<cudaStream_t>(frost_stream_native(stream));
    if (!w->nibble_pairs) {
        const size_t bytes = size_t(w->shape[0]) * size_t(w->shape[1]) / 2;
        FROST_TRY(check(K::quant4_pair_nibbles_launch(w->data, bytes, st), "prepare_quant_weight (4-bit nibble pairs)"));
        w->nibble_pairs = 1;
    }
    // FROST_QUANT4_ROW_BLOCKS=0 keeps the rows row-major (the layout's A/B in one call).
    static const bool blocks_on = !util::env_is("FROST_QUANT4_ROW_BLOCKS", "0");
    if (blocks_on && !w->row_blocks && K::quant4_row_blocks_eligible(w->shape[0], w->shape[1])) {
        FROST_TRY(check(K::quant4_row_blocks_launch(w->data, w->shape[0], w->shape[1], st), "prepare_quant_weight (4-bit row blocks)"));
        w->row_blocks = 1;
    }
    return FROST_OK;
}

// A quantized weight: decode (M = 1) runs the quantized GEMV with the residual or SwiGLU epilogue
// fused (the bf16 GEMV's forms); prefill runs the FP8 block-scaled GEMM where the weight allows
// it (gemm_fp8_block), else dequantizes the weight into the backend's bf16 tile and runs the bf16
// GEMM below on it.
frost_status gemm_bf16(const Exec& ex, const GemmOp& p, const Tensor& w);

// Prefill on FP8 weights (128x128 blocks, per-row or per-channel scales), or INT4 in 128-wide
// groups converted to e4m3 in the tile (W4A8), with GemmOp::quant_act: the activations quantized
// per row and 128-wide group into
// the backend's tile (e4m3 rows, then their scales), then cuBLASLt's block-scaled FP8 GEMM (the
// checkpoint's own W8A8 scheme, lm_gemm_fp8.h). A fused matrix whose parts do not all fill whole
// 128-row blocks (the GDN in_proj) carries one scale per row and 128 columns: it runs the same
// GEMM with per-row weight scales, split where the weight also has a 128x128 grid for its leading
// whole blocks (ops::Tensor::grid_rows): those rows block-scaled, only the rest per-row
// (GemmFp8Params::grid_rows). Per-channel weights (one scale per row) run per-row too (fp8_setup).
// *done = false when the shape has no such path (other block
// sizes, K not a multiple of 128, no cuBLASLt algorithm): the caller dequantizes.
// FROST_FP8_GRID_SPLIT=0 turns the split off (A/B benches).
bool fp8_grid_split_enabled() {
    static const bool on = !util::env_is("FROST_FP8_GRID_SPLIT", "0");
    return on;
}

// The FP8 path's parameters and plan for p (tile layout as below); *plan = null when the shape
// has none. Shared by the launch and Backend::gemm_reads_twin, so both decide alike.
struct Fp8Tile {
    size_t xq_bytes = 0, xs_bytes = 0;
    uint8_t* base = nullptr;
    float* w_scale = nullptr;  // per-row weight scales (VEC128 layout), when the weight needs them
    uint8_t* wq = nullptr;     // INT4 (W4A8): the weight as e4m3 [N, K]
};
frost_status fp8_setup(CudaBackend* be, const GemmOp& p, const K::GemvQuantParams& q, K::GemmFp8Params* out,
                       Fp8Tile* t, K::GemmFp8Plan** plan) {
    *plan = nullptr;
    const int32_t M = int32_t(p.x.shape[0]);
    const bool channel = q.format == K::kGemvQuantFp8Channel;
    const bool block = q.format == K::kGemvQuantFp8Block && (q.block_n == K::kFp8Group || q.block_n == 1) &&
                       q.block_k == K::kFp8Group;
    const bool int4 = K::int4_e4m3_ok(q);  // W4A8: converted into the tile (K::int4_to_e4m3_launch)
    if (!p.quant_act || !(channel || block || int4) || q.K % K::kFp8Group != 0 || p.x.dtype != DType::BF16 ||
        p.epilogue == Epilogue::SwiGLU || p.y.empty() || (p.y.dtype != DType::BF16 && p.y.dtype != DType::F32))
        return FROST_OK;
    // Per-channel scales (compressed-tensors FP8-dynamic) run as per-row VEC128 scales, each row's
    // one scale repeated along k (K::w_scale_channel_launch): the same products as scaling the
    // output column once. Not cuBLASLt's OUTER_VEC mode, which would fit the weight as stored: it
    // also takes the activations' scales per token, not per 128-wide group, so the norms' and
    // SwiGLU's e4m3 twins (and the CPU oracle's W8A8 rounding) would need a second quantizer.
    const bool per_row = channel || int4 || q.block_n == 1;
    // Tile: e4m3 rows and their scales (only where no twin comes with x), then (per-row weight
    // scales) the weight's scales in the layout cuBLASLt reads for them (K::w_scale_rows_launch),
    // then (INT4) the weight's values as e4m3: N x K bytes, half its bf16 dequantization.
    // The tile holds the largest quantized weight in bf16, so counting unused e4m3 rows against
    // it refused the FP8 path to every GEMM with M x K above N_max x K_max x 2 bytes, twin or not:
    // the 9B's down (K 12288) in 16384-row chunks ran dequant + bf16 at 637 TFLOP/s against 1117
    // for the FP8 GEMM alone (H200, 2026-11-30, bench_ops --rows 16384 and bench_cuda_kernels --fp8).
    const bool twin = p.xq.on();
    t->xq_bytes = twin ? 0 : (size_t(M) * size_t(q.K) + 255) / 256 * 256;
    t->xs_bytes = twin ? 0 : (K::act_scale_floats(M, q.K) * sizeof(float) + 255) / 256 * 256;
    const size_t ws_bytes = per_row ? (K::act_scale_floats(q.N, q.K) * sizeof(float) + 255) / 256 * 256 : 0;
    const size_t wq_bytes = int4 ? size_t(q.N) * size_t(q.K) : 0;
    const size_t need = t->xq_bytes + t->xs_bytes + ws_bytes + wq_bytes;
    t->base = reinterpret_cast<uint8_t*>(be->tile(be->tile_bytes() / sizeof(bf16)));
    if (!t->base || need > be->tile_bytes()) return FROST_OK;
    t->w_scale = per_row ? reinterpret_cast<float*>(t->base + t->xq_bytes + t->xs_bytes) : nullptr;
    t->wq = int4 ? t->base + t->xq_bytes + t->xs_bytes + ws_bytes : nullptr;
    // x already quantized by its producer (GemmOp::xq): the GEMM reads that twin, no quantizer.
    uint8_t* twin_q = nullptr;
    float* twin_s = nullptr;
    int64_t twin_ld = 0;
    if (!twin_args(p.xq, M, q.K, &twin_q, &twin_s, &twin_ld))
        return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): xq must be an Fp8Act of [%d, %d]", M, q.K);
    K::GemmFp8Params& g = *out;
    g = K::GemmFp8Params{};
    g.xq = twin_q ? twin_q : t->base;
    g.x_scale = twin_q ? twin_s : reinterpret_cast<const float*>(t->base + t->xq_bytes);
    g.w = int4 ? t->wq : static_cast<const uint8_t*>(q.w);
    g.w_scale = per_row ? t->w_scale : static_cast<const float*>(q.scale);
    g.w_block_n = per_row ? 1 : q.block_n;
    if (block && q.block_n == 1 && p.w.grid_scale && p.w.grid_rows > 0 && p.w.grid_rows % K::kFp8Group == 0 &&
        p.w.grid_rows < q.N && fp8_grid_split_enabled()) {
        g.grid_rows = p.w.grid_rows;
        g.w_grid_scale = p.w.grid_scale;
    }
    g.y = p.y.data;
    g.ldy = p.y.stride[0];
    g.M = M;
    g.N = q.N;
    g.K = q.K;
    g.out_f32 = p.y.dtype == DType::F32 ? 1 : 0;
    g.accumulate = p.epilogue == Epilogue::Residual ? 1 : 0;
    FROST_TRY(check(be->fp8_plan(g, plan), "gemm (fp8 plan)"));
    if (!*plan && g.grid_rows > 0) {  // no split plan: every row per-row
        g.grid_rows = 0;
        g.w_grid_scale = nullptr;
        FROST_TRY(check(be->fp8_plan(g, plan), "gemm (fp8 plan)"));
    }
    return FROST_OK;
}

// Whether a quantized prefill GEMM takes the FP8 path rather than the GEMV or the dequant tile.
bool fp8_gemm_rows(const GemmOp& p) {
    const int32_t M = int32_t(p.x.shape[0]);
    return M > 1 && !(p.pdl && M <= K::kGemvMaxRows);
}

bool CudaBackend::gemm_reads_twin(const GemmOp& p) {
    if (!p.quant_act || !p.xq.on() || !p.w.quantized() || p.x.rank != 2 || !fp8_gemm_rows(p)) return false;
    K::GemvQuantParams q{};
    if (quant_params(p.w, &q) != FROST_OK) return false;
    K::GemmFp8Params g{};
    Fp8Tile t;
    K::GemmFp8Plan* plan = nullptr;
    return fp8_setup(this, p, q, &g, &t, &plan) == FROST_OK && plan != nullptr;
}

frost_status gemm_fp8_block(const Exec& ex, const GemmOp& p, const K::GemvQuantParams& q, bool* done) {
    *done = false;
    auto* be = static_cast<CudaBackend*>(ex.backend);
    const int32_t M = int32_t(p.x.shape[0]);
    K::GemmFp8Params g{};
    Fp8Tile t;
    K::GemmFp8Plan* plan = nullptr;
    FROST_TRY(fp8_setup(be, p, q, &g, &t, &plan));
    if (!plan) return FROST_OK;
    const int32_t grid = K::gemm_fp8_plan_grid_rows(plan);  // rows the plan runs block-scaled
    if (t.wq) {  // INT4: its values as e4m3 and its group scales, both into the tile
        FROST_TRY(check(K::int4_to_e4m3_launch(q, t.wq, t.w_scale, native(ex)), "gemm (int4 to e4m3)"));
    } else if (q.format == K::kGemvQuantFp8Channel) {
        FROST_TRY(check(K::w_scale_channel_launch(static_cast<const float*>(q.scale), q.N, q.K, t.w_scale, native(ex)),
                        "gemm (fp8 per-channel weight scales)"));
    } else if (q.block_n == 1) {  // the per-row rows' scales only (from row `grid`)
        const float* rows_scale = static_cast<const float*>(q.scale) + int64_t(grid) * (q.K / K::kFp8Group);
        FROST_TRY(check(K::w_scale_rows_launch(rows_scale, q.N - grid, q.K, t.w_scale, native(ex)),
                        "gemm (fp8 per-row weight scales)"));
    }
    if (!p.xq.on())
        FROST_TRY(check(K::act_quant_fp8_launch(B(p.x), p.x.stride[0], M, q.K, t.base,
                                                reinterpret_cast<float*>(t.base + t.xq_bytes), native(ex)),
                        "gemm (fp8 activation quantization)"));
    FROST_TRY(check(K::gemm_fp8_launch(plan, g, native(ex)), "gemm (fp8 block-scaled)"));
    *done = true;
    return FROST_OK;
}

frost_status gemm_quant(const Exec& ex, const GemmOp& p) {
    K::GemvQuantParams q{};
    FROST_TRY(quant_params(p.w, &q));
    const int32_t M = int32_t(p.x.shape[0]);
    // Decode rows (1, or a batched decode step's <= 8 members, which run with PDL; prefill buckets
    // are >= 64 rows) take the quantized GEMV; prefill the FP8 GEMM or dequantize + bf16 GEMM.
    if (fp8_gemm_rows(p)) {
        bool done = false;
        FROST_TRY(gemm_fp8_block(ex, p, q, &done));
        if (done) return FROST_OK;
        if (p.xq_only)
            return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): xq_only on a [%d, %d] x [%d, %d] GEMM without the FP8 "
                        "path (ask Backend::gemm_reads_twin)", M, q.K, q.N, q.K);
        bf16* tile = static_cast<CudaBackend*>(ex.backend)->tile(size_t(q.N) * size_t(q.K));
        if (!tile)
            return fail(FROST_ERR_INVALID_ARG, "op_gemm (cuda): no dequant tile for a [%d, %d] %s weight "
                        "(Backend::reserve_dequant_scratch)", q.N, q.K, dtype_name(p.w.dtype));
        FROST_TRY(check(K::dequant_bf16_launch(q, tile, native(ex)), "gemm (dequant tile)"));
        return gemm_bf16(ex, p, mat(tile, DType::BF16, q.N, q.K, q.K));
    }
    NEED(p.x, DType::BF16, "gemm");
    q.x = B(p.x);
    q.pdl = p.pdl;
    if (p.epilogue == Epilogue::SwiGLU) {
        NEED(p.y, DType::BF16, "gemm+swiglu");
        q.swiglu = 1;
    } else {
        if (p.y.empty() || (p.y.dtype != DType::BF16 && p.y.dtype != DType::F32))
            return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): y must be a bf16 or f32 view");
        q.out_f32 = p.y.dtype == DType::F32 ? 1 : 0;
        q.accumulate = p.epilogue == Epilogue::Residual ? 1 : 0;
    }
    q.y = p.y.data;
    q.M = M;
    q.ldx = int32_t(p.x.stride[0]);
    q.ldy = int32_t(p.y.stride[0]);
    // W8A8 decode (quant_act on FP8 weights): the tensor-core GEMV quantizes x itself; a batched
    // step whose staged rows do not fit runs its members one by one below. A shape the kernel
    // cannot take at all multiplies bf16 x, as the prefill path does (gemm_fp8_block).
    if (p.quant_act && (q.format == K::kGemvQuantFp8Block || q.format == K::kGemvQuantFp8Channel)) {
        K::GemvQuantParams one = q;
        one.M = 1;
        one.act_fp8 = 1;
        q.act_fp8 = K::gemv_quant_tc_eligible(one) ? 1 : 0;
    }
    const char* what = q.swiglu ? "gemm+swiglu (quantized gemv)" : "gemm (quantized gemv)";
    if (M == 1 || K::gemv_quant_tc_eligible(q)) return check(K::gemv_quant_launch(q, native(ex)), what);
    // A batched step on a shape only the one-row SIMT kernel takes (or whose W8A8 rows do not fit
    // in shared memory together): one launch per member, each exactly its solo step's launch, so
    // the members keep their solo bits.
    const size_t y_row_bytes = size_t(q.ldy) * (q.out_f32 ? sizeof(float) : sizeof(bf16));
    for (int32_t r = 0; r < M; ++r) {
        K::GemvQuantParams one = q;
        one.M = 1;
        one.x = q.x + size_t(r) * size_t(q.ldx);
        one.y = static_cast<uint8_t*>(q.y) + size_t(r) * y_row_bytes;
        FROST_TRY(check(K::gemv_quant_launch(one, native(ex)), what));
    }
    return FROST_OK;
}

// GEMV for one row (the decode forms: SwiGLU epilogue, PDL), cuBLASLt with a cached plan otherwise.
frost_status gemm(const Exec& ex, const GemmOp& p) {
    if (p.w.quantized() && (!p.xq_only || fp8_gemm_rows(p))) return gemm_quant(ex, p);
    if (p.xq_only) return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): xq_only without the FP8 GEMM (x was never written)");
    return gemm_bf16(ex, p, p.w);
}

frost_status gemm_bf16(const Exec& ex, const GemmOp& p, const Tensor& w) {
    NEED(p.x, DType::BF16, "gemm");
    NEED(w, DType::BF16, "gemm");
    if (p.y.empty() || (p.y.dtype != DType::BF16 && p.y.dtype != DType::F32))
        return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): y must be a bf16 or f32 view");
    const int32_t M = int32_t(p.x.shape[0]);
    K::GemmBf16Params g{B(p.x), B(w), p.y.data, p.x.stride[0], p.y.stride[0], M, int32_t(w.shape[0]),
                        int32_t(p.x.shape[1]), p.y.dtype == DType::F32 ? 1 : 0,
                        p.epilogue == Epilogue::Residual ? 1 : 0};
    g.pdl = p.pdl;
    if (p.epilogue == Epilogue::SwiGLU) {
        if (p.y.dtype != DType::BF16) return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cuda): the SwiGLU epilogue writes bf16");
        if (M > K::kGemvMaxRows) {  // prefill rows: the fused GEMM (Backend::gemm_fuses_swiglu)
            if (!K::gemm_swiglu_supported(g))
                return fail(FROST_ERR_UNSUPPORTED,
                            "op_gemm (cuda): the SwiGLU epilogue at %d rows needs the sm_90a GEMM (F, K and strides multiples "
                            "of 8, 16-byte aligned); here the forward runs the projection and op_swiglu", M);
            return check(K::gemm_swiglu_launch(g, native(ex)), "gemm+swiglu");
        }
        g.swiglu = 1;
        return check(K::gemv_launch(g, native(ex)), "gemm+swiglu");
    }
    // Decode rows (1, or a batched decode step's <= 8 members; prefill buckets are >= 64 rows):
    // the GEMV, whose per-row arithmetic does not depend on M, so a member's bits equal its solo step.
    if (M == 1 || (p.pdl && M <= K::kGemvMaxRows)) return check(K::gemv_launch(g, native(ex)), "gemm");
    K::GemmPlan* plan = nullptr;
    FROST_TRY(check(static_cast<CudaBackend*>(ex.backend)->plan(g, &plan), "gemm (plan)"));
    return check(K::gemm_launch(plan, g, native(ex)), "gemm");
}

// The fused gate|up + SwiGLU for prefill rows of bf16 weights, where the kernel runs the shape;
// FROST_GEMM_SWIGLU=0 keeps the projection and the SwiGLU op (A/B runs).
bool CudaBackend::gemm_fuses_swiglu(const GemmOp& p) {
    if (p.w.quantized() || p.quant_act || p.x.rank != 2 || p.y.rank != 2 || p.x.dtype != DType::BF16 ||
        p.w.dtype != DType::BF16 || p.y.dtype != DType::BF16 || p.x.shape[0] <= K::kGemvMaxRows ||
        util::env_is("FROST_GEMM_SWIGLU", "0"))
        return false;
    const K::GemmBf16Params g{B(p.x), B(p.w), p.y.data, p.x.stride[0], p.y.stride[0], int32_t(p.x.shape[0]),
                              int32_t(p.w.shape[0]), int32_t(p.x.shape[1]), 0, 0};
    return K::gemm_swiglu_supported(g);
}

frost_status swiglu(const Exec& ex, const SwigluOp& p) {
    NEED(p.x, DType::BF16, "swiglu");
    NEED(p.y, DType::BF16, "swiglu");
    K::SwigluBf16Params s{B(p.x), B(p.y), int32_t(p.y.shape[1]), p.rows.max, p.rows.n};
    NEED_TWIN(p.yq, p.rows.max, p.y.shape[1], s, "swiglu");
    s.yq_only = s.yq && p.yq_only ? 1 : 0;
    return check(K::swiglu_launch(s, native(ex)), "swiglu");
}

frost_status sample(const Exec& ex, const SampleOp& p) {
    K::SampleParams s{};
    s.logits = F(p.logits); s.row_stride = p.logits.stride[0]; s.vocab = int32_t(p.logits.shape[1]);
    s.select_last_row = p.select_last_row; s.n_rows = p.n_rows; s.work = F(p.work); s.work_idx = nullptr;
    s.cursor = p.cursor; s.out_token = p.out_token;
    s.settings = p.settings; s.counts = p.counts; s.seen = p.seen; s.mask = p.mask; s.ids = p.ids;
    s.count_inputs = p.count_inputs; s.record = p.record;
    return check(K::sample_launch(s, native(ex)), "sample");
}

frost_status cursor(const Exec& ex, const CursorOpParams& p) {
    if (p.batch.on()) {
        K::BatchCursorParams b{batch_ref(p.batch), p.ids, p.op};
        return check(K::batch_cursor_launch(b, native(ex)), "cursor (batched)");
    }
    K::CursorParams c{p.cursor, p.ids, p.op};
    return check(K::cursor_launch(c, native(ex)), "cursor");
}

frost_status tail_row(const Exec& ex, const TailRowOp& p) {
    const K::TailRowParams t = tail_row_params(p);
    return check(K::tail_row_launch(t, native(ex)), "tail_row");
}

// The MoE matrices a quantized layer may hold (MoeOp's experts and shared expert; the router and
// the shared expert's gate are read by the router kernel, bf16 only).
bool moe_routed_quantized(const MoeOp& p) { return p.experts_gate_up.quantized() && p.experts_down.quantized(); }
bool moe_any_quantized(const MoeOp& p) {
    return p.experts_gate_up.quantized() || p.experts_down.quantized() || p.shared_gate_up.quantized() ||
           p.shared_down.quantized();
}

// Every quantized MoE matrix of p dequantized into the backend's bf16 tile (one after another:
// Engine::largest_quantized_matrix reserved their sum) and m pointed at the bf16 copies; the
// kernels then run as on a bf16 layer. Prefill does this (the grouped GEMMs read bf16 tiles, as a
// dense quantized GEMM's prefill does); so does a decode whose routed experts are not both
// quantized (a form the quantized decode does not take).
frost_status moe_dequantize(const Exec& ex, const MoeOp& p, K::MoeBf16Params* m) {
    const Tensor* mats[] = {&p.experts_gate_up, &p.experts_down, &p.shared_gate_up, &p.shared_down};
    const bf16** dst[] = {&m->experts_gate_up, &m->experts_down, &m->shared_gate_up, &m->shared_down};
    size_t total = 0;
    for (const Tensor* t : mats)
        if (t->quantized()) total += size_t(t->shape[0]) * size_t(t->shape[1]);
    bf16* tile = static_cast<CudaBackend*>(ex.backend)->tile(total);
    if (!tile)
        return fail(FROST_ERR_INVALID_ARG, "op_moe (cuda): no dequant tile of %zu elements for the quantized experts "
                    "(Backend::reserve_dequant_scratch)", total);
    for (int i = 0; i < 4; ++i) {
        if (!mats[i]->quantized()) continue;
        K::GemvQuantParams q{};
        FROST_TRY(quant_params(*mats[i], &q));
        FROST_TRY(check(K::dequant_bf16_launch(q, tile, native(ex)), "moe (dequant experts)"));
        *dst[i] = tile;
        tile += size_t(q.N) * size_t(q.K);
    }
    return FROST_OK;
}

// Points f's four FP8 stacks (MoeBf16Params::fp8_*) at p's experts and shared expert: false
// unless all four are FP8 (per-channel scales as block_n 1, block_k K; w8a8_forms: only the forms
// the W8A8 tile takes, 128 x 128 blocks or per-channel).
bool moe_fp8_stacks(const MoeOp& p, bool w8a8_forms, K::MoeBf16Params* f) {
    const Tensor* mats[] = {&p.experts_gate_up, &p.experts_down, &p.shared_gate_up, &p.shared_down};
    K::MoeFp8Weights* dst[] = {&f->fp8_gate_up, &f->fp8_down, &f->fp8_shared_gate_up, &f->fp8_shared_down};
    for (int i = 0; i < 4; ++i) {
        if (mats[i]->dtype != DType::FP8_E4M3) return false;
        K::GemvQuantParams q{};
        if (quant_params(*mats[i], &q) != FROST_OK) return false;
        const bool channel = q.format == K::kGemvQuantFp8Channel;
        if (w8a8_forms && !channel && (q.block_n != K::kFp8Group || q.block_k != K::kFp8Group)) return false;
        *dst[i] = K::MoeFp8Weights{static_cast<const uint8_t*>(q.w), static_cast<const float*>(q.scale),
                                   channel ? 1 : q.block_n, channel ? q.K : q.block_k};
    }
    return true;
}

// Opt-in (FROST_MOE_FP8_DIRECT=1, read once): points m's FP8 stacks (MoeBf16Params::fp8) at p's
// experts when all four matrices are FP8 (block or per-row scales) and the prefill's tile reads
// them as stored (K::moe_prefill_reads_fp8). The grouped GEMMs then convert each weight on its way
// into shared memory, so a chunk skips writing and re-reading the layer's whole bf16
// dequantization (35B-A3B: 1.6 GB a layer per chunk) and its GEMMs stream half the weight bytes.
// The same bits as moe_dequantize + the bf16 GEMMs. Not the default: measured slower (H200,
// 2026-12-04, 35B-A3B FP8, first 20 layers, `scripts/gpu/ab_env.sh DIR 2 FROST_MOE_FP8_DIRECT=1
// FROST_MOE_FP8_DIRECT=0` with `--ttft 1024,4096,16384 --reps 2`, ms): 28.77 / 28.60, 52.16 /
// 52.26, 218.47 / 218.44 against the dequantization's 24.71 / 24.75, 38.37 / 38.52, 165.70 /
// 165.74; lm_moe_prefill_tma.cu has the earlier forms and why. moe_w8a8, when it applies, is
// faster still. False: m unchanged.
bool moe_fp8_direct(const MoeOp& p, K::MoeBf16Params* m) {
    static const bool on = util::env_is("FROST_MOE_FP8_DIRECT", "1");
    K::MoeBf16Params f = *m;
    if (!on || !moe_fp8_stacks(p, false, &f)) return false;
    f.fp8 = 1;
    if (!K::moe_prefill_reads_fp8(f)) return false;
    *m = f;
    return true;
}

// W8A8 prefill over FP8 experts (MoeOp::quant_act; FROST_MOE_W8A8=0 in the environment turns it
// off, for A/B runs and tests, read at each prefill launch): points m's FP8 stacks at p's experts
// and its e4m3 activation buffers (MoeBf16Params::xq, agq and their scales) into m.act, which a
// prefill launch does not otherwise use (it holds the one-row decode's activations), when all four
// matrices are FP8 in 128 x 128 blocks or per-channel and the tile takes them (K::moe_prefill_w8a8_ok). The
// grouped GEMMs then read the stacks as stored and multiply on FP8 tensor cores, with no
// dequantized tile (35B-A3B FP8, 20 layers, H200: cold TTFT 1k / 16k 9.6 / 101 ms against the
// tile's 24.9 / 164; lm_moe_prefill_tma.cu). False: m unchanged (the exact paths run).
bool moe_w8a8(const MoeOp& p, K::MoeBf16Params* m) {
    if (!p.quant_act || !m->act || util::env_is("FROST_MOE_W8A8", "0")) return false;
    K::MoeBf16Params f = *m;
    if (!moe_fp8_stacks(p, true, &f)) return false;
    if (K::moe_w8a8_scratch_bytes(f) > sizeof(float) * K::moe_act_floats(f)) return false;
    // m.act is 256-byte aligned (moe_carve); each piece starts on a 256-byte unit.
    auto* at = reinterpret_cast<unsigned char*>(f.act);
    const auto take = [&at](size_t bytes) {
        unsigned char* p0 = at;
        at += (bytes + 255) / 256 * 256;
        return p0;
    };
    const int32_t entries = f.max_rows * (f.k + 1);
    f.xq = take(size_t(f.max_rows) * size_t(f.H));
    f.xq_scale = reinterpret_cast<float*>(take(sizeof(float) * K::act_scale_floats(f.max_rows, f.H)));
    f.agq = take(size_t(entries) * size_t(f.I));
    f.agq_scale = reinterpret_cast<float*>(take(sizeof(float) * K::act_scale_floats(entries, f.I)));
    f.fp8 = 2;
    if (!K::moe_prefill_w8a8_ok(f)) return false;
    *m = f;
    return true;
}

// Folds the shared expert's weight `shared` into the routed launch *q as R more entries reading x
// rows x_row0 .. x_row0 + R (the shared expert then costs no launch of its own) when it has the
// routed experts' format, shape and scale layout and the tensor-core kernel takes the launch;
// otherwise leaves *q as it was and answers false.
bool fold_shared_expert(const Tensor& shared, int32_t R, int32_t x_row0, K::GemvQuantParams* q) {
    if (!shared.quantized()) return false;
    K::GemvQuantParams s{};
    if (quant_params(shared, &s) != FROST_OK) return false;
    if (s.format != q->format || s.N != q->N || s.K != q->K || s.block_n != q->block_n || s.block_k != q->block_k ||
        s.group_size != q->group_size || s.nibble_pairs != q->nibble_pairs || s.row_blocks != q->row_blocks)
        return false;
    K::GemvQuantParams f = *q;
    f.routed_entries = q->entries;
    f.entries = q->entries + R;
    f.shared_x_row0 = x_row0;
    f.shared_w = s.w;
    f.shared_scale = s.scale;
    f.shared_zero_point = s.zero_point;
    f.shared_row_global_scale = s.row_global_scale;
    if (!K::gemv_quant_tc_eligible(f)) return false;
    *q = f;
    return true;
}

// Decode over quantized routed experts (rows <= kGemvMaxRows, m carved with *s): the router, then
// the routed experts' gate/up (SwiGLU) and down as quantized GEMVs whose launch entries read
// their expert ids from the router's topk_ids on the device (one captured graph serves every
// routing; only the selected experts' packed bytes are read), the shared expert's gate/up and down
// through op_gemm's own paths (quantized GEMV or bf16 GEMV) or folded into the routed launches
// (fold_shared_expert), and the weighted mix into y. Chained by programmatic dependent launch like
// the bf16 decode. A row's arithmetic does not depend on the other rows: batched members keep
// their solo bits.
frost_status moe_quant_decode(const Exec& ex, const MoeOp& p, const K::MoeBf16Params& m, const MoeQuantScratch& s) {
    const int32_t R = m.max_rows, H = m.H, k = m.k;
    FROST_TRY(check(K::moe_router_launch(m, native(ex)), "moe (router)"));
    K::GemvQuantParams gu{};
    FROST_TRY(quant_params(p.experts_gate_up, &gu));
    gu.N = 2 * m.I;  // per expert; the weight stacks E of them
    gu.x = m.x; gu.ldx = H; gu.M = 1;
    gu.expert_ids = m.topk_ids; gu.entries = R * k; gu.x_entry_div = k;
    gu.swiglu = 1; gu.y = s.act; gu.ldy = m.I; gu.pdl = m.pdl;
    K::GemvQuantParams dn{};
    FROST_TRY(quant_params(p.experts_down, &dn));
    dn.N = H;
    dn.x = s.act; dn.ldx = m.I; dn.M = 1;
    dn.expert_ids = m.topk_ids; dn.entries = R * k; dn.x_entry_div = 1;
    dn.out_f32 = 1; dn.y = s.routed; dn.ldy = H; dn.pdl = m.pdl;
    // The shared expert as R more entries of both launches where its weights allow it (Is = I):
    // gate/up writes its activations to act_s (= act row R * k), down reads them there and writes
    // `shared` (= routed row R * k). Each entry keeps the bits of the shared expert's own GEMV.
    // FROST_MOE_SHARED_FOLD=0 keeps the shared expert's own launches (A/B runs; read once).
    static const bool fold_on = !util::env_is("FROST_MOE_SHARED_FOLD", "0");
    K::GemvQuantParams gu_f = gu, dn_f = dn;
    const bool fold = fold_on && m.Is == m.I && fold_shared_expert(p.shared_gate_up, R, 0, &gu_f) &&
                      fold_shared_expert(p.shared_down, R, R * k, &dn_f);
    FROST_TRY(check(K::gemv_quant_launch(fold ? gu_f : gu, native(ex)), "moe (routed gate_up, quantized gemv)"));
    // Folded: the down projection and the mix in one launch (gemv_quant_moe_down_launch: the bits
    // of the down GEMV's 8-warp form + moe_combine). FROST_MOE_DOWN_MIX=0 keeps the two launches,
    // FROST_MOE_EARLY_IDS=1 loads the experts' down weights before the PDL wait (the router wrote
    // the ids before the gate/up launch): A/B runs, read once.
    static const bool mix_on = !util::env_is("FROST_MOE_DOWN_MIX", "0");
    static const bool early_ids = util::env_is("FROST_MOE_EARLY_IDS", "1");
    K::GemvQuantMoeMix mix{m.topk_w, m.shared_w, m.out_bf16, R, k, H, early_ids ? 1 : 0};
    if (fold && mix_on && K::gemv_quant_moe_down_eligible(dn_f, mix))
        return check(K::gemv_quant_moe_down_launch(dn_f, mix, native(ex)), "moe (routed down and mix, quantized gemv)");
    FROST_TRY(check(K::gemv_quant_launch(fold ? dn_f : dn, native(ex)), "moe (routed down, quantized gemv)"));
    if (fold) {
        K::MoeCombineParams c{s.routed, s.shared, m.topk_w, m.shared_w, m.out_bf16, R, k, H, m.pdl};
        return check(K::moe_combine_launch(c, native(ex)), "moe (combine)");
    }
    GemmOp sg;
    sg.x = mat(p.x.data, DType::BF16, R, H, H);
    sg.w = p.shared_gate_up;
    sg.y = mat(s.act_s, DType::BF16, R, m.Is, m.Is);
    sg.epilogue = Epilogue::SwiGLU;
    sg.pdl = m.pdl;
    FROST_TRY(gemm(ex, sg));
    GemmOp sd;
    sd.x = sg.y;
    sd.w = p.shared_down;
    sd.y = mat(s.shared, DType::F32, R, H, H);
    sd.pdl = m.pdl;
    FROST_TRY(gemm(ex, sd));
    K::MoeCombineParams c{s.routed, s.shared, m.topk_w, m.shared_w, m.out_bf16, R, k, H, m.pdl};
    return check(K::moe_combine_launch(c, native(ex)), "moe (combine)");
}

// Decode (one row): router logits, then the expert GEMVs routing from them on the device, so
// one captured decode graph follows every step's routing. Prefill: tokens grouped by expert in
// the fixed-capacity buffers of `work` and grouped tensor-core GEMMs. Both add into y. Quantized
// experts (kept so by the weight table): decode through moe_quant_decode, prefill on their bf16
// dequantization (moe_dequantize).
frost_status moe(const Exec& ex, const MoeOp& p) {
    for (const Tensor* t : {&p.x, &p.y, &p.router, &p.shared_gate})
        if (t->dtype != DType::BF16)
            return fail(FROST_ERR_UNSUPPORTED, "op_moe (cuda): activations, router and shared gate must be bf16 views, got %s",
                        dtype_name(t->dtype));
    for (const Tensor* t : {&p.experts_gate_up, &p.experts_down, &p.shared_gate_up, &p.shared_down})
        if (t->dtype != DType::BF16 && !t->quantized())
            return fail(FROST_ERR_UNSUPPORTED, "op_moe (cuda): expert weights must be bf16 or quantized views, got %s",
                        dtype_name(t->dtype));
    NEED(p.work, DType::F32, "moe");
    K::MoeBf16Params m{};
    // Quantized views' packed data stand in until moe_dequantize (the router kernels only check
    // that every pointer is set and aligned; the quantized decode reads them through its GEMVs).
    m.x = B(p.x); m.router = B(p.router); m.experts_gate_up = static_cast<const bf16*>(p.experts_gate_up.data);
    m.experts_down = static_cast<const bf16*>(p.experts_down.data);
    m.shared_gate_up = static_cast<const bf16*>(p.shared_gate_up.data);
    m.shared_down = static_cast<const bf16*>(p.shared_down.data); m.shared_gate = B(p.shared_gate);
    m.probs = F(p.probs); m.topk_ids = p.topk_ids.as<int32_t>(); m.topk_w = F(p.topk_w);
    m.out = nullptr; m.out_bf16 = B(p.y); m.accumulate = 1;
    m.H = int32_t(p.x.shape[1]); m.E = p.E; m.k = p.k; m.I = p.I; m.Is = p.Is; m.norm_topk = p.norm_topk;
    m.max_rows = p.rows.max; m.n_rows = p.rows.n;
    if (ex.backend && ex.backend->chunk_invariant()) m.tile_shape = K::moe_prefill_invariant_tile_shape();
    // Align the carve's base up to 256 bytes (moe_work_floats left room for it).
    const uintptr_t raw = reinterpret_cast<uintptr_t>(F(p.work));
    float* base = reinterpret_cast<float*>((raw + 255) / 256 * 256);
    MoeQuantScratch qs;
    if (moe_carve(m, base, &qs) > size_t(p.work.numel()))
        return fail(FROST_ERR_INVALID_ARG, "op_moe (cuda): work holds %lld floats, needs %zu", (long long)p.work.numel(),
                    moe_carve(m, nullptr));
    // Decode rows (1, or a batched decode step's <= 8 members; prefill buckets are >= 64 rows) take
    // the per-row decode kernels, whose arithmetic for a row does not depend on the other rows, so a
    // batched member's bits equal its solo step's. Prefill groups the rows by expert.
    const bool decode = p.rows.max <= K::kGemvMaxRows;
    // Decode: launches chained by programmatic dependent launch (never on the legacy stream).
    // Measured and dropped for prefill (H200, 2026-12-01, thirty-eighth session): the chain after
    // the router logits (select, count, scan, scatter, the two TMA GEMMs, the combine) each
    // waiting for its predecessor, then triggering its successor. Same bits (a captured-graph
    // test against plain launches passed), 35B-A3B shape, 20 layers, four rounds alternating,
    // 4k 28.39-29.05 (plain) against 28.87-29.22 ms, 16k 118.79-119.35 against 118.78-119.82
    // (an earlier call's two rounds, 28.64 / 28.91 against 28.21 / 28.08, were noise); Qwen3-Next
    // shape flat. As with the dense prefill kernels (docs/benchmark-history.md), nothing to gain.
    m.pdl = decode && native(ex) != nullptr ? 1 : 0;
    if (decode && moe_routed_quantized(p)) return moe_quant_decode(ex, p, m, qs);
    if (moe_any_quantized(p) && (decode || !(moe_w8a8(p, &m) || moe_fp8_direct(p, &m))))
        FROST_TRY(moe_dequantize(ex, p, &m));
    if (!decode) {
        // The router logits as the engine's dense GEMM (cuBLASLt, fp32 out, planned per shape like
        // every projection), then the prefill router starts at its select. The MoE kernel's own
        // logits tiles (32 x 128, mma.sync) re-read the router matrix per row tile: H200, 35B-A3B
        // shape, 20 layers, alternating processes, 1k / 4k / 16k 13.33-13.34 / 29.37-29.58 /
        // 122.97-123.36 -> 13.11 / 28.75-29.40 / 121.58-121.69 ms (2026-12-01).
        // Measured and dropped (H200, 2026-12-01, thirty-eighth session): the shared expert as dense
        // GEMMs (cuBLASLt gate|up, SwiGLU, down) on a second stream forked here, beside the router
        // and the grouping, joined before the combine, so the grouped GEMMs streamed only the
        // routed experts (its 32 of ~410 row tiles at 4096 rows). Tests passed (125 MoE and capsule
        // tests), but 1k / 4k / 16k, two rounds alternating: 12.97-12.99 / 28.23-28.52 /
        // 116.37-116.89 -> 13.13-13.14 / 28.40-28.48 / 115.32-117.60 ms, peak +0.6 GB; Qwen3-Next
        // shape (12 layers) 4k / 16k 20.84-21.29 / 80.74-81.17 -> 21.10-21.37 / 80.84-81.52. Most
        // likely the branches ran one after the other: a cuBLASLt tile holds a whole SM (registers
        // and shared memory), so the router's small launches queue behind the shared GEMMs.
        // Into scratch (moe_carve): the GEMM computes every row of the bucket, and probs past the
        // valid rows must stay as they were (the op contract; the backend-op parity test poisons them).
        GemmOp lg;
        lg.x = mat(p.x.data, DType::BF16, m.max_rows, m.H, p.x.stride[0]);
        lg.y = mat(m.logits, DType::F32, m.max_rows, m.E, m.E);
        FROST_TRY(gemm_bf16(ex, lg, p.router));
        return check(K::moe_prefill_launch(m, native(ex)), "moe");
    }
    m.sync = ex.backend ? static_cast<CudaBackend*>(ex.backend)->moe_sync() : nullptr;
    return check(K::moe_decode_launch(m, native(ex)), "moe");
}

const OpTable& cuda_op_table() {
    static const OpTable t = [] {
        OpTable o;
        o.embed = embed;
        o.add_rmsnorm = add_rmsnorm;
        o.qk_norm_rope = qk_norm_rope;
        o.conv1d_silu_l2 = conv1d_silu_l2;
        o.gdn_gate = gdn_gate;
        o.gdn_chunk = gdn_chunk;
        o.gdn_step = gdn_step;
        o.gated_rmsnorm = gated_rmsnorm;
        o.kv_append = kv_append;
        o.attention_prefill = attention_prefill;
        o.attention_decode = attention_decode;
        o.gemm = gemm;
        o.swiglu = swiglu;
        o.sample = sample;
        o.cursor = cursor;
        o.moe = moe;
        o.gdn_decode = gdn_decode;
        o.qk_rope_kv_append = qk_rope_kv_append;
        o.tail_row = tail_row;
        return o;
    }();
    return t;
}

}  // namespace

frost_status make_cuda_backend(frost_ctx* ctx, frost_stream*, std::unique_ptr<Backend>* out) {
    auto b = std::make_unique<CudaBackend>();
    FROST_TRY(b->init(ctx));
    *out = std::move(b);
    return FROST_OK;
}

#endif  // FROST_WITH_CUDA

}  // namespace frost::ops
