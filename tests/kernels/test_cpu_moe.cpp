// The CPU MoE kernel against an independent float64 implementation of transformers'
// Qwen3_5MoeSparseMoeBlock / Qwen3NextSparseMoeBlock (softmax over all experts, top-k,
// renormalise or not, routed SwiGLU experts, shared expert times sigmoid gate), on fresh random
// inputs with outputs poisoned first; rows past n_rows untouched; a row's result bitwise
// independent of the other rows of the launch (chunk invariance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/moe.h"

namespace frost::kernels::cpu {
namespace {

std::mt19937& rng() {
    static std::mt19937 r(std::random_device{}());
    return r;
}
std::vector<float> randv(size_t n, float scale) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng());
    return v;
}

struct Shape {
    int H, E, k, I, Is;
    bool norm;
};

struct Case {
    Shape s;
    int rows;
    std::vector<float> x, y0, router, gu, down, sgu, sdown, sgate;
    std::vector<float> y, probs, w, work;
    std::vector<int32_t> ids;
    MoeParams params(int32_t* n_rows) {
        MoeParams p{};
        p.x = x.data(); p.y = y.data(); p.router = router.data(); p.experts_gate_up = gu.data();
        p.experts_down = down.data(); p.shared_gate_up = sgu.data(); p.shared_down = sdown.data();
        p.shared_gate = sgate.data(); p.probs = probs.data(); p.topk_ids = ids.data(); p.topk_w = w.data();
        p.work = work.data(); p.H = s.H; p.E = s.E; p.k = s.k; p.I = s.I; p.Is = s.Is; p.norm_topk = s.norm;
        p.max_rows = rows; p.n_rows = n_rows;
        return p;
    }
};

