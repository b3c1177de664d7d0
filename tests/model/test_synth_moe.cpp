// MoE synth presets: moe-tiny (Qwen3.5-MoE wrapper layout) and next-moe-tiny (Qwen3-Next flat
// layout, fused in_proj_qkvz / in_proj_ba, every other layer sparse) bind and run on the CPU
// engine: prefill + greedy decode equal a token-by-token feed of the same ids (one decode graph
// reused, no recapture), logits finite. The released-shape presets (35b-a3b, next-80b-a3b) carry
// the spec's shapes, and their parameter counts, computed here from the shape alone, land at the
// names' "35B total / 3B active" and "80B / 3B". --decisive-router: every token's router top-k gap
// (fp32 CPU engine trace, prompt and decode) is >= 0.05 while routing still varies by token; the
// same preset without it has near-ties (so the option is what the CUDA parity test relies on).
// header_only (`synth --header-only`): the same files, sizes and headers with the data left as
// holes, so next-80b-a3b (160 GB) binds through the strict loader here without being written.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "model/model_files_util.h"
#include "model/moe_gap_util.h"
#include "model/synth.h"
#include "model/weights.h"
#include "util/fs.h"

using namespace frost::model;
using namespace frost::testing;

namespace {

std::string synth(const std::string& preset, uint64_t seed) {
    SynthOptions o;
    o.out_dir = make_temp_dir("synth_moe");
    o.preset = preset;
    o.seed = seed;
    EXPECT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    return o.out_dir;
}

// Total and active parameters of a preset from its shape (spec §2-3), independent of the writer.
std::pair<double, double> preset_params(const SynthPreset& p) {
    const double H = p.hidden, V = p.vocab, d = p.head_dim;
    const double Q = double(p.lin_k_heads) * p.lin_k_dim, Vd = double(p.lin_v_heads) * p.lin_v_dim;
    const double C = 2 * Q + Vd, Hv = p.lin_v_heads;
    const double linear = H * C + H * Vd + 2 * H * Hv + 4 * C + 2 * Hv + p.lin_v_dim + Vd * H;
    const double full = H * 2 * p.heads * d + 2 * H * p.kv_heads * d + p.heads * d * H + 2 * d;
    double total = V * H * (p.tied ? 1 : 2) + H, idle = 0;
    for (int l = 0; l < p.layers; ++l) {
        total += 2 * H + ((l + 1) % 4 ? linear : full);
        if (p.moe_experts > 0 && (l + 1) % p.sparse_step == 0) {
            total += p.moe_experts * H + 3 * H * p.moe_shared_ffn + H + p.moe_experts * 3.0 * H * p.moe_ffn;
            idle += (p.moe_experts - p.moe_top_k) * 3.0 * H * p.moe_ffn;
        } else {
            total += 3 * H * p.ffn;
        }
    }
    return {total, total - idle};
}

}  // namespace

TEST(SynthMoe, ReleasedShapePresetsMatchTheSpec) {
    SynthPreset a, n;
    ASSERT_TRUE(find_synth_preset("35b-a3b", &a));
    EXPECT_EQ(a.hidden, 2048);
    EXPECT_EQ(a.layers, 40);
    EXPECT_EQ(a.moe_experts, 256);
    EXPECT_EQ(a.moe_top_k, 8);
    EXPECT_EQ(a.moe_ffn, 512);
    EXPECT_EQ(a.moe_shared_ffn, 512);
    EXPECT_EQ(a.vocab, 248320);
    EXPECT_FALSE(a.qwen3_next);
    auto [at, aa] = preset_params(a);
    EXPECT_GT(at, 34e9);
    EXPECT_LT(at, 36e9);
    EXPECT_GT(aa, 2.5e9);
    EXPECT_LT(aa, 4e9);
    ASSERT_TRUE(find_synth_preset("next-80b-a3b", &n));
    EXPECT_TRUE(n.qwen3_next);
    EXPECT_EQ(n.layers, 48);
    EXPECT_EQ(n.moe_experts, 512);
    EXPECT_EQ(n.moe_top_k, 10);
    EXPECT_EQ(n.vocab, 151936);
    auto [nt, na] = preset_params(n);
    EXPECT_GT(nt, 79e9);
    EXPECT_LT(nt, 82e9);
    EXPECT_GT(na, 2.5e9);
    EXPECT_LT(na, 4e9);
}

