// The planner (append / restore / rebuild with digest + full-compare verification) and the
// capsule store policy (budgets, pins, LRU with priority, TTL, demotion, fail-closed restore),
// whose claim log is then replayed by scripts/claimlog_check.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <tuple>

#include "serve/capsule_store.h"
#include "serve/planner.h"

using namespace frost::serve;

namespace {

std::vector<int32_t> random_ids(std::mt19937& rng, size_t n) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = int32_t(rng() % 50000);
    return v;
}

CapsuleView view(const std::string& id, const std::vector<int32_t>& toks) {
    return CapsuleView{id, &toks, token_digest(toks.data(), toks.size()), true};
}

}  // namespace

TEST(Planner, AppendWhenJournalIsAPrefix) {
    std::mt19937 rng(std::random_device{}());
    const auto prompt = random_ids(rng, 100);
    const std::vector<int32_t> journal(prompt.begin(), prompt.begin() + 60);
    PlanInput in;
    in.prompt = &prompt;
    in.journal = &journal;
    const Plan p = plan_request(in);
    EXPECT_EQ(p.action, PlanAction::Append);
    EXPECT_EQ(p.cached_tokens, 60u);
}

TEST(Planner, DivergedJournalFallsBackToLongestCapsule) {
    std::mt19937 rng(std::random_device{}());
    const auto prompt = random_ids(rng, 200);
    auto journal = std::vector<int32_t>(prompt.begin(), prompt.begin() + 150);
    journal[120] ^= 1;  // the client dropped the thinking block: live state diverges at 120
    const std::vector<int32_t> c1(prompt.begin(), prompt.begin() + 40), c2(prompt.begin(), prompt.begin() + 110);
    auto c3 = std::vector<int32_t>(prompt.begin(), prompt.begin() + 130);
    c3[125] ^= 1;  // longer but not a prefix
    PlanInput in;
    in.prompt = &prompt;
    in.journal = &journal;
    in.capsules = {view("c1", c1), view("c2", c2), view("c3", c3)};
    const Plan p = plan_request(in);
    EXPECT_EQ(p.action, PlanAction::Restore);
    EXPECT_EQ(p.capsule_id, "c2");
    EXPECT_EQ(p.cached_tokens, 110u);
    EXPECT_EQ(p.journal_lcp, 120u);
}

TEST(Planner, PrefersAppendOnTieAndRestoreWhenLonger) {
    std::mt19937 rng(std::random_device{}());
    const auto prompt = random_ids(rng, 64);
    const std::vector<int32_t> journal(prompt.begin(), prompt.begin() + 30), cap(prompt.begin(), prompt.begin() + 30),
        longer(prompt.begin(), prompt.begin() + 50);
    PlanInput in;
    in.prompt = &prompt;
    in.journal = &journal;
    in.capsules = {view("same", cap)};
    EXPECT_EQ(plan_request(in).action, PlanAction::Append);
    in.capsules.push_back(view("longer", longer));
    EXPECT_EQ(plan_request(in).capsule_id, "longer");
}

TEST(Planner, DigestCollisionNeverSharesState) {
    // T27: a capsule whose stored digest equals the prompt prefix's but whose tokens differ (a
    // forced collision) is rejected by the full compare.
    std::mt19937 rng(std::random_device{}());
    const auto prompt = random_ids(rng, 50);
    auto forged = std::vector<int32_t>(prompt.begin(), prompt.begin() + 40);
    forged[7] += 1;
    CapsuleView v{"forged", &forged, token_digest(prompt.data(), 40), true};
    PlanInput in;
    in.prompt = &prompt;
    in.capsules = {v};
    EXPECT_EQ(plan_request(in).action, PlanAction::Rebuild);
}

TEST(Planner, LeavesOneTokenToPrefillAndHonoursRequiredCapsule) {
    std::mt19937 rng(std::random_device{}());
    const auto prompt = random_ids(rng, 20);
    const std::vector<int32_t> whole = prompt;  // covers everything: unusable (no logits left)
    const std::vector<int32_t> part(prompt.begin(), prompt.begin() + 5);
    PlanInput in;
    in.prompt = &prompt;
    in.journal = &whole;
    in.capsules = {view("whole", whole)};
    EXPECT_EQ(plan_request(in).action, PlanAction::Rebuild);
    in.capsules.push_back(view("part", part));
    in.required_capsule = "whole";
    EXPECT_TRUE(plan_request(in).required_missing);
    in.required_capsule = "part";
    const Plan p = plan_request(in);
    EXPECT_EQ(p.action, PlanAction::Restore);
    EXPECT_EQ(p.capsule_id, "part");
}

