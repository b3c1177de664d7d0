// Per-request phase timings (timings.h) over a real server on loopback with the fake engine: the
// "timings_ms" object of the "frost" extension is present on non-stream bodies and on the final
// stream chunk (with and without a usage chunk), every phase is finite and non-negative, and the
// phases sum to at most the wall time the client measured around the request; /metrics carries
// the per-phase histograms. Also: the planner's one-pass prefix digests against a naive SHA-256
// over the salted little-endian bytes, and its choice against a brute-force reference over
// random nested capsule sets; and a capsule frozen mid-request is listed once the response ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/http_server.h"
#include "serve/planner.h"
#include "serve/scheduler.h"
#include "serve/sha256.h"
#include "serve/timings.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

constexpr const char* kKey = "sk-timings";
constexpr uint64_t kBudget = 1 << 20;

struct Server {
    FakeEngine engine{2, 2048};
    FakeText text;
    Metrics metrics;
    FakeServerStack stack;
    uint16_t port = 0;

    explicit Server(size_t align = 0, bool capsules = true) {
        engine.align = align;
        engine.capsules = capsules;
        SchedulerConfig sc;
        sc.budgets.bytes[0] = kBudget;
        sc.budgets.bytes[1] = kBudget;
        sc.prefill_step = 16;  // several prefill steps per request
        stack.start(engine, text, metrics, sc, {kKey});
        port = stack.port();
    }
    // The response and the wall time (ms) the client saw around it.
    std::pair<RawResponse, double> post(const std::string& path, const json& body) {
        const auto t0 = std::chrono::steady_clock::now();
        RawResponse r = http_request(port, "POST", path, body.dump(), kKey);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return {std::move(r), ms};
    }
};

json msg(const std::string& role, const std::string& s) { return json{{"role", role}, {"content", s}}; }

