// THE Qwen3.5 layer sequence (spec §4), the only copy in the tree: embed; per layer pre-norm ->
// mixer (Gated DeltaNet or gated attention: one is_linear switch) -> post-norm -> MLP (dense, or
// mixture-of-experts: one is_moe_layer switch), residual
// adds fused into the output GEMMs; final norm, lm_head, sample, cursor advance. Per step the
// forward picks the fused op both backends implement: decode runs the GDN layer's conv, gated
// step and norm as one op (op_gdn_decode), q/k norm + RoPE with the KV append as one op, the
// gate_up GEMV with SwiGLU in its epilogue and attention_decode; prefill runs the gate + chunked GDN, GEMM + swiglu and attention_prefill.
// The tail (StepSpec::tail): when a prefill reads only its last row's logits, the last layer runs
// its state-writing ops (the GDN conv and chunked rule, the KV append) over every row, then moves
// the last row to row 0 (op_tail_row) and runs the rest on that one row in the decode forms: no
// other row of the last layer's output is ever read. Session state is the same either way.
// `pdl` marks the launches a decode graph chains with programmatic dependent launch (a hint the
// CPU ignores). A batched decode step (StepSpec::batch) is this same sequence over B rows, one
// token of one live session each: the per-session ops read their member's state through the
// session pointer table and its gathered cursor (ops.h BatchSlots), the sample op runs once per
// member.
#include "model/qwen35/forward.h"

#include <cmath>
#include <initializer_list>

#include "exec/error.h"

namespace frost::model::qwen35 {
namespace {

using ops::Epilogue;
using ops::Tensor;

// A [rows, cols] view with row stride ld, `off` elements into a scratch / weight view.
Tensor at(const Tensor& base, int64_t off, int64_t rows, int64_t cols, int64_t ld) {
    return ops::mat(base.offset(off).data, base.dtype, rows, cols, ld);
}
Tensor heads_at(const Tensor& base, int64_t off, int64_t rows, int64_t n, int64_t dim, int64_t ld, int64_t hs) {
    return ops::heads(base.offset(off).data, base.dtype, rows, n, dim, ld, hs);
}

struct Forward {
    const ops::Exec& ex;
    const ModelConfig& c;
    const WeightViews& w;
    const ScratchViews& s;
    const SessionViews& ss;
    const StepSpec& step;
    const TraceHook* trace_hook;

    bool tail = false;  // past the last layer's op_tail_row: one row, row 0 (StepSpec::tail)

    int rows() const { return tail ? 1 : step.rows; }
    // One row in the decode forms (GEMV, decode attention, MoE decode): decode, or the tail.
    bool one_row() const { return step.decode || tail; }
    int32_t pdl() const { return step.decode ? 1 : 0; }
    bool batched() const { return step.batch > 0; }
    // The step's valid rows. Batched: every row is live (padding rows compute on token 0 and are
    // discarded).
    const int32_t* step_n_rows() const { return batched() ? nullptr : &ss.cursor->n_tokens; }
    // The valid rows of the ops being recorded: the tail's one row is always valid.
    const int32_t* n_rows() const { return tail ? nullptr : step_n_rows(); }
    kernels::StepCursor* cursor() const { return batched() ? s.batch.cursors : tail ? s.tail_cursor : ss.cursor; }
    // The members' buffers of `column` (layout.h slot_column); off on a solo step.
    ops::BatchSlots slots(int column) const {
        ops::BatchSlots b;
        if (!batched()) return b;
        b.table = s.batch.table; b.stride = slot_stride(c); b.column = column; b.sessions = s.batch.sessions;
        b.slots = s.batch.slots; b.cursors = s.batch.cursors; b.B = step.batch;
        return b;
    }
    ops::Rows rws() const { return {rows(), n_rows()}; }
    float eps() const { return static_cast<float>(c.rms_norm_eps); }

    frost_status trace(const char* name, int layer, const Tensor& src) {
        return trace_hook && *trace_hook ? (*trace_hook)(ex.stream, name, layer, src) : FROST_OK;
    }

