// A real server on 127.0.0.1 (ephemeral port) over the test-only fake engine: auth and path
// variants (T13), limits and timeouts (T10-T12), context length (T09), streaming framing, queue
// full -> 503 + Retry-After (T29), disconnect frees the slot (T30), drain/stop (T23), per-key
// capsule isolation (T14), multi-turn restore that equals a cold server, fail-closed restore.
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <mutex>
#include <random>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "exec/error.h"
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

constexpr const char* kKey = "sk-test-0";
constexpr const char* kKey2 = "sk-test-1";

struct Options {
    int slots = 2;
    size_t max_seq = 512;
    size_t queue_cap = 8;
    int step_delay_ms = 0;
    bool capsules = true;
    int header_timeout_ms = 5000;
    int body_timeout_ms = 30000;
    int send_timeout_ms = 10000;
    size_t channel_cap = 64;
    size_t max_per_key = 0;
    size_t max_connections = 0;  // 0: the descriptor limit's default
};

struct Server {
    FakeEngine engine;
    FakeText text;
    Metrics metrics;
    std::unique_ptr<Scheduler> sched;
    std::unique_ptr<Api> api;
    std::unique_ptr<HttpServer> http;
    uint16_t port = 0;

    explicit Server(const Options& o = {}) : engine(o.slots, o.max_seq) {
        engine.step_delay_ms = o.step_delay_ms;
        engine.capsules = o.capsules;
        SchedulerConfig sc;
        sc.queue_cap = o.queue_cap;
        sc.max_per_key = o.max_per_key;
        sc.budgets.bytes[0] = 1 << 20;
        sc.budgets.bytes[1] = 1 << 20;
        sched = std::make_unique<Scheduler>(engine, text, sc, &metrics);
        EXPECT_EQ(sched->start(), FROST_OK);
        ApiConfig ac;
        ac.model_name = "fake";
        ac.api_keys = {kKey, kKey2};
        ac.channel_cap = o.channel_cap;
        api = std::make_unique<Api>(*sched, text, engine, metrics, ac);
        ServerConfig cfg;
        cfg.port = 0;
        cfg.have_api_key = true;
        cfg.max_body_bytes = 64 * 1024;
        cfg.header_timeout_ms = o.header_timeout_ms;
        cfg.body_timeout_ms = o.body_timeout_ms;
        cfg.send_timeout_ms = o.send_timeout_ms;
        cfg.max_connections = o.max_connections;
        cfg.metrics = &metrics;
        http = std::make_unique<HttpServer>(*api, *sched, cfg);
        EXPECT_EQ(http->start(), FROST_OK);
        port = http->port();
    }
    ~Server() {
        http->stop();
        sched->stop();
    }
    RawResponse post(const std::string& path, const json& body, const std::string& key = kKey) {
        return http_request(port, "POST", path, body.dump(), key);
    }
};

// A vector, not a json initializer: nlohmann reads `{one_object}` as that object, not an array.
json chat_body(const std::vector<json>& messages, int max_tokens = 8) {
    return json{{"model", "fake"}, {"messages", json(messages)}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

json user(const std::string& s) { return json{{"role", "user"}, {"content", s}}; }

// Opens a streaming chat request on its own connection: the request is sent, nothing is read
// (-1 when the connection or the send fails).
int open_stream(uint16_t port, const std::string& key, const std::string& prompt, int max_tokens) {
    json body = chat_body({user(prompt)}, max_tokens);
    body["stream"] = true;
    const int fd = connect_loopback(port);
    if (fd < 0) return -1;
    const std::string b = body.dump();
    if (!send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
                          "\r\nContent-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b)) {
        close_fd(fd);
        return -1;
    }
    return fd;
}

template <class F>
bool eventually(F pred, int timeout_ms = 3000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pred();
}

}  // namespace

// Reliability case T37: a server without an API key listens on loopback only, so starting one
// on a reachable address by mistake exposes nothing. The host test is exact (127.0.0.0/8, ::1,
// "localhost"; names are never resolved), the refusal comes before any bind, and a key lifts it.
TEST(Http, WithoutAKeyOnlyLoopbackBinds) {
    for (const char* h : {"127.0.0.1", "127.3.4.5", "::1", "localhost"}) EXPECT_TRUE(is_loopback_host(h)) << h;
    for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "128.0.0.1", "", "example.com",
                          "127.0.0.1.evil.com", "localhost.", "::ffff:10.0.0.1"})
        EXPECT_FALSE(is_loopback_host(h)) << h;
    FakeEngine engine(1, 256);
    FakeText text;
    Metrics metrics;
    Scheduler sched(engine, text, SchedulerConfig{}, &metrics);
    ASSERT_EQ(sched.start(), FROST_OK);
    ApiConfig ac;
    ac.model_name = "fake";
    Api api(sched, text, engine, metrics, ac);
    for (const char* h : {"0.0.0.0", "::", "10.0.0.1"}) {
        ServerConfig cfg;
        cfg.host = h;
        cfg.port = 0;
        cfg.have_api_key = false;
        HttpServer http(api, sched, cfg);
        EXPECT_EQ(http.start(), FROST_ERR_INVALID_ARG) << h;
        EXPECT_NE(frost::last_error().find("--api-key"), std::string::npos) << frost::last_error();
        EXPECT_EQ(http.port(), 0) << h << ": nothing may be listening";
    }
    // Loopback without a key, and any address with one, start (0.0.0.0 on an ephemeral port).
    for (const auto& [host, key] : {std::pair<const char*, bool>{"127.0.0.1", false}, {"localhost", false}, {"0.0.0.0", true}}) {
        ServerConfig cfg;
        cfg.host = host;
        cfg.port = 0;
        cfg.have_api_key = key;
        HttpServer http(api, sched, cfg);
        ASSERT_EQ(http.start(), FROST_OK) << host << ": " << frost::last_error();
        EXPECT_GT(http.port(), 0) << host;
        http.stop();
    }
    sched.stop();
}

