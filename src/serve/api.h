// The HTTP API without any socket code: a parsed request in, a reply (or a generation Job whose
// events the connection streams) out. Routing, auth, validation, tokenisation and the capsule
// endpoints live here so the Beast translation unit (http_server.cpp) only moves bytes.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "serve/body_builder.h"
#include "serve/engine_iface.h"
#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/scheduler.h"
#include "serve/token_cache.h"

namespace frost::serve {

struct ApiConfig {
    std::string model_name = "frost";
    std::vector<std::string> api_keys;  // empty: auth off (loopback only; enforced by the server)
    RequestLimits limits;
    int retry_after_s = 1;
    size_t channel_cap = 64;  // events buffered per request before the engine waits for the reader
    bool public_metrics = false;  // /metrics without a key (opt-in)
    size_t max_sessions = 4096;   // POST /v1/sessions beyond this (all keys): 429
    // One key cannot take every session: its own live sessions are bounded (429 beyond), and a
    // session unused (no request naming it, no GET) for session_idle_s is gone (0 = never).
    size_t max_sessions_per_key = 256;
    double session_idle_s = 3600;
    // CORS (--cors-origin): empty = off (no CORS header anywhere, OPTIONS is 405); else the
    // Access-Control-Allow-Origin value ("*" or one origin) on every reply and OPTIONS preflights
    // answered 204.
    std::string cors_origin;
    size_t max_stored_responses = 1024;  // /v1/responses store=true: oldest dropped beyond
};

struct HttpIn {
    std::string method;         // "GET", "POST", ...
    std::string target;         // raw request-target
    std::string authorization;  // raw Authorization header value
    std::string x_api_key;          // Anthropic clients' key header (used when no Authorization)
    std::string anthropic_version;  // anthropic-version header ("" when absent)
    std::string body;
    // When the request's head was read (TTFT and end-to-end latency start here); unset: handle().
    std::chrono::steady_clock::time_point arrival{};
};

struct HttpOut {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    // Set for an admitted generation: the connection streams (stream=true) or collects events.
    std::shared_ptr<Job> job;
    bool stream = false;
    std::unique_ptr<BodyBuilder> builder;
    // Set with `job` instead of a builder: the connection waits (without blocking its thread)
    // for the job's final event and answers what this returns (POST /v1/capsules).
    std::function<HttpOut(const StreamEvent&)> on_final;
    // Set instead of a reply: the store or claim log must be read or changed on the engine thread.
    // The connection queues it there (Scheduler::post_control) and answers what it returns; no
    // I/O thread ever waits for the engine (issue 13 B2). Api::finish() runs it inline instead.
    std::function<HttpOut(CapsuleStore&, ClaimLog&)> on_engine;
};

constexpr double kMaxTtlSeconds = 30.0 * 24 * 3600;  // ttl_s bound on capsule endpoints
constexpr int kMaxCapsulePriority = 1000;             // priority in [-this, this]


class Api {
public:
    Api(Scheduler& sched, const TextIface& text, const EngineIface& engine, Metrics& metrics, ApiConfig cfg);
    // The reply; it may carry on_engine (see HttpOut), which the caller must run on the engine
    // thread: the HTTP server queues it, finish(handle(in)) runs it inline and waits.
    // An exception that escapes the handling (std::bad_alloc when the heap refuses, T33) becomes
    // this request's error reply (exception_reply); only a refusal while making that reply
    // leaves as std::bad_alloc.
    HttpOut handle(const HttpIn& in);
    HttpOut finish(HttpOut out);
    HttpOut error_reply(const ApiError& e) const;
    // Inside a catch block: the reply for the exception in flight (503 insufficient_memory for
    // std::bad_alloc, 500 internal_error otherwise), counted in /metrics. It may itself throw
    // std::bad_alloc when the heap still refuses; the caller then drops the connection.
    HttpOut exception_reply() const;
    const ApiConfig& config() const { return cfg_; }
    // Headers every reply carries (CORS when configured; empty otherwise).
    const std::vector<std::pair<std::string, std::string>>& reply_headers() const { return reply_headers_; }
    // A generation's end as the connection saw it: observes the end-to-end latency from arrival.
    void observe_end(const Job& job);

