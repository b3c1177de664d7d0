// Qwen3-Next stores the Gated DeltaNet input projections fused and grouped by key head; the engine
// uses the Qwen3.5 layout. These helpers regroup rows (spec model-qwen35.md §3, "Qwen3-Next
// linear-attention quirks"; transformers fix_query_key_value_ordering). Pure row permutations:
// element type does not matter, only the bytes of one row ([H] elements).
#pragma once
#include <cstddef>
#include <cstdint>

namespace frost::model {

struct QkvzSplit {
    int num_k_heads = 0;  // Hk
    int num_v_heads = 0;  // Hv (multiple of Hk)
    int k_head_dim = 0;   // dk
    int v_head_dim = 0;   // dv
    size_t row_bytes = 0; // bytes of one stored row (H elements, or one row of a per-row array)
    // Weight rows per stored row: 1 for the weight and per-row arrays, the block height for a
    // block-scale grid (128), 8 for INT4 zero points packed 8 rows per word. Every part's row
    // count must be a multiple of it (qkvz_units_ok).
    int unit = 1;
};

// Whether deinterleave_qkvz can regroup an array of p.unit weight rows per stored row.
bool qkvz_units_ok(const QkvzSplit& p);

// src: [2Q+2V rows] grouped per key head g as [q_g (dk) | k_g (dk) | v (r*dv) | z (r*dv)].
// qkv_out: [2Q+V rows] = [all q ; all k ; all v] (head-major); z_out: [V rows].
void deinterleave_qkvz(const QkvzSplit& p, const void* src, void* qkv_out, void* z_out);
// src: [2*Hv rows] grouped per key head as [b (r) | a (r)]; b_out, a_out: [Hv rows] each.
void deinterleave_ba(const QkvzSplit& p, const void* src, void* b_out, void* a_out);

}  // namespace frost::model
