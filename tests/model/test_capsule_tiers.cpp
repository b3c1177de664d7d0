// Capsule tiers and alignment: the boundary sweep (grid points near the prompt end and +-1, from
// every tier), device -> host -> disk -> device round trip, save/load, out-of-memory on each tier
// and I/O errors at every write point (once and persistent) failing cleanly with the context's
// counters back to baseline and no temp file left.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/capsule_file.h"
#include "model/capsule_test_util.h"

namespace frost::model {
namespace {

using test::Continuation;

constexpr int kSweepSteps = 32;  // T24: greedy output identical for >= 32 tokens

using test::same_stats;
using test::slurp;
using test::stats_of;

class CapsuleTiers : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        engine = test::capsule_engine(GetParam(), 3);
        ASSERT_TRUE(engine);
        dir = test::capsule_temp_dir("tiers");
        CapsuleManagerOptions o;
        o.disk_dir = dir;
        ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), o, &mgr), FROST_OK)
            << frost_last_error();
        seed = ::testing::UnitTest::GetInstance()->random_seed();
    }
    void TearDown() override { frost_fault_clear(); }
    CapsuleId capture(const std::vector<int32_t>& ids, CapsuleTier tier, int32_t* next = nullptr) {
        EXPECT_EQ(engine->reset(0), FROST_OK);
        CapsuleId id = 0;
        EXPECT_EQ(mgr->prefill_and_snapshot(0, ids.data(), ids.size(), tier, &id, next), FROST_OK)
            << frost_last_error();
        return id;
    }
    std::unique_ptr<Engine> engine;
    std::unique_ptr<CapsuleManager> mgr;
    std::string dir;
    uint64_t seed = 0;
};

TEST_P(CapsuleTiers, AlignmentUnitIsStatedAndIs64) {
    EXPECT_EQ(kCapsuleAlignment, 64);
    EXPECT_EQ(mgr->deployment().alignment, 64);
    EXPECT_EQ(engine->options().prefill_chunk, 128) << "the suite needs C_p > A to test A = 64";
}

// Boundaries at every chunk-grid point near the prompt end and +-1; from each tier.
TEST_P(CapsuleTiers, BoundarySweepFromEveryTierEqualsCold) {
    const auto prompt = test::random_ids(200, seed);
    const uint64_t captures = engine->capture_count();
    for (int P : {63, 64, 65, 127, 128, 129, 191, 192, 193}) {
        SCOPED_TRACE("boundary " + std::to_string(P));
        const std::vector<int32_t> ids(prompt.begin(), prompt.begin() + P);
        int32_t next = -1;
        const CapsuleId id = capture(ids, CapsuleTier::Device, &next);
        CapsuleInfo info;
        ASSERT_EQ(mgr->info(id, &info), FROST_OK);
        EXPECT_EQ(info.meta.requested_boundary, P);
        EXPECT_EQ(info.meta.stored_boundary, P / 64 * 64);
        EXPECT_EQ(int(info.meta.remainder.size()), P % 64);
        const Continuation cold = test::cold_run(*engine, 1, ids, kSweepSteps);
        EXPECT_EQ(cold.tokens[0], next);
        for (CapsuleTier t : {CapsuleTier::Device, CapsuleTier::Host, CapsuleTier::Disk}) {
            SCOPED_TRACE(capsule_tier_name(t));
            ASSERT_EQ(mgr->move(id, t), FROST_OK) << frost_last_error();
            test::poison_session(*engine, 2, 0xFF);
            int32_t r = -1;
            ASSERT_EQ(mgr->restore(id, 2, &r), FROST_OK) << frost_last_error();
            const bool computed = P % 64 != 0;  // a remainder prefill computed the step-0 logits
            EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 2, r, kSweepSteps, computed), cold));
        }
        ASSERT_EQ(mgr->release(id), FROST_OK);
    }
    EXPECT_EQ(engine->capture_count(), captures) << "no restore, snapshot or tier move recaptures a graph";
    EXPECT_EQ(test::TempFiles::count(dir), 0u);
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "released disk capsules delete their files";
}

