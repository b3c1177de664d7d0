// The capsule verbs over HTTP on a real loopback server over the fake engine: create from a
// messages prefix or token ids (with pin / priority / TTL), fork (n choices from one capsule),
// rollback (back to an earlier boundary while the live state went further), per-key isolation,
// the 400/404/405/409 answers, and 507 when the disk tier cannot write a capsule or its memory
// tier cannot hold it. Outputs are
// compared with a capsule-free server's.
#include <gtest/gtest.h>

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "serve/api.h"
#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/http_server.h"
#include "serve/scheduler.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

constexpr const char* kKey = "sk-verbs-0";
constexpr const char* kOtherKey = "sk-verbs-1";

struct VerbServer {
    FakeEngine engine{2, 1024};
    FakeText text;
    Metrics metrics;
    FakeServerStack stack;

    explicit VerbServer(bool capsules = true) {
        engine.capsules = capsules;
        SchedulerConfig sc;
        sc.budgets.bytes[0] = sc.budgets.bytes[1] = 1 << 20;
        stack.start(engine, text, metrics, sc, {kKey, kOtherKey});
    }
    RawResponse req(const std::string& method, const std::string& path, const json& body = nullptr,
                    const std::string& key = kKey) {
        return http_request(stack.port(), method, path, body.is_null() ? "" : body.dump(), key);
    }
};

json msg(const char* role, const std::string& s) { return json{{"role", role}, {"content", s}}; }

