// Capsule files refused fail-closed (reliability T16): bit flips across the header and at random
// payload positions, truncation at each buffer boundary (+-1), zeroed 4 KiB pages, wrong magic and
// version, a capsule of another model, a re-signed header naming another ABI/dtype/backend, and a
// file corrupted under a disk-tier capsule. Each is refused with a clear error and the live
// session's bytes are unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "model/capsule_file.h"
#include "model/capsule_test_util.h"
#include "util/hash64.h"

namespace frost::model {
namespace {

constexpr int kRandomPayloadFlips = 1500;

using test::slurp;
using test::spit;

uint64_t header_len(const std::string& f) {
    uint64_t h = 0;
    std::memcpy(&h, f.data() + 16, 8);  // little-endian host (x86-64 / aarch64)
    return h;
}

// Replaces the JSON header with `j` and re-signs it (a forger who knows the format).
std::string resign(const std::string& f, const nlohmann::json& j) {
    const uint64_t H = header_len(f);
    const size_t S = capsule_payload_start(H);
    const std::string payload = f.substr(S);
    const std::string js = j.dump();
    std::string out(capsule_payload_start(js.size()), '\0');
    std::memcpy(out.data(), f.data(), 16);
    const uint64_t n = js.size();
    std::memcpy(out.data() + 16, &n, 8);
    std::memcpy(out.data() + 24, js.data(), js.size());
    const uint64_t sum = util::hash64(out.data(), 24 + js.size());
    std::memcpy(out.data() + 24 + js.size(), &sum, 8);
    return out + payload;
}

class CapsuleFile : public ::testing::TestWithParam<frost_backend> {
protected:
    void SetUp() override {
        engine = test::capsule_engine(GetParam(), 2);
        ASSERT_TRUE(engine);
        dir = test::capsule_temp_dir("file");
        ASSERT_EQ(CapsuleManager::for_model_dir(*engine, test::capsule_model_dir(), {dir}, &mgr), FROST_OK);
        seed = ::testing::UnitTest::GetInstance()->random_seed();
        const auto ids = test::random_ids(150, seed);
        ASSERT_EQ(engine->reset(0), FROST_OK);
        CapsuleId id = 0;
        ASSERT_EQ(mgr->prefill_and_snapshot(0, ids.data(), ids.size(), CapsuleTier::Host, &id, nullptr), FROST_OK);
        good = dir + "/good.frostcap";
        ASSERT_EQ(mgr->save(id, good), FROST_OK) << frost_last_error();
        ASSERT_EQ(mgr->release(id), FROST_OK);
        bytes = slurp(good);
        // The live session that must stay untouched: another prompt in session 1.
        const auto other = test::random_ids(77, seed + 1);
        ASSERT_EQ(engine->reset(1), FROST_OK);
        ASSERT_EQ(engine->prefill(1, other.data(), other.size(), nullptr), FROST_OK);
        live = test::live_state(*engine, 1);
        bad = dir + "/bad.frostcap";
    }
    // Loads `file` and, if that were to succeed, restores it into session 1; expects refusal.
    void expect_refused(const std::string& file, const std::string& what) {
        spit(bad, file);
        CapsuleId id = 0;
        const frost_status s = mgr->load(bad, CapsuleTier::Host, &id);
        const std::string msg = frost_last_error();
        EXPECT_TRUE(s == FROST_ERR_CORRUPT || s == FROST_ERR_INCOMPATIBLE)
            << what << ": status " << frost_status_name(s) << " " << msg;
        EXPECT_FALSE(msg.empty()) << what;
        if (s == FROST_OK) {
            mgr->restore(id, 1, nullptr);
            mgr->release(id);
        }
        ++refusals;
    }
    void TearDown() override {
        if (engine) {
            EXPECT_EQ(test::live_state(*engine, 1), live) << "live session touched";
        }
        if (mgr) {
            EXPECT_EQ(mgr->count(), size_t(0));
        }
    }
    std::unique_ptr<Engine> engine;
    std::unique_ptr<CapsuleManager> mgr;
    std::string dir, good, bad, bytes;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> live;
    uint64_t seed = 0;
    int refusals = 0;
};

TEST_P(CapsuleFile, GoodFileLoads) {
    CapsuleId id = 0;
    ASSERT_EQ(mgr->load(good, CapsuleTier::Host, &id), FROST_OK) << frost_last_error();
    ASSERT_EQ(mgr->release(id), FROST_OK);
    EXPECT_EQ(bytes.size() % kCapsulePageBytes, 0u) << "payload buffers are 4 KiB aligned";
}

TEST_P(CapsuleFile, BitFlipsAnywhereAreRefused) {
    const size_t S = capsule_payload_start(header_len(bytes));
    spit(bad, bytes);
    std::fstream io(bad, std::ios::binary | std::ios::in | std::ios::out);
    ASSERT_TRUE(io.good());
    std::mt19937_64 rng(seed);
    // Flips one bit of byte i in place, tries the file, and restores the byte.
    auto flip = [&](size_t i, const std::string& what) {
        const char was = bytes[i];
        const char now = char(was ^ (1u << (rng() % 8)));
        io.seekp(std::streamoff(i));
        io.write(&now, 1);
        io.flush();
        CapsuleId id = 0;
        const frost_status s = mgr->load(bad, CapsuleTier::Host, &id);
        EXPECT_TRUE(s == FROST_ERR_CORRUPT || s == FROST_ERR_INCOMPATIBLE)
            << what << ": status " << frost_status_name(s) << " " << frost_last_error();
        if (s == FROST_OK) mgr->release(id);
        io.seekp(std::streamoff(i));
        io.write(&was, 1);
        io.flush();
        ++refusals;
    };
    // Every byte of the fixed header, the JSON metadata and the trailer.
    for (size_t i = 0; i < 32 + header_len(bytes); ++i) flip(i, "header byte " + std::to_string(i));
    // Random positions in the header padding and the payload (buffers and the gaps between them).
    for (int k = 0; k < kRandomPayloadFlips; ++k) {
        const size_t i = 32 + header_len(bytes) + rng() % (bytes.size() - 32 - header_len(bytes));
        flip(i, "byte " + std::to_string(i) + (i >= S ? " (payload)" : " (padding)"));
    }
    EXPECT_GT(refusals, kRandomPayloadFlips);
    CapsuleId id = 0;
    ASSERT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_OK) << "every byte was put back";
    ASSERT_EQ(mgr->release(id), FROST_OK);
}

TEST_P(CapsuleFile, TruncationAtEveryBufferBoundaryIsRefused) {
    CapsuleFileReader r;
    ASSERT_EQ(r.open(good), FROST_OK);
    const size_t S = capsule_payload_start(header_len(bytes));
    std::vector<size_t> cuts = {0, 7, 23, 24 + header_len(bytes), S};
    for (const auto& p : r.meta().parts)
        for (size_t at : {S + p.offset, S + p.offset + p.bytes})
            for (long d : {-1L, 0L, 1L}) cuts.push_back(size_t(long(at) + d));
    cuts.push_back(bytes.size() - 1);
    for (size_t c : cuts)
        if (c < bytes.size()) expect_refused(bytes.substr(0, c), "truncated at " + std::to_string(c));
    expect_refused(bytes + std::string(kCapsulePageBytes, '\0'), "extended by a page");
}

TEST_P(CapsuleFile, ZeroedPagesAreRefused) {
    for (size_t off = 0; off < bytes.size(); off += kCapsulePageBytes) {
        std::string f = bytes;
        const size_t n = std::min(kCapsulePageBytes, f.size() - off);
        if (f.compare(off, n, std::string(n, '\0')) == 0) continue;  // already zero: nothing changes
        std::memset(f.data() + off, 0, n);
        expect_refused(f, "zeroed page at " + std::to_string(off));
    }
    EXPECT_GT(refusals, 3);
}

TEST_P(CapsuleFile, WrongMagicAndVersionAreRefusedByName) {
    std::string f = bytes;
    f[0] = 'X';
    spit(bad, f);
    CapsuleId id = 0;
    EXPECT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_ERR_CORRUPT);
    EXPECT_NE(std::string(frost_last_error()).find("magic"), std::string::npos) << frost_last_error();
    f = bytes;
    f[8] = char(kCapsuleFormatVersion + 1);
    spit(bad, f);
    EXPECT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_ERR_INCOMPATIBLE);
    EXPECT_NE(std::string(frost_last_error()).find("version"), std::string::npos) << frost_last_error();
    spit(bad, "");
    EXPECT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_ERR_CORRUPT);
    EXPECT_EQ(mgr->load(dir + "/missing.frostcap", CapsuleTier::Host, &id), FROST_ERR_NOT_FOUND);
}