TEST_P(CapsuleTiers, DeviceHostDiskDeviceRoundTripKeepsEveryByte) {
    const auto ids = test::random_ids(150, seed);
    const CapsuleId id = capture(ids, CapsuleTier::Device);
    const Continuation cold = test::cold_run(*engine, 1, ids, 8);
    std::vector<uint8_t> original, now;
    ASSERT_EQ(mgr->read_payload(id, &original), FROST_OK);
    CapsuleInfo info;
    for (CapsuleTier t : {CapsuleTier::Host, CapsuleTier::Disk, CapsuleTier::Device}) {
        ASSERT_EQ(mgr->move(id, t), FROST_OK) << frost_last_error();
        ASSERT_EQ(mgr->info(id, &info), FROST_OK);
        EXPECT_EQ(info.tier, t);
        EXPECT_TRUE(info.meta.checksums_valid);
        if (t == CapsuleTier::Disk) {
            EXPECT_TRUE(std::filesystem::exists(info.path));
        }
        ASSERT_EQ(mgr->read_payload(id, &now), FROST_OK);
        EXPECT_EQ(now, original) << capsule_tier_name(t);
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "promotion from an owned disk file removes the file";
    int32_t r = -1;
    ASSERT_EQ(mgr->restore(id, 2, &r), FROST_OK) << frost_last_error();
    EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 2, r, 8), cold));
}

TEST_P(CapsuleTiers, SaveAndLoadOnEveryTier) {
    const auto ids = test::random_ids(128, seed);
    int32_t next = -1;
    const CapsuleId id = capture(ids, CapsuleTier::Device, &next);
    const Continuation ref = test::continue_session(*engine, 0, next, 6);
    const std::string path = dir + "/exported.frostcap";
    ASSERT_EQ(mgr->save(id, path), FROST_OK) << frost_last_error();
    for (CapsuleTier t : {CapsuleTier::Host, CapsuleTier::Device, CapsuleTier::Disk}) {
        CapsuleId lid = 0;
        ASSERT_EQ(mgr->load(path, t, &lid), FROST_OK) << frost_last_error();
        CapsuleInfo info;
        ASSERT_EQ(mgr->info(lid, &info), FROST_OK);
        EXPECT_EQ(info.meta.ids, ids);
        int32_t r = -1;
        test::poison_session(*engine, 1, 0xA5);
        ASSERT_EQ(mgr->restore(lid, 1, &r), FROST_OK) << frost_last_error();
        EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 1, r, 6, false), ref));
        ASSERT_EQ(mgr->release(lid), FROST_OK);
        EXPECT_TRUE(std::filesystem::exists(path)) << "an imported file is never deleted by release";
    }
}

