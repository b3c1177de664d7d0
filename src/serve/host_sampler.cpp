// Host-side logits processing and sampling (see host_sampler.h for what and why).
#include "serve/host_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace frost::serve {

namespace {
// splitmix64 of (seed, draw index): each draw is independent of how steps were cut.
double uniform01(uint64_t seed, uint64_t draw) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (draw + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z >> 11) * (1.0 / 9007199254740992.0);
}
}  // namespace

void HostSampler::reset(const Sampling& s) {
    s_ = s;
    draws_ = 0;
    counts_.clear();
}

int32_t HostSampler::choose(std::vector<float>* logits, const std::vector<int32_t>& context) {
    std::vector<float>& l = *logits;
    const int32_t V = int32_t(l.size());
    for (const auto& [id, bias] : s_.logit_bias)
        if (id >= 0 && id < V) l[size_t(id)] += bias;
    if (s_.repetition_penalty != 1.0f) {
        std::unordered_set<int32_t> seen(context.begin(), context.end());
        for (const auto& kv : counts_) seen.insert(kv.first);
        for (int32_t id : seen) {
            if (id < 0 || id >= V) continue;
            float& x = l[size_t(id)];
            x = x > 0 ? x / s_.repetition_penalty : x * s_.repetition_penalty;
        }
    }
    for (const auto& [id, n] : counts_) {
        if (id < 0 || id >= V) continue;
        l[size_t(id)] -= s_.frequency_penalty * float(n) + (n > 0 ? s_.presence_penalty : 0.0f);
    }
    if (s_.temperature <= 0.0f) return int32_t(std::max_element(l.begin(), l.end()) - l.begin());

    // Candidates by descending logit; top_k, then softmax at the temperature, min_p, top_p. Only
    // tokens that can matter are sorted: with min_p those at or above min_p * p_max (exact), and
    // never those below e^-30 of the best (all of them together hold < V * 1e-13 of the mass).
    const float best = *std::max_element(l.begin(), l.end());
    float cut = best - 30.0f * s_.temperature;
    if (s_.min_p > 0.0f) cut = std::max(cut, best + s_.temperature * std::log(s_.min_p));
    std::vector<int32_t> idx;
    for (int32_t i = 0; i < V; ++i)
        if (l[size_t(i)] >= cut) idx.push_back(i);
    size_t keep = idx.size();
    if (s_.top_k > 0 && size_t(s_.top_k) < keep) keep = size_t(s_.top_k);
    std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(keep), idx.end(),
                      [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
    idx.resize(keep);
    const double top = l[size_t(idx[0])];
    std::vector<double> p(keep);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((double(l[size_t(idx[i])]) - top) / s_.temperature);
    size_t n = keep;
    if (s_.min_p > 0.0f) {  // p[0] is the largest: keep p >= min_p * p_max
        while (n > 1 && p[n - 1] < double(s_.min_p) * p[0]) --n;
    }
    sum = std::accumulate(p.begin(), p.begin() + std::ptrdiff_t(n), 0.0);
    if (s_.top_p < 1.0f) {
        double acc = 0;
        size_t m = 0;
        while (m < n) {
            acc += p[m++] / sum;
            if (acc >= double(s_.top_p)) break;
        }
        n = m;
        sum = std::accumulate(p.begin(), p.begin() + std::ptrdiff_t(n), 0.0);
    }
    const double u = uniform01(s_.seed, draws_++) * sum;
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
        acc += p[i];
        if (u < acc) return idx[i];
    }
    return idx[n - 1];
}

}  // namespace frost::serve