// Headers re-signed with a valid checksum but another deployment or inconsistent metadata.
TEST_P(CapsuleFile, ReSignedHeadersOfAnotherDeploymentAreIncompatible) {
    const nlohmann::json j = nlohmann::json::parse(bytes.substr(24, header_len(bytes)));
    struct Case {
        const char* what;
        std::function<void(nlohmann::json&)> edit;
        frost_status want;
    };
    const std::vector<Case> cases = {
        {"engine ABI", [](nlohmann::json& x) { x["deployment"]["engine_abi"] = kCapsuleEngineAbi + 1; }, FROST_ERR_INCOMPATIBLE},
        {"dtype", [](nlohmann::json& x) { x["deployment"]["dtype"] = "f16"; }, FROST_ERR_INCOMPATIBLE},
        {"backend", [](nlohmann::json& x) { x["deployment"]["backend"] = "tpu"; }, FROST_ERR_INCOMPATIBLE},
        {"alignment unit", [](nlohmann::json& x) { x["deployment"]["alignment"] = 128; }, FROST_ERR_INCOMPATIBLE},
        {"model digest", [](nlohmann::json& x) { x["deployment"]["model_digest"] = std::string(64, '0'); }, FROST_ERR_INCOMPATIBLE},
        {"state layout", [](nlohmann::json& x) { x["deployment"]["layout_digest"] = std::string(64, '1'); }, FROST_ERR_INCOMPATIBLE},
        {"numerics", [](nlohmann::json& x) { x["deployment"]["numerics"] = "rope_inv_freq=f64"; }, FROST_ERR_INCOMPATIBLE},
        {"token ids", [](nlohmann::json& x) { x["ids"][3] = int(x["ids"][3]) + 1; }, FROST_ERR_CORRUPT},
        {"boundary", [](nlohmann::json& x) { x["stored_boundary"] = 64; }, FROST_ERR_CORRUPT},
        {"offset", [](nlohmann::json& x) { x["buffers"][1]["offset"] = 100; }, FROST_ERR_CORRUPT},
        {"length", [](nlohmann::json& x) { x["buffers"][0]["length"] = uint64_t(1) << 40; }, FROST_ERR_CORRUPT},
        {"huge length", [](nlohmann::json& x) { x["buffers"][1]["length"] = ~uint64_t(0) - 5; }, FROST_ERR_CORRUPT},
        {"missing field", [](nlohmann::json& x) { x.erase("prefix_digest"); }, FROST_ERR_CORRUPT},
        {"wrong type", [](nlohmann::json& x) { x["ids"] = "oops"; }, FROST_ERR_CORRUPT},
    };
    for (const auto& c : cases) {
        nlohmann::json x = j;
        c.edit(x);
        spit(bad, resign(bytes, x));
        CapsuleId id = 0;
        EXPECT_EQ(mgr->load(bad, CapsuleTier::Host, &id), c.want) << c.what << ": " << frost_last_error();
        if (c.want == FROST_ERR_INCOMPATIBLE) {
            EXPECT_NE(std::string(frost_last_error()).find(c.what), std::string::npos) << frost_last_error();
        }
    }
    spit(bad, resign(bytes, j));  // control: an unchanged re-signed header is accepted
    CapsuleId id = 0;
    ASSERT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_OK) << frost_last_error();
    ASSERT_EQ(mgr->release(id), FROST_OK);
}

