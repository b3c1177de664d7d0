// The CPU engine reproduces the transformers golden of next-tiny-a, a tiny Qwen3-Next
// (Qwen3NextForCausalLM) written by transformers' save_pretrained (tests/fixtures/tools/
// gen_fixture_next.py): fused interleaved in_proj_qkvz / in_proj_ba over two key heads, dense
// and MoE layers side by side (decoder_sparse_step 2 + mlp_only_layers [1] -> MoE at 3 and 5),
// norm_topk_prob, shared expert with its sigmoid gate, partial rotary 0.25.
//
// Acceptance (tests/fixtures/README.md): per-position relative L2 <= 1e-3 over the stored prompt
// rows and every greedy step, greedy tokens identical.
//
// Router near-ties, reported and not hidden: the golden records, per MoE layer and token, the
// expert ids transformers used and its k-th minus (k+1)-th router probability. We compare our
// expert set at every (token, MoE layer) with the golden's:
//  - a differing set (a flip) is only acceptable where the golden's gap is below kNearTie (our
//    fp32 router probabilities differ from its by ~1e-6); a flip at a clear gap fails;
//  - a logits row past the tolerance is only acceptable at or after an actual flip (a flipped
//    expert changes every later token through the recurrent and attention state). A miss with
//    no flip before it fails: then the flip cannot be its cause.
// Every near-tie token and every flip is printed and recorded as a test property.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/moe_gap_util.h"

