// The CUDA sampler with per-session settings (kernels/params/sample.h) against the CPU reference
// (cpu/sample.cpp) over several steps of one session: logit_bias, repetition / frequency /
// presence penalties, the token mask, min_p, greedy and top-k / top-p draws, and the raw logprobs
// record. Both sides start from the same settings, counts, seen bits and cursor; after every step
// the token, cursor, counts, seen bits and record must agree (logprobs within 1e-4: float vs
// double sums). Needs a GPU (the lead runs it); without CUDA it is one skipped test.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaSampleSettings, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::SampleRecord;
using kernels::SamplerSettings;
using kernels::StepCursor;

struct Case {
    int vocab;
    int32_t mode;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    bool mask;
    int logprobs;  // SamplerSettings::logprobs (0 off, 1 + N)
};

void compare(const Case& k, const char* name) {
    auto rng = fresh_rng(name);
    const int V = k.vocab, W = kernels::mask_words(V), rows = 3;
    SamplerSettings s{};
    s.repetition_penalty = 1.3f;
    s.frequency_penalty = 0.6f;
    s.presence_penalty = 0.4f;
    s.min_p = k.min_p;
    s.mask_on = k.mask ? 1 : 0;
    s.logprobs = k.logprobs;
    s.n_bias = 40;
    for (int b = 0; b < s.n_bias; ++b) {
        s.bias_ids[b] = int32_t((uint64_t(b) * 7919u + rng() % 7u) % uint64_t(V));
        for (int c = 0; c < b; ++c)
            if (s.bias_ids[c] == s.bias_ids[b]) s.bias_ids[b] = (s.bias_ids[b] + 1) % V;
        s.bias_values[b] = float(int(rng() % 81) - 40) * 0.25f;
    }
    std::vector<int32_t> counts(size_t(V), 0);
    std::vector<uint32_t> seen(size_t(W), 0u), mask(size_t(W), ~0u);
    for (int i = 0; i < 64; ++i) counts[rng() % V] += 1 + int(rng() % 3);
    for (int i = 0; i < 200; ++i) {
        const uint32_t id = rng() % uint32_t(V);
        seen[id >> 5] |= 1u << (id & 31);
    }
    if (k.mask)
        for (int i = 0; i < V; ++i)
            if (rng() % 4 != 0) mask[size_t(i) >> 5] &= ~(1u << (i & 31));
    StepCursor c{};
    c.sample_mode = k.mode;
    c.temperature = k.temperature;
    c.top_k = k.top_k;
    c.top_p = k.top_p;
    c.rng_seed = (uint64_t(rng()) << 32) | rng();
    c.n_tokens = rows;

    Dev<SamplerSettings> ds(std::vector<SamplerSettings>{s});
    Dev<int32_t> dcounts(counts), dtok(1), dn(std::vector<int32_t>{rows});
    Dev<uint32_t> dseen(seen), dmask(mask);
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    Dev<float> work(kernels::sample_work_floats(V));
    Dev<SampleRecord> drec(1);
    std::vector<float> hwork(2 * static_cast<size_t>(V));
    std::vector<int32_t> hidx(static_cast<size_t>(V));
    for (int step = 0; step < 6; ++step) {
        auto logits = uniform(rng, size_t(rows) * V, -6, 6, false);
        for (int i = 0; i < 6; ++i) logits[size_t(rows - 1) * V + rng() % V] = 9.0f + 0.001f * (i % 2);  // near-ties
        std::vector<int32_t> ids(static_cast<size_t>(rows));
        for (auto& id : ids) id = int32_t(rng() % uint32_t(V));
        const bool decode = step > 0;
        Dev<float> dl(logits);
        Dev<int32_t> dids(ids);
        dtok.poison();
        drec.poison();
        kernels::SampleParams gp{};
        gp.logits = dl.get(); gp.row_stride = V; gp.vocab = V; gp.select_last_row = 1; gp.n_rows = dn.get();
        gp.work = work.get(); gp.cursor = dc.get(); gp.out_token = dtok.get(); gp.settings = ds.get();
        gp.counts = dcounts.get(); gp.seen = dseen.get(); gp.mask = dmask.get(); gp.ids = dids.get();
        gp.count_inputs = decode ? 1 : 0; gp.record = drec.get();
        CUDA_OK(kernels::sample_launch(gp, nullptr));
        int32_t cpu_tok = -1;
        SampleRecord rec{};
        const int32_t n = rows;
        kernels::SampleParams cp{};
        cp.logits = logits.data(); cp.row_stride = V; cp.vocab = V; cp.select_last_row = 1; cp.n_rows = &n;
        cp.work = hwork.data(); cp.work_idx = hidx.data(); cp.cursor = &c; cp.out_token = &cpu_tok; cp.settings = &s;
        cp.counts = counts.data(); cp.seen = seen.data(); cp.mask = mask.data(); cp.ids = ids.data();
        cp.count_inputs = decode ? 1 : 0; cp.record = &rec;
        ASSERT_EQ(kernels::cpu::sample(cp), FROST_OK);
        ASSERT_EQ(dtok.download()[0], cpu_tok) << name << " step " << step;
        const StepCursor gc = dc.download()[0];
        EXPECT_EQ(gc.last_token, cpu_tok);
        EXPECT_EQ(gc.rng_counter, c.rng_counter);
        EXPECT_EQ(dcounts.download(), counts) << "step " << step;
        EXPECT_EQ(dseen.download(), seen) << "step " << step;
        const SampleRecord g = drec.download()[0];
        EXPECT_EQ(g.token, cpu_tok);
        ASSERT_EQ(g.n_top, rec.n_top);
        if (k.logprobs > 0) {
            EXPECT_NEAR(g.logprob, rec.logprob, 1e-4) << "step " << step;
        }
        for (int t = 0; t < rec.n_top; ++t) {
            EXPECT_EQ(g.top_ids[t], rec.top_ids[t]) << "step " << step << " rank " << t;
            EXPECT_NEAR(g.top_logprobs[t], rec.top_logprobs[t], 1e-4);
        }
        if (k.mask) {
            EXPECT_TRUE((mask[size_t(cpu_tok) >> 5] >> (cpu_tok & 31)) & 1u);
        }
    }
}

TEST(CudaSampleSettings, GreedyWithPenaltiesBiasMaskAndLogprobsMatchesCpu) {
    FROST_SKIP_WITHOUT_CUDA();
    compare({248320, kernels::kSampleGreedy, 1.0f, 0, 1.0f, 0.0f, false, 21}, "SettingsGreedy");
    compare({248320, kernels::kSampleGreedy, 1.0f, 0, 1.0f, 0.0f, true, 6}, "SettingsGreedyMask");
    compare({3001, kernels::kSampleGreedy, 1.0f, 0, 1.0f, 0.0f, true, 1}, "SettingsGreedySmall");
}

TEST(CudaSampleSettings, TopKTopPMinPWithPenaltiesMatchesCpu) {
    FROST_SKIP_WITHOUT_CUDA();
    compare({248320, kernels::kSampleRandom, 0.8f, 50, 0.9f, 0.05f, false, 4}, "SettingsRandom");
    compare({248320, kernels::kSampleRandom, 1.3f, 256, 1.0f, 0.2f, true, 0}, "SettingsRandomMask");
    compare({300, kernels::kSampleRandom, 0.5f, 7, 0.5f, 0.0f, true, 21}, "SettingsRandomSmall");
}

}  // namespace
}  // namespace frost::test
#endif
