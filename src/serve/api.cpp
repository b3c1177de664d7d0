// Routing and handlers of the HTTP API (see api.h). Order per request: normalise the target
// (400 on ambiguity), then auth on the canonical path (401, constant-time), then the handler.
#include "serve/api.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <exception>
#include <new>
#include <optional>

#include "exec/error.h"
#include "serve/constraint.h"
#include "serve/http_route.h"
#include "serve/ids.h"
#include "serve/json_guard.h"
#include "serve/messages_api.h"
#include "serve/responses_api.h"
#include "serve/reasoning_split.h"

namespace frost::serve {

using nlohmann::json;

namespace {
constexpr const char* kCapsulesPrefix = "/v1/capsules";
constexpr const char* kSessionsPrefix = "/v1/sessions";

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

HttpOut json_reply(int status, const json& j) {
    HttpOut out;
    out.status = status;
    out.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    return out;
}

// continue_final_message: cuts the rendered prompt right after the final assistant message's
// text, so the turn stays open (no end-of-turn token) and the model continues that text.
bool open_final_message(const json& messages, std::string* text) {
    const json& last = messages.back();
    std::string content;
    if (last.contains("content") && last["content"].is_string()) content = last["content"].get<std::string>();
    else if (last.contains("content") && last["content"].is_array())
        for (const auto& part : last["content"]) content += part.value("text", "");
    // Templates strip the content's surrounding whitespace; match what they wrote.
    while (!content.empty() && std::isspace(static_cast<unsigned char>(content.back()))) content.pop_back();
    if (content.empty()) {
        // Nothing to continue: cut at the end of the (empty) turn's header instead.
        const size_t at = text->rfind("<|im_end|>");
        if (at == std::string::npos) return false;
        text->resize(at);
        return true;
    }
    const size_t at = text->rfind(content);
    if (at == std::string::npos) return false;
    text->resize(at + content.size());
    return true;
}

}  // namespace

Api::Api(Scheduler& sched, const TextIface& text, const EngineIface& engine, Metrics& metrics, ApiConfig cfg)
    : sched_(sched), text_(text), engine_(engine), metrics_(metrics), cfg_(std::move(cfg)) {
    if (cfg_.limits.vocab_size == 0) cfg_.limits.vocab_size = engine_.vocab_size();
    if (!cfg_.cors_origin.empty()) {
        reply_headers_.emplace_back("Access-Control-Allow-Origin", cfg_.cors_origin);
        // One configured origin (not "*"): caches must key on the request's Origin.
        if (cfg_.cors_origin != "*") reply_headers_.emplace_back("Vary", "Origin");
    }
    responses_ = make_response_store(cfg_.max_stored_responses);
    // Sessions whose capsules came back from the capsule dir come back with them.
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [own, sid] : sched_.reindex_report().sessions) sessions_.emplace(sid, SessionEntry{own, now});
}

HttpOut Api::error_reply(const ApiError& e) const {
    HttpOut out;
    out.status = e.status;
    out.body = api_error_body(e);
    if (e.status == 503 || e.status == 429) out.headers.emplace_back("Retry-After", std::to_string(cfg_.retry_after_s));
    if (e.status == 401) out.headers.emplace_back("WWW-Authenticate", "Bearer");
    return out;
}

std::string Api::owner_of(const std::string& authorization) const {
    if (cfg_.api_keys.empty()) return "local";
    // Every key is compared (no early exit), so timing does not reveal which key matched.
    int match = -1;
    for (size_t i = 0; i < cfg_.api_keys.size(); ++i)
        if (authorized(authorization, cfg_.api_keys[i]) && match < 0) match = int(i);
    return match < 0 ? "" : "key" + std::to_string(match);
}

HttpOut Api::handle(const HttpIn& in) {
    try {
        return dispatch(in);
    } catch (const std::exception&) {
        return exception_reply();
    }
}

HttpOut Api::exception_reply() const {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        metrics_.out_of_memory_total++;
        return error_reply(out_of_memory_error());
    } catch (const std::exception& e) {
        metrics_.exceptions_total++;
        return error_reply(internal_error(e.what()));
    }
}

