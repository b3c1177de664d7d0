// Binding checkpoint tensors to the dense hybrid's roles. Every expected tensor is looked up,
// checked for shape and dtype, and every problem is collected so one error lists them all (T07).
#include "model/weights.h"

#include <map>
#include <set>

#include "exec/error.h"
#include "model/deinterleave.h"
#include "model/quant/dequant.h"
#include "model/safetensors.h"
#include "util/bf16.h"

namespace frost::model {
namespace {

constexpr const char* kVisualPrefix = "model.visual.";
constexpr const char* kMtpPrefix = "mtp.";
constexpr const char* kLmHead = "lm_head.weight";
constexpr int kMaxListedProblems = 64;

enum class DTypeRule { Bf16, Bf16OrF32 };

struct Binder {
    const Checkpoint& ck;
    std::set<std::string> used;
    std::vector<std::string> problems;
    const quant::QuantPlan* plan;  // quantized linears, by module name (empty when not quantized)
    ModelWeights* owner;           // owns dequantized storage
    DType dequant_to;              // F32 or BF16 (WeightLoadOptions)
    bool keep_quantized;           // bind quantized modules as stored (WeightLoadOptions)

    // Binds `name` into *out if present with the right shape and dtype; records a problem if not.
    void bind(const std::string& name, std::vector<int64_t> shape, TensorView* out, DTypeRule rule = DTypeRule::Bf16) {
        used.insert(name);
        if (const quant::QuantModule* q = plan->find_weight(name)) return bind_quantized(*q, name, shape, out);
        if (const auto* bad = plan->find_invalid(name)) {  // its problems are already listed
            used.insert(bad->begin(), bad->end());
            return;
        }
        const CheckpointTensor* t = ck.find(name);
        if (!t) {
            problems.push_back("missing: " + name + " " + shape_string(shape));
            return;
        }
        bool dtype_ok = t->dtype == DType::BF16 || (rule == DTypeRule::Bf16OrF32 && t->dtype == DType::F32);
        if (!dtype_ok)
            problems.push_back("wrong dtype: " + name + " is " + dtype_name(t->dtype) + ", expected BF16" +
                               (rule == DTypeRule::Bf16OrF32 ? " or F32" : ""));
        if (t->shape != shape)
            problems.push_back("wrong shape: " + name + " is " + shape_string(t->shape) + ", expected " + shape_string(shape));
        if (dtype_ok && t->shape == shape) *out = t->view();
    }

