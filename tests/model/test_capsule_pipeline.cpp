// The restore fast paths: the pipelined disk read (payload streamed through a ring of pinned
// staging slots much smaller than the capsule, odd chunk sizes, verified per chunk), an I/O fault
// at every read of it leaving the live session and the context's counters untouched, corruption
// found in any chunk, and a restore into a session whose KV rows beyond the boundary hold poison
// (only rows [0, P) are copied) continuing exactly like a cold run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/capsule_file.h"
#include "model/capsule_test_util.h"

namespace frost::model {
namespace {

using test::Continuation;

constexpr int kSteps = 16;
constexpr int kPrefix = 192;     // aligned boundary (3 x A)
constexpr int kChunksWanted = 9;  // the staging chunk is sized so the payload spans about this many

using test::same_stats;
using test::slurp;
using test::spit;
using test::stats_of;

// Raw bytes [off, off + n) of a live buffer.
std::vector<uint8_t> raw_bytes(Engine& e, frost_buffer* b, size_t off, size_t n) {
    std::vector<uint8_t> out(n);
    frost_buffer* h = nullptr;
    EXPECT_EQ(frost_buffer_wrap(e.ctx(), "test.raw", out.data(), n, FROST_SPACE_HOST, &h), FROST_OK);
    EXPECT_EQ(frost_buffer_copy(h, 0, b, off, n, e.stream()), FROST_OK);
    EXPECT_EQ(frost_stream_sync(e.stream()), FROST_OK);
    frost_buffer_free(h);
    return out;
}

class CapsulePipeline : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        engine = test::capsule_engine(GetParam(), 3);
        ASSERT_TRUE(engine);
        dir = test::capsule_temp_dir("pipeline");
        seed = ::testing::UnitTest::GetInstance()->random_seed();
        ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), {dir}, &writer), FROST_OK)
            << frost_last_error();
        ids = test::random_ids(kPrefix, seed);
        ASSERT_EQ(engine->reset(0), FROST_OK);
        CapsuleId id = 0;
        ASSERT_EQ(writer->prefill_and_snapshot(0, ids.data(), ids.size(), CapsuleTier::Host, &id, &first), FROST_OK)
            << frost_last_error();
        want = test::live_state(*engine, 0);
        path = dir + "/cap.frostcap";
        ASSERT_EQ(writer->save(id, path), FROST_OK) << frost_last_error();
        CapsuleInfo info;
        ASSERT_EQ(writer->info(id, &info), FROST_OK);
        payload = info.meta.payload_bytes;
        ASSERT_EQ(writer->release(id), FROST_OK);
        // An odd chunk size (not a page multiple, not dividing any part) so chunk edges fall
        // inside buffers and gaps; the payload spans several chunks.
        chunk = std::max<size_t>(kCapsulePageBytes, payload / kChunksWanted) | 1;
        ASSERT_GE(payload / chunk, size_t(kChunksWanted - 2)) << "payload " << payload;
        // Another prompt in session 1: the live state that failures must leave untouched.
        const auto other = test::random_ids(77, seed + 1);
        ASSERT_EQ(engine->reset(1), FROST_OK);
        ASSERT_EQ(engine->prefill(1, other.data(), other.size(), nullptr), FROST_OK);
        live1 = test::live_state(*engine, 1);
    }
    void TearDown() override { frost_fault_clear(); }

    // A manager reading through `slots` staging slots of `chunk_bytes`, holding the file on the disk tier.
    std::unique_ptr<CapsuleManager> reader(size_t chunk_bytes, int slots, CapsuleId* id) {
        CapsuleManagerOptions o;
        o.disk_chunk_bytes = chunk_bytes;
        o.disk_staging_slots = slots;
        std::unique_ptr<CapsuleManager> m;
        EXPECT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), o, &m), FROST_OK);
        EXPECT_EQ(m->load(path, CapsuleTier::Disk, id), FROST_OK) << frost_last_error();
        EXPECT_TRUE(m->has_staging()) << "load verified the file through the ring";
        m->trim_staging();  // each test starts without a ring
        return m;
    }

    std::unique_ptr<Engine> engine;
    std::unique_ptr<CapsuleManager> writer;
    std::string dir, path;
    uint64_t seed = 0;
    std::vector<int32_t> ids;
    int32_t first = -1;
    size_t payload = 0, chunk = 0;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> want, live1;
};

