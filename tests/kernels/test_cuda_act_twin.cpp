// The FP8 twins of W8A8 prefill (lm_params.h yq): add_rmsnorm, gated_rmsnorm and swiglu write the
// e4m3 bytes and group scales of their bf16 output in the same pass. They must be bit for bit what
// act_quant_fp8_launch makes of that bf16 output (so the FP8 GEMM's product does not change) and
// what the CPU reference (kernels/cpu quantize_act_e4m3_bytes) makes of it; the bf16 output must
// be the one the kernel writes without a twin; rows past the valid count stay untouched. With
// yq_only (the twin's GEMM is y's only reader) the twin is the same and y is not stored (the
// strided gated kernel, whose twin is quantized from y afterwards, still stores it).
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaActTwin, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cstring>
#include <functional>
#include <string>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// One producer run: writes y (bf16 [max_rows, K]) and, when q / s are set, its twin (y itself
// not with yq_only).
using Producer = std::function<cudaError_t(kernels::bf16* y, uint8_t* q, float* s, int64_t ld, int32_t yq_only)>;

// fused: the twin comes from the producer's own pass, which leaves rows past the count alone (the
// quantizer after the strided gated kernel quantizes every row).
void check_twin(const char* what, int max_rows, int rows, int K, const Producer& run, bool fused = true) {
    SCOPED_TRACE(what);
    const int64_t ld = kernels::act_scale_ld(max_rows);
    const size_t ns = size_t(ld) * (K / kernels::kFp8Group);
    Dev<uint16_t> y_plain(size_t(max_rows) * K), y(size_t(max_rows) * K);
    Dev<uint8_t> q(size_t(max_rows) * K), q_ref(size_t(max_rows) * K);
    Dev<float> s(ns), s_ref(ns);
    Dev<uint16_t> y_only(size_t(max_rows) * K);
    Dev<uint8_t> q_only(size_t(max_rows) * K);
    Dev<float> s_only(ns);
    CUDA_OK(run(bf(y_plain), nullptr, nullptr, 0, 0));
    CUDA_OK(run(bf(y), q.get(), s.get(), ld, 0));
    CUDA_OK(run(bf(y_only), q_only.get(), s_only.get(), ld, 1));
    // The old two-kernel path: the quantizer over the bf16 output.
    CUDA_OK(kernels::act_quant_fp8_launch(bf(y), K, max_rows, K, q_ref.get(), s_ref.get(), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto yp = y_plain.download(), yt = y.download();
    const auto qt = q.download(), qr = q_ref.download();
    const auto st = s.download(), sr = s_ref.download();
    for (size_t i = 0; i < size_t(rows) * K; ++i) ASSERT_EQ(yp[i], yt[i]) << "bf16 output changed at " << i;
    {  // yq_only: the same twin bytes (valid rows and past them), y left as it was where fused
        const auto yo = y_only.download();
        const auto qo = q_only.download();
        const auto so = s_only.download();
        ASSERT_EQ(0, std::memcmp(qo.data(), qt.data(), qo.size())) << "yq_only changed the twin's bytes";
        ASSERT_EQ(0, std::memcmp(so.data(), st.data(), so.size() * sizeof(float)))
            << "yq_only changed the twin's scales";
        for (size_t i = 0; i < size_t(rows) * K; ++i)
            ASSERT_EQ(yo[i], fused ? uint16_t(0xFFFF) : yt[i]) << "yq_only: y at " << i;
    }
    // CPU reference over the bf16 output's valid rows.
    std::vector<float> yf(size_t(rows) * K);
    for (size_t i = 0; i < yf.size(); ++i) yf[i] = bf2f(yt[i]);
    std::vector<uint8_t> qc(size_t(rows) * K);
    std::vector<float> sc(ns, 0.0f);
    ASSERT_EQ(kernels::cpu::quantize_act_e4m3_bytes(yf.data(), rows, K, K, qc.data(), sc.data(), ld), FROST_OK);
    int zero_groups = 0;
    for (int r = 0; r < rows; ++r)
        for (int g = 0; g < K / kernels::kFp8Group; ++g) {
            const size_t at = size_t(g) * ld + r;
            ASSERT_EQ(bits(st[at]), bits(sr[at])) << "scale r" << r << " g" << g << " vs act_quant";
            ASSERT_EQ(bits(st[at]), bits(sc[at])) << "scale r" << r << " g" << g << " vs cpu";
            zero_groups += st[at] == 1.0f;
            for (int i = 0; i < kernels::kFp8Group; ++i) {
                const size_t e = size_t(r) * K + g * kernels::kFp8Group + i;
                ASSERT_EQ(qt[e], qr[e]) << "byte r" << r << " k" << g * kernels::kFp8Group + i << " vs act_quant";
                ASSERT_EQ(qt[e], qc[e]) << "byte r" << r << " k" << g * kernels::kFp8Group + i << " vs cpu";
            }
        }
    EXPECT_GT(zero_groups, 0) << "the inputs hold an all-zero group (scale 1)";
    if (fused && rows < max_rows) {  // past the valid rows: still the poison
        EXPECT_EQ(qt[size_t(rows) * K], 0xFF);
        EXPECT_EQ(bits(st[rows]), 0xFFFFFFFFu);
    }
}

TEST(CudaActTwin, AddRmsNormTwinIsTheQuantizersBytes) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("AddRmsNormTwin");
    // 4096: whole warps; 1152: 144 vectors, so one warp has only its first 16 lanes in the row.
    for (int dim : {4096, 1152}) {
        const int rows = 7, max_rows = 9;
        auto h = uniform(rng, size_t(max_rows) * dim, -2, 2);
        auto delta = uniform(rng, size_t(max_rows) * dim, -1, 1);
        for (int i = 0; i < dim; ++i) h[size_t(2) * dim + i] = delta[size_t(2) * dim + i] = 0.0f;  // a zero row
        auto w = uniform(rng, dim, -0.5f, 0.5f, false);
        Dev<float> dw(w);
        Dev<int32_t> dn(std::vector<int32_t>{rows});
        Dev<uint16_t> dh(size_t(max_rows) * dim), dd(to_bf(delta));
        check_twin(dim == 4096 ? "dim 4096" : "dim 1152", max_rows, rows, dim,
                   [&](kernels::bf16* y, uint8_t* q, float* s, int64_t ld, int32_t only) {
                       dh.upload(to_bf(h));  // the residual add is in place: same h for every run
                       kernels::AddRmsNormBf16Params p{bf(dh), bf(dd), dw.get(), y, dim, 1, 1e-6f, max_rows, dn.get(), 0};
                       p.yq = q; p.yq_scale = s; p.yq_scale_ld = ld; p.yq_only = only;
                       return kernels::add_rmsnorm_launch(p, nullptr);
                   });
    }
}

TEST(CudaActTwin, GatedRmsNormTwinIsTheQuantizersBytes) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("GatedRmsNormTwin");
    // dim 128: the vectorised kernel (a head is a group); dim 64: the strided kernel, whose twin
    // comes from the quantizer run after it.
    for (int dim : {128, 64}) {
        const int heads = dim == 128 ? 8 : 4, rows = 5, max_rows = 6, width = heads * dim;
        const int64_t z_stride = width + 64;
        auto x = uniform(rng, size_t(max_rows) * width, -2, 2);
        auto z = uniform(rng, size_t(max_rows) * z_stride, -3, 3);
        for (int i = 0; i < 128; ++i) z[size_t(1) * z_stride + 128 + i] = 0.0f;  // silu(0) = 0: a zero group
        auto w = uniform(rng, dim, -0.5f, 0.5f, false);
        Dev<uint16_t> dx(to_bf(x)), dz(to_bf(z));
        Dev<float> dw(w);
        Dev<int32_t> dn(std::vector<int32_t>{rows});
        check_twin(dim == 128 ? "dim 128" : "dim 64", max_rows, rows, width,
                   [&](kernels::bf16* y, uint8_t* q, float* s, int64_t ld, int32_t only) {
                       kernels::GatedRmsNormBf16Params p{bf(dx), bf(dz), dw.get(), y, z_stride, dim, heads, 1e-6f,
                                                         max_rows, dn.get()};
                       p.yq = q; p.yq_scale = s; p.yq_scale_ld = ld; p.yq_only = only;
                       return kernels::gated_rmsnorm_launch(p, nullptr);
                   },
                   dim == 128);
    }
}

