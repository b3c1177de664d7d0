// Fast loader on the CPU backend: uploaded bytes equal the mapped tensors (de-interleaved and
// unaligned ones included), small staging buffers force tensors to span fills, injected
// allocation / I/O faults and a file shrunk after open fail cleanly with nothing left allocated.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

#include "model/loader.h"
#include "model/model_files_util.h"
#include "model/synth.h"
#include "model/weights.h"

using namespace frost::model;
using namespace frost::testing;

namespace {

struct Ctx {
    frost_ctx* ctx = nullptr;
    Ctx() { EXPECT_EQ(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx), FROST_OK) << frost_last_error(); }
    ~Ctx() { frost_ctx_destroy(ctx); }
    uint64_t live() const {
        frost_ctx_stats s{};
        frost_ctx_get_stats(ctx, &s);
        return s.live_buffers + s.live_streams + s.live_events;
    }
};

std::string tiny_model() {
    static std::string dir;
    if (dir.empty()) {
        dir = make_temp_dir("loader");
        SynthOptions o;
        o.out_dir = dir;
        o.seed = 11;
        EXPECT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    }
    return dir;
}

void expect_equal_to_views(const ModelWeights& w, const UploadedWeights& u) {
    auto check = [&](const TensorView& v) {
        if (!v.present()) return;
        const UploadedTensor* t = u.find(v.name);
        ASSERT_NE(t, nullptr) << v.name;
        ASSERT_EQ(t->bytes, v.bytes) << v.name;
        EXPECT_EQ(t->offset % kWeightAlignment, 0u);
        const uint8_t* got = static_cast<const uint8_t*>(frost_buffer_ptr(t->buffer)) + t->offset;
        EXPECT_EQ(std::memcmp(got, v.data, v.bytes), 0) << v.name;
    };
    check(w.embed_tokens);
    check(w.final_norm);
    check(w.lm_head);
    for (const auto& L : w.layers) {
        for (const TensorView* v : {&L.input_layernorm, &L.post_attention_layernorm, &L.mlp_gate, &L.mlp_up, &L.mlp_down,
                                    &L.lin.in_proj_qkv, &L.lin.in_proj_z, &L.lin.in_proj_b, &L.lin.in_proj_a, &L.lin.conv1d,
                                    &L.lin.A_log, &L.lin.dt_bias, &L.lin.norm, &L.lin.out_proj, &L.full.q_proj,
                                    &L.full.k_proj, &L.full.v_proj, &L.full.o_proj, &L.full.q_norm, &L.full.k_norm})
            check(*v);
    }
}

}  // namespace

TEST(Loader, UploadEqualsMappedTensorsAcrossStagingSizes) {
    ModelWeights w;
    ASSERT_EQ(load_weights(tiny_model(), &w), FROST_OK) << frost_last_error();
    Ctx c;
    const uint64_t baseline = c.live();
    for (size_t staging : {size_t(4096), size_t(100000), size_t(64) << 20, size_t(0)}) {
        WeightUploadOptions opt;
        // staging 0 = the direct path (reads straight into host-addressable weights); the others
        // force the double-buffered staging path the GPU uses.
        opt.direct_when_host = staging == 0;
        opt.staging_bytes = staging ? staging : opt.staging_bytes;
        opt.read_threads = 3;
        opt.read_chunk_bytes = 1000;  // many small preads in flight per fill
        opt.progress = false;
        UploadedWeights u;
        ASSERT_EQ(upload_weights(c.ctx, w, opt, &u), FROST_OK) << frost_last_error();
        // Poison-free check: the buffer was filled only by the loader, compare every byte.
        expect_equal_to_views(w, u);
        EXPECT_EQ(u.bytes_from_files + u.bytes_from_memory, w.total_bytes());
        ASSERT_NE(u.find("lm_head.weight"), nullptr);
        EXPECT_EQ(u.find("lm_head.weight")->offset, u.find(w.embed_tokens.name)->offset) << "tied";
        EXPECT_EQ(u.release(), FROST_OK);
        EXPECT_EQ(c.live(), baseline);
    }
}

TEST(Loader, FixtureAndDeinterleavedMemorySources) {
    ModelWeights w;
    ASSERT_EQ(load_weights(fixture_dir("qwen35-tiny-a-vl"), &w), FROST_OK) << frost_last_error();
    Ctx c;
    WeightUploadOptions opt;
    opt.staging_bytes = 300000;
    opt.progress = false;
    UploadedWeights u;
    ASSERT_EQ(upload_weights(c.ctx, w, opt, &u), FROST_OK) << frost_last_error();
    expect_equal_to_views(w, u);
    EXPECT_EQ(u.find("model.visual.blocks.0.attn.qkv.weight"), nullptr);
    u.release();
}

TEST(Loader, InjectedFaultsLeaveNothingAllocated) {
    ModelWeights w;
    ASSERT_EQ(load_weights(tiny_model(), &w), FROST_OK) << frost_last_error();
    Ctx c;
    const uint64_t baseline = c.live();
    WeightUploadOptions opt;
    opt.staging_bytes = 65536;
    opt.progress = false;
    opt.direct_when_host = false;  // the staging path allocates 3 buffers: fail each in turn
    for (uint64_t nth = 1; nth <= 3; ++nth) {
        frost_fault_arm(FROST_FAULT_ALLOC, nth, 0);
        UploadedWeights u;
        EXPECT_EQ(upload_weights(c.ctx, w, opt, &u), FROST_ERR_OUT_OF_MEMORY) << nth;
        EXPECT_EQ(u.buffer, nullptr);
        frost_fault_clear();
        EXPECT_EQ(c.live(), baseline);
    }
    for (bool direct : {false, true}) {
        opt.direct_when_host = direct;
        frost_fault_arm(FROST_FAULT_IO, 5, 0);
        UploadedWeights u;
        EXPECT_EQ(upload_weights(c.ctx, w, opt, &u), FROST_ERR_IO);
        EXPECT_NE(std::string(frost_last_error()).find("injected"), std::string::npos) << frost_last_error();
        frost_fault_clear();
        EXPECT_EQ(c.live(), baseline);
    }
}

TEST(Loader, T06FileShrunkAfterOpenFailsCleanly) {
    std::string dir = make_temp_dir("loader_shrink");
    copy_config(tiny_model(), dir);
    write_bytes(dir + "/model.safetensors", read_bytes(tiny_model() + "/model.safetensors"));
    ModelWeights w;
    ASSERT_EQ(load_weights(dir, &w), FROST_OK) << frost_last_error();
    ASSERT_EQ(truncate((dir + "/model.safetensors").c_str(), 1 << 20), 0);
    Ctx c;
    const uint64_t baseline = c.live();
    for (bool direct : {false, true}) {
        WeightUploadOptions opt;
        opt.progress = false;
        opt.direct_when_host = direct;
        UploadedWeights u;
        EXPECT_EQ(upload_weights(c.ctx, w, opt, &u), FROST_ERR_IO);
        EXPECT_NE(std::string(frost_last_error()).find("model.safetensors"), std::string::npos) << frost_last_error();
        EXPECT_EQ(c.live(), baseline);
    }
}
