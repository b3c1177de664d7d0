// Reading the transformers goldens of tests/fixtures (format: tests/fixtures/README.md) and
// comparing an engine's logits with them.
#include "model/engine_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/engine.h"

namespace frost::test {
namespace {

bool read_f32(const std::string& path, std::vector<float>* out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    out->resize(s.size() / sizeof(float));
    std::memcpy(out->data(), s.data(), out->size() * sizeof(float));
    return true;
}

}  // namespace

std::string fixture_dir(const std::string& name) {
    return std::string(FROST_FIXTURES_DIR) + "/" + name;
}

bool load_golden(const std::string& dir, Golden* g, std::string* err) {
    std::ifstream f(dir + "/golden.json");
    if (!f) {
        *err = "cannot open " + dir + "/golden.json";
        return false;
    }
    try {
        nlohmann::json j = nlohmann::json::parse(f);
        g->prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
        g->greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
        g->prompt_logit_positions = j.at("prompt_logit_positions").get<std::vector<int32_t>>();
        g->vocab = j.at("vocab_size").get<int>();
        // Dense goldens omit the field or hold null.
        const auto gap = j.find("min_router_topk_gap");
        g->min_router_topk_gap = gap != j.end() && gap->is_number() ? gap->get<double>() : -1.0;
    } catch (const std::exception& e) {
        *err = e.what();
        return false;
    }
    if (!read_f32(dir + "/logits_prompt.f32", &g->logits_prompt) ||
        !read_f32(dir + "/logits_greedy.f32", &g->logits_greedy)) {
        *err = "cannot read logits files in " + dir;
        return false;
    }
    return true;
}

double rel_l2(const float* a, const float* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(a[i]) - ref[i];
        num += d * d;
        den += static_cast<double>(ref[i]) * ref[i];
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}

double rms_diff(const float* a, const float* b, size_t n) {
    double t = 0;
    for (size_t i = 0; i < n; ++i) t += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(t / n);
}

double margin_of(const float* l, size_t n, int* top) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
        if (l[i] > l[best]) best = i;
    float second = -INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (i != best) second = std::max(second, l[i]);
    *top = static_cast<int>(best);
    return static_cast<double>(l[best]) - second;
}

void expect_matches_golden(model::Engine& e, const Golden& g, double max_rel_l2) {
    ASSERT_EQ(e.config().vocab_size, g.vocab);
    const size_t V = g.vocab;
    std::vector<float> logits;
    int32_t next = -1;
    ASSERT_EQ(e.prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), &next, &logits), FROST_OK) << frost_last_error();
    ASSERT_EQ(logits.size(), g.prompt_ids.size() * V);
    double worst = 0;
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = g.prompt_logit_positions[i];
        const double r = rel_l2(logits.data() + p * V, g.logits_prompt.data() + i * V, V);
        worst = std::max(worst, r);
        EXPECT_LE(r, max_rel_l2) << "prompt position " << p;
    }
    ::testing::Test::RecordProperty("worst_prompt_rel_l2", std::to_string(worst));
    // The greedy continuation runs through the decode graph.
    std::vector<float> last;
    worst = 0;
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        ASSERT_EQ(e.last_logits(0, &last), FROST_OK) << frost_last_error();
        const double r = rel_l2(last.data(), g.logits_greedy.data() + i * V, V);
        worst = std::max(worst, r);
        EXPECT_LE(r, max_rel_l2) << "greedy step " << i;
        ASSERT_EQ(next, g.greedy_ids[i]) << "greedy step " << i;
        if (i + 1 < g.greedy_ids.size()) {
            ASSERT_EQ(e.decode(0, &next), FROST_OK) << frost_last_error();
        }
    }
    ::testing::Test::RecordProperty("worst_greedy_rel_l2", std::to_string(worst));
}

frost_status record_step_ops(model::Engine& e, int session, int rows, bool decode, std::vector<ops::OpRecord>* out) {
    out->clear();
    return e.record_ops(session, rows, decode, [out](const ops::OpRecord& r) { out->push_back(r); });
}

}  // namespace frost::test
