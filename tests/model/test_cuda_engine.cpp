// The CUDA engine (bf16 whole-forward graphs, device cursor, device sampling) against real
// references: the transformers goldens of both fixtures, the fp32 CPU engine on a synthetic model,
// bitwise determinism across runs and engines, and "no capture after load". Skipped without a
// CUDA device (CI); the GPU machine runs it via scripts/gpu/engine_check.sh.
//
// Tolerances. fixtures/README.md suggests <= 3e-2 relative L2 at EVERY position and top-1 equal
// wherever the golden margin > 0.05. That is below the floor of any pipeline with bf16 activations
// on these fixtures: the float64 reference with bf16 rounding inserted exactly where this engine
// rounds (tests/model/ref_qwen35_bf16.py: every activation, the residual stream, projections,
// q/k/v, GDN and attention outputs, final norm) misses the golden of qwen35-tiny-a by mean 2.6e-2,
// p90 4.1e-2, max 1.16e-1 over the 200 prompt positions (48 above 3e-2), and flips 2 of the 175
// top-1 tokens whose golden margin exceeds 0.05; an fp32 residual stream barely changes that.
// So the assertions are the README's numbers on the distribution, with a bound per position far
// below what a real defect gives (a wrong op, weight or layout puts logits off by order 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "model/engine.h"
#include "model/capsule_test_util.h"
#include "model/engine_cuda.h"
#include "model/engine_test_util.h"
#include "model/synth.h"

namespace frost::model {
namespace {

using test::margin_of;
using test::rms_diff;

constexpr double kMeanRelL2 = 3e-2;       // fixtures/README.md's bf16 number, on the mean over positions
constexpr double kMaxRelL2 = 0.2;         // any single position (bf16 floor measured above: 0.116)
// Against the fp32 CPU engine on random synthetic weights a single row can sit higher: measured
// (H100, 2026-11-22, TF32 tensor-core GDN chunk) 0.214 on prompt row 0 - the first token, with no
// context to average over - while the mean over 212 rows was 0.021 and top-1 agreed on all 132 rows
// with a clear margin. A wrong kernel moves the mean and the top-1 counts, which stay tight.
constexpr double kMaxRelL2Synthetic = 0.3;
constexpr double kTop1Margin = 0.05;      // golden margin above which top-1 is compared
constexpr double kMinTop1Agreement = 0.95;  // of those positions (bf16 floor: 173 of 175 = 0.989)
// Against the CPU engine: top-1 must agree where the fp32 margin exceeds this many RMS of the
// logit difference (a flip by noise then needs a ~6-sigma perturbation of one logit pair).
constexpr double kTop1NoiseMultiple = 8.0;
constexpr int kChunk = 128;              // C_p of the tests: buckets 64 and 128
constexpr int kSynthPrompt = 200;        // crosses a chunk boundary and ends inside a bucket of 128
constexpr int kDecodeSteps = 12;

int argmax(const std::vector<float>& l) {
    return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
}

// A synthetic checkpoint in a per-process temp folder, made once per preset.
// By value: a reference into the map, bound at a call with a temporary argument, reads as dangling to gcc 13.
std::string synth_dir(const std::string& preset) {
    static std::map<std::string, std::string> dirs;
    auto it = dirs.find(preset);
    if (it != dirs.end()) return it->second;
    SynthOptions o;
    o.out_dir = (std::filesystem::temp_directory_path() /
                 ("frost-cuda-engine-" + std::to_string(::getpid()) + "-" + preset)).string();
    o.preset = preset;
    o.seed = 4242;
    EXPECT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    return dirs[preset] = o.out_dir;
}

struct TempCleanup {
    ~TempCleanup() {
        std::error_code ec;
        const auto tmp = std::filesystem::temp_directory_path();
        for (const char* p : {"tiny-gpu", "tiny"})
            std::filesystem::remove_all(tmp / ("frost-cuda-engine-" + std::to_string(::getpid()) + "-" + p), ec);
    }
} g_cleanup;

std::unique_ptr<Engine> make_engine(const std::string& dir, frost_backend b, bool logits_all, int max_seq,
                                    int sessions = 1) {
    EngineOptions o;
    o.backend = b;
    o.max_seq_len = max_seq;
    o.prefill_chunk = kChunk;
    o.logits_all = logits_all;
    o.sessions = sessions;
    std::unique_ptr<Engine> e;
    const frost_status s = Engine::create(dir, o, &e);
    EXPECT_EQ(s, FROST_OK) << frost_last_error();
    return e;
}

// Prefill `ids`, then `steps` greedy decode steps; every step's logits and token.
struct StepRun {
    std::vector<std::vector<float>> logits;
    std::vector<int32_t> tokens;
};

StepRun greedy_run(Engine& e, const std::vector<int32_t>& ids, int steps) {
    StepRun r;
    EXPECT_EQ(e.reset(0), FROST_OK) << frost_last_error();
    int32_t next = -1;
    EXPECT_EQ(e.prefill(0, ids.data(), ids.size(), &next), FROST_OK) << frost_last_error();
    for (int i = 0; i <= steps; ++i) {
        std::vector<float> l(e.config().vocab_size, NAN);
        EXPECT_EQ(e.last_logits(0, &l), FROST_OK) << frost_last_error();
        r.logits.push_back(std::move(l));
        r.tokens.push_back(next);
        if (i < steps) {
            EXPECT_EQ(e.decode(0, &next), FROST_OK) << frost_last_error();
        }
    }
    return r;
}

// Error statistics of a run against a reference, checked once at the end.
struct Agreement {
    std::vector<double> rel;  // relative L2 per compared row
    int top1_checked = 0, top1_equal = 0;
    void add(double r) { rel.push_back(r); }
    void top1(int ours, int ref) {
        ++top1_checked;
        top1_equal += ours == ref ? 1 : 0;
    }
    double mean() const {
        double t = 0;
        for (double r : rel) t += r;
        return rel.empty() ? 0 : t / rel.size();
    }
    double worst() const { return rel.empty() ? 0 : *std::max_element(rel.begin(), rel.end()); }
};

class CudaFixtures : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFixtures, PromptLogitsAndGreedyMatchGoldenWithinBf16Floor) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = test::fixture_dir(GetParam());
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    auto e = make_engine(dir, FROST_BACKEND_CUDA, true, 512);
    ASSERT_TRUE(e);
    const size_t V = g.vocab;
    ASSERT_EQ(e->config().vocab_size, g.vocab);

