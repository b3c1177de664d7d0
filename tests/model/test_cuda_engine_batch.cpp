// Batched decode on the CUDA engine (issue 16): every session's tokens and final state under
// Engine::decode_batch (members joining and leaving, greedy and seeded, B up to 8 and odd B)
// equal its solo run on a one-session CUDA engine, bit for bit, on the dense and MoE tiny-gpu
// synthetic models and kept-quantized tiny-gpu checkpoints (dense and MoE); no batched step
// recaptures. Run twice: with EngineOptions::cuda_batched_decode (the batched kernels: one captured graph per B,
// the multi-row GEMV, MoE rows through the per-row decode kernels) and without it (members one
// by one). Sliced prefill beside the batched steps too. Skipped without a CUDA device (CI);
// the GPU machine runs it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "model/batch_test_util.h"
#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/synth.h"

namespace frost::model {
namespace {

// preset, or "preset:quant" for a kept-quantized checkpoint (synth --quant).
std::string synth_dir(const std::string& name) {
    const auto colon = name.find(':');
    const std::string preset = name.substr(0, colon);
    SynthOptions o;
    if (colon != std::string::npos) o.quant = name.substr(colon + 1);
    std::string leaf = "frost-cuda-batch-" + std::to_string(::getpid());
    leaf.append("-").append(preset);
    if (!o.quant.empty()) leaf.append("-").append(o.quant);
    o.out_dir = (std::filesystem::temp_directory_path() / leaf).string();
    o.preset = preset;
    o.seed = 4243;
    o.decisive_router = preset.find("moe") != std::string::npos;
    if (!std::filesystem::exists(o.out_dir + "/config.json")) {
        EXPECT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    }
    return o.out_dir;
}

std::unique_ptr<Engine> make(const std::string& dir, int sessions, bool kernels = false) {
    EngineOptions o;
    o.cuda_batched_decode = kernels;
    o.backend = FROST_BACKEND_CUDA;
    o.max_seq_len = 256;
    o.prefill_chunk = 64;
    o.sessions = sessions;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    return e;
}

void check(const std::string& preset, int S, bool sampled, bool staggered, bool kernels, bool sliced = false) {
    const unsigned seed = std::random_device{}();
    SCOPED_TRACE(preset + " S=" + std::to_string(S) + (sampled ? " sampled" : " greedy") +
                 (kernels ? " batched kernels" : " one by one") + " seed=" + std::to_string(seed));
    const std::string dir = synth_dir(preset);
    auto one = make(dir, 1);
    auto many = make(dir, S, kernels);
    ASSERT_TRUE(one && many);
    if (kernels) {
        EXPECT_FALSE(many->batch_sizes().empty()) << "cuda_batched_decode captured no batched graph";
    }
    std::mt19937 rng(seed);
    auto plans = batch_test::random_plans(rng, S, many->config().vocab_size, sampled, staggered);
    std::mt19937 layers(seed + 1);
    if (sliced) {  // prompts admitted a few layers at a time beside the batched steps (pieces <= 64)
        EXPECT_EQ(many->slice_rows(), 64);
        batch_test::random_pieces(rng, many->slice_rows(), &plans);
    }
    const uint64_t captures = many->capture_count();
    const auto got = batch_test::batched(*many, plans, nullptr, sliced ? &layers : nullptr);
    EXPECT_EQ(many->capture_count(), captures);
    for (int s = 0; s < S; ++s) {
        const auto want = batch_test::solo(*one, plans[size_t(s)]);
        EXPECT_EQ(got[size_t(s)].tokens, want.tokens) << "session " << s;
        EXPECT_TRUE(got[size_t(s)].state == want.state) << "session " << s << " state differs";
    }
    std::printf("[ cuda batch %s S=%d ] batched graphs: %zu sizes\n", preset.c_str(), S, many->batch_sizes().size());
}

TEST(CudaEngineBatch, DenseMatchesSolo) {
    SKIP_WITHOUT_CUDA();
    for (bool kernels : {true, false}) {
        check("tiny-gpu", 8, false, false, kernels);
        check("tiny-gpu", 5, true, true, kernels);
        check("tiny-gpu", 3, true, false, kernels);
    }
}

// Kept-quantized weights (FP8 block, NVFP4, INT4): the quantized tensor-core GEMV takes the
// members' rows, each with its solo bits.
TEST(CudaEngineBatch, QuantizedMatchesSolo) {
    SKIP_WITHOUT_CUDA();
    check("tiny-gpu:fp8", 4, false, true, true);
    check("tiny-gpu:nvfp4", 8, true, false, true);
    check("tiny-gpu:int4", 3, false, false, true);
    // Quantized MoE experts: each member's (row, expert) entries of the routed expert GEMVs.
    check("moe-tiny-gpu:fp8", 4, false, true, true);
    check("moe-tiny-gpu:nvfp4", 8, true, false, true);
    check("next-moe-tiny-gpu:int4", 5, false, false, true);
    check("moe-tiny-gpu:int4", 3, true, true, false);
    // The shared expert folded into the routed launches (I = Is = 128): its entries per member too.
    check("moe-tiny-gpu-i128:fp8", 4, false, true, true);
    check("moe-tiny-gpu-i128:int4", 3, true, false, true);
}

TEST(CudaEngineBatch, MoeMatchesSolo) {
    SKIP_WITHOUT_CUDA();
    check("moe-tiny-gpu", 4, false, true, true);
    check("moe-tiny-gpu", 8, false, false, true);
    check("moe-tiny-gpu", 5, true, true, true);
    check("moe-tiny-gpu", 6, true, false, false);
}

// Sliced prefill (Engine::prefill_slices_*): a joining session's prompt runs a random number of
// layers per call with the others' batched steps between; every session keeps its solo bits.
TEST(CudaEngineBatch, SlicedPrefillBesideBatchedDecodeMatchesSolo) {
    SKIP_WITHOUT_CUDA();
    check("tiny-gpu", 6, false, true, true, true);
    check("tiny-gpu", 4, true, true, true, true);
    check("tiny-gpu:fp8", 3, false, true, true, true);
    check("moe-tiny-gpu", 4, false, true, true, true);
    check("moe-tiny-gpu:fp8", 3, false, true, true, true);
}

}  // namespace
}  // namespace frost::model
