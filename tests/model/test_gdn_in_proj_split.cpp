// The GDN in_proj bound as [qkv; z] plus a [b; a] tail (qwen35::split_gdn_in_proj): the forward
// then runs two GEMMs into the one projection output, the tail's columns right after in_proj's
// (in decode the tail's GEMM is part of the GDN decode op, GdnDecodeOp::gates).
// On the CPU (the fp32 oracle, which never keeps weights quantized) the split is forced
// (EngineOptions::gdn_in_proj_split = Always), and every logit of a prefill that crosses chunks and
// of the decode steps after it must equal the fused matrix's bit for bit: a dot product's order
// does not depend on which rows share its matrix, so any difference is a wrong offset, stride or
// row count in the split path. The CUDA engine takes the split where a quantized checkpoint
// leaves b and a in bf16 (test_quant_weight_table.cpp checks that binding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>

#include "model/engine.h"
#include "model/model_files_util.h"
#include "model/qwen35/weight_table.h"
#include "model/synth.h"

namespace frost::model {
namespace {

using namespace frost::testing;
using Split = qwen35::Precision::InProjSplit;

std::string synth(const std::string& quant, uint64_t seed) {
    return synth_temp("gdn_split_" + (quant.empty() ? std::string("bf16") : quant), "tiny", quant, seed);
}

struct Outputs {
    std::vector<float> prefill_logits, decode_logits;
    std::vector<int32_t> tokens;
};

Outputs run(const std::string& dir, Split split, const std::vector<int32_t>& ids, int steps) {
    EngineOptions o;
    o.max_seq_len = 256;
    o.prefill_chunk = 64;  // the prompt crosses chunks: the split runs in every prefill bucket
    o.gdn_in_proj_split = split;
    std::unique_ptr<Engine> e;
    Outputs r;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    if (!e) return r;
    int32_t tok = -1;
    EXPECT_EQ(e->prefill(0, ids.data(), ids.size(), &tok), FROST_OK) << frost_last_error();
    EXPECT_EQ(e->last_logits(0, &r.prefill_logits), FROST_OK) << frost_last_error();
    r.tokens.push_back(tok);
    for (int i = 0; i < steps; ++i) {
        std::vector<float> l;
        EXPECT_EQ(e->decode(0, &tok), FROST_OK) << frost_last_error();
        EXPECT_EQ(e->last_logits(0, &l), FROST_OK) << frost_last_error();
        r.decode_logits.insert(r.decode_logits.end(), l.begin(), l.end());
        r.tokens.push_back(tok);
    }
    return r;
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

class GdnInProjSplit : public ::testing::TestWithParam<const char*> {};

TEST_P(GdnInProjSplit, ForcedSplitEqualsFusedMatrixBitwise) {
    const std::string quant = GetParam();
    std::random_device rd;
    const uint64_t seed = rd();
    const std::string dir = synth(quant, seed % 1000);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<int32_t> ids(150);
    for (auto& t : ids) t = int32_t(rng() % 4096);
    const Outputs fused = run(dir, Split::Never, ids, 4);
    const Outputs split = run(dir, Split::Always, ids, 4);
    ASSERT_FALSE(fused.prefill_logits.empty());
    ASSERT_EQ(fused.decode_logits.size(), 4 * fused.prefill_logits.size());
    EXPECT_EQ(differing(split.prefill_logits, fused.prefill_logits), 0u) << "seed " << seed;
    EXPECT_EQ(differing(split.decode_logits, fused.decode_logits), 0u) << "seed " << seed;
    EXPECT_EQ(split.tokens, fused.tokens) << "seed " << seed;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, GdnInProjSplit, ::testing::Values("", "fp8", "int4"),
                         [](const auto& i) { return std::string(*i.param ? i.param : "bf16"); });

// Which layers split: Never and the CPU oracle's Auto (weights dequantized, one form) keep one
// matrix; Always splits every linear layer, and only those.
TEST(GdnInProjSplit, TableSplitsOnlyWhereAsked) {
    ModelWeights w;
    ASSERT_EQ(load_weights(synth("fp8", 5), &w), FROST_OK) << frost_last_error();
    qwen35::Precision p = qwen35::precision_for(ops::DType::F32);
    for (Split s : {Split::Auto, Split::Never, Split::Always}) {
        p.gdn_in_proj_split = s;
        qwen35::WeightViews v;
        int tails = 0, fused = 0;
        for (const auto& spec : qwen35::weight_table(w.config, w, p, &v)) {
            tails += spec.name.find(".in_proj_ba") != std::string::npos;
            fused += spec.name.find(".in_proj_qkvzba") != std::string::npos;
        }
        const int linear = w.config.num_linear_layers();
        ASSERT_GT(linear, 0);
        EXPECT_EQ(tails, s == Split::Always ? linear : 0) << int(s);
        EXPECT_EQ(fused, s == Split::Always ? 0 : linear) << int(s);
    }
}

}  // namespace
}  // namespace frost::model
