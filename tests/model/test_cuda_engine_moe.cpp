// The CUDA MoE engine (bf16 weights and activations, device router, expert GEMVs reading the
// selected ids from device memory in the one captured decode graph, grouped prefill) against
// references that can tell a bug from router conditioning:
//
// 1. CudaMoeSynthParity: a synthetic MoE model written with --decisive-router (synth.h), the
//    same prompt on the CPU engine (fp32, the reference) and the CUDA engine. The test first
//    proves its own conditioning from the CPU engine's "router_probs" trace: every token's
//    smallest k-th vs (k+1)-th router gap over the MoE layers is >= kMinGap (0.05, 5x the bf16
//    router error; the decisive models measure ~0.17-0.21), so bf16 picks the experts fp32 picks. Then the dense bf16 acceptance
//    (tests/fixtures/README.md, as test_cuda_engine.cpp): every position rel L2 <= 0.2, mean
//    <= 3e-2, top-1 equal on >= 95% of positions whose CPU margin exceeds 0.05, over prompt
//    logits (grouped prefill; 40 tokens: one partial chunk; 300 tokens with C_p 128: two full
//    chunks and a partial one of 44) and greedy decode steps (the router + expert GEMV graph).
//    Prompt positions the model itself makes ill-conditioned are held to another bound (see
//    kIllConditioned below), measured per position on the CPU rather than assumed.
//    A wrong shared expert, shared gate, residual add, top-k weight, expert id or bucket row
//    count fails here: measured on the CPU engine with weights edited to mimic such bugs on
//    moe-tiny-gpu --decisive-router (100 tokens), shared expert dropped: rel L2 mean 0.81 (min
//    0.56); experts 0 and 1 swapped: mean 0.59; shared gate 0.5 instead of sigmoid(g.x): 0.32,
//    all far above the 3e-2 mean bound.
// 2. CudaMoeFixtures: the transformers goldens, whose random routers are ill-conditioned (see
//    the test's comment): tolerance asserted where conditioning allows it, the rest printed.
// 3. The decode graph follows new routing every step without recapture; capsule exactness.
// Skipped without a CUDA device; the GPU machine runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "model/capsule.h"
#include "model/capsule_test_util.h"
#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/capsule_exactness_util.h"
#include "model/model_files_util.h"
#include "model/moe_gap_util.h"
#include "model/noise_sensitivity_util.h"
#include "model/synth.h"

