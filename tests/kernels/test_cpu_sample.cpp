// The CPU sampler (the reference the CUDA sampler is tested against) with the per-session
// settings of kernels/params/sample.h: logit_bias, repetition / frequency / presence penalties,
// min_p, the token mask and raw logprobs, each against an independent float64 reference written
// here, on fresh random logits with the outputs poisoned first; plus issue 17's scripted
// apple/banana step, where each parameter changes the chosen sequence exactly as its formula says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"

namespace frost::kernels::cpu {
namespace {

std::mt19937& rng() {
    static std::mt19937 r(std::random_device{}());
    return r;
}

uint32_t draw() { return uint32_t(rng()()); }

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One session's sampler buffers and a sampling step over them, as the engine wires them.
struct Session {
    int V;
    SamplerSettings settings{};
    std::vector<int32_t> counts;
    std::vector<uint32_t> seen, mask;
    StepCursor cur{};
    std::vector<float> work;
    std::vector<int32_t> idx;
    SampleRecord record{};
    explicit Session(int vocab)
        : V(vocab), counts(size_t(vocab), 0), seen(size_t(mask_words(vocab)), 0u),
          mask(size_t(mask_words(vocab)), ~0u), work(2 * size_t(vocab), kNaN), idx(size_t(vocab), -1) {}

