// Token sampling from one logits row: greedy (first index of the maximum), or temperature with
// optional top-k / min_p / top-p and a counter-based RNG whose state (seed, counter) lives in the
// cursor. With per-session settings (params/sample.h) the row is processed first (logit_bias,
// repetition / frequency / presence penalties, the token mask) and the step's logprobs are
// written from the raw row. Algorithm (the CUDA kernels must follow it exactly): candidates
// ordered by (logit desc, index asc), truncated to top_k; weights exp((l - max)/T); min_p keeps the
// prefix with weight >= min_p (the best has weight 1); weights summed in candidate order; top-p
// keeps the shortest prefix whose weight reaches top_p * total; u = rng_uniform(seed, counter) *
// kept; the pick is the first candidate whose running weight exceeds u.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/kernels.h"

namespace frost::kernels::cpu {
namespace {

int32_t argmax(const float* l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (l[i] > l[best]) best = i;
    return best;
}

bool bit(const uint32_t* words, int32_t i) { return (words[i >> 5] >> (i & 31)) & 1u; }

// Steps 1-2 of params/sample.h: marks the inputs, counts a decode input, writes the processed row.
void process(const SampleParams& p, const float* l, int32_t rows, float* q) {
    const SamplerSettings& s = *p.settings;
    const int32_t V = p.vocab;
    if (p.ids && p.seen)
        for (int32_t r = 0; r < rows; ++r)
            if (p.ids[r] >= 0 && p.ids[r] < V) p.seen[p.ids[r] >> 5] |= 1u << (p.ids[r] & 31);
    if (p.count_inputs && p.ids && p.counts && p.ids[0] >= 0 && p.ids[0] < V) p.counts[p.ids[0]] += 1;
    std::copy(l, l + V, q);
    for (int32_t b = 0; b < std::min(s.n_bias, kMaxLogitBias); ++b)
        if (s.bias_ids[b] >= 0 && s.bias_ids[b] < V) q[s.bias_ids[b]] += s.bias_values[b];
    const float rep = s.repetition_penalty;
    const bool rep_on = rep > 0.0f && rep != 1.0f && p.seen;
    const bool pen_on = (s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f) && p.counts;
    const bool mask_on = s.mask_on && p.mask;
    if (!rep_on && !pen_on && !mask_on) return;
    for (int32_t i = 0; i < V; ++i) {
        float x = q[i];
        if (rep_on && bit(p.seen, i)) x = x > 0.0f ? x / rep : x * rep;
        if (pen_on && p.counts[i] > 0) x -= s.frequency_penalty * float(p.counts[i]) + s.presence_penalty;
        if (mask_on && !bit(p.mask, i)) x = -std::numeric_limits<float>::infinity();
        q[i] = x;
    }
}

// Step 4: log_softmax of the raw row for the chosen token and the top N (ties: lower id first).
void write_logprobs(const SampleParams& p, const float* l, int32_t token) {
    SampleRecord& r = *p.record;
    r.token = token;
    r.n_top = 0;
    r.logprob = 0.0f;
    const int32_t want = p.settings ? p.settings->logprobs : 0;
    if (want <= 0) return;
    float mx = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < p.vocab; ++i)
        if (l[i] > mx) mx = l[i];
    double sum = 0.0;
    for (int32_t i = 0; i < p.vocab; ++i)
        if (l[i] == l[i]) sum += std::exp(double(l[i]) - double(mx));
    const double lse = double(mx) + std::log(sum);
    r.logprob = float(double(l[token]) - lse);
    const int32_t n = std::min({want - 1, kMaxTopLogprobs, p.vocab});
    int32_t* idx = p.work_idx;
    for (int32_t i = 0; i < p.vocab; ++i) idx[i] = i;
    auto key = [l](int32_t i) { return l[i] == l[i] ? l[i] : -std::numeric_limits<float>::infinity(); };
    std::partial_sort(idx, idx + n, idx + p.vocab,
                      [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
    for (int32_t k = 0; k < n; ++k) {
        r.top_ids[k] = idx[k];
        r.top_logprobs[k] = float(double(l[idx[k]]) - lse);
    }
    r.n_top = n;
}

}  // namespace

frost_status sample(const SampleParams& p) {
    if (!p.logits || !p.cursor || !p.out_token || p.vocab <= 0) return FROST_ERR_INVALID_ARG;
    StepCursor& cur = *p.cursor;
    const int32_t rows = p.n_rows ? *p.n_rows : cur.n_tokens;
    int64_t row = 0;
    if (p.select_last_row) row = rows - 1;
    if (row < 0) return FROST_ERR_OUT_OF_RANGE;
    const float* raw = p.logits + row * p.row_stride;
    const float* l = raw;
    if (p.settings) {
        if (!p.work) return FROST_ERR_INVALID_ARG;
        float* q = p.work + p.vocab;  // the second half of the work area: the processed row
        process(p, raw, rows, q);
        l = q;
    }
    const float min_p = p.settings ? p.settings->min_p : 0.0f;
    int32_t token;
    if (cur.sample_mode == kSampleGreedy || !(cur.temperature > 0.0f)) {
        token = argmax(l, p.vocab);
    } else {
        if (!p.work || !p.work_idx) return FROST_ERR_INVALID_ARG;
        int32_t* idx = p.work_idx;
        float* w = p.work;
        int32_t n_cand =
            cur.top_k > 0 ? std::min(cur.top_k, p.vocab) : p.vocab;
        const bool need_order = cur.top_k > 0 || cur.top_p < 1.0f;
        for (int32_t i = 0; i < p.vocab; ++i) idx[i] = i;
        if (need_order) {
            auto by_logit = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
            std::partial_sort(idx, idx + n_cand, idx + p.vocab, by_logit);
        }
        float mx = l[idx[0]];
        if (!need_order)
            for (int32_t i = 1; i < n_cand; ++i) mx = std::max(mx, l[i]);
        const float inv_t = 1.0f / cur.temperature;
        for (int32_t i = 0; i < n_cand; ++i) w[i] = std::exp((l[idx[i]] - mx) * inv_t);
        if (min_p > 0.0f) {  // ordered: a prefix; unordered: the dropped weights become 0
            if (need_order) {
                int32_t keep = 1;
                while (keep < n_cand && w[keep] >= min_p) ++keep;
                n_cand = keep;
            } else {
                for (int32_t i = 0; i < n_cand; ++i)
                    if (w[i] < min_p) w[i] = 0.0f;
            }
        }
        float total = 0.0f;
        for (int32_t i = 0; i < n_cand; ++i) total += w[i];
        int32_t kept = n_cand;
        float kept_total = total;
        if (cur.top_p < 1.0f) {
            const float target = cur.top_p * total;
            float cum = 0.0f;
            for (int32_t i = 0; i < n_cand; ++i) {
                cum += w[i];
                if (cum >= target) {
                    kept = i + 1;
                    kept_total = cum;
                    break;
                }
            }
        }
        const float u = rng_uniform(cur.rng_seed, cur.rng_counter) * kept_total;
        cur.rng_counter += 1;
        token = idx[kept - 1];
        float cum = 0.0f;
        for (int32_t i = 0; i < kept; ++i) {
            cum += w[i];
            if (cum > u) {
                token = idx[i];
                break;
            }
        }
    }
    cur.last_token = token;
    *p.out_token = token;
    if (p.record) {
        if (!p.work_idx) return FROST_ERR_INVALID_ARG;
        write_logprobs(p, raw, token);
    }
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