class SynthMoePresets : public ::testing::TestWithParam<const char*> {};

TEST_P(SynthMoePresets, BindsAndGeneratesOnTheCpuEngine) {
    const std::string preset = GetParam();
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    const std::string dir = synth(preset, seed);
    SynthPreset p;
    ASSERT_TRUE(find_synth_preset(preset, &p));
    ModelWeights w;
    ASSERT_EQ(load_weights(dir, &w), FROST_OK) << frost_last_error();
    const ModelConfig& c = w.config;
    EXPECT_EQ(c.family, p.qwen3_next ? Family::Qwen3Next : Family::Qwen35Moe);
    EXPECT_EQ(c.multimodal_wrapper, !p.qwen3_next);
    EXPECT_EQ(c.num_experts, p.moe_experts);
    for (int l = 0; l < c.num_layers; ++l) EXPECT_EQ(w.layers[l].is_moe, (l + 1) % p.sparse_step == 0) << l;
    const ParamCounts pc = count_params(w);
    const auto [total, active] = preset_params(p);
    EXPECT_EQ(double(pc.total), total);
    EXPECT_EQ(double(pc.active), active);

    EngineOptions o;
    o.max_seq_len = 256;
    o.prefill_chunk = 64;
    o.sessions = 2;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create_from_weights(w, o, &e), FROST_OK) << frost_last_error();
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
    std::vector<int32_t> prompt(70);  // two prefill chunks (64 + 6)
    for (auto& x : prompt) x = tok(rng);
    const uint64_t captures = e->capture_count();
    // Session 0: prefill then greedy decode; session 1: the same prompt fed token by token
    // through the decode graph (recurrent GDN, one row per MoE launch): same logits to fp32 noise.
    int32_t next = -1, fed = -1;
    ASSERT_EQ(e->prefill(0, prompt.data(), prompt.size(), &next), FROST_OK) << frost_last_error();
    std::vector<float> chunked, stepped;
    ASSERT_EQ(e->last_logits(0, &chunked), FROST_OK);
    for (int32_t t : prompt) ASSERT_EQ(e->feed(1, t, &fed), FROST_OK) << frost_last_error();
    ASSERT_EQ(e->last_logits(1, &stepped), FROST_OK);
    double num = 0, den = 0;
    for (size_t i = 0; i < chunked.size(); ++i) {
        ASSERT_TRUE(std::isfinite(chunked[i]));
        num += (double(chunked[i]) - stepped[i]) * (double(chunked[i]) - stepped[i]);
        den += double(stepped[i]) * stepped[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-4) << "prefill graphs and the decode graph disagree";
    std::vector<int32_t> gen = {next};
    for (int i = 0; i < 12; ++i) {
        ASSERT_EQ(e->decode(0, &next), FROST_OK) << frost_last_error();
        gen.push_back(next);
    }
    EXPECT_EQ(e->capture_count(), captures) << "generation replays the captured graphs";
    std::set<int32_t> distinct(gen.begin(), gen.end());
    EXPECT_GT(distinct.size(), 1u) << "random weights should not produce one repeated token";
}

INSTANTIATE_TEST_SUITE_P(Tiny, SynthMoePresets,
                         ::testing::Values("moe-tiny", "next-moe-tiny", "moe-tiny-gpu", "next-moe-tiny-gpu", "moe-tiny-gpu-i128"));

