// Reading the transformers goldens of tests/fixtures (format: tests/fixtures/README.md).
#include "model/engine_test_util.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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

}  // namespace frost::test