Case make_case(Shape s, int rows) {
    Case c{s, rows, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    const size_t H = size_t(s.H);
    c.x = randv(rows * H, 1.0f);
    c.y0 = randv(rows * H, 1.0f);
    c.router = randv(size_t(s.E) * H, 1.0f / std::sqrt(float(H)));
    c.gu = randv(size_t(s.E) * 2 * s.I * H, 1.0f / std::sqrt(float(H)));
    c.down = randv(size_t(s.E) * H * s.I, 1.0f / std::sqrt(float(s.I)));
    c.sgu = randv(size_t(2) * s.Is * H, 1.0f / std::sqrt(float(H)));
    c.sdown = randv(H * s.Is, 1.0f / std::sqrt(float(s.Is)));
    c.sgate = randv(H, 1.0f / std::sqrt(float(H)));
    c.y = c.y0;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    c.probs.assign(size_t(rows) * s.E, nan);
    c.w.assign(size_t(rows) * s.k, nan);
    c.ids.assign(size_t(rows) * s.k, -7);
    c.work.assign(size_t(rows) * moe_work_floats(s.H, s.I, s.Is), nan);
    return c;
}

double silu(double v) { return v / (1 + std::exp(-v)); }

// The e4m3 (OCP fn) value nearest to v, ties to the even code, beyond 448 saturating: by search
// over the 127 non-negative finite codes (independent of the kernels' rounding).
double e4m3_nearest(double v) {
    static const std::vector<double> codes = [] {
        std::vector<double> t;
        for (int c = 0; c <= 0x7E; ++c) {
            const int e = c >> 3, m = c & 7;
            t.push_back(e == 0 ? m * std::ldexp(1.0, -9) : (1 + m / 8.0) * std::ldexp(1.0, e - 7));
        }
        return t;
    }();
    const double a = std::min(std::fabs(v), 448.0);
    size_t best = 0;
    for (size_t c = 1; c < codes.size(); ++c) {
        const double d = std::fabs(codes[c] - a), db = std::fabs(codes[best] - a);
        if (d < db || (d == db && c % 2 == 0)) best = c;
    }
    return std::copysign(codes[best], v);
}

// W8A8's activation rounding of n values (n a multiple of 128), per 128-wide group: the scale
// s = max|v| / 448 in float (1 for an all-zero group), then e4m3_nearest(v / s) * s.
template <class V>
std::vector<double> quantize_groups(const V* v, int n) {
    std::vector<double> q(static_cast<size_t>(n));
    for (int g = 0; g < n; g += 128) {
        float amax = 0;
        for (int i = g; i < g + 128; ++i) amax = std::max(amax, std::fabs(float(v[i])));
        const float sc = amax > 0 ? amax / 448.0f : 1.0f;
        for (int i = g; i < g + 128; ++i) q[i] = e4m3_nearest(double(float(v[i]) / sc)) * double(sc);
    }
    return q;
}

// float64 reference of one row; also returns the reference probabilities and chosen experts.
// quant: MoeParams::quant_act (x and each expert's activations rounded per quantize_groups).
std::vector<double> reference_row(const Case& c, int r, std::vector<double>* probs, std::vector<int>* chosen,
                                  bool quant = false) {
    const Shape& s = c.s;
    const float* x = c.x.data() + size_t(r) * s.H;
    std::vector<float> xq_f;
    if (quant) {
        const std::vector<double> xq = quantize_groups(x, s.H);
        xq_f.assign(xq.begin(), xq.end());  // e4m3 x float scale: exact in float
    }
    const float* xe = quant ? xq_f.data() : x;  // the experts' input
    auto dotd = [&](const float* a, const float* b, int n) {
        double t = 0;
        for (int i = 0; i < n; ++i) t += double(a[i]) * double(b[i]);
        return t;
    };
    probs->assign(size_t(s.E), 0);
    double mx = -1e300, sum = 0;
    for (int e = 0; e < s.E; ++e) mx = std::max(mx, (*probs)[e] = dotd(x, c.router.data() + size_t(e) * s.H, s.H));
    for (auto& p : *probs) sum += (p = std::exp(p - mx));
    for (auto& p : *probs) p /= sum;
    std::vector<int> order(size_t(s.E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return (*probs)[a] > (*probs)[b]; });
    chosen->assign(order.begin(), order.begin() + s.k);
    double wsum = 0;
    for (int e : *chosen) wsum += (*probs)[e];
    std::vector<double> out(size_t(s.H), 0);
    auto ffn = [&](const float* gu, const float* down, int F, double scale) {
        std::vector<double> a(static_cast<size_t>(F));
        for (int i = 0; i < F; ++i)
            a[i] = silu(dotd(xe, gu + size_t(i) * s.H, s.H)) * dotd(xe, gu + size_t(F + i) * s.H, s.H);
        if (quant) a = quantize_groups(a.data(), F);
        for (int h = 0; h < s.H; ++h) {
            double t = 0;
            for (int i = 0; i < F; ++i) t += double(down[size_t(h) * F + i]) * a[i];
            out[h] += scale * t;
        }
    };
    for (int e : *chosen)
        ffn(c.gu.data() + size_t(e) * 2 * s.I * s.H, c.down.data() + size_t(e) * s.H * s.I, s.I,
            s.norm ? (*probs)[e] / wsum : (*probs)[e]);
    const double g = 1 / (1 + std::exp(-dotd(x, c.sgate.data(), s.H)));
    ffn(c.sgu.data(), c.sdown.data(), s.Is, g);
    for (int h = 0; h < s.H; ++h) out[h] += c.y0[size_t(r) * s.H + h];
    return out;
}

TEST(CpuMoe, MatchesFloat64ReferenceRouterAndOutput) {
    for (Shape s : {Shape{64, 8, 2, 24, 40, true}, Shape{37, 5, 1, 13, 9, false}, Shape{48, 16, 16, 8, 8, true},
                    Shape{72, 12, 4, 20, 36, false}}) {
        SCOPED_TRACE("H " + std::to_string(s.H) + " E " + std::to_string(s.E) + " k " + std::to_string(s.k));
        const int rows = 9, n = 7;  // rows 7, 8 past n_rows stay untouched
        Case c = make_case(s, rows);
        int32_t n_rows = n;
        ASSERT_EQ(moe(c.params(&n_rows)), FROST_OK);
        for (int r = 0; r < rows; ++r) {
            if (r >= n) {
                EXPECT_EQ(0, std::memcmp(c.y.data() + size_t(r) * s.H, c.y0.data() + size_t(r) * s.H,
                                         sizeof(float) * s.H)) << "row " << r << " past n_rows was written";
                EXPECT_EQ(c.ids[size_t(r) * s.k], -7);
                continue;
            }
            std::vector<double> probs;
            std::vector<int> chosen;
            const std::vector<double> ref = reference_row(c, r, &probs, &chosen);
            double err = 0, scale = 0;
            for (int h = 0; h < s.H; ++h) {
                err = std::max(err, std::abs(c.y[size_t(r) * s.H + h] - ref[h]));
                scale = std::max(scale, std::abs(ref[h]));
            }
            EXPECT_LT(err / scale, 1e-5) << "row " << r;
            double wsum = 0;
            for (int j = 0; j < s.k; ++j) {
                EXPECT_EQ(c.ids[size_t(r) * s.k + j], chosen[j]) << "row " << r << " slot " << j;
                wsum += c.w[size_t(r) * s.k + j];
                EXPECT_NEAR(c.probs[size_t(r) * s.E + chosen[j]], probs[chosen[j]], 1e-6);
            }
            if (s.norm) EXPECT_NEAR(wsum, 1.0, 1e-6);
            else EXPECT_NEAR(c.w[size_t(r) * s.k], probs[chosen[0]], 1e-6);
        }
    }
}

// quant_act (W8A8's activation side): against the float64 reference that rounds x and each
// expert's activations the same way. The kernel's activations are fp32 sums, the reference's
// exact: where one lands an e4m3 rounding (or a group's max) the other way, that row moves by
// ~1e-3, so one such row is allowed; every other row matches to 1e-5, and every row is far from
// the unquantized output (the rounding acted). H, I or Is not whole groups: refused.
TEST(CpuMoe, QuantActRoundsTheExpertsInputsToE4m3) {
    const Shape s{256, 8, 2, 128, 128, true};
    const int rows = 9, n = 7;
    Case c = make_case(s, rows);
    Case plain = c;
    int32_t n_rows = n;
    MoeParams p = c.params(&n_rows);
    p.quant_act = 1;
    ASSERT_EQ(moe(p), FROST_OK);
    ASSERT_EQ(moe(plain.params(&n_rows)), FROST_OK);
    int loose = 0;
    for (int r = 0; r < n; ++r) {
        std::vector<double> probs;
        std::vector<int> chosen;
        const std::vector<double> ref = reference_row(c, r, &probs, &chosen, true);
        double err = 0, moved = 0, scale = 0;
        for (int h = 0; h < s.H; ++h) {
            const size_t i = size_t(r) * s.H + h;
            err = std::max(err, std::abs(c.y[i] - ref[h]));
            moved = std::max(moved, std::abs(plain.y[i] - ref[h]));
            scale = std::max(scale, std::abs(ref[h] - c.y0[i]));  // the MoE output's own size
        }
        EXPECT_LT(err / scale, 1e-2) << "row " << r;
        loose += err / scale >= 1e-5;
        EXPECT_GT(moved / scale, 1e-3) << "row " << r << ": quant_act changed nothing";
    }
    EXPECT_LE(loose, 1) << "rows off the quantized reference by more than fp32 sums";
    for (int bad : {0, 1}) {
        Case b = make_case(bad ? Shape{256, 8, 2, 96, 128, true} : Shape{200, 8, 2, 128, 128, true}, 1);
        MoeParams q = b.params(nullptr);
        q.quant_act = 1;
        EXPECT_EQ(moe(q), FROST_ERR_INVALID_ARG) << "H " << q.H << " I " << q.I;
    }
}

TEST(CpuMoe, RowResultIndependentOfTheOtherRows) {
    const Shape s{40, 8, 3, 16, 24, true};
    Case all = make_case(s, 11);
    ASSERT_EQ(moe(all.params(nullptr)), FROST_OK);
    for (int r : {0, 5, 10}) {
        Case one = make_case(s, 1);
        one.router = all.router; one.gu = all.gu; one.down = all.down;
        one.sgu = all.sgu; one.sdown = all.sdown; one.sgate = all.sgate;
        std::copy_n(all.x.begin() + r * s.H, s.H, one.x.begin());
        std::copy_n(all.y0.begin() + r * s.H, s.H, one.y.begin());
        ASSERT_EQ(moe(one.params(nullptr)), FROST_OK);
        EXPECT_EQ(0, std::memcmp(one.y.data(), all.y.data() + size_t(r) * s.H, sizeof(float) * s.H)) << "row " << r;
    }
}

TEST(CpuMoe, TiesPickTheLowerExpertIdAndBadParamsAreRefused) {
    Shape s{16, 6, 2, 4, 4, true};
    Case c = make_case(s, 1);
    std::fill(c.router.begin(), c.router.end(), 0.0f);  // every logit 0: a six-way tie
    ASSERT_EQ(moe(c.params(nullptr)), FROST_OK);
    EXPECT_EQ(c.ids[0], 0);
    EXPECT_EQ(c.ids[1], 1);
    EXPECT_FLOAT_EQ(c.w[0], 0.5f);
    MoeParams p = c.params(nullptr);
    p.k = 7;  // more than E
    EXPECT_EQ(moe(p), FROST_ERR_INVALID_ARG);
    p = c.params(nullptr);
    p.work = nullptr;
    EXPECT_EQ(moe(p), FROST_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace frost::kernels::cpu