    // W8A8: decode GEMVs on FP8 weights (fp8_w8a8_decode); prefill GEMMs on FP8 weights and on
    // INT4 ones in 128-wide groups (fp8_w8a8_prefill; ops::w8a8_weight).
    bool quant_act(const Tensor& wt) const {
        if (one_row()) return step.fp8_w8a8_decode && wt.dtype == ops::DType::FP8_E4M3;
        return step.fp8_w8a8_prefill && ops::w8a8_weight(wt);
    }

    // The FP8 twin the producer of wt's GEMM input writes beside it (ScratchViews::fp8_q), when
    // that GEMM quantizes its input (quant_act) in 128-wide groups; none otherwise. A pure function
    // of the weight, so the producer and the GEMM agree. None on decode: the GEMV quantizes its
    // one row itself (lm_gemv_quant.h act_fp8), the same bytes without a second write.
    ops::Fp8Act twin_for(const Tensor& wt) const {
        const int64_t K = wt.rank == 2 ? wt.shape[1] : 0;
        // 128-wide weight blocks (INT4: groups), or one scale per row (per-channel: the GEMM still
        // groups x by 128).
        const bool grouped = wt.scale_block == 128 || (wt.scale_rows == 1 && wt.scale_block == K);
        if (one_row() || !quant_act(wt) || s.fp8_q.empty() || !grouped || K % 128 != 0 ||
            int64_t(rows()) * K > s.fp8_q.numel() || ops::fp8_act_ld(rows()) * (K / 128) > s.fp8_scale.numel())
            return {};
        return ops::fp8_act(s.fp8_q.data, s.fp8_scale.data, rows(), K);
    }

    // y (+)= x Wᵀ over x's rows. twin: x's producer writes its FP8 twin (twin_for(wt)), which the
    // GEMM then reads; xq_only where, in addition, x's single reader is this GEMM and the backend
    // reads only the twin, so the producer skips x (its yq_only). The producer and the GEMM both
    // take their fields from this one op, so they agree.
    ops::GemmOp gemm_op(const Tensor& x, const Tensor& wt, const Tensor& y, Epilogue ep, const Tensor& tmp = Tensor{},
                        bool twin = false) const {
        ops::GemmOp g;
        g.x = x; g.w = wt; g.y = y; g.tmp = tmp; g.epilogue = ep; g.pdl = pdl();
        g.n_rows = x.rows() > 1 ? n_rows() : nullptr;
        g.quant_act = quant_act(wt) ? 1 : 0;
        if (g.quant_act && twin) g.xq = twin_for(wt);
        g.xq_only = g.xq.on() && step.fp8_twin_only && ex.backend->gemm_reads_twin(g) ? 1 : 0;
        return g;
    }
    frost_status gemm(const char* label, const Tensor& x, const Tensor& wt, const Tensor& y, Epilogue ep,
                      const Tensor& tmp = Tensor{}) {
        return ops::op_gemm(ex, gemm_op(x, wt, y, ep, tmp), label);
    }

    // The residual RMSNorm into x, for `reader` (its twin, and x skipped where reader allows).
    // The launch hint of a decode norm between two dense blocks: pdl 2 lets its reader (a GEMV that
    // loads only weights before its wait) start before the norm's own wait. Not beside an MoE
    // block: after the MoE down kernel or before the router it measured slower (lm_norm.cu).
    int32_t norm_pdl(bool after_moe, bool before_moe) const {
        return pdl() && !after_moe && !before_moe ? 2 : pdl();
    }
    frost_status norm(const char* label, const Tensor& weight, const ops::GemmOp& reader, int32_t hint) {
        ops::AddRmsNormOp n;
        n.h = at(s.h, 0, rows(), c.hidden_size, c.hidden_size);
        n.w = weight; n.y = at(s.x, 0, rows(), c.hidden_size, c.hidden_size);
        n.eps = eps(); n.rows = rws(); n.pdl = hint;
        n.yq = reader.xq; n.yq_only = reader.xq_only;
        return ops::op_add_rmsnorm(ex, n, label);
    }

