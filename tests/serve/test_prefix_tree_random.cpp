// Reliability case T28 (shared/design/reliability.md): a random prefix tree of conversations
// driven through a capsule server whose device and host tiers hold only a few capsules, so
// capsules are demoted and evicted all the time, with random chats, creates (pinned or not, with
// priorities and TTLs), forks, rollbacks, deletions and pin/unpin. The fake engine's next token is
// a hash of the slot's whole state, so a wrongly shared, stale or mixed-up state shows up as
// different text: every output is compared with a capsule-free server's for the same request.
// A pinned capsule must never disappear; an unpinned one may be evicted (then 404, for good).
// The seed is fresh each run and printed; FROST_PREFIX_TREE_SEED=<n> replays one.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/scheduler.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

constexpr const char* kKey = "sk-tree-0";
// The fake's capsule costs 1000 + 4 bytes per token (FakeEngine::capsule_bytes_at). The tree's
// prefixes are ~80-600 tokens (1.3-3.4 kB): the device tier holds 2-5 of them, the host 3-7, and
// the disk tier is off, so capsules are demoted device -> host and then evicted during the run.
// Even the largest prefix fits an empty device tier (a pinned create is refused only by pins).
constexpr uint64_t kDeviceBytes = 7000;
constexpr uint64_t kHostBytes = 10000;
constexpr size_t kNodes = 400;  // the design's 400-node tree
constexpr int kOps = 1500;
constexpr size_t kMaxNodeMessages = 13;  // keeps every prompt well inside the fake's 1024 tokens

struct TreeServer {
    FakeEngine engine{2, 1024};
    FakeText text;
    Metrics metrics;
    FakeServerStack stack;

    explicit TreeServer(bool capsules) {
        engine.capsules = capsules;
        SchedulerConfig sc;
        sc.budgets.bytes[0] = kDeviceBytes;
        sc.budgets.bytes[1] = kHostBytes;
        stack.start(engine, text, metrics, sc, {kKey});
    }
    RawResponse req(const std::string& method, const std::string& path, const json& body = nullptr) {
        return http_request(stack.port(), method, path, body.is_null() ? "" : body.dump(), kKey);
    }
};

json msg(const std::string& role, const std::string& s) { return json{{"role", role}, {"content", s}}; }