TEST(CudaActTwin, SwigluTwinIsTheQuantizersBytes) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("SwigluTwin");
    // 384: a partial warp (the row-tiled kernel's 16 elements a lane: three groups in, one out);
    // 3584: the 0.8B's width, a partial block; 12288: the 9B's.
    for (int F : {384, 3584, 12288}) {
        const int rows = 50, max_rows = 64;
        auto x = uniform(rng, size_t(max_rows) * 2 * F, -6, 6);
        for (int i = 0; i < 128; ++i) x[size_t(3) * 2 * F + 256 + i] = 0.0f;  // gate 0: a zero group
        x[size_t(4) * 2 * F + 5] = 300.0f;  // a large outlier in one group
        Dev<uint16_t> dx(to_bf(x));
        Dev<int32_t> dn(std::vector<int32_t>{rows});
        const std::string what = "F " + std::to_string(F);
        check_twin(what.c_str(), max_rows, rows, F,
                   [&](kernels::bf16* y, uint8_t* q, float* s, int64_t ld, int32_t only) {
                       kernels::SwigluBf16Params p{bf(dx), y, F, max_rows, dn.get()};
                       p.yq = q; p.yq_scale = s; p.yq_scale_ld = ld; p.yq_only = only;
                       return kernels::swiglu_launch(p, nullptr);
                   });
    }
}

TEST(CudaActTwin, RefusesTwinsOutOfLayout) {
    FROST_SKIP_WITHOUT_CUDA();
    const int F = 200, rows = 4;  // F not a multiple of 128
    Dev<uint16_t> dx(size_t(rows) * 2 * F), dy(size_t(rows) * F);
    Dev<uint8_t> q(size_t(rows) * 256);
    Dev<float> s(64);
    kernels::SwigluBf16Params p{bf(dx), bf(dy), F, rows, nullptr};
    p.yq = q.get(); p.yq_scale = s.get(); p.yq_scale_ld = kernels::act_scale_ld(rows);
    EXPECT_EQ(kernels::swiglu_launch(p, nullptr), cudaErrorInvalidValue);
    p.F = 256;
    p.yq_scale_ld = 3;  // not act_scale_ld(rows)
    EXPECT_EQ(kernels::swiglu_launch(p, nullptr), cudaErrorInvalidValue);
    kernels::SwigluBf16Params no_twin{bf(dx), bf(dy), 256, rows, nullptr};
    no_twin.yq_only = 1;  // y skipped with no twin: nothing would be written
    EXPECT_EQ(kernels::swiglu_launch(no_twin, nullptr), cudaErrorInvalidValue);
    cudaGetLastError();
}

}  // namespace
}  // namespace frost::test
#endif
