// See capsule_exactness_util.h.
#include "model/capsule_exactness_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "model/capsule.h"
#include "model/model_files_util.h"

namespace frost::test {

using namespace frost::model;

void expect_restore_append_equals_cold(Engine& e, const std::string& model_dir, const std::string& store_name) {
    expect_restore_append_equals_cold(e, model_dir, store_name, {{64, 77}, {192, 77}});
}

void expect_restore_append_equals_cold(Engine& e, const std::string& model_dir, const std::string& store_name,
                                       const std::vector<RestoreAppendCase>& cases) {
    CapsuleManagerOptions mo;
    mo.disk_dir = frost::testing::make_temp_dir(store_name);
    std::unique_ptr<CapsuleManager> mgr;
    ASSERT_EQ(CapsuleManager::for_model_dir(e, model_dir, mo, &mgr), FROST_OK) << frost_last_error();
    const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, e.config().vocab_size - 1);
    for (const RestoreAppendCase& c : cases) {
        SCOPED_TRACE("prefix " + std::to_string(c.prefix) + " + " + std::to_string(c.suffix) + ", seed " +
                     std::to_string(seed));
        std::vector<int32_t> prefix(static_cast<size_t>(c.prefix)), suffix(static_cast<size_t>(c.suffix));
        for (auto& x : prefix) x = tok(rng);
        for (auto& x : suffix) x = tok(rng);
        std::vector<int32_t> full = prefix;
        full.insert(full.end(), suffix.begin(), suffix.end());
        ASSERT_EQ(e.reset(0), FROST_OK);
        CapsuleId id = 0;
        ASSERT_EQ(mgr->prefill_and_snapshot(0, prefix.data(), prefix.size(), CapsuleTier::Device, &id, nullptr),
                  FROST_OK)
            << frost_last_error();
        // Cold: session 1 from empty.
        ASSERT_EQ(e.reset(1), FROST_OK);
        int32_t cold_next = -1, warm_next = -2;
        ASSERT_EQ(e.prefill(1, full.data(), full.size(), &cold_next), FROST_OK) << frost_last_error();
        std::vector<std::vector<float>> cold, warm;
        std::vector<int32_t> cold_tok, warm_tok;
        auto follow = [&](int s, int32_t next, std::vector<std::vector<float>>* lg, std::vector<int32_t>* toks) {
            for (int step = 0; step < 8; ++step) {
                std::vector<float> l;
                ASSERT_EQ(e.last_logits(s, &l), FROST_OK) << frost_last_error();
                lg->push_back(l);
                toks->push_back(next);
                ASSERT_EQ(e.decode(s, &next), FROST_OK) << frost_last_error();
            }
        };
        follow(1, cold_next, &cold, &cold_tok);
        // Warm: session 2 poisoned by a different prompt, then restore + append.
        ASSERT_EQ(e.reset(2), FROST_OK);
        ASSERT_EQ(e.prefill(2, suffix.data(), suffix.size(), nullptr), FROST_OK);
        ASSERT_EQ(mgr->restore(id, 2, nullptr), FROST_OK) << frost_last_error();
        ASSERT_EQ(e.prefill(2, suffix.data(), suffix.size(), &warm_next), FROST_OK) << frost_last_error();
        EXPECT_EQ(e.journal(2), full);
        follow(2, warm_next, &warm, &warm_tok);
        EXPECT_EQ(warm_tok, cold_tok);
        ASSERT_EQ(warm.size(), cold.size());
        for (size_t i = 0; i < cold.size(); ++i)
            EXPECT_EQ(0, std::memcmp(warm[i].data(), cold[i].data(), sizeof(float) * cold[i].size()))
                << "step " << i << " logits differ bitwise";
        ASSERT_EQ(mgr->release(id), FROST_OK);
    }
}

}  // namespace frost::test
