// CPU reference kernels against independent naive float64 code on fresh random inputs (outputs
// poisoned with NaN first), plus the chunk-invariance promises: GEMM rows and the chunked gated
// delta rule give bitwise-identical per-token results whatever the launch size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "util/fp8.h"

namespace frost::kernels::cpu {
namespace {

std::mt19937& rng() {
    static std::mt19937 r(std::random_device{}());
    return r;
}
std::vector<float> randv(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng());
    return v;
}
std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }
double max_rel(const std::vector<float>& a, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(a[i] - ref[i]));
        den = std::max(den, std::abs(ref[i]));
    }
    return num / (den > 0 ? den : 1);
}

TEST(Gemm, MatchesFloat64AndIsRowInvariant) {
    const int M = 37, K = 203, N = 67;  // odd sizes hit every tile edge and the k tail
    auto x = randv(size_t(M) * K), w = randv(size_t(N) * K);
    auto y = poisoned(size_t(M) * N);
    GemmParams p{};
    p.x = x.data(); p.w = w.data(); p.y = y.data(); p.ldx = K; p.ldy = N; p.K = K; p.N = N; p.max_rows = M;
    ASSERT_EQ(gemm(p), FROST_OK);
    std::vector<double> ref(size_t(M) * N);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double s = 0;
            for (int k = 0; k < K; ++k) s += double(x[m * K + k]) * w[n * K + k];
            ref[m * N + n] = s;
        }
    EXPECT_LT(max_rel(y, ref), 1e-5);
    // Each row alone, and with an n_rows cursor, gives the same bits.
    for (int m : {0, 5, M - 1}) {
        auto y1 = poisoned(N);
        GemmParams q = p;
        q.x = x.data() + size_t(m) * K; q.y = y1.data(); q.max_rows = 1;
        ASSERT_EQ(gemm(q), FROST_OK);
        for (int n = 0; n < N; ++n) ASSERT_EQ(y1[n], y[m * N + n]) << "row " << m << " col " << n;
    }
    // Accumulate adds onto y.
    std::vector<float> acc(y);
    p.y = acc.data(); p.accumulate = 1;
    ASSERT_EQ(gemm(p), FROST_OK);
    for (size_t i = 0; i < acc.size(); ++i) ASSERT_FLOAT_EQ(acc[i], 2 * y[i]);
}

// e4m3 (OCP fn) decoded from its bits by the format's definition, independently of the kernels.
double e4m3_value(int code) {
    const int sign = code >> 7, exp = (code >> 3) & 0xF, man = code & 7;
    const double mag = exp == 0 ? std::ldexp(man / 8.0, -6) : std::ldexp(1.0 + man / 8.0, exp - 7);
    return sign ? -mag : mag;
}

TEST(E4m3Rounding, NearestCodeTiesToEvenSaturating) {
    std::vector<std::pair<double, int>> codes;  // finite values with their codes (no NaN 0x7f / 0xff)
    for (int c = 0; c < 256; ++c)
        if ((c & 0x7F) != 0x7F) codes.push_back({e4m3_value(c), c});
    for (const auto& [v, c] : codes) ASSERT_EQ(round_e4m3_satfinite(float(v)), float(v)) << "code " << c;
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-12, 10);
    for (int i = 0; i < 20000; ++i) {
        const float v = std::ldexp(mant(rng), ex(rng));
        double best = 0, best_d = 1e300;
        int best_c = 0;
        for (const auto& [cv, c] : codes) {
            const double d = std::abs(cv - double(v));
            // ties: the code with an even mantissa (its low bit clear)
            if (d < best_d || (d == best_d && (c & 1) == 0)) { best = cv; best_d = d; best_c = c; }
        }
        if (std::abs(v) >= 448.0f) best = v > 0 ? 448.0 : -448.0;
        ASSERT_EQ(round_e4m3_satfinite(v), float(best)) << v << " (nearest code " << best_c << ")";
    }
    EXPECT_EQ(round_e4m3_satfinite(1e6f), 448.0f);
    EXPECT_EQ(round_e4m3_satfinite(-500.0f), -448.0f);
    EXPECT_EQ(round_e4m3_satfinite(456.0f), 448.0f);  // the tie between 448 and 464 (not a code)
}

