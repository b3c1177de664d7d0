// The CPU engine runs Qwen's official block-wise FP8 checkpoint (tests/fixtures/fp8-tiny-a, written
// by transformers' FineGrainedFP8 quantizer) and reproduces its float64 transformers goldens: relative
// L2 <= 1e-3 at every stored prompt position and greedy step, every greedy token identical (the
// acceptance of tests/fixtures/README.md). The FP8 linears are dequantized at load (w = fp8 x
// scale_inv per 128x128 block); the checks below also pin the binding itself against the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/quant/dequant.h"
#include "model/quant/quant_plan.h"
#include "model/safetensors.h"
#include "util/bf16.h"

namespace frost::model {
namespace {

constexpr double kMaxRelL2 = 1e-3;
constexpr const char* kFixture = "fp8-tiny-a";

TEST(QuantFixture, Fp8BlockGoldensOnCpuEngine) {
    const std::string dir = test::fixture_dir(kFixture);
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 128;
    o.logits_all = true;
    // The FP8 golden's reference model was built fresh in float64 (gen_fixtures_moe_fp8.py), so its
    // RoPE inverse frequencies are exact, not the bf16-rounded buffer the dense fixtures carry.
    o.rope_inv_freq_bf16 = false;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    test::expect_matches_golden(*e, g, kMaxRelL2);
}

// The CUDA engine takes the same dequantized weights (uploaded as bf16): the bf16-path acceptance
// of tests/fixtures/README.md as test_cuda_engine.cpp applies it (mean relative L2 over the
// prompt <= 3e-2, every position <= 0.2, top-1 equal on >= 95% of positions whose golden margin
// exceeds 0.05). Skipped without a CUDA device; the GPU machine runs it.
// fp8-tiny-a's own bf16 floor is higher than the dense fixtures': tests/model/ref_qwen35_bf16.py
// (float64 over the exactly dequantized fp8 weights, exact RoPE, bf16 rounding wherever the CUDA
// engine rounds) misses this golden by mean 3.67e-2, p90 7.2e-2, max 0.288 over the 200 prompt
// positions and flips 6 of 187 top-1 tokens with margin > 0.05 (96.8 %). The bounds keep the dense
// tests' ratios to their floor (max 1.7x, mean 1.25x); a wrong op or scale gives errors of order 1.
constexpr double kFp8MeanRelL2 = 0.045;
constexpr double kFp8MaxRelL2 = 0.5;

TEST(QuantFixture, Fp8FixtureOnCudaEngine) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = test::fixture_dir(kFixture);
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(dir, &g, &err)) << err;
    EngineOptions o;
    o.backend = FROST_BACKEND_CUDA;
    o.max_seq_len = 512;
    o.prefill_chunk = 128;
    o.logits_all = true;
    o.rope_inv_freq_bf16 = false;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    const size_t V = g.vocab;
    std::vector<float> logits;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), g.prompt_ids.size(), nullptr, &logits), FROST_OK) << frost_last_error();
    double sum = 0;
    int compared = 0, agree = 0;
    for (size_t i = 0; i < g.prompt_logit_positions.size(); ++i) {
        const size_t p = g.prompt_logit_positions[i];
        const float* got = logits.data() + p * V;
        const float* ref = g.logits_prompt.data() + i * V;
        const double r = test::rel_l2(got, ref, V);
        sum += r;
        EXPECT_LE(r, kFp8MaxRelL2) << "prompt position " << p;
        std::vector<float> sorted(ref, ref + V);
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        if (sorted[0] - sorted[1] > 0.05) {
            ++compared;
            agree += std::max_element(got, got + V) - got == std::max_element(ref, ref + V) - ref;
        }
    }
    EXPECT_LE(sum / g.prompt_logit_positions.size(), kFp8MeanRelL2);
    ASSERT_GT(compared, 0);
    EXPECT_GE(double(agree) / compared, 0.95) << agree << " of " << compared;
}