    Agreement ag;
    std::vector<float> logits;
    int32_t next = -1;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), &next, &logits), FROST_OK)
        << frost_last_error();
    ASSERT_EQ(logits.size(), g.prompt_ids.size() * V);
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = g.prompt_logit_positions[i];
        const float* ref = g.logits_prompt.data() + i * V;
        const double r = test::rel_l2(logits.data() + p * V, ref, V);
        ag.add(r);
        EXPECT_LE(r, kMaxRelL2) << "prompt position " << p;
        int top = -1, ours = -1;
        if (margin_of(ref, V, &top) > kTop1Margin) {
            margin_of(logits.data() + p * V, V, &ours);
            ag.top1(ours, top);
        }
    }
    // Greedy steps through the decode graph, fed the golden tokens so one near-tie cannot derail
    // the rest of the comparison.
    std::vector<float> last;
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        last.assign(V, NAN);
        ASSERT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        const float* ref = g.logits_greedy.data() + i * V;
        const double r = test::rel_l2(last.data(), ref, V);
        ag.add(r);
        EXPECT_LE(r, kMaxRelL2) << "greedy step " << i;
        int top = -1;
        if (margin_of(ref, V, &top) > kTop1Margin) ag.top1(next, g.greedy_ids[i]);
        if (i + 1 < g.greedy_ids.size()) {
            ASSERT_EQ(e->feed(0, g.greedy_ids[i], &next), FROST_OK) << frost_last_error();
        }
    }
    std::printf("[ cuda vs golden %s ] rows %zu, rel L2 mean %.4f max %.4f, top-1 %d of %d (margin > %.2f)\n",
                GetParam(), ag.rel.size(), ag.mean(), ag.worst(), ag.top1_equal, ag.top1_checked, kTop1Margin);
    EXPECT_LE(ag.mean(), kMeanRelL2);
    ASSERT_GT(ag.top1_checked, 0);
    EXPECT_GE(double(ag.top1_equal) / ag.top1_checked, kMinTop1Agreement);
    RecordProperty("mean_rel_l2", std::to_string(ag.mean()));
    RecordProperty("worst_rel_l2", std::to_string(ag.worst()));
}

INSTANTIATE_TEST_SUITE_P(Both, CudaFixtures, ::testing::Values("qwen35-tiny-a", "qwen35-tiny-a-vl"));

