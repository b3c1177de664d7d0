// Params of the sparse mixture-of-experts MLP (Qwen3.5-MoE / Qwen3-Next, spec model-qwen35.md §4
// "MoE block"), shared by the CPU reference (cpu/moe.cpp) and the CUDA kernels (cuda/lm_moe.cu).
// Pointers are in the memory of the backend that runs the kernel. The selected expert ids are
// written to `topk_ids` in that memory, so a captured decode graph reads them there every step
// (no host round trip, no recapture).
#pragma once
#include <cstdint>

namespace frost::kernels {

// Per row r < rows (rows = *n_rows clamped to max_rows, or max_rows):
//   probs[r]  = softmax_fp32(router · x[r])                     over all E experts
//   topk      = the k largest probs (ties: lower expert id first), by descending probability
//   w_j       = p_j / Σ_topk p  when norm_topk, else p_j
//   routed    = Σ_j w_j · down_j(silu(gate_j x) ⊙ up_j x)       summed in ascending expert id
//   shared    = sigmoid(shared_gate · x) · down_s(silu(gate_s x) ⊙ up_s x)
//   y[r]     += routed + shared                                  (fused residual add)
// Every row is computed on its own in one fixed order, so a token's result does not depend on
// the other rows of the launch (chunk invariance, capsules.md).
struct MoeParams {
    const float* x;               // [rows, H] contiguous (post-attention RMSNorm output)
    float* y;                     // [rows, H] contiguous residual stream, accumulated into
    const float* router;          // [E, H] mlp.gate.weight
    const float* experts_gate_up; // [E, 2I, H]: expert e = [gate_proj (I rows) ; up_proj (I rows)]
    const float* experts_down;    // [E, H, I]
    const float* shared_gate_up;  // [2Is, H]: [shared gate_proj ; shared up_proj]
    const float* shared_down;     // [H, Is]
    const float* shared_gate;     // [H] (the [1, H] shared_expert_gate)
    float* probs;                 // [max_rows, E] out: router probabilities (kept for traces)
    int32_t* topk_ids;            // [max_rows, k] out: selected experts, descending probability
    float* topk_w;                // [max_rows, k] out: their mixing weights
    float* work;                  // [max_rows, moe_work_floats(H, I, Is)] scratch
    int32_t H;                    // hidden size
    int32_t E;                    // experts
    int32_t k;                    // experts per token (1..E)
    int32_t I;                    // expert FFN width
    int32_t Is;                   // shared expert FFN width
    int32_t norm_topk;            // 1: renormalise the top-k weights to sum 1
    int32_t max_rows;
    const int32_t* n_rows;        // [1], may be null
    // 1: the experts' inputs are W8A8's (ops MoeOp::quant_act): x, and each expert's SwiGLU
    // activations, replaced by e4m3(v / s) * s per 128-wide group, s = max|v| / 448 (the CPU's
    // quantize_act_e4m3, GemmOp::quant_act's rounding), before the expert GEMMs; the router and the
    // shared expert's gate read x as it is. Needs H, I and Is multiples of 128 (else refused).
    int32_t quant_act;
};

// Scratch floats one row needs: [gate|up] of the widest FFN, the routed sum [H], then the
// quantized x [H] (quant_act).
inline int64_t moe_work_floats(int32_t H, int32_t I, int32_t Is) {
    const int64_t w = I > Is ? I : Is;
    return 2 * w + 2 * int64_t(H);
}

}  // namespace frost::kernels
