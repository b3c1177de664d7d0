// Synthetic checkpoints re-read and validated (single file and sharded, identical tensors),
// deterministic by seed, realistic value ranges; tokenizer copy; deployment fingerprint cached,
// reused and invalidated on mtime/content change, uncached in a read-only folder.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/fingerprint.h"
#include "model/model_files_util.h"
#include "model/safetensors.h"
#include "model/synth.h"
#include "model/weights.h"
#include "util/bf16.h"
#include "util/fs.h"

using namespace frost::model;
using namespace frost::testing;

namespace {

std::string synth(uint64_t seed, uint64_t shard_bytes = 4000000000ULL, const std::string& tok = "") {
    std::string dir = make_temp_dir("synth");
    SynthOptions o;
    o.out_dir = dir;
    o.preset = "tiny";
    o.seed = seed;
    o.shard_bytes = shard_bytes;
    o.tokenizer_dir = tok;
    EXPECT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    return dir;
}

std::pair<float, float> min_max(const TensorView& v) {
    float lo = INFINITY, hi = -INFINITY;
    const uint16_t* p = static_cast<const uint16_t*>(v.data);
    for (int64_t i = 0; i < v.numel(); ++i) {
        float f = frost::util::bf16_to_f32(p[i]);
        lo = std::min(lo, f);
        hi = std::max(hi, f);
    }
    return {lo, hi};
}

}  // namespace

TEST(Synth, TinyLoadsWithRealisticRanges) {
    std::string dir = synth(1);
    ModelWeights w;
    ASSERT_EQ(load_weights(dir, &w), FROST_OK) << frost_last_error();
    const ModelConfig& c = w.config;
    EXPECT_TRUE(c.multimodal_wrapper);
    EXPECT_EQ(c.hidden_size, 256);
    EXPECT_EQ(c.num_layers, 4);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 1);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.lin_num_k_heads, 2);
    EXPECT_EQ(c.lin_num_v_heads, 4);
    EXPECT_EQ(c.lin_k_head_dim, 32);
    EXPECT_EQ(c.vocab_size, 4096);
    EXPECT_EQ(c.intermediate_size, 512);
    EXPECT_TRUE(w.tied);
    EXPECT_FALSE(c.eos_token_ids.empty());
    auto [nlo, nhi] = min_max(w.layers[0].input_layernorm);
    EXPECT_GE(nlo, -0.11f);
    EXPECT_LE(nhi, 0.11f);
    auto [glo, ghi] = min_max(w.layers[0].lin.norm);
    EXPECT_GE(glo, 0.89f);
    EXPECT_LE(ghi, 1.11f);
    auto [alo, ahi] = min_max(w.layers[1].lin.A_log);
    EXPECT_GE(alo, 0.f);
    EXPECT_LE(ahi, std::log(16.f) + 0.01f);
    auto [dlo, dhi] = min_max(w.layers[1].lin.dt_bias);
    EXPECT_GE(dlo, -7.0f);  // softplus^-1(1e-3) ~ -6.9
    EXPECT_LE(dhi, -2.2f);  // softplus^-1(1e-1) ~ -2.25
    auto [plo, phi] = min_max(w.layers[0].mlp_gate);
    const float bound = std::sqrt(3.f / 256.f) * 1.01f;
    EXPECT_GE(plo, -bound);
    EXPECT_LE(phi, bound);
    EXPECT_GT(phi, bound * 0.9f) << "projection weights use their full range";
}

TEST(Synth, DeterministicShardedEqualsSingleFile) {
    std::string a = synth(7), b = synth(7), other = synth(8);
    std::string sharded = synth(7, 1000000);  // ~1 MB shards
    EXPECT_EQ(read_bytes(a + "/model.safetensors"), read_bytes(b + "/model.safetensors"));
    EXPECT_NE(read_bytes(a + "/model.safetensors"), read_bytes(other + "/model.safetensors"));
    ASSERT_TRUE(frost::util::file_exists(sharded + "/model.safetensors.index.json"));
    ASSERT_FALSE(frost::util::file_exists(sharded + "/model.safetensors"));
    std::shared_ptr<Checkpoint> one, many;
    ASSERT_EQ(Checkpoint::open_dir(a, &one), FROST_OK) << frost_last_error();
    ASSERT_EQ(Checkpoint::open_dir(sharded, &many), FROST_OK) << frost_last_error();
    EXPECT_GT(many->file_count(), 3u);
    ASSERT_EQ(one->tensors().size(), many->tensors().size());
    for (const auto& t : one->tensors()) {
        const CheckpointTensor* u = many->find(t.name);
        ASSERT_NE(u, nullptr) << t.name;
        EXPECT_EQ(u->shape, t.shape);
        ASSERT_EQ(u->bytes, t.bytes);
        EXPECT_EQ(std::memcmp(u->data, t.data, t.bytes), 0) << t.name;
    }
    ModelWeights w;
    EXPECT_EQ(load_weights(sharded, &w), FROST_OK) << frost_last_error();
}

