// Gated DeltaNet time mixing: the causal depthwise conv1d with its K-1 state, and the gated delta
// rule in its sequential (decode) and chunked-64 (prefill) forms (spec §4.1, §5). fp32 state and
// solve; only exp of differences that are <= 0 is ever formed.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace frost::kernels::cpu {
namespace {

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

constexpr int kMaxConvKernel = 8;
constexpr int kMaxChunk = 64;

// Row views of the GDN inputs for value head h.
struct HeadView {
    const GdnParams& p;
    int kh;  // q/k head feeding value head h
    int h;
    const float* q(int64_t r) const { return p.q + r * p.qk_row_stride + kh * p.dk; }
    const float* k(int64_t r) const { return p.k + r * p.qk_row_stride + kh * p.dk; }
    const float* v(int64_t r) const { return p.v + r * p.qk_row_stride + h * p.dv; }
    float beta(int64_t r) const { return p.beta[r * p.Hv + h]; }
    float g(int64_t r) const { return p.g[r * p.Hv + h]; }
    float* o(int64_t r) const { return p.o + (r * p.Hv + h) * p.dv; }
};

bool valid(const GdnParams& p) {
    return p.q && p.k && p.v && p.beta && p.g && p.state && p.o && p.cursor && p.Hk > 0 &&
           p.Hv % p.Hk == 0 && p.dk > 0 && p.dv > 0;
}

void recurrent_head(const GdnParams& p, int h, int32_t rows) {
    const HeadView hv{p, h / (p.Hv / p.Hk), h};
    const int dk = p.dk, dv = p.dv;
    float* S = p.state + static_cast<int64_t>(h) * dk * dv;  // [dk, dv]
    std::vector<float> u(dv);
    for (int64_t r = 0; r < rows; ++r) {
        const float alpha = std::exp(hv.g(r));
        const float beta = hv.beta(r);
        const float* k = hv.k(r);
        const float* q = hv.q(r);
        const float* v = hv.v(r);
        for (int64_t i = 0; i < static_cast<int64_t>(dk) * dv; ++i) S[i] *= alpha;
        std::fill(u.begin(), u.end(), 0.0f);
        for (int i = 0; i < dk; ++i)
            for (int j = 0; j < dv; ++j) u[j] += S[i * dv + j] * k[i];
        for (int j = 0; j < dv; ++j) u[j] = beta * (v[j] - u[j]);  // δ
        for (int i = 0; i < dk; ++i)
            for (int j = 0; j < dv; ++j) S[i * dv + j] += k[i] * u[j];
        float* o = hv.o(r);
        std::fill(o, o + dv, 0.0f);
        for (int i = 0; i < dk; ++i)
            for (int j = 0; j < dv; ++j) o[j] += S[i * dv + j] * q[i];
    }
}

// One chunk [r0, r0+L) of value head h, state S updated in place (spec §5 steps 1-6).
struct ChunkWork {
    std::vector<float> gam, A, U, W, Vp;
    void size(int dk, int dv) {
        gam.resize(kMaxChunk);
        A.resize(kMaxChunk * kMaxChunk);
        U.resize(kMaxChunk * dv);
        W.resize(kMaxChunk * dk);
        Vp.resize(kMaxChunk * dv);
    }
};

void chunk_head(const HeadView& hv, float* S, int64_t r0, int L, ChunkWork& w) {
    const int dk = hv.p.dk, dv = hv.p.dv;
    float* gam = w.gam.data();
    float acc = 0.0f;
    for (int i = 0; i < L; ++i) gam[i] = acc += hv.g(r0 + i);
    // A_ij = β_i (k_i·k_j) exp(γ_i − γ_j), i > j.
    float* A = w.A.data();
    for (int i = 0; i < L; ++i) {
        const float* ki = hv.k(r0 + i);
        for (int j = 0; j < i; ++j) {
            const float* kj = hv.k(r0 + j);
            float d = 0.0f;
            for (int m = 0; m < dk; ++m) d += ki[m] * kj[m];
            A[i * kMaxChunk + j] = hv.beta(r0 + i) * d * std::exp(gam[i] - gam[j]);
        }
    }
    // Forward substitution with (I + A): U = T(β V), W = T(β e^γ K).
    float* U = w.U.data();
    float* W = w.W.data();
    for (int i = 0; i < L; ++i) {
        const float bi = hv.beta(r0 + i);
        const float bgi = bi * std::exp(gam[i]);
        const float* vi = hv.v(r0 + i);
        const float* ki = hv.k(r0 + i);
        float* Ui = U + i * dv;
        float* Wi = W + i * dk;
        for (int c = 0; c < dv; ++c) Ui[c] = bi * vi[c];
        for (int c = 0; c < dk; ++c) Wi[c] = bgi * ki[c];
        for (int j = 0; j < i; ++j) {
            const float a = A[i * kMaxChunk + j];
            const float* Uj = U + j * dv;
            const float* Wj = W + j * dk;
            for (int c = 0; c < dv; ++c) Ui[c] -= a * Uj[c];
            for (int c = 0; c < dk; ++c) Wi[c] -= a * Wj[c];
        }
    }
    // V' = U − W S0.
    float* Vp = w.Vp.data();
    for (int i = 0; i < L; ++i) {
        float* vp = Vp + i * dv;
        const float* Wi = W + i * dk;
        for (int c = 0; c < dv; ++c) vp[c] = 0.0f;
        for (int m = 0; m < dk; ++m) {
            const float wm = Wi[m];
            const float* Sm = S + m * dv;
            for (int c = 0; c < dv; ++c) vp[c] += wm * Sm[c];
        }
        const float* Ui = U + i * dv;
        for (int c = 0; c < dv; ++c) vp[c] = Ui[c] - vp[c];
    }
    // O_i = e^{γ_i} q_i S0 + Σ_{j≤i} (q_i·k_j) e^{γ_i−γ_j} V'_j.
    for (int i = 0; i < L; ++i) {
        const float* qi = hv.q(r0 + i);
        float* o = hv.o(r0 + i);
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        for (int m = 0; m < dk; ++m) {
            const float qm = qi[m];
            const float* Sm = S + m * dv;
            for (int c = 0; c < dv; ++c) o[c] += qm * Sm[c];
        }
        const float ei = std::exp(gam[i]);
        for (int c = 0; c < dv; ++c) o[c] *= ei;
        for (int j = 0; j <= i; ++j) {
            const float* kj = hv.k(r0 + j);
            float d = 0.0f;
            for (int m = 0; m < dk; ++m) d += qi[m] * kj[m];
            d *= std::exp(gam[i] - gam[j]);
            const float* vp = Vp + j * dv;
            for (int c = 0; c < dv; ++c) o[c] += d * vp[c];
        }
    }
    // S = e^{γ_L} S0 + Σ_j e^{γ_L−γ_j} k_j V'_jᵀ.
    const float eL = std::exp(gam[L - 1]);
    float* decay = w.gam.data();  // reuse: decay_j = exp(γ_L − γ_j), computed before overwrite
    for (int j = 0; j < L; ++j) decay[j] = std::exp(gam[L - 1] - gam[j]);
    for (int m = 0; m < dk; ++m) {
        float* Sm = S + m * dv;
        for (int c = 0; c < dv; ++c) Sm[c] *= eL;
        for (int j = 0; j < L; ++j) {
            const float kd = hv.k(r0 + j)[m] * decay[j];
            const float* vp = Vp + j * dv;
            for (int c = 0; c < dv; ++c) Sm[c] += kd * vp[c];
        }
    }
}

}  // namespace