    Tensor h_rows() const { return at(s.h, 0, rows(), c.hidden_size, c.hidden_size); }
    Tensor x_rows() const { return at(s.x, 0, rows(), c.hidden_size, c.hidden_size); }

    // Columns of layer l's projection output: in_proj's rows, and a split GDN in_proj's tail.
    int64_t proj_width(int l) const {
        const LayerWeightViews& L = w.layers[l];
        return L.in_proj.shape[0] + (L.in_proj_tail.empty() ? 0 : L.in_proj_tail.shape[0]);
    }
    // The mixer's input projection (GDN in_proj [qkv | z | b | a] or attention [q+gate | k | v])
    // from x into proj: the only reader of the input norm's x, except that a split GDN in_proj's
    // tail (in_proj_tail_op) reads x too, so then the norm keeps writing x beside any twin.
    ops::GemmOp in_proj_op(int l) const {
        const Tensor& wt = w.layers[l].in_proj;
        ops::GemmOp g = gemm_op(x_rows(), wt, at(s.proj, 0, rows(), wt.shape[0], proj_width(l)), Epilogue::None,
                                Tensor{}, true);
        if (!w.layers[l].in_proj_tail.empty()) g.xq_only = 0;
        return g;
    }
    // A split GDN in_proj's [b; a] tail (weight_table.h split_gdn_in_proj): x into the columns
    // after in_proj's.
    ops::GemmOp in_proj_tail_op(int l) const {
        const Tensor& wt = w.layers[l].in_proj_tail;
        const int64_t main = w.layers[l].in_proj.shape[0];
        return gemm_op(x_rows(), wt, at(s.proj, main, rows(), wt.shape[0], proj_width(l)), Epilogue::None);
    }
    // Prefill's dense gate_up from x into proj: the only reader of the post-attention norm's x.
    ops::GemmOp gate_up_op(int l) const {
        const int F = c.intermediate_size;
        return gemm_op(x_rows(), w.layers[l].gate_up, at(s.proj, 0, rows(), 2 * F, 2 * F), Epilogue::None, Tensor{},
                       true);
    }
    // What the post-attention norm's x feeds: the MoE op or the decode gate_up+SwiGLU GEMV read x
    // itself (no twin); prefill's dense gate_up reads its twin.
    ops::GemmOp post_norm_reader(int l) const {
        return c.is_moe_layer(l) || one_row() ? ops::GemmOp{} : gate_up_op(l);
    }

    // Whether layer l is a prefill's tail layer (see the top of this file): the last layer, when
    // only the last row's logits are read (no eval logits, no batched step, no trace of every
    // row) and the engine gave the tail's cursor.
    bool tail_layer(int l) const {
        return step.tail && !step.decode && !step.logits_all && !batched() && !(trace_hook && *trace_hook) &&
               s.tail_cursor && step.rows > 1 && l == c.num_layers - 1;
    }
    // In layer l's mixer, once its state-writing ops are recorded: where l is the tail layer, the
    // last row of h and of `views` (what the rest of the layer reads) moves to row 0, and every
    // later op runs on that row.
    frost_status enter_tail(int l, std::initializer_list<Tensor> views) {
        if (!tail_layer(l)) return FROST_OK;
        ops::TailRowOp t;
        t.views[0] = h_rows();
        int i = 1;
        for (const Tensor& v : views) t.views[i++] = v;
        t.max_rows = step.rows; t.cursor = ss.cursor; t.tail = s.tail_cursor;
        FROST_TRY(ops::op_tail_row(ex, t, "tail row"));
        tail = true;
        return FROST_OK;
    }