// Out of memory on each tier (device storage, pinned host storage, pinned staging for disk,
// promotion), once and persistent: the verb fails with FROST_ERR_OUT_OF_MEMORY, nothing is left
// allocated, existing capsules and the live session are intact.
TEST_P(CapsuleTiers, OutOfMemoryOnEveryTierFailsCleanly) {
    const auto ids = test::random_ids(128, seed);
    const CapsuleId keep = capture(ids, CapsuleTier::Device);
    const auto live = test::live_state(*engine, 0);
    const frost_ctx_stats base = stats_of(*engine);
    for (int persistent : {0, 1}) {
        for (CapsuleTier t : {CapsuleTier::Device, CapsuleTier::Host, CapsuleTier::Disk}) {
            SCOPED_TRACE(std::string(capsule_tier_name(t)) + (persistent ? " persistent" : " once"));
            frost_fault_arm(FROST_FAULT_ALLOC, 1, persistent);
            CapsuleId id = 0;
            EXPECT_EQ(mgr->snapshot(0, t, &id), FROST_ERR_OUT_OF_MEMORY);
            EXPECT_NE(std::string(frost_last_error()).find(capsule_tier_name(t)), std::string::npos) << frost_last_error();
            frost_fault_clear();
            EXPECT_TRUE(same_stats(stats_of(*engine), base));
            EXPECT_EQ(mgr->count(), 1u);
        }
        // Demotion device -> host and promotion disk -> device.
        frost_fault_arm(FROST_FAULT_ALLOC, 1, persistent);
        EXPECT_EQ(mgr->move(keep, CapsuleTier::Host), FROST_ERR_OUT_OF_MEMORY);
        frost_fault_clear();
        EXPECT_TRUE(same_stats(stats_of(*engine), base));
        CapsuleInfo info;
        ASSERT_EQ(mgr->info(keep, &info), FROST_OK);
        EXPECT_EQ(info.tier, CapsuleTier::Device);
    }
    ASSERT_EQ(mgr->move(keep, CapsuleTier::Disk), FROST_OK) << frost_last_error();
    const frost_ctx_stats disk_base = stats_of(*engine);
    for (uint64_t nth : {1, 2}) {  // the pinned read staging, then the device storage
        frost_fault_arm(FROST_FAULT_ALLOC, nth, 0);
        EXPECT_EQ(mgr->move(keep, CapsuleTier::Device), FROST_ERR_OUT_OF_MEMORY) << "nth " << nth;
        frost_fault_clear();
        EXPECT_TRUE(same_stats(stats_of(*engine), disk_base));
        // Restore from disk with the staging allocation failing leaves the live session untouched.
        frost_fault_arm(FROST_FAULT_ALLOC, 1, 1);
        EXPECT_EQ(mgr->restore(keep, 0, nullptr), FROST_ERR_OUT_OF_MEMORY);
        frost_fault_clear();
        EXPECT_EQ(test::live_state(*engine, 0), live);
        EXPECT_TRUE(same_stats(stats_of(*engine), disk_base));
    }
    // Fork from disk with the staging allocation failing (T32): validated and read once before
    // any target is touched, so neither target session changes and nothing stays allocated.
    const auto s1 = test::live_state(*engine, 1), s2 = test::live_state(*engine, 2);
    for (int persistent : {0, 1}) {
        std::vector<int32_t> firsts;
        frost_fault_arm(FROST_FAULT_ALLOC, 1, persistent);
        EXPECT_EQ(mgr->fork(keep, {1, 2}, &firsts), FROST_ERR_OUT_OF_MEMORY) << "persistent " << persistent;
        frost_fault_clear();
        EXPECT_EQ(test::live_state(*engine, 1), s1);
        EXPECT_EQ(test::live_state(*engine, 2), s2);
        EXPECT_TRUE(same_stats(stats_of(*engine), disk_base));
    }
    ASSERT_EQ(mgr->restore(keep, 1, nullptr), FROST_OK) << "the capsule still works after the failures";
    EXPECT_EQ(test::live_state(*engine, 1), live);
}

