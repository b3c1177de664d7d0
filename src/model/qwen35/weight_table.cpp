// The Qwen3.5 weight table and its binder (weight_table.h).
#include "model/qwen35/weight_table.h"

#include <algorithm>
#include <cstring>

#include "exec/error.h"
#include "model/quant/quant_plan.h"
#include "model/qwen35/weight_quant.h"
#include "model/weight_stager.h"

namespace frost::model::qwen35 {

bool split_gdn_in_proj(const ModelConfig& c, const LinearAttnWeights& a, const Precision& p) {
    using Split = Precision::InProjSplit;
    if (p.gdn_in_proj_split == Split::Never || (c.conv_dim() + c.lin_v_dim()) % std::max(1, p.row_align) != 0)
        return false;
    if (p.gdn_in_proj_split == Split::Always) return true;
    const int64_t H = c.hidden_size;
    return p.keep_quantized && a.in_proj_qkv.quant && quant_matrix_refusal({&a.in_proj_qkv, &a.in_proj_z}, H).empty() &&
           !quant_matrix_refusal({&a.in_proj_qkv, &a.in_proj_z, &a.in_proj_b, &a.in_proj_a}, H).empty();
}

std::vector<WeightSpec> weight_table(const ModelConfig& c, const ModelWeights& w, const Precision& p,
                                     WeightViews* v) {
    const Dims d = dims_of(c, p);
    const int64_t H = c.hidden_size;
    std::vector<WeightSpec> t;
    auto matrix = [&](std::string name, std::vector<const TensorView*> parts, int64_t cols, int64_t padded,
                      ops::Tensor* slot) {
        t.push_back({std::move(name), WeightForm::Matrix, std::move(parts), cols, padded, slot});
    };
    auto vector = [&](std::string name, const TensorView* part, ops::Tensor* slot) {
        t.push_back({std::move(name), WeightForm::Vector, {part}, 0, 0, slot});
    };
    matrix("w.embed_tokens", {&w.embed_tokens}, H, 0, &v->embed);
    vector("w.final_norm", &w.final_norm, &v->final_norm);
    if (!w.tied) matrix("w.lm_head", {&w.lm_head}, H, 0, &v->lm_head);
    v->layers.assign(c.num_layers, LayerWeightViews{});
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerWeights& lw = w.layers[l];
        LayerWeightViews& L = v->layers[l];
        const std::string pre = "w.layer" + std::to_string(l) + ".";
        vector(pre + "input_layernorm", &lw.input_layernorm, &L.in_ln);
        vector(pre + "post_attention_layernorm", &lw.post_attention_layernorm, &L.post_ln);
        if (c.is_linear(l)) {
            const auto& a = lw.lin;
            if (split_gdn_in_proj(c, a, p)) {
                const int64_t qkvz_rows = c.conv_dim() + c.lin_v_dim();
                matrix(pre + "in_proj_qkvz", {&a.in_proj_qkv, &a.in_proj_z}, H, 0, &L.in_proj);
                matrix(pre + "in_proj_ba", {&a.in_proj_b, &a.in_proj_a}, H, d.lin_width - qkvz_rows, &L.in_proj_tail);
            } else {
                matrix(pre + "in_proj_qkvzba", {&a.in_proj_qkv, &a.in_proj_z, &a.in_proj_b, &a.in_proj_a}, H,
                       d.lin_width, &L.in_proj);
            }
            vector(pre + "conv1d", &a.conv1d, &L.conv_w);
            vector(pre + "A_log", &a.A_log, &L.A_log);
            vector(pre + "dt_bias", &a.dt_bias, &L.dt_bias);
            vector(pre + "gdn_norm", &a.norm, &L.gdn_norm);
            matrix(pre + "out_proj", {&a.out_proj}, c.lin_v_dim(), 0, &L.out_proj);
        } else {
            const auto& a = lw.full;
            matrix(pre + "qkv_proj", {&a.q_proj, &a.k_proj, &a.v_proj}, H, d.full_width, &L.in_proj);
            vector(pre + "q_norm", &a.q_norm, &L.q_norm);
            vector(pre + "k_norm", &a.k_norm, &L.k_norm);
            matrix(pre + "o_proj", {&a.o_proj}, int64_t(c.num_heads) * c.head_dim, 0, &L.out_proj);
        }
        if (c.is_moe_layer(l)) {
            // Experts packed so expert e is one row block: [E, 2I, H] (gate rows, then up rows) and
            // [E, H, I]; the router and the shared expert's sigmoid gate are GEMV operands too.
            const MoeWeights& m = lw.moe;
            std::vector<const TensorView*> gate_up, down;
            for (size_t e = 0; e < m.gate.size(); ++e) {
                gate_up.push_back(&m.gate[e]);
                gate_up.push_back(&m.up[e]);
                down.push_back(&m.down[e]);
            }
            matrix(pre + "moe_router", {&m.router}, H, 0, &L.moe_router);
            matrix(pre + "moe_experts_gate_up", std::move(gate_up), H, 0, &L.moe_gate_up);
            matrix(pre + "moe_experts_down", std::move(down), c.moe_intermediate_size, 0, &L.moe_down);
            matrix(pre + "moe_shared_gate_up", {&m.shared_gate, &m.shared_up}, H, 0, &L.shared_gate_up);
            matrix(pre + "moe_shared_down", {&m.shared_down}, c.shared_expert_intermediate_size, 0, &L.shared_down);
            matrix(pre + "moe_shared_expert_gate", {&m.shared_expert_gate}, H, 0, &L.shared_gate);
        } else {
            matrix(pre + "mlp_gate_up", {&lw.mlp_gate, &lw.mlp_up}, H, 0, &L.gate_up);
            matrix(pre + "mlp_down", {&lw.mlp_down}, c.intermediate_size, 0, &L.down);
        }
    }
    return t;
}

