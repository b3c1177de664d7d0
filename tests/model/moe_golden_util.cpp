#include "model/moe_golden_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/moe_gap_util.h"

namespace frost::test {
namespace {

// One compared token: the label a report names it by and everything the verdict needs.
struct Token {
    std::string label;
    double rel = -1;        // relative L2 of its logits row (-1: row not stored)
    double our_gap = 1;     // our smallest top-k gap over the MoE layers
    double golden_gap = 1;  // the reference's
    std::string flips;      // "layer L: ours {a,b} golden {c,d} (golden gap g)" per flipped layer
};

std::string ids_str(const int* p, size_t k) {
    std::string s = "{";
    for (size_t i = 0; i < k; ++i) {
        if (i) s += ',';
        s += std::to_string(p[i]);
    }
    return s + "}";
}

// Our routing of `row` (RouterGaps: per MoE layer k sorted ids, concatenated) against the record's
// token `index` of the prompt or of the greedy steps.
void compare_routing(const RouterGaps& ours, int row, const RoutingRecord& rec, bool greedy, size_t index, size_t k,
                     Token* t) {
    t->our_gap = ours.gap.at(size_t(row));
    for (size_t m = 0; m < rec.moe_layers.size(); ++m) {
        const LayerRouting& g = rec.layers.at(rec.moe_layers[m]);
        const auto& gids = greedy ? g.greedy_topk.at(index) : g.prompt_topk.at(index);
        const double ggap = greedy ? g.greedy_gap.at(index) : g.prompt_gap.at(index);
        t->golden_gap = std::min(t->golden_gap, ggap);
        const std::vector<int>& ids = ours.experts.at(size_t(row));
        if (ids.size() < (m + 1) * k) {
            ADD_FAILURE() << t->label << ": our router trace holds " << ids.size() << " expert ids, expected "
                          << rec.moe_layers.size() * k;
            return;
        }
        const int* ourp = ids.data() + m * k;
        if (gids.size() == k && std::equal(gids.begin(), gids.end(), ourp)) continue;
        char line[160];
        std::snprintf(line, sizeof line, "layer %d: ours %s golden %s (golden gap %.3g)", rec.moe_layers[m],
                      ids_str(ourp, k).c_str(), ids_str(gids.data(), gids.size()).c_str(), ggap);
        t->flips += std::string(t->flips.empty() ? "" : "; ") + line;
    }
}

void append(std::string* list, const std::string& item) {
    if (!list->empty()) *list += "; ";
    *list += item;
}

}  // namespace

bool load_routing_record(const std::string& path, RoutingRecord* out, std::string* err) {
    std::ifstream f(path);
    if (!f) {
        *err = "cannot open " + path + " (the routing record of the golden: see tests/fixtures/README.md)";
        return false;
    }
    try {
        const nlohmann::json j = nlohmann::json::parse(f);
        out->moe_layers = j.at("moe_layers").get<std::vector<int>>();
        for (int l : out->moe_layers) {
            const auto& r = j.at("router").at(std::to_string(l));
            LayerRouting g;
            g.prompt_topk = r.at("prompt_topk").get<std::vector<std::vector<int>>>();
            g.greedy_topk = r.at("greedy_topk").get<std::vector<std::vector<int>>>();
            g.prompt_gap = r.at("prompt_gap").get<std::vector<double>>();
            g.greedy_gap = r.at("greedy_gap").get<std::vector<double>>();
            for (auto* v : {&g.prompt_topk, &g.greedy_topk})
                for (auto& ids : *v) std::sort(ids.begin(), ids.end());
            out->layers[l] = std::move(g);
        }
    } catch (const std::exception& e) {
        *err = path + ": field 'moe_layers' / 'router' unreadable: " + e.what();
        return false;
    }
    return true;
}

void check_moe_golden(const std::string& name, const std::string& record_file) {
    using model::Engine;
    const std::string dir = fixture_dir(name);
    Golden g;
    RoutingRecord rec;
    std::string err;
    ASSERT_TRUE(load_golden(dir, &g, &err)) << "missing or broken fixture " << dir << ": " << err;
    ASSERT_TRUE(load_routing_record(dir + "/" + record_file, &rec, &err)) << err;

    model::EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 256;  // the whole prompt in one step: the trace holds every prompt row
    o.logits_all = true;
    o.trace = true;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    const model::ModelConfig& c = e->config();
    std::vector<int> our_moe;
    for (int l = 0; l < c.num_layers; ++l)
        if (c.is_moe_layer(l)) our_moe.push_back(l);
    ASSERT_EQ(our_moe, rec.moe_layers) << name << ": the config parsed to other MoE layers than the reference built";
    const size_t k = size_t(c.num_experts_per_tok), V = size_t(g.vocab), T = g.prompt_ids.size();
    ASSERT_LE(T, size_t(o.prefill_chunk));
    for (const auto& [l, r] : rec.layers) {
        ASSERT_EQ(r.prompt_topk.size(), T) << record_file << " layer " << l;
        ASSERT_EQ(r.greedy_topk.size(), g.greedy_ids.size()) << record_file << " layer " << l;
    }

    std::vector<Token> tokens;  // prompt tokens, then the token each greedy step i >= 1 consumed
    std::vector<float> logits;
    int32_t next = -1;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), T, &next, &logits), FROST_OK) << frost_last_error();
    ASSERT_EQ(logits.size(), T * V);
    const RouterGaps prompt_routing = router_gaps(*e, int(T));
    for (size_t p = 0; p < T; ++p) {
        Token t;
        t.label = "prompt position " + std::to_string(p);
        compare_routing(prompt_routing, int(p), rec, false, p, k, &t);
        tokens.push_back(t);
    }
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = size_t(g.prompt_logit_positions[i]);
        tokens.at(p).rel = rel_l2(logits.data() + p * V, g.logits_prompt.data() + i * V, V);
    }
    std::string greedy_msg;
    std::vector<float> last;
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        ASSERT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        const double rel = rel_l2(last.data(), g.logits_greedy.data() + i * V, V);
        if (i == 0) {  // step 0 reads the last prompt row; the record's greedy step 0 is that token
            tokens.back().rel = std::max(tokens.back().rel, rel);
            tokens.back().label += " / greedy step 0";
        } else {
            Token t;
            t.label = "greedy step " + std::to_string(i);
            t.rel = rel;
            compare_routing(router_gaps(*e, 1), 0, rec, true, i, k, &t);
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
    double worst = 0, min_gap = 1;
    std::string ties, flips, excused;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const Token& t = tokens[i];
        min_gap = std::min(min_gap, t.our_gap);
        char line[200];
        if (t.golden_gap < kMoeNearTie || t.our_gap < kMoeNearTie) {
            char rel[32] = "row not stored";
            if (t.rel >= 0) std::snprintf(rel, sizeof rel, "rel %.3g", t.rel);
            std::snprintf(line, sizeof line, "%s (golden gap %.3g, ours %.3g, %s, %s)", t.label.c_str(), t.golden_gap,
                          t.our_gap, rel, t.flips.empty() ? "same experts" : "FLIPPED");
            append(&ties, line);
        }
        if (!t.flips.empty()) {
            if (first_flip < 0) first_flip = int(i);
            append(&flips, t.label + " " + t.flips);
            EXPECT_LT(t.golden_gap, kMoeNearTie)
                << name << ": " << t.label << " routes to other experts at a clear router gap (not a near-tie): " << t.flips;
        }
        if (t.rel < 0) continue;
        if (t.rel <= kMoeGoldenMaxRelL2) {
            worst = std::max(worst, t.rel);
            continue;
        }
        std::snprintf(line, sizeof line, "%s: rel %.3g", t.label.c_str(), t.rel);
        EXPECT_TRUE(first_flip >= 0 && first_flip <= int(i))
            << name << ": " << line << " misses " << kMoeGoldenMaxRelL2
            << " with no expert flip at or before it, so no router near-tie explains it";
        append(&excused, line);
    }
    std::printf("[ near-tie ] %s: tokens with a router top-k gap < %g: %s\n", name.c_str(), kMoeNearTie,
                ties.empty() ? "none" : ties.c_str());
    std::printf("[ flips    ] %s: %s\n", name.c_str(),
                flips.empty() ? "none (every token routed as the reference)" : flips.c_str());
    if (!excused.empty())
        std::printf("[ flips    ] %s: rows past 1e-3, all after the first flip (%s): %s\n", name.c_str(),
                    tokens[size_t(first_flip)].label.c_str(), excused.c_str());
    std::printf("[ moe      ] %s: %zu tokens compared, worst rel L2 within tolerance %.3g, smallest router gap ours %.3g, "
                "golden's %.3g\n",
                name.c_str(), tokens.size(), worst, min_gap, g.min_router_topk_gap);
    ::testing::Test::RecordProperty("near_tie_tokens", ties.empty() ? "none" : ties);
    ::testing::Test::RecordProperty("expert_flips", flips.empty() ? "none" : flips);
    ::testing::Test::RecordProperty("worst_rel_l2", std::to_string(worst));
    EXPECT_TRUE(greedy_msg.empty() || first_flip >= 0) << name << ": " << greedy_msg << " with no expert flip before it";
    if (!greedy_msg.empty()) std::printf("[ flips    ] %s: %s (after the flip above)\n", name.c_str(), greedy_msg.c_str());
}

}  // namespace frost::test