    // The GDN layer's gated RMSNorm of core by z, and the out projection it feeds (residual into
    // h), at rows().
    ops::GemmOp lin_out_op(int l) const {
        return gemm_op(at(s.gated, 0, rows(), c.lin_v_dim(), c.lin_v_dim()), w.layers[l].out_proj, h_rows(),
                       Epilogue::Residual, Tensor{}, true);
    }
    ops::GatedRmsNormOp gated_norm_op(int l, const ops::GemmOp& out) const {
        const int C = c.conv_dim(), V = c.lin_v_dim();
        ops::GatedRmsNormOp gn;
        gn.x = at(s.core, 0, rows(), V, V); gn.z = at(s.proj, C, rows(), V, proj_width(l)); gn.w = w.layers[l].gdn_norm;
        gn.y = out.x; gn.heads = c.lin_num_v_heads; gn.dim = c.lin_v_head_dim; gn.eps = eps(); gn.rows = rws();
        gn.pdl = pdl(); gn.yq = out.xq; gn.yq_only = out.xq_only;
        return gn;
    }

    frost_status linear_mixer(int l) {
        const LayerWeightViews& L = w.layers[l];
        const int C = c.conv_dim(), V = c.lin_v_dim(), Q = c.lin_q_dim();
        const int Hv = c.lin_num_v_heads, Hk = c.lin_num_k_heads, dk = c.lin_k_head_dim, dv = c.lin_v_head_dim;
        const int64_t W = proj_width(l);  // [qkv | z | b | a | row padding]
        FROST_TRY(ops::op_gemm(ex, in_proj_op(l), "gemm lin in_proj"));
        // A bf16 [b; a] tail beside a quantized in_proj: decode folds it into the GDN decode op
        // (GdnDecodeOp::gates: no launch of its own on CUDA), prefill runs it as a GEMM.
        const bool fold_gates = step.decode && !L.in_proj_tail.empty() && L.in_proj_tail.dtype == ops::DType::BF16;
        if (!L.in_proj_tail.empty() && !fold_gates)
            FROST_TRY(ops::op_gemm(ex, in_proj_tail_op(l), "gemm lin in_proj b|a"));
        ops::Conv1dSiluL2Op cv;
        cv.x = at(s.proj, 0, rows(), C, W); cv.w = L.conv_w; cv.state = ss.conv[l];
        cv.y = at(s.conv_out, 0, rows(), C, C);
        cv.l2_dim = dk; cv.l2_heads = 2 * Hk; cv.l2_q_heads = Hk; cv.l2_eps = kL2Eps;
        cv.q_scale = 1.0f / std::sqrt(static_cast<float>(dk)); cv.rows = rws(); cv.pdl = pdl();
        cv.batch = slots(slot_column(l, StateKind::Conv));
        const Tensor q = heads_at(s.conv_out, 0, rows(), Hk, dk, C, dk);
        const Tensor k = heads_at(s.conv_out, Q, rows(), Hk, dk, C, dk);
        const Tensor v = heads_at(s.conv_out, 2 * Q, rows(), Hv, dv, C, dv);
        const Tensor b = at(s.proj, C + V, rows(), Hv, W);
        const Tensor a = at(s.proj, C + V + Hv, rows(), Hv, W);
        const Tensor beta = at(s.beta, 0, rows(), Hv, Hv), g = at(s.g, 0, rows(), Hv, Hv);
        const Tensor core = at(s.core, 0, rows(), V, V);
        if (step.decode) {  // conv, gated step and norm as one op (one launch on CUDA, same bits)
            ops::GdnDecodeOp dec;
            dec.conv = cv;
            ops::GdnStepOp& d = dec.step;
            d.q = q; d.k = k; d.v = v; d.state = ss.rec[l]; d.o = core; d.b = b; d.a = a;
            d.A_log = L.A_log; d.dt_bias = L.dt_bias; d.beta = beta; d.g = g;
            d.max_rows = rows(); d.cursor = cursor(); d.pdl = pdl();
            d.batch = slots(slot_column(l, StateKind::Recurrent));
            const ops::GemmOp out = lin_out_op(l);
            dec.norm = gated_norm_op(l, out);
            if (fold_gates) dec.gates = in_proj_tail_op(l);
            FROST_TRY(ops::op_gdn_decode(ex, dec, "conv1d+gdn_step+gated_rmsnorm"));
            FROST_TRY(trace("gdn_out", l, core));
            return ops::op_gemm(ex, out, "gemm lin out_proj");
        }
        FROST_TRY(ops::op_conv1d_silu_l2(ex, cv, "conv1d+silu+l2norm"));
        ops::GdnChunkOp d;  // with its gate (CUDA: computed in the chunk prep, one launch fewer)
        d.q = q; d.k = k; d.v = v; d.beta = beta; d.g = g; d.state = ss.rec[l]; d.o = core; d.work = s.gdn_work;
        d.chunk = kGdnChunk; d.max_rows = rows(); d.cursor = ss.cursor;
        ops::GdnGateOp& gp = d.gate;
        gp.b = b; gp.a = a; gp.A_log = L.A_log; gp.dt_bias = L.dt_bias; gp.beta = beta; gp.g = g; gp.rows = rws();
        FROST_TRY(ops::op_gdn_chunk(ex, d, "gdn_chunk"));
        FROST_TRY(trace("gdn_out", l, core));
        FROST_TRY(enter_tail(l, {core, at(s.proj, C, rows(), V, W)}));  // core and z
        const ops::GemmOp out = lin_out_op(l);
        FROST_TRY(ops::op_gated_rmsnorm(ex, gated_norm_op(l, out), "gated_rmsnorm"));
        return ops::op_gemm(ex, out, "gemm lin out_proj");
    }