TEST(Synth, TokenizerCopiedAndVocabRaised) {
    const std::string tok = fixture_dir("tokenizer-qwen3");
    std::string dir = synth(1, 4000000000ULL, tok);
    EXPECT_EQ(read_bytes(dir + "/tokenizer.json"), read_bytes(tok + "/tokenizer.json"));
    ModelConfig c;
    ASSERT_EQ(load_config(dir, &c), FROST_OK);
    EXPECT_EQ(c.vocab_size % 64, 0);
    EXPECT_GT(c.vocab_size, 151668);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));  // <|im_end|>, <|endoftext|>
    SynthOptions o;
    o.out_dir = make_temp_dir("synth_small");
    o.vocab = 1000;
    o.tokenizer_dir = tok;
    EXPECT_EQ(synth_checkpoint(o), FROST_ERR_INVALID_ARG);
    o.vocab = 0;
    o.preset = "70b";
    EXPECT_EQ(synth_checkpoint(o), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("tiny"), std::string::npos);
}

TEST(Fingerprint, CachedReusedAndInvalidated) {
    std::string dir = synth(3);
    const std::string cache_dir = make_temp_dir("fp_cache");
    ASSERT_EQ(setenv("FROST_CACHE_DIR", cache_dir.c_str(), 1), 0);
    const std::string cache_file = fingerprint_cache_path(dir);
    EXPECT_EQ(cache_file.rfind(cache_dir, 0), 0u) << cache_file;
    FingerprintResult r1, r2, r3, r4;
    ASSERT_EQ(model_fingerprint(dir, &r1), FROST_OK) << frost_last_error();
    EXPECT_EQ(r1.hex.size(), 64u);
    EXPECT_FALSE(r1.from_cache);
    EXPECT_TRUE(r1.cached);
    ASSERT_TRUE(frost::util::file_exists(cache_file));
    ASSERT_EQ(model_fingerprint(dir, &r2), FROST_OK);
    EXPECT_TRUE(r2.from_cache);
    EXPECT_EQ(r2.hex, r1.hex);
    // The cache really is trusted when path, sizes and mtimes match: plant a different digest.
    std::string cache = read_bytes(cache_file);
    std::string planted = cache;
    planted.replace(planted.find(r1.hex), 64, std::string(64, 'a'));
    write_bytes(cache_file, planted);
    ASSERT_EQ(model_fingerprint(dir, &r3), FROST_OK);
    EXPECT_EQ(r3.hex, std::string(64, 'a'));
    // Same size, new content and mtime: recomputed, different.
    std::string weights = read_bytes(dir + "/model.safetensors");
    weights[weights.size() - 1] ^= 1;
    write_bytes(dir + "/model.safetensors", weights);
    struct timespec times[2] = {{0, UTIME_NOW}, {1234567890, 5}};
    ASSERT_EQ(utimensat(AT_FDCWD, (dir + "/model.safetensors").c_str(), times, 0), 0);
    ASSERT_EQ(model_fingerprint(dir, &r4), FROST_OK);
    EXPECT_FALSE(r4.from_cache);
    EXPECT_NE(r4.hex, r1.hex);
    EXPECT_NE(r4.hex, std::string(64, 'a'));
    // Fingerprint of a fixture: the same twice, distinct from the synthetic model's.
    FingerprintResult fx, fx2;
    ASSERT_EQ(model_fingerprint(fixture_dir("qwen35-tiny-a"), &fx), FROST_OK) << frost_last_error();
    ASSERT_EQ(model_fingerprint(fixture_dir("qwen35-tiny-a"), &fx2), FROST_OK);
    EXPECT_EQ(fx.hex, fx2.hex);
    EXPECT_NE(fx.hex, r1.hex);
    unsetenv("FROST_CACHE_DIR");
}

