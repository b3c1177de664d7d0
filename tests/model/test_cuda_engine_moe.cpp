// The CUDA engine on the mixture-of-experts fixtures (bf16 weights and activations, device
// router, expert GEMVs reading the selected ids from device memory in the one captured decode
// graph, grouped prefill): the bf16 acceptance of tests/fixtures/README.md as test_cuda_engine.cpp
// applies it to the dense fixtures (mean relative L2 <= 3e-2 over prompt positions and greedy
// steps, top-1 equal on >= 95% of positions whose golden margin exceeds 0.05), the decode graph following new routing every step (greedy tokens through many steps, no
// capture after load), and the capsule contract on CUDA: restore + append is bitwise a cold
// prefill. Skipped without a CUDA device; the GPU machine runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "model/capsule.h"
#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/model_files_util.h"

namespace frost::model {
namespace {

constexpr double kMeanRelL2 = 3e-2;         // fixtures/README.md's bf16 number, mean over positions
// No bound per position, unlike the dense test: the golden's router top-k gaps go down to 4e-7
// (golden.json min_router_topk_gap), far below bf16 noise, so the bf16 router may pick the other
// expert at a few tokens, which moves those tokens (and, through the state, a few after them)
// by more than the dense per-position bound while the mean and the top-1 agreement stay tight.
// The worst position is printed and recorded.
constexpr double kTop1Margin = 0.05;        // golden margin above which top-1 is compared
constexpr double kMinTop1Agreement = 0.95;  // of those positions

#define SKIP_WITHOUT_CUDA()                                             \
    do {                                                                \
        if (!frost_backend_available(FROST_BACKEND_CUDA))              \
            GTEST_SKIP() << "no CUDA device in this build or machine"; \
    } while (0)

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

std::unique_ptr<Engine> cuda_engine(const std::string& dir, bool logits_all, int sessions = 1) {
    EngineOptions o;
    o.backend = FROST_BACKEND_CUDA;
    o.max_seq_len = 512;
    o.prefill_chunk = 128;
    o.logits_all = logits_all;
    o.sessions = sessions;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    return e;
}

class CudaMoeFixtures : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaMoeFixtures, PromptLogitsAndGreedyMatchGoldenWithinBf16Floor) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = test::fixture_dir(GetParam());
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    auto e = cuda_engine(dir, true);
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->config().is_moe());
    const size_t V = g.vocab;
    ASSERT_EQ(size_t(e->config().vocab_size), V);
    std::vector<double> rel;
    int checked = 0, equal = 0;
    std::vector<float> logits;
    int32_t next = -1;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), &next, &logits), FROST_OK)
        << frost_last_error();
    ASSERT_EQ(logits.size(), g.prompt_ids.size() * V);
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = g.prompt_logit_positions[i];
        const float* ref = g.logits_prompt.data() + i * V;
        const double r = test::rel_l2(logits.data() + p * V, ref, V);
        rel.push_back(r);
        int top = -1, ours = -1;
        if (margin_of(ref, V, &top) > kTop1Margin) {
            margin_of(logits.data() + p * V, V, &ours);
            ++checked;
            equal += ours == top ? 1 : 0;
        }
    }
    // Greedy steps through the one decode graph (routing differs every step), fed the golden
    // tokens so one near-tie cannot derail the rest of the comparison.
    std::vector<float> last;
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        last.assign(V, NAN);
        ASSERT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        const float* ref = g.logits_greedy.data() + i * V;
        const double r = test::rel_l2(last.data(), ref, V);
        rel.push_back(r);
        int top = -1;
        if (margin_of(ref, V, &top) > kTop1Margin) {
            ++checked;
            equal += next == g.greedy_ids[i] ? 1 : 0;
        }
        if (i + 1 < g.greedy_ids.size()) {
            ASSERT_EQ(e->feed(0, g.greedy_ids[i], &next), FROST_OK) << frost_last_error();
        }
    }
    double mean = 0;
    for (double r : rel) mean += r;
    mean /= double(rel.size());
    const double worst = *std::max_element(rel.begin(), rel.end());
    std::printf("[ cuda moe vs golden %s ] rows %zu, rel L2 mean %.4f max %.4f, top-1 %d of %d (margin > %.2f)\n",
                GetParam(), rel.size(), mean, worst, equal, checked, kTop1Margin);
    EXPECT_LE(mean, kMeanRelL2);
    ASSERT_GT(checked, 0);
    EXPECT_GE(double(equal) / checked, kMinTop1Agreement);
    RecordProperty("mean_rel_l2", std::to_string(mean));
    RecordProperty("worst_rel_l2", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Both, CudaMoeFixtures, ::testing::Values("moe-tiny-a", "moe-tiny-a-vl"));