    frost_status full_mixer(int l) {
        const LayerWeightViews& L = w.layers[l];
        const int Hq = c.num_heads, Hkv = c.num_kv_heads, d = c.head_dim;
        const int64_t W = proj_width(l);  // [q|gate interleaved per head | k | v]
        FROST_TRY(ops::op_gemm(ex, in_proj_op(l), "gemm full qkv_proj"));
        const int64_t k_off = int64_t(2) * Hq * d, v_off = k_off + int64_t(Hkv) * d;
        ops::QkNormRopeOp qk;
        qk.q = heads_at(s.proj, 0, rows(), Hq, d, W, 2 * d);
        qk.k = heads_at(s.proj, k_off, rows(), Hkv, d, W, d);
        qk.q_w = L.q_norm; qk.k_w = L.k_norm; qk.rotary_dim = c.rotary_dim; qk.eps = eps();
        qk.theta = static_cast<float>(c.rope_theta); qk.inv_freq_bf16 = step.rope_inv_freq_bf16 ? 1 : 0;
        qk.max_rows = rows(); qk.cursor = cursor(); qk.batch = slots(0);
        ops::KvAppendOp kv;
        kv.k = at(s.proj, k_off, rows(), int64_t(Hkv) * d, W);
        kv.v = at(s.proj, v_off, rows(), int64_t(Hkv) * d, W);
        kv.k_cache = ss.k_cache[l]; kv.v_cache = ss.v_cache[l]; kv.max_rows = rows(); kv.cursor = cursor();
        kv.batch = slots(slot_column(l, StateKind::Kv));
        // One op (one launch on CUDA, same bits), decode and prefill.
        FROST_TRY(ops::op_qk_rope_kv_append(ex, ops::QkRopeKvAppendOp{qk, kv}, "qk_norm_rope+kv_append"));
        FROST_TRY(enter_tail(l, {at(s.proj, 0, rows(), k_off, W)}));  // q and its gate
        ops::AttentionOp ap;
        ap.q = heads_at(s.proj, 0, rows(), Hq, d, W, 2 * d);
        if (c.attn_output_gate) ap.gate = heads_at(s.proj, d, rows(), Hq, d, W, 2 * d);
        ap.k_cache = kv.k_cache; ap.v_cache = kv.v_cache;
        ap.o = at(s.core, 0, rows(), int64_t(Hq) * d, int64_t(Hq) * d); ap.work = s.attn_work;
        ap.scale = 1.0f / std::sqrt(static_cast<float>(d)); ap.max_rows = rows(); ap.cursor = cursor();
        ap.batch = kv.batch;
        FROST_TRY(one_row() ? ops::op_attention_decode(ex, ap, "attn_decode")
                            : ops::op_attention_prefill(ex, ap, "attn_prefill"));
        FROST_TRY(trace("attn_out", l, ap.o));
        return gemm("gemm full o_proj", ap.o, L.out_proj, h_rows(), Epilogue::Residual);
    }