size_t Api::counted_prompt_tokens() const {
    // Up to 4x the context a prompt's exact count is worth giving (check_context names it); past
    // that, "more than" is all a client needs, and the rest of the text is not encoded.
    return 4 * engine_.max_seq_len() + 64;
}

ApiError Api::prompt_too_long(const char* param) const {
    ApiError e = invalid_field(param, "this model's maximum context length is " + std::to_string(engine_.max_seq_len()) +
                                          " tokens, but the prompt has more than " +
                                          std::to_string(counted_prompt_tokens()) + " tokens");
    e.code = "context_length_exceeded";
    return e;
}

bool Api::encode_prompt(std::string_view text, const char* param, std::vector<int32_t>* ids, ApiError* err) const {
    if (text_.encode_at_most(text, counted_prompt_tokens(), ids)) return true;
    *err = prompt_too_long(param);
    ids->clear();
    return false;
}

HttpOut Api::dispatch(const HttpIn& in) {
    RoutePath route;
    std::string why;
    if (!normalize_target(in.target, &route, &why)) return error_reply(invalid_field("", "bad request path: " + why));
    const std::string& path = route.path;

    // A CORS preflight carries no credentials: answered before auth, for every route.
    if (in.method == "OPTIONS" && !cfg_.cors_origin.empty()) return preflight();
    if (is_public_path(path)) {
        if (in.method != "GET") return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET"));
        return json_reply(sched_.draining() ? 503 : 200, json{{"status", sched_.draining() ? "draining" : "ok"}});
    }
    // Anthropic's SDK sends its key as `x-api-key`; it counts only when no Authorization came.
    const std::string& auth = in.authorization.empty() && !in.x_api_key.empty() ? "Bearer " + in.x_api_key
                                                                                 : in.authorization;
    const std::string owner = (path == "/metrics" && cfg_.public_metrics) ? "local" : owner_of(auth);
    if (owner.empty()) {
        HttpOut e = error_reply(make_error(401, "invalid_request_error", "invalid_api_key", "missing or invalid API key"));
        if (path.rfind("/v1/messages", 0) == 0) e.body = anthropic_error_body(e.status, "invalid x-api-key / Authorization");
        return e;
    }

    auto method_is = [&](const char* m) { return in.method == m; };
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
        if (!method_is("POST")) return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use POST"));
        return generate(path == "/v1/chat/completions" ? Endpoint::Chat : Endpoint::Completion, in, owner);
    }
    const json model_obj = {{"id", cfg_.model_name},
                            {"object", "model"},
                            {"created", 0},
                            {"owned_by", "frost"},
                            {"max_model_len", engine_.max_seq_len()}};
    if (path == "/v1/models") {
        if (!method_is("GET")) return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET"));
        return json_reply(200, json{{"object", "list"}, {"data", json::array({model_obj})}});
    }
    if (path.rfind("/v1/models/", 0) == 0) {
        if (!method_is("GET")) return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET"));
        // Routes match the lower-cased path; the id is compared as the client spelled it.
        const std::string id = route.raw_path.substr(std::string("/v1/models/").size());
        if (id != cfg_.model_name)
            return error_reply(make_error(404, "invalid_request_error", "model_not_found",
                                          "The model '" + id + "' does not exist (serving '" + cfg_.model_name + "')"));
        return json_reply(200, model_obj);
    }
    if (path == "/tokenize" || path == "/detokenize") {
        if (!method_is("POST")) return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use POST"));
        return path == "/tokenize" ? tokenize(in) : detokenize(in);
    }
    if (path == "/v1/messages" || path == "/v1/messages/count_tokens")
        return messages(in, owner, path == "/v1/messages/count_tokens");
    if (path == "/v1/responses" || path.rfind("/v1/responses/", 0) == 0) return responses(in, path, owner);
    if (path == "/metrics") {
        if (!method_is("GET")) return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET"));
        HttpOut out;
        out.content_type = "text/plain; version=0.0.4";
        out.body = metrics_.render();
        return out;
    }
    if (path == "/v1/claims") return claims(route.query, owner);
    if (path == kSessionsPrefix || path.rfind(std::string(kSessionsPrefix) + "/", 0) == 0) return sessions(in, path, owner);
    if (path.rfind(kCapsulesPrefix, 0) == 0) return capsules(in, path, route.query, owner);
    return error_reply(make_error(404, "invalid_request_error", "not_found", "no route " + path));
}

