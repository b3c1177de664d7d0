// Quantized decode GEMV against the CPU reference: fresh random quantized weights (every fp8 code
// but NaN, every e2m1 / int4 code, random scales and zero points) are dequantized by
// model/quant/dequant.h, multiplied with the same bf16 x in fp64, and compared with the kernel's
// fp32 output (relative L2 <= 1e-5) and bf16 output (<= 1e-2); the output is poisoned first and
// two runs are bitwise equal. Odd row counts cover the last warp's half-empty row pair. The
// device dequantization to bf16 must equal the CPU one rounded to bf16, bit for bit.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGemvQuant, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/lm_gemv_quant.h"
#include "kernels/cuda_test_util.h"
#include "model/quant/dequant.h"

namespace frost::test {
namespace {

namespace mq = frost::model::quant;
constexpr double kF32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;

struct Case {
    int format, N, K;
    int block = 128;     // fp8 block size (both dims)
    int group = 128;     // int4 group size
    bool zero_point = false;
    const char* name;
};

uint8_t random_fp8(std::mt19937& rng) {
    for (;;) {
        const uint8_t b = uint8_t(rng());
        if ((b & 0x7F) != 0x7F) return b;  // 0x7f / 0xff are NaN
    }
}

void run_case(const Case& c) {
    auto rng = fresh_rng(c.name);
    const int64_t N = c.N, K = c.K;
    auto x = uniform(rng, size_t(K), -1, 1);
    std::vector<float> w(size_t(N * K));  // the CPU dequantization: the reference weights
    std::vector<uint8_t> wbytes;
    std::vector<uint8_t> scale_bytes;
    std::vector<int32_t> zp;
    float global_scale = 0;
    std::uniform_real_distribution<float> pos(0.5f, 2.0f);
    switch (c.format) {
        case kernels::kGemvQuantFp8Block:
        case kernels::kGemvQuantFp8Channel: {
            wbytes.resize(size_t(N * K));
            for (auto& b : wbytes) b = random_fp8(rng);
            const bool block = c.format == kernels::kGemvQuantFp8Block;
            const int64_t rows = block ? (N + c.block - 1) / c.block : N, cols = block ? (K + c.block - 1) / c.block : 1;
            std::vector<float> s(size_t(rows * cols));
            for (auto& v : s) v = pos(rng) / 448.0f;
            mq::dequant_fp8_block(wbytes.data(), s.data(), N, K, block ? c.block : 1, block ? c.block : K, w.data());
            scale_bytes.resize(s.size() * sizeof(float));
            std::memcpy(scale_bytes.data(), s.data(), scale_bytes.size());
            break;
        }
        case kernels::kGemvQuantNvfp4: {
            wbytes.resize(size_t(N * K / 2));
            for (auto& b : wbytes) b = uint8_t(rng());
            scale_bytes.resize(size_t(N * K / 16));
            for (auto& b : scale_bytes) b = uint8_t(0x30 + rng() % 0x30);  // e4m3 in [2^-1, 2^5): positive, finite
            global_scale = pos(rng) * 100.0f;
            mq::dequant_nvfp4(wbytes.data(), scale_bytes.data(), global_scale, N, K, w.data());
            break;
        }
        default: {
            const int64_t words = K / 8, groups = K / c.group;
            std::vector<int32_t> packed(size_t(N * words));
            for (auto& v : packed) v = int32_t(rng());
            std::vector<float> s(size_t(N * groups));
            for (auto& v : s) v = round_bf(pos(rng) / 8.0f);  // the kernel reads bf16 scales
            if (c.zero_point) {
                zp.resize(size_t((N + 7) / 8 * groups));
                for (auto& v : zp) v = int32_t(rng());
            }
            mq::dequant_int4(packed.data(), s.data(), c.zero_point ? zp.data() : nullptr, nullptr, N, K, c.group, w.data());
            wbytes.resize(packed.size() * 4);
            std::memcpy(wbytes.data(), packed.data(), wbytes.size());
            const auto sb = to_bf(s);
            scale_bytes.resize(sb.size() * 2);
            std::memcpy(scale_bytes.data(), sb.data(), scale_bytes.size());
            break;
        }
    }
    std::vector<double> ref(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(w[size_t(n * K + k)]) * x[size_t(k)];
        ref[size_t(n)] = acc;
    }
    Dev<uint16_t> dx(to_bf(x));
    Dev<uint8_t> dw(wbytes), ds(scale_bytes);
    Dev<int32_t> dzp(std::max<size_t>(zp.size(), 1));
    if (!zp.empty()) dzp.upload(zp);
    Dev<float> yf(static_cast<size_t>(N)), yf2(static_cast<size_t>(N));
    Dev<uint16_t> yb(static_cast<size_t>(N));
    kernels::GemvQuantParams p{};
    p.x = bf(dx);
    p.w = dw.get();
    p.scale = ds.get();
    p.zero_point = zp.empty() ? nullptr : dzp.get();
    p.global_scale = global_scale;
    p.N = c.N;
    p.K = c.K;
    p.format = c.format;
    p.block_n = p.block_k = c.block;
    p.group_size = c.group;
    // Both kernels behind gemv_quant_launch: the SIMT one always, the tensor-core one where the
    // shape allows it (that is where gemv_quant_launch sends it).
    using Launch = cudaError_t (*)(const kernels::GemvQuantParams&, cudaStream_t);
    std::vector<std::pair<const char*, Launch>> kernels_run = {{"simt", kernels::gemv_quant_simt_launch}};
    if (kernels::gemv_quant_tc_eligible(p)) kernels_run.push_back({"tensor core", kernels::gemv_quant_tc_launch});
    for (const auto& [kname, launch] : kernels_run) {
        const std::string what = std::string(c.name) + " (" + kname + ")";
        for (Dev<float>* d : {&yf, &yf2}) d->upload(std::vector<float>(size_t(N), std::nanf("")));  // poison
        yb.upload(std::vector<uint16_t>(size_t(N), 0x7FC0));
        for (int run = 0; run < 2; ++run) {
            p.out_f32 = 1;
            p.y = run ? yf2.get() : yf.get();
            CUDA_OK(launch(p, nullptr));
        }
        p.out_f32 = 0;
        p.y = yb.get();
        CUDA_OK(launch(p, nullptr));
        const auto got = yf.download();
        EXPECT_EQ(0, std::memcmp(got.data(), yf2.download().data(), got.size() * sizeof(float))) << what << ": not deterministic";
        EXPECT_LE(rel_l2(ref, got), kF32Tol) << what;
        EXPECT_LE(rel_l2(ref, from_bf(yb.download())), kBf16Tol) << what;
    }
    // The whole weight dequantized on the device: bitwise the CPU reference rounded to bf16.
    Dev<uint16_t> wb(static_cast<size_t>(N * K));
    CUDA_OK(kernels::dequant_bf16_launch(p, bf(wb), nullptr));
    const auto wdev = wb.download();
    size_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i) differ += wdev[i] != f2bf(w[i]);
    EXPECT_EQ(differ, 0u) << c.name << ": device dequantization differs from the CPU one";
}

TEST(CudaGemvQuant, Fp8Block128) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({kernels::kGemvQuantFp8Block, 301, 1024, 128, 128, false, "fp8_block"});
    run_case({kernels::kGemvQuantFp8Block, 64, 4096 + 64, 128, 128, false, "fp8_block_partial_k_block"});
}
TEST(CudaGemvQuant, Fp8Channel) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({kernels::kGemvQuantFp8Channel, 257, 2048, 128, 128, false, "fp8_channel"});
}
TEST(CudaGemvQuant, Nvfp4) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({kernels::kGemvQuantNvfp4, 299, 1024, 128, 128, false, "nvfp4"});
    run_case({kernels::kGemvQuantNvfp4, 33, 4096, 128, 128, false, "nvfp4_k4096"});
    run_case({kernels::kGemvQuantNvfp4, 1000, 12288, 128, 128, false, "nvfp4_k12288"});
}
TEST(CudaGemvQuant, Int4SymmetricAndZeroPoints) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({kernels::kGemvQuantInt4, 300, 1024, 128, 128, false, "int4"});
    run_case({kernels::kGemvQuantInt4, 77, 2048, 128, 128, true, "int4_zero_point"});
    run_case({kernels::kGemvQuantInt4, 64, 1024, 128, 32, true, "int4_group32"});
    run_case({kernels::kGemvQuantInt4, 515, 4096, 128, 256, true, "int4_group256"});
}
TEST(CudaGemvQuant, RefusesUnsupportedParams) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> dx(64);
    Dev<uint8_t> dw(64 * 64), ds(64 * 64);
    Dev<float> y(64);
    kernels::GemvQuantParams p{};
    p.x = bf(dx);
    p.w = dw.get();
    p.scale = ds.get();
    p.y = y.get();
    p.N = 64;
    p.K = 48;  // not a multiple of 32
    p.format = kernels::kGemvQuantNvfp4;
    p.global_scale = 1;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.K = 64;
    p.format = kernels::kGemvQuantInt4;
    p.group_size = 48;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.format = 9;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace frost::test
#endif
