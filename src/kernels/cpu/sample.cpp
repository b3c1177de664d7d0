// Token sampling from one logits row: greedy (first index of the maximum), or temperature with
// optional top-k / top-p and a counter-based RNG whose state (seed, counter) lives in the cursor.
// Algorithm (the CUDA kernel must follow it exactly): candidates ordered by (logit desc, index
// asc), truncated to top_k; weights exp((l - max)/T) summed in candidate order; top-p keeps the
// shortest prefix whose weight reaches top_p * total; u = rng_uniform(seed, counter) * kept;
// the pick is the first candidate whose running weight exceeds u.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kernels.h"

namespace frost::kernels::cpu {
namespace {

int32_t argmax(const float* l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (l[i] > l[best]) best = i;
    return best;
}

}  // namespace

frost_status sample(const SampleParams& p) {
    if (!p.logits || !p.cursor || !p.out_token || p.vocab <= 0) return FROST_ERR_INVALID_ARG;
    StepCursor& cur = *p.cursor;
    int64_t row = 0;
    if (p.select_last_row) row = (p.n_rows ? *p.n_rows : cur.n_tokens) - 1;
    if (row < 0) return FROST_ERR_OUT_OF_RANGE;
    const float* l = p.logits + row * p.row_stride;
    int32_t token;
    if (cur.sample_mode == kSampleGreedy || !(cur.temperature > 0.0f)) {
        token = argmax(l, p.vocab);
    } else {
        if (!p.work || !p.work_idx) return FROST_ERR_INVALID_ARG;
        int32_t* idx = p.work_idx;
        float* w = p.work;
        const int32_t n_cand =
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
        float total = 0.0f;
        for (int32_t i = 0; i < n_cand; ++i) total += w[i] = std::exp((l[idx[i]] - mx) * inv_t);
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
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