// The numerics the capsule was made under (Deployment::numerics) are recorded; a capsule written
// before the field existed (none recorded) is matched as before, one of other numerics is refused
// naming them (here: an engine with exact fp32 RoPE frequencies, whose states differ in bits).
TEST_P(CapsuleFile, NumericsAreRecordedAndAnOlderCapsuleWithoutThemLoads) {
    nlohmann::json j = nlohmann::json::parse(bytes.substr(24, header_len(bytes)));
    EXPECT_EQ(j["deployment"]["numerics"], "rope_inv_freq=bf16") << j["deployment"].dump();
    j["deployment"].erase("numerics");
    spit(bad, resign(bytes, j));
    CapsuleId id = 0;
    ASSERT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_OK) << frost_last_error();
    ASSERT_EQ(mgr->release(id), FROST_OK);
    Deployment running;
    running.numerics = "rope_inv_freq=f32";
    Deployment cap = running;
    cap.numerics = "rope_inv_freq=bf16";
    const std::string why = deployment_mismatch(cap, running);
    EXPECT_NE(why.find("numerics differs (capsule rope_inv_freq=bf16, running rope_inv_freq=f32)"), std::string::npos) << why;
    cap.numerics.clear();
    EXPECT_EQ(deployment_mismatch(cap, running), "");
}