// Chunk sizes from one page to larger than the payload, 2 to 4 slots: the restored bytes equal
// the snapshot's and the continuation equals a cold run bitwise, restoring over poisoned state.
TEST_P(CapsulePipeline, DiskRestoreThroughSmallStagingIsExact) {
    const Continuation cold = test::cold_run(*engine, 2, ids, kSteps);
    for (size_t c : {kCapsulePageBytes, chunk, size_t(3 * chunk + 7), size_t(payload + 1)})
        for (int slots : {2, 3, 4}) {
            SCOPED_TRACE("chunk " + std::to_string(c) + " slots " + std::to_string(slots));
            CapsuleId id = 0;
            auto m = reader(c, slots, &id);
            test::poison_session(*engine, 1, 0xFF);
            int32_t next = -1;
            ASSERT_EQ(m->restore(id, 1, &next), FROST_OK) << frost_last_error();
            EXPECT_EQ(next, first);
            EXPECT_EQ(test::live_state(*engine, 1), want);
            EXPECT_TRUE(m->has_staging()) << "the ring stays for the next restore";
            EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 1, next, kSteps, false), cold));
        }
}

// An I/O error at every gated read of a disk restore (header and each chunk; once, and from there
// on): FROST_ERR_IO, the live session byte-identical, the context's counters back to baseline (a
// ring that existed before stays, one allocated by the failing call is freed), and the capsule
// still restores afterwards.
TEST_P(CapsulePipeline, IoFaultAtEveryChunkReadLeavesLiveStateUntouched) {
    CapsuleId id = 0;
    auto m = reader(chunk, 3, &id);
    // Count the gated I/O calls of one successful restore: open, header reads, one per chunk.
    ASSERT_EQ(engine->reset(2), FROST_OK);
    frost_fault_clear();
    ASSERT_EQ(m->restore(id, 2, nullptr), FROST_OK) << frost_last_error();
    const uint64_t calls = frost_fault_calls(FROST_FAULT_IO);
    const uint64_t chunks = (payload + chunk - 1) / chunk;
    ASSERT_GE(calls, chunks + 2) << "every chunk read passes the I/O fault gate";
    const frost_ctx_stats warm = stats_of(*engine);
    for (int persistent : {0, 1})
        for (uint64_t k = 1; k <= calls; ++k) {
            SCOPED_TRACE("io call " + std::to_string(k) + (persistent ? " persistent" : " once"));
            frost_fault_arm(FROST_FAULT_IO, k, persistent);
            EXPECT_EQ(m->restore(id, 1, nullptr), FROST_ERR_IO);
            EXPECT_FALSE(std::string(frost_last_error()).empty());
            frost_fault_clear();
            EXPECT_EQ(test::live_state(*engine, 1), live1);
            EXPECT_EQ(engine->position(1), 77);
            EXPECT_TRUE(same_stats(stats_of(*engine), warm));
        }
    // A fresh manager failing its first disk restore at the last chunk keeps no staging ring.
    m.reset();
    CapsuleId id2 = 0;
    auto fresh = reader(chunk, 2, &id2);
    const frost_ctx_stats cold_base = stats_of(*engine);
    frost_fault_arm(FROST_FAULT_IO, calls, 0);
    EXPECT_EQ(fresh->restore(id2, 1, nullptr), FROST_ERR_IO);
    frost_fault_clear();
    EXPECT_FALSE(fresh->has_staging());
    EXPECT_TRUE(same_stats(stats_of(*engine), cold_base));
    EXPECT_EQ(test::live_state(*engine, 1), live1);
    ASSERT_EQ(fresh->restore(id2, 1, nullptr), FROST_OK) << frost_last_error();
    EXPECT_EQ(test::live_state(*engine, 1), want);
    fresh->trim_staging();
    EXPECT_FALSE(fresh->has_staging());
    EXPECT_TRUE(same_stats(stats_of(*engine), cold_base));
}

