// Weight binding for the dense hybrid: every checkpoint tensor name -> its role, shapes and dtypes
// checked against the config, one error listing every missing / unexpected / wrong-shaped tensor.
// Views point into the memory-mapped checkpoint (zero copy) or into storage owned by
// ModelWeights (unaligned tensors copied; Qwen3-Next fused in_proj_qkvz / in_proj_ba
// de-interleaved at load). Spec: shared/design/model-qwen35.md §3.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/config.h"

namespace frost::model {

enum class DType : uint8_t { F32 = 0, BF16 = 1, F16 = 2, F64, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);

namespace quant {
struct QuantModule;  // model/quant/quant_plan.h
}

// A read-only tensor in host memory. `data` is aligned to its element size.
struct TensorView {
    std::string name;            // checkpoint name (after de-interleave: a synthetic name)
    DType dtype = DType::BF16;
    std::vector<int64_t> shape;  // row-major; PyTorch Linear weights are [out, in]
    const void* data = nullptr;  // nullptr only for an absent optional tensor
    size_t bytes = 0;
    // A quantized linear kept as stored (WeightLoadOptions::keep_quantized): the module (owned by
    // ModelWeights::quant); data is its packed weight, dtype the stored one, shape the logical
    // [out, in], bytes every tensor of the module. Null for plain and dequantized tensors.
    const quant::QuantModule* quant = nullptr;
    int64_t numel() const;
    bool present() const { return data != nullptr; }
};

struct LinearAttnWeights {        // Gated DeltaNet layer (Qwen3.5 layout after any de-interleave)
    TensorView in_proj_qkv;       // [C, H], rows [q (Hk*dk) ; k (Hk*dk) ; v (Hv*dv)], head-major
    TensorView in_proj_z;         // [V, H]
    TensorView in_proj_b;         // [Hv, H] beta logits
    TensorView in_proj_a;         // [Hv, H] decay input
    TensorView conv1d;            // [C, 1, K] depthwise, no bias
    TensorView A_log;             // [Hv] (bf16 or f32 on disk)
    TensorView dt_bias;           // [Hv]
    TensorView norm;              // [dv] plain (not zero-centred) gated-RMSNorm weight
    TensorView out_proj;          // [H, V]
};

struct FullAttnWeights {          // gated softmax attention layer
    TensorView q_proj;            // [2*Hq*d, H], per head interleaved [q_h (d) | gate_h (d)]
    TensorView k_proj;            // [Hkv*d, H]
    TensorView v_proj;            // [Hkv*d, H]
    TensorView o_proj;            // [H, Hq*d]
    TensorView q_norm;            // [d] zero-centred
    TensorView k_norm;            // [d] zero-centred
};

// Sparse MoE MLP of one layer (spec §3 "MoE MLP"). Per-expert views whichever layout the file
// uses: per-expert tensors (mlp.experts.{e}.gate_proj|up_proj|down_proj.weight) are bound as
// they are; the fused layout (mlp.experts.gate_up_proj [E, 2I, H] gate-then-up, no .weight
// suffix, and mlp.experts.down_proj [E, H, I]) is sliced into per-expert views (zero copy).
struct MoeWeights {
    TensorView router;                   // [E, H] mlp.gate.weight
    std::vector<TensorView> gate;        // E x [I, H]
    std::vector<TensorView> up;          // E x [I, H]
    std::vector<TensorView> down;        // E x [H, I]
    TensorView shared_gate;              // [Is, H] mlp.shared_expert.gate_proj.weight
    TensorView shared_up;                // [Is, H]
    TensorView shared_down;              // [H, Is]
    TensorView shared_expert_gate;       // [1, H] sigmoid gate of the shared expert
};

struct LayerWeights {
    LayerKind kind = LayerKind::Linear;
    bool is_moe = false;                  // config.is_moe_layer(): moe is bound, mlp_* are absent
    TensorView input_layernorm;           // [H] zero-centred
    TensorView post_attention_layernorm;  // [H] zero-centred
    LinearAttnWeights lin;                // valid when kind == Linear
    FullAttnWeights full;                 // valid when kind == Full
    TensorView mlp_gate;                  // [F, H]
    TensorView mlp_up;                    // [F, H]
    TensorView mlp_down;                  // [H, F]
    MoeWeights moe;                       // valid when is_moe
};

class Checkpoint;  // safetensors.h: the memory-mapped files the views point into
namespace quant {
struct QuantConfig;  // model/quant/quant_config.h
struct QuantPlan;    // model/quant/quant_plan.h: which linears are stored quantized, and how
}  // namespace quant

struct ModelWeights {
    ModelConfig config;
    TensorView embed_tokens;   // [vocab, H]
    TensorView final_norm;     // [H] zero-centred
    TensorView lm_head;        // [vocab, H]; same data as embed_tokens when tied
    bool tied = false;         // decided by whether lm_head.weight is present in the checkpoint
    std::vector<LayerWeights> layers;          // size L
    std::map<std::string, TensorView> mtp;     // every mtp.* tensor, kept for later use
    std::shared_ptr<Checkpoint> checkpoint;    // keeps the mapping alive
    std::vector<std::unique_ptr<uint8_t[]>> owned;  // storage for copied / de-interleaved / dequantized tensors
    // Quantized modules the binding made of stored ones (Qwen3-Next's in_proj_qkvz regrouped into
    // in_proj_qkv and in_proj_z, kept quantized), which those views' TensorView::quant point at;
    // their tensors' bytes live in `owned`.
    std::vector<std::shared_ptr<const quant::QuantModule>> derived_quant;
    std::shared_ptr<const quant::QuantPlan> quant;  // never null after binding; empty plan when not quantized
    uint64_t total_bytes() const;              // bytes of every bound tensor (LM only)
};

// Opens MODEL_DIR (config.json + model.safetensors or model.safetensors.index.json), validates and
// binds every tensor. On mismatch: FROST_ERR_INCOMPATIBLE and frost_last_error() lists every
// missing, unexpected and wrong-shaped/dtype tensor. model.visual.* is skipped; mtp.* is kept.
// MoE layers bind their router, experts and shared expert (see MoeWeights).
// How quantized linears are materialised at load. F32 (default): exact, what the fp32 CPU engine
// needs for the goldens. BF16: half the host memory (the CUDA engine rounds to bf16 anyway); each
// value is the fp32 dequantization rounded to nearest even.
// keep_quantized: bind quantized linears as they are stored (TensorView::quant), for a backend
// that runs them quantized (the CUDA engine); the weight table dequantizes what it cannot keep.
struct WeightLoadOptions {
    DType dequant_dtype = DType::F32;  // F32 or BF16
    bool keep_quantized = false;
};
frost_status load_weights(const std::string& model_dir, ModelWeights* out, const WeightLoadOptions& opts = {});
// Binds an already opened checkpoint against a parsed config (load_weights = load_config +
// Checkpoint::open_dir + this). FROST_ERR_UNSUPPORTED for features the engine does not execute
// (attention biases, rope scaling, ...; MTP alone is kept, not refused).
frost_status bind_weights(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint, ModelWeights* out);
// Same for a quantized checkpoint: every linear the config quantizes is validated
// (model/quant/quant_plan.h) and bound as its fp32 dequantization in `owned` storage.
frost_status bind_weights(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint,
                          const quant::QuantConfig& quant, ModelWeights* out, const WeightLoadOptions& opts = {});

// Parameter counts of the language model as bound (embeddings, every layer, final norm, lm_head
// unless tied; model.visual.* and mtp.* excluded). active = what one token reads: total minus
// the (E - k) routed experts each MoE layer leaves idle. Equal for a dense model.
struct ParamCounts {
    uint64_t total = 0;
    uint64_t active = 0;
};
ParamCounts count_params(const ModelWeights& w);

}  // namespace frost::model