TEST(Http, HealthIsPublicAndEveryOtherRouteNeedsTheKey) {
    Server s;
    EXPECT_EQ(http_request(s.port, "GET", "/health").status, 200);
    const std::vector<std::pair<std::string, std::string>> routes = {
        {"GET", "/v1/models"},   {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"GET", "/metrics"},
        {"GET", "/v1/capsules"}, {"GET", "/v1/claims"},            {"GET", "/v1/nothing"},      {"DELETE", "/v1/capsules/x"}};
    for (const auto& [m, p] : routes) {
        EXPECT_EQ(http_request(s.port, m, p).status, 401) << m << " " << p;
        EXPECT_EQ(http_request(s.port, m, p, "", "sk-wrong").status, 401) << m << " " << p;
        EXPECT_EQ(http_request(s.port, m, p, "", std::string(kKey) + "x").status, 401) << m << " " << p;
    }
    // T13: no spelling of a protected path reaches a handler without the key.
    for (const char* p : {"//v1/models", "/v1//models", "/v1%2Fmodels", "/v1/../v1/models", "/V1/MODELS", "/v1/models/",
                          "/v1/./models", "/%761/models", "/health/../v1/models", "/v1/models?x=/health"}) {
        const int st = http_request(s.port, "GET", p).status;
        EXPECT_TRUE(st == 400 || st == 401) << p << " -> " << st;
    }
    EXPECT_EQ(http_request(s.port, "GET", "/V1/MODELS", "", kKey).status, 200);
    EXPECT_EQ(http_request(s.port, "GET", "/v1/models/", "", kKey2).status, 200);
    const auto models = http_request(s.port, "GET", "/v1/models", "", kKey);
    EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "fake");
}

TEST(Http, ChatCompletionNonStreaming) {
    Server s;
    const auto r = s.post("/v1/chat/completions", chat_body({user("hello")}, 5));
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["choices"][0]["message"]["content"].get<std::string>().size(), 5u);
    EXPECT_EQ(j["usage"]["completion_tokens"], 5);
    // "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n" in the fake tokenizer.
    EXPECT_EQ(j["usage"]["prompt_tokens"], 1 + 5 + 5 + 2 + 1 + 10);
    EXPECT_TRUE(j["usage"]["prompt_tokens_details"].contains("cached_tokens"));
    EXPECT_EQ(j["frost"]["plan"], "rebuild");
}

