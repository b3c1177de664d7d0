// Weight conversion at load: every bound checkpoint tensor (bf16 or f32) becomes fp32 in a frost
// buffer once; projections that read the same input are concatenated into one GEMM weight
// (GDN [qkv; z; b; a], attention [q|gate; k; v], MLP [gate; up]).
#include <cstring>
#include <vector>

#include "exec/error.h"
#include "kernels/cpu/kernels.h"
#include "model/engine.h"

namespace frost::model {
namespace {

// Converts `v` to fp32 into dst (numel floats).
frost_status to_f32(const TensorView& v, float* dst) {
    if (!v.present()) return fail(FROST_ERR_INVALID_ARG, "tensor %s is absent", v.name.c_str());
    const int64_t n = v.numel();
    switch (v.dtype) {
        case DType::F32:
            std::memcpy(dst, v.data, sizeof(float) * n);
            return FROST_OK;
        case DType::BF16: {
            const uint16_t* s = static_cast<const uint16_t*>(v.data);
            for (int64_t i = 0; i < n; ++i) dst[i] = kernels::cpu::bf16_to_f32(s[i]);
            return FROST_OK;
        }
        default:
            return fail(FROST_ERR_UNSUPPORTED, "tensor %s: dtype %s not supported by the fp32 engine",
                        v.name.c_str(), dtype_name(v.dtype));
    }
}

// Allocates one weight buffer holding the concatenation of `parts` (row-major, same columns).
struct WeightBuilder {
    frost_ctx* ctx;
    frost_stream* stream;
    BufferList* list;
    frost_status make(const std::string& name, const std::vector<const TensorView*>& parts,
                      const float** out) {
        int64_t total = 0;
        for (const auto* p : parts) total += p->numel();
        frost_buffer* b = nullptr;
        FROST_TRY(list->add(name, BufferRole::Weights, sizeof(float) * total, &b));
        // Convert on the host, then copy into the buffer's space (a no-op hop on the CPU backend
        // where device memory is host memory).
        const bool direct = frost_ctx_backend(ctx) == FROST_BACKEND_CPU;
        std::vector<float> host;
        float* dst = direct ? static_cast<float*>(frost_buffer_ptr(b)) : (host.resize(total), host.data());
        int64_t off = 0;
        for (const auto* p : parts) {
            FROST_TRY(to_f32(*p, dst + off));
            off += p->numel();
        }
        if (!direct) {
            frost_buffer* h = nullptr;
            FROST_TRY(frost_buffer_wrap(ctx, "weight_staging", host.data(), sizeof(float) * total,
                                        FROST_SPACE_HOST, &h));
            frost_status s = frost_buffer_copy(b, 0, h, 0, sizeof(float) * total, stream);
            if (s == FROST_OK) s = frost_stream_sync(stream);
            frost_buffer_free(h);
            FROST_TRY(s);
        }
        *out = static_cast<const float*>(frost_buffer_ptr(b));
        return FROST_OK;
    }
};

}  // namespace

frost_status Engine::alloc_weights(const ModelWeights& w) {
    weight_bufs_ = std::make_unique<BufferList>(ctx_);
    WeightBuilder b{ctx_, stream_, weight_bufs_.get()};
    FROST_TRY(b.make("w.embed_tokens", {&w.embed_tokens}, &embed_));
    FROST_TRY(b.make("w.final_norm", {&w.final_norm}, &final_norm_));
    if (w.tied)
        lm_head_ = embed_;
    else
        FROST_TRY(b.make("w.lm_head", {&w.lm_head}, &lm_head_));
    layers_.assign(cfg_.num_layers, LayerPtrs{});
    for (int l = 0; l < cfg_.num_layers; ++l) {
        const LayerWeights& lw = w.layers[l];
        LayerPtrs& p = layers_[l];
        const std::string pre = "w.layer" + std::to_string(l) + ".";
        FROST_TRY(b.make(pre + "input_layernorm", {&lw.input_layernorm}, &p.in_ln));
        FROST_TRY(b.make(pre + "post_attention_layernorm", {&lw.post_attention_layernorm}, &p.post_ln));
        if (cfg_.is_linear(l)) {
            const auto& a = lw.lin;
            FROST_TRY(b.make(pre + "in_proj_qkvzba", {&a.in_proj_qkv, &a.in_proj_z, &a.in_proj_b, &a.in_proj_a},
                             &p.in_proj));
            FROST_TRY(b.make(pre + "conv1d", {&a.conv1d}, &p.conv_w));
            FROST_TRY(b.make(pre + "A_log", {&a.A_log}, &p.A_log));
            FROST_TRY(b.make(pre + "dt_bias", {&a.dt_bias}, &p.dt_bias));
            FROST_TRY(b.make(pre + "gdn_norm", {&a.norm}, &p.gdn_norm));
            FROST_TRY(b.make(pre + "out_proj", {&a.out_proj}, &p.out_proj));
        } else {
            const auto& a = lw.full;
            FROST_TRY(b.make(pre + "qkv_proj", {&a.q_proj, &a.k_proj, &a.v_proj}, &p.in_proj));
            FROST_TRY(b.make(pre + "q_norm", {&a.q_norm}, &p.q_norm));
            FROST_TRY(b.make(pre + "k_norm", {&a.k_norm}, &p.k_norm));
            FROST_TRY(b.make(pre + "o_proj", {&a.o_proj}, &p.out_proj));
        }
        if (lw.is_moe) {
            FROST_TRY(alloc_moe_weights(w, l));
        } else {
            FROST_TRY(b.make(pre + "mlp_gate_up", {&lw.mlp_gate, &lw.mlp_up}, &p.gate_up));
            FROST_TRY(b.make(pre + "mlp_down", {&lw.mlp_down}, &p.down));
        }
    }
    return FROST_OK;
}

// MoE MLP of one layer: router, experts fused as [E, 2I, H] (per expert [gate; up]) and
// [E, H, I], shared expert [gate; up] and down, shared gate [H].
frost_status Engine::alloc_moe_weights(const ModelWeights& w, int l) {
    WeightBuilder b{ctx_, stream_, weight_bufs_.get()};
    const MoeWeights& m = w.layers[l].moe;
    LayerPtrs& p = layers_[l];
    const std::string pre = "w.layer" + std::to_string(l) + ".moe_";
    std::vector<const TensorView*> gate_up, down;
    for (size_t e = 0; e < m.gate.size(); ++e) {
        gate_up.push_back(&m.gate[e]);
        gate_up.push_back(&m.up[e]);
        down.push_back(&m.down[e]);
    }
    FROST_TRY(b.make(pre + "router", {&m.router}, &p.moe_router));
    FROST_TRY(b.make(pre + "experts_gate_up", gate_up, &p.moe_gate_up));
    FROST_TRY(b.make(pre + "experts_down", down, &p.moe_down));
    FROST_TRY(b.make(pre + "shared_gate_up", {&m.shared_gate, &m.shared_up}, &p.shared_gate_up));
    FROST_TRY(b.make(pre + "shared_down", {&m.shared_down}, &p.shared_down));
    return b.make(pre + "shared_expert_gate", {&m.shared_expert_gate}, &p.shared_gate);
}

uint64_t Engine::weight_bytes() const { return weight_bufs_ ? weight_bufs_->total_bytes() : 0; }

}  // namespace frost::model