TEST(E4m3Rounding, ActivationGroupsScaleToTheirMaximum) {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const int rows = 3, K = 384, ld = 400;
    std::vector<float> x(size_t(rows) * ld, 7.0f);
    for (int r = 0; r < rows; ++r)
        for (int k = 0; k < K; ++k) x[size_t(r) * ld + k] = nd(rng);
    for (int k = 128; k < 256; ++k) x[size_t(1) * ld + k] = 0.0f;  // an all-zero group stays zero
    const auto orig = x;
    ASSERT_EQ(quantize_act_e4m3(x.data(), rows, K, ld), FROST_OK);
    for (int r = 0; r < rows; ++r)
        for (int g = 0; g < K; g += 128) {
            float amax = 0;
            for (int i = 0; i < 128; ++i) amax = std::max(amax, std::abs(orig[size_t(r) * ld + g + i]));
            const float s = amax > 0 ? amax / 448.0f : 1.0f;
            for (int i = 0; i < 128; ++i) {
                const size_t at = size_t(r) * ld + g + i;
                ASSERT_EQ(x[at], round_e4m3_satfinite(orig[at] / s) * s) << r << " " << g + i;
                ASSERT_LE(std::abs(x[at] - orig[at]), amax / 16 + 1e-6f);  // half a step of 3 mantissa bits
            }
        }
    for (int r = 0; r < rows; ++r)  // the padding beyond K is untouched
        for (int k = K; k < ld; ++k) ASSERT_EQ(x[size_t(r) * ld + k], 7.0f);
    EXPECT_NE(quantize_act_e4m3(x.data(), rows, 100, ld), FROST_OK);  // K not a multiple of 128
}

TEST(E4m3Rounding, BitsRoundTripEveryCode) {
    for (int b = 0; b < 256; ++b) {
        const float v = util::e4m3_to_f32(uint8_t(b));
        if ((b & 0x7f) == 0x7f) {  // the two NaN codes
            EXPECT_TRUE(std::isnan(v)) << b;
            continue;
        }
        if (b == 0x80) {  // -0 keeps its sign bit
            EXPECT_EQ(util::f32_to_e4m3(v), 0x80);
            continue;
        }
        ASSERT_EQ(round_e4m3_satfinite(v), v) << b << " is an e4m3 value";
        ASSERT_EQ(util::f32_to_e4m3(v), uint8_t(b)) << v;
    }
    EXPECT_EQ(util::e4m3_to_f32(0x7e), 448.0f);
    EXPECT_EQ(util::e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

// The byte form (the FP8 twin ops write for the GEMM) decodes to exactly the in-place values.
TEST(E4m3Rounding, ActivationBytesDecodeToTheInPlaceQuantization) {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const int rows = 5, K = 384, ld = 400, scale_ld = 8;
    std::vector<float> x(size_t(rows) * ld);
    for (auto& v : x) v = nd(rng);
    for (int k = 0; k < 128; ++k) x[size_t(3) * ld + 256 + k] = 0.0f;  // an all-zero group
    x[7] = 1e5f;  // saturates nothing: it sets its group's scale
    std::vector<uint8_t> q(size_t(rows) * K, 0xAA);
    std::vector<float> s(size_t(scale_ld) * (K / 128), -1.0f);
    ASSERT_EQ(quantize_act_e4m3_bytes(x.data(), rows, K, ld, q.data(), s.data(), scale_ld), FROST_OK);
    auto inplace = x;
    ASSERT_EQ(quantize_act_e4m3(inplace.data(), rows, K, ld), FROST_OK);
    for (int r = 0; r < rows; ++r)
        for (int k = 0; k < K; ++k)
            ASSERT_EQ(util::e4m3_to_f32(q[size_t(r) * K + k]) * s[size_t(k / 128) * scale_ld + r], inplace[size_t(r) * ld + k])
                << r << " " << k;
    EXPECT_EQ(s[size_t(2) * scale_ld + 3], 1.0f);               // the zero group's scale
    EXPECT_EQ(s[size_t(0) * scale_ld + 0], 1e5f / 448.0f);      // the outlier's
    EXPECT_EQ(s[size_t(0) * scale_ld + rows], -1.0f);           // scale padding rows untouched
    EXPECT_NE(quantize_act_e4m3_bytes(x.data(), rows, K, ld, q.data(), s.data(), rows - 1), FROST_OK);
}

// T33: a part that throws (std::bad_alloc from a kernel's scratch when the heap refuses) used to
// end its worker thread, and with it the process. The exception now comes out of parallel_for
// on the caller's thread, after every other part ran, and the pool keeps working.
TEST(ThreadPool, AnExceptionInAnyPartReachesTheCallerAndThePoolGoesOn) {
    const int saved = threads();
    set_threads(4);
    for (int64_t bad : {int64_t(0), int64_t(37), int64_t(99)}) {  // the caller's part, a worker's, the last
        std::vector<int> seen(100, 0);
        bool threw = false;
        try {
            parallel_for(100, 1, [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i) {
                    if (i == bad) throw std::bad_alloc();
                    seen[size_t(i)] = 1;
                }
            });
        } catch (const std::bad_alloc&) {
            threw = true;
        }
        EXPECT_TRUE(threw) << bad;
        // The other parts ran to their ends: nothing of theirs is still running after the throw.
        int done = 0;
        for (int v : seen) done += v;
        EXPECT_GE(done, 100 - 25) << bad;
        // The pool serves the next call whole.
        std::vector<int> again(1000, 0);
        parallel_for(1000, 1, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) again[size_t(i)] = 1;
        });
        for (int v : again) ASSERT_EQ(v, 1);
    }
    set_threads(saved);
}