TEST(Http, StreamingFramingAndUsage) {
    Server s;
    json body = chat_body({user("stream me")}, 6);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const auto r = s.post("/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
    std::string text;
    std::string finish;
    bool usage_seen = false, done_last = false;
    size_t pos = 0;
    while (pos < r.body.size()) {
        const size_t end = r.body.find("\n\n", pos);
        ASSERT_NE(end, std::string::npos);
        const std::string ev = r.body.substr(pos, end - pos);
        ASSERT_EQ(ev.rfind("data: ", 0), 0u) << ev;
        const std::string data = ev.substr(6);
        pos = end + 2;
        if (data == "[DONE]") {
            done_last = pos == r.body.size();
            continue;
        }
        const json j = json::parse(data);
        EXPECT_EQ(j["object"], "chat.completion.chunk");
        if (j.contains("usage")) {
            usage_seen = true;
            EXPECT_EQ(j["usage"]["completion_tokens"], 6);
            continue;
        }
        const json& c = j["choices"][0];
        if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    }
    EXPECT_EQ(text.size(), 6u);
    EXPECT_EQ(finish, "length");
    EXPECT_TRUE(usage_seen);
    EXPECT_TRUE(done_last);
}

TEST(Http, StopStringsAndEndToken) {
    Server s;
    // Learn the greedy output, then stop on a substring of it.
    const auto r1 = s.post("/v1/chat/completions", chat_body({user("stops")}, 12));
    const std::string full = json::parse(r1.body)["choices"][0]["message"]["content"];
    ASSERT_EQ(full.size(), 12u);
    json body = chat_body({user("stops")}, 12);
    body["stop"] = full.substr(5, 3);
    const auto r2 = s.post("/v1/chat/completions", body);
    const json j = json::parse(r2.body);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(j["choices"][0]["message"]["content"], full.substr(0, full.find(full.substr(5, 3))));
    s.engine.end_after = 3;
    const json j3 = json::parse(s.post("/v1/chat/completions", chat_body({user("other")}, 12)).body);
    EXPECT_EQ(j3["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(j3["choices"][0]["message"]["content"].get<std::string>().size(), 3u);
}

TEST(Http, ContextLengthExceededNamesBothCounts) {
    Server s(Options{.max_seq = 64});
    const auto r = s.post("/v1/chat/completions", chat_body({user(std::string(100, 'x'))}));
    EXPECT_EQ(r.status, 400);
    const json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["code"], "context_length_exceeded");
    const std::string msg = e["message"];
    EXPECT_NE(msg.find("64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("119"), std::string::npos) << msg;  // 100 + the template's 19
    // max_tokens beyond the room left is a 400 too, before the engine sees anything.
    const auto r2 = s.post("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 62}});
    EXPECT_EQ(r2.status, 400);
    EXPECT_EQ(json::parse(r2.body)["error"]["param"], "max_tokens");
    EXPECT_EQ(s.engine.prefilled_tokens.load(), 0u);
}

TEST(Http, BadBodiesAndLimits) {
    Server s;
    EXPECT_EQ(http_request(s.port, "POST", "/v1/chat/completions", "{not json", kKey).status, 400);
    EXPECT_EQ(http_request(s.port, "POST", "/v1/chat/completions", std::string(60000, '['), kKey).status, 400);
    EXPECT_EQ(http_request(s.port, "POST", "/v1/chat/completions", "{\"messages\":\"\xff\"}", kKey).status, 400);
    const auto bad_n = s.post("/v1/chat/completions", json{{"messages", json::array({user("x")})}, {"n", 100}});
    EXPECT_EQ(bad_n.status, 400);
    EXPECT_EQ(json::parse(bad_n.body)["error"]["param"], "n");
    // Body over the limit (64 KiB here): 413.
    EXPECT_EQ(http_request(s.port, "POST", "/v1/chat/completions", std::string(70000, ' '), kKey).status, 413);
    // Header over 64 KiB: 431.
    const auto big = http_request(s.port, "GET", "/health", "", "", {"X-Big: " + std::string(70 * 1024, 'a')});
    EXPECT_EQ(big.status, 431);
    // 10^4 small headers also exceed the header budget.
    std::vector<std::string> many;
    for (int i = 0; i < 10000; ++i) many.push_back("X-H" + std::to_string(i) + ": v");
    EXPECT_EQ(http_request(s.port, "GET", "/health", "", "", many).status, 431);
    EXPECT_EQ(http_request(s.port, "GET", "/v1/chat/completions", "", kKey).status, 405);
}

TEST(Http, TrickledHeaderGets408AndClose) {
    Server s(Options{.header_timeout_ms = 300});
    const int fd = connect_loopback(s.port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHo"));
    const auto r = read_response(fd, 3000);
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(wait_closed(fd, 3000));
    close_fd(fd);
    // The server still serves others.
    EXPECT_EQ(http_request(s.port, "GET", "/health").status, 200);
}

// Reliability case T12's slow body: a body trickled a byte at a time (each byte well inside any
// per-read timeout) still gets 408 and a closed connection once the whole body's deadline
// passes, and the server answers other clients meanwhile.
TEST(Http, TrickledBodyGets408AtItsDeadlineAndOthersAreServed) {
    Server s(Options{.body_timeout_ms = 400});
    const int fd = connect_loopback(s.port);
    ASSERT_GE(fd, 0);
    const std::string head = std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kKey +
                             "\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{";
    ASSERT_TRUE(send_all(fd, head));
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<bool> stop{false};
    std::thread trickle([&] {
        while (!stop && send_all(fd, " ")) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
    EXPECT_EQ(http_request(s.port, "GET", "/health").status, 200);  // served while the body trickles
    const auto r = read_response(fd, 5000);
    const double waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(wait_closed(fd, 3000));
    stop = true;
    trickle.join();
    close_fd(fd);
    // Not before the deadline: the trickle was never refused for being slow byte by byte.
    EXPECT_GE(waited_ms, 350.0);
    EXPECT_EQ(http_request(s.port, "GET", "/health").status, 200);
}

// Reliability case T12, a flood of slow connections: at the connection cap the one that has
// waited longest for its request (here the first trickled header) is closed to make room, so a
// client that sends a whole request is served at once instead of behind the header timeout
// (60 s here); the other slow connections stay open and still work.
TEST(Http, AtTheConnectionCapTheLongestWaitingConnectionMakesRoom) {
    Server s(Options{.header_timeout_ms = 60000, .max_connections = 4});
    std::vector<int> slow;
    for (int i = 0; i < 4; ++i) {
        const int fd = connect_loopback(s.port);
        ASSERT_GE(fd, 0);
        ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHo"));
        slow.push_back(fd);
        // Each one's wait begins after the previous one's, so the first is the oldest.
        ASSERT_TRUE(eventually([&] { return s.metrics.connections_open.load() == size_t(i + 1); }));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(s.metrics.connections_evicted.load(), 0u);
    const RawResponse r = http_request(s.port, "GET", "/health");  // the client's own 10 s timeout
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(wait_closed(slow[0], 3000)) << "the longest-waiting connection was not closed";
    EXPECT_EQ(s.metrics.connections_evicted.load(), 1u);
    EXPECT_EQ(s.metrics.connections_refused.load(), 0u);
    // The others were left alone: each finishes its header and is answered.
    for (size_t i = 1; i < slow.size(); ++i) {
        ASSERT_TRUE(send_all(slow[i], "st: x\r\nConnection: close\r\n\r\n"));
        EXPECT_EQ(read_response(slow[i], 5000).status, 200) << i;
    }
    for (int fd : slow) close_fd(fd);
    EXPECT_TRUE(eventually([&] { return s.metrics.connections_open.load() == 0; }));
}

// T12 at the cap when no connection is waiting: every one has a request in flight (streams), so
// a new connection gets 503 too_many_connections with Retry-After and is closed, and the streams
// are not disturbed. Once they end, connections are taken again.
TEST(Http, AtTheConnectionCapWithEveryConnectionBusyANewOneGets503) {
    Server s(Options{.step_delay_ms = 10, .max_connections = 2});
    const int a = open_stream(s.port, kKey, "first", 40);
    const int b = open_stream(s.port, kKey2, "second", 40);
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    ASSERT_TRUE(eventually([&] { return s.sched->busy_slots() == 2; }));
    const int c = connect_loopback(s.port);
    ASSERT_GE(c, 0);
    const RawResponse r = read_response(c, 5000);  // answered without a request: nothing to wait for
    close_fd(c);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.headers.count("retry-after"), 1u);
    ASSERT_TRUE(json::accept(r.body)) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "too_many_connections");
    EXPECT_EQ(s.metrics.connections_refused.load(), 1u);
    EXPECT_EQ(s.metrics.connections_evicted.load(), 0u);
    for (int fd : {a, b}) {
        EXPECT_NE(read_until(fd, "[DONE]", 10000).find("[DONE]"), std::string::npos);
        close_fd(fd);
    }
    EXPECT_EQ(s.metrics.cancelled_total.load(), 0u);
    EXPECT_TRUE(eventually([&] { return s.metrics.connections_open.load() == 0; }));
    EXPECT_EQ(http_request(s.port, "GET", "/health").status, 200);
}

TEST(Http, QueueFullIs503WithRetryAfterBeforeAnyByte) {
    Server s(Options{.slots = 1, .queue_cap = 1, .step_delay_ms = 20});
    json body = chat_body({user("q")}, 60);
    std::vector<RawResponse> out(3);
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i) {
        ts.emplace_back([&, i] {
            std::this_thread::sleep_for(std::chrono::milliseconds(30 * i));
            out[size_t(i)] = s.post("/v1/chat/completions", body);
        });
    }
    for (auto& t : ts) t.join();
    int rejected = 0, ok = 0;
    for (const auto& r : out) {
        if (r.status == 503) {
            ++rejected;
            EXPECT_EQ(r.headers.count("retry-after"), 1u);
            EXPECT_EQ(json::parse(r.body)["error"]["code"], "queue_full");
        } else if (r.status == 200) {
            ++ok;
        }
    }
    EXPECT_GE(rejected, 1);
    EXPECT_EQ(ok + rejected, 3);
    EXPECT_GE(s.metrics.rejected_queue_full.load(), 1u);
}

TEST(Http, DisconnectMidStreamFreesTheSlot) {
    Server s(Options{.slots = 1, .step_delay_ms = 5});
    const int fd = open_stream(s.port, kKey, "long", 400);
    ASSERT_GE(fd, 0);
    const std::string got = read_until(fd, "\"content\":\"", 5000);
    ASSERT_NE(got.find("data: "), std::string::npos);
    ASSERT_TRUE(eventually([&] { return s.sched->busy_slots() == 1 && s.metrics.generated_tokens_total > 0; }));
    close_fd(fd);
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 0; }));
    EXPECT_TRUE(eventually([&] { return s.metrics.cancelled_total.load() >= 1; }));
    EXPECT_LT(s.metrics.generated_tokens_total.load(), 400u);  // cancelled, not run to the end
    // The freed slot serves the next request.
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body({user("next")}, 3)).status, 200);
}

// Reliability case T30 mid-prefill: the client goes away while its prompt is being prefilled
// (each engine call takes 300 ms here); the job is cancelled when that call returns, before any
// decode step (a decode step would take another 300 ms per token), and the slot serves the next.
TEST(Http, DisconnectMidPrefillCancelsBeforeAnyDecodeStep) {
    Server s(Options{.slots = 1, .step_delay_ms = 300});
    const int fd = open_stream(s.port, kKey, "a prompt that is being prefilled", 400);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(eventually([&] { return s.sched->busy_slots() == 1; }));  // admitted: its prefill runs
    close_fd(fd);
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 0; }, 5000));
    EXPECT_TRUE(eventually([&] { return s.metrics.cancelled_total.load() >= 1; }));
    EXPECT_LE(s.metrics.generated_tokens_total.load(), 1u);  // at most the token the prefill sampled
    s.engine.step_delay_ms = 0;
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body({user("next")}, 3)).status, 200);
}