// The bf16 CUDA engine follows the fp32 CPU engine on a synthetic model: prompt logits (every
// row, across a chunk boundary and a partial bucket) and each decode step, both fed the CPU's tokens.
TEST(CudaEngine, MatchesCpuEngineOnSyntheticModel) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth_dir("tiny-gpu");
    auto cpu = make_engine(dir, FROST_BACKEND_CPU, true, 512);
    auto gpu = make_engine(dir, FROST_BACKEND_CUDA, true, 512);
    ASSERT_TRUE(cpu && gpu);
    const size_t V = cpu->config().vocab_size;
    const auto ids = test::random_ids(kSynthPrompt, std::random_device{}(), static_cast<int>(V));
    std::vector<float> lc, lg;
    int32_t nc = -1, ng = -1;
    ASSERT_EQ(cpu->prefill(0, ids.data(), ids.size(), &nc, &lc), FROST_OK) << frost_last_error();
    ASSERT_EQ(gpu->prefill(0, ids.data(), ids.size(), &ng, &lg), FROST_OK) << frost_last_error();
    ASSERT_EQ(lc.size(), lg.size());
    Agreement ag;
    auto compare = [&](const float* ours, const float* ref, const std::string& what) {
        const double r = test::rel_l2(ours, ref, V);
        ag.add(r);
        EXPECT_LE(r, kMaxRelL2Synthetic) << what;
        int top_c = -1, top_g = -1;
        if (margin_of(ref, V, &top_c) > kTop1NoiseMultiple * rms_diff(ours, ref, V)) {
            margin_of(ours, V, &top_g);
            ag.top1(top_g, top_c);
            EXPECT_EQ(top_g, top_c) << what;
        }
    };
    for (size_t p = 0; p < ids.size(); ++p)
        compare(lg.data() + p * V, lc.data() + p * V, "prompt row " + std::to_string(p));
    for (int i = 0; i < kDecodeSteps; ++i) {
        std::vector<float> a(V, NAN), b(V, NAN);
        ASSERT_EQ(cpu->last_logits(0, &a), FROST_OK);
        ASSERT_EQ(gpu->last_logits(0, &b), FROST_OK);
        compare(b.data(), a.data(), "decode step " + std::to_string(i));
        EXPECT_EQ(ng, argmax(b)) << "the device sampler's greedy token is the argmax of its own logits";
        const int32_t fed = nc;  // both engines continue with the CPU's token
        ASSERT_EQ(cpu->feed(0, fed, &nc), FROST_OK) << frost_last_error();
        ASSERT_EQ(gpu->feed(0, fed, &ng), FROST_OK) << frost_last_error();
    }
    EXPECT_EQ(cpu->position(0), gpu->position(0));
    std::printf("[ cuda vs cpu tiny-gpu ] rows %zu, rel L2 mean %.4f max %.4f, top-1 %d of %d (margin > %.0f rms)\n",
                ag.rel.size(), ag.mean(), ag.worst(), ag.top1_equal, ag.top1_checked, kTop1NoiseMultiple);
    EXPECT_LE(ag.mean(), kMeanRelL2);
    RecordProperty("mean_rel_l2_vs_cpu", std::to_string(ag.mean()));
}

// Same inputs, same build and device: bitwise-identical logits and tokens, on a second run of one
// engine (after reset) and on a second engine (its own cuBLASLt plans and captures).
TEST(CudaEngine, RunsAreBitwiseDeterministic) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth_dir("tiny-gpu");
    auto a = make_engine(dir, FROST_BACKEND_CUDA, false, 512);
    auto b = make_engine(dir, FROST_BACKEND_CUDA, false, 512);
    ASSERT_TRUE(a && b);
    const auto ids = test::random_ids(kSynthPrompt, std::random_device{}(), a->config().vocab_size);
    const StepRun r1 = greedy_run(*a, ids, kDecodeSteps);
    const StepRun r2 = greedy_run(*a, ids, kDecodeSteps);
    const StepRun r3 = greedy_run(*b, ids, kDecodeSteps);
    ASSERT_EQ(r1.logits.size(), static_cast<size_t>(kDecodeSteps + 1));
    for (const StepRun* other : {&r2, &r3}) {
        EXPECT_EQ(r1.tokens, other->tokens);
        for (size_t i = 0; i < r1.logits.size(); ++i) {
            ASSERT_EQ(r1.logits[i].size(), other->logits[i].size());
            EXPECT_EQ(std::memcmp(r1.logits[i].data(), other->logits[i].data(), r1.logits[i].size() * sizeof(float)), 0)
                << "step " << i;
            EXPECT_FALSE(std::isnan(r1.logits[i][0]));
        }
    }
}