json chat_body(const json& messages, int max_tokens) {
    return json{{"model", "fake"}, {"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// Every phase present, finite, >= 0; their sum <= the client's wall time. Returns the sum.
double check_timings(const json& frost, double wall_ms) {
    EXPECT_TRUE(frost.contains("timings_ms")) << frost.dump();
    if (!frost.contains("timings_ms")) return 0;
    const json& t = frost["timings_ms"];
    double sum = 0;
    for (size_t i = 0; i < kPhaseCount; ++i) {
        const char* name = phase_name(Phase(i));
        EXPECT_TRUE(t.contains(name) && t[name].is_number()) << name << " in " << t.dump();
        if (!t.contains(name) || !t[name].is_number()) continue;
        const double v = t[name].get<double>();
        EXPECT_TRUE(std::isfinite(v) && v >= 0) << name << " = " << v;
        sum += v;
    }
    EXPECT_EQ(t.size(), kPhaseCount) << t.dump();
    EXPECT_LE(sum, wall_ms) << t.dump();
    EXPECT_TRUE(frost.contains("deferred_store_ms") && frost["deferred_store_ms"].get<double>() >= 0);
    return sum;
}

// The last `data:` JSON object of an SSE body that has a "frost" member.
json last_frost_chunk(const std::string& body) {
    json found;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
        const size_t end = body.find("\n\n", at);
        const std::string data = body.substr(at + 6, end - at - 6);
        at = end;
        if (data == "[DONE]") continue;
        const json j = json::parse(data, nullptr, false);
        if (j.is_object() && j.contains("frost")) found = j;
    }
    return found;
}

}  // namespace

TEST(Timings, NonStreamTurnsCarryPhasesThatSumBelowTheWallTime) {
    Server s;
    std::mt19937 rng(std::random_device{}());
    json history = json::array({msg("system", random_words(rng, 40)), msg("user", random_words(rng, 12))});
    std::vector<std::string> plans;
    for (int turn = 0; turn < 3; ++turn) {
        auto [r, wall] = s.post("/v1/chat/completions", chat_body(history, 4));
        ASSERT_EQ(r.status, 200) << r.body;
        const json j = json::parse(r.body);
        plans.push_back(j["frost"]["plan"].get<std::string>());
        check_timings(j["frost"], wall);
        history.push_back(msg("assistant", j["choices"][0]["message"]["content"].get<std::string>()));
        history.push_back(msg("user", random_words(rng, 10)));
    }
    EXPECT_EQ(plans[0], "rebuild");
    // Later turns reuse state (restore of the previous turn's capsule, or the live slot).
    EXPECT_NE(plans[2], "rebuild");
}

TEST(Timings, FinalStreamChunkCarriesThemWithAndWithoutUsage) {
    Server s;
    std::mt19937 rng(std::random_device{}());
    for (bool usage : {true, false}) {
        json body = chat_body(json::array({msg("user", random_words(rng, 20))}), 5);
        body["stream"] = true;
        if (usage) body["stream_options"] = {{"include_usage", true}};
        auto [r, wall] = s.post("/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const json last = last_frost_chunk(r.body);
        ASSERT_TRUE(last.is_object()) << r.body;
        check_timings(last["frost"], wall);
        EXPECT_EQ(last.contains("usage"), usage) << last.dump();
    }
}

TEST(Timings, MetricsExposePerPhaseHistograms) {
    Server s;
    constexpr int kRequests = 3;
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < kRequests; ++i) {
        auto [r, wall] = s.post("/v1/completions", json{{"model", "fake"}, {"prompt", random_words(rng, 8)},
                                                        {"max_tokens", 2}});
        ASSERT_EQ(r.status, 200) << r.body;
        check_timings(json::parse(r.body)["frost"], wall);
    }
    const RawResponse m = http_request(s.port, "GET", "/metrics", "", kKey);
    ASSERT_EQ(m.status, 200);
    for (size_t i = 0; i < kPhaseCount; ++i) {
        const std::string line =
            std::string("frost_phase_seconds_count{phase=\"") + phase_name(Phase(i)) + "\"} " + std::to_string(kRequests);
        EXPECT_NE(m.body.find(line), std::string::npos) << line;
    }
    EXPECT_NE(m.body.find("frost_deferred_store_seconds_count " + std::to_string(kRequests)), std::string::npos);
}

TEST(Timings, CapsuleFrozenInARequestIsListedOnceItsResponseEnded) {
    // Acknowledgement is deferred past the first token, never past the end of the request.
    Server s;
    std::mt19937 rng(std::random_device{}());
    for (int max_tokens : {1, 6}) {
        const json history = json::array({msg("system", random_words(rng, 60)), msg("user", random_words(rng, 8))});
        auto [r, wall] = s.post("/v1/chat/completions", chat_body(history, max_tokens));
        ASSERT_EQ(r.status, 200) << r.body;
        (void)wall;
        const json list = json::parse(http_request(s.port, "GET", "/v1/capsules", "", kKey).body);
        std::vector<int32_t> hist_ids;
        ChatRender cr;
        cr.messages = history;
        cr.add_generation_prompt = false;
        std::string hist;
        ASSERT_EQ(s.text.render_chat(cr, &hist), FROST_OK);
        const size_t want = s.text.encode(hist).size();
        bool found = false;
        for (const auto& c : list["data"]) found = found || c["tokens"].get<size_t>() == want;
        EXPECT_TRUE(found) << "no capsule of " << want << " tokens in " << list.dump();
    }
}

TEST(Timings, OnePassPrefixDigestsEqualNaiveSha256) {
    std::mt19937 rng(std::random_device{}());
    std::vector<int32_t> ids(3000);
    for (auto& v : ids) v = int32_t(rng());
    static const char kSalt[] = "frost.tokens.v1";  // the documented domain separation, NUL included
    TokenDigester d;
    size_t fed = 0;
    for (size_t len : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(255), size_t(256),
                       size_t(257), size_t(1000), size_t(2999), size_t(3000)}) {
        d.update(ids.data() + fed, len - fed);
        fed = len;
        std::string bytes(kSalt, sizeof(kSalt));
        for (size_t i = 0; i < len; ++i)
            for (int b = 0; b < 4; ++b) bytes.push_back(char(uint8_t(uint32_t(ids[i]) >> (8 * b))));
        EXPECT_EQ(d.digest(), sha256(bytes.data(), bytes.size())) << len;
        EXPECT_EQ(token_digest(ids.data(), len), sha256(bytes.data(), bytes.size())) << len;
    }
}