namespace {

// Smallest router gap over a 300-token prompt (one prefill step, traced) and 16 greedy steps,
// and how many distinct expert selections the tokens made.
std::pair<double, size_t> conditioning(const std::string& dir, uint64_t seed) {
    EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 320;
    o.trace = true;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    if (!e) return {0, 0};
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, e->config().vocab_size - 1);
    std::vector<int32_t> prompt(300);
    for (auto& x : prompt) x = tok(rng);
    int32_t next = -1;
    EXPECT_EQ(e->prefill(0, prompt.data(), prompt.size(), &next), FROST_OK) << frost_last_error();
    const frost::test::RouterGaps g = frost::test::router_gaps(*e, int(prompt.size()));
    double worst = *std::min_element(g.gap.begin(), g.gap.end());
    std::set<std::vector<int>> sets(g.experts.begin(), g.experts.end());
    for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(e->decode(0, &next), FROST_OK) << frost_last_error();
        const auto d = frost::test::router_gaps(*e, 1);
        worst = std::min(worst, d.gap[0]);
        sets.insert(d.experts[0]);
    }
    return {worst, sets.size()};
}

}  // namespace

TEST_P(SynthMoePresets, DecisiveRouterGivesEveryTokenALargeTopKGap) {
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    SynthOptions o;
    o.out_dir = make_temp_dir("synth_moe_decisive");
    o.preset = GetParam();
    o.seed = seed;
    o.decisive_router = true;
    ASSERT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    const auto [gap, sets] = conditioning(o.out_dir, seed);
    const auto [plain_gap, plain_sets] = conditioning(synth(GetParam(), seed), seed);
    std::printf("[ %s seed %llu ] min router top-k gap: decisive %.4f (%zu expert selections), plain %.2e (%zu)\n",
                GetParam(), (unsigned long long)seed, gap, sets, plain_gap, plain_sets);
    EXPECT_GE(gap, 0.05) << "the decisive router left a near-tie";
    EXPECT_GE(sets, 4u) << "routing should still vary by token";
    EXPECT_LT(plain_gap, 0.05) << "without the option the random router should have near-ties";
}

TEST(SynthMoe, DecisiveRouterRejectsDense) {
    SynthOptions o;
    o.out_dir = make_temp_dir("synth_moe_decisive_bad");
    o.decisive_router = true;
    o.preset = "tiny";
    EXPECT_EQ(synth_checkpoint(o), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("--decisive-router"), std::string::npos) << frost_last_error();
}

// With --quant the writer quantizes the rewritten projections (their routing rows stay exactly
// zero in every format; the router, norms and embedding stay bf16): the gap holds as in bf16, so
// the quantized MoE engine tests route every token alike on both paths.
TEST(SynthMoe, DecisiveRouterHoldsWithQuantizedProjections) {
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    for (const char* quant : {"fp8", "int4", "nvfp4"}) {
        SynthOptions o;
        o.out_dir = make_temp_dir((std::string("synth_moe_decisive_") + quant).c_str());
        o.preset = "moe-tiny";
        o.seed = seed;
        o.quant = quant;
        o.decisive_router = true;
        ASSERT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
        const auto [gap, sets] = conditioning(o.out_dir, seed);
        std::printf("[ moe-tiny --quant %s seed %llu ] min router top-k gap %.4f (%zu expert selections)\n", quant,
                    (unsigned long long)seed, gap, sets);
        EXPECT_GE(gap, 0.05) << quant << ": the decisive router left a near-tie";
        EXPECT_GE(sets, 4u) << quant;
    }
}

namespace {

struct FileFacts {
    uint64_t size = 0;
    uint64_t disk = 0;  // bytes of allocated blocks
};

FileFacts file_facts(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return {uint64_t(st.st_size), uint64_t(st.st_blocks) * 512};
}

}  // namespace

