// CUDA shape rules of the Qwen3.5 kernels (shape_check.h).
#include "model/qwen35/shape_check.h"

#include <string>

#include "exec/error.h"
#if FROST_WITH_CUDA
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda/lm_moe.h"
#endif

namespace frost::model::qwen35 {

#if !FROST_WITH_CUDA
frost_status check_cuda_shapes(const ModelConfig&) {
    return fail(FROST_ERR_UNSUPPORTED, "cuda engine: this build has no CUDA (configure with -DFROST_CUDA=ON)");
}
#else
namespace {
constexpr int kRowAlign = 8;      // bf16 per 16-byte access
constexpr int kMaxGemvK = 20480;  // lm_gemv.cu stages x in 40 KiB of shared memory
constexpr int kRopeRotaryAlign = 64;
}  // namespace

frost_status check_cuda_shapes(const ModelConfig& c) {
    std::string bad;
    auto rule = [&](bool ok, const std::string& what) {
        if (!ok) bad += (bad.empty() ? "" : "; ") + what;
    };
    const auto n = [](int v) { return std::to_string(v); };
    rule(c.hidden_size % kRowAlign == 0 && c.hidden_size <= kMaxGemvK,
         "hidden_size must be a multiple of 8 and <= " + n(kMaxGemvK) + ", got " + n(c.hidden_size));
    if (c.is_moe()) {  // lm_moe.h: WMMA tiles of 16 in the grouped prefill GEMMs
        rule(c.hidden_size % 16 == 0, "MoE needs hidden_size a multiple of 16, got " + n(c.hidden_size));
        rule(c.moe_intermediate_size > 0 && c.moe_intermediate_size % 16 == 0,
             "moe_intermediate_size must be a positive multiple of 16, got " + n(c.moe_intermediate_size));
        rule(c.shared_expert_intermediate_size > 0 && c.shared_expert_intermediate_size % 16 == 0,
             "shared_expert_intermediate_size must be a positive multiple of 16, got " +
                 n(c.shared_expert_intermediate_size));
        rule(c.num_experts <= kernels::kMoeMaxExperts && c.num_experts_per_tok >= 1 &&
                 c.num_experts_per_tok <= kernels::kMoeMaxTopK,
             "num_experts must be <= 1024 and num_experts_per_tok 1..32, got " + n(c.num_experts) + " and " +
                 n(c.num_experts_per_tok));
    }
    rule(c.intermediate_size % kRowAlign == 0 && c.intermediate_size <= kMaxGemvK,
         "intermediate_size must be a multiple of 8 and <= " + n(kMaxGemvK) + ", got " + n(c.intermediate_size));
    if (c.num_full_layers() > 0) {
        rule(c.head_dim == kernels::kAttnHeadDim, "head_dim must be 256, got " + n(c.head_dim));
        const int group = c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0 ? c.num_heads / c.num_kv_heads : 0;
        // attention decode: groups up to 4 in one block, 6 and 8 in two (Qwen3.5-27B 24/4,
        // 35B-A3B and Qwen3-Next-80B 16/2); prefill takes any group.
        rule(group >= 1 && (group <= 4 || group == 6 || group == 8),
             "num_heads / num_kv_heads must be 1, 2, 3, 4, 6 or 8, got " + n(c.num_heads) + "/" + n(c.num_kv_heads));
        rule(c.rotary_dim % kRopeRotaryAlign == 0 && c.rotary_dim <= c.head_dim,
             "rotary_dim must be a multiple of 64, got " + n(c.rotary_dim));
        rule(c.num_heads * c.head_dim <= kMaxGemvK, "num_heads * head_dim must be <= " + n(kMaxGemvK));
    }
    if (c.num_linear_layers() > 0) {
        rule(c.lin_k_head_dim == kernels::kGdnHeadDim && c.lin_v_head_dim == kernels::kGdnHeadDim,
             "linear_key_head_dim and linear_value_head_dim must be 128, got " + n(c.lin_k_head_dim) + " and " +
                 n(c.lin_v_head_dim));
        rule(c.conv_dim() % kernels::kConvChannelsPerBlock == 0,
             "conv channels (2 Hk dk + Hv dv) must be a multiple of 128, got " + n(c.conv_dim()));
        rule(c.conv_kernel >= 2 && c.conv_kernel <= kernels::kConvMaxTaps,
             "linear_conv_kernel_dim must be 2..4, got " + n(c.conv_kernel));
        rule(c.lin_num_k_heads > 0 && c.lin_num_v_heads % c.lin_num_k_heads == 0,
             "linear value heads must be a multiple of key heads");
        rule(c.lin_v_dim() <= kMaxGemvK, "linear value width Hv*dv must be <= " + n(kMaxGemvK));
    }
    if (bad.empty()) return FROST_OK;
    return fail(FROST_ERR_UNSUPPORTED, "cuda engine: the CUDA kernels do not support this model: %s", bad.c_str());
}
#endif

}  // namespace frost::model::qwen35