HttpOut Api::preflight() const {
    HttpOut out;
    out.status = 204;
    out.content_type = "text/plain";
    out.headers = {{"Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"},
                   {"Access-Control-Allow-Headers",
                    "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta, OpenAI-Organization, "
                    "OpenAI-Project, X-Stainless-OS, X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-Runtime, "
                    "X-Stainless-Runtime-Version, X-Stainless-Arch, X-Stainless-Retry-Count, X-Stainless-Timeout, "
                    "anthropic-dangerous-direct-browser-access"},
                   {"Access-Control-Max-Age", "86400"}};
    return out;
}

void Api::observe_end(const Job& job) {
    if (job.times.received == SteadyTime{}) return;
    metrics_.e2e.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - job.times.received).count());
}

HttpOut Api::generate_chat(const json& chat_body, const HttpIn& in, const std::string& owner, const BuilderMaker& make) {
    HttpIn chat = in;
    chat.body = chat_body.dump(-1, ' ', false, json::error_handler_t::replace);
    return generate(Endpoint::Chat, chat, owner, &make);
}

// Constrained decoding (issue 17, constraint.h): compiles what the request asks for into
// job.constraint: a forced tool call (tool_choice required/named, Qwen3's JSON call form) or
// response_format / grammar / regex. False + *err (400 naming the field) when it does not compile
// or this backend cannot mask tokens (a forced call then keeps its prompt prefix alone).
static bool attach_constraint(Job& job, const TextIface& text, int vocab_size, ApiError* err) {
    const GenRequest& r = job.req;
    // Which call form the template writes: Qwen3's JSON or Qwen3.5/3.6's XML.
    const std::string probe = text.tool_call_prefix("f");
    const bool xml_calls = probe.find("<function=f>") != std::string::npos;
    const bool forced_call = !job.forced_prefix.empty() &&
                             (xml_calls || probe.find("\"arguments\": ") != std::string::npos);
    if (!forced_call && r.constraint_kind == ConstraintKind::None) return true;
    const bool want_format = r.constraint_kind != ConstraintKind::None;
    job.masker = text.token_masker(vocab_size);
    if (!job.masker) {
        // A forced call without masks still ends the prompt inside the call (the prefix).
        if (!want_format) return true;
        *err = invalid_field(r.constraint_field, "constrained decoding is not available with this backend");
        return false;
    }
    if (forced_call) {
        if (compile_tool_call(r.tools, r.tool_choice == ToolChoice::Named ? r.tool_choice_name : "",
                              r.parallel_tool_calls, xml_calls, &job.constraint) != FROST_OK) {
            const std::string msg = last_error();
            // "tools[i].function.parameters: why" names the schema that failed.
            const size_t colon = msg.find(": ");
            *err = msg.rfind("tools[", 0) == 0 && colon != std::string::npos
                       ? invalid_field(msg.substr(0, colon), msg.substr(colon + 2))
                       : invalid_field("tool_choice", msg);
            return false;
        }
        return true;
    }
    if (compile_constraint(r.constraint_kind, r.constraint_source, &job.constraint) != FROST_OK) {
        *err = invalid_field(r.constraint_field, last_error());
        return false;
    }
    return true;
}

