// The CPU engine reproduces the transformers goldens of both fixtures (text-only and multimodal
// layouts): relative L2 <= 1e-3 at every stored prompt position and every greedy step, and every
// greedy token identical (tests/fixtures/README.md). The goldens' RoPE uses bf16-rounded inverse
// frequencies (the generator cast the model to bf16, buffers included), which is the engine's
// default (EngineOptions::rope_inv_freq_bf16); with exact fp32 frequencies the drift reaches
// ~1.5e-2 by position 200, which the last test pins down so the cause stays documented.
#include <gtest/gtest.h>

#include "model/engine.h"
#include "model/engine_test_util.h"

namespace frost::model {
namespace {

constexpr double kMaxRelL2 = 1e-3;

class Fixtures : public ::testing::TestWithParam<const char*> {};

TEST_P(Fixtures, PromptLogitsAndGreedyMatchGolden) {
    const std::string dir = test::fixture_dir(GetParam());
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 128;
    o.logits_all = true;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    test::expect_matches_golden(*e, g, kMaxRelL2);
}

TEST(FixtureRope, ExactFp32FrequenciesDriftFromTheGolden) {
    const std::string dir = test::fixture_dir("qwen35-tiny-a");
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    EngineOptions o;
    o.max_seq_len = 256;
    o.logits_all = true;
    o.rope_inv_freq_bf16 = false;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    std::vector<float> logits;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), nullptr, &logits), FROST_OK);
    const size_t V = g.vocab, last = g.prompt_logit_positions.size() - 1;
    const size_t p = g.prompt_logit_positions[last];
    EXPECT_GT(test::rel_l2(logits.data() + p * V, g.logits_prompt.data() + last * V, V), kMaxRelL2);
}

INSTANTIATE_TEST_SUITE_P(Both, Fixtures, ::testing::Values("qwen35-tiny-a", "qwen35-tiny-a-vl"));

}  // namespace
}  // namespace frost::model
