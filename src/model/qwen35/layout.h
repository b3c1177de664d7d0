// Qwen3.5 hybrid LM: the declarations every other part of the engine reads instead of writing
// its own copy. Precision (dtype of activations, GEMM weights, KV and conv state per backend),
// the derived widths, and THE STATE LAYOUT: name, role, kind, dtype and shape of every buffer of
// a session. Allocation on both backends, capsule parts and their metadata, and live fork all
// walk this one list.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/buffers.h"
#include "model/config.h"
#include "ops/tensor.h"

namespace frost::model::qwen35 {

// Dtypes per role for one backend: fp32 everywhere on the CPU reference; bf16 activations, GEMM
// weights, KV and conv state on CUDA. Recurrent state, small weights and logits are fp32 on both.
struct Precision {
    ops::DType act = ops::DType::F32;     // activations (residual stream, projections)
    ops::DType matrix = ops::DType::F32;  // GEMM weights
    ops::DType kv = ops::DType::F32;      // KV cache
    ops::DType conv = ops::DType::F32;    // conv state
    int row_align = 1;                    // fused projection rows padded to this (16-byte bf16 rows)
    // GEMM weights stored quantized stay quantized (their own dtype, weight_quant.h) instead of
    // being dequantized to `matrix` at load: the CUDA engine's choice; never the fp32 CPU oracle.
    bool keep_quantized = false;
    // The GDN in_proj as one matrix [qkv; z; b; a], or as [qkv; z] plus a [b; a] tail that a
    // second GEMM writes beside it (weight_table.h split_gdn_in_proj). Auto splits where one matrix
    // would cost the quantized bytes: [qkv; z] kept quantized, b and a stored in bf16 (as Qwen's
    // FP8 releases and the llm-compressor recipes leave them). Always (tests: the forward's split
    // path on any weights) and Never (A/B: the fused matrix, then dequantized) force it.
    enum class InProjSplit : uint8_t { Auto, Always, Never };
    InProjSplit gdn_in_proj_split = InProjSplit::Auto;
};
Precision precision_for(ops::DType act);

constexpr float kL2Eps = 1e-6f;  // GDN q/k l2norm epsilon (spec §4.1 step 4)
constexpr int kGdnChunk = 64;    // gated-delta-rule chunk = the capsule alignment unit

// Widths the forward and the allocation share.
struct Dims {
    int lin_width = 0;   // [qkv | z | b | a] rows of the GDN in_proj, padded to row_align
    int full_width = 0;  // [q|gate | k | v] rows of the attention qkv_proj, padded to row_align
    int proj_width = 0;  // widest projection output (scratch.proj columns)
    int core_width = 1;  // widest mixer output (scratch.core columns)
};
Dims dims_of(const ModelConfig& c, const Precision& p);

// One buffer of a session's continuation state.
struct StateSpec {
    std::string name;          // without the session prefix: "cursor", "layer3.k_cache"
    BufferRole role = BufferRole::State;
    StateKind kind = StateKind::None;
    ops::DType dtype = ops::DType::F32;
    int layer = -1;
    std::vector<int64_t> shape;  // elements; KV: [max_seq, Hkv, d]
    size_t bytes() const;
    size_t bytes_per_position() const;  // KV: one position's row, else 0
};

// The session pointer table of batched decode (ops.h BatchSlots): per session one row of
// slot_stride(c) device pointers, written once at allocation: column 0 the cursor, then per
// layer l its conv, recurrent, K and V buffers at slot_column(l, kind) (null where the layer
// has no such buffer). Batched ops read a member's buffers through it.
int slot_stride(const ModelConfig& c);
int slot_column(int layer, StateKind kind);  // Cursor: 0; Kv: the K cache (V at + 1)

// Every buffer of one session, in allocation (and capsule part) order.
std::vector<StateSpec> state_layout(const ModelConfig& c, const Precision& p, int max_seq);

}  // namespace frost::model::qwen35