    // Mixture-of-experts MLP: router + k routed experts + gated shared expert, added into h. The
    // same op on decode and prefill; the backend picks its decode / grouped-prefill kernels.
    frost_status moe(int l) {
        const LayerWeightViews& L = w.layers[l];
        const int E = c.num_experts, k = c.num_experts_per_tok;
        ops::MoeOp m;
        m.x = x_rows(); m.y = h_rows(); m.router = L.moe_router;
        m.experts_gate_up = L.moe_gate_up; m.experts_down = L.moe_down;
        m.shared_gate_up = L.shared_gate_up; m.shared_down = L.shared_down; m.shared_gate = L.shared_gate;
        m.probs = at(s.moe_probs, 0, rows(), E, E);
        m.topk_ids = at(s.moe_ids, 0, rows(), k, k);
        m.topk_w = at(s.moe_w, 0, rows(), k, k);
        m.work = s.moe_work;
        m.E = E; m.k = k; m.I = c.moe_intermediate_size; m.Is = c.shared_expert_intermediate_size;
        m.norm_topk = c.norm_topk_prob ? 1 : 0; m.rows = rws();
        // FP8 experts only: the grouped GEMMs' W8A8 tile reads FP8 stacks (cuda_ops.cpp moe_w8a8).
        m.quant_act = !one_row() && L.moe_gate_up.dtype == ops::DType::FP8_E4M3 && quant_act(L.moe_gate_up) ? 1 : 0;
        FROST_TRY(ops::op_moe(ex, m, one_row() ? "moe decode" : "moe prefill"));
        return trace("router_probs", l, m.probs);
    }

    // The MLP step of layer l (dense SwiGLU; a mixture-of-experts layer branches to moe()).
    frost_status mlp(int l) {
        if (c.is_moe_layer(l)) return moe(l);
        const LayerWeightViews& L = w.layers[l];
        const int F = c.intermediate_size;
        const Tensor act = at(s.act, 0, rows(), F, F), up = at(s.proj, 0, rows(), 2 * F, 2 * F);
        if (one_row()) {  // gate_up GEMV with SwiGLU in its epilogue (same bits as the two kernels)
            FROST_TRY(gemm("gemv mlp gate_up+swiglu", x_rows(), L.gate_up, act, Epilogue::SwiGLU, up));
        } else if (const ops::GemmOp fused = gemm_op(x_rows(), L.gate_up, act, Epilogue::SwiGLU, up);
                   ex.backend->gemm_fuses_swiglu(fused)) {  // one GEMM, SwiGLU in its epilogue
            FROST_TRY(ops::op_gemm(ex, fused, "gemm mlp gate_up+swiglu"));
        } else {
            FROST_TRY(ops::op_gemm(ex, gate_up_op(l), "gemm mlp gate_up"));
            const ops::GemmOp down = gemm_op(act, L.down, h_rows(), Epilogue::Residual, Tensor{}, true);
            ops::SwigluOp sw;
            sw.x = up; sw.y = act; sw.rows = rws(); sw.yq = down.xq; sw.yq_only = down.xq_only;
            FROST_TRY(ops::op_swiglu(ex, sw, "swiglu"));
            return ops::op_gemm(ex, down, "gemm mlp down");
        }
        return gemm("gemm mlp down", act, L.down, h_rows(), Epilogue::Residual);
    }

    // Batched step: the one sample op once per member (its own logits row, gathered cursor and
    // output slot), then every cursor advances and goes back to its session.
    frost_status sample_members(const Tensor& logits) {
        const int V = c.vocab_size;
        for (int r = 0; r < rows(); ++r) {
            ops::SampleOp sm;
            sm.logits = at(logits, int64_t(r) * V, 1, V, V); sm.select_last_row = 0; sm.n_rows = nullptr;
            sm.work = s.sample_work; sm.work_idx = s.sample_idx; sm.cursor = &s.batch.cursors[r];
            sm.out_token = s.batch.out_tokens + r;
            FROST_TRY(ops::op_sample(ex, sm, "sample"));
        }
        ops::CursorOpParams adv{cursor(), nullptr, kernels::kCursorAdvance, slots(0)};
        return ops::op_cursor(ex, adv, "cursor advance");
    }