// Every F8 linear of the fixture is planned as fp8-block and bound as fp32 = fp8 x scale_inv,
// recomputed here in double from the file's bytes with its own e4m3 decoding (sign, 4-bit
// exponent with bias 7, 3-bit mantissa); bf16 modules (norms, embeddings, lm_head) stay bf16.
TEST(QuantFixture, BindsEveryFp8LinearAsItsDequantization) {
    ModelWeights w;
    ASSERT_EQ(load_weights(test::fixture_dir(kFixture), &w), FROST_OK) << frost_last_error();
    ASSERT_TRUE(w.quant);
    EXPECT_EQ(w.quant->config.summary(), "fp8 (block 128x128, e4m3)");
    size_t f8 = 0;
    for (const auto& t : w.checkpoint->tensors()) f8 += t.dtype == DType::F8_E4M3;
    EXPECT_EQ(w.quant->modules.size(), f8);
    EXPECT_EQ(f8, 3u * 8 + 7);  // 3 GDN layers x (5 projections + 3 MLP) + attention 4 + MLP 3
    EXPECT_EQ(w.lm_head.dtype, DType::BF16);
    EXPECT_EQ(w.quant->plain.count("lm_head"), 1u);
    auto e4m3 = [](uint8_t b) {
        const int e = (b >> 3) & 15, m = b & 7;
        const double v = e ? std::ldexp(1.0 + m / 8.0, e - 7) : std::ldexp(double(m), -9);
        return (b & 0x80) ? -v : v;
    };
    const TensorView& v = w.layers[0].mlp_down;  // [256, 384]: a partial 128-block in the last column band
    ASSERT_EQ(v.dtype, DType::F32);
    const CheckpointTensor* q = w.checkpoint->find(v.name);
    const CheckpointTensor* s = w.checkpoint->find("model.layers.0.mlp.down_proj.weight_scale_inv");
    ASSERT_TRUE(q && s);
    const auto* qb = static_cast<const uint8_t*>(q->data);
    const auto* sf = static_cast<const float*>(s->data);
    const auto* got = static_cast<const float*>(v.data);
    for (int64_t r = 0; r < 256; ++r)
        for (int64_t c = 0; c < 384; ++c) {
            const float want = float(e4m3(qb[r * 384 + c]) * double(sf[(r / 128) * 3 + c / 128]));
            ASSERT_EQ(got[r * 384 + c], want) << r << "," << c;
        }
}

// WeightLoadOptions::dequant_dtype = BF16 (half the host memory, for the bf16 CUDA upload): every
// quantized linear is the fp32 dequantization rounded to nearest even; bf16 tensors are untouched.
TEST(QuantFixture, Bf16DequantizationIsTheRoundedFp32One) {
    ModelWeights f32, b16;
    ASSERT_EQ(load_weights(test::fixture_dir(kFixture), &f32), FROST_OK) << frost_last_error();
    WeightLoadOptions o;
    o.dequant_dtype = DType::BF16;
    ASSERT_EQ(load_weights(test::fixture_dir(kFixture), &b16, o), FROST_OK) << frost_last_error();
    for (size_t l = 0; l < f32.layers.size(); ++l) {
        for (auto member : {&LayerWeights::mlp_gate, &LayerWeights::mlp_up, &LayerWeights::mlp_down}) {
            const TensorView &a = f32.layers[l].*member, &b = b16.layers[l].*member;
            ASSERT_EQ(a.dtype, DType::F32);
            ASSERT_EQ(b.dtype, DType::BF16);
            ASSERT_EQ(b.bytes * 2, a.bytes);
            const auto* fa = static_cast<const float*>(a.data);
            const auto* hb = static_cast<const uint16_t*>(b.data);
            for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(hb[i], util::f32_to_bf16(fa[i])) << a.name << " " << i;
        }
    }
    EXPECT_EQ(b16.final_norm.dtype, DType::BF16);
    o.dequant_dtype = DType::F16;
    EXPECT_EQ(load_weights(test::fixture_dir(kFixture), &b16, o), FROST_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace frost::model