// Frost never writes into a model folder (issue: the suite used to drop .frost-fingerprint.json
// into the fixtures): the folder's listing is unchanged after fingerprinting, a read-only folder
// works and is cached elsewhere, and an unwritable cache folder still yields the digest.
TEST(Fingerprint, NeverWritesIntoTheModelFolder) {
    std::string dir = synth(3);
    const std::string cache_dir = make_temp_dir("fp_cache_ro");
    ASSERT_EQ(setenv("FROST_CACHE_DIR", cache_dir.c_str(), 1), 0);
    std::vector<std::string> before, after;
    std::string err;
    ASSERT_TRUE(frost::util::list_dir(dir, &before, &err)) << err;
    ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
    FingerprintResult r1, r2;
    ASSERT_EQ(model_fingerprint(dir, &r1), FROST_OK) << frost_last_error();
    EXPECT_TRUE(r1.cached);
    ASSERT_EQ(model_fingerprint(dir, &r2), FROST_OK);
    EXPECT_TRUE(r2.from_cache);
    EXPECT_EQ(r1.hex, r2.hex);
    ASSERT_TRUE(frost::util::list_dir(dir, &after, &err)) << err;
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    EXPECT_EQ(before, after);
    ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
    // A cache location that cannot exist (a regular file in its path): digest still returned.
    const std::string blocker = cache_dir + "/file";
    write_bytes(blocker, "x");
    ASSERT_EQ(setenv("FROST_CACHE_DIR", (blocker + "/sub").c_str(), 1), 0);
    FingerprintResult r3;
    ASSERT_EQ(model_fingerprint(dir, &r3), FROST_OK) << frost_last_error();
    EXPECT_FALSE(r3.cached);
    EXPECT_EQ(r3.hex, r1.hex);
    unsetenv("FROST_CACHE_DIR");
}

// --layers keeps a released shape's first N layers: the same tensors (names, shapes, dtypes) as
// the whole preset for those layers, none of the later ones, and the same layer pattern.
TEST(Synth, LayersCutKeepsThePresetsFirstLayers) {
    SynthOptions full;
    full.out_dir = make_temp_dir("synth_full");
    full.preset = "35b-a3b";
    full.header_only = true;  // 70 GB of holes: shapes only
    ASSERT_EQ(synth_checkpoint(full), FROST_OK) << frost_last_error();
    SynthOptions cut = full;
    cut.out_dir = make_temp_dir("synth_cut");
    cut.layers = 5;
    ASSERT_EQ(synth_checkpoint(cut), FROST_OK) << frost_last_error();
    ModelConfig cf, cc;
    ASSERT_EQ(load_config(full.out_dir, &cf), FROST_OK) << frost_last_error();
    ASSERT_EQ(load_config(cut.out_dir, &cc), FROST_OK) << frost_last_error();
    EXPECT_EQ(cc.num_layers, 5);
    EXPECT_GT(cf.num_layers, 5);
    ASSERT_EQ(cc.layer_types.size(), 5u);
    for (int l = 0; l < 5; ++l) EXPECT_EQ(cc.layer_types[l], cf.layer_types[l]) << "layer " << l;
    EXPECT_EQ(cc.num_experts, cf.num_experts);
    std::shared_ptr<Checkpoint> a, b;
    ASSERT_EQ(Checkpoint::open_dir(full.out_dir, &a), FROST_OK) << frost_last_error();
    ASSERT_EQ(Checkpoint::open_dir(cut.out_dir, &b), FROST_OK) << frost_last_error();
    size_t kept = 0;
    for (const auto& t : a->tensors()) {
        const auto at = t.name.find("layers.");
        const int layer = at == std::string::npos ? -1 : std::atoi(t.name.c_str() + at + 7);
        const CheckpointTensor* u = b->find(t.name);
        if (layer >= 5) {
            EXPECT_EQ(u, nullptr) << t.name;
            continue;
        }
        ASSERT_NE(u, nullptr) << t.name;
        EXPECT_EQ(u->shape, t.shape) << t.name;
        EXPECT_EQ(u->bytes, t.bytes) << t.name;
        ++kept;
    }
    EXPECT_EQ(kept, b->tensors().size());
    cut.layers = cf.num_layers + 1;
    cut.out_dir = make_temp_dir("synth_cut_bad");
    EXPECT_EQ(synth_checkpoint(cut), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("--layers"), std::string::npos) << frost_last_error();
}