    // A quantized linear binds as its fp32 dequantization (exact: one fp32 rounding at most), in
    // storage owned by the weights; both engines take fp32 views (the CUDA upload rounds to bf16).
    void bind_quantized(const quant::QuantModule& q, const std::string& name, const std::vector<int64_t>& shape,
                        TensorView* out) {
        used.insert(q.tensors.begin(), q.tensors.end());
        const std::vector<int64_t> logical = {q.out, q.in};
        if (logical != shape) {
            problems.push_back("wrong shape: " + name + " (" + quant::scheme_name(q.args.scheme) + ") is " +
                               shape_string(logical) + ", expected " + shape_string(shape));
            return;
        }
        TensorView v;
        v.name = name;
        v.shape = shape;
        if (keep_quantized) {  // the weight table decides per matrix whether the backend runs it so
            v.dtype = q.q->dtype;
            v.data = q.q->data;
            v.bytes = q.stored_bytes;
            v.quant = &q;
            *out = std::move(v);
            return;
        }
        v.dtype = dequant_to;
        const size_t n = size_t(q.out) * size_t(q.in);
        v.bytes = n * dtype_size(dequant_to);
        owner->owned.emplace_back(new (std::nothrow) uint8_t[v.bytes]);
        std::unique_ptr<float[]> tmp(dequant_to == DType::F32 ? nullptr : new (std::nothrow) float[n]);
        if (!owner->owned.back() || (dequant_to != DType::F32 && !tmp)) {
            problems.push_back("out of memory: cannot dequantize " + name + " (" + std::to_string(v.bytes) + " bytes)");
            return;
        }
        v.data = owner->owned.back().get();
        float* f32 = dequant_to == DType::F32 ? static_cast<float*>(const_cast<void*>(v.data)) : tmp.get();
        if (quant::dequantize_module(q, f32) != FROST_OK) {
            problems.push_back("cannot dequantize " + name + ": " + last_error());
            return;
        }
        if (dequant_to == DType::BF16) {
            uint16_t* dst = static_cast<uint16_t*>(const_cast<void*>(v.data));
            for (size_t i = 0; i < n; ++i) dst[i] = util::f32_to_bf16(f32[i]);
        }
        *out = std::move(v);
    }
};

// A quantized linear the binding made of a stored one, with the tensors it points at.
struct DerivedQuant : quant::QuantModule {
    CheckpointTensor tq, ts, tz;
};

// Weight rows per stored row of array `a` of a module of `out` rows (1: per row; the block height
// of a scale grid; 8 for packed zero points), or 0 when deinterleave_qkvz cannot move it whole.
int qkvz_unit(const CheckpointTensor& a, int64_t out, QkvzSplit s) {
    if (a.shape.empty() || a.shape[0] <= 0 || out % a.shape[0] != 0 || a.bytes % uint64_t(a.shape[0]) != 0) return 0;
    s.unit = int(out / a.shape[0]);
    return qkvz_units_ok(s) ? s.unit : 0;
}

// Array `a` regrouped like the rows it belongs to: its qkv rows into *qkv, its z rows into *z, in
// storage owned by w.
void regroup_array(const CheckpointTensor& a, int64_t out, QkvzSplit s, int64_t qkv_rows, ModelWeights* w,
                   CheckpointTensor* qkv, CheckpointTensor* z) {
    s.unit = qkvz_unit(a, out, s);
    s.row_bytes = size_t(a.bytes / uint64_t(a.shape[0]));
    auto make = [&](CheckpointTensor* t, int64_t rows, const char* suffix) {
        t->name = a.name + suffix;
        t->dtype = a.dtype;
        t->shape = a.shape;
        t->shape[0] = rows / s.unit;
        t->bytes = uint64_t(t->shape[0]) * s.row_bytes;
        w->owned.emplace_back(new uint8_t[t->bytes]);
        t->data = w->owned.back().get();
        t->copied = true;
    };
    make(qkv, qkv_rows, " (qkv rows)");
    make(z, out - qkv_rows, " (z rows)");
    deinterleave_qkvz(s, a.data, const_cast<void*>(qkv->data), const_cast<void*>(z->data));
}

// Qwen3-Next's quantized in_proj_qkvz kept quantized (WeightLoadOptions::keep_quantized): its
// packed rows and every row-indexed array (scales per row or per 128-row block, INT4 zero points
// per 8 rows) regrouped like the rows, as two modules in_proj_qkv and in_proj_z that the weight
// table then treats as any stored quantized linears (a global scale is shared). False (nothing
// bound) when it is not stored quantized or a part does not fall on whole rows of some array
// (then the caller dequantizes it).
bool bind_qwen3next_qkvz_quantized(Binder& b, const ModelConfig& c, const std::string& p, LinearAttnWeights* lin,
                                   ModelWeights* w) {
    const std::string name = p + "in_proj_qkvz.weight";
    const quant::QuantModule* m = b.keep_quantized ? b.plan->find_weight(name) : nullptr;
    const int64_t H = c.hidden_size, Q = c.lin_q_dim(), V = c.lin_v_dim();
    if (!m || m->g_idx || !m->q || !m->scale || m->out != 2 * Q + 2 * V || m->in != H) return false;
    const QkvzSplit s{c.lin_num_k_heads, c.lin_num_v_heads, c.lin_k_head_dim, c.lin_v_head_dim, 0};
    for (const CheckpointTensor* a : {m->q, m->scale, m->zero_point})
        if (a && !qkvz_unit(*a, m->out, s)) return false;
    b.used.insert(name);
    b.used.insert(m->tensors.begin(), m->tensors.end());
    auto qkv = std::make_shared<DerivedQuant>(), z = std::make_shared<DerivedQuant>();
    regroup_array(*m->q, m->out, s, 2 * Q + V, w, &qkv->tq, &z->tq);
    regroup_array(*m->scale, m->out, s, 2 * Q + V, w, &qkv->ts, &z->ts);
    if (m->zero_point) regroup_array(*m->zero_point, m->out, s, 2 * Q + V, w, &qkv->tz, &z->tz);
    auto finish = [&](DerivedQuant& d, const char* part, int64_t rows, TensorView* out) {
        static_cast<quant::QuantModule&>(d) = *m;
        d.module = p + part;
        d.out = rows;
        d.q = &d.tq;
        d.scale = &d.ts;
        d.zero_point = m->zero_point ? &d.tz : nullptr;
        d.tensors = {d.tq.name, d.ts.name};
        d.stored_bytes = d.tq.bytes + d.ts.bytes + (m->zero_point ? d.tz.bytes : 0) +
                         (m->global_scale ? m->global_scale->bytes : 0);
        TensorView v;
        v.name = p + part + ".weight";
        v.dtype = d.tq.dtype;
        v.shape = {rows, H};
        v.data = d.tq.data;
        v.bytes = d.stored_bytes;
        v.quant = &d;
        *out = std::move(v);
    };
    finish(*qkv, "in_proj_qkv", 2 * Q + V, &lin->in_proj_qkv);
    finish(*z, "in_proj_z", V, &lin->in_proj_z);
    w->derived_quant.push_back(std::move(qkv));
    w->derived_quant.push_back(std::move(z));
    return true;
}

// Qwen3-Next fused projections -> Qwen3.5 views in storage owned by `w`. The regrouping moves
// whole rows, so it takes the rows as they come: bf16 as stored, or a quantized projection (Qwen's
// FP8 releases quantize in_proj_qkvz and leave in_proj_ba in bf16) dequantized to the loader's
// dtype (f32 for the CPU oracle, bf16 for CUDA), or, kept quantized, regrouped with its scales
// (bind_qwen3next_qkvz_quantized).
void bind_qwen3next_linear(Binder& b, const ModelConfig& c, const std::string& p, LinearAttnWeights* lin, ModelWeights* w) {
    const int64_t H = c.hidden_size, Q = c.lin_q_dim(), V = c.lin_v_dim(), Hv = c.lin_num_v_heads;
    TensorView qkvz, ba;
    const bool kept = bind_qwen3next_qkvz_quantized(b, c, p, lin, w);
    const bool keep = b.keep_quantized;
    b.keep_quantized = false;
    if (!kept) b.bind(p + "in_proj_qkvz.weight", {2 * Q + 2 * V, H}, &qkvz);
    b.bind(p + "in_proj_ba.weight", {2 * Hv, H}, &ba);
    b.keep_quantized = keep;
    if ((!kept && !qkvz.present()) || !ba.present()) return;
    auto make = [&](const std::string& name, int64_t rows, DType dt) {
        TensorView v;
        v.name = name;
        v.dtype = dt;
        v.shape = {rows, H};
        v.bytes = size_t(rows * H) * dtype_size(dt);
        w->owned.emplace_back(new uint8_t[v.bytes]);
        v.data = w->owned.back().get();
        return v;
    };
    QkvzSplit s{c.lin_num_k_heads, c.lin_num_v_heads, c.lin_k_head_dim, c.lin_v_head_dim, 0};
    if (!kept) {
        lin->in_proj_qkv = make(p + "in_proj_qkv.weight", 2 * Q + V, qkvz.dtype);
        lin->in_proj_z = make(p + "in_proj_z.weight", V, qkvz.dtype);
        s.row_bytes = size_t(H) * dtype_size(qkvz.dtype);
        deinterleave_qkvz(s, qkvz.data, const_cast<void*>(lin->in_proj_qkv.data), const_cast<void*>(lin->in_proj_z.data));
    }
    lin->in_proj_b = make(p + "in_proj_b.weight", Hv, ba.dtype);
    lin->in_proj_a = make(p + "in_proj_a.weight", Hv, ba.dtype);
    s.row_bytes = size_t(H) * dtype_size(ba.dtype);
    deinterleave_ba(s, ba.data, const_cast<void*>(lin->in_proj_b.data), const_cast<void*>(lin->in_proj_a.data));
}

// Row block [row0, row0 + rows) of `t`'s leading dimension `index` (a [N, rows_total, cols]
// tensor): a zero-copy view with shape {rows, cols}.
TensorView slice_rows(const TensorView& t, int64_t index, int64_t row0, int64_t rows, const std::string& name) {
    const int64_t cols = t.shape.back(), per_index = t.shape[1] * cols;
    const size_t es = dtype_size(t.dtype);
    TensorView v;
    v.name = name;
    v.dtype = t.dtype;
    v.shape = {rows, cols};
    v.bytes = size_t(rows * cols) * es;
    v.data = static_cast<const uint8_t*>(t.data) + size_t(index * per_index + row0 * cols) * es;
    return v;
}

// Problems of one layer's experts that differ only in the expert index become one line
// ("missing: ...experts.{e}.up_proj.weight [64,128] for experts 0-255 (256)"), so a checkpoint
// with a wrong expert geometry still fits every mismatch in one readable error.
void group_expert_problems(const std::string& experts_prefix, size_t first, std::vector<std::string>* problems) {
    std::vector<std::string> patterns;
    std::map<std::string, std::vector<int64_t>> ids;
    std::map<std::string, std::string> single;
    for (size_t i = first; i < problems->size(); ++i) {
        const std::string& pr = (*problems)[i];
        size_t at = pr.find(experts_prefix);
        size_t num = at == std::string::npos ? at : at + experts_prefix.size();
        size_t dot = num == std::string::npos ? num : pr.find('.', num);
        std::string key = pr;
        int64_t id = -1;
        if (dot != std::string::npos) {
            id = std::stoll(pr.substr(num, dot - num));
            key = pr.substr(0, num) + "{e}" + pr.substr(dot);
        }
        if (!ids.count(key)) patterns.push_back(key);
        ids[key].push_back(id);
        single[key] = pr;
    }
    std::vector<std::string> out(problems->begin(), problems->begin() + long(first));
    for (const auto& key : patterns) {
        const auto& v = ids[key];
        if (v.size() == 1 || v[0] < 0) {
            out.push_back(single[key]);
            continue;
        }
        std::string list;  // "0-3,7": runs of consecutive ids
        for (size_t j = 0; j < v.size();) {
            size_t k = j;
            while (k + 1 < v.size() && v[k + 1] == v[k] + 1) ++k;
            if (!list.empty()) list += ",";
            list += std::to_string(v[j]);
            if (k > j) list.append("-").append(std::to_string(v[k]));
            j = k + 1;
        }
        out.push_back(key + " for experts " + list + " (" + std::to_string(v.size()) + ")");
    }
    *problems = std::move(out);
}

// MoE MLP of one layer, prefix p = "...layers.N.". Per-expert tensors unless the file holds the
// fused mlp.experts.gate_up_proj (then mlp.experts.down_proj is fused too).
void bind_moe(Binder& b, const ModelConfig& c, const std::string& p, MoeWeights* m) {
    const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
    const int64_t Is = c.shared_expert_intermediate_size;
    const std::string mp = p + "mlp.";
    b.bind(mp + "gate.weight", {E, H}, &m->router);
    b.bind(mp + "shared_expert.gate_proj.weight", {Is, H}, &m->shared_gate);
    b.bind(mp + "shared_expert.up_proj.weight", {Is, H}, &m->shared_up);
    b.bind(mp + "shared_expert.down_proj.weight", {H, Is}, &m->shared_down);
    b.bind(mp + "shared_expert_gate.weight", {1, H}, &m->shared_expert_gate);
    m->gate.assign(size_t(E), TensorView{});
    m->up.assign(size_t(E), TensorView{});
    m->down.assign(size_t(E), TensorView{});
    const std::string fused_gu = mp + "experts.gate_up_proj", fused_down = mp + "experts.down_proj";
    if (b.ck.find(fused_gu)) {
        TensorView gu, dn;
        b.bind(fused_gu, {E, 2 * I, H}, &gu);
        b.bind(fused_down, {E, H, I}, &dn);
        for (int64_t e = 0; e < E; ++e) {
            std::string tag = "[";  // (append: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...))
            tag.append(std::to_string(e)).append("]");
            if (gu.present()) {
                m->gate[size_t(e)] = slice_rows(gu, e, 0, I, fused_gu + tag + ".gate");
                m->up[size_t(e)] = slice_rows(gu, e, I, I, fused_gu + tag + ".up");
            }
            if (dn.present()) m->down[size_t(e)] = slice_rows(dn, e, 0, H, fused_down + tag);
        }
        return;
    }
    const size_t first_problem = b.problems.size();
    for (int64_t e = 0; e < E; ++e) {
        const std::string ep = mp + "experts." + std::to_string(e) + ".";
        b.bind(ep + "gate_proj.weight", {I, H}, &m->gate[size_t(e)]);
        b.bind(ep + "up_proj.weight", {I, H}, &m->up[size_t(e)]);
        b.bind(ep + "down_proj.weight", {H, I}, &m->down[size_t(e)]);
    }
    group_expert_problems(mp + "experts.", first_problem, &b.problems);
}

}  // namespace

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

uint64_t ModelWeights::total_bytes() const {
    uint64_t s = embed_tokens.bytes + final_norm.bytes + (tied ? 0 : lm_head.bytes);
    auto add = [&](const TensorView& v) { s += v.bytes; };
    for (const auto& l : layers) {
        add(l.input_layernorm); add(l.post_attention_layernorm);
        add(l.mlp_gate); add(l.mlp_up); add(l.mlp_down);
        if (l.kind == LayerKind::Linear) {
            add(l.lin.in_proj_qkv); add(l.lin.in_proj_z); add(l.lin.in_proj_b); add(l.lin.in_proj_a);
            add(l.lin.conv1d); add(l.lin.A_log); add(l.lin.dt_bias); add(l.lin.norm); add(l.lin.out_proj);
        } else {
            add(l.full.q_proj); add(l.full.k_proj); add(l.full.v_proj); add(l.full.o_proj);
            add(l.full.q_norm); add(l.full.k_norm);
        }
        if (l.is_moe) {
            const MoeWeights& m = l.moe;
            add(m.router); add(m.shared_gate); add(m.shared_up); add(m.shared_down); add(m.shared_expert_gate);
            for (size_t e = 0; e < m.gate.size(); ++e) { add(m.gate[e]); add(m.up[e]); add(m.down[e]); }
        }
    }
    return s;
}

ParamCounts count_params(const ModelWeights& w) {
    ParamCounts pc;
    auto add = [&](const TensorView& v) { pc.total += uint64_t(v.numel()); };
    add(w.embed_tokens);
    add(w.final_norm);
    if (!w.tied) add(w.lm_head);
    uint64_t idle = 0;  // routed-expert parameters a token does not read
    for (const auto& l : w.layers) {
        for (const TensorView* v : {&l.input_layernorm, &l.post_attention_layernorm})
            add(*v);
        if (l.kind == LayerKind::Linear) {
            for (const TensorView* v : {&l.lin.in_proj_qkv, &l.lin.in_proj_z, &l.lin.in_proj_b, &l.lin.in_proj_a,
                                        &l.lin.conv1d, &l.lin.A_log, &l.lin.dt_bias, &l.lin.norm, &l.lin.out_proj})
                add(*v);
        } else {
            for (const TensorView* v : {&l.full.q_proj, &l.full.k_proj, &l.full.v_proj, &l.full.o_proj,
                                        &l.full.q_norm, &l.full.k_norm})
                add(*v);
        }
        if (!l.is_moe) {
            for (const TensorView* v : {&l.mlp_gate, &l.mlp_up, &l.mlp_down}) add(*v);
            continue;
        }
        const MoeWeights& m = l.moe;
        for (const TensorView* v : {&m.router, &m.shared_gate, &m.shared_up, &m.shared_down, &m.shared_expert_gate})
            add(*v);
        uint64_t per_expert = 0;
        for (size_t e = 0; e < m.gate.size(); ++e) {
            per_expert = uint64_t(m.gate[e].numel() + m.up[e].numel() + m.down[e].numel());
            pc.total += per_expert;
        }
        idle += per_expert * uint64_t(w.config.num_experts - w.config.num_experts_per_tok);
    }
    pc.active = pc.total - idle;
    return pc;
}

frost_status bind_weights(const ModelConfig& c, std::shared_ptr<Checkpoint> ck, ModelWeights* out) {
    return bind_weights(c, std::move(ck), quant::QuantConfig{}, out);
}

frost_status bind_weights(const ModelConfig& c, std::shared_ptr<Checkpoint> ck, const quant::QuantConfig& qc,
                          ModelWeights* out, const WeightLoadOptions& opts) {
    if (opts.dequant_dtype != DType::F32 && opts.dequant_dtype != DType::BF16)
        return fail(FROST_ERR_INVALID_ARG, "WeightLoadOptions::dequant_dtype must be F32 or BF16, got %s",
                    dtype_name(opts.dequant_dtype));
    // Features the engine cannot execute stop here; MTP alone does not (its weights are kept).
    const std::vector<std::string>& blocking = c.other_unsupported;
    if (!blocking.empty()) {
        std::string list;
        for (const auto& f : blocking) list += "\n  " + f;
        return fail(FROST_ERR_UNSUPPORTED, "model needs features the engine does not run yet:%s", list.c_str());
    }
    ModelWeights w;
    w.config = c;
    w.checkpoint = ck;
    auto plan = std::make_shared<quant::QuantPlan>();
    std::vector<std::string> quant_problems;  // listed with the binding's own, in one error
    FROST_TRY(quant::build_quant_plan(qc, *ck, plan.get(), &quant_problems));
    w.quant = plan;
    Binder b{*ck, {}, std::move(quant_problems), plan.get(), &w, opts.dequant_dtype, opts.keep_quantized};
    for (const auto& [m, names] : plan->invalid) b.used.insert(names.begin(), names.end());
    const std::string& P = c.weight_prefix;
    const int64_t H = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
    const int64_t Vd = c.lin_v_dim(), C = c.conv_dim(), Hv = c.lin_num_v_heads;
    const int64_t d = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;

    b.bind(P + "embed_tokens.weight", {V, H}, &w.embed_tokens);
    b.bind(P + "norm.weight", {H}, &w.final_norm);
    if (ck->find(kLmHead) || plan->find_weight(kLmHead)) {  // stored plain, or quantized (packed tensors)
        b.bind(kLmHead, {V, H}, &w.lm_head);
        w.tied = false;
    } else {
        w.lm_head = w.embed_tokens;
        w.tied = true;
    }
    w.layers.resize(size_t(c.num_layers));
    for (int i = 0; i < c.num_layers; ++i) {
        LayerWeights& L = w.layers[size_t(i)];
        L.kind = c.layer_types[size_t(i)];
        const std::string p = P + "layers." + std::to_string(i) + ".";
        b.bind(p + "input_layernorm.weight", {H}, &L.input_layernorm);
        b.bind(p + "post_attention_layernorm.weight", {H}, &L.post_attention_layernorm);
        L.is_moe = c.is_moe_layer(i);
        if (L.is_moe) {
            bind_moe(b, c, p, &L.moe);
        } else {
            b.bind(p + "mlp.gate_proj.weight", {F, H}, &L.mlp_gate);
            b.bind(p + "mlp.up_proj.weight", {F, H}, &L.mlp_up);
            b.bind(p + "mlp.down_proj.weight", {H, F}, &L.mlp_down);
        }
        if (L.kind == LayerKind::Linear) {
            const std::string a = p + "linear_attn.";
            if (c.family == Family::Qwen3Next) {
                bind_qwen3next_linear(b, c, a, &L.lin, &w);
            } else {
                b.bind(a + "in_proj_qkv.weight", {C, H}, &L.lin.in_proj_qkv);
                b.bind(a + "in_proj_z.weight", {Vd, H}, &L.lin.in_proj_z);
                b.bind(a + "in_proj_b.weight", {Hv, H}, &L.lin.in_proj_b);
                b.bind(a + "in_proj_a.weight", {Hv, H}, &L.lin.in_proj_a);
            }
            b.bind(a + "conv1d.weight", {C, 1, c.conv_kernel}, &L.lin.conv1d);
            b.bind(a + "A_log", {Hv}, &L.lin.A_log, DTypeRule::Bf16OrF32);
            b.bind(a + "dt_bias", {Hv}, &L.lin.dt_bias, DTypeRule::Bf16OrF32);
            b.bind(a + "norm.weight", {c.lin_v_head_dim}, &L.lin.norm);
            b.bind(a + "out_proj.weight", {H, Vd}, &L.lin.out_proj);
        } else {
            const std::string a = p + "self_attn.";
            b.bind(a + "q_proj.weight", {2 * Hq * d, H}, &L.full.q_proj);
            b.bind(a + "k_proj.weight", {Hkv * d, H}, &L.full.k_proj);
            b.bind(a + "v_proj.weight", {Hkv * d, H}, &L.full.v_proj);
            b.bind(a + "o_proj.weight", {H, Hq * d}, &L.full.o_proj);
            b.bind(a + "q_norm.weight", {d}, &L.full.q_norm);
            b.bind(a + "k_norm.weight", {d}, &L.full.k_norm);
        }
    }
    for (const auto& t : ck->tensors()) {
        if (t.name.rfind(kVisualPrefix, 0) == 0 || b.used.count(t.name)) continue;
        if (t.name.rfind(kMtpPrefix, 0) == 0) {
            w.mtp[t.name] = t.view();
            continue;
        }
        b.problems.push_back("unexpected: " + t.name + " " + shape_string(t.shape) + " " + dtype_name(t.dtype));
    }
    if (!b.problems.empty()) {
        std::string list;
        for (size_t i = 0; i < b.problems.size() && i < size_t(kMaxListedProblems); ++i) list += "\n  " + b.problems[i];
        if (b.problems.size() > size_t(kMaxListedProblems))
            list += "\n  ... and " + std::to_string(b.problems.size() - kMaxListedProblems) + " more";
        // set_last_error, not fail(): fail() formats into a fixed buffer and would cut the list.
        set_last_error("checkpoint does not match config (" + std::to_string(b.problems.size()) + " problems):" + list);
        return FROST_ERR_INCOMPATIBLE;
    }
    *out = std::move(w);
    return FROST_OK;
}

frost_status load_weights(const std::string& model_dir, ModelWeights* out, const WeightLoadOptions& opts) {
    ModelConfig c;
    FROST_TRY(load_config(model_dir, &c));
    quant::QuantConfig qc;
    FROST_TRY(quant::load_quant_config(model_dir, &qc));
    std::shared_ptr<Checkpoint> ck;
    FROST_TRY(Checkpoint::open_dir(model_dir, &ck));
    FROST_TRY(ck->check_intact());
    frost_status s = bind_weights(c, ck, qc, out, opts);
    if (s != FROST_OK) return add_context(s, model_dir);
    return FROST_OK;
}

}  // namespace frost::model
