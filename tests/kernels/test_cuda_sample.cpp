// CUDA device sampling against the CPU sampler (cpu/sample.cpp): the same cursor (seed, counter,
// temperature, top-k, top-p) must give the same token and advance the counter the same way,
// greedy and random, on fresh random logits.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaSample, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::StepCursor;

struct Mode {
    int32_t mode;
    float temperature;
    int32_t top_k;
    float top_p;
};

// Rows the device sampler's passes treat differently (lm_sample_topk.cu): its threshold comes from
// slice maxima, and few survivors, -inf entries or too many survivors take other paths.
enum class Row {
    Uniform,      // random logits with a few near-ties among the leaders
    LowTail,      // the last ids far below the rest (reserved tokens): some slices hold no leader
    FewFinite,    // all but 10 entries -inf (a token mask): candidates padded with -inf ids in order
    AllEqual,     // one value everywhere: every entry survives (more than the survivor buffer)
    FiniteBlock,  // 20000 contiguous finite ids, the rest -inf: too few slices with a finite entry
};

std::vector<float> make_row(std::mt19937& rng, int vocab, Row shape) {
    auto l = uniform(rng, static_cast<size_t>(vocab), -4, 4, false);
    const float ninf = -std::numeric_limits<float>::infinity();
    switch (shape) {
        case Row::Uniform:
            for (int i = 0; i < 8; ++i) l[rng() % vocab] = 6.0f + 0.01f * (i % 3);
            break;
        case Row::LowTail:
            for (int i = vocab - vocab / 8; i < vocab; ++i) l[i] = -30.0f - 0.001f * float(i % 97);
            break;
        case Row::FewFinite:
            for (auto& v : l) v = ninf;
            for (int i = 0; i < 10; ++i) l[rng() % vocab] = float(int(rng() % 5));
            break;
        case Row::AllEqual:
            for (auto& v : l) v = 1.5f;
            break;
        case Row::FiniteBlock: {
            const int begin = int(rng() % uint32_t(vocab - 20000));
            for (int i = 0; i < vocab; ++i)
                if (i < begin || i >= begin + 20000) l[i] = ninf;
            break;
        }
    }
    return l;
}

void compare(int vocab, const Mode& m, int draws, const char* name, Row shape = Row::Uniform) {
    auto rng = fresh_rng(name);
    const int rows = 2;
    auto logits = uniform(rng, static_cast<size_t>(rows) * vocab, -4, 4, false);
    const auto last = make_row(rng, vocab, shape);
    std::copy(last.begin(), last.end(), logits.begin() + vocab);
    Dev<float> dl(logits), work(kernels::sample_work_floats(vocab));
    Dev<int32_t> dn(std::vector<int32_t>{rows}), tok(1);
    std::vector<float> hwork(2 * static_cast<size_t>(vocab));
    std::vector<int32_t> hidx(vocab);
    StepCursor c{};
    c.sample_mode = m.mode;
    c.temperature = m.temperature;
    c.top_k = m.top_k;
    c.top_p = m.top_p;
    c.rng_seed = (static_cast<uint64_t>(rng()) << 32) | rng();
    c.rng_counter = rng() % 1000;
    c.n_tokens = rows;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    int32_t row_n = rows;
    for (int d = 0; d < draws; ++d) {
        tok.poison();
        kernels::SampleParams gp{};  // no settings / record: plain sampling
        gp.logits = dl.get(); gp.row_stride = vocab; gp.vocab = vocab; gp.select_last_row = 1; gp.n_rows = dn.get();
        gp.work = work.get(); gp.cursor = dc.get(); gp.out_token = tok.get();
        CUDA_OK(kernels::sample_launch(gp, nullptr));
        int32_t cpu_tok = -1;
        kernels::SampleParams cp{};
        cp.logits = logits.data(); cp.row_stride = vocab; cp.vocab = vocab; cp.select_last_row = 1; cp.n_rows = &row_n;
        cp.work = hwork.data(); cp.work_idx = hidx.data(); cp.cursor = &c; cp.out_token = &cpu_tok;
        ASSERT_EQ(kernels::cpu::sample(cp), FROST_OK);
        const StepCursor got = dc.download()[0];
        EXPECT_EQ(tok.download()[0], cpu_tok) << "draw " << d;
        EXPECT_EQ(got.last_token, cpu_tok);
        EXPECT_EQ(got.rng_counter, c.rng_counter);
    }
}

TEST(CudaSample, GreedyMatchesCpu) {
    FROST_SKIP_WITHOUT_CUDA();
    compare(248320, {kernels::kSampleGreedy, 1.0f, 0, 1.0f}, 2, "SampleGreedy");
}

TEST(CudaSample, TopKTopPMatchesCpu) {
    FROST_SKIP_WITHOUT_CUDA();
    compare(248320, {kernels::kSampleRandom, 0.8f, 50, 0.9f}, 20, "SampleTopKP");
    compare(5000, {kernels::kSampleRandom, 1.3f, 256, 1.0f}, 20, "SampleTopK256");
    compare(300, {kernels::kSampleRandom, 0.5f, 7, 0.5f}, 20, "SampleSmallVocab");
}

// The device sampler's other paths at the released vocabulary (lm_sample_topk.cu): a threshold
// from slices with and without leaders, -inf padding of short candidate lists, and the exact
// running merge when more entries survive than its buffer holds.
TEST(CudaSample, RandomRowsOfEveryPathMatchCpu) {
    FROST_SKIP_WITHOUT_CUDA();
    compare(248320, {kernels::kSampleRandom, 1.0f, 256, 1.0f}, 10, "SampleLowTail", Row::LowTail);
    compare(248320, {kernels::kSampleRandom, 0.7f, 20, 0.8f}, 10, "SampleLowTailK20", Row::LowTail);
    compare(248320, {kernels::kSampleRandom, 1.0f, 256, 1.0f}, 10, "SampleFewFinite", Row::FewFinite);
    compare(248320, {kernels::kSampleRandom, 0.9f, 5, 1.0f}, 10, "SampleFewFiniteK5", Row::FewFinite);
    compare(248320, {kernels::kSampleRandom, 1.0f, 40, 0.9f}, 3, "SampleAllEqual", Row::AllEqual);
    compare(248320, {kernels::kSampleRandom, 1.0f, 256, 0.95f}, 3, "SampleFiniteBlock", Row::FiniteBlock);
    compare(4000, {kernels::kSampleRandom, 1.0f, 256, 1.0f}, 10, "SampleSmallFewFinite", Row::FewFinite);
}

}  // namespace
}  // namespace frost::test
#endif
