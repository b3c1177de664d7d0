// Helpers shared by the engine tests: fixture paths, golden files, logit-row comparisons, the
// fp32 acceptance against a golden, and the skip of the CUDA cases on a machine without a device.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "ops/ops.h"

namespace frost::model {
class Engine;
}

// The CUDA engine cases skip where the build or the machine has no CUDA device (CI); the GPU
// machine runs them.
#define SKIP_WITHOUT_CUDA()                                             \
    do {                                                                \
        if (!frost_backend_available(FROST_BACKEND_CUDA))              \
            GTEST_SKIP() << "no CUDA device in this build or machine"; \
    } while (0)

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
double rms_diff(const float* a, const float* b, size_t n);     // sqrt(mean((a - b)^2))
double margin_of(const float* logits, size_t n, int* top);   // top-1 minus top-2; *top = argmax

// The fp32 acceptance of tests/fixtures/README.md: e (created with logits_all) prefills the golden's
// prompt and decodes its greedy continuation; every stored prompt position and greedy step is
// within max_rel_l2 (relative L2) and every greedy token is the golden's. The worst errors are
// recorded as the test's properties worst_prompt_rel_l2 / worst_greedy_rel_l2.
void expect_matches_golden(model::Engine& e, const Golden& g, double max_rel_l2);

// Every op one step of `rows` rows of `session` would launch (Engine::record_ops; decode when
// `decode`), in launch order, into *out (cleared first). The engine's status.
frost_status record_step_ops(model::Engine& e, int session, int rows, bool decode, std::vector<ops::OpRecord>* out);

}  // namespace frost::test