// Reliability case T30 at scale: 10^4 clients that vanish abruptly (the socket closed with the
// response unread) at once after sending (queued, or not yet parsed), a moment later (queued or
// mid-prefill) or after their first token (mid-decode), from 8 threads against 2 slots. After
// it: no slot busy, nothing queued or active, every descriptor the server opened closed again,
// and the next request's output equals a fresh server's.
TEST(Http, TenThousandAbruptDisconnectsLeaveNothingBehind) {
    Server s(Options{.slots = 2, .queue_cap = 64, .step_delay_ms = 1});
    auto open_fds = [] {
        size_t n = 0;
        if (DIR* d = ::opendir("/proc/self/fd")) {
            while (::readdir(d)) ++n;
            ::closedir(d);
        }
        return n;
    };
    const size_t fds_before = open_fds();
    constexpr int kThreads = 8, kPerThread = 1250;
    const uint32_t seed = std::random_device{}();
    std::atomic<int> sent{0}, mid_decode{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < kThreads; ++t)
        clients.emplace_back([&, t] {
            std::mt19937 rng(seed + uint32_t(t));
            for (int i = 0; i < kPerThread; ++i) {
                const int fd = open_stream(s.port, kKey, random_words(rng, 1 + int(rng() % 12)), 4 + int(rng() % 60));
                if (fd < 0) continue;
                sent++;
                const int when = int(rng() % 3);
                if (when == 1) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
                if (when == 2 && read_until(fd, "\"content\":\"", 3000).find("\"content\":\"") != std::string::npos)
                    mid_decode++;
                close_fd(fd);
            }
        });
    for (auto& c : clients) c.join();
    EXPECT_EQ(sent.load(), kThreads * kPerThread);
    EXPECT_GT(mid_decode.load(), 0);
    EXPECT_TRUE(eventually([&] {
        return s.sched->busy_slots() == 0 && s.metrics.queue_depth.load() == 0 && s.metrics.active_requests.load() == 0;
    }, 30000)) << "busy " << s.sched->busy_slots() << ", queued " << s.metrics.queue_depth.load() << ", active "
               << s.metrics.active_requests.load();
    EXPECT_EQ(s.metrics.requests_total.load(), uint64_t(sent.load()));  // each one reached the scheduler
    EXPECT_GT(s.metrics.cancelled_total.load(), uint64_t(sent.load()) / 2);  // most ended by the client
    EXPECT_TRUE(eventually([&] { return open_fds() <= fds_before; }, 10000))
        << open_fds() << " descriptors open, " << fds_before << " before";
    Server fresh;
    const json body = chat_body({user("after the storm")}, 6);
    const auto after = s.post("/v1/chat/completions", body);
    const auto want = fresh.post("/v1/chat/completions", body);
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_EQ(json::parse(after.body)["choices"][0]["message"]["content"],
              json::parse(want.body)["choices"][0]["message"]["content"]);
}

TEST(Http, MultiTurnRestoresAndMatchesAColdServer) {
    const json sys = {{"role", "system"}, {"content", "You are a terse coding agent."}};
    json turn2;
    std::string warm_text;
    {
        Server s;
        const auto r1 = s.post("/v1/chat/completions", chat_body({sys, user("list files")}, 10));
        ASSERT_EQ(r1.status, 200);
        // The client resends history, with an assistant turn that differs from what the server
        // generated (as when the thinking block is dropped).
        turn2 = chat_body({sys, user("list files"), {{"role", "assistant"}, {"content", "ls -la"}}, user("now grep")}, 10);
        const auto r2 = s.post("/v1/chat/completions", turn2);
        ASSERT_EQ(r2.status, 200);
        const json j = json::parse(r2.body);
        EXPECT_EQ(j["frost"]["plan"], "restore");
        // Cached = the rendered history of turn 1 (system + user, no generation prompt).
        const size_t hist = s.text.encode("<|im_start|>system\nYou are a terse coding agent.<|im_end|>\n"
                                          "<|im_start|>user\nlist files<|im_end|>\n").size();
        EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], hist);
        EXPECT_EQ(s.engine.restores.load(), 1u);
        warm_text = j["choices"][0]["message"]["content"];
        // Listed under the key that made it, invisible to the other key.
        const json mine = json::parse(http_request(s.port, "GET", "/v1/capsules", "", kKey).body);
        const json theirs = json::parse(http_request(s.port, "GET", "/v1/capsules", "", kKey2).body);
        ASSERT_GE(mine["data"].size(), 1u);
        EXPECT_EQ(theirs["data"].size(), 0u);
        const std::string id = mine["data"][0]["id"];
        const auto other = http_request(s.port, "GET", "/v1/capsules/" + id, "", kKey2);
        const auto missing = http_request(s.port, "GET", "/v1/capsules/cap-doesnotexist", "", kKey2);
        EXPECT_EQ(other.status, 404);
        EXPECT_EQ(missing.status, 404);
        EXPECT_EQ(http_request(s.port, "GET", "/v1/capsules/" + id, "", kKey).status, 200);
        EXPECT_EQ(http_request(s.port, "GET", "/v1/capsules/" + std::string(10240, 'a'), "", kKey).status, 400);
        EXPECT_EQ(http_request(s.port, "GET", "/v1/capsules/..%2f..%2fetc", "", kKey).status, 400);
        EXPECT_EQ(http_request(s.port, "DELETE", "/v1/capsules/" + id, "", kKey2).status, 404);
        EXPECT_EQ(http_request(s.port, "POST", "/v1/capsules/" + id + "/pin", "", kKey).status, 200);
        const json claims = json::parse(http_request(s.port, "GET", "/v1/claims", "", kKey).body);
        EXPECT_GE(claims["data"].size(), 4u);  // accepted, materialized, restore_required, restored...
    }
    Server cold(Options{.capsules = false});
    const auto rc = cold.post("/v1/chat/completions", turn2);
    const json jc = json::parse(rc.body);
    EXPECT_EQ(jc["frost"]["plan"], "rebuild");
    EXPECT_EQ(jc["choices"][0]["message"]["content"], warm_text);
}