    frost_status record() {
        const int H = c.hidden_size, V = c.vocab_size;
        const int lb = step.layer_begin, le = step.layer_end < 0 ? c.num_layers : step.layer_end;
        if (lb < 0 || lb >= le || le > c.num_layers || ((lb > 0 || le < c.num_layers) && step.decode))
            return fail(FROST_ERR_INVALID_ARG, "forward: layer slice [%d, %d) of %d layers (prefill only)", lb, le,
                        c.num_layers);
        if (lb == 0) {
            if (step.decode) {  // batched: gathers each member's cursor first
                ops::CursorOpParams cp{cursor(), s.ids, kernels::kCursorDecodeBegin, slots(0)};
                FROST_TRY(ops::op_cursor(ex, cp, "cursor decode_begin"));
            }
            ops::EmbedOp ep{w.embed, s.ids, h_rows(), rws()};
            FROST_TRY(ops::op_embed(ex, ep, "embed"));
            FROST_TRY(trace("embed", -1, ep.y));
        }
        for (int l = lb; l < le; ++l) {
            const LayerWeightViews& L = w.layers[l];
            FROST_TRY(norm("rmsnorm input", L.in_ln, in_proj_op(l), norm_pdl(l > 0 && c.is_moe_layer(l - 1), false)));
            FROST_TRY(c.is_linear(l) ? linear_mixer(l) : full_mixer(l));
            FROST_TRY(trace("mixer_residual", l, h_rows()));
            FROST_TRY(norm("rmsnorm post_attention", L.post_ln, post_norm_reader(l), norm_pdl(false, c.is_moe_layer(l))));
            FROST_TRY(mlp(l));
            FROST_TRY(trace("layer_out", l, h_rows()));
        }
        if (le < c.num_layers) return FROST_OK;  // a slice before the last layer: h carries on
        // Final norm + lm_head: every row for eval (logits_all) and for a batched step (one row
        // per member), else only the last valid row.
        const int lm_rows = step.logits_all || batched() ? rows() : 1;
        ops::AddRmsNormOp fn;
        fn.h = h_rows(); fn.w = w.final_norm; fn.y = at(s.fin, 0, lm_rows, H, H);
        fn.eps = eps(); fn.last_row_only = lm_rows == 1 && !batched() ? 1 : 0; fn.rows = rws();
        fn.pdl = norm_pdl(c.is_moe_layer(c.num_layers - 1), false);
        FROST_TRY(ops::op_add_rmsnorm(ex, fn, "final rmsnorm"));
        const Tensor logits = at(s.logits, 0, lm_rows, V, V);
        FROST_TRY(gemm("gemm lm_head", fn.y, w.lm_head, logits, Epilogue::None));
        if (batched()) return sample_members(logits);
        ops::SampleOp sm;
        sm.logits = logits; sm.select_last_row = lm_rows == 1 ? 0 : 1; sm.n_rows = step_n_rows();
        sm.work = s.sample_work; sm.work_idx = s.sample_idx; sm.cursor = ss.cursor; sm.out_token = s.out_token;
        sm.settings = ss.sampler; sm.counts = ss.counts; sm.seen = ss.seen; sm.mask = ss.mask;
        sm.ids = s.ids; sm.count_inputs = step.decode ? 1 : 0; sm.record = s.sample_record;
        FROST_TRY(ops::op_sample(ex, sm, "sample"));
        ops::CursorOpParams adv{ss.cursor, nullptr, kernels::kCursorAdvance, {}};
        return ops::op_cursor(ex, adv, "cursor advance");
    }
};

}  // namespace

frost_status record_step(const ops::Exec& ex, const ModelConfig& c, const WeightViews& w, const ScratchViews& s,
                         const SessionViews& ss, const StepSpec& step, const TraceHook* trace) {
    Forward f{ex, c, w, s, ss, step, trace};
    return f.record();
}

}  // namespace frost::model::qwen35