namespace {

struct StoreFixture {
    double now = 0;
    ClaimLog log;
    std::set<uint64_t> live_handles;
    int moves = 0;
    bool fail_moves = false;
    frost_status move_failure = FROST_ERR_IO;  // what a failing move returns
    std::unique_ptr<CapsuleStore> store;

    explicit StoreFixture(uint64_t dev, uint64_t host, uint64_t disk, const std::string& log_path = "") {
        if (!log_path.empty()) {
            EXPECT_EQ(log.open_file(log_path), FROST_OK);
        }
        StoreBudgets b;
        b.bytes[0] = dev;
        b.bytes[1] = host;
        b.bytes[2] = disk;
        StoreHooks h;
        h.move = [this](CapsuleRecord&, Tier) {
            if (fail_moves) return move_failure;
            ++moves;
            return FROST_OK;
        };
        h.drop = [this](CapsuleRecord& r) { live_handles.erase(r.handle); };
        store = std::make_unique<CapsuleStore>(b, h, &log, [this] { return now; });
    }

    frost_status add(const std::string& id, uint64_t bytes, bool pinned = false, int priority = 0, double ttl = 0,
                     std::vector<std::string>* blocking = nullptr, Tier* placed_out = nullptr) {
        CapsuleRequest r;
        r.id = id;
        r.owner = std::string(1, 'k');  // not = "k": gcc 12 warns -Wrestrict (a false positive) once this inlines
        r.bytes = bytes;
        r.pinned = pinned;
        r.priority = priority;
        r.ttl_s = ttl;
        r.tokens = {1, 2, 3};
        Tier placed;
        std::vector<std::string> b;
        frost_status s = store->admit(r, &placed, blocking ? blocking : &b);
        if (s != FROST_OK) return s;
        static uint64_t handle = 100;
        live_handles.insert(++handle);
        if (placed_out) *placed_out = placed;
        now += 1;
        return store->materialize(id, handle, bytes);
    }
    Tier tier(const std::string& id) { return store->find(id, "k")->tier; }
};

}  // namespace

TEST(Store, LruDemotionDownTheTiersThenEviction) {
    StoreFixture f(200, 200, 100);
    ASSERT_EQ(f.add("a", 100), FROST_OK);
    ASSERT_EQ(f.add("b", 100), FROST_OK);
    ASSERT_EQ(f.add("c", 100), FROST_OK);  // a (LRU) demoted to host
    EXPECT_EQ(f.tier("a"), Tier::Host);
    EXPECT_EQ(f.tier("b"), Tier::Device);
    ASSERT_EQ(f.add("d", 100), FROST_OK);  // b -> host
    ASSERT_EQ(f.add("e", 100), FROST_OK);  // c -> host, a (host LRU) -> disk
    EXPECT_EQ(f.tier("a"), Tier::Disk);
    ASSERT_EQ(f.add("f", 100), FROST_OK);  // d -> host, b -> disk, a gone
    EXPECT_EQ(f.store->find("a", "k"), nullptr);
    EXPECT_EQ(f.store->used(Tier::Device), 200u);
    EXPECT_EQ(f.store->used(Tier::Host), 200u);
    EXPECT_EQ(f.store->used(Tier::Disk), 100u);
    EXPECT_EQ(f.live_handles.size(), f.store->size());
}