namespace {

bool same_dtype(const TensorView& a, ops::DType b) {
    return !a.quant && ((a.dtype == DType::F32 && b == ops::DType::F32) || (a.dtype == DType::BF16 && b == ops::DType::BF16));
}

}  // namespace

std::vector<ops::Tensor*> matrix_views(WeightViews* v) {
    std::vector<ops::Tensor*> out{&v->lm_head};
    for (LayerWeightViews& L : v->layers)
        for (ops::Tensor* t : {&L.in_proj, &L.in_proj_tail, &L.out_proj, &L.gate_up, &L.down, &L.moe_router, &L.moe_gate_up,
                               &L.moe_down, &L.shared_gate_up, &L.shared_down, &L.shared_gate})
            out.push_back(t);
    return out;
}

bool stored_quantized(const WeightSpec& s) {
    return s.form == WeightForm::Matrix &&
           std::any_of(s.parts.begin(), s.parts.end(), [](const TensorView* t) { return t->quant != nullptr; });
}

std::string kept_quantized_refusal(const WeightSpec& s, const Precision& p, const WeightViews& views) {
    if (!stored_quantized(s)) return "not stored quantized";
    if (!p.keep_quantized) return "the backend dequantizes every weight (Precision::keep_quantized off)";
    if (s.slot == &views.embed) return "the embedding is gathered, not a GEMM";
    // The MoE op's router kernel reads the router and the shared expert's gate as bf16 (the
    // published checkpoints leave both unquantized). The experts and the shared expert stay
    // quantized: decode runs quantized GEMVs over the selected experts, prefill dequantizes them.
    auto ends_with = [&](const char* suffix) {
        const size_t n = std::strlen(suffix);
        return s.name.size() >= n && s.name.compare(s.name.size() - n, n, suffix) == 0;
    };
    if (ends_with(".moe_router") || ends_with(".moe_shared_expert_gate")) return "the MoE router kernel reads bf16 weights";
    return quant_matrix_refusal(s.parts, s.cols);
}

