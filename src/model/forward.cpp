// The hybrid forward of one step (spec §4), recorded into a graph variant: embed, then per layer
// pre-norm mixer (Gated DeltaNet or gated attention, one explicit is_linear switch) and SwiGLU
// MLP with residual adds fused into the output GEMMs, final norm, lm_head, sample, cursor advance.
// Rows = the bucket's capacity; the true count of a chunk is read from the cursor at run time.
#include <cmath>

#include "exec/error.h"
#include "model/engine.h"
#include "ops/ops.h"

namespace frost::model {

using namespace frost::kernels;
using frost::ops::OpCost;

struct ForwardRecorder {
    const Engine* e;
    int session;
    int rows;      // bucket capacity
    bool decode;   // decode graph: input from cursor.last_token, recurrent GDN
    OpCost* cost;

    const ModelConfig& c() const { return e->cfg_; }
    const Engine::ScratchPtrs& s() const { return e->scratch_; }
    const Engine::SessionPtrs& sp() const { return e->sessions_[session]; }
    const int32_t* n_rows() const { return &sp().cursor->n_tokens; }

    // Debug copy-out of a named activation (habit 7): rows of the step into its trace buffer.
    frost_status trace(frost_stream* st, const char* name, int layer, const float* src, int width) {
        if (!e->opts_.trace) return FROST_OK;
        for (const auto& t : e->trace_) {
            if (t.name == name && t.layer == layer) {
                frost_buffer* src_buf = nullptr;
                for (const auto& b : e->scratch_bufs_->list())
                    if (frost_buffer_ptr(b.buf) <= src &&
                        src < reinterpret_cast<const float*>(
                                  static_cast<const uint8_t*>(frost_buffer_ptr(b.buf)) + frost_buffer_bytes(b.buf)))
                        src_buf = b.buf;
                if (!src_buf) return fail(FROST_ERR_STATE, "trace %s: source is not a scratch buffer", name);
                const size_t off = reinterpret_cast<const uint8_t*>(src) -
                                   static_cast<const uint8_t*>(frost_buffer_ptr(src_buf));
                return frost_buffer_copy(t.buf, 0, src_buf, off, sizeof(float) * width * rows, st);
            }
        }
        return FROST_OK;
    }

    frost_status gemm(frost_stream* st, const float* x, int64_t ldx, const float* w, int K, int N,
                      float* y, int64_t ldy, bool accumulate, int max_rows, const int32_t* nr) {
        GemmParams p{};
        p.x = x; p.w = w; p.y = y; p.ldx = ldx; p.ldy = ldy; p.K = K; p.N = N;
        p.max_rows = max_rows; p.n_rows = nr; p.accumulate = accumulate ? 1 : 0;
        return ops::op_gemm(st, p, cost);
    }

    frost_status norm(frost_stream* st, const float* x, const float* w, float* y, int dim) {
        RmsNormParams p{};
        p.x = x; p.w = w; p.y = y; p.x_row_stride = dim; p.y_row_stride = dim;
        p.dim = dim; p.heads = 1; p.zero_centred = 1; p.eps = static_cast<float>(c().rms_norm_eps);
        p.max_rows = rows; p.n_rows = n_rows();
        return ops::op_rmsnorm(st, p, cost);
    }

