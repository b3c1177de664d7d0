// The GDN decode step in one launch (lm_gdn_decode_fused.cu) against the three launches it
// replaces (conv1d + SiLU + l2norm, the gated recurrence, the gated RMSNorm), bit for bit: conv
// output, o, the normed output, the conv state and the recurrent state, over two consecutive steps
// (the second reads the states the first wrote), with and without PDL, solo and batched (a padding
// member, members out of session order), at the head counts of 0.8B (16 / 16), 9B and 35B-A3B
// (16 / 32), 27B (16 / 48) and a 4:1 grouping. With the gate projections folded in
// (GdnDecodeBf16Params::gates, a quantized checkpoint's bf16 [b; a] rows): the reference is
// gdn_gate_dot_launch before the three launches, b and a as stored included, and b and a are also
// checked against an fp64 dot (each path has its own in_proj buffer, b | a poisoned first).
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGdnDecodeFused, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

constexpr int kD = 128, kTaps = 4;
constexpr float kEps = 1e-6f;

// One path's buffers: outputs and per-session states (identical initial states on both paths).
struct Path {
    Dev<uint16_t> proj, conv_y, o, y;
    std::vector<std::unique_ptr<Dev<uint16_t>>> conv_state;
    std::vector<std::unique_ptr<Dev<float>>> rec_state;
    std::unique_ptr<Dev<void*>> table;  // [sessions, 2]: conv | recurrent column
    Path(int rows, int W, int C, int V, const std::vector<std::vector<uint16_t>>& cs,
         const std::vector<std::vector<float>>& rs)
        : proj(size_t(rows) * W), conv_y(size_t(rows) * C), o(size_t(rows) * V), y(size_t(rows) * V) {
        std::vector<void*> t;
        for (size_t s = 0; s < cs.size(); ++s) {
            conv_state.push_back(std::make_unique<Dev<uint16_t>>(cs[s]));
            rec_state.push_back(std::make_unique<Dev<float>>(rs[s]));
            t.push_back(conv_state.back()->get());
            t.push_back(rec_state.back()->get());
        }
        table = std::make_unique<Dev<void*>>(t);
    }
};

