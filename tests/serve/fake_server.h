// The whole serve stack (scheduler, API, HTTP on an ephemeral loopback port with API keys) over an
// engine and text layer the test owns - the fake ones in fake_backend.h - for HTTP-level tests.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/engine_iface.h"
#include "serve/fake_backend.h"
#include "serve/http_client.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace frost::serve::testing {

class FakeServerStack {
public:
    // Starts scheduler and HTTP server (gtest failures, not exceptions, on a start error).
    // `base` supplies the API settings other than model name and keys.
    void start(EngineIface& engine, const TextIface& text, Metrics& metrics, const SchedulerConfig& sc,
               const std::vector<std::string>& keys, const ApiConfig& base = ApiConfig{});
    ~FakeServerStack();  // stops the HTTP server, then the scheduler
    uint16_t port() const;
    Scheduler& sched() { return *sched_; }  // for control() closures that look inside the store

private:
    std::unique_ptr<Scheduler> sched_;
    std::unique_ptr<Api> api_;
    std::unique_ptr<HttpServer> http_;
};

// Each byte of s as its token id (the fake text layer's vocabulary).
std::vector<int32_t> byte_ids(const std::string& s);

// n words drawn from a small fixed list, space-separated: message text for conversations whose
// prefixes should collide only where a test makes them.
std::string random_words(std::mt19937& rng, int n);

// The whole stack over a FakeEngine whose output is exactly `script` (one token per byte, then
// the end token; empty: the fake's own hash-driven output), one API key (kKey), a 4 MiB device
// capsule budget.
struct ScriptedServer {
    static constexpr const char* kKey = "sk-scripted";
    FakeEngine engine;
    FakeText text;
    Metrics metrics;
    FakeServerStack stack;

    explicit ScriptedServer(const std::string& script = "", int slots = 1, size_t max_seq = 4096,
                            const ApiConfig& api = ApiConfig{});
    RawResponse post(const std::string& path, const nlohmann::json& body) const;
    RawResponse get(const std::string& path) const;
};

}  // namespace frost::serve::testing