TEST(ThreadPool, ResultsDoNotDependOnTheThreadCount) {
    const int M = 9, K = 64, N = 50;
    auto x = randv(size_t(M) * K), w = randv(size_t(N) * K);
    const int saved = threads();
    std::vector<std::vector<float>> ys;
    for (int t : {1, 3, 2}) {
        set_threads(t);
        ys.push_back(poisoned(size_t(M) * N));
        GemmParams p{};
        p.x = x.data(); p.w = w.data(); p.y = ys.back().data(); p.ldx = K; p.ldy = N; p.K = K; p.N = N;
        p.max_rows = M;
        ASSERT_EQ(gemm(p), FROST_OK);
    }
    set_threads(saved);
    EXPECT_EQ(0, std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(ys[0].data(), ys[2].data(), ys[0].size() * sizeof(float)));
}

// Naive float64 sequential gated delta rule (spec §4.1 step 7) for one launch.
void gdn_ref(int T, int Hk, int Hv, int dk, int dv, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, const std::vector<float>& beta, const std::vector<float>& g,
             std::vector<double>& S, std::vector<double>& o) {
    const int r = Hv / Hk;
    o.assign(size_t(T) * Hv * dv, 0.0);
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < Hv; ++h) {
            const float* qt = &q[(size_t(t) * Hk + h / r) * dk];
            const float* kt = &k[(size_t(t) * Hk + h / r) * dk];
            const float* vt = &v[(size_t(t) * Hv + h) * dv];
            double* s = &S[size_t(h) * dk * dv];
            const double a = std::exp(double(g[t * Hv + h])), b = beta[t * Hv + h];
            for (int i = 0; i < dk * dv; ++i) s[i] *= a;
            for (int j = 0; j < dv; ++j) {
                double u = 0;
                for (int i = 0; i < dk; ++i) u += s[i * dv + j] * kt[i];
                const double d = b * (vt[j] - u);
                for (int i = 0; i < dk; ++i) s[i * dv + j] += kt[i] * d;
            }
            for (int j = 0; j < dv; ++j) {
                double acc = 0;
                for (int i = 0; i < dk; ++i) acc += s[i * dv + j] * qt[i];
                o[(size_t(t) * Hv + h) * dv + j] = acc;
            }
        }
}

struct GdnCase {
    int T, Hk, Hv, dk, dv;
    std::vector<float> q, k, v, beta, g;
    GdnCase(int T_, int Hk_, int Hv_, int dk_, int dv_) : T(T_), Hk(Hk_), Hv(Hv_), dk(dk_), dv(dv_) {
        q = randv(size_t(T) * Hk * dk); k = randv(size_t(T) * Hk * dk); v = randv(size_t(T) * Hv * dv);
        for (auto* x : {&q, &k})  // l2-normalised rows as the engine feeds them; q also scaled
            for (int i = 0; i < T * Hk; ++i) {
                double s = 0;
                for (int c = 0; c < dk; ++c) s += double((*x)[i * dk + c]) * (*x)[i * dk + c];
                const float f = float(1 / std::sqrt(s)) * (x == &q ? 1.0f / std::sqrt(float(dk)) : 1.0f);
                for (int c = 0; c < dk; ++c) (*x)[i * dk + c] *= f;
            }
        std::uniform_real_distribution<float> ub(0.05f, 0.95f), ug(-3.0f, -0.001f);
        beta.resize(size_t(T) * Hv); g.resize(size_t(T) * Hv);
        for (auto& x : beta) x = ub(rng());
        for (auto& x : g) x = ug(rng());
    }
    GdnParams params(float* state, float* o, StepCursor* cur) const {
        GdnParams p{};
        p.q = q.data(); p.k = k.data(); p.v = v.data(); p.beta = beta.data(); p.g = g.data();
        p.state = state; p.o = o; p.qk_row_stride = Hk * dk; p.Hk = Hk; p.Hv = Hv; p.dk = dk; p.dv = dv;
        p.chunk = 64; p.max_rows = T; p.cursor = cur;
        return p;
    }
};