namespace frost::model {
namespace {

using test::margin_of;

// The dense bf16 acceptance (tests/fixtures/README.md).
constexpr double kMaxRelL2 = 0.2;           // any one position
constexpr double kMeanRelL2 = 3e-2;         // mean over positions
constexpr double kTop1Margin = 0.05;        // reference margin above which top-1 is compared
constexpr double kMinTop1Agreement = 0.95;  // of those positions
// Router gap a bf16 path cannot flip. Measured on the CPU engine: Gaussian noise of std 3e-2
// on moe-tiny-a's router logits alone (router rows perturbed) reproduces what the bf16 CUDA
// engine shows against its golden (prompt rel L2 mean 0.14, max 0.75, top-1 77%; CUDA: 0.115,
// 0.90, 82%), 1e-2 gives 0.048 / 0.26 / 94%: bf16 router logits are off by ~1e-2-3e-2, i.e.
// a probability gap (p ~0.1-0.4) by <= ~1e-2. 0.05 is 5x that.
constexpr double kMinGap = 0.05;
// Fixtures: the gap below which a bf16 router may pick another expert than fp32 (the ~1e-2
// probability noise above).
constexpr double kBf16TieGap = 1e-2;
// A prompt position past kMaxRelL2 is run again through the decode graph (the prefix fed one
// token at a time: other kernels for every op) and the test prints how far that second CUDA path
// lands from the prefill's logits. Within kPathAgreement (so, by the triangle inequality, about
// as far from the CPU too) the deviation is most likely the input's conditioning under bf16
// activations; farther, a prefill kernel. Printed only: the bounds stay as they are. Seen once:
// gtest random seed 7717 on next-moe-tiny-gpu (H200, 2026-12-01): positions 1 and 2 at rel L2
// 0.2596 / 0.2144 from the CPU in prefill, 0.2733 / 0.2249 in decode, 0.0245 / 0.0197 between
// the two paths (on the CPU the logit RMS is ~2.0 and the router gap >= 0.17 at every position:
// neither a small denominator nor an expert flip); with the 40-token prompt the same seed also
// misses the mean (0.0368) and top-1 (58 of 62) bounds. Seeds 0-3 stay <= 0.07 everywhere.
constexpr double kPathAgreement = 0.1;
// Both seeds above turned out to be the model's conditioning, measured on the CPU alone
// (noise_sensitivity_util.h): flipping the last mantissa bit of the bf16 weights at random moves
// the fp32 logits of exactly those early prompt positions by as much as the CUDA engine stands
// from them (seed 45323: positions 0 / 1 / 3, CUDA 0.34 / 0.35 / 0.22, ulp noise 0.27-0.48 /
// 0.23-0.40 / 0.20-0.25; seed 7717: positions 1 / 2, CUDA 0.26 / 0.21, noise 0.15-0.25 /
// 0.12-0.22; median over a prompt 0.03-0.04; over seeds 1-8 of both tiny presets, 0-2 of 40
// positions exceed kIllConditioned, seed 7717 of next-moe-tiny-gpu 10). So each prompt
// position's sensitivity is measured (kNoiseDraws draws, the largest move kept): above
// kIllConditioned (half the per-position bound) the position is ill-conditioned, its distance
// from the CPU must stay within kNoiseFactor times its own noise move, and it leaves the mean and
// top-1 rules, which keep their dense values over the rest. At least kMinWellConditioned of the
// prompt must be well-conditioned, or the test proves little and says so.
constexpr int kNoiseDraws = 4;
constexpr double kIllConditioned = kMaxRelL2 / 2;
constexpr double kNoiseFactor = 2.0;
constexpr double kMinWellConditioned = 0.5;

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

// The CPU engine's run of a prompt then `steps` decode steps fed `forced` (or its own greedy
// tokens where forced is empty): logits of every prompt position and before every step, the
// greedy token after the prompt and each step, and the router gap of each token.
struct CpuRun {
    std::vector<float> prompt_logits;              // [n, V]
    std::vector<double> prompt_gap;                // [n]
    std::vector<std::vector<float>> step_logits;   // [steps][V]: before step i (i = 0: after the prompt)
    std::vector<double> step_gap;                  // [steps]: the token that produced step_logits[i]
    std::vector<int32_t> tokens;                   // [steps]: greedy token of step_logits[i]
};

CpuRun cpu_run(const std::string& dir, const std::vector<int32_t>& prompt, size_t steps,
               const std::vector<int32_t>& forced = {}) {
    EngineOptions o;
    o.max_seq_len = 512;
    // The whole prompt in one step, so the trace holds every prompt row (multiple of 64).
    o.prefill_chunk = int((prompt.size() + 63) / 64 * 64);
    o.logits_all = true;
    o.trace = true;
    CpuRun run;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    if (!e) return run;
    int32_t next = -1;
    EXPECT_EQ(e->prefill(0, prompt.data(), prompt.size(), &next, &run.prompt_logits), FROST_OK) << frost_last_error();
    run.prompt_gap = test::router_gaps(*e, int(prompt.size())).gap;
    for (size_t i = 0; i < steps; ++i) {
        std::vector<float> l;
        EXPECT_EQ(e->last_logits(0, &l), FROST_OK) << frost_last_error();
        run.step_logits.push_back(std::move(l));
        run.step_gap.push_back(i == 0 ? run.prompt_gap.back() : test::router_gaps(*e, 1).gap[0]);
        run.tokens.push_back(next);
        if (i + 1 < steps) {
            const int32_t in = forced.empty() ? next : forced[i];
            EXPECT_EQ(e->feed(0, in, &next), FROST_OK) << frost_last_error();
        }
    }
    return run;
}

// Rel L2 and top-1 of our logits against a reference row, accumulated.
struct Agreement {
    std::vector<double> rel;
    std::vector<std::string> label;
    int checked = 0, equal = 0;
    // top1: whether the row may count in the top-1 rule (its reference margin must also be > kTop1Margin).
    void add(const float* ours, const float* ref, size_t V, const std::string& what, bool top1 = true) {
        rel.push_back(test::rel_l2(ours, ref, V));
        label.push_back(what);
        int top = -1, mine = -2;
        if (top1 && margin_of(ref, V, &top) > kTop1Margin) {
            margin_of(ours, V, &mine);
            ++checked;
            equal += mine == top ? 1 : 0;
        }
    }
    double mean() const {
        double m = 0;
        for (double r : rel) m += r;
        return rel.empty() ? 0 : m / double(rel.size());
    }
    size_t worst() const { return size_t(std::max_element(rel.begin(), rel.end()) - rel.begin()); }
    // The dense bf16 acceptance over every row added.
    void expect_dense(const std::string& name) const {
        ASSERT_FALSE(rel.empty());
        const size_t w = worst();
        std::printf("[ %s ] rows %zu, rel L2 mean %.4f max %.4f (%s), top-1 %d of %d (margin > %.2f)\n", name.c_str(),
                    rel.size(), mean(), rel[w], label[w].c_str(), equal, checked, kTop1Margin);
        for (size_t i = 0; i < rel.size(); ++i) EXPECT_LE(rel[i], kMaxRelL2) << label[i];
        EXPECT_LE(mean(), kMeanRelL2);
        ASSERT_GT(checked, 0);
        EXPECT_GE(double(equal) / checked, kMinTop1Agreement);
    }
};

struct SynthCase {
    const char* preset;
    int prompt_len;
};

void PrintTo(const SynthCase& c, std::ostream* os) { *os << c.preset << " prompt " << c.prompt_len; }

class CudaMoeSynthParity : public ::testing::TestWithParam<SynthCase> {};

TEST_P(CudaMoeSynthParity, PromptAndGreedyMatchCpuOnADecisiveRouter) {
    SKIP_WITHOUT_CUDA();
    const SynthCase c = GetParam();
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    SCOPED_TRACE(std::string(c.preset) + ", prompt " + std::to_string(c.prompt_len) + ", seed " + std::to_string(seed));
    SynthOptions so;
    so.out_dir = frost::testing::make_temp_dir("cuda_moe_decisive");
    so.preset = c.preset;
    so.seed = seed;
    so.decisive_router = true;
    ASSERT_EQ(synth_checkpoint(so), FROST_OK) << frost_last_error();
    constexpr size_t kSteps = 24;

    auto e = cuda_engine(so.out_dir, true);
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->config().is_moe());
    const size_t V = size_t(e->config().vocab_size);
    const std::vector<int32_t> prompt = test::random_ids(size_t(c.prompt_len), seed, int(V));
    const CpuRun ref = cpu_run(so.out_dir, prompt, kSteps);
    ASSERT_EQ(ref.prompt_logits.size(), prompt.size() * V);
    ASSERT_EQ(ref.step_logits.size(), kSteps);