// ABI 1 capsules recorded "f32" for every part (wrong for CUDA's bf16 KV / conv state): they are
// refused with a message that says why and what to do, on both backends.
TEST_P(CapsuleFile, Abi1CapsulesWithTheWrongDtypeRecordAreRefusedSayingWhy) {
    nlohmann::json j = nlohmann::json::parse(bytes.substr(24, header_len(bytes)));
    j["deployment"]["engine_abi"] = 1;
    for (auto& b : j["buffers"])
        if (b["kind"] != "cursor") b["dtype"] = "f32";
    spit(bad, resign(bytes, j));
    CapsuleId id = 0;
    EXPECT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_ERR_INCOMPATIBLE);
    const std::string msg = frost_last_error();
    EXPECT_NE(msg.find("engine ABI"), std::string::npos) << msg;
    EXPECT_NE(msg.find("re-create the capsule"), std::string::npos) << msg;
}

// A part whose recorded dtype differs from the session's buffer is refused naming both.
TEST_P(CapsuleFile, APartWithAnotherDtypeIsRefusedNamingIt) {
    nlohmann::json j = nlohmann::json::parse(bytes.substr(24, header_len(bytes)));
    for (auto& b : j["buffers"])
        if (b["kind"] == "recurrent") {
            b["dtype"] = "bf16";
            break;
        }
    spit(bad, resign(bytes, j));
    CapsuleId id = 0;
    EXPECT_EQ(mgr->load(bad, CapsuleTier::Host, &id), FROST_ERR_INCOMPATIBLE);
    EXPECT_NE(std::string(frost_last_error()).find("holds bf16"), std::string::npos) << frost_last_error();
}

TEST_P(CapsuleFile, AnotherModelsCapsuleIsIncompatible) {
    auto other = test::capsule_engine(GetParam(), 1, 1);
    ASSERT_TRUE(other);
    std::unique_ptr<CapsuleManager> om;
    ASSERT_EQ(CapsuleManager::for_model_dir(*other, test::capsule_model_dir(1), {}, &om), FROST_OK);
    const auto ids = test::random_ids(64, seed);
    CapsuleId oid = 0;
    ASSERT_EQ(om->prefill_and_snapshot(0, ids.data(), ids.size(), CapsuleTier::Host, &oid, nullptr), FROST_OK);
    const std::string path = dir + "/other-model.frostcap";
    ASSERT_EQ(om->save(oid, path), FROST_OK);
    CapsuleId id = 0;
    EXPECT_EQ(mgr->load(path, CapsuleTier::Host, &id), FROST_ERR_INCOMPATIBLE);
    EXPECT_NE(std::string(frost_last_error()).find("model digest"), std::string::npos) << frost_last_error();
}

// The file under a disk-tier capsule is damaged after the fact: restore refuses, session untouched.
TEST_P(CapsuleFile, CorruptedDiskTierCapsuleRefusesRestore) {
    CapsuleId id = 0;
    ASSERT_EQ(mgr->load(good, CapsuleTier::Host, &id), FROST_OK);
    const std::string path = dir + "/tier.frostcap";
    ASSERT_EQ(mgr->move(id, CapsuleTier::Disk, path), FROST_OK);
    std::string f = slurp(path);
    f[f.size() - 100] = char(f[f.size() - 100] ^ 0x10);
    spit(path, f);
    EXPECT_EQ(mgr->restore(id, 1, nullptr), FROST_ERR_CORRUPT);
    EXPECT_NE(std::string(frost_last_error()).find("checksum"), std::string::npos) << frost_last_error();
    EXPECT_EQ(mgr->move(id, CapsuleTier::Device), FROST_ERR_CORRUPT);
    ASSERT_EQ(mgr->release(id), FROST_OK);
}

INSTANTIATE_TEST_SUITE_P(Backends, CapsuleFile, ::testing::ValuesIn(test::capsule_backends()), test::backend_label);

}  // namespace
}  // namespace frost::model
