// The whole serve stack (scheduler, API, HTTP on an ephemeral loopback port with API keys) over an
// engine and text layer the test owns - the fake ones in fake_backend.h - for HTTP-level tests.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/api.h"
#include "serve/engine_iface.h"
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

private:
    std::unique_ptr<Scheduler> sched_;
    std::unique_ptr<Api> api_;
    std::unique_ptr<HttpServer> http_;
};

}  // namespace frost::serve::testing
