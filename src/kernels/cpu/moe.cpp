// Sparse MoE MLP, fp32 reference (transformers Qwen3_5MoeSparseMoeBlock / Qwen3NextSparseMoeBlock:
// router softmax in fp32 over all experts, top-k, optional renormalisation, routed SwiGLU experts
// weighted and summed in ascending expert id, shared SwiGLU expert times its sigmoid gate).
// One row at a time in a fixed order: a token's output never depends on its neighbours.
#include "kernels/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace frost::kernels::cpu {
namespace {

constexpr int kLanes = 8;

// One fixed-order dot product: 8 lanes (lane l sums i = l, l+8, ...), pairwise lane reduction,
// then the tail. The lane loop vectorises; the order never depends on the caller.
float dot(const float* a, const float* b, int n) {
    float acc[kLanes] = {};
    const int nv = n - n % kLanes;
    for (int i = 0; i < nv; i += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int i = nv; i < n; ++i) s = std::fma(a[i], b[i], s);
    return s;
}

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }
inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// out[h] (+)= scale * Σ_i down[h, i] * act[i] for a SwiGLU FFN of width F whose fused [gate; up]
// weight is gu [2F, H]; act is scratch [2F]. quant: act rounded to e4m3 per 128-wide group before
// down (MoeParams::quant_act; moe() checked F % 128, so the rounding cannot fail).
void swiglu_ffn(const float* x, const float* gu, const float* down, int H, int F, float scale, bool quant, float* act,
                float* out) {
    for (int i = 0; i < 2 * F; ++i) act[i] = dot(x, gu + int64_t(i) * H, H);
    for (int i = 0; i < F; ++i) act[i] = silu(act[i]) * act[F + i];
    if (quant) (void)quantize_act_e4m3(act, 1, F, F);
    for (int h = 0; h < H; ++h) out[h] += scale * dot(act, down + int64_t(h) * F, F);
}

bool valid(const MoeParams& p) {
    return p.x && p.y && p.router && p.experts_gate_up && p.experts_down && p.shared_gate_up && p.shared_down &&
           p.shared_gate && p.probs && p.topk_ids && p.topk_w && p.work && p.H > 0 && p.E > 0 && p.k >= 1 &&
           p.k <= p.E && p.I > 0 && p.Is > 0 && p.max_rows > 0;
}

}  // namespace

void moe_route_row(const MoeParams& p, const float* x, float* probs, int32_t* ids, float* w) {
    // Logits accumulated in double then rounded: the router decides discrete expert choices, so
    // it is kept as close to the exact value as is cheap (E x H per token).
    float mx = -INFINITY;
    for (int e = 0; e < p.E; ++e) {
        const float* r = p.router + int64_t(e) * p.H;
        double s = 0;
        for (int h = 0; h < p.H; ++h) s += double(x[h]) * double(r[h]);
        probs[e] = float(s);
        mx = std::max(mx, probs[e]);
    }
    float sum = 0;
    for (int e = 0; e < p.E; ++e) {
        probs[e] = std::exp(probs[e] - mx);
        sum += probs[e];
    }
    for (int e = 0; e < p.E; ++e) probs[e] /= sum;
    // Top-k by (probability desc, id asc): k passes of a max scan (k <= E, both small).
    for (int j = 0; j < p.k; ++j) {
        int best = -1;
        for (int e = 0; e < p.E; ++e) {
            bool taken = false;
            for (int q = 0; q < j; ++q) taken |= ids[q] == e;
            if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
        }
        ids[j] = best;
        w[j] = probs[best];
    }
    if (p.norm_topk) {
        float s = 0;
        for (int j = 0; j < p.k; ++j) s += w[j];
        for (int j = 0; j < p.k; ++j) w[j] /= s;
    }
}

frost_status moe(const MoeParams& p) {
    if (!valid(p)) return FROST_ERR_INVALID_ARG;
    if (p.quant_act && (p.H % 128 || p.I % 128 || p.Is % 128)) return FROST_ERR_INVALID_ARG;  // whole groups
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    const int64_t work = moe_work_floats(p.H, p.I, p.Is);
    parallel_for(rows, 1, [&](int64_t lo, int64_t hi) {
        std::vector<int> order(size_t(p.k));
        for (int64_t r = lo; r < hi; ++r) {
            const float* x = p.x + r * p.H;
            float* probs = p.probs + r * p.E;
            int32_t* ids = p.topk_ids + r * p.k;
            float* w = p.topk_w + r * p.k;
            float* act = p.work + r * work;
            float* out = act + 2 * std::max(p.I, p.Is);
            moe_route_row(p, x, probs, ids, w);
            // The experts' input: x, or (quant_act) its e4m3 rounding in the row's scratch.
            const float* xe = x;
            if (p.quant_act) {
                float* xq = out + p.H;
                std::copy(x, x + p.H, xq);
                (void)quantize_act_e4m3(xq, 1, p.H, p.H);  // H % 128 checked above
                xe = xq;
            }
            std::fill(out, out + p.H, 0.0f);
            // Routed experts in ascending id (transformers walks the hit experts in that order).
            std::iota(order.begin(), order.end(), 0);
            std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
            const int64_t gu_stride = int64_t(2) * p.I * p.H, down_stride = int64_t(p.H) * p.I;
            const bool q = p.quant_act != 0;
            for (int j : order)
                swiglu_ffn(xe, p.experts_gate_up + ids[j] * gu_stride, p.experts_down + ids[j] * down_stride, p.H,
                           p.I, w[j], q, act, out);
            // Shared expert times its sigmoid gate, added after the routed sum (as the reference).
            const float g = sigmoid(dot(x, p.shared_gate, p.H));
            swiglu_ffn(xe, p.shared_gate_up, p.shared_down, p.H, p.Is, g, q, act, out);
            float* y = p.y + r * p.H;
            for (int h = 0; h < p.H; ++h) y[h] += out[h];
        }
    });
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
