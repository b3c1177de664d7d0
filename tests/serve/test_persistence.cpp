// Capsule-directory persistence without a model: sidecar parsing, CapsuleStore::adopt, the claim
// log continuing a previous run's file, and a flush -> re-index round trip through real files
// with an engine whose capsule "file" is its token list (the real engine's file validation is
// covered end to end by tests/python/serve/test_persistence.py).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "serve/persistence.h"
#include "util/fs.h"

namespace frost::serve {
namespace {

// Capsule files are "TOKENS <n> <id>..." text; anything else is refused like a corrupt file.
class FileEngine : public EngineIface {
public:
    int slots() const override { return 1; }
    size_t max_seq_len() const override { return 4096; }
    int vocab_size() const override { return 1000; }
    frost_status reset(int) override { return FROST_OK; }
    frost_status set_sampling(int, const Sampling&) override { return FROST_OK; }
    frost_status prefill(int, const int32_t*, size_t, int32_t*) override { return FROST_OK; }
    frost_status decode(int, int32_t*) override { return FROST_OK; }
    bool capsules_supported() const override { return true; }
    void drop(uint64_t h) override { caps.erase(h); }
    frost_status persist(uint64_t h, const std::string& path) override {
        std::ofstream out(path);
        out << "TOKENS " << caps.at(h).size();
        for (int32_t t : caps.at(h)) out << ' ' << t;
        return out ? FROST_OK : fail(FROST_ERR_IO, "cannot write %s", path.c_str());
    }
    frost_status import(const std::string& path, uint64_t* h, uint64_t* bytes, std::vector<int32_t>* tokens) override {
        std::ifstream in(path);
        std::string magic;
        size_t n = 0;
        if (!(in >> magic >> n) || magic != "TOKENS") return fail(FROST_ERR_CORRUPT, "bad magic in %s", path.c_str());
        tokens->resize(n);
        for (auto& t : *tokens)
            if (!(in >> t)) return fail(FROST_ERR_CORRUPT, "truncated %s", path.c_str());
        *h = next++;
        caps[*h] = *tokens;
        *bytes = 100 + 4 * n;
        return FROST_OK;
    }
    // Like the real engine: a crash-safe file the caller owns, indexed under a new handle.
    frost_status move_to_file(uint64_t* h, const std::string& path) override {
        if (!caps.count(*h)) return fail(FROST_ERR_NOT_FOUND, "no capsule");
        const std::string tmp = path + ".frost-tmp.x";
        std::vector<int32_t> t = caps.at(*h);
        {
            std::ofstream out(tmp);
            out << "TOKENS " << t.size();
            for (int32_t v : t) out << ' ' << v;
            if (!out) return fail(FROST_ERR_IO, "cannot write %s", tmp.c_str());
        }
        if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(FROST_ERR_IO, "rename");
        caps.erase(*h);
        *h = next++;
        caps[*h] = t;
        files++;
        return FROST_OK;
    }
    std::map<uint64_t, std::vector<int32_t>> caps;
    uint64_t next = 1;
    int files = 0;
};

std::string temp_dir() {
    char tmpl[] = "/tmp/frost-serve-persist-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    return d ? d : "";
}

std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
    std::uniform_int_distribution<int32_t> tok(0, 999);
    std::vector<int32_t> v(n);
    for (auto& t : v) t = tok(rng);
    return v;
}

struct Fixture {
    double now = 0;
    ClaimLog log;
    FileEngine engine;
    std::unique_ptr<CapsuleStore> store;
    explicit Fixture(uint64_t disk_budget = 1 << 20, const std::string& log_path = "") {
        if (!log_path.empty()) {
            EXPECT_EQ(log.open_file(log_path), FROST_OK);
        }
        StoreBudgets b;
        b.bytes[0] = b.bytes[1] = b.bytes[2] = disk_budget;
        StoreHooks hooks;
        hooks.drop = [this](CapsuleRecord& r) { engine.drop(r.handle); };
        store = std::make_unique<CapsuleStore>(b, hooks, &log, [this] { return now; });
    }
    // A capsule as a chat turn would leave it: admitted, then materialized by the engine.
    void add(const std::string& id, const std::string& owner, std::vector<int32_t> tokens, bool pinned, int prio,
             double ttl) {
        CapsuleRequest req;
        req.id = id;
        req.owner = owner;
        req.bytes = 100 + 4 * tokens.size();
        req.pinned = pinned;
        req.priority = prio;
        req.ttl_s = ttl;
        req.tokens = tokens;
        Tier placed;
        std::vector<std::string> blocking;
        ASSERT_EQ(store->admit(req, &placed, &blocking), FROST_OK);
        const uint64_t h = engine.next++;
        engine.caps[h] = tokens;
        ASSERT_EQ(store->materialize(id, h, req.bytes), FROST_OK);
    }
};

TEST(ServePersistence, SidecarRoundTripAndRejections) {
    SidecarMeta m;
    m.id = "cap-0123abc";
    m.owner = "key1";
    m.pinned = true;
    m.priority = -3;
    m.ttl_s = 12.5;
    m.expires_unix = 1.7e9;
    m.session_id = "sess-1";
    m.token_digest = "ab12";
    SidecarMeta back;
    ASSERT_EQ(sidecar_from_json(sidecar_to_json(m), &back), FROST_OK) << last_error();
    EXPECT_EQ(back.id, m.id);
    EXPECT_EQ(back.owner, m.owner);
    EXPECT_TRUE(back.pinned);
    EXPECT_EQ(back.priority, -3);
    EXPECT_DOUBLE_EQ(back.ttl_s, 12.5);
    EXPECT_DOUBLE_EQ(back.expires_unix, 1.7e9);
    EXPECT_EQ(back.session_id, "sess-1");
    EXPECT_EQ(back.token_digest, "ab12");
    for (const char* bad : {"", "[]", "{\"format\":\"other\"}",
                            R"({"format":"frost-serve-capsule-v1","id":"../etc","owner":"k","pinned":false,"priority":0,"ttl_s":0,"expires_unix":0,"session_id":"","token_digest":""})",
                            R"({"format":"frost-serve-capsule-v1","id":"cap-1","owner":"k","pinned":1,"priority":0,"ttl_s":0,"expires_unix":0,"session_id":"","token_digest":""})",
                            R"({"format":"frost-serve-capsule-v1","id":"cap-1","owner":"k","pinned":false,"priority":0,"ttl_s":-1,"expires_unix":0,"session_id":"","token_digest":""})"})
        EXPECT_EQ(sidecar_from_json(bad, &back), FROST_ERR_CORRUPT) << bad;
}

TEST(ServePersistence, FlushThenReindexRestoresTheIndex) {
    std::mt19937 rng(std::random_device{}());
    const std::string dir = temp_dir();
    const auto t1 = random_tokens(rng, 70), t2 = random_tokens(rng, 130), t3 = random_tokens(rng, 9);
    {
        Fixture a(1 << 20, dir + "/claims.jsonl");
        a.add("cap-a", "key0", t1, true, 5, 0);
        a.add("cap-b", "key1", t2, false, -1, 3600);
        a.add("cap-gone", "key0", t3, false, 0, 0.5);
        const FlushReport f = flush_capsule_dir(dir, a.engine, *a.store, 1000.0);
        EXPECT_EQ(f.written, 3u);
        EXPECT_EQ(f.failed, 0u);
    }
    // Damage: a corrupt capsule with a valid sidecar, an orphan sidecar, a temp file.
    ASSERT_TRUE(util::write_file(dir + "/cap-bad.frostcap", "garbage", nullptr));
    std::string side;
    ASSERT_TRUE(util::read_file(dir + "/cap-a.json", &side, nullptr));
    const size_t at = side.find("cap-a");
    ASSERT_NE(at, std::string::npos);
    side.replace(at, 5, "cap-bad");
    ASSERT_TRUE(util::write_file(dir + "/cap-bad.json", side, nullptr));
    ASSERT_TRUE(util::write_file(dir + "/cap-lost.json", side, nullptr));
    ASSERT_TRUE(util::write_file(dir + "/cap-x.json.frost-tmp.77", "{", nullptr));

    Fixture b(1 << 20, dir + "/claims.jsonl");
    // 1000 s later on the wall clock: cap-gone's 0.5 s TTL passed while stopped.
    const ReindexReport r = reindex_capsule_dir(dir, b.engine, *b.store, &b.log, 2000.0);
    for (const auto& n : r.notes) SCOPED_TRACE(n);
    EXPECT_EQ(r.adopted, 2u);
    EXPECT_EQ(r.expired, 1u);
    EXPECT_EQ(r.temp_removed, 1u);
    EXPECT_EQ(r.quarantined, 3u);  // cap-bad pair + cap-lost sidecar
    EXPECT_TRUE(util::file_exists(dir + "/quarantine/cap-bad.frostcap"));
    EXPECT_TRUE(util::file_exists(dir + "/quarantine/cap-bad.json"));
    EXPECT_TRUE(util::file_exists(dir + "/quarantine/cap-lost.json"));
    EXPECT_FALSE(util::file_exists(dir + "/cap-x.json.frost-tmp.77"));
    EXPECT_FALSE(util::file_exists(dir + "/cap-gone.frostcap"));

    const CapsuleRecord* a = b.store->find("cap-a", "key0");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->tokens, t1);
    EXPECT_TRUE(a->pinned);
    EXPECT_EQ(a->priority, 5);
    EXPECT_EQ(a->tier, Tier::Disk);
    EXPECT_EQ(a->digest, token_digest(t1.data(), t1.size()));
    EXPECT_EQ(b.store->find("cap-a", "key1"), nullptr);  // owner scope survives the restart
    const CapsuleRecord* bb = b.store->find("cap-b", "key1");
    ASSERT_NE(bb, nullptr);
    EXPECT_EQ(bb->tokens, t2);
    EXPECT_NEAR(b.store->ttl_left(*bb), 3600 - 1000, 1e-6);
    // The expired claim ends in the log it lived in; cap-bad never was a claim there.
    int evicted = 0, expired = 0;
    for (const auto& e : b.log.recent()) {
        evicted += e.event == "evicted";
        expired += e.event == "expired" && e.claim_id == "cap-gone";
    }
    EXPECT_EQ(evicted, 0);
    EXPECT_EQ(expired, 1);
    EXPECT_TRUE(b.log.previously_live("cap-a"));
    EXPECT_FALSE(b.log.previously_live("cap-bad"));
    std::string why;
    std::vector<std::string> names;
    ASSERT_TRUE(util::list_dir(dir + "/quarantine", &names, &why));
    for (const auto& n : names) ::unlink((dir + "/quarantine/" + n).c_str());
    ::rmdir((dir + "/quarantine").c_str());
    ASSERT_TRUE(util::list_dir(dir, &names, &why));
    for (const auto& n : names) ::unlink((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

TEST(ServePersistence, FailedSidecarWriteLeavesNoHalfPair) {
    std::mt19937 rng(std::random_device{}());
    const std::string dir = temp_dir();
    Fixture a;
    a.add("cap-io", "key0", random_tokens(rng, 20), false, 0, 0);
    // Each gated step of the sidecar write (write, fsync, rename, directory fsync) in turn.
    for (uint64_t nth = 1; nth <= 4; ++nth) {
        frost_fault_arm(FROST_FAULT_IO, nth, 0);
        const FlushReport f = flush_capsule_dir(dir, a.engine, *a.store, 1000.0);
        frost_fault_clear();
        EXPECT_EQ(f.failed, 1u) << "nth " << nth;  // the engine's own write is not gated here: 1..4 are ours
        std::vector<std::string> names;
        std::string why;
        ASSERT_TRUE(util::list_dir(dir, &names, &why));
        for (const auto& n : names) EXPECT_EQ(n.find(".frost-tmp."), std::string::npos) << "nth " << nth << ": " << n;
        EXPECT_TRUE(names.empty()) << "nth " << nth << ": a capsule file without its sidecar";
        for (const auto& n : names) ::unlink((dir + "/" + n).c_str());
        a.store->set_persisted("cap-io", false);
    }
    ::rmdir(dir.c_str());
}

TEST(ServePersistence, AdoptRespectsBudgetAndDuplicates) {
    Fixture f(500);
    CapsuleRecord r;
    r.id = "cap-1";
    r.owner = "key0";
    r.tier = Tier::Disk;
    r.bytes = 400;
    r.tokens = {1, 2, 3};
    EXPECT_EQ(f.store->adopt(r, 0), FROST_OK);
    EXPECT_EQ(f.store->adopt(r, 0), FROST_ERR_STATE);
    r.id = "cap-2";
    r.bytes = 600;  // over the whole tier budget
    EXPECT_EQ(f.store->adopt(r, 0), FROST_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(f.store->used(Tier::Disk), 400u);
}

// After a crash or power cut the files are the truth: re-indexing finishes removals the log had
// already recorded (evicted; a restore that failed closed), gives an adopted capsule the event the
// crash cut off (materialized, offloaded, restored) or the policy its sidecar holds, and records a
// capsule the log lost. The continued log then replays as one valid history.
TEST(ServePersistence, ReindexMakesTheClaimLogAgreeWithTheFiles) {
    std::mt19937 rng(std::random_device{}());
    const std::string dir = temp_dir();
    const std::string path = dir + "/claims.jsonl";
    struct Case {
        const char* id;
        std::vector<const char*> events;  // the previous run's, in order
        bool pinned_on_disk;
    };
    const std::vector<Case> cases = {
        {"cap-pending", {"accepted"}, false},
        {"cap-demoting", {"accepted", "materialized", "demoted"}, false},
        {"cap-restoring", {"accepted", "materialized", "restore_required"}, false},
        {"cap-live", {"accepted", "materialized"}, false},
        {"cap-pinned", {"accepted", "materialized"}, true},  // the "pinned" event never made it
        {"cap-unknown", {}, false},                          // the log lost its record
        {"cap-deleted", {"accepted", "materialized", "evicted"}, false},
        {"cap-failed", {"accepted", "materialized", "restore_required", "restoration_failed"}, false},
    };
    {
        ClaimLog first;
        ASSERT_EQ(first.open_file(path), FROST_OK);
        for (const auto& c : cases)
            for (const char* ev : c.events) {
                ClaimEvent e;
                e.claim_id = c.id;
                e.event = ev;
                e.tier = std::string(ev) == "demoted" ? Tier::Device : Tier::Host;
                e.bytes = 64;
                first.append(e);
            }
    }
    std::map<std::string, std::vector<int32_t>> tokens;
    for (const auto& c : cases) {
        tokens[c.id] = random_tokens(rng, 5 + rng() % 40);
        const auto& t = tokens[c.id];
        std::ostringstream file;
        file << "TOKENS " << t.size();
        for (int32_t v : t) file << ' ' << v;
        ASSERT_TRUE(util::write_file(dir + "/" + c.id + kCapsuleFileExt, file.str(), nullptr));
        SidecarMeta m;
        m.id = c.id;
        m.owner = "key0";
        m.pinned = c.pinned_on_disk;
        m.token_digest = digest_hex(token_digest(t.data(), t.size()));
        ASSERT_TRUE(util::write_file(dir + "/" + c.id + kSidecarExt, sidecar_to_json(m, nullptr), nullptr));
    }

    Fixture b(1 << 20, path);
    const ReindexReport r = reindex_capsule_dir(dir, b.engine, *b.store, &b.log, 100.0);
    for (const auto& n : r.notes) SCOPED_TRACE(n);
    EXPECT_EQ(r.adopted, 6u);
    EXPECT_EQ(r.removed, 2u);
    EXPECT_EQ(r.quarantined, 0u);
    for (const char* gone : {"cap-deleted", "cap-failed"}) {
        EXPECT_EQ(b.store->find(gone, "key0"), nullptr) << gone;
        EXPECT_FALSE(util::file_exists(dir + "/" + gone + kCapsuleFileExt)) << gone;
        EXPECT_FALSE(util::file_exists(dir + "/" + gone + kSidecarExt)) << gone;
    }
    std::map<std::string, std::vector<std::string>> added;  // this run's events per claim
    for (const auto& e : b.log.recent()) added[e.claim_id].push_back(e.event);
    using V = std::vector<std::string>;
    EXPECT_EQ(added["cap-pending"], V{"materialized"});
    EXPECT_EQ(added["cap-demoting"], V{"offloaded"});
    EXPECT_EQ(added["cap-restoring"], V{"restored"});
    EXPECT_EQ(added["cap-live"], V{});
    EXPECT_EQ(added["cap-pinned"], V{"pinned"});
    EXPECT_EQ(added["cap-unknown"], (V{"accepted", "materialized"}));
    EXPECT_EQ(added["cap-deleted"], V{});
    EXPECT_EQ(added["cap-failed"], (V{"refused", "evicted"}));  // ended along its state machine
    for (const auto& c : cases) {
        const CapsuleRecord* rec = b.store->find(c.id, "key0");
        if (!rec) continue;
        EXPECT_EQ(rec->tokens, tokens[c.id]) << c.id;
        EXPECT_EQ(rec->pinned, c.pinned_on_disk) << c.id;
    }
    // The next events of every adopted claim are allowed: it is live on disk.
    for (const auto& c : cases) {
        if (!b.store->find(c.id, "key0")) continue;
        ClaimEvent e;
        e.claim_id = c.id;
        e.event = claim_event::kRestoreRequired;
        e.tier = Tier::Disk;
        b.log.append(e);
    }
    const std::string cmd = std::string(FROST_PYTHON_EXE) + " " + FROST_SOURCE_DIR + "/scripts/claimlog_check.py " + path;
    if (::access(FROST_PYTHON_EXE, X_OK) != 0) ADD_FAILURE() << "no " << FROST_PYTHON_EXE << " for " << cmd;
    else EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<std::string> names;
    std::string why;
    ASSERT_TRUE(util::list_dir(dir, &names, &why));
    for (const auto& n : names) ::unlink((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

TEST(ServePersistence, ClaimLogContinuesAPreviousRun) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/claims.jsonl";
    {
        ClaimLog first;
        ASSERT_EQ(first.open_file(path), FROST_OK);
        for (int i = 0; i < 3; ++i) {
            ClaimEvent e;
            e.claim_id = "cap-1";
            e.event = i == 0 ? "accepted" : i == 1 ? "materialized" : "pinned";
            e.time = 10.0 + i;
            first.append(e);
        }
    }
    ClaimLog second;
    ASSERT_EQ(second.open_file(path), FROST_OK);
    ClaimEvent e;
    e.claim_id = "cap-1";
    e.event = "unpinned";
    e.time = 0.5;  // the new process's clock starts over
    EXPECT_EQ(second.append(e), 4u);
    std::string text;
    ASSERT_TRUE(util::read_file(path, &text, nullptr));
    const std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
    EXPECT_NE(last.find("\"seq\":4"), std::string::npos) << last;
    EXPECT_NE(last.find("\"time\":12.5"), std::string::npos) << last;
    ::unlink(path.c_str());
    ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace frost::serve

namespace frost::serve {
namespace {

// The scheduler's wiring of the store to persistence: a capsule landing on disk is written at
// once (persist_to_disk), a policy change rewrites the sidecar, a drop removes the pair.
struct DurableFixture {
    double now = 0;
    std::string dir;
    ClaimLog log;
    FileEngine engine;
    std::unique_ptr<CapsuleStore> store;
    DurableFixture(const std::string& d, uint64_t memory_budget) : dir(d) {
        StoreBudgets b;
        b.bytes[0] = b.bytes[1] = memory_budget;
        b.bytes[2] = 1 << 20;
        StoreHooks hooks;
        hooks.move = [this](CapsuleRecord& r, Tier to) {
            if (to == Tier::Disk) return persist_to_disk(dir, engine, r, store->ttl_left(r), 5000.0);
            return FROST_OK;
        };
        hooks.drop = [this](CapsuleRecord& r) {
            engine.drop(r.handle);
            if (r.persisted) remove_persisted(dir, r.id);
        };
        hooks.changed = [this](const CapsuleRecord& r) {
            if (r.persisted) (void)write_sidecar(dir, r, store->ttl_left(r), 5000.0);
        };
        store = std::make_unique<CapsuleStore>(b, hooks, &log, [this] { return now; });
    }
    void add(const std::string& id, std::vector<int32_t> tokens) {
        CapsuleRequest req;
        req.id = id;
        req.owner = "key1";
        req.bytes = 100 + 4 * tokens.size();
        req.tokens = tokens;
        Tier placed;
        std::vector<std::string> blocking;
        ASSERT_EQ(store->admit(req, &placed, &blocking), FROST_OK);
        const uint64_t h = engine.next++;
        engine.caps[h] = tokens;
        ASSERT_EQ(store->materialize(id, h, req.bytes), FROST_OK);
    }
    SidecarMeta sidecar(const std::string& id) {
        std::string text, why;
        SidecarMeta m;
        EXPECT_TRUE(util::read_file(dir + "/" + id + ".json", &text, &why)) << id;
        EXPECT_EQ(sidecar_from_json(text, &m), FROST_OK) << text;
        return m;
    }
};

std::vector<std::string> dir_names(const std::string& dir) {
    std::vector<std::string> names;
    std::string why;
    util::list_dir(dir, &names, &why);
    std::sort(names.begin(), names.end());
    return names;
}

void remove_dir(const std::string& dir) {
    for (const auto& n : dir_names(dir)) ::unlink((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

}  // namespace

TEST(ServePersistence, DemotionToDiskIsDurableAtOnceWithoutAFlush) {
    std::mt19937 rng(std::random_device{}());
    const std::string dir = temp_dir();
    const auto t0 = random_tokens(rng, 25), t1 = random_tokens(rng, 25), t2 = random_tokens(rng, 25);
    {
        DurableFixture a(dir, 250);  // device and host hold one 200-byte capsule each
        a.add("cap-a", t0);
        a.add("cap-b", t1);
        EXPECT_TRUE(dir_names(dir).empty());  // memory tiers only so far
        a.add("cap-c", t2);                    // a -> disk, b -> host, c on device
        EXPECT_EQ(a.store->find("cap-a", "key1")->tier, Tier::Disk);
        EXPECT_EQ(dir_names(dir), (std::vector<std::string>{"cap-a.frostcap", "cap-a.json"}));
        EXPECT_EQ(a.sidecar("cap-a").owner, "key1");
        EXPECT_FALSE(a.sidecar("cap-a").pinned);
        ASSERT_EQ(a.store->set_pinned("cap-a", "key1", true), FROST_OK);
        ASSERT_EQ(a.store->set_priority("cap-a", "key1", 9), FROST_OK);
        ASSERT_EQ(a.store->set_ttl("cap-a", "key1", 60), FROST_OK);
        const SidecarMeta m = a.sidecar("cap-a");
        EXPECT_TRUE(m.pinned);
        EXPECT_EQ(m.priority, 9);
        EXPECT_DOUBLE_EQ(m.expires_unix, 5060.0);
        a.add("cap-d", random_tokens(rng, 25));  // b -> disk too
        ASSERT_EQ(a.store->remove("cap-b", "key1"), FROST_OK);
        EXPECT_EQ(dir_names(dir), (std::vector<std::string>{"cap-a.frostcap", "cap-a.json"}));
        // No flush_capsule_dir(): this scope ends like a crash.
    }
    DurableFixture b(dir, 250);
    const ReindexReport r = reindex_capsule_dir(dir, b.engine, *b.store, &b.log, 5010.0);
    EXPECT_EQ(r.adopted, 1u);
    EXPECT_EQ(r.quarantined, 0u);
    const CapsuleRecord* got = b.store->find("cap-a", "key1");
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->tokens, t0);
    EXPECT_TRUE(got->pinned);
    EXPECT_EQ(got->priority, 9);
    EXPECT_NEAR(b.store->ttl_left(*got), 50.0, 1e-6);
    remove_dir(dir);
}

TEST(ServePersistence, FailedDiskWriteAtDemotionEvictsAndLeavesNoFile) {
    std::mt19937 rng(std::random_device{}());
    // Each gated step of the sidecar write (write, fsync, rename, directory fsync) in turn.
    for (uint64_t nth = 1; nth <= 4; ++nth) {
        const std::string dir = temp_dir();
        DurableFixture a(dir, 250);
        a.add("cap-a", random_tokens(rng, 25));
        a.add("cap-b", random_tokens(rng, 25));
        frost_fault_arm(FROST_FAULT_IO, nth, 0);
        a.add("cap-c", random_tokens(rng, 25));  // a's demotion to disk fails
        frost_fault_clear();
        EXPECT_EQ(a.store->find("cap-a", "key1"), nullptr) << "nth " << nth;
        EXPECT_EQ(a.engine.caps.size(), 2u) << "nth " << nth;
        EXPECT_TRUE(dir_names(dir).empty()) << "nth " << nth << ": " << (dir_names(dir).empty() ? "" : dir_names(dir)[0]);
        remove_dir(dir);
    }
}

// Issue 13: restart re-indexing must not be able to hand one key's capsule to another. Sidecars
// carry an HMAC (the dir's secret, the owner's API key): an edited owner, a sidecar naming a
// key this server does not have, one without a mac, and the keys reordered are all refused.
TEST(ServePersistence, SidecarsAreAuthenticatedAndBoundToTheirKey) {
    std::mt19937 rng(std::random_device{}());
    const std::string dir = temp_dir();
    const std::map<std::string, std::string> keys{{"key0", "sk-alpha"}, {"key1", "sk-beta"}};
    SidecarAuth auth;
    ASSERT_EQ(load_sidecar_auth(dir, keys, &auth), FROST_OK);
    SidecarAuth again;  // the secret is kept in the dir: a restart reads the same one
    ASSERT_EQ(load_sidecar_auth(dir, keys, &again), FROST_OK);
    EXPECT_EQ(again.secret, auth.secret);
    EXPECT_EQ(auth.secret.size(), 32u);
    {
        Fixture a(1 << 20);
        a.add("cap-own", "key0", random_tokens(rng, 40), false, 0, 0);
        a.add("cap-moved", "key0", random_tokens(rng, 40), false, 0, 0);
        a.add("cap-ghost", "key0", random_tokens(rng, 40), false, 0, 0);
        a.add("cap-plain", "key1", random_tokens(rng, 40), false, 0, 0);
        const FlushReport f = flush_capsule_dir(dir, a.engine, *a.store, 1000.0, &auth);
        ASSERT_EQ(f.written, 4u);
    }
    auto edit = [&](const std::string& id, const std::string& from, const std::string& to) {
        std::string side;
        ASSERT_TRUE(util::read_file(dir + "/" + id + ".json", &side, nullptr));
        const size_t at = side.find(from);
        ASSERT_NE(at, std::string::npos) << side;
        side.replace(at, from.size(), to);
        ASSERT_TRUE(util::write_file(dir + "/" + id + ".json", side, nullptr));
    };
    edit("cap-moved", "\"owner\": \"key0\"", "\"owner\": \"key1\"");  // hand it to another key
    edit("cap-ghost", "\"owner\": \"key0\"", "\"owner\": \"key7\"");  // a key this server lacks
    {
        // An unauthenticated sidecar (an old or planted one) is refused too.
        std::string side;
        ASSERT_TRUE(util::read_file(dir + "/cap-plain.json", &side, nullptr));
        nlohmann::json j = nlohmann::json::parse(side);
        j.erase("mac");
        ASSERT_TRUE(util::write_file(dir + "/cap-plain.json", j.dump(2), nullptr));
    }
    Fixture b(1 << 20);
    const ReindexReport r = reindex_capsule_dir(dir, b.engine, *b.store, &b.log, 1001.0, &auth);
    std::string notes;
    for (const auto& n : r.notes) notes += n + "\n";
    EXPECT_EQ(r.adopted, 1u) << notes;
    EXPECT_NE(b.store->find("cap-own", "key0"), nullptr) << notes;
    EXPECT_EQ(b.store->find("cap-moved", "key1"), nullptr);
    EXPECT_EQ(b.store->find("cap-moved", "key0"), nullptr);
    EXPECT_EQ(b.store->find("cap-ghost", "key7"), nullptr);
    EXPECT_EQ(b.store->find("cap-plain", "key1"), nullptr);
    EXPECT_NE(notes.find("unknown key 'key7'"), std::string::npos) << notes;
    EXPECT_NE(notes.find("mac mismatch"), std::string::npos) << notes;
    EXPECT_NE(notes.find("no mac"), std::string::npos) << notes;
    // The same files under reordered keys: key0's capsule now names another key's scope.
    SidecarAuth swapped;
    ASSERT_EQ(load_sidecar_auth(dir, {{"key0", "sk-beta"}, {"key1", "sk-alpha"}}, &swapped), FROST_OK);
    SidecarMeta m;
    std::string side;
    ASSERT_TRUE(util::read_file(dir + "/cap-own.json", &side, nullptr));
    EXPECT_EQ(sidecar_from_json(side, &m, &auth), FROST_OK);
    EXPECT_EQ(sidecar_from_json(side, &m, &swapped), FROST_ERR_CORRUPT);
    std::string why;
    std::vector<std::string> names;
    if (util::list_dir(dir + "/quarantine", &names, &why))
        for (const auto& n : names) ::unlink((dir + "/quarantine/" + n).c_str());
    ::rmdir((dir + "/quarantine").c_str());
    ASSERT_TRUE(util::list_dir(dir, &names, &why));
    for (const auto& n : names) ::unlink((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

}  // namespace frost::serve