    // One step over `logits` ([rows, V], the last row sampled) whose inputs are `ids`.
    int32_t step(const std::vector<float>& logits, const std::vector<int32_t>& ids, bool decode) {
        const int32_t rows = int32_t(ids.size());
        cur.n_tokens = rows;
        int32_t out = -1;
        std::fill(std::begin(record.top_ids), std::end(record.top_ids), -7);
        std::fill(std::begin(record.top_logprobs), std::end(record.top_logprobs), kNaN);
        record.logprob = kNaN;
        record.token = -7;
        SampleParams p{};
        p.logits = logits.data(); p.row_stride = V; p.vocab = V; p.select_last_row = 1; p.n_rows = &rows;
        p.work = work.data(); p.work_idx = idx.data(); p.cursor = &cur; p.out_token = &out;
        p.settings = &settings; p.counts = counts.data(); p.seen = seen.data(); p.mask = mask.data();
        p.ids = ids.data(); p.count_inputs = decode ? 1 : 0; p.record = &record;
        EXPECT_EQ(sample(p), FROST_OK);
        EXPECT_EQ(cur.last_token, out);
        EXPECT_EQ(record.token, out);
        return out;
    }
};

// Issue 17 bug 1's scripted step: apple (3) at logit 10, banana (7) at 9, the other 998 at 0,
// whatever the history. The first step is a prefill of `context` (or of one unrelated id), each
// later one a decode step whose input is the token the step before chose.
std::string scripted_run(const SamplerSettings& s, float temperature, uint64_t seed, int steps,
                         std::vector<int32_t> context = {999}) {
    constexpr int32_t kApple = 3, kBanana = 7;
    Session ses(1000);
    ses.settings = s;
    ses.cur.sample_mode = temperature > 0 ? kSampleRandom : kSampleGreedy;
    ses.cur.temperature = temperature;
    ses.cur.top_p = 1.0f;
    ses.cur.rng_seed = seed;
    std::vector<float> logits(1000, 0.0f);
    logits[kApple] = 10;
    logits[kBanana] = 9;
    std::string out;
    std::vector<int32_t> ids = context;
    for (int i = 0; i < steps; ++i) {
        const int32_t t = ses.step(logits, ids, i > 0);
        out += t == kApple ? 'a' : t == kBanana ? 'b' : '?';
        ids = {t};
    }
    return out;
}

TEST(CpuSample, Issue17EachParameterChangesTheChoiceAsItsFormulaSays) {
    SamplerSettings none{};
    EXPECT_EQ(scripted_run(none, 0, 0, 6), "aaaaaa");
    SamplerSettings f{};
    f.frequency_penalty = 2;  // a: 10 - 2n, b: 9 - 2m
    EXPECT_EQ(scripted_run(f, 0, 0, 6), "ababab");
    SamplerSettings p{};
    p.presence_penalty = 2;   // a: 8 once generated, b: 7 once generated
    EXPECT_EQ(scripted_run(p, 0, 0, 6), "abaaaa");
    SamplerSettings r{};
    r.repetition_penalty = 1.5f;  // apple in the prompt: 10 / 1.5 < 9; then both seen: 6.67 > 6
    EXPECT_EQ(scripted_run(r, 0, 0, 4, {3}), "baaa");
    EXPECT_EQ(scripted_run(r, 0, 0, 4, {999}), "abaa");  // apple penalised once it was generated
    SamplerSettings b{};
    b.n_bias = 1;
    b.bias_ids[0] = 7;
    b.bias_values[0] = 2;
    EXPECT_EQ(scripted_run(b, 0, 0, 4), "bbbb");
    // min_p at temperature 1: the 998 tokens at 0 hold 3.2 % of the mass per step.
    const uint64_t seed = (uint64_t(draw()) << 32) | draw();
    EXPECT_NE(scripted_run(none, 1, seed, 400).find('?'), std::string::npos) << "seed " << seed;
    SamplerSettings m{};
    m.min_p = 0.1f;  // banana (p / p_max = e^-1) stays, the rest (e^-10) goes
    const std::string kept = scripted_run(m, 1, seed, 400);
    EXPECT_EQ(kept.find('?'), std::string::npos) << kept;
    EXPECT_NE(kept.find('b'), std::string::npos) << kept;
    EXPECT_EQ(scripted_run(m, 1, seed, 400), kept);  // same seed, same draws
}

// Independent float64 reference of params/sample.h steps 1-2 and greedy step 3.
struct Ref {
    std::vector<double> processed;
    int32_t greedy = -1;
};
Ref reference(const std::vector<float>& l, const SamplerSettings& s, const std::vector<int32_t>& counts,
              const std::vector<bool>& seen, const std::vector<bool>& allowed) {
    const size_t V = l.size();
    Ref r;
    r.processed.assign(l.begin(), l.end());
    for (int b = 0; b < s.n_bias; ++b) r.processed[size_t(s.bias_ids[b])] += s.bias_values[b];
    for (size_t i = 0; i < V; ++i) {
        double& x = r.processed[i];
        if (seen[i]) x = x > 0 ? x / s.repetition_penalty : x * s.repetition_penalty;
        if (counts[i] > 0) x -= double(s.frequency_penalty) * counts[i] + s.presence_penalty;
        if (s.mask_on && !allowed[i]) x = -INFINITY;
    }
    r.greedy = int32_t(std::max_element(r.processed.begin(), r.processed.end()) - r.processed.begin());
    return r;
}

TEST(CpuSample, ProcessingAndLogprobsMatchAnIndependentReference) {
    const int V = 3001;  // not a multiple of 32: the last mask word is partial
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int trial = 0; trial < 20; ++trial) {
        Session ses(V);
        std::vector<float> row(static_cast<size_t>(V));
        for (auto& x : row) x = nd(rng());
        SamplerSettings& s = ses.settings;
        s.repetition_penalty = 1.0f + float(draw() % 100) / 50.0f;
        s.frequency_penalty = float(int(draw() % 9) - 4) * 0.5f;
        s.presence_penalty = float(int(draw() % 9) - 4) * 0.5f;
        s.n_bias = int32_t(draw() % 50);
        for (int b = 0; b < s.n_bias; ++b) {
            s.bias_ids[b] = int32_t(draw() % V);
            for (int c = 0; c < b; ++c)
                if (s.bias_ids[c] == s.bias_ids[b]) s.bias_ids[b] = -1;  // distinct ids (the engine merges repeats)
            if (s.bias_ids[b] < 0) s.bias_ids[b] = V - 1 - b;
            s.bias_values[b] = float(int(draw() % 200) - 100) * 0.1f;
        }
        s.mask_on = trial % 2;
        s.logprobs = 1 + int32_t(draw() % (kMaxTopLogprobs + 1));
        std::vector<bool> seen(size_t(V), false), allowed(size_t(V), true);
        std::vector<int32_t> counts(size_t(V), 0);
        // Earlier generated tokens (counts) and the state's tokens (seen bits).
        for (int k = 0; k < 40; ++k) {
            const int32_t id = int32_t(draw() % V);
            ses.counts[size_t(id)] += 1;
            counts[size_t(id)] += 1;
        }
        for (int k = 0; k < 60; ++k) {
            const int32_t id = int32_t(draw() % V);
            ses.seen[size_t(id) >> 5] |= 1u << (id & 31);
            seen[size_t(id)] = true;
        }
        if (s.mask_on) {
            for (int i = 0; i < V; ++i) {
                allowed[size_t(i)] = draw() % 3 == 0;
                if (!allowed[size_t(i)]) ses.mask[size_t(i) >> 5] &= ~(1u << (i & 31));
            }
        }
        // A prefill step of two rows marks both inputs seen and counts nothing...
        const std::vector<int32_t> before = ses.counts;
        ses.cur.sample_mode = kSampleGreedy;
        const int32_t a = int32_t(draw() % V), input = int32_t(draw() % V);
        std::vector<float> two(2 * size_t(V), -50.0f);
        std::copy(row.begin(), row.end(), two.begin() + V);
        ses.step(two, {a, input}, false);
        EXPECT_EQ(ses.counts, before);
        seen[size_t(a)] = seen[size_t(input)] = true;
        for (int i = 0; i < V; ++i)
            if (seen[size_t(i)] != bool((ses.seen[size_t(i) >> 5] >> (i & 31)) & 1u)) {
                ADD_FAILURE() << "seen bit " << i;
                break;
            }
        // ...a decode step counts its input (the token the step before generated) before processing.
        counts[size_t(input)] += 1;
        const Ref ref = reference(row, s, counts, seen, allowed);
        Session& dec = ses;
        EXPECT_EQ(dec.step(row, {input}, true), ref.greedy) << "trial " << trial;
        EXPECT_EQ(dec.counts, counts);
        if (s.mask_on) {
            EXPECT_TRUE(allowed[size_t(ref.greedy)]);
        }
        const Ref& ref2 = ref;
        // Raw logprobs: log_softmax of the unprocessed row.
        double mx = -INFINITY, sum = 0;
        for (float x : row) mx = std::max(mx, double(x));
        for (float x : row) sum += std::exp(double(x) - mx);
        const double lse = mx + std::log(sum);
        EXPECT_NEAR(dec.record.logprob, double(row[size_t(ref2.greedy)]) - lse, 1e-5);
        std::vector<int32_t> order(static_cast<size_t>(V));
        for (int i = 0; i < V; ++i) order[size_t(i)] = i;
        std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return row[size_t(x)] > row[size_t(y)]; });
        ASSERT_EQ(dec.record.n_top, s.logprobs - 1);
        double mass = 0;
        for (int k = 0; k < dec.record.n_top; ++k) {
            EXPECT_EQ(dec.record.top_ids[k], order[size_t(k)]) << "rank " << k;
            EXPECT_NEAR(dec.record.top_logprobs[k], double(row[size_t(order[size_t(k)])]) - lse, 1e-5);
            mass += std::exp(double(dec.record.top_logprobs[k]));
        }
        EXPECT_LE(mass, 1.0 + 1e-6);
    }
}