    // The test's own conditioning: no token may sit near a router tie on the fp32 path.
    double min_gap = 1;
    for (double g : ref.prompt_gap) min_gap = std::min(min_gap, g);
    for (double g : ref.step_gap) min_gap = std::min(min_gap, g);
    std::printf("[ %s prompt %d ] smallest CPU router top-k gap %.4f\n", c.preset, c.prompt_len, min_gap);
    ASSERT_GE(min_gap, kMinGap) << "the decisive-router model is not well conditioned: the test proves nothing";

    std::vector<float> logits;  // prefill appends every row
    int32_t next = -1;
    ASSERT_EQ(e->prefill(0, prompt.data(), prompt.size(), &next, &logits), FROST_OK) << frost_last_error();
    ASSERT_EQ(logits.size(), prompt.size() * V);
    // Well-conditioned prompt positions and the greedy steps: the dense acceptance. Ill-conditioned
    // positions: within kNoiseFactor x their own ulp-noise move (kIllConditioned above).
    const test::NoiseSensitivity sens =
        test::prompt_noise_sensitivity(so.out_dir, prompt, ref.prompt_logits, kNoiseDraws, seed);
    ASSERT_EQ(sens.rel.size(), prompt.size());
    Agreement a;
    std::vector<double> rel(prompt.size());
    size_t ill = 0;
    for (size_t p = 0; p < prompt.size(); ++p) {
        const float* ours = logits.data() + p * V;
        const float* cpu = ref.prompt_logits.data() + p * V;
        rel[p] = test::rel_l2(ours, cpu, V);
        if (sens.rel[p] <= kIllConditioned) {
            a.add(ours, cpu, V, "prompt position " + std::to_string(p), sens.top1_kept[p]);
            continue;
        }
        ++ill;
        std::printf("[ %s prompt %d ] position %zu ill-conditioned: ulp noise moves the CPU by %.4f, CUDA stands %.4f "
                    "from it (bound %.4f)\n",
                    c.preset, c.prompt_len, p, sens.rel[p], rel[p], std::max(kMaxRelL2, kNoiseFactor * sens.rel[p]));
        EXPECT_LE(rel[p], std::max(kMaxRelL2, kNoiseFactor * sens.rel[p])) << "ill-conditioned prompt position " << p;
    }
    std::printf("[ %s prompt %d ] %zu of %zu prompt positions ill-conditioned (ulp-noise move > %.2f)\n", c.preset,
                c.prompt_len, ill, prompt.size(), kIllConditioned);
    ASSERT_GE(double(prompt.size() - ill), kMinWellConditioned * double(prompt.size()))
        << "the model is ill-conditioned at too many positions: the test proves little";
    // Greedy steps through the decode graph, fed the CPU's tokens so both run the same prefix;
    // our greedy token (the arg-max of our logits) counts in the top-1 agreement.
    int greedy_checked = 0, greedy_equal = 0;
    for (size_t i = 0; i < kSteps; ++i) {
        std::vector<float> last(V, NAN);
        ASSERT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        a.add(last.data(), ref.step_logits[i].data(), V, "greedy step " + std::to_string(i));
        int top = -1;
        if (margin_of(ref.step_logits[i].data(), V, &top) > kTop1Margin) {
            ++greedy_checked;
            greedy_equal += next == ref.tokens[i] ? 1 : 0;  // in the 95% top-1 rule below, as the dense test
        }
        if (i + 1 < kSteps) {
            ASSERT_EQ(e->feed(0, ref.tokens[i], &next), FROST_OK) << frost_last_error();
        }
    }
    std::printf("[ %s prompt %d ] greedy tokens equal %d of %d decisive steps\n", c.preset, c.prompt_len,
                greedy_equal, greedy_checked);
    a.expect_dense(std::string("cuda vs cpu ") + c.preset + " prompt " + std::to_string(c.prompt_len));
    // Prompt positions past the bound, again through the decode graph (printed; kPathAgreement).
    for (size_t p = 0; p < prompt.size(); ++p) {
        if (rel[p] <= kMaxRelL2) continue;
        auto d = cuda_engine(so.out_dir, false);
        ASSERT_TRUE(d);
        int32_t t = -1;
        ASSERT_EQ(d->prefill(0, prompt.data(), 1, &t, nullptr), FROST_OK) << frost_last_error();
        for (size_t i = 1; i <= p; ++i) ASSERT_EQ(d->feed(0, prompt[i], &t), FROST_OK) << frost_last_error();
        std::vector<float> dl(V, NAN);
        ASSERT_EQ(d->last_logits(0, &dl), FROST_OK) << frost_last_error();
        const double paths = test::rel_l2(logits.data() + p * V, dl.data(), V);
        const double decode_cpu = test::rel_l2(dl.data(), ref.prompt_logits.data() + p * V, V);
        std::printf("[ %s prompt %d ] position %zu: rel L2 %.4f from the CPU in prefill, %.4f in decode, %.4f "
                    "between the two: %s\n",
                    c.preset, c.prompt_len, p, rel[p], decode_cpu, paths,
                    paths <= kPathAgreement ? "the CUDA paths agree (most likely the input's conditioning)"
                                            : "the paths disagree (look at the prefill kernels)");
    }
}

INSTANTIATE_TEST_SUITE_P(Decisive, CudaMoeSynthParity,
                         ::testing::Values(SynthCase{"moe-tiny-gpu", 40}, SynthCase{"moe-tiny-gpu", 300},
                                           SynthCase{"next-moe-tiny-gpu", 40}, SynthCase{"next-moe-tiny-gpu", 300}),
                         [](const ::testing::TestParamInfo<SynthCase>& i) {
                             std::string n = std::string(i.param.preset) + "_" + std::to_string(i.param.prompt_len);
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n;
                         });

// The transformers goldens. Their random routers are ill-conditioned: on the CPU fp32 engine
// (which matches the golden to 1e-3) 151 of moe-tiny-a's 240 tokens have a router top-k gap
// below kBf16TieGap at some MoE layer, so the bf16 router picks other experts at many tokens,
// and a flipped expert at token t and MoE layer l changes that token's MLP output and, through
// the mixers of the layers after l (recurrent GDN state, KV), every later token. Only the
// tokens before the first "contaminating" near-tie are comparable with the dense acceptance:
// position p is asserted when no token t <= p has a gap < kBf16TieGap at any MoE layer (the
// token's own gaps and those of every earlier one); the rest are printed, not asserted.
// Measured (CPU gaps): the first such token is position 0 in moe-tiny-a (gap 1.3e-4) and
// position 3 in moe-tiny-a-vl (9.1e-6), so this can check 0 and 3 positions: far too few to
// matter. The fixtures cannot separate a bug from conditioning; CudaMoeSynthParity above does,
// and the CPU engine matches these goldens to 1e-3 (test_engine_moe_fixtures), which with it
// ties the CUDA kernels to transformers' math. The test asserts the clean prefix it has, and
// fails if the fixtures' conditioning changes in a way these numbers no longer describe.
class CudaMoeFixtures : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaMoeFixtures, CleanPrefixMatchesGoldenRestReported) {
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
    // The CPU engine on the same prompt, fed the golden's greedy tokens: our gaps per token.
    const CpuRun ref = cpu_run(dir, g.prompt_ids, g.greedy_ids.size(), g.greedy_ids);
    ASSERT_EQ(ref.prompt_gap.size(), g.prompt_ids.size());
    std::vector<float> logits;  // prefill appends every row
    int32_t next = -1;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), &next, &logits), FROST_OK)
        << frost_last_error();
    ASSERT_EQ(logits.size(), g.prompt_ids.size() * V);
    Agreement clean, rest;
    bool tied = false;  // a near-tie at or before this token
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = size_t(g.prompt_logit_positions[i]);
        for (size_t t = 0; t <= p && !tied; ++t) tied = ref.prompt_gap[t] < kBf16TieGap;
        (tied ? rest : clean)
            .add(logits.data() + p * V, g.logits_prompt.data() + i * V, V, "prompt position " + std::to_string(p));
    }
    for (size_t i = 0; i < g.greedy_ids.size(); ++i) {
        std::vector<float> last(V, NAN);
        ASSERT_EQ(e->last_logits(0, &last), FROST_OK) << frost_last_error();
        tied = tied || ref.step_gap[i] < kBf16TieGap;
        (tied ? rest : clean).add(last.data(), g.logits_greedy.data() + i * V, V, "greedy step " + std::to_string(i));
        if (i + 1 < g.greedy_ids.size()) {
            ASSERT_EQ(e->feed(0, g.greedy_ids[i], &next), FROST_OK) << frost_last_error();
        }
    }
    std::printf("[ cuda moe vs golden %s ] %zu positions before the first router gap < %g (asserted), %zu after\n",
                GetParam(), clean.rel.size(), kBf16TieGap, rest.rel.size());
    if (!rest.rel.empty()) {
        const size_t w = rest.worst();
        std::printf("[ cuda moe vs golden %s ] after: rel L2 mean %.4f max %.4f (%s), top-1 %d of %d (reported only)\n",
                    GetParam(), rest.mean(), rest.rel[w], rest.label[w].c_str(), rest.equal, rest.checked);
        RecordProperty("after_tie_mean_rel_l2", std::to_string(rest.mean()));
    }
    for (size_t i = 0; i < clean.rel.size(); ++i) EXPECT_LE(clean.rel[i], kMaxRelL2) << clean.label[i];
    // The measured clean prefix (see above): a longer one means the fixtures changed; revisit.
    const size_t expected_clean = std::string(GetParam()) == "moe-tiny-a" ? 0 : 3;
    EXPECT_EQ(clean.rel.size(), expected_clean) << "the fixture's router conditioning changed";
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
    // The fixture itself: Frost writes nothing into a model folder (fingerprints are cached elsewhere).
    const std::string dir = test::fixture_dir("moe-tiny-a");
    auto e = cuda_engine(dir, false, 3);
    ASSERT_TRUE(e);
    test::expect_restore_append_equals_cold(*e, dir, "cuda_moe_capsule_store");
}

}  // namespace
}  // namespace frost::model
