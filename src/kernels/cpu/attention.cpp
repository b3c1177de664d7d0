// Causal GQA softmax attention over the contiguous per-layer KV cache, with the Qwen3.5 sigmoid
// output gate fused at the end (spec §4.2 steps 5-6). One (token, head) pair per task; scores,
// max, exp-sum and the weighted V sum run in position order, so a token's output does not depend
// on how many other tokens share the launch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace frost::kernels::cpu {

frost_status attention(const AttentionParams& p) {
    if (!p.q || !p.k_cache || !p.v_cache || !p.o || !p.cursor || p.Hkv <= 0 || p.Hq % p.Hkv)
        return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(&p.cursor->n_tokens, p.max_rows);
    const int64_t pos0 = p.cursor->pos;
    if (pos0 < 0 || pos0 + rows > p.max_seq) return FROST_ERR_OUT_OF_RANGE;
    const int d = p.head_dim;
    const int group = p.Hq / p.Hkv;
    const int64_t kv_stride = static_cast<int64_t>(p.Hkv) * d;  // floats per cached position
    parallel_for(static_cast<int64_t>(rows) * p.Hq, 1, [&](int64_t lo, int64_t hi) {
        std::vector<float> scores;
        for (int64_t it = lo; it < hi; ++it) {
            const int64_t r = it / p.Hq;
            const int h = static_cast<int>(it % p.Hq);
            const int kvh = h / group;
            const int64_t n_ctx = pos0 + r + 1;  // causal: positions [0, pos0 + r]
            const float* q = p.q + r * p.q_row_stride + h * p.q_head_stride;
            scores.resize(n_ctx);
            float mx = -INFINITY;
            for (int64_t j = 0; j < n_ctx; ++j) {
                const float* k = p.k_cache + j * kv_stride + kvh * d;
                float s = 0.0f;
                for (int c = 0; c < d; ++c) s += q[c] * k[c];
                s *= p.scale;
                scores[j] = s;
                mx = std::max(mx, s);
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < n_ctx; ++j) sum += scores[j] = std::exp(scores[j] - mx);
            const float inv = 1.0f / sum;
            float* o = p.o + (r * p.Hq + h) * d;
            std::fill(o, o + d, 0.0f);
            for (int64_t j = 0; j < n_ctx; ++j) {
                const float w = scores[j] * inv;
                const float* v = p.v_cache + j * kv_stride + kvh * d;
                for (int c = 0; c < d; ++c) o[c] += w * v[c];
            }
            if (p.gate) {
                const float* g = p.gate + r * p.q_row_stride + h * p.q_head_stride;
                for (int c = 0; c < d; ++c) o[c] *= 1.0f / (1.0f + std::exp(-g[c]));
            }
        }
    });
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