TEST(Timings, PlannerPicksTheLongestVerifiedPrefixLikeABruteForceReference) {
    std::mt19937 rng(std::random_device{}());
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<int32_t> prompt(1 + rng() % 200);
        for (auto& v : prompt) v = int32_t(rng() % 50);
        std::vector<std::vector<int32_t>> toks;
        std::vector<CapsuleView> caps;
        const int n = int(rng() % 12);
        for (int i = 0; i < n; ++i) {
            std::vector<int32_t> t(prompt.begin(), prompt.begin() + long(rng() % (prompt.size() + 1)));
            if (rng() % 3 == 0 && !t.empty()) t[rng() % t.size()] ^= 1;  // diverges somewhere
            if (rng() % 5 == 0) t.push_back(int32_t(rng() % 50));       // may be longer than the prompt
            toks.push_back(std::move(t));
        }
        for (int i = 0; i < n; ++i) {
            Digest dg = token_digest(toks[size_t(i)].data(), toks[size_t(i)].size());
            // A forged digest (a prefix's digest on tokens that differ) must never win (T27).
            if (rng() % 4 == 0 && !toks[size_t(i)].empty() && toks[size_t(i)].size() <= prompt.size())
                dg = token_digest(prompt.data(), toks[size_t(i)].size());
            std::string id = "cap";
            id += std::to_string(i);
            caps.push_back(CapsuleView{id, &toks[size_t(i)], dg, rng() % 7 != 0});
        }
        PlanInput in;
        in.prompt = &prompt;
        in.capsules = caps;
        const Plan p = plan_request(in);
        // Reference: the first usable capsule of maximal length <= P-1 whose tokens prefix the prompt.
        const CapsuleView* best = nullptr;
        for (const auto& c : caps) {
            const auto& t = *c.tokens;
            if (!c.usable || t.empty() || t.size() + 1 > prompt.size()) continue;
            if (!std::equal(t.begin(), t.end(), prompt.begin())) continue;
            if (!best || t.size() > best->tokens->size()) best = &c;
        }
        if (!best) {
            EXPECT_EQ(p.action, PlanAction::Rebuild);
            continue;
        }
        EXPECT_EQ(p.action, PlanAction::Restore);
        EXPECT_EQ(p.capsule_id, best->id);
        EXPECT_EQ(p.cached_tokens, best->tokens->size());
    }
}

TEST(Timings, ChatCapsulesSitOnTheEngineGridAndTheNextTurnPrefillsOnlyPastIt) {
    constexpr size_t kAlign = 16;
    Server grid(kAlign);
    Server cold(0, false);
    std::mt19937 rng(std::random_device{}());
    json history = json::array({msg("system", random_words(rng, 30)), msg("user", random_words(rng, 9))});
    for (int turn = 0; turn < 3; ++turn) {
        const uint64_t before = grid.engine.prefilled_tokens.load();
        auto [r, wall] = grid.post("/v1/chat/completions", chat_body(history, 5));
        ASSERT_EQ(r.status, 200) << r.body;
        (void)wall;
        const json j = json::parse(r.body);
        auto [rc, wall_c] = cold.post("/v1/chat/completions", chat_body(history, 5));
        ASSERT_EQ(rc.status, 200) << rc.body;
        (void)wall_c;
        // Same output as a server without capsules: the restored state is the cold state.
        EXPECT_EQ(j["choices"][0]["message"]["content"], json::parse(rc.body)["choices"][0]["message"]["content"]);
        const size_t prompt = j["usage"]["prompt_tokens"].get<size_t>();
        const size_t cached = j["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>();
        if (turn > 0) {
            EXPECT_EQ(j["frost"]["plan"], "restore");
            EXPECT_EQ(cached % kAlign, 0u);
            EXPECT_GT(cached, 0u);
        }
        // Only what the capsule did not hold was prefilled (the fake counts every token).
        EXPECT_EQ(grid.engine.prefilled_tokens.load() - before, prompt - cached) << turn;
        ChatRender cr;
        cr.messages = history;
        cr.add_generation_prompt = false;
        std::string hist;
        ASSERT_EQ(grid.text.render_chat(cr, &hist), FROST_OK);
        const size_t want = grid.text.encode(hist).size() / kAlign * kAlign;
        const json list = json::parse(http_request(grid.port, "GET", "/v1/capsules", "", kKey).body);
        bool found = false;
        for (const auto& c : list["data"]) found = found || c["tokens"].get<size_t>() == want;
        EXPECT_TRUE(found) << "no capsule of " << want << " tokens in " << list.dump();
        history.push_back(msg("assistant", j["choices"][0]["message"]["content"].get<std::string>()));
        history.push_back(msg("user", random_words(rng, 7)));
        // Two other conversations take both slots, so the next turn must restore.
        for (int k = 0; k < 2; ++k)
            ASSERT_EQ(grid.post("/v1/chat/completions", chat_body(json::array({msg("user", random_words(rng, 5))}), 2))
                          .first.status,
                      200);
    }
}