HttpOut Api::generate(Endpoint ep, const HttpIn& in, const std::string& owner, const BuilderMaker* make) {
    metrics_.requests_total++;
    auto job = std::make_shared<Job>();
    // TTFT and end-to-end latency count from the request's arrival (the connection's clock).
    job->times.received = in.arrival != SteadyTime{} ? in.arrival : std::chrono::steady_clock::now();
    ApiError err;
    if (!parse_gen_request(ep, in.body, cfg_.limits, &job->req, &err)) return error_reply(err);
    // No seed: a fresh one per request (sampled outputs differ), reported in the response.
    if (!job->req.seed_set) job->req.seed = fresh_seed();
    if (!job->req.model.empty() && job->req.model != cfg_.model_name)
        return error_reply(make_error(404, "invalid_request_error", "model_not_found",
                                      "model: '" + job->req.model + "' is not served here (serving '" +
                                          cfg_.model_name + "')"));
    if (sched_.draining())
        return error_reply(make_error(503, "server_error", "shutting_down", "the server is shutting down"));
    if (!job->req.session_id.empty() && !owns_session(job->req.session_id, owner))
        return error_reply(make_error(404, "invalid_request_error", "session_not_found",
                                      "session_id: no session '" + job->req.session_id + "'"));

    if (ep == Endpoint::Chat) {
        ChatRender r;
        r.messages = job->req.messages;
        r.tools = job->req.tools;
        r.enable_thinking = job->req.enable_thinking;
        // tool_choice "required" / named: the prompt ends inside the call's markup, so the model
        // can only continue the call (named: its arguments). Thinking is off for such a turn: the
        // call must be the first thing the model writes.
        const bool forced = !job->req.tools.empty() &&
                            (job->req.tool_choice == ToolChoice::Required || job->req.tool_choice == ToolChoice::Named);
        // Constrained output (response_format / grammar / regex) starts at the first generated
        // token, so no thinking block either: the grammar applies to the answer itself.
        if (job->req.constraint_kind != ConstraintKind::None) {
            r.enable_thinking = false;
            job->req.enable_thinking = false;
        }
        if (forced) {
            r.enable_thinking = false;
            job->req.enable_thinking = false;
            job->forced_prefix =
                text_.tool_call_prefix(job->req.tool_choice == ToolChoice::Named ? job->req.tool_choice_name : "");
        }
        std::string text, hist;
        bool hist_ok;
        {
            PhaseTimer t(job->times, Phase::Template);
            if (text_.render_chat(r, &text) != FROST_OK)
                return error_reply(invalid_field("messages", "cannot render the chat template: " + last_error()));
            if (!job->req.add_generation_prompt) {
                r.add_generation_prompt = false;
                if (text_.render_chat(r, &text) != FROST_OK)
                    return error_reply(invalid_field("messages", "cannot render the chat template: " + last_error()));
            }
            if (job->req.continue_final_message && !open_final_message(job->req.messages, &text))
                return error_reply(invalid_field("continue_final_message",
                                                 "the final assistant message's text is not in the rendered prompt"));
            text += job->forced_prefix;
            // The resent history (without the generation prompt) is the point the next turn's
            // request shares with this one, whatever the client does with the thinking block.
            r.add_generation_prompt = false;
            hist_ok = text_.render_chat(r, &hist) == FROST_OK && hist.size() < text.size() &&
                      text.compare(0, hist.size(), hist) == 0;
        }
        // Thinking not explicitly disabled: split <think> text into reasoning_content.
        job->split_reasoning = job->req.enable_thinking != std::optional<bool>(false);
        job->starts_in_reasoning = job->split_reasoning && prompt_opens_thinking(text);
        PhaseTimer t(job->times, Phase::Tokenize);
        const std::string_view suffix = std::string_view(text).substr(hist_ok ? hist.size() : 0);
        if (hist_ok && text_.split_safe(hist, suffix)) {
            // History ids from the previous turn's where they still apply (token_cache.h), then
            // only the generation prompt: the boundary is exact by construction.
            if (!token_cache_.encode_at_most(text_, owner, hist, counted_prompt_tokens(), &job->prompt))
                return error_reply(prompt_too_long("messages"));
            job->history_boundary = job->prompt.size();
            const std::vector<int32_t> tail = text_.encode(suffix);
            job->prompt.insert(job->prompt.end(), tail.begin(), tail.end());
            if (tail.empty()) job->history_boundary = 0;
        } else {
            if (!encode_prompt(text, "messages", &job->prompt, &err)) return error_reply(err);
            if (hist_ok) {
                const std::vector<int32_t> h = text_.encode(hist);
                if (h.size() < job->prompt.size() && std::equal(h.begin(), h.end(), job->prompt.begin()))
                    job->history_boundary = h.size();
            }
        }
    } else {
        PhaseTimer t(job->times, Phase::Tokenize);
        if (job->req.prompt_is_ids) job->prompt = job->req.prompt_ids;
        else if (!encode_prompt(job->req.prompt_text, "prompt", &job->prompt, &err)) return error_reply(err);
    }
    if (!check_context(job->req, job->prompt.size(), engine_.max_seq_len(), cfg_.limits, &job->max_new, &err))
        return error_reply(err);
    if (!attach_constraint(*job, text_, engine_.vocab_size(), &err)) return error_reply(err);

    job->id = (ep == Endpoint::Chat ? new_id("chatcmpl") : new_id("cmpl"));
    job->owner = owner;
    job->channel = std::make_shared<Channel>(cfg_.channel_cap);
    // Batched prompts: one job per further prompt, on the same channel, choices numbered on.
    std::vector<std::shared_ptr<Job>> more;
    for (size_t k = 1; k < job->req.batch.size(); ++k) {
        auto j = std::make_shared<Job>();
        j->times.received = job->times.received;
        j->req = job->req;
        j->req.batch.clear();
        j->req.seed = job->req.seed + uint64_t(k) * uint64_t(job->req.n);  // choice index i samples with seed + i
        const BatchPrompt& b = job->req.batch[k];
        if (b.is_ids) {
            j->prompt = b.ids;
        } else if (!encode_prompt(b.text, "prompt", &j->prompt, &err)) {
            err.param = "prompt[" + std::to_string(k) + "]";
            return error_reply(err);
        }
        if (!check_context(j->req, j->prompt.size(), engine_.max_seq_len(), cfg_.limits, &j->max_new, &err)) {
            err.param = "prompt[" + std::to_string(k) + "]";
            return error_reply(err);
        }
        j->id = new_id("cmpl");
        j->owner = owner;
        j->channel = job->channel;
        j->index_base = int(k) * job->req.n;
        j->constraint = job->constraint;  // each choice runs its own matcher over it
        j->masker = job->masker;
        j->leader = job;
        more.push_back(std::move(j));
    }
    const int total_choices = job->req.n * int(1 + more.size());
    const std::string model = cfg_.model_name;
    HttpOut out;
    out.stream = job->req.stream;
    if (make) {
        out.builder = (*make)(*job, model);
    } else {
        auto b = std::make_unique<ResponseBuilder>(ep, job->id, model, unix_now(), total_choices, job->req.include_usage);
        if (!more.empty()) b->set_batch(job->req.n);
        b->set_metrics(&metrics_);
        if (job->req.temperature > 0) b->set_seed(job->req.seed);
        out.builder = std::move(b);
    }
    const Admit a = sched_.submit(job);
    if (a != Admit::Ok) return rejection(a);
    // Queued from here: an exception (the heap refusing, T33) must not leave it running for a
    // connection that never learns of it. Cancelling the leader stops the batch's other prompts.
    try {
        for (const auto& j : more) {
            const Admit b = sched_.submit(j);
            if (b != Admit::Ok) {
                job->cancelled = true;  // the prompts already queued stop too
                return rejection(b);
            }
        }
        out.job = job;
        if (out.stream) out.content_type = "text/event-stream";
        return out;
    } catch (...) {
        job->cancelled = true;
        sched_.wake();
        throw;
    }
}