// B = 0: a solo step (one row, its cursor's n_tokens counts it); else B batched members.
// gate_k > 0: the gate projections folded in, from a hidden state of gate_k columns.
void check(int Hk, int Hv, int B, const char* name, int gate_k = 0) {
    SCOPED_TRACE(name);
    auto rng = fresh_rng(name);
    const int Q = Hk * kD, V = Hv * kD, C = 2 * Q + V;
    const int W = (C + V + 2 * Hv + 7) / 8 * 8;  // in_proj row: qkv | z | b | a | padding
    const bool batched = B > 0;
    const int rows = batched ? B : 1, sessions = batched ? B + 1 : 1;
    // Members out of session order, one padding row (when B >= 2).
    std::vector<int32_t> slots;
    for (int r = 0; r < B; ++r) slots.push_back(r == 1 ? -1 : (r == 0 ? sessions - 1 : r - 1));
    std::vector<std::vector<uint16_t>> cs;
    std::vector<std::vector<float>> rs;
    for (int s = 0; s < sessions; ++s) {
        cs.push_back(to_bf(uniform(rng, size_t(C) * (kTaps - 1), -2, 2)));
        rs.push_back(uniform(rng, size_t(Hv) * kD * kD, -0.2f, 0.2f, false));
    }
    Dev<float> conv_w(uniform(rng, size_t(C) * kTaps, -0.6f, 0.6f, false));
    Dev<float> A_log(uniform(rng, Hv, -1, 1, false)), dt_bias(uniform(rng, Hv, -1, 1, false));
    Dev<float> norm_w(uniform(rng, kD, 0.5f, 1.5f, false));
    std::vector<kernels::StepCursor> cur(std::max(rows, 1));
    for (auto& c : cur) c = kernels::StepCursor{};
    for (int r = 0; r < rows; ++r) cur[r].pos = 40 + r, cur[r].n_tokens = 1;
    Dev<kernels::StepCursor> cursors(cur);
    Dev<int32_t> dslots(batched ? slots : std::vector<int32_t>{0});
    Path ref(rows, W, C, V, cs, rs), fused(rows, W, C, V, cs, rs);
    // The folded gates' input: the normed hidden state (a padded row stride) and the [b; a] rows.
    const int XS = gate_k + 8;
    const auto gate_w = uniform(rng, size_t(2) * Hv * std::max(gate_k, 1), -0.05f, 0.05f);
    Dev<uint16_t> xn(size_t(rows) * XS), gw(to_bf(gate_w));

    auto params = [&](Path& P, int pdl) {
        kernels::GdnDecodeBf16Params p{};
        const int32_t* n = batched ? nullptr : &cursors.get()->n_tokens;
        kernels::bf16* x = bf(P.proj);
        p.conv = kernels::Conv1dBf16Params{x, conv_w.get(), bf(*P.conv_state[0]), bf(P.conv_y), W, C, kTaps, kD,
                                           2 * Hk, Hk, kEps, 1.0f / std::sqrt(float(kD)), rows, n};
        p.conv.pdl = pdl;
        const kernels::bf16* y = bf(P.conv_y);
        p.gdn = kernels::GdnBf16Params{y, y + Q, y + 2 * Q, nullptr, nullptr, P.rec_state[0]->get(), bf(P.o), nullptr,
                                       C, Hk, Hv, kD, kD, 64, rows, cursors.get()};
        p.gdn.gate_b = x + C + V;
        p.gdn.gate_a = x + C + V + Hv;
        p.gdn.A_log = A_log.get();
        p.gdn.dt_bias = dt_bias.get();
        p.gdn.gate_row_stride = W;
        p.gdn.pdl = pdl;
        p.norm = kernels::GatedRmsNormBf16Params{bf(P.o), x + C, norm_w.get(), bf(P.y), W, kD, Hv, kEps, rows, n};
        p.norm.pdl = pdl;
        p.pdl = pdl;
        if (gate_k > 0)
            p.gates = kernels::GdnGateDotParams{bf(gw), bf(xn), x + C + V, XS, W, gate_k, Hv, rows};
        if (batched) {
            kernels::BatchRef b{P.table->get(), dslots.get(), cursors.get(), 2, 0, sessions, B};
            p.conv.batch = b;
            b.column = 1;
            p.gdn.batch = b;
        }
        return p;
    };

    for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        auto x = uniform(rng, size_t(rows) * W, -2, 2);
        const auto xh = uniform(rng, size_t(rows) * XS, -2, 2);
        if (gate_k > 0) {  // b | a are the launch's output: poisoned
            for (int r = 0; r < rows; ++r)
                for (int i = 0; i < 2 * Hv; ++i) x[size_t(r) * W + C + V + i] = std::nanf("");
            xn.upload(to_bf(xh));
        }
        ref.proj.upload(to_bf(x));
        fused.proj.upload(to_bf(x));
        const kernels::GdnDecodeBf16Params pr = params(ref, step), pf = params(fused, step);
        ASSERT_TRUE(kernels::gdn_decode_fused_applies(pf));
        if (gate_k > 0) CUDA_OK(kernels::gdn_gate_dot_launch(pr.gates, step, nullptr));
        CUDA_OK(kernels::conv1d_launch(pr.conv, nullptr));
        CUDA_OK(kernels::gdn_recurrent_launch(pr.gdn, nullptr));
        CUDA_OK(kernels::gated_rmsnorm_launch(pr.norm, nullptr));
        CUDA_OK(kernels::gdn_decode_fused_launch(pf, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        // Outputs of the live rows (a padding row's are discarded by the forward).
        const auto cy_r = ref.conv_y.download(), cy_f = fused.conv_y.download();
        const auto o_r = ref.o.download(), o_f = fused.o.download();
        const auto y_r = ref.y.download(), y_f = fused.y.download();
        for (int r = 0; r < rows; ++r) {
            if (batched && slots[r] < 0) continue;
            auto rowv = [](const std::vector<uint16_t>& v, int row, int n) {
                return std::vector<uint16_t>(v.begin() + size_t(row) * n, v.begin() + size_t(row + 1) * n);
            };
            EXPECT_EQ(rowv(cy_r, r, C), rowv(cy_f, r, C)) << "conv output, row " << r;
            EXPECT_EQ(rowv(o_r, r, V), rowv(o_f, r, V)) << "o, row " << r;
            EXPECT_EQ(rowv(y_r, r, V), rowv(y_f, r, V)) << "gated norm output, row " << r;
            bool finite = true;
            for (float f : from_bf(rowv(y_f, r, V))) finite = finite && std::isfinite(f);
            EXPECT_TRUE(finite) << "row " << r << " left unwritten";
        }
        if (gate_k > 0) {  // b | a: the same bits on both paths, near the fp64 dot of the bf16 inputs
            const auto pj_r = ref.proj.download(), pj_f = fused.proj.download();
            const auto wq = from_bf(to_bf(gate_w)), xq = from_bf(to_bf(xh));
            for (int r = 0; r < rows; ++r) {
                if (batched && slots[r] < 0) continue;
                for (int i = 0; i < 2 * Hv; ++i) {
                    const size_t at = size_t(r) * W + C + V + i;
                    EXPECT_EQ(pj_r[at], pj_f[at]) << "gate " << i << ", row " << r;
                    double dot = 0, mag = 0;
                    for (int k = 0; k < gate_k; ++k) {
                        dot += double(wq[size_t(i) * gate_k + k]) * xq[size_t(r) * XS + k];
                        mag += std::fabs(double(wq[size_t(i) * gate_k + k]) * xq[size_t(r) * XS + k]);
                    }
                    const float got = from_bf(std::vector<uint16_t>{pj_f[at]})[0];
                    EXPECT_NEAR(got, dot, 1e-2 * std::fabs(dot) + 1e-5 * mag) << "gate " << i << ", row " << r;
                }
            }
        }
        for (int s = 0; s < sessions; ++s) {
            EXPECT_EQ(ref.conv_state[s]->download(), fused.conv_state[s]->download()) << "conv state, session " << s;
            EXPECT_EQ(ref.rec_state[s]->download(), fused.rec_state[s]->download()) << "recurrent state, session " << s;
        }
    }
}

TEST(CudaGdnDecodeFused, SoloMatchesTheThreeLaunchesBitForBit) {
    FROST_SKIP_WITHOUT_CUDA();
    check(16, 16, 0, "0.8b solo");
    check(16, 32, 0, "9b/35b solo");
    check(16, 48, 0, "27b solo");
    check(2, 8, 0, "4:1 solo");
    check(1, 2, 0, "tiny-gpu solo");
}

TEST(CudaGdnDecodeFused, BatchedMatchesTheThreeLaunchesBitForBit) {
    FROST_SKIP_WITHOUT_CUDA();
    check(16, 16, 3, "0.8b batch 3");
    check(16, 32, 8, "9b/35b batch 8");
    check(16, 48, 2, "27b batch 2");
}

TEST(CudaGdnDecodeFused, FoldedGatesMatchTheGateDotLaunchBitForBit) {
    FROST_SKIP_WITHOUT_CUDA();
    check(16, 16, 0, "0.8b gates solo", 1024);
    check(16, 32, 0, "9b gates solo", 4096);
    check(16, 48, 0, "27b gates solo", 5120);
    check(16, 32, 8, "9b gates batch 8", 4096);
    check(16, 16, 3, "0.8b gates batch 3", 8192);
}

// Shapes the fused kernel does not take are refused (the op then runs the three launches).
TEST(CudaGdnDecodeFused, RefusesShapesItDoesNotFuse) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> buf(size_t(1) << 16);
    Dev<float> f(size_t(1) << 16);
    Dev<kernels::StepCursor> cur(1);
    const int Hk = 2, Hv = 4, Q = Hk * kD, V = Hv * kD, C = 2 * Q + V, W = C + V + 8;
    kernels::bf16* x = bf(buf);
    kernels::bf16* y = x + W;
    kernels::bf16* o = y + C;
    kernels::bf16* gy = o + V;
    const int32_t* n = &cur.get()->n_tokens;
    kernels::GdnDecodeBf16Params p{};
    p.conv = kernels::Conv1dBf16Params{x, f.get(), gy + V, y, W, C, kTaps, kD, 2 * Hk, Hk, kEps, 1.0f, 1, n};
    p.gdn = kernels::GdnBf16Params{y, y + Q, y + 2 * Q, nullptr, nullptr, f.get(), o, nullptr, C, Hk, Hv, kD, kD, 64, 1,
                                   cur.get()};
    p.gdn.gate_b = x + C + V;
    p.gdn.gate_a = x + C + V + Hv;
    p.gdn.A_log = f.get();
    p.gdn.dt_bias = f.get();
    p.gdn.gate_row_stride = W;
    p.norm = kernels::GatedRmsNormBf16Params{o, x + C, f.get(), gy, W, kD, Hv, kEps, 1, n};
    ASSERT_TRUE(kernels::gdn_decode_fused_applies(p));
    auto q = p;
    q.conv.kernel = 3;  // only K = 4
    EXPECT_FALSE(kernels::gdn_decode_fused_applies(q));
    q = p;
    q.gdn.Hv = q.norm.heads = 5 * Hk;  // more than 4 value heads per key head: a cluster over 16
    q.conv.channels = 2 * Q + q.gdn.Hv * kD;
    EXPECT_FALSE(kernels::gdn_decode_fused_applies(q));
    q = p;
    q.norm.z_row_stride = W + 2;  // the strided norm kernel's bits, not the vectorised one's
    EXPECT_FALSE(kernels::gdn_decode_fused_applies(q));
    q = p;
    q.gdn.v = y;  // the step must read the conv's output
    EXPECT_FALSE(kernels::gdn_decode_fused_applies(q));
    q = p;
    q.conv.n_rows = nullptr;  // solo: rows counted by the step's cursor
    EXPECT_FALSE(kernels::gdn_decode_fused_applies(q));
    EXPECT_EQ(kernels::gdn_decode_fused_launch(q, nullptr), cudaErrorInvalidValue);
    // Folded gates: a hidden state the gate dot does not take (K not a multiple of 8, over 8192)
    // or a row count other than the step's.
    q = p;
    q.gates = kernels::GdnGateDotParams{x, x, gy, 0, 0, 4096, Hv, 1};
    EXPECT_TRUE(kernels::gdn_decode_fused_applies(q));
    for (int bad = 0; bad < 3; ++bad) {
        auto g = q;
        if (bad == 0) g.gates.K = 4100;
        if (bad == 1) g.gates.K = 8200;
        if (bad == 2) g.gates.rows = 2;
        EXPECT_FALSE(kernels::gdn_decode_fused_applies(g)) << bad;
    }
    EXPECT_EQ(kernels::gdn_gate_dot_launch(kernels::GdnGateDotParams{x, x, gy, 0, 0, 4100, Hv, 1}, 0, nullptr),
              cudaErrorInvalidValue);
}

}  // namespace
}  // namespace frost::test
#endif
