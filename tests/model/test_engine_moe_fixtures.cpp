// The CPU engine reproduces the transformers goldens of both MoE fixtures (flat text layout and
// multimodal wrapper): per-position relative L2 <= 1e-3 over the prompt and every greedy step,
// and every greedy token identical (tests/fixtures/README.md).
//
// Router near-ties: the golden's router ran in fp32 over float64 activations, ours over fp32
// activations, so where the k-th and (k+1)-th router probabilities are closer than our fp32
// error the two can pick different experts. The engine's "router_probs" trace gives our gap
// at every (position, MoE layer). A position that misses the tolerance is accepted only when
// it sits at or after a near-tie (gap < kNearTie) at any layer, since a flipped expert at one
// token changes every later token through the recurrent and attention state; such positions
// are named in the output and as test properties. A miss with no near-tie before it fails.
//
// Capsule exactness on MoE: restore + append is bitwise equal to a cold prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <fstream>

#include "model/capsule.h"
#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/capsule_exactness_util.h"
#include "model/model_files_util.h"

namespace frost::model {
namespace {

constexpr double kMaxRelL2 = 1e-3;
// Our fp32 router probabilities differ from the golden's by ~1e-6 relative (fp32 activations
// through 4 layers); a top-k gap below this can flip an expert choice.
constexpr double kNearTie = 1e-5;

// Smallest gap between the k-th and (k+1)-th router probability over the MoE layers of each of
// the first `valid` rows of the last step (the trace holds the bucket's capacity of rows).
std::vector<double> topk_gaps(Engine& e, int k, int valid) {
    const ModelConfig& c = e.config();
    std::vector<double> gaps;
    for (int l = 0; l < c.num_layers; ++l) {
        if (!c.is_moe_layer(l)) continue;
        std::vector<float> probs;
        int rows = 0;
        EXPECT_EQ(e.read_trace("router_probs", l, &probs, &rows), FROST_OK) << frost_last_error();
        EXPECT_LE(valid, rows);
        gaps.resize(size_t(valid), 1.0);
        for (int r = 0; r < valid && r < rows; ++r) {
            std::vector<float> p(probs.begin() + long(r) * c.num_experts, probs.begin() + long(r + 1) * c.num_experts);
            std::sort(p.begin(), p.end(), std::greater<float>());
            gaps[size_t(r)] = std::min(gaps[size_t(r)], double(p[size_t(k) - 1]) - double(p[size_t(k)]));
        }
    }
    return gaps;
}

struct FixtureRun {
    std::vector<double> rel;    // per checked position: prompt positions, then greedy steps
    std::vector<double> gap;    // our smallest router top-k gap at that token
    std::vector<std::string> label;
    bool greedy_ok = true;
    std::string greedy_msg;
};

FixtureRun run_fixture(const std::string& dir, const test::Golden& g) {
    EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 256;  // the whole prompt in one step, so the trace holds every prompt row
    o.logits_all = true;
    o.trace = true;
    std::unique_ptr<Engine> e;
    FixtureRun run;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    if (!e) return run;
    const size_t V = size_t(g.vocab);
    const int k = e->config().num_experts_per_tok;
    EXPECT_LE(g.prompt_ids.size(), size_t(o.prefill_chunk));
    std::vector<float> logits;
    int32_t next = -1;
    EXPECT_EQ(e->prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), &next, &logits), FROST_OK)
        << frost_last_error();
    const std::vector<double> prompt_gaps = topk_gaps(*e, k, int(g.prompt_ids.size()));
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = size_t(g.prompt_logit_positions[i]);
        run.rel.push_back(test::rel_l2(logits.data() + p * V, g.logits_prompt.data() + i * V, V));
        run.gap.push_back(p < prompt_gaps.size() ? prompt_gaps[p] : 1.0);
        run.label.push_back("prompt position " + std::to_string(p));
    }
    std::vector<float> last;
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        EXPECT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        run.rel.push_back(test::rel_l2(last.data(), g.logits_greedy.data() + i * V, V));
        // The token this step consumed: the prompt's last for step 0, else the decode input.
        run.gap.push_back(i == 0 ? prompt_gaps.back() : topk_gaps(*e, k, 1)[0]);
        run.label.push_back("greedy step " + std::to_string(i));
        if (next != g.greedy_ids[i] && run.greedy_ok) {
            run.greedy_ok = false;
            run.greedy_msg = "greedy step " + std::to_string(i) + ": got " + std::to_string(next) + ", golden " +
                             std::to_string(g.greedy_ids[i]);
        }
        if (!run.greedy_ok) break;  // later steps would run from a different prefix
        if (i + 1 < g.greedy_ids.size()) {
            EXPECT_EQ(e->decode(0, &next), FROST_OK) << frost_last_error();
        }
    }
    return run;
}