HttpOut Api::rejection(Admit a) {
    if (a == Admit::QueueFull) {
        metrics_.rejected_queue_full++;
        return error_reply(make_error(503, "server_error", "queue_full", "the request queue is full; retry later"));
    }
    if (a == Admit::KeyLimit) {
        metrics_.rejected_key_limit++;
        return error_reply(make_error(429, "rate_limit_exceeded", "rate_limit_exceeded",
                                      "too many requests in flight for this API key (at most " +
                                          std::to_string(sched_.config().max_per_key) + "); retry later"));
    }
    metrics_.rejected_draining++;
    return error_reply(make_error(503, "server_error", "shutting_down", "the server is shutting down"));
}

HttpOut Api::capsules(const HttpIn& in, const std::string& path, const std::string& query, const std::string& owner) {
    // GET /v1/capsules; GET|DELETE /v1/capsules/{id}; POST /v1/capsules/{id} with any of
    // {"pinned": bool, "priority": int, "ttl_s": number}; POST /v1/capsules/{id}/{pin|unpin}.
    const std::string& method = in.method;
    std::string rest = path.substr(std::string(kCapsulesPrefix).size());
    std::string id, verb;
    if (!rest.empty()) {
        rest.erase(0, 1);
        const size_t slash = rest.find('/');
        id = rest.substr(0, slash);
        if (slash != std::string::npos) verb = rest.substr(slash + 1);
        std::string why;
        if (!valid_id(id, &why)) return error_reply(invalid_field("capsule_id", why));
    }
    if (id.empty() && method == "POST") return create_capsule(in, owner);
    if (verb == "fork" || verb == "rollback") {
        if (method != "POST") return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use POST"));
        return generate_from_capsule(in, id, owner);
    }
    if (id.empty()) {
        if (method != "GET") return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET or POST"));
        return on_engine([owner](CapsuleStore& s, ClaimLog&) {
            json list = json::array();
            for (const auto* r : s.list(owner)) list.push_back(capsule_json(*r, s.ttl_left(*r)));
            return json_reply(200, json{{"object", "list"}, {"data", list}});
        });
    }
    // Updates are validated before the engine thread sees them.
    std::optional<bool> set_pin;
    std::optional<int> set_prio;
    std::optional<double> set_ttl;
    if (verb.empty() && method == "POST") {
        json upd;
        ApiError err;
        if (!parse_json_body(in.body, cfg_.limits.max_depth, &upd, &err)) return error_reply(err);
        for (auto it = upd.begin(); it != upd.end(); ++it) {
            const std::string& k = it.key();
            const json& v = it.value();
            if (k == "pinned" && v.is_boolean()) set_pin = v.get<bool>();
            else if (k == "priority" && v.is_number_integer() && v.get<int64_t>() >= -1000 && v.get<int64_t>() <= 1000)
                set_prio = int(v.get<int64_t>());
            else if (k == "ttl_s" && v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0 &&
                     v.get<double>() <= kMaxTtlSeconds)
                set_ttl = v.get<double>();
            else
                return error_reply(invalid_field(k, "expected pinned (bool), priority (int in [-1000, 1000]) or "
                                                    "ttl_s (seconds, 0 = none)"));
        }
    }
    bool force = false;
    for (size_t at = 0; at <= query.size();) {
        const size_t amp = std::min(query.find('&', at), query.size());
        if (query.compare(at, amp - at, "force=true") == 0) force = true;
        at = amp + 1;
    }
    // The store is the engine thread's: the operation runs there (HttpOut::on_engine).
    return on_engine([this, id, verb, method, owner, force, set_pin, set_prio, set_ttl](CapsuleStore& s, ClaimLog&) {
        int status = 404;
        json body;
        [&] {  // sets status and body
            const CapsuleRecord* r = s.find(id, owner);
            if (!r) return;  // another key's id looks exactly like a missing one (no oracle)
            if (verb.empty() && method == "GET") {
                status = 200;
                body = capsule_json(*r, s.ttl_left(*r));
            } else if (verb.empty() && method == "DELETE") {
                // A pin is a promise the caller made: deleting through it takes an explicit
                // unpin first, or ?force=true (which logs the unpin, then the deletion).
                if (r->pinned && !force) {
                    status = 423;
                    return;
                }
                if (r->pinned) s.set_pinned(id, owner, false);
                status = s.remove(id, owner) == FROST_OK ? 200 : 409;
                body = json{{"id", id}, {"deleted", status == 200}};
            } else if (verb.empty() && method == "POST") {
                CapsuleStore::PolicyChange change;
                change.pinned = set_pin;
                change.priority = set_prio;
                change.ttl_s = set_ttl;
                status = s.set_policy(id, owner, change) == FROST_OK ? 200 : 409;
                if (const CapsuleRecord* r2 = s.find(id, owner)) body = capsule_json(*r2, s.ttl_left(*r2));
            } else if ((verb == "pin" || verb == "unpin") && method == "POST") {
                status = s.set_pinned(id, owner, verb == "pin") == FROST_OK ? 200 : 409;
                if (const CapsuleRecord* r2 = s.find(id, owner)) body = capsule_json(*r2, s.ttl_left(*r2));
            } else {
                status = 405;
            }
        }();
        if (status == 404)
            return error_reply(make_error(404, "invalid_request_error", "capsule_not_found", "no capsule '" + id + "'"));
        if (status == 405) return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "unsupported verb"));
        if (status == 409) return error_reply(make_error(409, "invalid_request_error", "conflict", "capsule is in use"));
        if (status == 423)
            return error_reply(make_error(409, "invalid_request_error", "capsule_pinned",
                                          "capsule '" + id + "' is pinned: unpin it first (POST /v1/capsules/" + id +
                                              "/unpin) or delete with ?force=true"));
        return json_reply(status, body);
    });
}