namespace frost::model {
namespace {

constexpr const char* kFixture = "next-tiny-a";
constexpr double kMaxRelL2 = 1e-3;
constexpr double kNearTie = 1e-5;

// The golden's routing record of one MoE layer (golden.json "router"): [token][k] ids and gaps.
struct GoldenRouting {
    std::vector<std::vector<int>> prompt_topk, greedy_topk;
    std::vector<double> prompt_gap, greedy_gap;
};

bool load_routing(const std::string& dir, std::vector<int>* moe_layers, std::map<int, GoldenRouting>* out,
                  std::string* err) {
    std::ifstream f(dir + "/golden.json");
    if (!f) {
        *err = "cannot open " + dir + "/golden.json";
        return false;
    }
    try {
        const nlohmann::json j = nlohmann::json::parse(f);
        *moe_layers = j.at("moe_layers").get<std::vector<int>>();
        for (int l : *moe_layers) {
            const auto& r = j.at("router").at(std::to_string(l));
            GoldenRouting g;
            g.prompt_topk = r.at("prompt_topk").get<std::vector<std::vector<int>>>();
            g.greedy_topk = r.at("greedy_topk").get<std::vector<std::vector<int>>>();
            g.prompt_gap = r.at("prompt_gap").get<std::vector<double>>();
            g.greedy_gap = r.at("greedy_gap").get<std::vector<double>>();
            for (auto* v : {&g.prompt_topk, &g.greedy_topk})
                for (auto& ids : *v) std::sort(ids.begin(), ids.end());
            (*out)[l] = std::move(g);
        }
    } catch (const std::exception& e) {
        *err = dir + "/golden.json: field 'moe_layers' / 'router' unreadable: " + e.what();
        return false;
    }
    return true;
}

// One token's routing comparison, everything a report needs.
struct Token {
    std::string label;
    double rel = -1;       // relative L2 of its logits row (-1: row not stored)
    double our_gap = 1;    // our smallest top-k gap over MoE layers
    double golden_gap = 1; // the golden's smallest
    std::string flips;     // "layer L: ours {a,b} golden {c,d} (golden gap g)" per flipped layer
};

std::string ids_str(const int* p, int k) {
    std::string s = "{";
    for (int i = 0; i < k; ++i) {
        if (i) s += ',';
        s += std::to_string(p[i]);
    }
    return s + "}";
}

// Compares our routing of `row` (experts: per MoE layer k sorted ids, concatenated) with the golden's.
void compare_routing(const test::RouterGaps& ours, int row, const std::vector<int>& moe_layers,
                     const std::map<int, GoldenRouting>& golden, bool greedy, int golden_index, int k, Token* t) {
    t->our_gap = ours.gap[size_t(row)];
    for (size_t m = 0; m < moe_layers.size(); ++m) {
        const GoldenRouting& g = golden.at(moe_layers[m]);
        const auto& gids = greedy ? g.greedy_topk.at(size_t(golden_index)) : g.prompt_topk.at(size_t(golden_index));
        const double ggap = greedy ? g.greedy_gap.at(size_t(golden_index)) : g.prompt_gap.at(size_t(golden_index));
        t->golden_gap = std::min(t->golden_gap, ggap);
        const int* ourp = ours.experts[size_t(row)].data() + m * size_t(k);
        if (std::equal(gids.begin(), gids.end(), ourp)) continue;
        char line[160];
        std::snprintf(line, sizeof line, "layer %d: ours %s golden %s (golden gap %.3g)", moe_layers[m],
                      ids_str(ourp, k).c_str(), ids_str(gids.data(), k).c_str(), ggap);
        t->flips += std::string(t->flips.empty() ? "" : "; ") + line;
    }
}

TEST(NextFixture, PromptLogitsGreedyAndRoutingMatchGoldenFlipsNamed) {
    const std::string dir = test::fixture_dir(kFixture);
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << "missing or broken fixture " << dir << ": " << err;
    std::vector<int> moe_layers;
    std::map<int, GoldenRouting> routing;
    ASSERT_TRUE(load_routing(dir, &moe_layers, &routing, &err)) << err;

    EngineOptions o;
    o.max_seq_len = 256;
    o.prefill_chunk = 128;  // the whole prompt in one step: the trace holds every prompt row
    o.logits_all = true;
    o.trace = true;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    const ModelConfig& c = e->config();
    ASSERT_EQ(c.family, Family::Qwen3Next);
    std::vector<int> our_moe;
    for (int l = 0; l < c.num_layers; ++l)
        if (c.is_moe_layer(l)) our_moe.push_back(l);
    ASSERT_EQ(our_moe, moe_layers) << "decoder_sparse_step / mlp_only_layers parsed to other MoE layers than transformers built";
    const int k = c.num_experts_per_tok;
    const size_t V = size_t(g.vocab), T = g.prompt_ids.size();
    ASSERT_LE(T, size_t(o.prefill_chunk));

    std::vector<Token> tokens;  // prompt tokens, then the token each greedy step consumed
    std::vector<float> logits;
    int32_t next = -1;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), T, &next, &logits), FROST_OK) << frost_last_error();
    ASSERT_EQ(logits.size(), T * V);
    const test::RouterGaps prompt_routing = test::router_gaps(*e, int(T));
    for (size_t p = 0; p < T; ++p) {
        Token t;
        t.label = "prompt position " + std::to_string(p);
        compare_routing(prompt_routing, int(p), moe_layers, routing, false, int(p), k, &t);
        tokens.push_back(t);
    }
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = size_t(g.prompt_logit_positions[i]);
        tokens[p].rel = test::rel_l2(logits.data() + p * V, g.logits_prompt.data() + i * V, V);
    }
    std::string greedy_msg;
    std::vector<float> last;
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        ASSERT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        const double rel = test::rel_l2(last.data(), g.logits_greedy.data() + i * V, V);
        if (i == 0) {
            tokens.back().rel = std::max(tokens.back().rel, rel);  // step 0 reads the last prompt row
            tokens.back().label += " / greedy step 0";
        } else {
            Token t;
            t.label = "greedy step " + std::to_string(i);
            t.rel = rel;
            compare_routing(test::router_gaps(*e, 1), 0, moe_layers, routing, true, int(i), k, &t);
            tokens.push_back(t);
        }
        if (next != g.greedy_ids[i]) {
            greedy_msg = "greedy step " + std::to_string(i) + ": got " + std::to_string(next) + ", golden " +
                         std::to_string(g.greedy_ids[i]);
            break;  // later steps would run from another prefix
        }
        if (i + 1 < g.greedy_ids.size()) {
            ASSERT_EQ(e->decode(0, &next), FROST_OK) << frost_last_error();
        }
    }

    int first_flip = -1;
    double worst = 0;
    std::string ties, flips, excused;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const Token& t = tokens[i];
        char line[200];
        if (t.golden_gap < kNearTie || t.our_gap < kNearTie) {
            std::snprintf(line, sizeof line, "%s (golden gap %.3g, ours %.3g, %s)", t.label.c_str(), t.golden_gap,
                          t.our_gap, t.flips.empty() ? "same experts" : "FLIPPED");
            ties += std::string(ties.empty() ? "" : "; ") + line;
        }
        if (!t.flips.empty()) {
            if (first_flip < 0) first_flip = int(i);
            flips += std::string(flips.empty() ? "" : "; ") + t.label + " " + t.flips;
            EXPECT_LT(t.golden_gap, kNearTie) << t.label << " routes to other experts at a clear router gap "
                                              << "(not a near-tie): " << t.flips;
        }
        if (t.rel < 0) continue;
        if (t.rel <= kMaxRelL2) {
            worst = std::max(worst, t.rel);
            continue;
        }
        std::snprintf(line, sizeof line, "%s: rel %.3g", t.label.c_str(), t.rel);
        EXPECT_TRUE(first_flip >= 0 && first_flip <= int(i))
            << line << " misses " << kMaxRelL2 << " with no expert flip at or before it, so no near-tie explains it";
        excused += std::string(excused.empty() ? "" : "; ") + line;
    }
    std::printf("[ near-tie ] %s: tokens with a router top-k gap < %g: %s\n", kFixture, kNearTie,
                ties.empty() ? "none" : ties.c_str());
    std::printf("[ flips    ] %s: %s\n", kFixture, flips.empty() ? "none (every token routed as the golden)" : flips.c_str());
    if (!excused.empty())
        std::printf("[ flips    ] %s: rows past 1e-3 after the first flip (%s): %s\n", kFixture,
                    tokens[size_t(first_flip)].label.c_str(), excused.c_str());
    std::printf("[ next     ] %s: %zu tokens compared, worst rel L2 within tolerance %.3g, golden min router gap %.3g\n",
                kFixture, tokens.size(), worst, g.min_router_topk_gap);
    RecordProperty("near_tie_tokens", ties.empty() ? "none" : ties);
    RecordProperty("expert_flips", flips.empty() ? "none" : flips);
    RecordProperty("worst_rel_l2", std::to_string(worst));
    EXPECT_TRUE(greedy_msg.empty() || first_flip >= 0) << greedy_msg << " with no expert flip before it";
    if (!greedy_msg.empty()) std::printf("[ flips    ] %s: %s (after the flip above)\n", kFixture, greedy_msg.c_str());
}

}  // namespace
}  // namespace frost::model