TEST(GatedDeltaRule, ChunkedAndSequentialAgreeAtRealisticDims) {
    // dk = dv = 128 as in every released model; 150 tokens = two full chunks and a partial one.
    const int T = 150, Hk = 1, Hv = 2, dk = 128, dv = 128;
    GdnCase c(T, Hk, Hv, dk, dv);
    // The kernel reads q, k and v with one row stride; lay them out as the engine does ([q|k|v]).
    const int stride = 2 * Hk * dk + Hv * dv;
    std::vector<float> rows(size_t(T) * stride);
    for (int t = 0; t < T; ++t) {
        std::copy_n(&c.q[size_t(t) * Hk * dk], Hk * dk, &rows[size_t(t) * stride]);
        std::copy_n(&c.k[size_t(t) * Hk * dk], Hk * dk, &rows[size_t(t) * stride + Hk * dk]);
        std::copy_n(&c.v[size_t(t) * Hv * dv], Hv * dv, &rows[size_t(t) * stride + 2 * Hk * dk]);
    }
    auto run = [&](bool chunked, std::vector<float>& state, std::vector<float>& o) {
        StepCursor cur{};
        cur.n_tokens = T;
        GdnParams p = c.params(state.data(), o.data(), &cur);
        p.q = rows.data(); p.k = rows.data() + Hk * dk; p.v = rows.data() + 2 * Hk * dk; p.qk_row_stride = stride;
        return chunked ? gdn_chunked(p) : gdn_recurrent(p);
    };
    std::vector<float> s_chunk(size_t(Hv) * dk * dv, 0.0f), s_seq(s_chunk);
    auto o_chunk = poisoned(size_t(T) * Hv * dv), o_seq = poisoned(size_t(T) * Hv * dv);
    ASSERT_EQ(run(true, s_chunk, o_chunk), FROST_OK);
    ASSERT_EQ(run(false, s_seq, o_seq), FROST_OK);
    std::vector<double> S(size_t(Hv) * dk * dv, 0.0), o_ref;
    gdn_ref(T, Hk, Hv, dk, dv, c.q, c.k, c.v, c.beta, c.g, S, o_ref);
    EXPECT_LT(max_rel(o_chunk, o_ref), 1e-4);
    EXPECT_LT(max_rel(o_seq, o_ref), 1e-4);
    EXPECT_LT(max_rel(s_chunk, S), 1e-4);
    EXPECT_LT(max_rel(s_seq, S), 1e-4);
}

TEST(GatedDeltaRule, ChunkedIsLaunchInvariantOnTheAbsoluteGrid) {
    // 128 tokens in one launch == 64 + 64 in two launches (boundaries on the 64 grid), bitwise.
    // q, k and v share one row stride in GdnParams, so pick Hv*dv == Hk*dk.
    const int T = 128, Hk = 2, Hv = 4, dk = 32;
    const int dv2 = Hk * dk / Hv;
    GdnCase c2(T, Hk, Hv, dk, dv2);
    auto run2 = [&](std::vector<int> splits, std::vector<float>& state, std::vector<float>& o) {
        StepCursor cur{};
        int done = 0;
        for (int n : splits) {
            cur.pos = done;
            cur.n_tokens = n;
            GdnParams p = c2.params(state.data(), o.data() + size_t(done) * Hv * dv2, &cur);
            p.q = c2.q.data() + size_t(done) * Hk * dk; p.k = c2.k.data() + size_t(done) * Hk * dk;
            p.v = c2.v.data() + size_t(done) * Hv * dv2; p.beta = c2.beta.data() + size_t(done) * Hv;
            p.g = c2.g.data() + size_t(done) * Hv;
            if (gdn_chunked(p) != FROST_OK) return false;
            done += n;
        }
        return true;
    };
    std::vector<float> s1(size_t(Hv) * dk * dv2, 0.0f), s2(s1), s3(s1);
    auto o1 = poisoned(size_t(T) * Hv * dv2), o2 = o1, o3 = o1;
    ASSERT_TRUE(run2({128}, s1, o1));
    ASSERT_TRUE(run2({64, 64}, s2, o2));
    ASSERT_TRUE(run2({64, 30, 34}, s3, o3));  // a split inside a chunk is NOT on the grid
    for (size_t i = 0; i < s1.size(); ++i) ASSERT_EQ(s1[i], s2[i]) << "state " << i;
    for (size_t i = 0; i < o1.size(); ++i) ASSERT_EQ(o1[i], o2[i]) << "output " << i;
    // Off-grid splits are still correct (just not bitwise): compare with the float64 reference.
    std::vector<double> S(size_t(Hv) * dk * dv2, 0.0), o_ref;
    gdn_ref(T, Hk, Hv, dk, dv2, c2.q, c2.k, c2.v, c2.beta, c2.g, S, o_ref);
    EXPECT_LT(max_rel(o3, o_ref), 1e-4);
    EXPECT_LT(max_rel(s3, S), 1e-4);
}