bool Api::session_idle(const SessionEntry& e, std::chrono::steady_clock::time_point now) const {
    return cfg_.session_idle_s > 0 && std::chrono::duration<double>(now - e.last_used).count() >= cfg_.session_idle_s;
}

void Api::expire_sessions_locked(std::chrono::steady_clock::time_point now) {
    for (auto it = sessions_.begin(); it != sessions_.end();)
        it = session_idle(it->second, now) ? sessions_.erase(it) : std::next(it);
}

bool Api::owns_session(const std::string& id, const std::string& owner) {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    const auto now = std::chrono::steady_clock::now();
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    if (session_idle(it->second, now)) {  // idle too long: gone, for its owner too
        sessions_.erase(it);
        return false;
    }
    if (it->second.owner != owner) return false;
    it->second.last_used = now;  // every use keeps it alive
    return true;
}

HttpOut Api::sessions(const HttpIn& in, const std::string& path, const std::string& owner) {
    // POST|GET /v1/sessions; GET|DELETE /v1/sessions/{id}. A session names a conversation: its
    // requests record it on the capsules they make, and deleting it releases those capsules.
    const std::string rest = path.size() > std::string(kSessionsPrefix).size()
                                 ? path.substr(std::string(kSessionsPrefix).size() + 1)
                                 : "";
    if (rest.empty()) {
        const auto now = std::chrono::steady_clock::now();
        if (in.method == "POST") {
            // Optional body {"id": "..."}: the caller names the session (else a fresh id).
            std::string want;
            if (!in.body.empty()) {
                json b;
                ApiError err;
                if (!parse_json_body(in.body, cfg_.limits.max_depth, &b, &err)) return error_reply(err);
                if (!b.is_object()) return error_reply(invalid_field("", "the body must be a JSON object"));
                for (auto it = b.begin(); it != b.end(); ++it)
                    if (it.key() != "id") return error_reply(invalid_field(it.key(), "unknown field (sessions take only 'id')"));
                if (b.contains("id") && !b["id"].is_null()) {
                    std::string why;
                    if (!b["id"].is_string() || !valid_id(b["id"].get<std::string>(), &why))
                        return error_reply(invalid_field("id", why.empty() ? "must be a string" : why));
                    want = b["id"].get<std::string>();
                }
            }
            std::lock_guard<std::mutex> lock(sessions_mu_);
            expire_sessions_locked(now);
            size_t mine = 0;
            for (const auto& [id, e] : sessions_) mine += e.owner == owner;
            if (cfg_.max_sessions_per_key > 0 && mine >= cfg_.max_sessions_per_key)
                return error_reply(make_error(429, "rate_limit_error", "too_many_sessions",
                                              "this API key holds " + std::to_string(mine) + " sessions (at most " +
                                                  std::to_string(cfg_.max_sessions_per_key) +
                                                  "); delete one or let one go idle"));
            if (sessions_.size() >= cfg_.max_sessions)
                return error_reply(make_error(429, "rate_limit_error", "too_many_sessions", "too many sessions"));
            if (!want.empty() && sessions_.count(want))
                return error_reply(make_error(409, "invalid_request_error", "session_exists",
                                              "id: a session '" + want + "' already exists"));
            const std::string id = want.empty() ? new_id("sess") : want;
            sessions_[id] = SessionEntry{owner, now};
            return json_reply(200, json{{"id", id}, {"object", "session"}});
        }
        if (in.method != "GET") return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET or POST"));
        json list = json::array();
        std::lock_guard<std::mutex> lock(sessions_mu_);
        expire_sessions_locked(now);
        for (const auto& [id, e] : sessions_)
            if (e.owner == owner) list.push_back(json{{"id", id}, {"object", "session"}});
        return json_reply(200, json{{"object", "list"}, {"data", list}});
    }
    std::string why;
    if (rest.find('/') != std::string::npos || !valid_id(rest, &why)) return error_reply(invalid_field("session_id", why.empty() ? "bad id" : why));
    if (!owns_session(rest, owner))
        return error_reply(make_error(404, "invalid_request_error", "session_not_found", "no session '" + rest + "'"));
    if (in.method == "GET" || in.method == "DELETE") {
        const bool del = in.method == "DELETE";
        return on_engine([this, del, rest, owner](CapsuleStore& s, ClaimLog&) {
            json caps = json::array();
            bool busy = false;
            std::vector<std::string> ids;
            for (const auto* r : s.list(owner))
                if (r->session_id == rest) ids.push_back(r->id);
            for (const auto& id : ids) {
                if (del && s.remove(id, owner) != FROST_OK) busy = true;
                caps.push_back(id);
            }
            if (del) {
                if (busy) return error_reply(make_error(409, "invalid_request_error", "conflict", "a capsule of this session is in use"));
                std::lock_guard<std::mutex> lock(sessions_mu_);
                sessions_.erase(rest);
                return json_reply(200, json{{"id", rest}, {"deleted", true}, {"capsules_released", caps}});
            }
            return json_reply(200, json{{"id", rest}, {"object", "session"}, {"capsules", caps}});
        });
    }
    return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET or DELETE"));
}

