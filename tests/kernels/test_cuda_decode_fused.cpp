// The decode-graph forms of the CUDA kernels: the gate_up GEMV with SwiGLU in its epilogue, the
// GDN recurrence with the gates computed inside, and programmatic dependent launch (PDL) of GEMV /
// norm / conv1d / recurrence. Each is checked against an fp64 host reference and bitwise against
// the unfused, fully serialised kernels; PDL chains also run inside a captured graph.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaDecodeFused, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

constexpr double kBf16Tol = 1e-2;

double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

// gate_up + SwiGLU fused vs gemv + swiglu kernels (bitwise) and vs fp64; PDL on and off.
void check_swiglu_gemv(int F, int K, const char* name) {
    auto rng = fresh_rng(name);
    auto x = uniform(rng, K, -1, 1);
    auto w = uniform(rng, static_cast<size_t>(2 * F) * K, -1, 1);
    Dev<uint16_t> dx(to_bf(x)), dw(to_bf(w)), dgu(2 * F), dact(F), dfused(F), dfused_pdl(F);
    kernels::GemmBf16Params p{bf(dx), bf(dw), dgu.get(), K, 2 * F, 1, 2 * F, K, 0, 0};
    CUDA_OK(kernels::gemv_launch(p, nullptr));
    if (F % 8 == 0) CUDA_OK(kernels::swiglu_launch({bf(dgu), bf(dact), F, 1, nullptr}, nullptr));
    p.swiglu = 1;
    p.y = dfused.get();
    CUDA_OK(kernels::gemv_launch(p, nullptr));
    p.pdl = 1;
    p.y = dfused_pdl.get();
    CUDA_OK(kernels::gemv_launch(p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(dfused.download(), dfused_pdl.download()) << name << ": PDL launch differs";
    if (F % 8 == 0) {  // the swiglu kernel takes whole 8-element vectors only
        EXPECT_EQ(dact.download(), dfused.download()) << name << ": fused SwiGLU differs from gemv + swiglu";
    }
    const auto gu = from_bf(dgu.download());
    std::vector<double> ref(F);
    for (int j = 0; j < F; ++j) {
        double g = 0, u = 0;
        for (int k = 0; k < K; ++k) {
            g += double(x[k]) * w[static_cast<size_t>(j) * K + k];
            u += double(x[k]) * w[static_cast<size_t>(F + j) * K + k];
        }
        ref[j] = silu_ref(g) * u;
    }
    EXPECT_LE(rel_l2(ref, from_bf(dfused.download())), kBf16Tol) << name;
}

TEST(CudaDecodeFused, GemvSwigluMatchesUnfused) {
    FROST_SKIP_WITHOUT_CUDA();
    check_swiglu_gemv(1000, 4096, "SwigluK4096");
    check_swiglu_gemv(1003, 4096, "SwigluF1003");  // F not a multiple of the block's 4 row pairs
    check_swiglu_gemv(64, 512, "SwigluK512");      // K too short for the prefetched first group
}

TEST(CudaDecodeFused, GemvSwigluRefusesAccumulate) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> dx(64), dw(64 * 8), dy(8);
    kernels::GemmBf16Params p{bf(dx), bf(dw), dy.get(), 64, 4, 1, 8, 64, 0, 1};
    p.swiglu = 1;
    EXPECT_EQ(kernels::gemv_launch(p, nullptr), cudaErrorInvalidValue);
}

// A chain of dependent launches (gemv -> add_rmsnorm -> gemv -> gemv -> conv1d): every consumer reads what its predecessor just wrote, so a PDL kernel that
// touched predecessor data before its wait would read poison. Runs eagerly and as a replayed graph.
struct Chain {
    static constexpr int K0 = 1024, N1 = 2048, N2 = 1024, C = 256, W = C + 64;
    Dev<uint16_t> x0, w1, w2, w3, y1, xn, y2, y3, conv_state, conv_y;
    Dev<float> conv_w, norm_w;
    std::vector<uint16_t> conv_state0;

    explicit Chain(std::mt19937& rng)
        : x0(to_bf(uniform(rng, K0, -1, 1))), w1(to_bf(uniform(rng, size_t(N1) * K0, -1, 1))),
          w2(to_bf(uniform(rng, size_t(N2) * N1, -0.1f, 0.1f))), w3(to_bf(uniform(rng, size_t(W) * N2, -0.1f, 0.1f))),
          y1(N1), xn(N1), y2(N2), y3(W), conv_state(C * 3), conv_y(C), conv_w(uniform(rng, C * 4, -0.5f, 0.5f, false)),
          norm_w(uniform(rng, N1, -0.1f, 0.1f, false)), conv_state0(to_bf(uniform(rng, C * 3, -1, 1))) {}

    void reset() {
        y1.poison();
        xn.poison();
        y2.poison();
        y3.poison();
        conv_y.poison();
        conv_state.upload(conv_state0);
        cudaDeviceSynchronize();  // the poison memsets run on the legacy stream
    }

    cudaError_t record(bool pdl, cudaStream_t s) {
        kernels::GemmBf16Params a{bf(x0), bf(w1), y1.get(), K0, N1, 1, N1, K0, 0, 0};
        kernels::AddRmsNormBf16Params n{bf(y1), nullptr, norm_w.get(), bf(xn), N1, 1, 1e-6f, 1, nullptr, 0};
        kernels::GemmBf16Params b{bf(xn), bf(w2), y2.get(), N1, N2, 1, N2, N1, 0, 0};
        kernels::GemmBf16Params c{bf(y2), bf(w3), y3.get(), N2, W, 1, W, N2, 0, 0};
        kernels::Conv1dBf16Params cv{bf(y3), conv_w.get(), bf(conv_state), bf(conv_y), W, C, 4, 0, 0, 0,
                                     0.0f, 1.0f, 1, nullptr};
        a.pdl = n.pdl = b.pdl = c.pdl = cv.pdl = pdl ? 1 : 0;
        cudaError_t e = kernels::gemv_launch(a, s);
        if (e == cudaSuccess) e = kernels::add_rmsnorm_launch(n, s);
        if (e == cudaSuccess) e = kernels::gemv_launch(b, s);
        if (e == cudaSuccess) e = kernels::gemv_launch(c, s);
        if (e == cudaSuccess) e = kernels::conv1d_launch(cv, s);
        return e;
    }
};

TEST(CudaDecodeFused, PdlChainMatchesSerialEagerAndGraph) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("PdlChain");
    Chain ch(rng);
    cudaStream_t s = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ch.reset();
    CUDA_OK(ch.record(false, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const auto ref_y = ch.conv_y.download(), ref_state = ch.conv_state.download(), ref_y3 = ch.y3.download();
    std::vector<float> ref_y3f = from_bf(ref_y3);
    for (float v : ref_y3f) ASSERT_FALSE(std::isnan(v));
    for (int rep = 0; rep < 3; ++rep) {
        ch.reset();
        CUDA_OK(ch.record(true, s));
        CUDA_OK(cudaStreamSynchronize(s));
        EXPECT_EQ(ref_y3, ch.y3.download()) << "eager PDL chain, repeat " << rep;
        EXPECT_EQ(ref_y, ch.conv_y.download()) << "eager PDL chain, repeat " << rep;
        EXPECT_EQ(ref_state, ch.conv_state.download()) << "eager PDL chain, repeat " << rep;
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const cudaError_t rec = ch.record(true, s);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    CUDA_OK(rec);
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 3; ++rep) {
        ch.reset();
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaStreamSynchronize(s));
        EXPECT_EQ(ref_y3, ch.y3.download()) << "graph PDL chain, replay " << rep;
        EXPECT_EQ(ref_y, ch.conv_y.download()) << "graph PDL chain, replay " << rep;
        EXPECT_EQ(ref_state, ch.conv_state.download()) << "graph PDL chain, replay " << rep;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
}

// Decode recurrence with the gates computed inside vs gdn_gate + recurrence (bitwise), and vs
// an fp64 single-token update with host gates.
TEST(CudaDecodeFused, GdnRecurrentFusedGateMatchesUnfused) {
    FROST_SKIP_WITHOUT_CUDA();
    constexpr int Hk = 2, Hv = 4, D = 128, C = 2 * Hk * D + Hv * D;
    constexpr int64_t kStride = C + D * Hv + 2 * Hv + 40;  // [qkv | z | b | a | pad], like in_proj
    auto rng = fresh_rng("GdnFusedGate");
    auto proj = uniform(rng, kStride, -1, 1);
    for (int h = 0; h < 2 * Hk; ++h) {  // l2-normalised q (scaled) and k heads
        float* x = &proj[h * D];
        double ss = 0;
        for (int i = 0; i < D; ++i) ss += double(x[i]) * x[i];
        const double sc = 1.0 / std::sqrt(ss) * (h < Hk ? 1.0 / std::sqrt(double(D)) : 1.0);
        for (int i = 0; i < D; ++i) x[i] = round_bf(static_cast<float>(x[i] * sc));
    }
    for (int i = 0; i < 2 * Hv; ++i) proj[C + D * Hv + i] = round_bf(uniform(rng, 1, -4, 4)[0]);
    auto A_log = uniform(rng, Hv, -1, 1.5f, false), dt = uniform(rng, Hv, -0.5f, 0.5f, false);
    auto S0 = uniform(rng, size_t(Hv) * D * D, -0.05f, 0.05f, false);
    Dev<uint16_t> dproj(to_bf(proj)), o_ref(Hv * D), o_fused(Hv * D);
    Dev<float> dA(A_log), ddt(dt), beta(Hv), g(Hv), st_ref(S0), st_fused(S0);
    kernels::StepCursor cur{};
    cur.n_tokens = 1;
    Dev<kernels::StepCursor> dcur(std::vector<kernels::StepCursor>{cur});
    const kernels::bf16* gb = bf(dproj) + C + D * Hv;
    CUDA_OK(kernels::gdn_gate_launch({gb, gb + Hv, dA.get(), ddt.get(), beta.get(), g.get(), kStride, Hv, 1, nullptr},
                                     nullptr));
    kernels::GdnBf16Params p{bf(dproj), bf(dproj) + Hk * D, bf(dproj) + 2 * Hk * D, beta.get(), g.get(), st_ref.get(),
                             bf(o_ref), nullptr, kStride, Hk, Hv, D, D, kernels::kGdnChunk, 1, dcur.get()};
    CUDA_OK(kernels::gdn_recurrent_launch(p, nullptr));
    p.beta = nullptr;
    p.g = nullptr;
    p.gate_b = gb;
    p.gate_a = gb + Hv;
    p.A_log = dA.get();
    p.dt_bias = ddt.get();
    p.gate_row_stride = kStride;
    p.pdl = 1;
    p.state = st_fused.get();
    p.o = bf(o_fused);
    CUDA_OK(kernels::gdn_recurrent_launch(p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(o_ref.download(), o_fused.download());
    const auto s_ref = st_ref.download(), s_fused = st_fused.download();
    EXPECT_EQ(0, std::memcmp(s_ref.data(), s_fused.data(), s_ref.size() * sizeof(float)));

    std::vector<double> ref;
    for (int h = 0; h < Hv; ++h) {
        const int kh = h / (Hv / Hk);
        const float* q = &proj[kh * D];
        const float* k = &proj[Hk * D + kh * D];
        const float* v = &proj[2 * Hk * D + h * D];
        const double a = double(proj[C + D * Hv + Hv + h]) + dt[h];
        const double be = 1.0 / (1.0 + std::exp(-double(proj[C + D * Hv + h])));
        const double alpha = std::exp(-std::exp(double(A_log[h])) * (a > 20 ? a : std::log1p(std::exp(a))));
        std::vector<double> S(size_t(D) * D);
        for (int i = 0; i < D * D; ++i) S[i] = alpha * S0[size_t(h) * D * D + i];
        for (int j = 0; j < D; ++j) {
            double u = 0;
            for (int i = 0; i < D; ++i) u += S[i * D + j] * k[i];
            const double delta = be * (v[j] - u);
            for (int i = 0; i < D; ++i) S[i * D + j] += k[i] * delta;
        }
        for (int j = 0; j < D; ++j) {
            double o = 0;
            for (int i = 0; i < D; ++i) o += S[i * D + j] * q[i];
            ref.push_back(o);
        }
    }
    EXPECT_LE(rel_l2(ref, from_bf(o_fused.download())), kBf16Tol);
}

}  // namespace
}  // namespace frost::test
#endif