TEST(Attention, MatchesFloat64WithGateAndIsRowInvariant) {
    const int Hq = 4, Hkv = 2, d = 32, P0 = 5, T = 7, max_seq = 16;
    auto q = randv(size_t(T) * Hq * d), gate = randv(size_t(T) * Hq * d);
    auto kc = randv(size_t(max_seq) * Hkv * d), vc = randv(size_t(max_seq) * Hkv * d);
    auto o = poisoned(size_t(T) * Hq * d);
    StepCursor cur{};
    cur.pos = P0;
    cur.n_tokens = T;
    AttentionParams p{};
    p.q = q.data(); p.gate = gate.data(); p.k_cache = kc.data(); p.v_cache = vc.data(); p.o = o.data();
    p.q_row_stride = Hq * d; p.q_head_stride = d; p.Hq = Hq; p.Hkv = Hkv; p.head_dim = d;
    p.scale = 1.0f / std::sqrt(float(d)); p.max_seq = max_seq; p.max_rows = T; p.cursor = &cur;
    ASSERT_EQ(attention(p), FROST_OK);
    std::vector<double> ref(o.size());
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < Hq; ++h) {
            const int kvh = h / (Hq / Hkv), n = P0 + t + 1;
            std::vector<double> s(n);
            double mx = -1e300, sum = 0;
            for (int j = 0; j < n; ++j) {
                double a = 0;
                for (int c = 0; c < d; ++c) a += double(q[(t * Hq + h) * d + c]) * kc[(j * Hkv + kvh) * d + c];
                s[j] = a / std::sqrt(double(d));
                mx = std::max(mx, s[j]);
            }
            for (auto& x : s) sum += x = std::exp(x - mx);
            for (int c = 0; c < d; ++c) {
                double a = 0;
                for (int j = 0; j < n; ++j) a += s[j] / sum * vc[(j * Hkv + kvh) * d + c];
                const double gt = gate[(t * Hq + h) * d + c];
                ref[(t * Hq + h) * d + c] = a / (1 + std::exp(-gt));
            }
        }
    EXPECT_LT(max_rel(o, ref), 1e-5);
    // The last row alone (pos = P0 + T - 1, one token) gives the same bits.
    auto o1 = poisoned(size_t(Hq) * d);
    StepCursor c1{};
    c1.pos = P0 + T - 1;
    c1.n_tokens = 1;
    AttentionParams p1 = p;
    p1.q = q.data() + size_t(T - 1) * Hq * d; p1.gate = gate.data() + size_t(T - 1) * Hq * d;
    p1.o = o1.data(); p1.max_rows = 1; p1.cursor = &c1;
    ASSERT_EQ(attention(p1), FROST_OK);
    for (int i = 0; i < Hq * d; ++i) ASSERT_EQ(o1[i], o[size_t(T - 1) * Hq * d + i]);
}