TEST(Http, CompletionContinuationAppendsToLiveState) {
    Server s(Options{.slots = 1});
    const auto r1 = s.post("/v1/completions", json{{"prompt", "def main():"}, {"max_tokens", 4}, {"temperature", 0}});
    ASSERT_EQ(r1.status, 200);
    const std::string gen = json::parse(r1.body)["choices"][0]["text"];
    const uint64_t before = s.engine.prefilled_tokens;
    // Resend prompt + all but the last generated token + more: the live state holds a prefix.
    const std::string next = "def main():" + gen.substr(0, 3) + " more";
    const auto r2 = s.post("/v1/completions", json{{"prompt", next}, {"max_tokens", 2}, {"temperature", 0}});
    const json j = json::parse(r2.body);
    EXPECT_EQ(j["frost"]["plan"], "append");
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 11 + 3);
    EXPECT_EQ(s.engine.prefilled_tokens - before, 5u);  // only " more"
}

TEST(Http, FailedRestoreIsRefusedNotRecomputed) {
    Server s;
    const json sys = {{"role", "system"}, {"content", "sys"}};
    ASSERT_EQ(s.post("/v1/chat/completions", chat_body({sys, user("a")}, 3)).status, 200);
    s.engine.fail_restore = true;
    const auto r = s.post("/v1/chat/completions",
                          chat_body({sys, user("a"), {{"role", "assistant"}, {"content", "zz"}}, user("b")}, 3));
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "capsule_restore_failed");
    const json claims = json::parse(http_request(s.port, "GET", "/v1/claims", "", kKey).body);
    (void)claims;  // the failed claim was dropped; its events are in the scheduler's log
    bool saw_failed = false;
    s.sched->control([&](CapsuleStore&, ClaimLog& log) {
        for (const auto& e : log.recent())
            if (e.event == "restoration_failed") saw_failed = true;
    });
    EXPECT_TRUE(saw_failed);
}