// Every gated I/O call of a disk snapshot failing (once, then from there on): the snapshot fails
// with FROST_ERR_IO, no temp file is left, the previous file at the path is intact (or, when only
// the final directory fsync failed, the complete new one), counters are back to baseline.
TEST_P(CapsuleTiers, IoErrorsAtEveryWritePointFailCleanly) {
    const auto a = test::random_ids(64, seed), b = test::random_ids(128, seed + 1);
    const std::string path = dir + "/slot.frostcap";
    const CapsuleId old_id = capture(a, CapsuleTier::Host);
    ASSERT_EQ(mgr->save(old_id, path), FROST_OK);
    const std::string old_bytes = slurp(path);
    const CapsuleId src = capture(b, CapsuleTier::Host);
    frost_fault_clear();
    const std::string probe = dir + "/probe.frostcap";
    ASSERT_EQ(mgr->save(src, probe), FROST_OK);
    const uint64_t calls = frost_fault_calls(FROST_FAULT_IO);
    ASSERT_GE(calls, 5u) << "open, writes, fsync, rename, directory fsync";
    std::filesystem::remove(probe);
    const frost_ctx_stats base = stats_of(*engine);
    for (int persistent : {0, 1}) {
        for (uint64_t k = 1; k <= calls; ++k) {
            SCOPED_TRACE("io call " + std::to_string(k) + (persistent ? " persistent" : " once"));
            frost_fault_arm(FROST_FAULT_IO, k, persistent);
            EXPECT_EQ(mgr->save(src, path), FROST_ERR_IO);
            frost_fault_clear();
            EXPECT_EQ(test::TempFiles::count(dir), 0u);
            EXPECT_TRUE(same_stats(stats_of(*engine), base));
            CapsuleId lid = 0;
            ASSERT_EQ(mgr->load(path, CapsuleTier::Host, &lid), FROST_OK) << "the file at the path is complete";
            CapsuleInfo info;
            ASSERT_EQ(mgr->info(lid, &info), FROST_OK);
            if (k < calls) EXPECT_EQ(slurp(path), old_bytes) << "previous capsule intact";
            else EXPECT_EQ(info.meta.ids, b) << "only the directory fsync failed: the new file is complete";
            ASSERT_EQ(mgr->release(lid), FROST_OK);
            ASSERT_EQ(mgr->save(old_id, path), FROST_OK);  // put the old one back for the next point
        }
    }
    // The same for snapshot straight to the disk tier: no capsule is created.
    const size_t before = mgr->count();
    frost_fault_arm(FROST_FAULT_IO, 2, 1);
    CapsuleId id = 0;
    ASSERT_EQ(engine->position(0), 128);
    EXPECT_EQ(mgr->snapshot(0, CapsuleTier::Disk, &id), FROST_ERR_IO);
    frost_fault_clear();
    EXPECT_EQ(mgr->count(), before);
    EXPECT_EQ(test::TempFiles::count(dir), 0u);
    EXPECT_TRUE(same_stats(stats_of(*engine), base));
    // A read error while restoring from the disk tier leaves the live session untouched.
    ASSERT_EQ(mgr->move(src, CapsuleTier::Disk), FROST_OK);
    const auto live = test::live_state(*engine, 1);
    frost_fault_arm(FROST_FAULT_IO, 3, 0);
    EXPECT_EQ(mgr->restore(src, 1, nullptr), FROST_ERR_IO);
    frost_fault_clear();
    EXPECT_EQ(test::live_state(*engine, 1), live);
}

// A copy failing midway through a restore (after validation passed) fails closed: the session is
// reset to empty rather than left half-restored, and the capsule itself still restores.
TEST_P(CapsuleTiers, CopyFailureMidRestoreResetsTheSession) {
    const auto ids = test::random_ids(128, seed);
    const CapsuleId id = capture(ids, CapsuleTier::Device);
    const auto want = test::live_state(*engine, 0);
    const auto other = test::random_ids(70, seed + 1);
    ASSERT_EQ(engine->reset(1), FROST_OK);
    ASSERT_EQ(engine->prefill(1, other.data(), other.size(), nullptr), FROST_OK);
    const frost_ctx_stats base = stats_of(*engine);
    frost_fault_arm(FROST_FAULT_COPY, 3, 0);
    EXPECT_EQ(mgr->restore(id, 1, nullptr), FROST_ERR_IO);
    EXPECT_NE(std::string(frost_last_error()).find("reset"), std::string::npos) << frost_last_error();
    frost_fault_clear();
    EXPECT_EQ(engine->position(1), 0);
    EXPECT_TRUE(engine->journal(1).empty());
    EXPECT_TRUE(same_stats(stats_of(*engine), base));
    ASSERT_EQ(mgr->restore(id, 1, nullptr), FROST_OK) << frost_last_error();
    EXPECT_EQ(test::live_state(*engine, 1), want);
}

TEST_P(CapsuleTiers, LeftoverTempFilesAreRemovedAtStart) {
    const std::string d = test::capsule_temp_dir("leftover");
    std::ofstream(d + "/a.frostcap" + kCapsuleTempMarker + "77.0") << "torn";
    std::ofstream(d + "/keep.frostcap") << "not ours to delete";
    CapsuleManagerOptions o;
    o.disk_dir = d;
    CapsuleManager m(*engine, "digest", o);
    EXPECT_EQ(test::TempFiles::count(d), 0u);
    EXPECT_TRUE(std::filesystem::exists(d + "/keep.frostcap"));
}

INSTANTIATE_TEST_SUITE_P(Backends, CapsuleTiers, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::model