    frost_status linear_mixer(frost_stream* st, int l) {
        const auto& L = e->layers_[l];
        const int H = c().hidden_size, C = c().conv_dim(), V = c().lin_v_dim(), Q = c().lin_q_dim();
        const int Hv = c().lin_num_v_heads, Hk = c().lin_num_k_heads, dk = c().lin_k_head_dim,
                  dv = c().lin_v_head_dim;
        const int W = C + V + 2 * Hv;  // [qkv | z | b | a]
        FROST_TRY(gemm(st, s().xn, H, L.in_proj, H, W, s().proj, W, false, rows, n_rows()));
        Conv1dParams cv{};
        cv.x = s().proj; cv.w = L.conv_w; cv.state = sp().conv_state[l]; cv.y = s().conv_out;
        cv.x_row_stride = W; cv.channels = C; cv.kernel = c().conv_kernel;
        cv.max_rows = rows; cv.n_rows = n_rows();
        FROST_TRY(ops::op_conv1d(st, cv, cost));
        L2NormParams qn{};
        qn.x = s().conv_out; qn.row_stride = C; qn.heads = Hk; qn.dim = dk; qn.eps = 1e-6f;
        qn.scale = 1.0f / std::sqrt(static_cast<float>(dk)); qn.max_rows = rows; qn.n_rows = n_rows();
        FROST_TRY(ops::op_l2norm(st, qn, cost));
        L2NormParams kn = qn;
        kn.x = s().conv_out + Q; kn.scale = 1.0f;
        FROST_TRY(ops::op_l2norm(st, kn, cost));
        GdnGateParams gp{};
        gp.b = s().proj + C + V; gp.a = s().proj + C + V + Hv; gp.A_log = L.A_log;
        gp.dt_bias = L.dt_bias; gp.beta = s().beta; gp.g = s().g; gp.in_row_stride = W;
        gp.heads = Hv; gp.max_rows = rows; gp.n_rows = n_rows();
        FROST_TRY(ops::op_gdn_gates(st, gp, cost));
        GdnParams dp{};
        dp.q = s().conv_out; dp.k = s().conv_out + Q; dp.v = s().conv_out + 2 * Q;
        dp.beta = s().beta; dp.g = s().g; dp.state = sp().rec_state[l]; dp.o = s().core;
        dp.qk_row_stride = C; dp.Hk = Hk; dp.Hv = Hv; dp.dk = dk; dp.dv = dv; dp.chunk = kGdnChunk;
        dp.max_rows = rows; dp.cursor = sp().cursor;
        FROST_TRY(decode ? ops::op_gdn_recurrent(st, dp, cost) : ops::op_gdn_chunked(st, dp, cost));
        FROST_TRY(trace(st, "gdn_out", l, s().core, V));
        GatedRmsNormParams gn{};
        gn.x = s().core; gn.z = s().proj + C; gn.w = L.gdn_norm; gn.y = s().core2;
        gn.z_row_stride = W; gn.dim = dv; gn.heads = Hv; gn.eps = static_cast<float>(c().rms_norm_eps);
        gn.max_rows = rows; gn.n_rows = n_rows();
        FROST_TRY(ops::op_gated_rmsnorm(st, gn, cost));
        return gemm(st, s().core2, V, L.out_proj, V, H, s().x, H, true, rows, n_rows());
    }