TEST(Http, DrainRefusesNewWorkAndStopEndsStreamsWithAnErrorEvent) {
    Server s(Options{.slots = 1, .step_delay_ms = 5});
    json body = chat_body({user("drain")}, 400);
    body["stream"] = true;
    const int fd = connect_loopback(s.port);
    ASSERT_GE(fd, 0);
    const std::string b = body.dump();
    ASSERT_TRUE(send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
                                 "\r\nContent-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b));
    ASSERT_NE(read_until(fd, "\"content\":\"", 5000).find("data: "), std::string::npos);
    s.sched->begin_drain();
    const auto refused = s.post("/v1/chat/completions", chat_body({user("late")}, 2));
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(refused.headers.count("retry-after"), 1u);
    EXPECT_EQ(http_request(s.port, "GET", "/health").status, 503);
    s.sched->stop();
    const std::string tail = read_until(fd, "shutting_down", 5000);
    EXPECT_NE(tail.find("shutting_down"), std::string::npos);
    close_fd(fd);
}

TEST(Http, MetricsExposition) {
    Server s;
    ASSERT_EQ(s.post("/v1/chat/completions", chat_body({user("m")}, 2)).status, 200);
    const auto r = http_request(s.port, "GET", "/metrics", "", kKey);
    ASSERT_EQ(r.status, 200);
    for (const char* name : {"frost_queue_depth", "frost_ttft_seconds_bucket", "frost_decode_tokens_per_second",
                             "frost_capsule_bytes{tier=\"device\"}", "frost_prefix_hits_total", "frost_restore_seconds_count"})
        EXPECT_NE(r.body.find(name), std::string::npos) << name;
}

// The engine's memory gauges: absent while the engine has no view; its buffers, live buffers and
// graphs once it has one (refreshed when a request ends); the device gauges only where it runs on
// a device. Values are the fake engine's (its capsules count in its buffers).
TEST(Http, MetricsShowTheEngineMemoryWhereTheEngineReportsIt) {
    Server s;
    auto metrics = [&] { return http_request(s.port, "GET", "/metrics", "", kKey).body; };
    auto line = [](const std::string& name, uint64_t v) { return "\n" + name + " " + std::to_string(v) + "\n"; };
    // The gauges the fake's figures give now, with or without the device ones.
    auto expected = [&](bool device) {
        const EngineMemory f = s.engine.fake_memory();
        std::vector<std::string> want = {
            "\nfrost_buffer_bytes{space=\"device\"} " + std::to_string(f.buffer_bytes[0]) + "\n",
            "\nfrost_buffer_bytes{space=\"host_pinned\"} " + std::to_string(f.buffer_bytes[1]) + "\n",
            "\nfrost_buffer_bytes{space=\"host\"} " + std::to_string(f.buffer_bytes[2]) + "\n",
            line("frost_live_buffers", f.live_buffers), line("frost_live_graphs", f.live_graphs)};
        if (device) {
            want.push_back(line("frost_device_memory_used_bytes", f.device_used));
            want.push_back(line("frost_device_memory_total_bytes", f.device_total));
        }
        return want;
    };
    // Polls (the gauges are set when the request's slot is released, just after its last event):
    // "" once every expected line is there, else the last exposition.
    auto shows = [&](bool device) {
        std::string m;
        for (int i = 0; i < 300; ++i) {
            m = metrics();
            const std::vector<std::string> want = expected(device);
            bool all = true;
            for (const auto& w : want) all = all && m.find(w) != std::string::npos;
            if (all) return std::string();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return m;
    };
    std::mt19937 rng(std::random_device{}());
    ASSERT_EQ(s.post("/v1/chat/completions", chat_body({user(random_words(rng, 3))}, 2)).status, 200);
    std::string m = metrics();
    EXPECT_EQ(m.find("frost_buffer_bytes"), std::string::npos);
    EXPECT_EQ(m.find("frost_device_memory"), std::string::npos);
    for (int view : {1, 2}) {
        SCOPED_TRACE(view == 1 ? "buffers only" : "with a device");
        s.engine.memory_view = view;
        const json sys = {{"role", "system"}, {"content", random_words(rng, 5)}};  // a turn that freezes a capsule
        ASSERT_EQ(s.post("/v1/chat/completions", chat_body({sys, user(random_words(rng, 4))}, 2)).status, 200);
        EXPECT_EQ(shows(view == 2), "") << "missing one of the gauges";
        if (view == 1) {
            EXPECT_EQ(metrics().find("frost_device_memory"), std::string::npos);
        }
        EXPECT_GT(s.engine.live_capsules(), 0u);  // the capsules the turns froze are in the figures
    }
}

TEST(Http, CapsuleUpdatesAreValidated) {
    Server s;
    const json sys = {{"role", "system"}, {"content", "update me"}};
    ASSERT_EQ(s.post("/v1/chat/completions", chat_body({sys, user("a")}, 2)).status, 200);
    const json list = json::parse(http_request(s.port, "GET", "/v1/capsules", "", kKey).body);
    ASSERT_EQ(list["data"].size(), 1u);
    const std::string path = "/v1/capsules/" + list["data"][0]["id"].get<std::string>();
    const auto ok = http_request(s.port, "POST", path, R"({"pinned":true,"priority":3,"ttl_s":60})", kKey);
    ASSERT_EQ(ok.status, 200) << ok.body;
    const json j = json::parse(ok.body);
    EXPECT_EQ(j["pinned"], true);
    EXPECT_EQ(j["priority"], 3);
    EXPECT_EQ(j["ttl_s"], 60.0);
    for (const char* bad : {R"({"pinned":1})", R"({"priority":1e9})", R"({"ttl_s":-1})", R"({"nope":1})", "[", R"({"priority":"3"})"})
        EXPECT_EQ(http_request(s.port, "POST", path, bad, kKey).status, 400) << bad;
    EXPECT_EQ(http_request(s.port, "POST", path, R"({"pinned":false})", kKey2).status, 404);
    // Pinned: deleting it takes an unpin first (or ?force=true, tests/serve/test_redteam.cpp).
    EXPECT_EQ(http_request(s.port, "DELETE", path, "", kKey).status, 409);
    EXPECT_EQ(http_request(s.port, "POST", path + "/unpin", "", kKey).status, 200);
    EXPECT_EQ(http_request(s.port, "DELETE", path, "", kKey).status, 200);
    EXPECT_EQ(http_request(s.port, "GET", path, "", kKey).status, 404);
    EXPECT_EQ(s.engine.live_capsules(), 0u);  // the bytes were released too
}

TEST(Http, NChoicesAreServedOneAfterAnother) {
    Server s;
    json body = chat_body({user("two please")}, 5);
    body["n"] = 2;
    body["temperature"] = 0.7;
    body["seed"] = 11;
    const auto r = s.post("/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    ASSERT_EQ(j["choices"].size(), 2u);
    EXPECT_EQ(j["choices"][0]["index"], 0);
    EXPECT_EQ(j["choices"][1]["index"], 1);
    EXPECT_NE(j["choices"][0]["message"]["content"], j["choices"][1]["message"]["content"]);  // seeds differ
    EXPECT_EQ(j["usage"]["completion_tokens"], 10);
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 0; }));
}

TEST(Http, SlowReaderIsDroppedAtTheSendTimeoutAndOthersAreServed) {
    // T31: a client that never reads fills the socket; the engine stops producing for it (the
    // channel is bounded), the send timeout drops it, and its slot is freed.
    Server s(Options{.slots = 2, .max_seq = 1 << 16, .send_timeout_ms = 300, .channel_cap = 4});
    const int fd = connect_loopback(s.port);
    ASSERT_GE(fd, 0);
    json body = chat_body({user("flood")}, 60000);
    body["stream"] = true;
    const std::string b = body.dump();
    ASSERT_TRUE(send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
                                 "\r\nContent-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b));
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 1; }));
    // Meanwhile another client is served normally.
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body({user("fast")}, 3)).status, 200);
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 0; }, 20000));
    EXPECT_LT(s.metrics.generated_tokens_total.load(), 60000u);  // it never ran to completion
    close_fd(fd);
}

TEST(Http, SessionsAreScopedPerKey) {
    Server s;
    const auto created = http_request(s.port, "POST", "/v1/sessions", "", kKey);
    ASSERT_EQ(created.status, 200);
    const std::string sid = json::parse(created.body)["id"];
    json body = chat_body({{{"role", "system"}, {"content", "sess"}}, user("a")}, 2);
    body["session_id"] = sid;
    ASSERT_EQ(s.post("/v1/chat/completions", body).status, 200);
    EXPECT_EQ(s.post("/v1/chat/completions", body, kKey2).status, 404);  // another key's session
    body["session_id"] = "sess-unknown";
    EXPECT_EQ(s.post("/v1/chat/completions", body).status, 404);
    const json info = json::parse(http_request(s.port, "GET", "/v1/sessions/" + sid, "", kKey).body);
    EXPECT_EQ(info["capsules"].size(), 1u);
    EXPECT_EQ(http_request(s.port, "GET", "/v1/sessions/" + sid, "", kKey2).status, 404);
    EXPECT_EQ(http_request(s.port, "GET", "/v1/sessions/..", "", kKey).status, 400);
    EXPECT_EQ(json::parse(http_request(s.port, "GET", "/v1/sessions", "", kKey2).body)["data"].size(), 0u);
    EXPECT_EQ(http_request(s.port, "DELETE", "/v1/sessions/" + sid, "", kKey).status, 200);
    EXPECT_EQ(s.engine.live_capsules(), 0u);
    EXPECT_EQ(http_request(s.port, "GET", "/v1/sessions/" + sid, "", kKey).status, 404);
}

