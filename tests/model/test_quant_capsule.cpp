// Capsules work unchanged on a quantized checkpoint: on the fp8-tiny-a fixture (Qwen block FP8,
// dequantized at load) a snapshot restored into another session continues bitwise like a cold
// run, through a capsule file too; and a capsule of the quantized deployment is refused by the
// same shapes in another weight format (the fingerprint binds the format).
#include <gtest/gtest.h>

#include "model/capsule.h"
#include "model/capsule_test_util.h"
#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/model_files_util.h"
#include "model/synth.h"

namespace frost::model {
namespace {

constexpr int kSteps = 8;

std::unique_ptr<Engine> engine_for(const std::string& dir) {
    EngineOptions o;
    o.max_seq_len = 512;
    o.prefill_chunk = 128;
    o.sessions = 2;
    o.rope_inv_freq_bf16 = false;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    return e;
}

TEST(QuantCapsule, RestoreContinuesLikeColdOnFp8Fixture) {
    // A copy: the manager caches the fingerprint beside the weights, and fixtures are never written.
    const std::string dir = test::capsule_temp_dir("quant_capsule_fixture");
    testing::copy_config(test::fixture_dir("fp8-tiny-a"), dir);
    testing::write_bytes(dir + "/model.safetensors", testing::read_bytes(test::fixture_dir("fp8-tiny-a") + "/model.safetensors"));
    auto e = engine_for(dir);
    ASSERT_TRUE(e);
    CapsuleManagerOptions mo;
    mo.disk_dir = test::capsule_temp_dir("quant_capsule");
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(*e, dir, mo, &mgr), FROST_OK) << frost_last_error();
    const auto ids = test::random_ids(128, ::testing::UnitTest::GetInstance()->random_seed(), 2048);
    const test::Continuation cold = test::cold_run(*e, 0, ids, kSteps);

    ASSERT_EQ(e->reset(0), FROST_OK);
    CapsuleId id = 0;
    int32_t next = -1;
    ASSERT_EQ(mgr->prefill_and_snapshot(0, ids.data(), ids.size(), CapsuleTier::Host, &id, &next), FROST_OK)
        << frost_last_error();
    const std::string file = mo.disk_dir + "/fp8.frostcap";
    ASSERT_EQ(mgr->save(id, file), FROST_OK) << frost_last_error();
    CapsuleId loaded = 0;
    ASSERT_EQ(mgr->load(file, CapsuleTier::Host, &loaded), FROST_OK) << frost_last_error();
    int32_t restored = -1;
    ASSERT_EQ(mgr->restore(loaded, 1, &restored), FROST_OK) << frost_last_error();
    EXPECT_EQ(restored, next);
    EXPECT_TRUE(test::same_continuation(cold, test::continue_session(*e, 1, restored, kSteps, false)));

    // The same shapes in another weight format (a synthetic fp8 model vs its nvfp4 twin): the
    // deployments differ in their model digest, so the capsule is refused.
    const std::string a = test::capsule_temp_dir("quant_capsule_a"), b = test::capsule_temp_dir("quant_capsule_b");
    for (const auto& [d, q] : {std::pair{a, "fp8"}, std::pair{b, "nvfp4"}}) {
        SynthOptions so;
        so.out_dir = d;
        so.preset = "tiny";
        so.seed = 3;
        so.quant = q;
        ASSERT_EQ(synth_checkpoint(so), FROST_OK) << frost_last_error();
    }
    auto ea = engine_for(a), eb = engine_for(b);
    ASSERT_TRUE(ea && eb);
    std::unique_ptr<CapsuleManager> ma, mb;
    ASSERT_EQ(CapsuleManager::for_model_dir(*ea, a, mo, &ma), FROST_OK) << frost_last_error();
    ASSERT_EQ(CapsuleManager::for_model_dir(*eb, b, mo, &mb), FROST_OK) << frost_last_error();
    const auto short_ids = test::random_ids(64, 5, 1024);
    ASSERT_EQ(ma->prefill_and_snapshot(0, short_ids.data(), short_ids.size(), CapsuleTier::Host, &id, &next), FROST_OK)
        << frost_last_error();
    const std::string fa = mo.disk_dir + "/a.frostcap";
    ASSERT_EQ(ma->save(id, fa), FROST_OK) << frost_last_error();
    EXPECT_NE(mb->load(fa, CapsuleTier::Host, &loaded), FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find("model digest differs"), std::string::npos) << frost_last_error();
}

}  // namespace
}  // namespace frost::model
