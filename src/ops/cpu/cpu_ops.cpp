// The CPU op table: every op composes the fp32 reference kernels of src/kernels/cpu, run as a host
// node from a copy of the params (frost_launch_host), so a captured CPU graph replays it. Fused
// ops call the reference kernels in the order the unfused CPU forward did, so CPU numerics are the
// reference's bit for bit. bf16 views (parity tests) are widened to fp32 over their index space
// and written back rounded to bf16 after the kernel ran.
#include <cstring>
#include <vector>

#include "exec/error.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/moe.h"
#include "ops/ops.h"
#include "util/bf16.h"
#include "util/fp8.h"

namespace frost::ops {
namespace {

namespace K = kernels;

// fp32 views of an op's tensors: f32 views pass through; bf16 views are widened into owned
// buffers with the same strides; views marked written are narrowed back by finish().
class Widen {
public:
    float* in(const Tensor& t) { return get(t, false); }
    float* out(const Tensor& t) { return get(t, true); }
    frost_status status() const { return status_; }
    // Writes every widened output back in its own dtype (rounded to nearest even for bf16).
    void finish() {
        for (auto& o : outs_) visit(o.t, [&](int64_t off) {
            static_cast<uint16_t*>(o.t.data)[off] = util::f32_to_bf16(o.f[off]);
        });
    }

private:
    struct Out {
        Tensor t;
        float* f;
    };
    template <class F>
    static void visit(const Tensor& t, F&& f) {
        int64_t idx[kMaxRank] = {};
        const int64_t n = t.numel();
        for (int64_t i = 0; i < n; ++i) {
            int64_t off = 0;
            for (int d = 0; d < t.rank; ++d) off += idx[d] * t.stride[d];
            f(off);
            for (int d = t.rank - 1; d >= 0; --d) {
                if (++idx[d] < t.shape[d]) break;
                idx[d] = 0;
            }
        }
    }
    float* get(const Tensor& t, bool written) {
        if (t.empty()) return nullptr;
        if (t.dtype == DType::F32) return t.as<float>();
        if (t.dtype != DType::BF16) {
            status_ = fail(FROST_ERR_UNSUPPORTED, "cpu ops: dtype %s is not supported by the reference kernels",
                           dtype_name(t.dtype));
            return nullptr;
        }
        bufs_.emplace_back(size_t(t.span()), 0.0f);
        float* f = bufs_.back().data();
        const uint16_t* src = t.as<const uint16_t>();
        visit(t, [&](int64_t off) { f[off] = util::bf16_to_f32(src[off]); });
        if (written) outs_.push_back({t, f});
        return f;
    }
    std::vector<std::vector<float>> bufs_;
    std::vector<Out> outs_;
    frost_status status_ = FROST_OK;
};

frost_status named(frost_status st, const char* op) {
    if (st == FROST_OK) return st;
    return fail(st, "op_%s (cpu): kernel rejected its inputs (%s)", op, frost_status_name(st));
}

const int32_t* cursor_rows(const StepCursor* c) { return &c->n_tokens; }

// The FP8 twin of an op's output y (after the op wrote it): its valid rows, from the values y
// holds (bf16 views as stored), quantized as GemmOp::quant_act quantizes them.
frost_status write_twin(const Fp8Act& t, const Tensor& y, const Rows& rows, const char* op) {
    const int32_t n = K::cpu::launch_rows(rows.n, rows.max);
    const int64_t cols = y.shape[1];
    if (!t.fits(rows.max, cols))
        return fail(FROST_ERR_INVALID_ARG, "op_%s (cpu): yq must be an Fp8Act of [%d, %lld] (K a multiple of 128)", op,
                    rows.max, (long long)cols);
    std::vector<float> v(size_t(n) * size_t(cols));
    for (int32_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t off = r * y.stride[0] + c;
            v[size_t(r) * cols + c] =
                y.dtype == DType::BF16 ? util::bf16_to_f32(y.as<const uint16_t>()[off]) : y.as<const float>()[off];
        }
    return named(K::cpu::quantize_act_e4m3_bytes(v.data(), n, int32_t(cols), cols, t.q.as<uint8_t>(),
                                                 t.scale.as<float>(), t.scale.stride[0]),
                 op);
}

frost_status run(const QkNormRopeOp& p);
frost_status run(const Conv1dSiluL2Op& p);
frost_status run(const GdnStepOp& p);
frost_status run(const KvAppendOp& p);
frost_status run(const AttentionOp& p);
frost_status run(const GemmOp& p);

// Batched decode (ops.h BatchSlots): row r of a view as a one-row view.
Tensor row_of(const Tensor& t, int64_t r) {
    if (t.empty()) return t;
    Tensor o = t.offset(r * t.stride[0]);
    o.shape[0] = 1;
    return o;
}

// A state view of the member in row r: the op's view (shape, dtype) at the member's pointer from
// the session table; empty for a padding row or a slot outside the table.
Tensor member_state(const BatchSlots& b, int32_t r, const Tensor& like, int32_t col_offset = 0) {
    const int32_t slot = b.slots[r];
    if (slot < 0 || slot >= b.sessions) return Tensor{};
    Tensor t = like;
    t.data = b.table[int64_t(slot) * b.stride + b.column + col_offset];
    return t;
}

// Runs a batched op as B one-member launches of the same op, in row order: each row's result
// is the solo op's on that member's state and cursor, so a member's bits do not depend on who
// else is in the batch (the batched-vs-solo engine tests check exactly that).
template <class P, class F>
frost_status per_member(const P& p, F&& one_row) {
    for (int32_t r = 0; r < p.batch.B; ++r) {
        P q = p;
        q.batch = BatchSlots{};
        if (!one_row(r, q)) continue;  // padding row: nothing to do
        FROST_TRY(run(q));
    }
    return FROST_OK;
}

frost_status run(const EmbedOp& p) {
    Widen w;
    K::EmbedParams e{};
    e.table = p.table.data;
    if (p.table.dtype != DType::F32 && p.table.dtype != DType::BF16)
        return fail(FROST_ERR_UNSUPPORTED, "op_embed (cpu): table dtype %s", dtype_name(p.table.dtype));
    e.table_type = p.table.dtype == DType::BF16 ? K::WeightType::BF16 : K::WeightType::F32;
    e.ids = p.ids;
    e.y = w.out(p.y);
    e.vocab = int32_t(p.table.shape[0]);
    e.dim = int32_t(p.table.shape[1]);
    e.max_rows = p.rows.max;
    e.n_rows = p.rows.n;
    FROST_TRY(w.status());
    FROST_TRY(named(K::cpu::embed(e), "embed"));
    w.finish();
    return FROST_OK;
}

frost_status run(const AddRmsNormOp& p) {
    Widen w;
    float* h = p.delta.empty() ? w.in(p.h) : w.out(p.h);
    const float* delta = w.in(p.delta);
    K::RmsNormParams r{};
    r.x = h;
    r.w = w.in(p.w);
    r.y = w.out(p.y);
    FROST_TRY(w.status());
    const int64_t dim = p.h.shape[1];
    if (delta) {
        const int32_t rows = K::cpu::launch_rows(p.rows.n, p.rows.max);
        for (int32_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < dim; ++j) h[i * p.h.stride[0] + j] += delta[i * p.delta.stride[0] + j];
    }
    r.x_row_stride = p.h.stride[0];
    r.y_row_stride = p.y.stride[0];
    r.dim = int32_t(dim);
    r.heads = 1;
    r.zero_centred = p.zero_centred;
    r.eps = p.eps;
    r.max_rows = p.rows.max;
    r.n_rows = p.rows.n;
    r.last_row_only = p.last_row_only;
    FROST_TRY(named(K::cpu::rmsnorm(r), "add_rmsnorm"));
    w.finish();
    if (p.yq.on()) {
        if (p.last_row_only) return fail(FROST_ERR_INVALID_ARG, "op_add_rmsnorm (cpu): no yq with last_row_only");
        FROST_TRY(write_twin(p.yq, p.y, p.rows, "add_rmsnorm"));
    }
    return FROST_OK;
}

frost_status run(const QkNormRopeOp& p) {
    if (p.batch.on())  // every row, padding included (its zeroed cursor is position 0)
        return per_member(p, [&](int32_t r, QkNormRopeOp& q) {
            q.q = row_of(p.q, r); q.k = row_of(p.k, r); q.max_rows = 1; q.cursor = &p.batch.cursors[r];
            return true;
        });
    Widen w;
    float* q = w.out(p.q);
    float* k = w.out(p.k);
    const float* qw = w.in(p.q_w);
    const float* kw = w.in(p.k_w);
    FROST_TRY(w.status());
    const int32_t d = int32_t(p.q.shape[2]);
    K::RmsNormParams qn{};
    qn.x = q; qn.y = q; qn.w = qw;
    qn.x_row_stride = qn.y_row_stride = p.q.stride[0];
    qn.x_head_stride = qn.y_head_stride = p.q.stride[1];
    qn.dim = d; qn.heads = int32_t(p.q.shape[1]); qn.zero_centred = 1; qn.eps = p.eps;
    qn.max_rows = p.max_rows; qn.n_rows = cursor_rows(p.cursor);
    FROST_TRY(named(K::cpu::rmsnorm(qn), "qk_norm_rope"));
    K::RmsNormParams kn = qn;
    kn.x = k; kn.y = k; kn.w = kw;
    kn.x_row_stride = kn.y_row_stride = p.k.stride[0];
    kn.x_head_stride = kn.y_head_stride = p.k.stride[1];
    kn.heads = int32_t(p.k.shape[1]);
    FROST_TRY(named(K::cpu::rmsnorm(kn), "qk_norm_rope"));
    K::RopeParams rq{};
    rq.x = q; rq.row_stride = p.q.stride[0]; rq.head_stride = p.q.stride[1]; rq.heads = int32_t(p.q.shape[1]);
    rq.head_dim = d; rq.rotary_dim = p.rotary_dim; rq.theta = p.theta; rq.inv_freq_bf16 = p.inv_freq_bf16;
    rq.max_rows = p.max_rows; rq.cursor = p.cursor;
    FROST_TRY(named(K::cpu::rope(rq), "qk_norm_rope"));
    K::RopeParams rk = rq;
    rk.x = k; rk.row_stride = p.k.stride[0]; rk.head_stride = p.k.stride[1]; rk.heads = int32_t(p.k.shape[1]);
    FROST_TRY(named(K::cpu::rope(rk), "qk_norm_rope"));
    w.finish();
    return FROST_OK;
}

frost_status run(const Conv1dSiluL2Op& p) {
    if (p.batch.on())
        return per_member(p, [&](int32_t r, Conv1dSiluL2Op& q) {
            q.state = member_state(p.batch, r, p.state);
            q.x = row_of(p.x, r); q.y = row_of(p.y, r); q.rows = Rows{1, nullptr};
            return !q.state.empty();
        });
    Widen w;
    K::Conv1dParams c{};
    c.x = w.in(p.x);
    c.w = w.in(p.w);
    c.state = w.out(p.state);
    c.y = w.out(p.y);
    FROST_TRY(w.status());
    c.x_row_stride = p.x.stride[0];
    c.channels = int32_t(p.w.shape[0]);
    c.kernel = int32_t(p.w.shape[1]);
    c.max_rows = p.rows.max;
    c.n_rows = p.rows.n;
    FROST_TRY(named(K::cpu::conv1d(c), "conv1d_silu_l2"));
    if (p.l2_dim > 0) {
        K::L2NormParams qn{};
        qn.x = c.y; qn.row_stride = p.y.stride[0]; qn.heads = p.l2_q_heads; qn.dim = p.l2_dim; qn.eps = p.l2_eps;
        qn.scale = p.q_scale; qn.max_rows = p.rows.max; qn.n_rows = p.rows.n;
        if (qn.heads > 0) FROST_TRY(named(K::cpu::l2norm(qn), "conv1d_silu_l2"));
        K::L2NormParams kn = qn;
        kn.x = c.y + int64_t(p.l2_q_heads) * p.l2_dim; kn.heads = p.l2_heads - p.l2_q_heads; kn.scale = 1.0f;
        if (kn.heads > 0) FROST_TRY(named(K::cpu::l2norm(kn), "conv1d_silu_l2"));
    }
    w.finish();
    return FROST_OK;
}

K::GdnGateParams gate_params(Widen& w, const Tensor& b, const Tensor& a, const Tensor& A_log, const Tensor& dt,
                             const Tensor& beta, const Tensor& g, int32_t max_rows, const int32_t* n) {
    K::GdnGateParams gp{};
    gp.b = w.in(b); gp.a = w.in(a); gp.A_log = w.in(A_log); gp.dt_bias = w.in(dt);
    gp.beta = w.out(beta); gp.g = w.out(g);
    gp.in_row_stride = a.stride[0]; gp.heads = int32_t(a.shape[1]); gp.max_rows = max_rows; gp.n_rows = n;
    return gp;
}

frost_status run(const GdnGateOp& p) {
    Widen w;
    const K::GdnGateParams gp = gate_params(w, p.b, p.a, p.A_log, p.dt_bias, p.beta, p.g, p.rows.max, p.rows.n);
    FROST_TRY(w.status());
    FROST_TRY(named(K::cpu::gdn_gates(gp), "gdn_gate"));
    w.finish();
    return FROST_OK;
}

K::GdnParams gdn_params(Widen& w, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                        const Tensor& g, const Tensor& state, const Tensor& o, int32_t max_rows,
                        const StepCursor* cursor) {
    K::GdnParams d{};
    d.q = w.in(q); d.k = w.in(k); d.v = w.in(v); d.beta = w.in(beta); d.g = w.in(g);
    d.state = w.out(state); d.o = w.out(o);
    d.qk_row_stride = q.stride[0];
    d.Hk = int32_t(q.shape[1]); d.Hv = int32_t(v.shape[1]); d.dk = int32_t(q.shape[2]); d.dv = int32_t(v.shape[2]);
    d.chunk = 64; d.max_rows = max_rows; d.cursor = cursor;
    return d;
}

frost_status run(const GdnChunkOp& p) {
    if (!p.gate.b.empty()) FROST_TRY(run(p.gate));  // the gate kernel first, into beta / g
    Widen w;
    K::GdnParams d = gdn_params(w, p.q, p.k, p.v, p.beta, p.g, p.state, p.o, p.max_rows, p.cursor);
    d.chunk = p.chunk;
    FROST_TRY(w.status());
    FROST_TRY(named(K::cpu::gdn_chunked(d), "gdn_chunk"));
    w.finish();
    return FROST_OK;
}

// Gate then recurrence: the two reference kernels the unfused forward ran, in that order.
frost_status run(const GdnStepOp& p) {
    if (p.batch.on())
        return per_member(p, [&](int32_t r, GdnStepOp& q) {
            q.state = member_state(p.batch, r, p.state);
            q.q = row_of(p.q, r); q.k = row_of(p.k, r); q.v = row_of(p.v, r); q.o = row_of(p.o, r);
            q.b = row_of(p.b, r); q.a = row_of(p.a, r); q.beta = row_of(p.beta, r); q.g = row_of(p.g, r);
            q.max_rows = 1; q.cursor = &p.batch.cursors[r];
            return !q.state.empty();
        });
    Widen w;
    const K::GdnGateParams gp =
        gate_params(w, p.b, p.a, p.A_log, p.dt_bias, p.beta, p.g, p.max_rows, cursor_rows(p.cursor));
    const K::GdnParams d = gdn_params(w, p.q, p.k, p.v, p.beta, p.g, p.state, p.o, p.max_rows, p.cursor);
    FROST_TRY(w.status());
    FROST_TRY(named(K::cpu::gdn_gates(gp), "gdn_step"));
    FROST_TRY(named(K::cpu::gdn_recurrent(d), "gdn_step"));
    w.finish();
    return FROST_OK;
}

frost_status run(const GatedRmsNormOp& p) {
    Widen w;
    K::GatedRmsNormParams g{};
    g.x = w.in(p.x); g.z = w.in(p.z); g.w = w.in(p.w); g.y = w.out(p.y);
    FROST_TRY(w.status());
    g.z_row_stride = p.z.stride[0]; g.dim = p.dim; g.heads = p.heads; g.eps = p.eps;
    g.max_rows = p.rows.max; g.n_rows = p.rows.n;
    FROST_TRY(named(K::cpu::gated_rmsnorm(g), "gated_rmsnorm"));
    w.finish();
    if (p.yq.on()) FROST_TRY(write_twin(p.yq, p.y, p.rows, "gated_rmsnorm"));
    return FROST_OK;
}

// The GDN decode step: the gate projections (when given) and the three reference ops in order
// (the CUDA backend runs them as one launch).
frost_status run(const GdnDecodeOp& p) {
    if (p.gates.w.data) FROST_TRY(run(p.gates));
    FROST_TRY(run(p.conv));
    FROST_TRY(run(p.step));
    return run(p.norm);
}

frost_status run(const KvAppendOp& p) {
    if (p.batch.on())
        return per_member(p, [&](int32_t r, KvAppendOp& q) {
            q.k_cache = member_state(p.batch, r, p.k_cache);
            q.v_cache = member_state(p.batch, r, p.v_cache, 1);
            q.k = row_of(p.k, r); q.v = row_of(p.v, r); q.max_rows = 1; q.cursor = &p.batch.cursors[r];
            return !q.k_cache.empty();
        });
    Widen w;
    K::KvAppendParams k{};
    k.k = w.in(p.k); k.v = w.in(p.v); k.k_cache = w.out(p.k_cache); k.v_cache = w.out(p.v_cache);
    FROST_TRY(w.status());
    k.src_row_stride = p.k.stride[0]; k.kv_dim = int32_t(p.k.shape[1]); k.max_seq = int32_t(p.k_cache.shape[0]);
    k.max_rows = p.max_rows; k.cursor = p.cursor;
    FROST_TRY(named(K::cpu::kv_append(k), "kv_append"));
    w.finish();
    return FROST_OK;
}

// Decode's attention inputs: the two reference ops in order (CUDA runs them as one launch).
frost_status run(const QkRopeKvAppendOp& p) {
    FROST_TRY(run(p.qk));
    return run(p.kv);
}

frost_status run(const AttentionOp& p) {
    if (p.batch.on())
        return per_member(p, [&](int32_t r, AttentionOp& q) {
            q.k_cache = member_state(p.batch, r, p.k_cache);
            q.v_cache = member_state(p.batch, r, p.v_cache, 1);
            q.q = row_of(p.q, r); q.gate = row_of(p.gate, r); q.o = row_of(p.o, r);
            q.max_rows = 1; q.cursor = &p.batch.cursors[r];
            if (q.k_cache.empty())  // padding row: a defined (zero) output, never stale bits
                for (int64_t j = 0; j < p.o.shape[1]; ++j) {
                    if (p.o.dtype == DType::F32) q.o.as<float>()[j] = 0.0f;
                    else static_cast<uint16_t*>(q.o.data)[j] = 0;
                }
            return !q.k_cache.empty();
        });
    Widen w;
    K::AttentionParams a{};
    a.q = w.in(p.q); a.gate = w.in(p.gate); a.k_cache = w.in(p.k_cache); a.v_cache = w.in(p.v_cache);
    a.o = w.out(p.o);
    FROST_TRY(w.status());
    a.q_row_stride = p.q.stride[0]; a.q_head_stride = p.q.stride[1];
    a.Hq = int32_t(p.q.shape[1]); a.Hkv = int32_t(p.k_cache.shape[1]); a.head_dim = int32_t(p.q.shape[2]);
    a.scale = p.scale; a.max_seq = int32_t(p.k_cache.shape[0]); a.max_rows = p.max_rows; a.cursor = p.cursor;
    FROST_TRY(named(K::cpu::attention(a), "attention"));
    w.finish();
    return FROST_OK;
}

frost_status run(const GemmOp& p) {
    Widen w;
    const bool swiglu = p.epilogue == Epilogue::SwiGLU;
    if (swiglu && p.tmp.empty())
        return fail(FROST_ERR_INVALID_ARG, "op_gemm (cpu): the SwiGLU epilogue needs a tmp [M, 2F] view");
    K::GemmParams g{};
    g.x = w.in(p.x);
    g.w = w.in(p.w);
    g.y = swiglu ? w.out(p.tmp) : w.out(p.y);
    float* act = swiglu ? w.out(p.y) : nullptr;
    FROST_TRY(w.status());
    g.ldx = p.x.stride[0];
    if (p.xq_only && !(p.quant_act && p.xq.on()))
        return fail(FROST_ERR_INVALID_ARG, "op_gemm (cpu): xq_only needs quant_act and xq (x was never written)");
    std::vector<float> xq;  // W8A8: the activations as the FP8 GEMM sees them (a copy: x is the caller's)
    if (p.quant_act && p.xq.on()) {  // quantized by x's producer: its twin, decoded
        const int32_t M = int32_t(p.x.shape[0]), Kd = int32_t(p.x.shape[1]);
        if (!p.xq.fits(M, Kd))
            return fail(FROST_ERR_INVALID_ARG, "op_gemm (cpu): xq must be an Fp8Act of [%d, %d]", M, Kd);
        xq.resize(size_t(M) * size_t(Kd));
        const uint8_t* q = p.xq.q.as<const uint8_t>();
        const float* sc = p.xq.scale.as<const float>();
        const int64_t ld = p.xq.scale.stride[0];
        for (int32_t r = 0; r < M; ++r)
            for (int32_t k = 0; k < Kd; ++k)
                xq[size_t(r) * Kd + k] = util::e4m3_to_f32(q[size_t(r) * Kd + k]) * sc[(k / 128) * ld + r];
        g.x = xq.data();
        g.ldx = Kd;
    } else if (p.quant_act) {
        const int32_t M = int32_t(p.x.shape[0]), Kd = int32_t(p.x.shape[1]);
        xq.resize(size_t(M) * size_t(Kd));
        for (int32_t r = 0; r < M; ++r) std::memcpy(&xq[size_t(r) * Kd], g.x + r * g.ldx, sizeof(float) * size_t(Kd));
        if (K::cpu::quantize_act_e4m3(xq.data(), M, Kd, Kd) != FROST_OK)
            return fail(FROST_ERR_INVALID_ARG, "op_gemm (cpu): quant_act needs K a multiple of 128, got %d", Kd);
        g.x = xq.data();
        g.ldx = Kd;
    }
    g.ldy = swiglu ? p.tmp.stride[0] : p.y.stride[0];
    g.K = int32_t(p.x.shape[1]);
    g.N = int32_t(p.w.shape[0]);
    g.max_rows = int32_t(p.x.shape[0]);
    g.n_rows = p.n_rows;
    g.accumulate = p.epilogue == Epilogue::Residual ? 1 : 0;
    FROST_TRY(named(K::cpu::gemm(g), "gemm"));
    if (swiglu) {
        K::SwigluParams s{};
        s.x = g.y; s.y = act; s.F = int32_t(p.y.shape[1]); s.max_rows = g.max_rows; s.n_rows = p.n_rows;
        FROST_TRY(named(K::cpu::swiglu(s), "gemm+swiglu"));
    }
    w.finish();
    return FROST_OK;
}

frost_status run(const SwigluOp& p) {
    Widen w;
    K::SwigluParams s{};
    s.x = w.in(p.x); s.y = w.out(p.y);
    FROST_TRY(w.status());
    s.F = int32_t(p.y.shape[1]); s.max_rows = p.rows.max; s.n_rows = p.rows.n;
    FROST_TRY(named(K::cpu::swiglu(s), "swiglu"));
    w.finish();
    if (p.yq.on()) FROST_TRY(write_twin(p.yq, p.y, p.rows, "swiglu"));
    return FROST_OK;
}

frost_status run(const SampleOp& p) {
    if (p.work_idx.empty() || p.work_idx.dtype != DType::I32)
        return fail(FROST_ERR_INVALID_ARG, "op_sample (cpu): work_idx must be an i32 view of sample_idx_ints()");
    K::SampleParams s{};
    s.logits = p.logits.as<const float>(); s.row_stride = p.logits.stride[0]; s.vocab = int32_t(p.logits.shape[1]);
    s.select_last_row = p.select_last_row; s.n_rows = p.n_rows;
    s.work = p.work.as<float>(); s.work_idx = p.work_idx.as<int32_t>(); s.cursor = p.cursor; s.out_token = p.out_token;
    s.settings = p.settings; s.counts = p.counts; s.seen = p.seen; s.mask = p.mask; s.ids = p.ids;
    s.count_inputs = p.count_inputs; s.record = p.record;
    return named(K::cpu::sample(s), "sample");
}

// Batched: decode_begin gathers each member's cursor (column 0 of the table) into
// batch.cursors[r] first, advance writes it back after; a padding row runs on a zeroed (greedy,
// position 0) cursor that is never written back.
frost_status run(const CursorOpParams& p) {
    if (!p.batch.on()) {
        K::CursorParams c{p.cursor, p.ids, p.op};
        return named(K::cpu::cursor_op(c), "cursor");
    }
    const BatchSlots& b = p.batch;
    for (int32_t r = 0; r < b.B; ++r) {
        const int32_t slot = b.slots[r];
        const bool member = slot >= 0 && slot < b.sessions;
        StepCursor* own = member ? static_cast<StepCursor*>(b.table[int64_t(slot) * b.stride]) : nullptr;
        StepCursor& c = b.cursors[r];
        if (p.op == kCursorDecodeBegin) {
            if (member) std::memcpy(&c, own, sizeof c);
            else std::memset(&c, 0, sizeof c);
        }
        K::CursorParams cp{&c, p.ids ? p.ids + r : nullptr, p.op};
        FROST_TRY(named(K::cpu::cursor_op(cp), "cursor"));
        if (p.op == kCursorAdvance && member) std::memcpy(own, &c, sizeof c);
    }
    return FROST_OK;
}

// Bytes moved as they are (any dtype), so no widening.
frost_status run(const TailRowOp& p) {
    const K::TailRowParams t = tail_row_params(p);
    return named(K::cpu::tail_row(t), "tail_row");
}

// The reference MoE (kernels/cpu/moe.h) over widened views; probs / ids / weights are f32 / i32.
frost_status run(const MoeOp& p) {
    if (p.topk_ids.dtype != DType::I32)
        return fail(FROST_ERR_INVALID_ARG, "op_moe (cpu): topk_ids must be an i32 view");
    Widen w;
    K::MoeParams m{};
    m.x = w.in(p.x); m.y = w.out(p.y); m.router = w.in(p.router);
    m.experts_gate_up = w.in(p.experts_gate_up); m.experts_down = w.in(p.experts_down);
    m.shared_gate_up = w.in(p.shared_gate_up); m.shared_down = w.in(p.shared_down); m.shared_gate = w.in(p.shared_gate);
    m.probs = w.out(p.probs); m.topk_w = w.out(p.topk_w); m.work = w.out(p.work);
    FROST_TRY(w.status());
    m.topk_ids = p.topk_ids.as<int32_t>();
    m.H = int32_t(p.x.shape[1]); m.E = p.E; m.k = p.k; m.I = p.I; m.Is = p.Is; m.norm_topk = p.norm_topk;
    m.max_rows = p.rows.max; m.n_rows = p.rows.n; m.quant_act = p.quant_act;
    if (m.quant_act && (m.H % 128 || m.I % 128 || m.Is % 128))
        return fail(FROST_ERR_INVALID_ARG, "op_moe (cpu): quant_act needs H, I and Is multiples of 128, got %d, %d, %d",
                    m.H, m.I, m.Is);
    FROST_TRY(named(K::cpu::moe(m), "moe"));
    w.finish();
    return FROST_OK;
}

// Host node per op: the params are copied into the launch (frost_launch_host), the kernel runs
// from that copy when the stream (or the graph it was captured into) reaches it.
template <class P>
frost_status host_thunk(const void* args) {
    return run(*static_cast<const P*>(args));
}
template <class P>
frost_status enqueue(const Exec& ex, const P& p) {
    return frost_launch_host(ex.stream, host_thunk<P>, &p, sizeof p);
}

// Refused at record time: the oracle's weights are exact fp32 (the CPU engine dequantizes at load).
frost_status enqueue_gemm(const Exec& ex, const GemmOp& p) {
    if (p.w.quantized())
        return fail(FROST_ERR_UNSUPPORTED, "op_gemm (cpu): w is a %s view; the CPU backend takes dequantized (f32) weights",
                    dtype_name(p.w.dtype));
    return enqueue<GemmOp>(ex, p);
}

class CpuBackend final : public Backend {
public:
    CpuBackend() : Backend(FROST_BACKEND_CPU, &cpu_op_table()) {}
    DType act_dtype() const override { return DType::F32; }
    size_t sample_work_floats(int vocab) const override { return 2 * size_t(vocab); }  // weights | processed row
    size_t sample_idx_ints(int vocab) const override { return size_t(vocab); }
    size_t gdn_work_floats(int, int) const override { return 0; }
    size_t attn_work_floats(int, int, int) const override { return 0; }
    size_t moe_work_floats(int H, int, int, int I, int Is, int max_rows) const override {
        return size_t(max_rows) * size_t(K::moe_work_floats(H, I, Is));
    }
};

}  // namespace

const OpTable& cpu_op_table() {
    static const OpTable t = [] {
        OpTable o;
        o.embed = enqueue<EmbedOp>;
        o.add_rmsnorm = enqueue<AddRmsNormOp>;
        o.qk_norm_rope = enqueue<QkNormRopeOp>;
        o.conv1d_silu_l2 = enqueue<Conv1dSiluL2Op>;
        o.gdn_gate = enqueue<GdnGateOp>;
        o.gdn_chunk = enqueue<GdnChunkOp>;
        o.gdn_step = enqueue<GdnStepOp>;
        o.gated_rmsnorm = enqueue<GatedRmsNormOp>;
        o.kv_append = enqueue<KvAppendOp>;
        o.attention_prefill = enqueue<AttentionOp>;
        o.attention_decode = enqueue<AttentionOp>;
        o.gemm = enqueue_gemm;
        o.swiglu = enqueue<SwigluOp>;
        o.sample = enqueue<SampleOp>;
        o.cursor = enqueue<CursorOpParams>;
        o.moe = enqueue<MoeOp>;
        o.gdn_decode = enqueue<GdnDecodeOp>;
        o.qk_rope_kv_append = enqueue<QkRopeKvAppendOp>;
        o.tail_row = enqueue<TailRowOp>;
        return o;
    }();
    return t;
}

frost_status make_cpu_backend(std::unique_ptr<Backend>* out) {
    *out = std::make_unique<CpuBackend>();
    return FROST_OK;
}

}  // namespace frost::ops
