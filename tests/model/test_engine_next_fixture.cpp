// The CPU engine reproduces the transformers golden of next-tiny-a, a tiny Qwen3-Next
// (Qwen3NextForCausalLM) written by transformers' save_pretrained (tests/fixtures/tools/
// gen_fixture_next.py): fused interleaved in_proj_qkvz / in_proj_ba over two key heads, dense
// and MoE layers side by side (decoder_sparse_step 2 + mlp_only_layers [1] -> MoE at 3 and 5),
// norm_topk_prob, shared expert with its sigmoid gate, partial rotary 0.25.
//
// Acceptance: per-position relative L2 <= 1e-3 over the stored prompt rows and every greedy
// step, greedy tokens identical, the MoE layers where transformers put them, and every token
// routed to the reference's experts except at a router near-tie; a miss is only excused after an
// actual flip, which is named (tests/model/moe_golden_util.h). The routing record is in golden.json.
#include <gtest/gtest.h>

#include "model/moe_golden_util.h"

namespace frost::model {
namespace {

TEST(NextFixture, PromptLogitsGreedyAndRoutingMatchGoldenFlipsNamed) {
    test::check_moe_golden("next-tiny-a", "golden.json");
}

}  // namespace
}  // namespace frost::model