class MoeFixtures : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeFixtures, PromptLogitsAndGreedyMatchGoldenNearTiesNamed) {
    const std::string dir = test::fixture_dir(GetParam());
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    const FixtureRun run = run_fixture(dir, g);
    ASSERT_EQ(run.rel.size(), run.gap.size());
    ASSERT_FALSE(run.rel.empty());
    double worst = 0, min_gap = 1;
    int first_tie = -1;  // index of the first token with a near-tie
    std::string excused, ties;
    for (size_t i = 0; i < run.rel.size(); ++i) {
        min_gap = std::min(min_gap, run.gap[i]);
        if (run.gap[i] < kNearTie) {
            char t[128];
            std::snprintf(t, sizeof t, "%s (gap %.3g, rel %.3g)", run.label[i].c_str(), run.gap[i], run.rel[i]);
            ties += std::string(ties.empty() ? "" : "; ") + t;
        }
        if (run.gap[i] < kNearTie && first_tie < 0) first_tie = int(i);
        if (run.rel[i] <= kMaxRelL2) {
            worst = std::max(worst, run.rel[i]);
            continue;
        }
        char line[160];
        std::snprintf(line, sizeof line, "%s: rel %.3g, router top-k gap here %.3g", run.label[i].c_str(), run.rel[i],
                      run.gap[i]);
        EXPECT_TRUE(first_tie >= 0 && first_tie <= int(i))
            << line << " misses the tolerance with no router near-tie (gap < " << kNearTie << ") at or before it";
        excused += std::string(excused.empty() ? "" : "; ") + line;
    }
    // Every near-tie token, whether or not it flipped an expert: the report the issue asks for.
    std::printf("[ near-tie ] %s: tokens with a router top-k gap < %g: %s\n", GetParam(), kNearTie,
                ties.empty() ? "none" : ties.c_str());
    RecordProperty("near_tie_tokens", ties.empty() ? "none" : ties);
    if (!excused.empty()) {
        std::printf("[ near-tie ] %s: first near-tie at %s (gap %.3g); positions past 1e-3: %s\n", GetParam(),
                    run.label[size_t(first_tie)].c_str(), run.gap[size_t(first_tie)], excused.c_str());
        RecordProperty("near_tie_positions", excused);
    }
    {
        int below[4] = {0, 0, 0, 0};
        const double th[4] = {1e-4, 1e-3, 3e-3, 1e-2};
        for (double gp : run.gap)
            for (int t = 0; t < 4; ++t) below[t] += gp < th[t];
        std::printf("[ gaps     ] %s: %zu tokens; gap<1e-4: %d, <1e-3: %d, <3e-3: %d, <1e-2: %d\n", GetParam(),
                    run.gap.size(), below[0], below[1], below[2], below[3]);
    }
    std::printf("[ moe      ] %s: worst rel L2 within tolerance %.3g, smallest router top-k gap %.3g, golden's %.3g\n",
                GetParam(), worst, min_gap, g.min_router_topk_gap);
    RecordProperty("worst_rel_l2", std::to_string(worst));
    RecordProperty("min_router_topk_gap", std::to_string(min_gap));
    EXPECT_TRUE(run.greedy_ok || first_tie >= 0) << run.greedy_msg;
    if (!run.greedy_ok) std::printf("[ near-tie ] %s: %s (after the near-tie above)\n", GetParam(), run.greedy_msg.c_str());
}

INSTANTIATE_TEST_SUITE_P(Both, MoeFixtures, ::testing::Values("moe-tiny-a", "moe-tiny-a-vl"));

// The MoE CPU engine keeps the capsule contract: a prefix restored from a capsule plus an
// appended suffix gives bitwise the logits of a cold prefill of prefix + suffix (every row of
// the append, then greedy decode steps). Boundary 64 with C_p 128: different chunking.
TEST(MoeCapsule, RestoreAppendEqualsColdPrefillBitwise) {
    // The fixture itself: Frost writes nothing into a model folder (fingerprints are cached elsewhere).
    const std::string dir = test::fixture_dir("moe-tiny-a");
    EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 128;
    o.sessions = 3;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    test::expect_restore_append_equals_cold(*e, dir, "moe_capsule_store");
}

}  // namespace
}  // namespace frost::model