json chat(const std::vector<json>& messages, int max_tokens) {
    return json{{"model", "fake"}, {"messages", json(messages)}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::string content(const json& j, size_t i = 0) { return j["choices"][i]["message"]["content"].get<std::string>(); }

json parse(const RawResponse& r) { return json::parse(r.body, nullptr, false); }

std::string error_code(const RawResponse& r) {
    const json j = parse(r);
    if (j.is_object() && j.contains("error") && j["error"].contains("code") && j["error"]["code"].is_string())
        return j["error"]["code"].get<std::string>();
    return "";
}

// The ids a refusal names as in its way ("... (blocking: cap-a, cap-b)").
std::vector<std::string> blocking_ids(const RawResponse& r) {
    std::vector<std::string> out;
    const json j = parse(r);
    if (!j.is_object() || !j.contains("error")) return out;
    const std::string m = j["error"].value("message", "");
    const std::string mark = "(blocking: ";
    const size_t at = m.find(mark);
    if (at == std::string::npos) return out;
    const size_t end = m.find(')', at);
    std::stringstream list(m.substr(at + mark.size(), end == std::string::npos ? std::string::npos : end - at - mark.size()));
    for (std::string id; std::getline(list, id, ',');) {
        while (!id.empty() && id.front() == ' ') id.erase(0, 1);
        if (!id.empty()) out.push_back(id);
    }
    return out;
}

struct Node {
    std::vector<json> msgs;
    int parent = -1;
};

struct Cap {
    int node = 0;
    bool pinned = false;
    bool deleted = false;  // this test deleted it: 404 from then on
    bool gone = false;     // evicted (seen as 404 or missing from the list while unpinned): 404 for good
};

TEST(PrefixTreeRandom, EveryOutputEqualsTheCacheOffServer) {
    uint64_t seed = std::random_device{}();
    if (const char* env = std::getenv("FROST_PREFIX_TREE_SEED")) seed = std::strtoull(env, nullptr, 10);
    SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: FROST_PREFIX_TREE_SEED=" + std::to_string(seed) + ")");
    std::cout << "[ seed     ] " << seed << std::endl;
    std::mt19937 rng(uint32_t(seed ^ (seed >> 32)));
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
    const auto t0 = std::chrono::steady_clock::now();

    TreeServer s(true);
    TreeServer cold(false);

    // The tree: a system prompt at the root, each node its parent's messages plus one or two.
    auto next_role = [](const std::vector<json>& m) {
        return m.back()["role"] == "user" ? std::string("assistant") : std::string("user");
    };
    auto extend = [&](std::vector<json> m, int count) {
        for (int i = 0; i < count; ++i) m.push_back(msg(next_role(m), random_words(rng, uni(2, 6))));
        return m;
    };
    std::vector<Node> nodes;
    nodes.push_back(Node{{msg("system", random_words(rng, 12))}, -1});
    while (nodes.size() < kNodes) {
        const int parent = uni(0, int(nodes.size()) - 1);
        if (nodes[size_t(parent)].msgs.size() + 2 > kMaxNodeMessages) continue;
        nodes.push_back(Node{extend(nodes[size_t(parent)].msgs, uni(1, 2)), parent});
    }
    auto descends = [&](int d, int a) {
        for (; d >= 0; d = nodes[size_t(d)].parent)
            if (d == a) return true;
        return false;
    };
    // A continuation of a conversation that ends on a user turn (a fork / rollback prompt).
    auto continuation = [&](const std::vector<json>& m) { return extend(m, next_role(m) == "user" ? 1 : 2); };

    std::map<std::string, Cap> caps;
    std::vector<std::string> ids;  // known capsule ids, in the order first seen
    std::vector<std::string> oplog;
    auto history = [&] {
        std::string h = "\noperations so far (last 60):";
        for (size_t i = oplog.size() > 60 ? oplog.size() - 60 : 0; i < oplog.size(); ++i) h += "\n  " + oplog[i];
        return h;
    };
    auto describe = [](const RawResponse& r) { return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 400); };

    struct Stats {
        int chats = 0, restore = 0, append = 0, rebuild = 0, creates = 0, create_refused = 0, forks = 0,
            rollbacks = 0, deletes = 0, pin_ops = 0, not_found = 0, pinned_delete_refused = 0, list_checks = 0;
    } st;

    // One chat on both servers: identical text. Returns the capsule server's reply (null on failure).
    auto both_chat = [&](const std::vector<json>& m, int max_tokens, const std::string& what) -> json {
        const RawResponse r = s.req("POST", "/v1/chat/completions", chat(m, max_tokens));
        const RawResponse c = cold.req("POST", "/v1/chat/completions", chat(m, max_tokens));
        EXPECT_EQ(r.status, 200) << what << ": " << describe(r) << history();
        EXPECT_EQ(c.status, 200) << what << " (cold): " << describe(c) << history();
        if (r.status != 200 || c.status != 200) return nullptr;
        const json rj = parse(r), cj = parse(c);
        EXPECT_EQ(content(rj), content(cj)) << what << ": the capsule server's output differs from the cache-off one"
                                            << "\n  capsule server: " << r.body.substr(0, 600) << history();
        const std::string plan = rj["frost"]["plan"].get<std::string>();
        st.chats++;
        if (plan == "restore") {
            st.restore++;
            const std::string from = rj["frost"].value("capsule_id", "");
            auto it = caps.find(from);
            EXPECT_TRUE(it == caps.end() || (!it->second.deleted && !it->second.gone))
                << what << ": restored from capsule " << from << " which is deleted or was evicted" << history();
        } else if (plan == "append") {
            st.append++;
        } else {
            EXPECT_EQ(plan, "rebuild") << what;
            st.rebuild++;
        }
        oplog.back() += " -> " + plan + " \"" + content(rj) + "\"";
        return rj;
    };

    // A capsule op's answer: 404 is right for deleted / evicted capsules and allowed for an
    // unpinned one (evicted meanwhile, then gone for good); a pinned one must answer 200.
    auto answered = [&](const std::string& id, const RawResponse& r, const std::string& what) -> bool {
        Cap& c = caps.at(id);
        if (c.deleted || c.gone) {
            EXPECT_EQ(r.status, 404) << what << ": capsule " << id << " was " << (c.deleted ? "deleted" : "evicted")
                                     << " earlier, yet: " << describe(r) << history();
            st.not_found += r.status == 404;
            return false;
        }
        if (r.status == 404) {
            EXPECT_FALSE(c.pinned) << what << ": PINNED capsule " << id << " is gone: " << describe(r) << history();
            EXPECT_EQ(error_code(r), "capsule_not_found") << what << ": " << describe(r);
            c.gone = true;
            st.not_found++;
            oplog.back() += " -> 404 (evicted)";
            return false;
        }
        EXPECT_EQ(r.status, 200) << what << ": " << describe(r) << history();
        return r.status == 200;
    };
    auto pick_id = [&]() -> std::string {
        if (ids.empty()) return "";
        // Mostly live capsules; now and then a deleted or evicted one (must stay 404).
        std::vector<std::string> live;
        for (const auto& id : ids)
            if (!caps[id].deleted && !caps[id].gone) live.push_back(id);
        if (!live.empty() && !chance(0.1)) return live[size_t(uni(0, int(live.size()) - 1))];
        return ids[size_t(uni(0, int(ids.size()) - 1))];
    };
    auto learn = [&](const std::string& id, int node, bool pinned) {
        auto it = caps.find(id);
        if (it == caps.end()) {
            caps[id] = Cap{node, pinned, false, false};
            ids.push_back(id);
            return;
        }
        EXPECT_FALSE(it->second.deleted || it->second.gone)
            << "create returned capsule " << id << " which was deleted or evicted earlier" << history();
        it->second.pinned = pinned;
    };

    // Every pinned capsule is listed, pinned; deleted ones are not; tiers stay within budget.
    auto check_list = [&] {
        st.list_checks++;
        const RawResponse r = s.req("GET", "/v1/capsules");
        ASSERT_EQ(r.status, 200) << describe(r);
        std::map<std::string, json> listed;
        uint64_t used[2] = {0, 0};
        const json list = parse(r);
        for (const auto& c : list["data"]) {
            listed[c["id"].get<std::string>()] = c;
            if (c["tier"] == "device") used[0] += c["bytes"].get<uint64_t>();
            if (c["tier"] == "host") used[1] += c["bytes"].get<uint64_t>();
            EXPECT_NE(c["tier"], "disk") << "the disk tier is off";
        }
        EXPECT_LE(used[0], kDeviceBytes) << r.body;
        EXPECT_LE(used[1], kHostBytes) << r.body;
        for (auto& [id, c] : caps) {
            const bool in = listed.count(id) > 0;
            if (c.deleted || c.gone) {
                EXPECT_FALSE(in) << "capsule " << id << " was deleted or evicted, yet listed" << history();
            } else if (c.pinned) {
                EXPECT_TRUE(in) << "PINNED capsule " << id << " is missing from the list; its claim events: "
                                << s.req("GET", "/v1/claims?claim_id=" + id).body << history();
                if (in) {
                    EXPECT_TRUE(listed[id]["pinned"].get<bool>()) << id << " lost its pin" << history();
                }
            } else if (!in) {
                c.gone = true;  // evicted: from now on it must answer 404
            } else {
                EXPECT_FALSE(listed[id]["pinned"].get<bool>()) << id << " pinned behind the test's back" << history();
            }
        }
    };

    for (int op = 0; op < kOps && !::testing::Test::HasFailure(); ++op) {
        if (op > 0 && op % 20 == 0) check_list();
        const int node = uni(0, int(kNodes) - 1);
        const std::vector<json>& m = nodes[size_t(node)].msgs;
        const int dice = uni(0, 99);
        const std::string tag = std::string("#").append(std::to_string(op)).append(" ");
        if (dice < 38) {  // (a) a chat, on the node itself or one turn further
            const bool further = chance(0.3);
            const int max_tokens = uni(3, 8);
            oplog.push_back(tag + "chat node " + std::to_string(node) + (further ? "+turn" : "") +
                            " max_tokens " + std::to_string(max_tokens));
            both_chat(further ? continuation(m) : m, max_tokens, oplog.back());
        } else if (dice < 54) {  // (b) create a capsule of the node's messages
            const bool pinned = chance(0.3);
            const int priority = uni(-3, 3);
            json body{{"messages", json(m)}, {"pinned", pinned}, {"priority", priority}};
            if (chance(0.3)) body["ttl_s"] = uni(600, 3600);  // never reached during the run
            oplog.push_back(tag + "create node " + std::to_string(node) + (pinned ? " pinned" : "") + " priority " +
                            std::to_string(priority));
            const RawResponse r = s.req("POST", "/v1/capsules", body);
            st.creates++;
            if (r.status == 409) {
                // Refused for room: only pinned capsules may be in the way (a pinned one must fit
                // on the device tier; an unpinned one lands on any tier with room).
                EXPECT_EQ(error_code(r), "capsule_refused") << describe(r) << history();
                const auto blocking = blocking_ids(r);
                EXPECT_FALSE(blocking.empty()) << "a refusal must name the pinned capsules in its way: " << describe(r);
                for (const auto& b : blocking) {
                    EXPECT_TRUE(caps.count(b) && caps[b].pinned && !caps[b].deleted)
                        << "refusal blocked by " << b << ", which is not a pinned capsule: " << describe(r) << history();
                }
                st.create_refused++;
                oplog.back() += " -> 409 refused";
                continue;
            }
            ASSERT_EQ(r.status, 200) << describe(r) << history();
            const json cap = parse(r);
            const std::string id = cap["id"];
            EXPECT_EQ(cap["pinned"].get<bool>(), pinned) << r.body;
            EXPECT_EQ(cap["priority"], priority) << r.body;
            // The capsule covers the whole prefix as the chat template renders it.
            ChatRender cr;
            cr.messages = json(m);
            cr.tools = json::array();
            cr.add_generation_prompt = false;
            std::string rendered;
            ASSERT_EQ(s.text.render_chat(cr, &rendered), FROST_OK);
            EXPECT_EQ(cap["tokens"].get<size_t>(), s.text.encode(rendered).size()) << r.body;
            oplog.back() += " -> " + id + " on " + cap["tier"].get<std::string>();
            learn(id, node, pinned);
        } else if (dice < 66) {  // (c) fork a capsule: n choices from its state
            const std::string id = pick_id();
            if (id.empty()) continue;
            const Cap c = caps[id];
            const std::vector<json> branch = continuation(nodes[size_t(c.node)].msgs);
            const int n = uni(1, 2), max_tokens = uni(3, 8);
            json body = chat(branch, max_tokens);
            body["n"] = n;
            oplog.push_back(tag + "fork " + id + " (node " + std::to_string(c.node) + ") n " + std::to_string(n));
            const RawResponse r = s.req("POST", "/v1/capsules/" + id + "/fork", body);
            st.forks++;
            if (!answered(id, r, oplog.back())) continue;
            const json fj = parse(r);
            EXPECT_EQ(fj["frost"]["plan"], "restore") << r.body;
            EXPECT_EQ(fj["frost"]["capsule_id"], id) << r.body;
            const RawResponse cr = cold.req("POST", "/v1/chat/completions", chat(branch, max_tokens));
            ASSERT_EQ(cr.status, 200) << describe(cr);
            const std::string want = content(parse(cr));
            for (int i = 0; i < n; ++i) {
                EXPECT_EQ(content(fj, size_t(i)), want) << oplog.back() << ": fork choice " << i
                                                        << " differs from the cache-off server" << history();
            }
            oplog.back() += " -> \"" + content(fj) + "\"";
        } else if (dice < 76) {  // (d) rollback: the live state goes further, then back to the capsule
            const std::string id = pick_id();
            if (id.empty()) continue;
            const Cap c = caps[id];
            std::vector<int> below;
            for (int d = 0; d < int(kNodes); ++d)
                if (descends(d, c.node)) below.push_back(d);
            const int deeper = below[size_t(uni(0, int(below.size()) - 1))];
            oplog.push_back(tag + "rollback setup: chat node " + std::to_string(deeper) + "+turn");
            both_chat(continuation(nodes[size_t(deeper)].msgs), uni(3, 8), oplog.back());
            const std::vector<json> other = continuation(nodes[size_t(c.node)].msgs);
            const int max_tokens = uni(3, 8);
            oplog.push_back(tag + "rollback " + id + " (node " + std::to_string(c.node) + ")");
            const RawResponse r = s.req("POST", "/v1/capsules/" + id + "/rollback", chat(other, max_tokens));
            st.rollbacks++;
            if (!answered(id, r, oplog.back())) continue;
            const json rj = parse(r);
            EXPECT_EQ(rj["frost"]["plan"], "restore") << r.body;
            EXPECT_EQ(rj["frost"]["capsule_id"], id) << r.body;
            const RawResponse cr = cold.req("POST", "/v1/chat/completions", chat(other, max_tokens));
            ASSERT_EQ(cr.status, 200) << describe(cr);
            EXPECT_EQ(content(rj), content(parse(cr))) << oplog.back() << ": the rollback differs from the cache-off server"
                                                      << history();
            oplog.back() += " -> \"" + content(rj) + "\"";
        } else if (dice < 84) {  // (e) delete (a pinned one needs ?force=true)
            const std::string id = pick_id();
            if (id.empty()) continue;
            Cap& c = caps[id];
            const bool force = !c.pinned || chance(0.6);
            oplog.push_back(tag + "delete " + id + (c.pinned ? " (pinned)" : "") + (force ? " force" : ""));
            const RawResponse r = s.req("DELETE", "/v1/capsules/" + id + (force ? "?force=true" : ""));
            st.deletes++;
            if (c.pinned && !c.deleted && !force) {
                EXPECT_EQ(r.status, 409) << "deleting a pinned capsule without force: " << describe(r) << history();
                EXPECT_EQ(error_code(r), "capsule_pinned") << describe(r);
                st.pinned_delete_refused++;
                continue;
            }
            if (!answered(id, r, oplog.back())) continue;
            EXPECT_TRUE(parse(r)["deleted"].get<bool>()) << r.body;
            c.deleted = true;
            c.pinned = false;
        } else {  // (f) pin / unpin, through the verb or the update body (with a new priority)
            const std::string id = pick_id();
            if (id.empty()) continue;
            const bool pin = chance(0.4);
            const bool verb = chance(0.5);
            oplog.push_back(tag + (pin ? "pin " : "unpin ") + id + (verb ? " (verb)" : " (update)"));
            const RawResponse r = verb ? s.req("POST", "/v1/capsules/" + id + (pin ? "/pin" : "/unpin"))
                                       : s.req("POST", "/v1/capsules/" + id,
                                               json{{"pinned", pin}, {"priority", uni(-3, 3)}});
            st.pin_ops++;
            if (!answered(id, r, oplog.back())) continue;
            EXPECT_EQ(parse(r)["pinned"].get<bool>(), pin) << r.body;
            caps[id].pinned = pin;
        }
    }
    if (!::testing::Test::HasFailure()) check_list();

    // The cache path was exercised: chats restored from capsules, and the small tiers demoted and
    // evicted (the claim log of this key). No pinned capsule was ever demoted, evicted or expired.
    const RawResponse cl = s.req("GET", "/v1/claims");
    ASSERT_EQ(cl.status, 200) << describe(cl);
    int demoted = 0, evicted = 0;
    const json claims = parse(cl);
    for (const auto& e : claims["data"]) {
        const std::string ev = e["event"];
        if (ev == "demoted") demoted++;
        if (ev == "evicted" && e.value("reason", "") == "capacity") evicted++;
        if (ev == "demoted" || ev == "evicted" || ev == "expired") {
            EXPECT_FALSE(e["pinned"].get<bool>()) << "a pinned capsule was " << ev << ": " << e.dump() << history();
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ T28      ] seed " << seed << ": " << st.chats << " chats (restore " << st.restore << ", append "
              << st.append << ", rebuild " << st.rebuild << "), " << st.creates << " creates (" << st.create_refused
              << " refused), " << st.forks << " forks, " << st.rollbacks << " rollbacks, " << st.deletes
              << " deletes (" << st.pinned_delete_refused << " pinned refused), " << st.pin_ops << " pin/unpin, "
              << st.not_found << " 404s, " << demoted << " demotions, " << evicted << " capacity evictions, "
              << s.engine.restores.load() << " engine restores, " << st.list_checks << " list checks, " << secs
              << " s" << std::endl;
    EXPECT_GT(st.restore, 0) << "no chat was served from a capsule: the cache path was not exercised";
    // A 400-node tree under these budgets restores ~15-20 % of its chats (runs of 1500 operations
    // measured 110-124 restores and 12-24 appends in ~700 chats).
    EXPECT_GT(st.restore + st.append, st.chats / 10) << "too few chats reused a prefix";
    EXPECT_GT(demoted, 0) << "no capsule was demoted: the tiers were never under pressure";
    EXPECT_GT(evicted, 0) << "no capsule was evicted for capacity";
    EXPECT_GT(s.metrics.prefix_hits.load(), 0u);
}

}  // namespace
