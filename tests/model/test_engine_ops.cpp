// The engine's ops as the bench and the CLI see them: record_ops tells an observer every op of
// one step (the sequence the graphs captured), step_cost sums the ops' cost model without running
// anything, and a decode step's bytes grow with the context by exactly the KV rows it reads.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "model/capsule_test_util.h"
#include "model/engine_test_util.h"
#include "model/quant/quant_plan.h"
#include "model/weights.h"

namespace frost::model {
namespace {

class EngineOps : public ::testing::TestWithParam<frost_backend> {};

TEST_P(EngineOps, RecordOpsReportsEveryOpOfTheForwardInOrder) {
    auto e = test::capsule_engine(GetParam(), 1);
    ASSERT_TRUE(e);
    const ModelConfig& c = e->config();
    const auto ids = test::random_ids(10, 0xabc + GetParam());
    ASSERT_EQ(e->prefill(0, ids.data(), ids.size(), nullptr), FROST_OK);
    std::vector<ops::OpRecord> seen;
    ASSERT_EQ(test::record_step_ops(*e, 0, 1, true, &seen), FROST_OK) << frost_last_error();
    // decode: cursor, embed, per layer 2 norms + mixer (GDN: in_proj, gdn_decode, out_proj;
    // attention: qkv_proj, qk_rope_kv_append, attention, o_proj) + 2 MLP GEMMs, then final norm,
    // lm_head, sample, cursor advance.
    const size_t linear_layer = 2 + 3 + 2, full_layer = 2 + 4 + 2;
    ASSERT_EQ(seen.size(), 2 + linear_layer * size_t(c.num_linear_layers()) + full_layer * size_t(c.num_full_layers()) + 4);
    EXPECT_EQ(seen.front().kind, ops::OpKind::Cursor);
    EXPECT_EQ(seen[1].kind, ops::OpKind::Embed);
    EXPECT_EQ(seen.back().kind, ops::OpKind::Cursor);
    std::map<ops::OpKind, int> n;
    for (const auto& r : seen) ++n[r.kind];
    EXPECT_EQ(n[ops::OpKind::GdnDecode], c.num_linear_layers());  // conv + gated step + norm as one op
    EXPECT_EQ(n[ops::OpKind::GdnStep], 0);
    EXPECT_EQ(n[ops::OpKind::Conv1dSiluL2], 0);
    EXPECT_EQ(n[ops::OpKind::GatedRmsNorm], 0);
    EXPECT_EQ(n[ops::OpKind::AttentionDecode], c.num_full_layers());
    EXPECT_EQ(n[ops::OpKind::QkRopeKvAppend], c.num_full_layers());  // q/k norm + RoPE with the KV append
    EXPECT_EQ(n[ops::OpKind::QkNormRope], 0);
    EXPECT_EQ(n[ops::OpKind::KvAppend], 0);
    EXPECT_EQ(n[ops::OpKind::GdnChunk], 0);
    EXPECT_EQ(n[ops::OpKind::Swiglu], 0);  // fused into the gate_up GEMV at decode
    // The step ran (its cursor advance among the ops) and the cursor was put back, so replays run
    // at the step's position and the host mirror stays true.
    EXPECT_EQ(e->position(0), 10);
    kernels::StepCursor cur{};
    ASSERT_EQ(e->read_cursor(0, &cur), FROST_OK);
    EXPECT_EQ(cur.pos, 10);
    ASSERT_EQ(seen.front().replay(e->stream()), FROST_OK);  // the recorded decode_begin and advance, replayed
    ASSERT_EQ(seen.back().replay(e->stream()), FROST_OK);
    ASSERT_EQ(frost_stream_sync(e->stream()), FROST_OK);
    ASSERT_EQ(e->read_cursor(0, &cur), FROST_OK);
    EXPECT_EQ(cur.pos, 11);
    ASSERT_EQ(e->adopt_restored_state(0, [&] { auto j = e->journal(0); j.push_back(0); return j; }()), FROST_OK)
        << frost_last_error();
    // Prefill records the unfused GDN forms, the gate inside the chunked rule, and the q/k norm with
    // the KV append as one op. Its last layer runs, past its state-writing ops, on the last row
    // alone (the tail: one tail_row op, then that layer's decode forms).
    ASSERT_EQ(test::record_step_ops(*e, 0, 64, false, &seen), FROST_OK) << frost_last_error();
    n.clear();
    for (const auto& r : seen) ++n[r.kind];
    const bool last_full = !c.is_linear(c.num_layers - 1);
    EXPECT_EQ(n[ops::OpKind::TailRow], 1);
    EXPECT_EQ(n[ops::OpKind::GdnChunk], c.num_linear_layers());
    EXPECT_EQ(n[ops::OpKind::GdnGate], 0);
    EXPECT_EQ(n[ops::OpKind::GdnDecode], 0);
    EXPECT_EQ(n[ops::OpKind::QkRopeKvAppend], c.num_full_layers());
    EXPECT_EQ(n[ops::OpKind::QkNormRope], 0);
    EXPECT_EQ(n[ops::OpKind::KvAppend], 0);
    // Each layer's SwiGLU is its own op after the gate_up GEMM, or in that GEMM's epilogue where
    // the backend fuses it (Backend::gemm_fuses_swiglu: CUDA on sm_90a); all layers alike, and the
    // CPU keeps the two ops. The tail's is in its gate_up GEMV, as in decode.
    int fused = 0, gemv = 0;
    for (const auto& r : seen) {
        fused += std::string(r.label) == "gemm mlp gate_up+swiglu";
        gemv += std::string(r.label) == "gemv mlp gate_up+swiglu";
    }
    EXPECT_EQ(gemv, 1);
    EXPECT_EQ(n[ops::OpKind::Swiglu] + fused, c.num_layers - 1);
    EXPECT_TRUE(fused == 0 || fused == c.num_layers - 1) << fused;
    if (GetParam() == FROST_BACKEND_CPU) {
        EXPECT_EQ(fused, 0);
    }
    EXPECT_EQ(n[ops::OpKind::AttentionPrefill], c.num_full_layers() - (last_full ? 1 : 0));
    EXPECT_EQ(n[ops::OpKind::AttentionDecode], last_full ? 1 : 0);
    // Eval keeps every row of the last layer: no tail.
    {
        model::EngineOptions o = e->options();
        o.logits_all = true;
        std::unique_ptr<model::Engine> ev;
        ASSERT_EQ(model::Engine::create(test::capsule_model_dir(), o, &ev), FROST_OK) << frost_last_error();
        std::vector<ops::OpRecord> all;
        ASSERT_EQ(test::record_step_ops(*ev, 0, 64, false, &all), FROST_OK) << frost_last_error();
        int tails = 0, prefill_attn = 0;
        for (const auto& r : all) {
            tails += r.kind == ops::OpKind::TailRow;
            prefill_attn += r.kind == ops::OpKind::AttentionPrefill;
        }
        EXPECT_EQ(tails, 0);
        EXPECT_EQ(prefill_attn, c.num_full_layers());
    }
    // The position is put back and n_tokens is the bucket: a replay processes all 64 rows (the
    // recorded advance moves the cursor by 64, as the recorded step did).
    ASSERT_EQ(e->read_cursor(0, &cur), FROST_OK);
    EXPECT_EQ(cur.pos, 11);
    EXPECT_EQ(cur.n_tokens, 64);
    ASSERT_EQ(seen.back().kind, ops::OpKind::Cursor);
    ASSERT_EQ(seen.back().replay(e->stream()), FROST_OK);
    ASSERT_EQ(frost_stream_sync(e->stream()), FROST_OK);
    ASSERT_EQ(e->read_cursor(0, &cur), FROST_OK);
    EXPECT_EQ(cur.pos, 11 + 64);
    EXPECT_EQ(e->record_ops(0, 3, false, [](const ops::OpRecord&) {}), FROST_ERR_INVALID_ARG);
}

// The decode norms' launch hint (forward.cpp norm_pdl): in a dense model every residual RMSNorm
// of a decode step lets its reading GEMV start before its own wait (pdl 2); prefill launches take
// no programmatic launch at all (0). The MoE exception is checked in test_engine_moe_ops.cpp.
TEST_P(EngineOps, DecodeNormsOfADenseModelTriggerTheirGemvEarly) {
    auto e = test::capsule_engine(GetParam(), 1);
    ASSERT_TRUE(e);
    const ModelConfig& c = e->config();
    ASSERT_EQ(c.num_moe_layers(), 0);
    for (int rows : {1, 64}) {
        SCOPED_TRACE(rows == 1 ? "decode" : "prefill");
        ASSERT_EQ(e->reset(0), FROST_OK);
        std::vector<ops::OpRecord> seen;
        ASSERT_EQ(test::record_step_ops(*e, 0, rows, rows == 1, &seen), FROST_OK) << frost_last_error();
        int norms = 0;
        for (const auto& r : seen) {
            if (r.kind != ops::OpKind::AddRmsNorm) continue;
            ++norms;
            EXPECT_EQ(r.pdl, rows == 1 ? 2 : 0) << r.label;
        }
        EXPECT_EQ(norms, 2 * c.num_layers + 1);
    }
}

TEST_P(EngineOps, StepCostRunsNothingAndGrowsByTheKvRowsRead) {
    auto e = test::capsule_engine(GetParam(), 1);
    ASSERT_TRUE(e);
    const auto ids = test::random_ids(70, 0xdef + GetParam());
    ASSERT_EQ(e->prefill(0, ids.data(), ids.size(), nullptr), FROST_OK);
    const auto before = test::live_state(*e, 0);
    ops::OpCost a, b;
    ASSERT_EQ(e->step_cost(1, true, 100, &a), FROST_OK);
    ASSERT_EQ(e->step_cost(1, true, 101, &b), FROST_OK);
    EXPECT_EQ(test::live_state(*e, 0), before);  // nothing ran
    double kv_row = 0;  // bytes of one position of every K and V cache
    for (const auto& nb : e->state_buffers(0)) kv_row += double(nb.bytes_per_position);
    EXPECT_DOUBLE_EQ(b.bytes - a.bytes, kv_row);
    EXPECT_GT(a.flops, 0);
    ops::OpCost p;
    ASSERT_EQ(e->prefill_cost(200, &p), FROST_OK);
    EXPECT_GT(p.flops, 100 * a.flops);
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineOps, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::model

namespace frost::model {
namespace {

// EngineOptions::prefill_chunk = 0 picks the chunk by backend and model, within the context.
TEST(EnginePrefillChunk, AutoByBackendAndModelWithinTheContext) {
    ModelConfig dense, small, moe;
    dense.hidden_size = 4096;  // 9B-style
    small.hidden_size = 1024;  // 0.8B-style: its GEMMs want more rows per launch
    ModelConfig test_sized = small;
    test_sized.hidden_size = 256;  // tiny-gpu: keeps 2048 (its tests capture a graph per bucket)
    moe.num_experts = 256;
    moe.num_experts_per_tok = 8;
    ASSERT_FALSE(dense.is_moe());
    ASSERT_TRUE(moe.is_moe());
    EngineOptions o;
    EXPECT_EQ(o.prefill_chunk, 0);
    o.max_seq_len = 32768;
    EXPECT_EQ(auto_prefill_chunk(o, dense), 256);  // CPU
    o.backend = FROST_BACKEND_CUDA;
    EXPECT_EQ(auto_prefill_chunk(o, dense), 8192);        // fewer passes over the GDN state and the KV
    EXPECT_EQ(auto_prefill_chunk(o, dense, true), 4096);  // quantized: one dequantization per weight and chunk
    EXPECT_EQ(auto_prefill_chunk(o, test_sized, true), 2048);
    // What the engine passes as `quantized`: a CUDA engine keeping a quantized checkpoint's views.
    ModelWeights w;
    EXPECT_FALSE(runs_quantized(o, w));  // no plan
    auto plan = std::make_shared<quant::QuantPlan>();
    w.quant = plan;
    EXPECT_FALSE(runs_quantized(o, w));  // a plan without modules: a bf16 checkpoint
    plan->modules["model.layers.0.mlp.down_proj"] = quant::QuantModule{};
    EXPECT_TRUE(runs_quantized(o, w));
    EngineOptions kept_off = o;
    kept_off.keep_quantized = false;  // dequantized at load
    EXPECT_FALSE(runs_quantized(kept_off, w));
    EngineOptions cpu = o;
    cpu.backend = FROST_BACKEND_CPU;
    EXPECT_FALSE(runs_quantized(cpu, w));
    EXPECT_EQ(auto_prefill_chunk(o, small), 4096);
    EXPECT_EQ(auto_prefill_chunk(o, test_sized), 2048);
    EXPECT_EQ(auto_prefill_chunk(o, moe), 4096);  // a test-sized MoE shape (hidden 0 here)
    ModelConfig moe_35b = moe;
    moe_35b.hidden_size = 2048;
    EXPECT_EQ(auto_prefill_chunk(o, moe_35b), 8192);        // rows per expert
    // Quantized experts too: each chunk reads (or dequantizes) every expert once, and a 4096-row
    // chunk leaves the 35B-A3B's experts ~144 rows each, two 128-row tiles nearly half padding.
    EXPECT_EQ(auto_prefill_chunk(o, moe_35b, true), 8192);
    ModelConfig moe_test_sized = moe_35b;
    moe_test_sized.hidden_size = 256;  // test-sized MoE keeps 4096, quantized or not
    EXPECT_EQ(auto_prefill_chunk(o, moe_test_sized, true), 4096);
    o.max_seq_len = 1000;  // never above the context, rounded up to the 64-row unit
    EXPECT_EQ(auto_prefill_chunk(o, moe), 1024);
    o.max_seq_len = 10;
    EXPECT_EQ(auto_prefill_chunk(o, dense), 64);
    o.prefill_chunk = 192;  // an explicit value is kept
    EXPECT_EQ(auto_prefill_chunk(o, moe), 192);
}

}  // namespace
}  // namespace frost::model