// One flipped bit in the first, a middle and the last chunk, inside a buffer or a zero gap:
// FROST_ERR_CORRUPT naming the problem, live session untouched.
TEST_P(CapsulePipeline, CorruptionInAnyChunkIsRefusedBeforeLiveStateIsTouched) {
    const std::string good = slurp(path);
    const size_t start = good.size() - payload;
    CapsuleInfo info;
    {
        CapsuleId id = 0;
        auto m = reader(chunk, 2, &id);
        ASSERT_EQ(m->info(id, &info), FROST_OK);
    }
    // Payload offsets: first byte, the last byte of a middle chunk, the last part's last byte, and
    // the gap right after the first part (the cursor: 64 bytes in a 4 KiB page).
    const auto& parts = info.meta.parts;
    ASSERT_GE(parts.size(), 2u);
    ASSERT_LT(parts[0].bytes, parts[1].offset);
    const size_t mid = (payload / chunk / 2) * chunk - 1;
    const size_t last = parts.back().offset + parts.back().bytes - 1;
    for (size_t off : {size_t(0), mid, last, size_t(parts[0].bytes + 5)}) {
        SCOPED_TRACE("payload byte " + std::to_string(off));
        spit(path, good);
        CapsuleId id = 0;
        auto m = reader(chunk, 3, &id);  // load validates the whole file: damage it afterwards
        std::string f = good;
        f[start + off] = char(f[start + off] ^ 0x04);
        spit(path, f);
        EXPECT_EQ(m->restore(id, 1, nullptr), FROST_ERR_CORRUPT);
        const std::string msg = frost_last_error();
        EXPECT_TRUE(msg.find("checksum") != std::string::npos || msg.find("padding") != std::string::npos) << msg;
        EXPECT_EQ(test::live_state(*engine, 1), live1);
        EXPECT_FALSE(m->has_staging());
    }
    spit(path, good);
}

// Restore at a boundary well below what the target session held, into a session whose every
// byte (KV rows beyond the boundary included) is NaN poison: only rows [0, P) are copied, the
// tail stays poison (checked), and restore + decode still equals the cold run bitwise, because
// attention reads rows [0, kv_len) only and each step writes its own row before reading it.
TEST_P(CapsulePipeline, StaleKvRowsBeyondTheBoundaryDoNotMatter) {
    const Continuation cold = test::cold_run(*engine, 2, ids, kSteps);
    const auto longer = test::random_ids(400, seed + 2);
    for (CapsuleTier tier : {CapsuleTier::Device, CapsuleTier::Disk}) {
        SCOPED_TRACE(capsule_tier_name(tier));
        CapsuleId id = 0;
        auto m = reader(chunk, 2, &id);
        if (tier == CapsuleTier::Device) {
            ASSERT_EQ(m->move(id, CapsuleTier::Device), FROST_OK) << frost_last_error();
        }
        ASSERT_EQ(engine->reset(1), FROST_OK);
        ASSERT_EQ(engine->prefill(1, longer.data(), longer.size(), nullptr), FROST_OK);
        test::poison_session(*engine, 1, 0xFF);
        int32_t next = -1;
        ASSERT_EQ(m->restore(id, 1, &next), FROST_OK) << frost_last_error();
        EXPECT_EQ(engine->position(1), kPrefix);
        size_t kv_seen = 0;
        for (const auto& b : engine->state_buffers(1)) {
            if (!b.bytes_per_position) continue;
            const size_t valid = b.valid_bytes(kPrefix);
            const auto tail = raw_bytes(*engine, b.buf, valid, b.bytes_per_position);
            EXPECT_TRUE(std::all_of(tail.begin(), tail.end(), [](uint8_t x) { return x == 0xFF; }))
                << b.name << ": row P must be left as it was (poison)";
            ++kv_seen;
        }
        EXPECT_GT(kv_seen, 0u);
        EXPECT_TRUE(test::same_continuation(test::continue_session(*engine, 1, next, kSteps, false), cold));
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, CapsulePipeline, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::model
