// The pipelined loader uploads every MoE tensor: a moe-tiny synth sharded into many small files
// (and the fixture's wrapper layout) uploads router, every expert and the shared expert with bytes
// equal to the mapped views, through both the staging and the direct path.
#include <gtest/gtest.h>

#include <cstring>

#include "model/loader.h"
#include "model/model_files_util.h"
#include "model/safetensors.h"
#include "model/synth.h"
#include "model/weights.h"

using namespace frost::model;
using namespace frost::testing;

namespace {

void expect_moe_uploaded(const ModelWeights& w, const UploadedWeights& u, size_t* checked) {
    auto check = [&](const TensorView& v) {
        ASSERT_TRUE(v.present());
        const UploadedTensor* t = u.find(v.name);
        ASSERT_NE(t, nullptr) << v.name;
        ASSERT_EQ(t->bytes, v.bytes) << v.name;
        const uint8_t* got = static_cast<const uint8_t*>(frost_buffer_ptr(t->buffer)) + t->offset;
        EXPECT_EQ(std::memcmp(got, v.data, v.bytes), 0) << v.name;
        ++*checked;
    };
    for (const auto& L : w.layers) {
        if (!L.is_moe) continue;
        const MoeWeights& m = L.moe;
        for (const TensorView* v : {&m.router, &m.shared_gate, &m.shared_up, &m.shared_down, &m.shared_expert_gate})
            check(*v);
        for (size_t e = 0; e < m.gate.size(); ++e) {
            check(m.gate[e]);
            check(m.up[e]);
            check(m.down[e]);
        }
    }
}

}  // namespace

TEST(LoaderMoe, ShardedSynthAndFixtureUploadEveryExpert) {
    SynthOptions o;
    o.out_dir = make_temp_dir("loader_moe");
    o.preset = "moe-tiny";
    o.seed = ::testing::UnitTest::GetInstance()->random_seed();
    o.shard_bytes = 300000;  // ~0.3 MB shards: the checkpoint spans many files
    SynthSummary sum;
    ASSERT_EQ(synth_checkpoint(o, &sum), FROST_OK) << frost_last_error();
    EXPECT_GT(sum.shards, 10u);
    frost_ctx* ctx = nullptr;
    ASSERT_EQ(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx), FROST_OK);
    for (const std::string& dir : {o.out_dir, fixture_dir("moe-tiny-a-vl")}) {
        ModelWeights w;
        ASSERT_EQ(load_weights(dir, &w), FROST_OK) << frost_last_error();
        if (dir == o.out_dir) {
            EXPECT_EQ(w.checkpoint->file_count(), sum.shards);
        }
        for (bool direct : {false, true}) {
            SCOPED_TRACE(dir + (direct ? " direct" : " staged"));
            WeightUploadOptions opt;
            opt.direct_when_host = direct;
            opt.staging_bytes = 200000;
            opt.progress = false;
            UploadedWeights u;
            ASSERT_EQ(upload_weights(ctx, w, opt, &u), FROST_OK) << frost_last_error();
            size_t checked = 0;
            expect_moe_uploaded(w, u, &checked);
            EXPECT_EQ(checked, size_t(4 * (5 + 3 * 8)));
            EXPECT_EQ(u.bytes_from_files + u.bytes_from_memory, w.total_bytes());
            EXPECT_EQ(u.release(), FROST_OK);
        }
    }
    frost_ctx_destroy(ctx);
}
