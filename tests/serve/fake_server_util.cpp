// FakeServerStack (fake_server.h).
#include "serve/fake_server.h"

#include <gtest/gtest.h>

namespace frost::serve::testing {

void FakeServerStack::start(EngineIface& engine, const TextIface& text, Metrics& metrics, const SchedulerConfig& sc,
                            const std::vector<std::string>& keys, const ApiConfig& base) {
    sched_ = std::make_unique<Scheduler>(engine, text, sc, &metrics);
    EXPECT_EQ(sched_->start(), FROST_OK);
    ApiConfig ac = base;
    ac.model_name = "fake";
    ac.api_keys = keys;
    api_ = std::make_unique<Api>(*sched_, text, engine, metrics, ac);
    ServerConfig cfg;
    cfg.port = 0;
    cfg.have_api_key = !keys.empty();
    cfg.metrics = &metrics;
    http_ = std::make_unique<HttpServer>(*api_, *sched_, cfg);
    EXPECT_EQ(http_->start(), FROST_OK);
}

FakeServerStack::~FakeServerStack() {
    if (http_) http_->stop();
    if (sched_) sched_->stop();
}

uint16_t FakeServerStack::port() const { return http_ ? http_->port() : 0; }

std::string random_words(std::mt19937& rng, int n) {
    static const char* kWords[] = {"alpha", "build", "cache", "delta", "engine", "frost", "graph", "host"};
    std::uniform_int_distribution<int> w(0, 7);
    std::string s;
    for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + kWords[w(rng)];
    return s;
}

std::vector<int32_t> byte_ids(const std::string& s) {
    std::vector<int32_t> ids;
    for (unsigned char c : s) ids.push_back(int32_t(c));
    return ids;
}

ScriptedServer::ScriptedServer(const std::string& script, int slots, size_t max_seq, const ApiConfig& api)
    : engine(slots, max_seq) {
    engine.script = byte_ids(script);
    SchedulerConfig sc;
    sc.budgets.bytes[0] = 1 << 22;
    stack.start(engine, text, metrics, sc, {kKey}, api);
}

RawResponse ScriptedServer::post(const std::string& path, const nlohmann::json& body) const {
    return http_request(stack.port(), "POST", path, body.dump(), kKey);
}

RawResponse ScriptedServer::get(const std::string& path) const { return http_request(stack.port(), "GET", path, "", kKey); }

}  // namespace frost::serve::testing
