// The weight binding of Qwen3.5, declared once as data: every device weight the forward reads,
// which checkpoint tensors it is the row-concatenation of (the fusion list: GDN [qkv; z; b; a],
// attention [q|gate; k; v], MLP [gate; up], MoE experts [E x (gate; up)] and [E x down]), its form (a GEMM matrix in the backend's matrix
// dtype with rows padded to row_align, or a small fp32 vector) and where its view goes.
// bind_weights() uploads the table on either backend; tensors are read through ModelWeights
// (TensorView), so a loader that dequantizes below it changes nothing here.
#pragma once
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/buffers.h"
#include "model/qwen35/layout.h"
#include "model/weights.h"
#include "ops/tensor.h"

namespace frost::model::qwen35 {

struct LayerWeightViews {
    ops::Tensor in_ln, post_ln;              // [H] f32 zero-centred
    ops::Tensor in_proj;                     // linear [lin_width, H] (or [qkv; z] when split); full [full_width, H]
    // Linear layers whose in_proj is split (split_gdn_in_proj): the [b; a] rows, padded so that
    // in_proj and the tail together are lin_width rows; a second GEMM writes its columns of the
    // projection output right after in_proj's. Empty otherwise.
    ops::Tensor in_proj_tail;
    ops::Tensor conv_w;                      // [C, K] f32 (linear)
    ops::Tensor A_log, dt_bias;              // [Hv] f32 (linear)
    ops::Tensor gdn_norm;                    // [dv] f32 (linear)
    ops::Tensor out_proj;                    // linear [H, V]; full o_proj [H, Hq d]
    ops::Tensor q_norm, k_norm;              // [d] f32 (full)
    ops::Tensor gate_up;                     // [2F, H] (dense MLP layers)
    ops::Tensor down;                        // [H, F]
    // Mixture-of-experts layers (config.is_moe_layer; empty otherwise), MoeOp's layouts.
    ops::Tensor moe_router;                  // [E, H]
    ops::Tensor moe_gate_up;                 // [E * 2I, H]: per expert [gate; up]
    ops::Tensor moe_down;                    // [E * H, I]
    ops::Tensor shared_gate_up;              // [2Is, H]
    ops::Tensor shared_down;                 // [H, Is]
    ops::Tensor shared_gate;                 // [1, H]
};

struct WeightViews {
    ops::Tensor embed;       // [vocab, H]
    ops::Tensor final_norm;  // [H] f32
    ops::Tensor lm_head;     // [vocab, H] (== embed when tied)
    std::vector<LayerWeightViews> layers;
    int quantized_matrices = 0;            // matrices bound in their quantized dtype
    std::vector<std::string> dequantized;  // "name: reason" of quantized matrices dequantized at load
};

// Every GEMM matrix view of `v` (lm_head and each layer's projections, MLP and MoE matrices):
// the views a backend may keep quantized (ops::Backend::prepare_quant_weight).
std::vector<ops::Tensor*> matrix_views(WeightViews* v);

enum class WeightForm : uint8_t {
    Matrix = 0,  // GEMM operand [rows, cols] in Precision::matrix
    Vector = 1,  // small weight, fp32, shape of the checkpoint tensor flattened
};

struct WeightSpec {
    std::string name;                        // buffer name, "w.layer3.in_proj_qkvzba"
    WeightForm form = WeightForm::Vector;
    std::vector<const TensorView*> parts;    // row-concatenated in this order
    int64_t cols = 0;                        // Matrix: columns (K)
    int64_t padded_rows = 0;                 // Matrix: zero rows up to this count (0: none)
    ops::Tensor* slot = nullptr;             // the view bind_weights fills
};

// Whether linear layer `a`'s in_proj is bound as [qkv; z] plus a [b; a] tail (Precision::
// gdn_in_proj_split): Auto where [qkv; z] stays quantized as one view but the four parts do not
// (b and a stored in another form), and the tail's output columns start on the row alignment
// (the GEMM launchers take fused-projection views 16-byte aligned); Always wherever the
// alignment holds; Never nowhere.
bool split_gdn_in_proj(const ModelConfig& c, const LinearAttnWeights& a, const Precision& p);

// The table for `w` (pointers into w and into *views, which it sizes).
std::vector<WeightSpec> weight_table(const ModelConfig& c, const ModelWeights& w, const Precision& p,
                                     WeightViews* views);

// Whether bind_weights keeps matrix `s` quantized under `p`: "" when it does (every part stored
// quantized, the format's layout fits one view, the op reads it), else why not. One decision
// for the binder and for matrix_placements.
bool stored_quantized(const WeightSpec& s);
std::string kept_quantized_refusal(const WeightSpec& s, const Precision& p, const WeightViews& views);

// How bind_weights will place each GEMM matrix under `p`, without allocating anything: for
// `frost inspect`'s device estimate. stored_bytes counts the parts' tensors as stored (packed
// weights and scales: ~ the device bytes of a kept matrix), dense_bytes the matrix in p.matrix.
struct MatrixPlacement {
    std::string name;
    bool stored_quantized = false;
    bool kept = false;      // bound quantized
    std::string why;        // stored quantized but dequantized: kept_quantized_refusal
    uint64_t stored_bytes = 0, dense_bytes = 0;
};
std::vector<MatrixPlacement> matrix_placements(const ModelConfig& c, const ModelWeights& w, const Precision& p);

// Allocates and uploads every weight of the table (quantized matrices as stored when
// p.keep_quantized and weight_quant.h accepts them, else dequantized) into `list` (role Weights) on `stream`; fills
// each spec's slot; `tied` makes lm_head the embedding's view.
frost_status bind_weights(frost_ctx* ctx, frost_stream* stream, const ModelConfig& c, const ModelWeights& w,
                          const Precision& p, BufferList* list, WeightViews* views);

}  // namespace frost::model::qwen35