json chat(const std::vector<json>& messages, int max_tokens = 6) {
    return json{{"model", "fake"}, {"messages", json(messages)}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::string content(const json& j, int i = 0) { return j["choices"][i]["message"]["content"].get<std::string>(); }

TEST(CapsuleVerbs, CreateFromMessagesThenForkAndRollback) {
    std::mt19937 rng(std::random_device{}());
    VerbServer s;
    VerbServer cold(false);
    const std::vector<json> base = {msg("system", random_words(rng, 30)), msg("user", random_words(rng, 8))};

    auto r = s.req("POST", "/v1/capsules", json{{"messages", json(base)}, {"pinned", true}, {"priority", 7}, {"ttl_s", 600}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json cap = json::parse(r.body);
    const std::string id = cap["id"];
    EXPECT_EQ(cap["object"], "capsule");
    EXPECT_TRUE(cap["pinned"].get<bool>());
    EXPECT_EQ(cap["priority"], 7);
    EXPECT_EQ(cap["ttl_s"], 600);
    EXPECT_GT(cap["tokens"].get<int>(), 100);
    EXPECT_EQ(cap["frost"]["plan"], "rebuild");
    // The same prefix again is the same capsule, not a second copy.
    r = s.req("POST", "/v1/capsules", json{{"messages", json(base)}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["id"], id);
    EXPECT_EQ(s.req("GET", "/v1/capsules", nullptr).body.find(id) != std::string::npos, true);

    // Another key sees nothing, and cannot fork it.
    std::vector<json> branch = base;
    branch.push_back(msg("assistant", "ok"));
    branch.push_back(msg("user", random_words(rng, 5)));
    EXPECT_EQ(s.req("GET", "/v1/capsules/" + id, nullptr, kOtherKey).status, 404);
    EXPECT_EQ(s.req("POST", "/v1/capsules/" + id + "/fork", chat(branch), kOtherKey).status, 404);

    // Fork: two choices, each restored from the capsule, equal to a cold server's.
    json fork_body = chat(branch);
    fork_body["n"] = 2;
    const uint64_t prefilled_before = s.engine.prefilled_tokens;
    r = s.req("POST", "/v1/capsules/" + id + "/fork", fork_body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json fj = json::parse(r.body);
    EXPECT_EQ(fj["frost"]["plan"], "restore");
    EXPECT_EQ(fj["frost"]["capsule_id"], id);
    EXPECT_EQ(fj["usage"]["prompt_tokens_details"]["cached_tokens"], cap["tokens"]);
    // Only the suffix is prefilled, once per choice: the capsule's tokens are never recomputed.
    const uint64_t suffix = fj["usage"]["prompt_tokens"].get<uint64_t>() - cap["tokens"].get<uint64_t>();
    EXPECT_LE(s.engine.prefilled_tokens - prefilled_before, 2 * suffix);
    const auto cr = cold.req("POST", "/v1/chat/completions", chat(branch));
    ASSERT_EQ(cr.status, 200) << cr.body;
    EXPECT_EQ(content(fj, 0), content(json::parse(cr.body)));
    EXPECT_EQ(content(fj, 1), content(json::parse(cr.body)));

    // Rollback: the live state runs further down one branch; the rollback returns to the capsule.
    std::vector<json> longer = branch;
    longer.push_back(msg("assistant", content(fj)));
    longer.push_back(msg("user", random_words(rng, 6)));
    ASSERT_EQ(s.req("POST", "/v1/chat/completions", chat(longer)).status, 200);
    std::vector<json> other = base;
    other.push_back(msg("assistant", "no"));
    other.push_back(msg("user", random_words(rng, 4)));
    r = s.req("POST", "/v1/capsules/" + id + "/rollback", chat(other));
    ASSERT_EQ(r.status, 200) << r.body;
    const json rj = json::parse(r.body);
    EXPECT_EQ(rj["frost"]["plan"], "restore");
    EXPECT_EQ(rj["frost"]["capsule_id"], id);
    const auto cr2 = cold.req("POST", "/v1/chat/completions", chat(other));
    EXPECT_EQ(content(rj), content(json::parse(cr2.body)));
    // A rollback whose prompt does not extend the capsule is a 404 naming it, never a rebuild.
    r = s.req("POST", "/v1/capsules/" + id + "/rollback", chat({msg("user", "unrelated")}));
    EXPECT_EQ(r.status, 404) << r.body;
}

TEST(CapsuleVerbs, CreateFromTokenIdsAndBadRequests) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> tok(1, 200);
    VerbServer s;
    std::vector<int> ids(90);
    for (auto& t : ids) t = tok(rng);
    auto r = s.req("POST", "/v1/capsules", json{{"prompt", ids}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json cap = json::parse(r.body);
    EXPECT_EQ(cap["tokens"], 90);
    EXPECT_FALSE(cap["pinned"].get<bool>());
    std::vector<int> more = ids;
    more.push_back(7);
    more.push_back(9);
    r = s.req("POST", "/v1/capsules/" + cap["id"].get<std::string>() + "/fork",
              json{{"prompt", more}, {"max_tokens", 3}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["frost"]["plan"], "restore");

    auto param = [](const RawResponse& x) { return json::parse(x.body)["error"]["param"]; };
    r = s.req("POST", "/v1/capsules", json{{"prompt", ids}, {"messages", json::array()}});
    EXPECT_EQ(r.status, 400);
    r = s.req("POST", "/v1/capsules", json{{"prompt", ids}, {"max_tokens", 4}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(param(r), "max_tokens");
    r = s.req("POST", "/v1/capsules", json{{"prompt", ids}, {"priority", 5000}});
    EXPECT_EQ(param(r), "priority");
    r = s.req("POST", "/v1/capsules", json{{"prompt", ids}, {"ttl_s", -1}});
    EXPECT_EQ(param(r), "ttl_s");
    r = s.req("POST", "/v1/capsules", json{{"prompt", ids}, {"session_id", "../../etc"}});
    EXPECT_EQ(param(r), "session_id");
    r = s.req("POST", "/v1/capsules/" + cap["id"].get<std::string>() + "/fork",
              json{{"prompt", more}, {"capsule_id", "cap-other"}});
    EXPECT_EQ(param(r), "capsule_id");
    EXPECT_EQ(s.req("GET", "/v1/capsules/" + cap["id"].get<std::string>() + "/fork").status, 405);
    EXPECT_EQ(s.req("POST", "/v1/capsules/bad.id/fork", json{{"prompt", more}}).status, 400);
    EXPECT_EQ(s.req("POST", "/v1/capsules/cap-missing/rollback", json{{"prompt", more}}).status, 404);
}

// Reliability case T15's deep chain: 100 capsules, each extending the one before it (capsule_id),
// then a fork from the deepest equal to a cold server's completion of the whole prompt, and every
// capsule deleted in random order: the listing empties and the engine holds no capsule bytes.
TEST(CapsuleVerbs, HundredDeepExtensionChainThenEveryCapsuleIsFreed) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> tok(1, 200);
    VerbServer s;
    VerbServer cold(false);
    std::vector<int> ids(70);
    for (auto& t : ids) t = tok(rng);
    auto r = s.req("POST", "/v1/capsules", json{{"prompt", ids}});
    ASSERT_EQ(r.status, 200) << r.body;
    std::vector<std::string> chain = {json::parse(r.body)["id"].get<std::string>()};
    for (int depth = 1; depth <= 100; ++depth) {
        for (int k = 0; k < 3; ++k) ids.push_back(tok(rng));
        r = s.req("POST", "/v1/capsules", json{{"prompt", ids}, {"capsule_id", chain.back()}});
        ASSERT_EQ(r.status, 200) << "depth " << depth << ": " << r.body;
        const json cap = json::parse(r.body);
        EXPECT_EQ(cap["tokens"], ids.size()) << "depth " << depth;
        ASSERT_EQ(std::find(chain.begin(), chain.end(), cap["id"].get<std::string>()), chain.end()) << "depth " << depth;
        chain.push_back(cap["id"]);
    }
    EXPECT_EQ(s.engine.live_capsules(), chain.size());
    std::vector<int> more = ids;
    more.push_back(7);
    const json body = {{"prompt", more}, {"max_tokens", 5}, {"temperature", 0}};
    r = s.req("POST", "/v1/capsules/" + chain.back() + "/fork", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["frost"]["plan"], "restore");
    const auto cr = cold.req("POST", "/v1/completions", body);
    ASSERT_EQ(cr.status, 200) << cr.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], json::parse(cr.body)["choices"][0]["text"]);
    std::shuffle(chain.begin(), chain.end(), rng);
    for (const auto& id : chain) EXPECT_EQ(s.req("DELETE", "/v1/capsules/" + id + "?force=true").status, 200) << id;
    const json left = json::parse(s.req("GET", "/v1/capsules").body);
    EXPECT_TRUE(left["data"].empty()) << left.dump();
    EXPECT_EQ(s.engine.live_capsules(), 0u);
}

// Reliability case T20: a capsule placed on the disk tier whose files cannot be written is the
// storage's failure, 507 capsule_storage_failed (not the request's 409), with nothing half-written
// left beside the capsule stored before, which still restores; the server keeps serving, and the
// disk takes the next capsule once it works again. Each gated step of the acknowledging sidecar
// write (write, fsync, rename, directory fsync) fails once in turn, then every I/O persistently.
std::vector<std::string> dir_names(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d))
            if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

TEST(CapsuleVerbs, DiskWriteFailureIs507AndKeepsWhatWasStored) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> tok(1, 200);
    auto ids_of = [&](int n) {
        std::vector<int> v(static_cast<size_t>(n));
        for (auto& t : v) t = tok(rng);
        return v;
    };
    char tmpl[] = "/tmp/frost-verbs-disk-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    ASSERT_NE(made, nullptr);
    const std::string dir = made;
    {
        FakeEngine engine{2, 1024};
        engine.files = true;
        FakeText text;
        Metrics metrics;
        FakeServerStack stack;
        SchedulerConfig sc;
        sc.budgets.bytes[2] = 1 << 20;  // device and host tiers off: every capsule lands on disk
        sc.capsule_dir = dir;
        stack.start(engine, text, metrics, sc, {kKey});
        auto req = [&](const std::string& method, const std::string& path, const json& body = nullptr) {
            return http_request(stack.port(), method, path, body.is_null() ? "" : body.dump(), kKey);
        };
        const std::vector<int> first = ids_of(90);
        auto r = req("POST", "/v1/capsules", json{{"prompt", first}});
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string kept = json::parse(r.body)["id"];
        const std::vector<std::string> stored = dir_names(dir);
        EXPECT_NE(std::find(stored.begin(), stored.end(), kept + ".json"), stored.end()) << "the kept capsule's sidecar";
        for (int round = 1; round <= 5; ++round) {
            const bool persistent = round == 5;
            frost_fault_arm(FROST_FAULT_IO, persistent ? 1 : uint64_t(round), persistent ? 1 : 0);
            r = req("POST", "/v1/capsules", json{{"prompt", ids_of(90)}});
            frost_fault_clear();
            EXPECT_EQ(r.status, 507) << "round " << round << ": " << r.body;
            EXPECT_EQ(json::parse(r.body)["error"]["code"], "capsule_storage_failed") << "round " << round;
            EXPECT_EQ(dir_names(dir), stored) << "round " << round << ": a half-written pair or a temp file was left";
            EXPECT_EQ(req("GET", "/health").status, 200) << "round " << round;
            const json all = json::parse(req("GET", "/v1/capsules").body);
            ASSERT_EQ(all["data"].size(), 1u) << "round " << round << ": " << all.dump();
            EXPECT_EQ(all["data"][0]["id"], kept);
        }
        std::vector<int> more = first;
        more.push_back(7);
        more.push_back(9);
        r = req("POST", "/v1/capsules/" + kept + "/fork", json{{"prompt", more}, {"max_tokens", 3}, {"temperature", 0}});
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(json::parse(r.body)["frost"]["plan"], "restore");
        r = req("POST", "/v1/capsules", json{{"prompt", ids_of(90)}});
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(dir_names(dir).size(), stored.size() + 2) << "the new capsule's pair";
    }
    for (const auto& n : dir_names(dir)) ::unlink((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

// Reliability case T32: a freeze that finds no memory on its tier. A chat turn is served all the
// same (its output equals a server's with room), only its capsule is not made; a capsule-only
// request answers 507 capsule_storage_failed naming the reason; the claim is refused, nothing is
// held; once memory is back, capsules are made again.
TEST(CapsuleVerbs, NoMemoryToFreezeServesTheTurnAndAnswers507ForACapsule) {
    std::mt19937 rng(std::random_device{}());
    const std::string words = "alpha beta gamma delta " + std::to_string(rng());
    const json turn = chat({msg("system", "sys"), msg("user", words)}, 5);
    VerbServer room, full;
    const auto want = room.req("POST", "/v1/chat/completions", turn);
    ASSERT_EQ(want.status, 200) << want.body;
    EXPECT_FALSE(json::parse(room.req("GET", "/v1/capsules").body)["data"].empty()) << "a turn freezes a capsule";

    full.engine.fail_snapshot = true;
    const auto got = full.req("POST", "/v1/chat/completions", turn);
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(content(json::parse(got.body)), content(json::parse(want.body)));
    EXPECT_TRUE(json::parse(full.req("GET", "/v1/capsules").body)["data"].empty());
    const auto r = full.req("POST", "/v1/capsules", json{{"messages", json::array({msg("user", words)})}});
    EXPECT_EQ(r.status, 507) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "capsule_storage_failed");
    EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("no room to freeze"), std::string::npos)
        << r.body;
    EXPECT_EQ(full.engine.live_capsules(), 0u);
    bool refused = false;
    full.stack.sched().control([&](CapsuleStore& store, ClaimLog& log) {
        EXPECT_EQ(store.size(), 0u);
        for (const auto& e : log.recent()) refused |= e.event == claim_event::kRefused;
    });
    EXPECT_TRUE(refused);

    full.engine.fail_snapshot = false;
    EXPECT_EQ(full.req("POST", "/v1/capsules", json{{"messages", json::array({msg("user", words)})}}).status, 200);
    EXPECT_EQ(full.engine.live_capsules(), 1u);
}

TEST(CapsuleVerbs, CreateIsRefusedWithoutCapsules) {
    VerbServer s(false);
    const auto r = s.req("POST", "/v1/capsules", json{{"prompt", std::vector<int>(80, 5)}});
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "capsule_refused");
}

}  // namespace