TEST(Http, ExpectContinueIsAnswered) {
    Server s;
    const int fd = connect_loopback(s.port);
    ASSERT_GE(fd, 0);
    const std::string b = chat_body({user("continue")}, 2).dump();
    ASSERT_TRUE(send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
                                 "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(b.size()) + "\r\n\r\n"));
    EXPECT_NE(read_until(fd, "\r\n\r\n", 5000).find("100 Continue"), std::string::npos);
    ASSERT_TRUE(send_all(fd, b));
    EXPECT_EQ(read_response(fd).status, 200);
    close_fd(fd);
}

TEST(Http, RacingCapsuleVerbsKeepCountersConsistent) {
    // T15: many clients race pin/unpin/update/delete on one capsule while chats and forks restore it; the
    // answers are defined (200/404/409) and the store and engine agree afterwards. The queue
    // holds every thread's chat at once (16 threads; 2 slots + 32 places). With the default 8
    // places, one CI run (2 cores, other tests beside it) got 2 answers outside those three:
    // chats pile up while the scheduler thread waits for a core, and past 8 they are answered
    // 503 (queue full), the server's defined overload answer, not this race's subject. A failure
    // now prints every undefined answer.
    Server s(Options{.slots = 2, .queue_cap = 32});
    const json sys = {{"role", "system"}, {"content", "race"}};
    ASSERT_EQ(s.post("/v1/chat/completions", chat_body({sys, user("a")}, 2)).status, 200);
    const std::string id = json::parse(http_request(s.port, "GET", "/v1/capsules", "", kKey).body)["data"][0]["id"];
    const std::string path = "/v1/capsules/" + id;
    std::mutex undefined_mu;
    std::vector<std::string> undefined;  // "verb: status body" of every answer outside 200 / 404 / 409
    std::vector<std::thread> ts;
    for (int t = 0; t < 16; ++t) {
        ts.emplace_back([&, t] {
            for (int i = 0; i < 6; ++i) {
                RawResponse r;
                const int verb = (t + i) % 6;
                const json longer = chat_body({sys, user("a"), {{"role", "assistant"}, {"content", "x"}}, user("b")}, 2);
                switch (verb) {
                    case 0: r = http_request(s.port, "POST", path + "/pin", "", kKey); break;
                    case 1: r = http_request(s.port, "POST", path + "/unpin", "", kKey); break;
                    case 2: r = http_request(s.port, "POST", path, R"({"priority":2})", kKey); break;
                    case 3: r = s.post("/v1/chat/completions", longer); break;
                    case 4: r = s.post(path + "/fork", longer); break;
                    default: r = http_request(s.port, "DELETE", path, "", kKey); break;
                }
                if (r.status != 200 && r.status != 404 && r.status != 409) {
                    const std::lock_guard<std::mutex> lock(undefined_mu);
                    undefined.push_back(std::to_string(verb) + ": " + std::to_string(r.status) + " " + r.body);
                }
            }
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_TRUE(undefined.empty()) << undefined.size() << " undefined answers (verb 0 pin, 1 unpin, 2 update, 3 chat, "
                                   << "4 fork, 5 delete), the first: " << (undefined.empty() ? "" : undefined.front());
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 0; }));
    size_t store_count = 0;
    uint64_t listed = 0, used = 0;
    s.sched->control([&](CapsuleStore& st, ClaimLog&) {
        store_count = st.size();
        for (const auto* r : st.list("key0")) listed += r->bytes;
        for (int t = 0; t < 3; ++t) used += st.used(Tier(t));
    });
    EXPECT_EQ(store_count, s.engine.live_capsules());
    EXPECT_EQ(listed, used);
    // Every capsule the race left (chats and forks freeze new ones), deleted: each tier's bytes
    // and the engine's capsules return to zero.
    const json left = json::parse(http_request(s.port, "GET", "/v1/capsules", "", kKey).body);
    for (const auto& c : left["data"])
        EXPECT_EQ(http_request(s.port, "DELETE", "/v1/capsules/" + c["id"].get<std::string>() + "?force=true", "", kKey).status, 200);
    used = 0;
    s.sched->control([&](CapsuleStore& st, ClaimLog&) {
        store_count = st.size();
        for (int t = 0; t < 3; ++t) used += st.used(Tier(t));
    });
    EXPECT_EQ(store_count, 0u);
    EXPECT_EQ(used, 0u);
    EXPECT_EQ(s.engine.live_capsules(), 0u);
}

TEST(Http, PerKeyLimitIs429WithRetryAfterAndReleasedOnEveryPath) {
    // 50 ms steps: the first stream (20 s) outlasts the refusals below even on a loaded machine.
    Server s(Options{.slots = 1, .queue_cap = 8, .step_delay_ms = 50, .max_per_key = 2});
    // Key 0 fills its two places: one running, one queued behind it.
    const int a = open_stream(s.port, kKey, "first", 400);
    const int b = open_stream(s.port, kKey, "second", 400);
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    ASSERT_NE(read_until(a, "data: ", 5000).find("data: "), std::string::npos);
    ASSERT_TRUE(eventually([&] { return s.sched->in_flight("key0") == 2; }));

    // The third of key 0, streamed or not, is refused before any SSE byte.
    json third = chat_body({user("third")}, 4);
    third["stream"] = true;
    for (const bool stream : {true, false}) {
        third["stream"] = stream;
        const RawResponse r = s.post("/v1/chat/completions", third);
        ASSERT_EQ(r.status, 429) << r.body;
        EXPECT_EQ(r.headers.count("retry-after"), 1u);
        EXPECT_EQ(r.headers.at("content-type").find("application/json"), 0u);
        const json err = json::parse(r.body)["error"];
        EXPECT_EQ(err["type"], "rate_limit_exceeded");
        EXPECT_EQ(err["code"], "rate_limit_exceeded");
        EXPECT_EQ(r.body.find("data:"), std::string::npos);
    }
    // Capsule creation counts against the same places.
    EXPECT_EQ(s.post("/v1/capsules", json{{"prompt", std::string(80, 'x')}}).status, 429);
    EXPECT_EQ(s.metrics.rejected_key_limit.load(), 3u);
    EXPECT_EQ(s.metrics.rejected_queue_full.load(), 0u);  // the global queue had room

    // Another key is still admitted (it queues behind key 0's running request).
    const int c = open_stream(s.port, kKey2, "other tenant", 2);
    ASSERT_GE(c, 0);
    ASSERT_TRUE(eventually([&] { return s.sched->in_flight("key1") == 1; }));

    // Disconnect (running and queued) gives the places back.
    close_fd(a);
    close_fd(b);
    EXPECT_TRUE(eventually([&] { return s.sched->in_flight("key0") == 0; }, 5000));
    EXPECT_NE(read_until(c, "[DONE]", 10000).find("[DONE]"), std::string::npos);
    close_fd(c);
    EXPECT_TRUE(eventually([&] { return s.sched->in_flight("key1") == 0; }));

    // Done and error paths give it back too: a finished request, then a 404 from the engine
    // thread (an unknown capsule_id), then two in a row still fit.
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body({user("done")}, 2)).status, 200);
    json missing = chat_body({user("needs a capsule")}, 2);
    missing["capsule_id"] = "cap-missing";
    EXPECT_EQ(s.post("/v1/chat/completions", missing).status, 404);
    EXPECT_EQ(s.sched->in_flight("key0"), 0u);
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body({user("again")}, 2)).status, 200);
    EXPECT_EQ(s.post("/v1/chat/completions", chat_body({user("and again")}, 2)).status, 200);
    EXPECT_EQ(s.sched->in_flight("key0"), 0u);
}