// POST /v1/capsules/{id} with several fields is one change: persistence hears of it once (one
// sidecar write holds all of it, so a crash keeps the whole change or none), with the pin logged.
TEST(Store, APolicyChangeOfSeveralFieldsNotifiesOnce) {
    double now = 10;
    ClaimLog log;
    std::vector<std::tuple<bool, int, double>> seen;  // the record at each notification
    StoreBudgets b;
    b.bytes[0] = b.bytes[1] = b.bytes[2] = 1000;
    StoreHooks h;
    h.move = [](CapsuleRecord&, Tier) { return FROST_OK; };
    h.drop = [](CapsuleRecord&) {};
    h.changed = [&](const CapsuleRecord& r) { seen.emplace_back(r.pinned, r.priority, r.ttl_s); };
    CapsuleStore store(b, h, &log, [&] { return now; });
    CapsuleRequest req;
    req.id = "a";
    req.owner = "k";
    req.bytes = 10;
    req.tokens = {1, 2, 3};
    Tier placed;
    std::vector<std::string> blocking;
    ASSERT_EQ(store.admit(req, &placed, &blocking), FROST_OK);
    ASSERT_EQ(store.materialize("a", 7, 10), FROST_OK);
    CapsuleStore::PolicyChange c;
    c.pinned = true;
    c.priority = 7;
    c.ttl_s = 60;
    ASSERT_EQ(store.set_policy("a", "k", c), FROST_OK);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0], std::make_tuple(true, 7, 60.0));
    EXPECT_NEAR(store.ttl_left(*store.find("a", "k")), 60, 1e-9);
    EXPECT_EQ(log.recent("a").back().event, claim_event::kPinned);
    // Nothing changes: no notification. Another key's id: not found, untouched.
    c.ttl_s.reset();
    ASSERT_EQ(store.set_policy("a", "k", c), FROST_OK);
    EXPECT_EQ(seen.size(), 1u);
    EXPECT_EQ(store.set_policy("a", "other", c), FROST_ERR_NOT_FOUND);
    EXPECT_EQ(seen.size(), 1u);
}

TEST(Store, PriorityBeatsRecency) {
    StoreFixture f(200, 0, 0);
    ASSERT_EQ(f.add("old_important", 100, false, 5), FROST_OK);
    ASSERT_EQ(f.add("new_cheap", 100, false, 0), FROST_OK);
    ASSERT_EQ(f.add("x", 100), FROST_OK);
    EXPECT_NE(f.store->find("old_important", "k"), nullptr);
    EXPECT_EQ(f.store->find("new_cheap", "k"), nullptr);
}