TEST(Norms, RmsNormZeroCentredAndGatedMatchFloat64) {
    const int R = 3, D = 64;
    auto x = randv(size_t(R) * D), w = randv(D, 0.1f), z = randv(size_t(R) * D);
    auto y = poisoned(x.size()), yg = poisoned(x.size());
    RmsNormParams p{};
    p.x = x.data(); p.w = w.data(); p.y = y.data(); p.x_row_stride = p.y_row_stride = D; p.dim = D;
    p.heads = 1; p.zero_centred = 1; p.eps = 1e-6f; p.max_rows = R;
    ASSERT_EQ(rmsnorm(p), FROST_OK);
    GatedRmsNormParams g{};
    g.x = x.data(); g.z = z.data(); g.w = w.data(); g.y = yg.data(); g.z_row_stride = D; g.dim = D;
    g.heads = 1; g.eps = 1e-6f; g.max_rows = R;
    ASSERT_EQ(gated_rmsnorm(g), FROST_OK);
    std::vector<double> ref(x.size()), refg(x.size());
    for (int r = 0; r < R; ++r) {
        double ss = 0;
        for (int i = 0; i < D; ++i) ss += double(x[r * D + i]) * x[r * D + i];
        const double inv = 1 / std::sqrt(ss / D + 1e-6);
        for (int i = 0; i < D; ++i) {
            ref[r * D + i] = x[r * D + i] * inv * (1.0 + w[i]);
            const double zz = z[r * D + i];
            refg[r * D + i] = w[i] * x[r * D + i] * inv * zz / (1 + std::exp(-zz));
        }
    }
    EXPECT_LT(max_rel(y, ref), 1e-6);
    EXPECT_LT(max_rel(yg, refg), 1e-6);
}

TEST(Conv1d, CausalWithStateMatchesFloat64) {
    const int C = 24, K = 4, T = 9;
    auto x = randv(size_t(T) * C), w = randv(size_t(C) * K), st0 = randv(size_t(C) * (K - 1));
    std::vector<float> st(st0);
    auto y = poisoned(size_t(T) * C);
    Conv1dParams p{};
    p.x = x.data(); p.w = w.data(); p.state = st.data(); p.y = y.data(); p.x_row_stride = C;
    p.channels = C; p.kernel = K; p.max_rows = T;
    ASSERT_EQ(conv1d(p), FROST_OK);
    std::vector<double> ref(y.size());
    for (int c = 0; c < C; ++c)
        for (int t = 0; t < T; ++t) {
            double s = 0;
            for (int j = 0; j < K; ++j) {
                const int src = t - (K - 1) + j;  // < 0 reads the state
                const double xv = src >= 0 ? x[src * C + c] : st0[c * (K - 1) + (K - 1) + src];
                s += w[c * K + j] * xv;
            }
            ref[t * C + c] = s / (1 + std::exp(-s));
        }
    EXPECT_LT(max_rel(y, ref), 1e-5);
    for (int c = 0; c < C; ++c)
        for (int j = 0; j < K - 1; ++j) EXPECT_EQ(st[c * (K - 1) + j], x[(T - (K - 1) + j) * C + c]);
}

TEST(Sample, SeededDrawsAreReproducibleAndAdvanceTheCursor) {
    const int V = 1000;
    auto logits = randv(V, 2.0f);
    std::vector<float> work(2 * V);
    std::vector<int32_t> idx(V);
    auto draw = [&](StepCursor& c) {
        int32_t tok = -1;
        SampleParams p{};
        p.logits = logits.data(); p.vocab = V; p.work = work.data(); p.work_idx = idx.data();
        p.cursor = &c; p.out_token = &tok;
        EXPECT_EQ(sample(p), FROST_OK);
        return tok;
    };
    StepCursor a{}, b{};
    for (auto* c : {&a, &b}) {
        c->sample_mode = kSampleRandom; c->temperature = 0.9f; c->top_k = 40; c->top_p = 0.9f; c->rng_seed = 1234;
    }
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < 20; ++i) ta.push_back(draw(a));
    for (int i = 0; i < 20; ++i) tb.push_back(draw(b));
    EXPECT_EQ(ta, tb);
    EXPECT_EQ(a.rng_counter, 20u);
    EXPECT_EQ(a.last_token, ta.back());
    // Every draw is inside the top-40 set.
    std::vector<int32_t> order(V);
    for (int i = 0; i < V; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int x, int y) { return logits[x] > logits[y]; });
    std::vector<int32_t> top(order.begin(), order.begin() + 40);
    for (int32_t t : ta) EXPECT_NE(std::find(top.begin(), top.end(), t), top.end());
    StepCursor g{};
    EXPECT_EQ(draw(g), order[0]);  // greedy = argmax
    EXPECT_EQ(g.rng_counter, 0u);
}

}  // namespace
}  // namespace frost::kernels::cpu
