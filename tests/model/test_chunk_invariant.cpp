// EngineOptions::chunk_invariant: a row's bits do not depend on how the prompt was cut into
// prefill chunks, so a capsule's restore + append equals a cold prefill bit for bit at any length.
//
// On CUDA the default engine does not promise that: a chunk's row count picks its attention kernel
// (mma.sync with key splits, the Hopper kernel, the Hopper kernel with key splits) and each GEMM's
// cuBLASLt algorithm. The capsule suites' tiny-gpu shapes happen to choose alike for their short
// chunks; a released model's long cold chunk and short append do not. So the CUDA cases here run
// the 0.8B's own heads (8 q / 2 KV of 256, hidden 1024; its first four layers: three GDN and one
// attention layer) with cold prompts of up to 2.6k tokens against appends of 64 to 2100 tokens,
// and the MoE grouped GEMMs on moe-tiny-gpu. The CPU engine is chunk-invariant either way: there
// the option changes nothing, and the numerics string (which capsules bind to) says so.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/capsule_exactness_util.h"
#include "model/capsule_test_util.h"
#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/model_files_util.h"
#include "model/synth.h"

namespace frost::model {
namespace {

std::unique_ptr<Engine> make_engine(const std::string& dir, frost_backend b, bool invariant, int chunk, int max_seq,
                                    bool w8a8 = false, frost_status* status = nullptr) {
    EngineOptions o;
    o.backend = b;
    o.sessions = 3;
    o.prefill_chunk = chunk;
    o.max_seq_len = max_seq;
    o.chunk_invariant = invariant;
    o.fp8_w8a8_prefill = w8a8;
    std::unique_ptr<Engine> e;
    const frost_status s = Engine::create(dir, o, &e);
    if (status) *status = s;
    return e;
}

std::string synth(const std::string& tag, const std::string& preset, int layers, int vocab, bool decisive = false) {
    SynthOptions so;
    so.out_dir = frost::testing::make_temp_dir(tag);
    so.preset = preset;
    so.layers = layers;
    so.vocab = vocab;
    so.seed = 4242;
    so.decisive_router = decisive;
    const frost_status s = synth_checkpoint(so);
    EXPECT_EQ(s, FROST_OK) << frost_last_error();
    return so.out_dir;
}

// The CPU engine's rows never depended on their chunk: the option is accepted, leaves the numerics
// (and so the capsule binding) as they were, and restore + append still equals cold.
TEST(ChunkInvariant, CpuEngineAcceptsItWithoutChangingItsNumerics) {
    const std::string& dir = test::capsule_model_dir();
    auto plain = make_engine(dir, FROST_BACKEND_CPU, false, test::kCapsuleChunk, test::kCapsuleMaxSeq);
    auto inv = make_engine(dir, FROST_BACKEND_CPU, true, test::kCapsuleChunk, test::kCapsuleMaxSeq);
    ASSERT_TRUE(plain && inv) << frost_last_error();
    EXPECT_EQ(inv->numerics(), plain->numerics());
    EXPECT_EQ(inv->numerics().find("chunk_invariant"), std::string::npos) << inv->numerics();
    test::expect_restore_append_equals_cold(*inv, dir, "cpu_chunk_invariant_store", {{64, 150}, {192, 77}});
}

// The numerics name the mode on CUDA (a capsule made without it is refused by an engine with it),
// and the W8A8 FP8 prefill, whose plans are per row count, is refused with it by name.
TEST(ChunkInvariant, CudaNumericsNameItAndW8a8PrefillIsRefused) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth("chunk_invariant_names", "tiny-gpu", 0, 512);
    auto plain = make_engine(dir, FROST_BACKEND_CUDA, false, 128, 512);
    auto inv = make_engine(dir, FROST_BACKEND_CUDA, true, 128, 512);
    ASSERT_TRUE(plain && inv) << frost_last_error();
    EXPECT_EQ(inv->numerics(), plain->numerics() + ";chunk_invariant");
    frost_status s = FROST_OK;
    EXPECT_FALSE(make_engine(dir, FROST_BACKEND_CUDA, true, 128, 512, true, &s));
    EXPECT_EQ(s, FROST_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(frost_last_error()).find("fp8_w8a8_prefill"), std::string::npos) << frost_last_error();
}

// The 0.8B's heads: cold prompts of 1121 to 2584 tokens (chunks of 2048 and a remainder) against a
// capsule of 64 to 2048 tokens plus 64 to 2100 appended (buckets 64 to 2048). Without the option
// the 1121-token cold chunk runs the Hopper kernel and the 97-token append the mma.sync kernel
// with key splits, and the GEMMs other algorithms: `frost bench capsule` shows such logits differ.
TEST(ChunkInvariant, CudaRestoreAppendEqualsColdAtTheHeadsOfTheReleased08b) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth("chunk_invariant_08b", "0.8b", 4, 2048);
    auto e = make_engine(dir, FROST_BACKEND_CUDA, true, 2048, 2752);
    ASSERT_TRUE(e) << frost_last_error();
    test::expect_restore_append_equals_cold(*e, dir, "cuda_chunk_invariant_store",
                                            {{1024, 97}, {1984, 600}, {64, 2100}, {2048, 64}});
}

// The MoE grouped GEMMs and the router's dense GEMM across buckets: one tile shape, one algorithm.
TEST(ChunkInvariant, CudaMoeRestoreAppendEqualsCold) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth("chunk_invariant_moe", "moe-tiny-gpu", 0, 512, true);
    auto e = make_engine(dir, FROST_BACKEND_CUDA, true, 512, 1280);
    ASSERT_TRUE(e) << frost_last_error();
    test::expect_restore_append_equals_cold(*e, dir, "cuda_moe_chunk_invariant_store",
                                            {{64, 700}, {512, 97}, {960, 200}});
}

// The shape the server suites run on CUDA (scripts/gpu/run_all.sh serve): tiny-gpu with the Qwen3
// tokenizer's vocabulary, the server's default prefill chunk and a 1024-token context. A turn's
// capsule sits at a multiple of 64 and the next turn's prompt runs past it.
TEST(ChunkInvariant, CudaRestoreAppendEqualsColdOnTheServeSuitesShape) {
    SKIP_WITHOUT_CUDA();
    const std::string dir = synth("chunk_invariant_serve", "tiny-gpu", 0, 151680);
    auto e = make_engine(dir, FROST_BACKEND_CUDA, true, 0, 1024);
    ASSERT_TRUE(e) << frost_last_error();
    test::expect_restore_append_equals_cold(*e, dir, "cuda_chunk_invariant_serve_store",
                                            {{128, 45}, {192, 9}, {64, 300}, {448, 1}});
}

}  // namespace
}  // namespace frost::model