    // What the Messages / Responses translators build on: a chat body (OpenAI shape, already
    // translated) run like POST /v1/chat/completions, answered through the builder `make` returns
    // (given the admitted job, with its prompt and id). `name_param` maps a chat field name in an
    // error back to the caller's API's spelling.
    using BuilderMaker = std::function<std::unique_ptr<BodyBuilder>(const Job& job, const std::string& model)>;
    HttpOut generate_chat(const nlohmann::json& chat_body, const HttpIn& in, const std::string& owner,
                          const BuilderMaker& make);

private:
    HttpOut dispatch(const HttpIn& in);
    // A prompt's ids; false with *err (400 context_length_exceeded, `param`) as soon as the text
    // is known to have more than counted_prompt_tokens() tokens, without encoding the rest of it
    // (a prompt over the context but under that bound gets check_context's exact count).
    bool encode_prompt(std::string_view text, const char* param, std::vector<int32_t>* ids, ApiError* err) const;
    size_t counted_prompt_tokens() const;
    ApiError prompt_too_long(const char* param) const;  // 400 context_length_exceeded, "more than"
    HttpOut generate(Endpoint ep, const HttpIn& in, const std::string& owner, const BuilderMaker* make = nullptr);
    // POST /tokenize, /detokenize (tokenize_api.cpp).
    HttpOut tokenize(const HttpIn& in);
    HttpOut detokenize(const HttpIn& in);
    // POST /v1/messages (messages_api.cpp), /v1/responses[/{id}] (responses_api.cpp).
    // count_only: POST /v1/messages/count_tokens ({"input_tokens": N}, nothing generated).
    HttpOut messages(const HttpIn& in, const std::string& owner, bool count_only = false);
    HttpOut responses(const HttpIn& in, const std::string& path, const std::string& owner);
    // GET /v1/responses/{id}/input_items: one page of a stored response's input items.
    HttpOut input_items_page(const nlohmann::json& items, const std::string& query) const;
    HttpOut preflight() const;
    // `query`: DELETE of a pinned capsule needs force=true (else 409 capsule_pinned).
    HttpOut capsules(const HttpIn& in, const std::string& path, const std::string& query, const std::string& owner);
    // POST /v1/capsules (capsule_api.cpp): freezes a messages / prompt prefix as a capsule.
    HttpOut create_capsule(const HttpIn& in, const std::string& owner);
    // POST /v1/capsules/{id}/fork|rollback: a generation that starts from that capsule.
    HttpOut generate_from_capsule(const HttpIn& in, const std::string& id, const std::string& owner);
    // The reply to a job the scheduler did not admit: 503 queue_full / shutting_down, 429
    // rate_limit_exceeded (per-key limit); all with Retry-After, before any SSE byte.
    HttpOut rejection(Admit a);
    HttpOut claims(const std::string& query, const std::string& owner);
    static HttpOut on_engine(std::function<HttpOut(CapsuleStore&, ClaimLog&)> fn);
    HttpOut sessions(const HttpIn& in, const std::string& path, const std::string& owner);
    bool owns_session(const std::string& id, const std::string& owner);
    // "" when unauthorised; otherwise the owner scope of the presented key.
    std::string owner_of(const std::string& authorization) const;

    Scheduler& sched_;
    const TextIface& text_;
    const EngineIface& engine_;
    Metrics& metrics_;
    ApiConfig cfg_;
    std::mutex sessions_mu_;
    TokenCache token_cache_;  // resent histories: ids reused, only new text encoded
    struct SessionEntry {
        std::string owner;  // API-key scope
        std::chrono::steady_clock::time_point last_used;
    };
    // Drops idle sessions (sessions_mu_ held).
    void expire_sessions_locked(std::chrono::steady_clock::time_point now);
    bool session_idle(const SessionEntry& e, std::chrono::steady_clock::time_point now) const;
    std::map<std::string, SessionEntry> sessions_;  // session id -> owner, last use
    std::vector<std::pair<std::string, std::string>> reply_headers_;
    std::shared_ptr<class ResponseStore> responses_;  // /v1/responses store=true (responses_api.h)
};

}  // namespace frost::serve