    frost_status full_mixer(frost_stream* st, int l) {
        const auto& L = e->layers_[l];
        const int H = c().hidden_size, Hq = c().num_heads, Hkv = c().num_kv_heads, d = c().head_dim;
        const int W = 2 * Hq * d + 2 * Hkv * d;  // [q|gate interleaved per head | k | v]
        float* q = s().proj;
        float* k = s().proj + 2 * Hq * d;
        float* v = k + Hkv * d;
        FROST_TRY(gemm(st, s().xn, H, L.in_proj, H, W, s().proj, W, false, rows, n_rows()));
        RmsNormParams qn{};
        qn.x = q; qn.y = q; qn.w = L.q_norm; qn.x_row_stride = qn.y_row_stride = W;
        qn.x_head_stride = qn.y_head_stride = 2 * d; qn.dim = d; qn.heads = Hq; qn.zero_centred = 1;
        qn.eps = static_cast<float>(c().rms_norm_eps); qn.max_rows = rows; qn.n_rows = n_rows();
        FROST_TRY(ops::op_rmsnorm(st, qn, cost));
        RmsNormParams kn = qn;
        kn.x = k; kn.y = k; kn.w = L.k_norm; kn.x_head_stride = kn.y_head_stride = d; kn.heads = Hkv;
        FROST_TRY(ops::op_rmsnorm(st, kn, cost));
        RopeParams rq{};
        rq.x = q; rq.row_stride = W; rq.head_stride = 2 * d; rq.heads = Hq; rq.head_dim = d;
        rq.rotary_dim = c().rotary_dim; rq.theta = static_cast<float>(c().rope_theta);
        rq.inv_freq_bf16 = e->opts_.rope_inv_freq_bf16 ? 1 : 0;
        rq.max_rows = rows; rq.cursor = sp().cursor;
        FROST_TRY(ops::op_rope(st, rq, cost));
        RopeParams rk = rq;
        rk.x = k; rk.head_stride = d; rk.heads = Hkv;
        FROST_TRY(ops::op_rope(st, rk, cost));
        KvAppendParams kv{};
        kv.k = k; kv.v = v; kv.k_cache = sp().k_cache[l]; kv.v_cache = sp().v_cache[l];
        kv.src_row_stride = W; kv.kv_dim = Hkv * d; kv.max_seq = e->opts_.max_seq_len;
        kv.max_rows = rows; kv.cursor = sp().cursor;
        FROST_TRY(ops::op_kv_append(st, kv, cost));
        AttentionParams ap{};
        ap.q = q; ap.gate = c().attn_output_gate ? q + d : nullptr;
        ap.k_cache = sp().k_cache[l]; ap.v_cache = sp().v_cache[l]; ap.o = s().core;
        ap.q_row_stride = W; ap.q_head_stride = 2 * d; ap.Hq = Hq; ap.Hkv = Hkv; ap.head_dim = d;
        ap.scale = 1.0f / std::sqrt(static_cast<float>(d)); ap.max_seq = e->opts_.max_seq_len;
        ap.max_rows = rows; ap.cursor = sp().cursor;
        FROST_TRY(ops::op_attention(st, ap, cost));
        FROST_TRY(trace(st, "attn_out", l, s().core, Hq * d));
        return gemm(st, s().core, Hq * d, L.out_proj, Hq * d, H, s().x, H, true, rows, n_rows());
    }

    frost_status mlp(frost_stream* st, int l) {
        const auto& L = e->layers_[l];
        if (c().is_moe_layer(l)) return moe(st, l);
        const int H = c().hidden_size, F = c().intermediate_size;
        FROST_TRY(gemm(st, s().xn, H, L.gate_up, H, 2 * F, s().proj, 2 * F, false, rows, n_rows()));
        SwigluParams sw{};
        sw.x = s().proj; sw.y = s().act; sw.F = F; sw.max_rows = rows; sw.n_rows = n_rows();
        FROST_TRY(ops::op_swiglu(st, sw, cost));
        return gemm(st, s().act, F, L.down, F, H, s().x, H, true, rows, n_rows());
    }

    // MoE hook: router + routed experts + gated shared expert, residual added into x.
    frost_status moe(frost_stream* st, int l) {
        const auto& L = e->layers_[l];
        MoeParams mp{};
        mp.x = s().xn; mp.y = s().x; mp.router = L.moe_router;
        mp.experts_gate_up = L.moe_gate_up; mp.experts_down = L.moe_down;
        mp.shared_gate_up = L.shared_gate_up; mp.shared_down = L.shared_down; mp.shared_gate = L.shared_gate;
        mp.probs = s().moe_probs; mp.topk_ids = s().moe_ids; mp.topk_w = s().moe_w; mp.work = s().moe_work;
        mp.H = c().hidden_size; mp.E = c().num_experts; mp.k = c().num_experts_per_tok;
        mp.I = c().moe_intermediate_size; mp.Is = c().shared_expert_intermediate_size;
        mp.norm_topk = c().norm_topk_prob ? 1 : 0; mp.max_rows = rows; mp.n_rows = n_rows();
        FROST_TRY(ops::op_moe(st, mp, cost));
        return trace(st, "router_probs", l, s().moe_probs, c().num_experts);
    }