TEST(CpuSample, MaskedRandomSamplingDrawsOnlyAllowedTokens) {
    const int V = 700;
    std::normal_distribution<float> nd(0.0f, 2.0f);
    Session ses(V);
    std::vector<bool> allowed(size_t(V), false);
    std::fill(ses.mask.begin(), ses.mask.end(), 0u);
    for (int k = 0; k < 25; ++k) {
        const int32_t id = int32_t(draw() % V);
        allowed[size_t(id)] = true;
        ses.mask[size_t(id) >> 5] |= 1u << (id & 31);
    }
    ses.settings.mask_on = 1;
    ses.cur.sample_mode = kSampleRandom;
    ses.cur.temperature = 1.5f;
    ses.cur.top_p = 1.0f;
    ses.cur.rng_seed = draw();
    for (int t = 0; t < 200; ++t) {
        std::vector<float> l(static_cast<size_t>(V));
        for (auto& x : l) x = nd(rng());
        ses.cur.top_k = t % 2 ? 50 : 0;
        ses.cur.top_p = t % 3 ? 1.0f : 0.8f;
        const int32_t tok = ses.step(l, {int32_t(t % V)}, true);
        ASSERT_TRUE(allowed[size_t(tok)]) << "step " << t << " drew masked token " << tok;
    }
}

}  // namespace
}  // namespace frost::kernels::cpu
