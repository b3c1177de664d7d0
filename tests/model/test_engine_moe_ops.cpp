// The MoE forward as the bench and the CLI see it (moe-tiny-a fixture, CPU engine): the MLP step of
// every MoE layer is ONE op_moe (no dense gate_up / down GEMMs there), decode and prefill alike,
// and its cost counts the active experts only: one decode row reads the router, k of the E experts
// and the shared expert, so the step's floor (step_cost) is the dense-equivalent floor minus the
// idle experts' bytes (computed here from config.json's widths, independently of the cost model).
#include <gtest/gtest.h>

#include <map>

#include "model/engine.h"
#include "model/engine_test_util.h"

namespace frost::model {
namespace {

std::unique_ptr<Engine> moe_engine() {
    EngineOptions o;
    o.max_seq_len = 256;
    o.prefill_chunk = 64;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(test::fixture_dir("moe-tiny-a"), o, &e), FROST_OK) << frost_last_error();
    return e;
}

TEST(EngineMoeOps, EveryMoeLayerIsOneMoeOpDecodeAndPrefill) {
    auto e = moe_engine();
    ASSERT_TRUE(e);
    const ModelConfig& c = e->config();
    ASSERT_EQ(c.num_moe_layers(), c.num_layers);
    for (int rows : {1, 64}) {
        SCOPED_TRACE(rows == 1 ? "decode" : "prefill");
        ASSERT_EQ(e->reset(0), FROST_OK);
        std::vector<ops::OpRecord> seen;
        ASSERT_EQ(test::record_step_ops(*e, 0, rows, rows == 1, &seen), FROST_OK) << frost_last_error();
        std::map<ops::OpKind, int> n;
        for (const auto& r : seen) ++n[r.kind];
        EXPECT_EQ(n[ops::OpKind::Moe], c.num_layers);
        EXPECT_EQ(n[ops::OpKind::Swiglu], 0);
        // Per layer: in_proj and out_proj of the mixer only; lm_head once. No MLP GEMMs.
        EXPECT_EQ(n[ops::OpKind::Gemm], 2 * c.num_layers + 1);
    }
}

// Beside an MoE block a decode norm keeps the plain programmatic launch (pdl 1): letting the GEMV
// after the MoE down kernel, or the router, start early measured ~4 % slower (lm_norm.cu). Every
// layer of moe-tiny-a is MoE, so only layer 0's input norm (after the embedding) takes pdl 2.
TEST(EngineMoeOps, DecodeNormsBesideMoeBlocksKeepThePlainLaunch) {
    auto e = moe_engine();
    ASSERT_TRUE(e);
    const ModelConfig& c = e->config();
    ASSERT_EQ(c.num_moe_layers(), c.num_layers);
    ASSERT_EQ(e->reset(0), FROST_OK);
    std::vector<ops::OpRecord> seen;
    ASSERT_EQ(test::record_step_ops(*e, 0, 1, true, &seen), FROST_OK) << frost_last_error();
    std::vector<int32_t> hints;
    for (const auto& r : seen)
        if (r.kind == ops::OpKind::AddRmsNorm) hints.push_back(r.pdl);
    ASSERT_EQ(hints.size(), size_t(2 * c.num_layers + 1));
    for (size_t i = 0; i < hints.size(); ++i) EXPECT_EQ(hints[i], i == 0 ? 2 : 1) << "norm " << i;
}

TEST(EngineMoeOps, DecodeFloorCountsOnlyTheActiveExperts) {
    auto e = moe_engine();
    ASSERT_TRUE(e);
    const ModelConfig& c = e->config();
    const double H = c.hidden_size, I = c.moe_intermediate_size, Is = c.shared_expert_intermediate_size;
    const double E = c.num_experts, k = c.num_experts_per_tok, L = c.num_moe_layers();
    ASSERT_LT(k, E);
    // fp32 weights on the CPU engine. Per decode row and MoE layer: router E.H, k experts of 3.I.H,
    // shared expert 3.Is.H and its gate H.
    const double active = 4.0 * L * H * (E + 3 * k * I + 3 * Is + 1);
    const double idle = 4.0 * L * (E - k) * 3 * I * H;
    std::vector<ops::OpRecord> seen;
    ASSERT_EQ(e->reset(0), FROST_OK);
    ASSERT_EQ(test::record_step_ops(*e, 0, 1, true, &seen), FROST_OK) << frost_last_error();
    double moe_bytes = 0;
    for (const auto& r : seen)
        if (r.kind == ops::OpKind::Moe) moe_bytes += r.cost.bytes;
    EXPECT_GE(moe_bytes, active);
    // Beyond the active weights only activations, router outputs and the residual (a few rows of H).
    EXPECT_LT(moe_bytes, active + L * 4.0 * (8 * H + 2 * E + 2 * k));
    EXPECT_LT(moe_bytes, active + idle / 10) << "idle experts are counted in the floor";
    // The whole step's floor agrees with the per-op sum (step_cost runs nothing).
    ops::OpCost step;
    ASSERT_EQ(e->step_cost(1, true, 1, &step), FROST_OK) << frost_last_error();
    double all = 0;
    for (const auto& r : seen) all += r.cost.bytes;
    EXPECT_GT(step.bytes, moe_bytes);
    EXPECT_LE(step.bytes, all * 1.5);
}

}  // namespace
}  // namespace frost::model