// Seeded temperature / top-k / top-p sampling runs on the device: same seed, same tokens; the
// tokens stay in the vocabulary.
TEST(CudaEngine, SeededSamplingRepeats) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth_dir("tiny-gpu");
    auto e = make_engine(dir, FROST_BACKEND_CUDA, false, 256);
    ASSERT_TRUE(e);
    const int V = e->config().vocab_size;
    const auto ids = test::random_ids(70, std::random_device{}(), V);
    SamplingConfig sc;
    sc.temperature = 1.5f;
    sc.top_k = 50;
    sc.top_p = 0.9f;
    sc.seed = std::random_device{}();
    std::vector<int32_t> runs[2];
    for (auto& out : runs) {
        ASSERT_EQ(e->reset(0, sc), FROST_OK) << frost_last_error();
        int32_t next = -1;
        ASSERT_EQ(e->prefill(0, ids.data(), ids.size(), &next), FROST_OK) << frost_last_error();
        out.push_back(next);
        for (int i = 0; i < kDecodeSteps; ++i) {
            ASSERT_EQ(e->decode(0, &next), FROST_OK) << frost_last_error();
            out.push_back(next);
        }
    }
    EXPECT_EQ(runs[0], runs[1]);
    for (int32_t t : runs[0]) {
        EXPECT_GE(t, 0);
        EXPECT_LT(t, V);
    }
}

// Every graph is captured at load: one per prefill bucket plus ONE decode graph per session (and
// the sliced-prefill layer graphs), and prefill / decode / reset at many positions never capture
// again.
TEST(CudaEngine, CapturesOnlyAtLoad) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth_dir("tiny-gpu");
    constexpr int kSessions = 2;
    auto e = make_engine(dir, FROST_BACKEND_CUDA, false, 1024, kSessions);
    ASSERT_TRUE(e);
    const CudaEngineInfo info = cuda_engine_info(*e);
    EXPECT_TRUE(info.active);
    // + one graph per layer of every sliced-prefill bucket (EngineOptions::slice_rows).
    const size_t per_session = kChunk / kGdnChunk + 1 +
                               size_t(e->slice_rows() / kGdnChunk) * size_t(e->config().num_layers);
    EXPECT_EQ(e->slice_rows(), std::min(128, kChunk));
    // + the batched decode graph of B = 2 (EngineOptions::cuda_batched_decode; two sessions).
    const size_t batched = 1;
    EXPECT_EQ(info.graphs, per_session * kSessions + batched);
    EXPECT_GT(info.capture_ms, 0.0);
    EXPECT_GT(info.gemm_plans, 0u);
    const uint64_t before = e->capture_count();
    EXPECT_EQ(before, per_session * kSessions + batched);
    const int V = e->config().vocab_size;
    for (int s = 0; s < kSessions; ++s) {
        const auto ids = test::random_ids(300 + 17 * s, std::random_device{}(), V);
        int32_t next = -1;
        ASSERT_EQ(e->prefill(s, ids.data(), ids.size(), &next), FROST_OK) << frost_last_error();
        for (int i = 0; i < 40; ++i) ASSERT_EQ(e->decode(s, &next), FROST_OK) << frost_last_error();
        ASSERT_EQ(e->reset(s), FROST_OK);
        ASSERT_EQ(e->prefill(s, ids.data(), 5, &next), FROST_OK) << frost_last_error();
    }
    EXPECT_EQ(e->capture_count(), before);
    EXPECT_EQ(cuda_engine_info(*e).graphs, per_session * kSessions + batched);
}

// A model whose shapes the kernels do not support is refused at load, naming the rule.
TEST(CudaEngine, RefusesUnsupportedShapesByName) {
    SKIP_WITHOUT_CUDA();
    EngineOptions o;
    o.backend = FROST_BACKEND_CUDA;
    o.max_seq_len = 256;
    o.prefill_chunk = kChunk;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(synth_dir("tiny"), o, &e), FROST_ERR_UNSUPPORTED);
    EXPECT_FALSE(e);
    EXPECT_NE(std::string(frost_last_error()).find("head_dim must be 256"), std::string::npos) << frost_last_error();
}

// Without CUDA the engine says so instead of silently running elsewhere.
TEST(CudaEngine, UnavailableBackendIsAnError) {
    if (frost_backend_available(FROST_BACKEND_CUDA)) GTEST_SKIP() << "CUDA is available here";
    EngineOptions o;
    o.backend = FROST_BACKEND_CUDA;
    std::unique_ptr<Engine> e;
    EXPECT_NE(Engine::create(test::fixture_dir("qwen35-tiny-a"), o, &e), FROST_OK);
    EXPECT_FALSE(e);
}

}  // namespace
}  // namespace frost::model
