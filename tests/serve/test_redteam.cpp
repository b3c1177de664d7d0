// Regression tests for the failures a red-team run found (issue 13 part B), over HTTP on a real
// loopback server with the fake engine (fake_backend.h). Each test failed before its fix.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/scheduler.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

constexpr const char* kKey = "sk-red-0";
constexpr const char* kOtherKey = "sk-red-1";

struct RedServer {
    FakeEngine engine;
    FakeText text;
    Metrics metrics;
    FakeServerStack stack;

    // cut_grid: the fake's bits follow the CUDA engine's chunk-invariant numerics (fake_backend.h).
    explicit RedServer(int slots = 2, bool capsules = true, size_t align = 0, ApiConfig api = ApiConfig{},
                       size_t max_seq = 4096, size_t cut_grid = 0)
        : engine(slots, max_seq) {
        engine.capsules = capsules;
        engine.align = align;
        engine.cut_grid = cut_grid;
        SchedulerConfig sc;
        sc.budgets.bytes[0] = sc.budgets.bytes[1] = 1 << 24;
        stack.start(engine, text, metrics, sc, {kKey, kOtherKey}, api);
    }
    RawResponse req(const std::string& method, const std::string& path, const json& body = nullptr,
                    const std::string& key = kKey) {
        return http_request(stack.port(), method, path, body.is_null() ? "" : body.dump(), key);
    }
    // Sends a request on its own connection and returns the socket without reading the answer.
    int send_only(const std::string& path, const json& body) {
        const int fd = connect_loopback(stack.port());
        const std::string b = body.dump();
        send_all(fd, "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
                         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(b.size()) +
                         "\r\n\r\n" + b);
        return fd;
    }
};

template <class F>
bool eventually(F pred, int timeout_ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pred();
}

std::vector<int> random_ids(std::mt19937& rng, size_t n) {
    std::vector<int> v(n);
    for (auto& x : v) x = int('a' + rng() % 26);
    return v;
}

std::string random_text(std::mt19937& rng, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += char('a' + rng() % 26);
    return s;
}

json user(const std::string& s) { return json{{"role", "user"}, {"content", s}}; }

}  // namespace

// B1: a tool call whose arguments string nests JSON 10,000 deep is a 400 naming the field, on
// the chat endpoint and on POST /v1/capsules, and the server goes on serving.
TEST(RedTeam, B1DeepArgumentsStringIs400AndTheServerStaysUp) {
    RedServer s;
    std::string args;
    for (int i = 0; i < 10000; ++i) args += "{\"a\":";
    args += '1';
    args.append(10000, '}');
    const json msgs = json::array({user("q"), json{{"role", "assistant"}, {"content", nullptr},
                                                   {"tool_calls", json::array({json{{"type", "function"},
                                                                                    {"id", "c1"},
                                                                                    {"function", {{"name", "f"}, {"arguments", args}}}}})}},
                                   json{{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "r"}}});
    for (const char* path : {"/v1/chat/completions", "/v1/capsules"}) {
        json body{{"messages", msgs}};
        if (std::string(path) == "/v1/chat/completions") body["max_tokens"] = 2;
        const auto r = s.req("POST", path, body);
        EXPECT_EQ(r.status, 400) << path << ": " << r.body;
        EXPECT_NE(r.body.find("messages[1].tool_calls[0].function.arguments"), std::string::npos) << r.body;
    }
    EXPECT_EQ(s.req("GET", "/health").status, 200);
}