HttpOut Api::claims(const std::string& query, const std::string& owner) {
    // Events of the caller's own claims only, those of capsules already gone included (their
    // last event says why: evicted / expired / refused with its reason). ?claim_id=ID narrows.
    std::string only;
    for (size_t at = 0; at < query.size();) {
        const size_t amp = std::min(query.find('&', at), query.size());
        if (query.compare(at, 9, "claim_id=") == 0) only = query.substr(at + 9, amp - at - 9);
        at = amp + 1;
    }
    return on_engine([only, owner](CapsuleStore&, ClaimLog& log) {
        json events = json::array();
        for (const auto& e : log.recent(only)) {
            if (e.owner != owner) continue;
            events.push_back(json::parse(claim_event_json(e), nullptr, false));
        }
        return json_reply(200, json{{"object", "list"}, {"data", events}});
    });
}

HttpOut Api::on_engine(std::function<HttpOut(CapsuleStore&, ClaimLog&)> fn) {
    HttpOut out;
    out.on_engine = std::move(fn);
    return out;
}

HttpOut Api::finish(HttpOut out) {
    // Tests and tools that call handle() directly get the reply made inline (this thread waits
    // for the engine); the HTTP server runs on_engine itself without waiting (http_server.cpp).
    if (!out.on_engine) return out;
    HttpOut done;
    sched_.control([&](CapsuleStore& s, ClaimLog& l) { done = out.on_engine(s, l); });
    return done;
}

}  // namespace frost::serve