    frost_status record(frost_stream* st) {
        const int H = c().hidden_size;
        if (decode) {
            CursorParams cp{};
            cp.cursor = sp().cursor; cp.ids = s().ids; cp.op = kCursorDecodeBegin;
            FROST_TRY(ops::op_cursor(st, cp, cost));
        }
        EmbedParams ep{};
        ep.table = e->embed_; ep.table_type = WeightType::F32; ep.ids = s().ids; ep.y = s().x;
        ep.vocab = c().vocab_size; ep.dim = H; ep.max_rows = rows; ep.n_rows = n_rows();
        FROST_TRY(ops::op_embed(st, ep, cost));
        FROST_TRY(trace(st, "embed", -1, s().x, H));
        for (int l = 0; l < c().num_layers; ++l) {
            FROST_TRY(norm(st, s().x, e->layers_[l].in_ln, s().xn, H));
            if (c().is_linear(l))
                FROST_TRY(linear_mixer(st, l));
            else
                FROST_TRY(full_mixer(st, l));
            FROST_TRY(trace(st, "mixer_residual", l, s().x, H));
            FROST_TRY(norm(st, s().x, e->layers_[l].post_ln, s().xn, H));
            FROST_TRY(mlp(st, l));
            FROST_TRY(trace(st, "layer_out", l, s().x, H));
        }
        // Final norm + lm_head: every row for eval (logits_all), else only the last row.
        const bool all = e->opts_.logits_all;
        RmsNormParams fn{};
        fn.x = s().x; fn.w = e->final_norm_; fn.y = s().fin; fn.x_row_stride = fn.y_row_stride = H;
        fn.dim = H; fn.heads = 1; fn.zero_centred = 1; fn.eps = static_cast<float>(c().rms_norm_eps);
        fn.max_rows = rows; fn.n_rows = n_rows(); fn.last_row_only = all ? 0 : 1;
        FROST_TRY(ops::op_rmsnorm(st, fn, cost));
        const int V = c().vocab_size;
        FROST_TRY(gemm(st, s().fin, H, e->lm_head_, H, V, s().logits, V, false, all ? rows : 1,
                       all ? n_rows() : nullptr));
        SampleParams sm{};
        sm.logits = s().logits; sm.row_stride = V; sm.vocab = V; sm.select_last_row = all ? 1 : 0;
        sm.n_rows = n_rows(); sm.work = s().sample_work; sm.work_idx = s().sample_idx;
        sm.cursor = sp().cursor; sm.out_token = s().out_token;
        FROST_TRY(ops::op_sample(st, sm, cost));
        CursorParams adv{};
        adv.cursor = sp().cursor; adv.op = kCursorAdvance;
        return ops::op_cursor(st, adv, cost);
    }

    static frost_status record_fn(void* user, frost_stream* st) {
        return static_cast<ForwardRecorder*>(user)->record(st);
    }
};

frost_shape_key step_key(bool decode, int rows) {
    return (static_cast<frost_shape_key>(decode ? 1 : 0) << 32) | static_cast<uint32_t>(rows);
}

frost_status Engine::capture_session(int index) {
    frost_graph* g = graphs_[index];
    for (int rows = kGdnChunk; rows <= opts_.prefill_chunk; rows += kGdnChunk) {
        ForwardRecorder r{this, index, rows, false, nullptr};
        FROST_TRY(frost_graph_capture(g, step_key(false, rows), stream_, ForwardRecorder::record_fn, &r));
    }
    ForwardRecorder r{this, index, 1, true, nullptr};
    return frost_graph_capture(g, step_key(true, 1), stream_, ForwardRecorder::record_fn, &r);
}

}  // namespace frost::model