// The decode graph is captured once at load and replays every step: no capture after load, and
// a rerun of the same prompt + decode gives bitwise the same logits (device routing deterministic).
TEST(CudaMoeEngine, DecodeGraphReplaysDeterministicallyWithoutRecapture) {
    SKIP_WITHOUT_CUDA();
    auto e = cuda_engine(test::fixture_dir("moe-tiny-a"), false);
    ASSERT_TRUE(e);
    const uint64_t captures = e->capture_count();
    std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed());
    std::uniform_int_distribution<int32_t> tok(0, e->config().vocab_size - 1);
    std::vector<int32_t> prompt(150);
    for (auto& t : prompt) t = tok(rng);
    auto run = [&](std::vector<std::vector<float>>* lg, std::vector<int32_t>* toks) {
        ASSERT_EQ(e->reset(0), FROST_OK);
        int32_t next = -1;
        ASSERT_EQ(e->prefill(0, prompt.data(), prompt.size(), &next), FROST_OK) << frost_last_error();
        for (int i = 0; i < 24; ++i) {
            std::vector<float> l;
            ASSERT_EQ(e->last_logits(0, &l), FROST_OK) << frost_last_error();
            lg->push_back(std::move(l));
            toks->push_back(next);
            ASSERT_EQ(e->decode(0, &next), FROST_OK) << frost_last_error();
        }
    };
    std::vector<std::vector<float>> a, b;
    std::vector<int32_t> ta, tb;
    run(&a, &ta);
    run(&b, &tb);
    EXPECT_EQ(ta, tb);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), sizeof(float) * a[i].size())) << "step " << i;
    EXPECT_EQ(e->capture_count(), captures) << "a step captured a graph after load";
}

// Capsule exactness on the CUDA MoE engine: a prefix restored from a capsule plus an appended
// suffix gives bitwise the logits and tokens of a cold prefill of prefix + suffix, then through
// greedy decode steps. Boundaries 64 and 192 with C_p 128: different chunkings of the same tokens.
TEST(CudaMoeCapsule, RestoreAppendEqualsColdPrefillBitwise) {
    SKIP_WITHOUT_CUDA();
    // A copy: the capsule manager caches the fingerprint next to the model; fixtures stay untouched.
    const std::string src = test::fixture_dir("moe-tiny-a");
    const std::string dir = frost::testing::make_temp_dir("cuda_moe_capsule");
    frost::testing::copy_config(src, dir);
    frost::testing::write_bytes(dir + "/model.safetensors", frost::testing::read_bytes(src + "/model.safetensors"));
    auto e = cuda_engine(dir, false, 3);
    ASSERT_TRUE(e);
    CapsuleManagerOptions mo;
    mo.disk_dir = frost::testing::make_temp_dir("cuda_moe_capsule_store");
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(*e, dir, mo, &mgr), FROST_OK) << frost_last_error();
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, e->config().vocab_size - 1);
    for (int prefix_len : {64, 192}) {
        SCOPED_TRACE("prefix " + std::to_string(prefix_len) + ", seed " + std::to_string(seed));
        std::vector<int32_t> prefix(static_cast<size_t>(prefix_len)), suffix(77);
        for (auto& x : prefix) x = tok(rng);
        for (auto& x : suffix) x = tok(rng);
        std::vector<int32_t> full = prefix;
        full.insert(full.end(), suffix.begin(), suffix.end());
        ASSERT_EQ(e->reset(0), FROST_OK);
        CapsuleId id = 0;
        ASSERT_EQ(mgr->prefill_and_snapshot(0, prefix.data(), prefix.size(), CapsuleTier::Device, &id, nullptr),
                  FROST_OK)
            << frost_last_error();
        ASSERT_EQ(e->reset(1), FROST_OK);
        int32_t cold_next = -1, warm_next = -2;
        ASSERT_EQ(e->prefill(1, full.data(), full.size(), &cold_next), FROST_OK) << frost_last_error();
        std::vector<std::vector<float>> cold, warm;
        std::vector<int32_t> cold_tok, warm_tok;
        auto follow = [&](int s, int32_t next, std::vector<std::vector<float>>* lg, std::vector<int32_t>* toks) {
            for (int step = 0; step < 8; ++step) {
                std::vector<float> l;
                ASSERT_EQ(e->last_logits(s, &l), FROST_OK) << frost_last_error();
                lg->push_back(l);
                toks->push_back(next);
                ASSERT_EQ(e->decode(s, &next), FROST_OK) << frost_last_error();
            }
        };
        follow(1, cold_next, &cold, &cold_tok);
        // Warm: session 2 dirtied by a different prompt, then restore + append.
        ASSERT_EQ(e->reset(2), FROST_OK);
        ASSERT_EQ(e->prefill(2, suffix.data(), suffix.size(), nullptr), FROST_OK);
        ASSERT_EQ(mgr->restore(id, 2, nullptr), FROST_OK) << frost_last_error();
        ASSERT_EQ(e->prefill(2, suffix.data(), suffix.size(), &warm_next), FROST_OK) << frost_last_error();
        EXPECT_EQ(e->journal(2), full);
        follow(2, warm_next, &warm, &warm_tok);
        EXPECT_EQ(warm_tok, cold_tok);
        ASSERT_EQ(warm.size(), cold.size());
        for (size_t i = 0; i < cold.size(); ++i)
            EXPECT_EQ(0, std::memcmp(warm[i].data(), cold[i].data(), sizeof(float) * cold[i].size()))
                << "step " << i << " logits differ bitwise";
        ASSERT_EQ(mgr->release(id), FROST_OK);
    }
}

}  // namespace
}  // namespace frost::model