// A header-only checkpoint is the real one minus its data: same file, same size, byte-identical
// safetensors header, and a data region that reads as zeros and takes (almost) no disk.
TEST(SynthMoe, HeaderOnlyIsTheFullLayoutWithHolesForData) {
    SynthOptions o;
    o.preset = "next-moe-tiny";
    o.seed = 3;
    o.out_dir = make_temp_dir("synth_full");
    ASSERT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    const std::string full = o.out_dir;
    o.out_dir = make_temp_dir("synth_header_only");
    o.header_only = true;
    SynthSummary s;
    ASSERT_EQ(synth_checkpoint(o, &s), FROST_OK) << frost_last_error();
    for (const std::string name : {"config.json", "model.safetensors"}) {
        EXPECT_EQ(file_facts(full + "/" + name).size, file_facts(o.out_dir + "/" + name).size) << name;
    }
    const std::string a = read_bytes(full + "/model.safetensors"), b = read_bytes(o.out_dir + "/model.safetensors");
    ASSERT_GT(a.size(), 8u);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; ++i) hlen |= uint64_t(uint8_t(a[size_t(i)])) << (8 * i);
    ASSERT_LT(8 + hlen, a.size());
    EXPECT_EQ(a.substr(0, 8 + hlen), b.substr(0, 8 + hlen)) << "header differs from the full checkpoint's";
    EXPECT_EQ(b.size() - 8 - hlen, s.tensor_bytes);
    EXPECT_EQ(b.find_first_not_of('\0', 8 + hlen), std::string::npos) << "data region should be holes (zeros)";
    EXPECT_NE(a.find_first_not_of('\0', 8 + hlen), std::string::npos);
    EXPECT_LT(file_facts(o.out_dir + "/model.safetensors").disk, s.tensor_bytes / 4) << "data was written";
    EXPECT_EQ(read_bytes(full + "/config.json"), read_bytes(o.out_dir + "/config.json"));
}

// The Qwen3-Next-80B-A3B shape binds through the strict loader (every name, shape and dtype of
// 48 layers, 512 experts each, fused interleaved GDN projections regrouped) without writing its
// 160 GB: the parameter counts equal the ones computed from the shape alone.
TEST(SynthMoe, Next80bA3bHeaderOnlyBindsWithItsParameterCounts) {
    SynthOptions o;
    o.preset = "next-80b-a3b";
    o.out_dir = make_temp_dir("synth_next80b");
    o.header_only = true;
    SynthSummary s;
    ASSERT_EQ(synth_checkpoint(o, &s), FROST_OK) << frost_last_error();
    EXPECT_GT(s.tensor_bytes, 150e9);
    ASSERT_GT(s.shards, 1u);
    uint64_t disk = 0;
    std::string err;
    std::vector<std::string> names;
    ASSERT_TRUE(frost::util::list_dir(o.out_dir, &names, &err)) << err;
    for (const auto& n : names) disk += file_facts(o.out_dir + "/" + n).disk;
    EXPECT_LT(disk, uint64_t(256) << 20) << "a header-only checkpoint should take no disk for its data";

    SynthPreset p;
    ASSERT_TRUE(find_synth_preset("next-80b-a3b", &p));
    ModelWeights w;
    ASSERT_EQ(load_weights(o.out_dir, &w), FROST_OK) << frost_last_error();
    const ModelConfig& c = w.config;
    EXPECT_EQ(c.family, Family::Qwen3Next);
    EXPECT_EQ(c.num_layers, 48);
    EXPECT_EQ(c.num_experts, 512);
    EXPECT_EQ(c.num_experts_per_tok, 10);
    EXPECT_EQ(c.num_full_layers(), 12);
    for (int l = 0; l < c.num_layers; ++l) EXPECT_EQ(w.layers[size_t(l)].is_moe, (l + 1) % p.sparse_step == 0) << l;
    const ParamCounts pc = count_params(w);
    const auto [total, active] = preset_params(p);
    EXPECT_EQ(double(pc.total), total);
    EXPECT_EQ(double(pc.active), active);
    std::printf("[ next-80b ] %zu shards, %.1f GB of tensors, %.1f MB on disk; params %.2f B total, %.2f B active\n",
                s.shards, double(s.tensor_bytes) / 1e9, double(disk) / 1e6, double(pc.total) / 1e9,
                double(pc.active) / 1e9);
}
