// Helpers shared by the engine tests: fixture paths, golden files, relative L2 error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace frost::test {

struct Golden {
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> greedy_ids;
    std::vector<int32_t> prompt_logit_positions;
    int vocab = 0;
    double min_router_topk_gap = -1;   // MoE goldens: smallest k-th vs (k+1)-th router gap (-1: dense)
    std::vector<float> logits_prompt;  // [positions, vocab]
    std::vector<float> logits_greedy;  // [greedy, vocab]
};

std::string fixture_dir(const std::string& name);  // FROST_FIXTURES_DIR/<name> (tests/fixtures)
bool load_golden(const std::string& dir, Golden* out, std::string* err);
double rel_l2(const float* a, const float* ref, size_t n);

}  // namespace frost::test