TEST(Store, PinsAreNeverEvictedAndANewPinThatCannotFitIsRefused) {
    StoreFixture f(200, 0, 0);
    ASSERT_EQ(f.add("p1", 100, true), FROST_OK);
    ASSERT_EQ(f.add("p2", 100, true), FROST_OK);
    std::vector<std::string> blocking;
    EXPECT_EQ(f.add("p3", 100, true, 0, 0, &blocking), FROST_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(blocking, (std::vector<std::string>{"p1", "p2"}));
    EXPECT_EQ(f.add("u", 50), FROST_ERR_OUT_OF_MEMORY);  // unpinned: no lower tier either
    EXPECT_NE(f.store->find("p1", "k"), nullptr);
    EXPECT_NE(f.store->find("p2", "k"), nullptr);
    // Unpinning makes it evictable.
    ASSERT_EQ(f.store->set_pinned("p1", "k", false), FROST_OK);
    ASSERT_EQ(f.add("p3", 100, true), FROST_OK);
    EXPECT_EQ(f.store->find("p1", "k"), nullptr);
}

TEST(Store, UnpinnedCapsuleLandsOnALowerTierWhenDeviceIsPinnedFull) {
    StoreFixture f(100, 100, 0);
    ASSERT_EQ(f.add("p", 100, true), FROST_OK);
    Tier placed;
    ASSERT_EQ(f.add("u", 100, false, 0, 0, nullptr, &placed), FROST_OK);
    EXPECT_EQ(placed, Tier::Host);
}

TEST(Store, TtlExpires) {
    StoreFixture f(1000, 0, 0);
    ASSERT_EQ(f.add("t", 100, false, 0, 5.0), FROST_OK);
    ASSERT_EQ(f.add("forever", 100), FROST_OK);
    f.now += 3;
    EXPECT_EQ(f.store->expire(), 0u);
    f.now += 3;
    EXPECT_EQ(f.store->expire(), 1u);
    EXPECT_EQ(f.store->find("t", "k"), nullptr);
    EXPECT_NE(f.store->find("forever", "k"), nullptr);
}

TEST(Store, OwnersAreIsolated) {
    StoreFixture f(1000, 0, 0);
    ASSERT_EQ(f.add("mine", 100), FROST_OK);
    EXPECT_EQ(f.store->find("mine", "other"), nullptr);
    EXPECT_EQ(f.store->remove("mine", "other"), FROST_ERR_NOT_FOUND);
    EXPECT_EQ(f.store->set_pinned("mine", "other", true), FROST_ERR_NOT_FOUND);
    CapsuleRecord r;
    EXPECT_EQ(f.store->begin_restore("mine", "other", "r", &r), FROST_ERR_NOT_FOUND);
    EXPECT_TRUE(f.store->list("other").empty());
}

TEST(Store, RestorePromotesAndAFailedRestoreFailsClosed) {
    StoreFixture f(100, 200, 0);
    ASSERT_EQ(f.add("a", 100), FROST_OK);
    ASSERT_EQ(f.add("b", 100), FROST_OK);  // a -> host
    ASSERT_EQ(f.tier("a"), Tier::Host);
    CapsuleRecord r;
    ASSERT_EQ(f.store->begin_restore("a", "k", "req1", &r), FROST_OK);
    EXPECT_EQ(r.tier, Tier::Device);  // promoted; b demoted to make room
    EXPECT_EQ(f.tier("b"), Tier::Host);
    // A busy capsule is neither deleted nor moved.
    EXPECT_EQ(f.store->remove("a", "k"), FROST_ERR_STATE);
    f.store->end_restore("a", FROST_OK, "req1", "");
    ASSERT_EQ(f.store->begin_restore("b", "k", "req2", &r), FROST_OK);
    f.store->end_restore("b", FROST_ERR_CORRUPT, "req2", "checksum mismatch");
    EXPECT_EQ(f.store->find("b", "k"), nullptr);  // dropped, never silently recomputed
    // A failed promotion is fail-closed too.
    ASSERT_EQ(f.add("c", 100), FROST_OK);  // a -> host
    f.fail_moves = true;
    EXPECT_NE(f.store->begin_restore("a", "k", "req3", &r), FROST_OK);
    EXPECT_EQ(f.store->find("a", "k"), nullptr);
    EXPECT_EQ(f.live_handles.size(), f.store->size());
    EXPECT_EQ(f.store->used(Tier::Host), 0u);
}

// T33: a restore that failed because memory was refused (the heap while copying, or the device
// tier's allocator on a promotion) fails its request closed but keeps the capsule, pinned or not:
// its bytes are intact. The claim log says so (`retained`) and the checker accepts it.
TEST(Store, ARestoreRefusedMemoryKeepsTheCapsule) {
    const std::string path = std::string(FROST_BINARY_DIR) + "/serve_test_policy_retained.jsonl";
    std::remove(path.c_str());
    {
        StoreFixture f(100, 200, 0, path);
        ASSERT_EQ(f.add("p", 100, /*pinned=*/true), FROST_OK);
        CapsuleRecord r;
        ASSERT_EQ(f.store->begin_restore("p", "k", "req1", &r), FROST_OK);
        f.store->end_restore("p", FROST_ERR_OUT_OF_MEMORY, "req1", "out of host memory");
        const CapsuleRecord* p = f.store->find("p", "k");
        ASSERT_NE(p, nullptr);
        EXPECT_TRUE(p->pinned);
        EXPECT_EQ(p->busy, 0);
        // A failed promotion for want of memory keeps the capsule where it was.
        ASSERT_EQ(f.add("a", 100), FROST_OK);
        ASSERT_EQ(f.store->set_pinned("p", "k", false), FROST_OK);
        ASSERT_EQ(f.add("b", 100), FROST_OK);  // the device tier holds one: a and p go to host
        const Tier before = f.tier("a");
        ASSERT_EQ(before, Tier::Host);
        f.fail_moves = true;
        f.move_failure = FROST_ERR_OUT_OF_MEMORY;
        EXPECT_EQ(f.store->begin_restore("a", "k", "req2", &r), FROST_ERR_OUT_OF_MEMORY);
        ASSERT_NE(f.store->find("a", "k"), nullptr);
        EXPECT_EQ(f.tier("a"), before);
        EXPECT_EQ(f.store->find("a", "k")->busy, 0);
        // ...and the next restore of it works.
        f.fail_moves = false;
        ASSERT_EQ(f.store->begin_restore("a", "k", "req3", &r), FROST_OK);
        f.store->end_restore("a", FROST_OK, "req3", "");
        EXPECT_EQ(f.live_handles.size(), f.store->size());
        const auto events = f.log.recent("p");
        int retained = 0;
        for (const auto& e : events) retained += e.retained;
        EXPECT_EQ(retained, 2);  // restoration_failed and refused
    }
    if (access(FROST_PYTHON_EXE, X_OK) != 0) GTEST_SKIP() << "no " << FROST_PYTHON_EXE << " for the claim checker";
    const std::string cmd = std::string(FROST_PYTHON_EXE) + " " + FROST_SOURCE_DIR + "/scripts/claimlog_check.py " + path;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Store, RandomWorkloadKeepsCountersAndPassesTheClaimChecker) {
    const std::string path = std::string(FROST_BINARY_DIR) + "/serve_test_policy_claims.jsonl";
    std::remove(path.c_str());
    std::mt19937 rng(std::random_device{}());
    {
        StoreFixture f(1000, 2000, 3000, path);
        std::vector<std::string> ids;
        for (int i = 0; i < 300; ++i) {
            const int op = int(rng() % 10);
            if (op < 4 || ids.empty()) {
                const std::string id = "c" + std::to_string(i);
                if (f.add(id, 50 + rng() % 400, rng() % 5 == 0, int(rng() % 3), rng() % 4 == 0 ? 3.0 : 0) == FROST_OK)
                    ids.push_back(id);
            } else {
                const std::string& id = ids[rng() % ids.size()];
                if (!f.store->find(id, "k")) continue;
                if (op == 4) f.store->set_pinned(id, "k", rng() % 2);
                else if (op == 5) f.store->remove(id, "k");
                else if (op == 6) f.store->expire();
                else {
                    CapsuleRecord r;
                    if (f.store->begin_restore(id, "k", "r" + std::to_string(i), &r) == FROST_OK)
                    {
                        // Some fail for good (I/O: the capsule is dropped), some because memory was
                        // refused (the capsule stays, its events `retained`).
                        const unsigned roll = rng() % 8;
                        f.store->end_restore(id, roll > 1 ? FROST_OK : roll == 1 ? FROST_ERR_IO : FROST_ERR_OUT_OF_MEMORY,
                                             "r" + std::to_string(i), "injected");
                    }
                }
            }
            f.now += 0.5;
            uint64_t sum[3] = {0, 0, 0};
            for (const auto* r : f.store->list("k")) {
                sum[int(r->tier)] += r->bytes;
                ASSERT_LE(f.store->used(r->tier), f.store->budget(r->tier));
            }
            for (int t = 0; t < 3; ++t) ASSERT_EQ(sum[t], f.store->used(Tier(t)));
            ASSERT_EQ(f.live_handles.size(), f.store->size());
        }
        EXPECT_EQ(f.log.write_errors(), 0u);
    }
    // The checker is Python; the GPU machine has no project venv (CI always has it).
    if (access(FROST_PYTHON_EXE, X_OK) != 0) GTEST_SKIP() << "no " << FROST_PYTHON_EXE << " for the claim checker";
    const std::string cmd = std::string(FROST_PYTHON_EXE) + " " + FROST_SOURCE_DIR + "/scripts/claimlog_check.py " + path;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Issue 13 B4: with a host tier too small for a capsule, demotion went host-or-nothing and
// evicted (deleting the files of) capsules while the disk tier had room. Demotion falls through
// to any lower tier that has room; only when none has is a capsule evicted.
TEST(Store, DemotionFallsThroughToAnyTierWithRoom) {
    StoreFixture f(300, 100, 10000);
    ASSERT_EQ(f.add("a", 200), FROST_OK);
    EXPECT_EQ(f.tier("a"), Tier::Device);
    ASSERT_EQ(f.add("b", 200), FROST_OK);  // a cannot fit the host tier at all: disk
    ASSERT_NE(f.store->find("a", "k"), nullptr) << "evicted while the disk tier had room";
    EXPECT_EQ(f.tier("a"), Tier::Disk);
    // Host full of a pinned capsule: the device's victim skips the host tier too.
    StoreFixture g(300, 200, 10000);
    ASSERT_EQ(g.add("p", 150), FROST_OK);
    ASSERT_EQ(g.add("q", 150), FROST_OK);  // device 300 full: p, q
    ASSERT_EQ(g.add("h", 150), FROST_OK);  // p -> host
    EXPECT_EQ(g.tier("p"), Tier::Host);
    ASSERT_EQ(g.store->set_pinned("p", "k", true), FROST_OK);
    ASSERT_EQ(g.add("x", 150), FROST_OK);  // q must leave the device; host holds pinned p: disk
    ASSERT_NE(g.store->find("q", "k"), nullptr);
    EXPECT_EQ(g.tier("q"), Tier::Disk);
    // With no room anywhere below, the capsule is evicted (as before).
    StoreFixture e(300, 100, 100);
    ASSERT_EQ(e.add("a", 200), FROST_OK);
    ASSERT_EQ(e.add("b", 200), FROST_OK);
    EXPECT_EQ(e.store->find("a", "k"), nullptr);
    for (StoreFixture* s : {&f, &g, &e}) EXPECT_EQ(s->live_handles.size(), s->store->size());
}