// B2: two POST /v1/capsules queued behind busy slots used to block both I/O threads for up to
// 600 s: /health and every stream stalled. The create now waits without holding a thread.
TEST(RedTeam, B2CapsuleCreatesBehindBusySlotsDoNotStallTheServer) {
    std::mt19937 rng(std::random_device{}());
    RedServer s(2);
    // Both slots busy: streams whose readers never read (their channels fill, the slots stay held).
    std::vector<int> streams;
    for (int i = 0; i < 2; ++i)
        streams.push_back(s.send_only("/v1/completions", json{{"prompt", random_text(rng, 40)}, {"max_tokens", 3000},
                                                              {"stream", true}, {"temperature", 0}}));
    ASSERT_TRUE(eventually([&] { return s.stack.port() && s.metrics.active_requests.load() == 2; }));
    std::vector<int> creates;
    for (int i = 0; i < 2; ++i)
        creates.push_back(s.send_only("/v1/capsules", json{{"prompt", random_text(rng, 100)}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both creates are in handlers now
    for (int i = 0; i < 3; ++i) {
        const int fd = connect_loopback(s.stack.port());
        ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        const RawResponse h = read_response(fd, 2000);
        close_fd(fd);
        EXPECT_EQ(h.status, 200) << "the I/O threads are blocked";
    }
    for (int fd : streams) close_fd(fd);  // the slots free up: the creates now run
    for (int fd : creates) {
        const RawResponse r = read_response(fd, 10000);
        close_fd(fd);
        EXPECT_EQ(r.status, 200) << r.body;
        if (r.status == 200) {
            EXPECT_EQ(json::parse(r.body)["object"], "capsule");
        }
    }
}

// B2, the rule behind it: store and claim-log reads (GET /v1/capsules, /v1/claims, sessions)
// run on the engine thread between steps; while a step takes long, those requests wait there,
// never in an I/O thread, so /health and every other connection keep answering at once.
TEST(RedTeam, B2EngineThreadRepliesDoNotHoldIoThreads) {
    std::mt19937 rng(std::random_device{}());
    RedServer s(1);
    s.engine.step_delay_ms = 1500;  // every engine call takes 1.5 s
    const int stream = s.send_only("/v1/completions", json{{"prompt", random_text(rng, 20)}, {"max_tokens", 50},
                                                          {"stream", true}, {"temperature", 0}});
    ASSERT_TRUE(eventually([&] { return s.metrics.active_requests.load() == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the engine is inside a step now
    std::vector<int> reads;
    for (const char* path : {"/v1/capsules", "/v1/claims", "/v1/capsules"}) {
        const int fd = connect_loopback(s.stack.port());
        send_all(fd, std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey + "\r\n\r\n");
        reads.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto t0 = std::chrono::steady_clock::now();
    const int fd = connect_loopback(s.stack.port());
    ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    const RawResponse h = read_response(fd, 5000);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    close_fd(fd);
    EXPECT_EQ(h.status, 200);
    EXPECT_LT(ms, 500.0) << "/health waited behind requests that wait for the engine";
    for (int r : reads) {
        const RawResponse g = read_response(r, 10000);
        close_fd(r);
        EXPECT_EQ(g.status, 200) << g.body;
    }
    s.engine.step_delay_ms = 0;
    close_fd(stream);
}

// B3: top_p 1e-46 underflowed to 0 as the engine's float: 500, and the slot stayed poisoned.
// Now a 400 naming top_p, and every later request on every slot is served.
TEST(RedTeam, B3TinyTopPIs400AndLeavesNoState) {
    RedServer s(2);
    for (int i = 0; i < 2; ++i) {
        const auto r = s.req("POST", "/v1/completions",
                             json{{"prompt", "hello"}, {"max_tokens", 2}, {"top_p", 1e-46}, {"temperature", 1}});
        EXPECT_EQ(r.status, 400) << r.body;
        EXPECT_NE(r.body.find("top_p"), std::string::npos) << r.body;
    }
    for (int i = 0; i < 4; ++i) {
        const auto r = s.req("POST", "/v1/completions", json{{"prompt", "hello " + std::to_string(i)}, {"max_tokens", 2}});
        EXPECT_EQ(r.status, 200) << r.body;
    }
}

// B6: with seed fixed, choice i samples with seed + i whatever the load: choice 0 of n=2 equals
// the request with n omitted, batched (a free slot) or one after another (no free slot), with
// prompts cut by prefill steps and the chat capsule point.
TEST(RedTeam, B6SeededChoicesDoNotDependOnLoad) {
    std::mt19937 rng(std::random_device{}());
    const uint64_t seed = rng() % 100000;
    const std::string history = random_text(rng, 300 + rng() % 400);
    const json msgs = json::array({user(history), json{{"role", "assistant"}, {"content", random_text(rng, 20)}},
                                   user(random_text(rng, 30))});
    auto body = [&](std::optional<int> n, uint64_t sd) {
        json b{{"messages", msgs}, {"max_tokens", 8}, {"temperature", 0.9}, {"seed", sd}};
        if (n) b["n"] = *n;
        return b;
    };
    auto content = [](const RawResponse& r, int i) {
        return json::parse(r.body)["choices"][i]["message"]["content"].get<std::string>();
    };
    std::vector<std::string> single;
    {
        RedServer ref(1, false);
        for (int c = 0; c < 2; ++c) {
            const auto r = ref.req("POST", "/v1/chat/completions", body(std::nullopt, seed + uint64_t(c)));
            ASSERT_EQ(r.status, 200) << r.body;
            single.push_back(content(r, 0));
        }
    }
    RedServer s(3, true, 64);
    const auto omitted = s.req("POST", "/v1/chat/completions", body(std::nullopt, seed));
    ASSERT_EQ(omitted.status, 200) << omitted.body;
    EXPECT_EQ(content(omitted, 0), single[0]) << "n omitted, capsules on";
    const auto batched = s.req("POST", "/v1/chat/completions", body(2, seed));
    ASSERT_EQ(batched.status, 200) << batched.body;
    EXPECT_EQ(content(batched, 0), single[0]) << "n=2 batched fork";
    EXPECT_EQ(content(batched, 1), single[1]) << "n=2 batched fork";
    // Busy: two slots held by unread streams, so the two choices run one after another.
    std::vector<int> hold;
    for (int i = 0; i < 2; ++i)
        hold.push_back(s.send_only("/v1/completions", json{{"prompt", random_text(rng, 30)}, {"max_tokens", 3000},
                                                           {"stream", true}, {"temperature", 0}}));
    ASSERT_TRUE(eventually([&] { return s.metrics.active_requests.load() == 2; }));
    const uint64_t forks = s.engine.forks.load();
    const auto busy = s.req("POST", "/v1/chat/completions", body(2, seed));
    ASSERT_EQ(busy.status, 200) << busy.body;
    EXPECT_EQ(s.engine.forks.load(), forks) << "expected the sequential path";
    EXPECT_EQ(content(busy, 0), single[0]) << "n=2 under load";
    EXPECT_EQ(content(busy, 1), single[1]) << "n=2 under load";
    for (int fd : hold) close_fd(fd);
}

// B7: extending a capsule by a few tokens (capsule_id set) was refused with 409 "below the
// alignment unit" when the extension's grid point lay before the capsule's end. Now it is made.
TEST(RedTeam, B7CapsuleExtensionByAnyLengthWorks) {
    std::mt19937 rng(std::random_device{}());
    RedServer s(2, true, 64);
    RedServer cold(1, false);
    const size_t base_len = 700 + rng() % 1700;
    const std::vector<int> base = random_ids(rng, base_len);
    auto r = s.req("POST", "/v1/capsules", json{{"prompt", base}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string parent = json::parse(r.body)["id"];
    for (size_t extra : {size_t(1), size_t(3), size_t(1 + rng() % 60)}) {
        std::vector<int> ext = base;
        const std::vector<int> tail = random_ids(rng, extra);
        ext.insert(ext.end(), tail.begin(), tail.end());
        r = s.req("POST", "/v1/capsules", json{{"prompt", ext}, {"capsule_id", parent}});
        ASSERT_EQ(r.status, 200) << "extension by " << extra << " of " << base_len << ": " << r.body;
        const json cap = json::parse(r.body);
        EXPECT_EQ(cap["tokens"], ext.size());
        // Generating from it equals a capsule-free server.
        std::vector<int> turn = ext;
        turn.push_back('z');
        const json gen{{"prompt", turn}, {"max_tokens", 6}, {"temperature", 0}, {"capsule_id", cap["id"]}};
        const auto a = s.req("POST", "/v1/completions", gen);
        json plain = gen;
        plain.erase("capsule_id");
        const auto b = cold.req("POST", "/v1/completions", plain);
        ASSERT_EQ(a.status, 200) << a.body;
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(json::parse(a.body)["choices"][0]["text"], json::parse(b.body)["choices"][0]["text"]);
        EXPECT_EQ(json::parse(a.body)["frost"]["plan"], "restore");
        // The engine restores up to its grid point; the capsule's tokens past it are prefilled
        // with the rest of the prompt (the real engine's cold-prefill bits), so not cached.
        EXPECT_EQ(json::parse(a.body)["frost"]["cached_tokens"], ext.size() / 64 * 64);
    }
}

// Where the engine promises a cold prefill's bits only for cuts on its grid and a decode step's
// bits are not a prefill's (CUDA --chunk-invariant), every request answers as a cold server would:
// a live state is continued only where it is exact and ends on the grid, else a capsule is
// restored. The fake marks an off-grid cut and a decode step in its state, as those change the
// CUDA engine's bits, so any other path answers differently.
TEST(RedTeam, ExactCutGridEveryRequestAnswersAsACold) {
    std::mt19937 rng(std::random_device{}());
    RedServer s(1, true, 64, ApiConfig{}, 4096, 64);
    RedServer cold(1, false, 0, ApiConfig{}, 4096, 64);
    auto both = [&](const std::vector<int>& prompt, const char* want_plan) {
        const json gen{{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}};
        const auto a = s.req("POST", "/v1/completions", gen);
        const auto b = cold.req("POST", "/v1/completions", gen);
        EXPECT_EQ(a.status, 200) << a.body;
        EXPECT_EQ(b.status, 200) << b.body;
        const json ja = json::parse(a.body), jb = json::parse(b.body);
        EXPECT_EQ(ja["choices"][0]["text"], jb["choices"][0]["text"]) << "plan " << ja["frost"]["plan"];
        EXPECT_EQ(ja["frost"]["plan"], std::string(want_plan));
        return ja["choices"][0]["text"].get<std::string>();
    };
    // A turn after a capsule of its prefix, then the next turn resending it with its answer: the
    // live state holds decode steps, so the second restores the capsule instead.
    const size_t n1 = 100 + rng() % 300;
    const std::vector<int> p1 = random_ids(rng, n1);
    ASSERT_EQ(s.req("POST", "/v1/capsules", json{{"prompt", p1}}).status, 200);
    std::vector<int> p2 = p1;
    p2.push_back('x');
    const std::string out = both(p2, n1 % 64 ? "restore" : "append");
    for (char c : out) p2.push_back(int(uint8_t(c)));
    const std::vector<int> more = random_ids(rng, 5 + rng() % 40);
    p2.insert(p2.end(), more.begin(), more.end());
    both(p2, "restore");
    // A prefix frozen off the grid, then a longer prompt: its live state ends off the grid.
    const std::vector<int> p3 = random_ids(rng, 64 * (3 + rng() % 8) + 1 + rng() % 63);
    ASSERT_EQ(s.req("POST", "/v1/capsules", json{{"prompt", p3}}).status, 200);
    std::vector<int> p4 = p3;
    p4.push_back('q');
    both(p4, "restore");
    // On the grid and never decoded: continued live (append), and still a cold server's answer.
    const std::vector<int> p5 = random_ids(rng, 64 * (3 + rng() % 8));
    ASSERT_EQ(s.req("POST", "/v1/capsules", json{{"prompt", p5}}).status, 200);
    std::vector<int> p6 = p5;
    p6.push_back('q');
    both(p6, "append");
}

// B8: sessions were 4,096 shared by every key with no expiry: one tenant could take them all.
TEST(RedTeam, B8SessionsArePerKeyAndExpireWhenIdle) {
    ApiConfig api;
    api.max_sessions_per_key = 3;
    api.session_idle_s = 1;
    RedServer s(1, true, 0, api);
    std::vector<std::string> mine;
    for (int i = 0; i < 3; ++i) {
        const auto r = s.req("POST", "/v1/sessions");
        ASSERT_EQ(r.status, 200) << r.body;
        mine.push_back(json::parse(r.body)["id"]);
    }
    const auto over = s.req("POST", "/v1/sessions");
    EXPECT_EQ(over.status, 429) << over.body;
    EXPECT_NE(over.body.find("too_many_sessions"), std::string::npos);
    // Another key is not affected.
    EXPECT_EQ(s.req("POST", "/v1/sessions", nullptr, kOtherKey).status, 200);
    // Use keeps a session alive; idle ones go, and their places come back.
    for (int i = 0; i < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        EXPECT_EQ(s.req("GET", "/v1/sessions/" + mine[0]).status, 200);
    }
    EXPECT_EQ(s.req("GET", "/v1/sessions/" + mine[1]).status, 404) << "idle for 1.2 s";
    const auto again = s.req("POST", "/v1/sessions");
    EXPECT_EQ(again.status, 200) << again.body;
    const json list = json::parse(s.req("GET", "/v1/sessions").body);
    EXPECT_EQ(list["data"].size(), 2u);  // mine[0] and the new one
}

namespace {
// Sends raw bytes on a fresh connection; returns the response and whether the server closed.
std::pair<RawResponse, bool> raw_exchange(uint16_t port, const std::string& bytes) {
    const int fd = connect_loopback(port);
    send_all(fd, bytes);
    RawResponse r = read_response(fd, 3000);
    const bool closed = wait_closed(fd, 3000);
    close_fd(fd);
    return {r, closed};
}
}  // namespace

// Malformed HTTP is answered 400 with Connection: close (was: a silent close).
TEST(RedTeam, MalformedHttpGets400AndConnectionClose) {
    RedServer s(1);
    const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) + "\r\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"bad Content-Length", post + "Content-Length: 12x\r\n\r\n{}"},
        {"negative Content-Length", post + "Content-Length: -2\r\n\r\n{}"},
        {"duplicate Content-Length", post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} "},
        {"Content-Length with chunked", post + "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"},
        {"bad chunk size", post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"},
        {"NUL in a header", std::string("GET /health HTTP/1.1\r\nHost: x\r\nX-A: a") + '\0' + "b\r\n\r\n"},
        {"bare LF", "GET /health HTTP/1.1\nHost: x\n\n"},
        {"HTTP/0.9", "GET /health\r\n\r\n"},
        {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
        {"HTTP/3.0", "GET /health HTTP/3.0\r\nHost: x\r\n\r\n"},
    };
    for (const auto& [name, bytes] : cases) {
        const auto [r, closed] = raw_exchange(s.stack.port(), bytes);
        EXPECT_EQ(r.status, 400) << name << ": " << r.body;
        EXPECT_EQ(r.headers.count("connection") ? r.headers.at("connection") : "", "close") << name;
        EXPECT_TRUE(closed) << name;
    }
    EXPECT_EQ(s.req("GET", "/health").status, 200);
}

// HEAD works wherever GET does: same status and Content-Length, no body.
TEST(RedTeam, HeadIsGetWithoutABody) {
    RedServer s(1);
    for (const std::string path : {"/health", "/v1/models", "/v1/capsules", "/metrics", "/v1/nothing"}) {
        const RawResponse get = s.req("GET", path);
        const int fd = connect_loopback(s.stack.port());
        send_all(fd, "HEAD " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey + "\r\n\r\n");
        const std::string head = read_until(fd, "\r\n\r\n", 3000);
        // Nothing may follow the header: the next bytes on a keep-alive connection are the
        // next response's. A second request shows the framing is intact.
        send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        const RawResponse next = read_response(fd, 3000);
        close_fd(fd);
        ASSERT_NE(head.find("\r\n\r\n"), std::string::npos) << path;
        EXPECT_EQ(head.substr(0, 12), "HTTP/1.1 " + std::to_string(get.status)) << path << ": " << head;
        EXPECT_NE(head.find("Content-Length: " + std::to_string(get.body.size()) + "\r\n"), std::string::npos)
            << path << ": " << head;
        EXPECT_EQ(head.size(), head.find("\r\n\r\n") + 4) << "HEAD sent a body: " << path;
        EXPECT_EQ(next.status, 200) << path;
    }
}

// Deleting a pinned capsule takes an explicit unpin or ?force=true; /v1/claims then still shows
// the caller why the capsule went (and only to its owner).
TEST(RedTeam, PinnedDeleteNeedsForceAndClaimsShowWhy) {
    std::mt19937 rng(std::random_device{}());
    RedServer s(1);
    auto r = s.req("POST", "/v1/capsules", json{{"prompt", random_ids(rng, 80)}, {"pinned", true}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string id = json::parse(r.body)["id"];
    r = s.req("DELETE", "/v1/capsules/" + id);
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_NE(r.body.find("capsule_pinned"), std::string::npos) << r.body;
    EXPECT_EQ(s.req("GET", "/v1/capsules/" + id).status, 200);
    r = s.req("DELETE", "/v1/capsules/" + id + "?force=true");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(s.req("GET", "/v1/capsules/" + id).status, 404);
    // An unpinned one needs no force.
    r = s.req("POST", "/v1/capsules", json{{"prompt", random_ids(rng, 90)}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string other = json::parse(r.body)["id"];
    EXPECT_EQ(s.req("DELETE", "/v1/capsules/" + other).status, 200);
    // The gone capsule's history, with the reason, for its owner only.
    const json mine = json::parse(s.req("GET", "/v1/claims?claim_id=" + id).body);
    ASSERT_FALSE(mine["data"].empty());
    const json last = mine["data"].back();
    EXPECT_EQ(last["claim_id"], id);
    EXPECT_EQ(last["event"], "evicted");
    EXPECT_EQ(last["reason"], "deleted");
    bool unpinned = false;
    for (const auto& e : mine["data"]) unpinned |= e["event"] == "unpinned";
    EXPECT_TRUE(unpinned) << "force deletes through an unpin the log records";
    const json theirs = json::parse(s.req("GET", "/v1/claims", nullptr, kOtherKey).body);
    EXPECT_TRUE(theirs["data"].empty()) << theirs.dump();
}