frost_status conv1d(const Conv1dParams& p) {
    if (!p.x || !p.w || !p.state || !p.y || p.kernel < 2 || p.kernel > kMaxConvKernel)
        return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    const int K = p.kernel, H = K - 1;
    parallel_for(p.channels, 64, [&](int64_t lo, int64_t hi) {
        float win[kMaxConvKernel];
        for (int64_t c = lo; c < hi; ++c) {
            float* st = p.state + c * H;  // oldest first
            const float* w = p.w + c * K;
            for (int j = 0; j < H; ++j) win[j] = st[j];
            for (int64_t r = 0; r < rows; ++r) {
                win[H] = p.x[r * p.x_row_stride + c];
                float s = 0.0f;
                for (int j = 0; j < K; ++j) s += w[j] * win[j];
                p.y[r * p.channels + c] = silu(s);
                for (int j = 0; j < H; ++j) win[j] = win[j + 1];
            }
            for (int j = 0; j < H; ++j) st[j] = win[j];
        }
    });
    return FROST_OK;
}

frost_status gdn_recurrent(const GdnParams& p) {
    if (!valid(p)) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(&p.cursor->n_tokens, p.max_rows);
    parallel_for(p.Hv, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t h = lo; h < hi; ++h) recurrent_head(p, static_cast<int>(h), rows);
    });
    return FROST_OK;
}

frost_status gdn_chunked(const GdnParams& p) {
    if (!valid(p) || p.chunk <= 0 || p.chunk > kMaxChunk) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(&p.cursor->n_tokens, p.max_rows);
    const int64_t pos0 = p.cursor->pos;
    parallel_for(p.Hv, 1, [&](int64_t lo, int64_t hi) {
        ChunkWork w;
        w.size(p.dk, p.dv);
        for (int64_t h = lo; h < hi; ++h) {
            const HeadView hv{p, static_cast<int>(h) / (p.Hv / p.Hk), static_cast<int>(h)};
            float* S = p.state + h * p.dk * p.dv;
            // Chunks end at absolute multiples of p.chunk (capsules.md "Chunk alignment").
            int64_t r = 0;
            while (r < rows) {
                const int64_t to_boundary = p.chunk - (pos0 + r) % p.chunk;
                const int L = static_cast<int>(std::min<int64_t>(to_boundary, rows - r));
                chunk_head(hv, S, r, L, w);
                r += L;
            }
        }
    });
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