TEST(Http, QueueFullStays503WithAPerKeyLimit) {
    // Per-key room left, global queue full: the answer is still the global 503.
    Server s(Options{.slots = 1, .queue_cap = 1, .step_delay_ms = 50, .max_per_key = 8});
    const int a = open_stream(s.port, kKey, "running", 400);
    ASSERT_NE(read_until(a, "data: ", 5000).find("data: "), std::string::npos);
    // The stream's first chunk is written at admission, before the engine thread takes the job:
    // wait until `a` runs, or `b` may meet `a` still queued and be the one refused (a CI run saw
    // that, and the third request then queued behind `a` and got its 200). 50 ms steps: `a` (20 s)
    // outlasts the checks on a loaded machine; closing it cancels it.
    ASSERT_TRUE(eventually([&] { return s.sched->busy_slots() == 1 && s.sched->queue_depth() == 0; }));
    const int b = open_stream(s.port, kKey2, "queued", 400);
    ASSERT_TRUE(eventually([&] { return s.sched->queue_depth() == 1; }));
    const RawResponse r = s.post("/v1/chat/completions", chat_body({user("no room")}, 2));
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "queue_full");
    close_fd(a);
    close_fd(b);
}

TEST(Http, NChoicesAreOneBatchedForkThatPrefillsThePromptOnce) {
    std::mt19937 rng(std::random_device{}());
    const uint64_t seed = rng() % 1000;
    std::string prompt;
    for (int i = 0; i < 60; ++i) prompt += char('a' + rng() % 26);
    // Reference: each choice alone (seed + choice), on a server without the fork.
    std::vector<std::string> want;
    {
        Server ref(Options{.slots = 1, .capsules = false});
        ref.engine.fork_live_on = false;
        for (int c = 0; c < 3; ++c) {
            json one = chat_body({user(prompt)}, 6);
            one["temperature"] = 0.9;
            one["seed"] = seed + uint64_t(c);
            const auto r = ref.post("/v1/chat/completions", one);
            ASSERT_EQ(r.status, 200) << r.body;
            want.push_back(json::parse(r.body)["choices"][0]["message"]["content"]);
        }
    }
    Server s(Options{.slots = 3, .capsules = false});
    json body = chat_body({user(prompt)}, 6);
    body["n"] = 3;
    body["temperature"] = 0.9;
    body["seed"] = seed;
    const uint64_t before = s.engine.prefilled_tokens.load();
    for (const bool stream : {false, true}) {
        body["stream"] = stream;
        const uint64_t p0 = s.engine.prefilled_tokens.load();
        const auto r = s.post("/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        std::vector<std::string> got(3);
        if (!stream) {
            const json j = json::parse(r.body);
            ASSERT_EQ(j["choices"].size(), 3u);
            for (const auto& ch : j["choices"]) got[ch["index"].get<size_t>()] = ch["message"]["content"];
            EXPECT_EQ(j["usage"]["completion_tokens"], 18);
            // Prompt prefilled once (P tokens: P-1 shared, the last one per choice), not 3 times.
            const uint64_t P = j["usage"]["prompt_tokens"];
            EXPECT_EQ(s.engine.prefilled_tokens.load() - p0, P + 2);
        } else {
            for (size_t at = 0; (at = r.body.find("data: {", at)) != std::string::npos; ++at) {
                const json c = json::parse(r.body.substr(at + 6, r.body.find("\n\n", at) - at - 6));
                for (const auto& ch : c["choices"])
                    if (ch["delta"].contains("content")) got[ch["index"].get<size_t>()] += ch["delta"]["content"].get<std::string>();
            }
        }
        EXPECT_EQ(got, want) << "stream " << stream;
    }
    EXPECT_EQ(s.engine.forks.load(), 2u);
    EXPECT_GT(s.engine.prefilled_tokens.load(), before);
    EXPECT_TRUE(eventually([&] { return s.sched->busy_slots() == 0; }));
    // Fewer free slots than choices: one after another, same outputs.
    Server one(Options{.slots = 1, .capsules = false});
    body["stream"] = false;
    const auto r = one.post("/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(j["choices"][c]["message"]["content"], want[c]);
    EXPECT_EQ(one.engine.forks.load(), 0u);
}