std::vector<MatrixPlacement> matrix_placements(const ModelConfig& c, const ModelWeights& w, const Precision& p) {
    WeightViews views;
    std::vector<MatrixPlacement> out;
    for (const WeightSpec& s : weight_table(c, w, p, &views)) {
        if (s.form != WeightForm::Matrix) continue;  // a tied lm_head has no entry of its own
        MatrixPlacement m;
        m.name = s.name;
        m.stored_quantized = stored_quantized(s);
        if (m.stored_quantized) m.why = kept_quantized_refusal(s, p, views);
        m.kept = m.stored_quantized && m.why.empty();
        int64_t rows = 0;
        for (const TensorView* t : s.parts) {
            rows += t->shape.empty() ? 0 : (t->quant ? t->quant->out : t->numel() / s.cols);
            m.stored_bytes += t->quant ? t->quant->stored_bytes : t->bytes;
        }
        m.dense_bytes = uint64_t(std::max(rows, s.padded_rows)) * uint64_t(s.cols) * (ops::dtype_bits(p.matrix) / 8);
        out.push_back(std::move(m));
    }
    return out;
}

frost_status bind_weights(frost_ctx* ctx, frost_stream* stream, const ModelConfig& c, const ModelWeights& w,
                          const Precision& p, BufferList* list, WeightViews* views) {
    // Nothing is copied until run(): one pipelined pass over the whole model (weight_stager.h).
    WeightStager stager;
    views->quantized_matrices = 0;
    views->dequantized.clear();
    for (const WeightSpec& s : weight_table(c, w, p, views)) {
        if (stored_quantized(s)) {
            const std::string why = p.keep_quantized ? kept_quantized_refusal(s, p, *views) : std::string();
            if (p.keep_quantized && why.empty()) {
                int64_t rows = 0;
                for (const TensorView* t : s.parts) rows += t->quant->out;
                FROST_TRY(upload_quant_matrix(s.name, s.parts, s.cols, std::max(rows, s.padded_rows), list, &stager,
                                              stream, s.slot));
                ++views->quantized_matrices;
                continue;
            }
            if (p.keep_quantized) views->dequantized.push_back(s.name + ": " + why);
        }
        const ops::DType dt = s.form == WeightForm::Matrix ? p.matrix : ops::DType::F32;
        const size_t esz = ops::dtype_bits(dt) / 8;
        int64_t used_elems = 0;
        for (const TensorView* t : s.parts) {
            if (!t->present()) return fail(FROST_ERR_INVALID_ARG, "tensor %s is absent", t->name.c_str());
            used_elems += t->numel();
        }
        const int64_t rows = s.form == WeightForm::Matrix ? std::max(used_elems / s.cols, s.padded_rows) : used_elems;
        const size_t used = size_t(used_elems) * esz;
        const size_t bytes = s.form == WeightForm::Matrix ? std::max(used, size_t(rows) * size_t(s.cols) * esz) : used;
        frost_buffer* b = nullptr;
        FROST_TRY(list->add(s.name, BufferRole::Weights, bytes, &b));
        size_t off = 0;
        for (const TensorView* t : s.parts) {
            const size_t pb = size_t(t->numel()) * esz;
            if (same_dtype(*t, dt))
                stager.add(t->data, pb, b, off);
            else
                FROST_TRY(dequantize_view(*t, dt, stager.add_owned(pb, b, off)));
            off += pb;
        }
        if (bytes > used) FROST_TRY(frost_buffer_fill(b, used, 0, bytes - used, stream));
        void* ptr = frost_buffer_ptr(b);
        *s.slot = s.form == WeightForm::Matrix ? ops::mat(ptr, dt, rows, s.cols, s.cols)
                                               : ops::vec(ptr, dt, used_elems);
        const auto& shape = s.parts[0]->shape;  // conv1d [C, 1, K] or [C, K] -> [C, K]
        if (s.form == WeightForm::Vector && shape.size() >= 2)
            *s.slot = ops::mat(ptr, dt, shape[0], shape.back(), shape.back());
    }
    if (w.tied) views->lm_head = views->embed;
    return stager.run(ctx, stream);
}

}  // namespace frost::model::qwen35
