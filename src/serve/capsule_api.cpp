// The capsule verbs that need the engine, over HTTP: create (POST /v1/capsules: freeze a chat
// messages prefix or a completion prompt as a capsule, with pin / priority / TTL), and fork /
// rollback (POST /v1/capsules/{id}/fork|rollback: a generation forced to start from that capsule:
// `n` choices fork it, and a conversation that went further returns to its earlier boundary).
// Bodies are validated by the same parser as the generation endpoints, so errors name fields.
#include <cmath>

#include "exec/error.h"
#include "serve/api.h"
#include "serve/ids.h"
#include "serve/json_guard.h"

namespace frost::serve {

using nlohmann::json;

namespace {

HttpOut reply(int status, const json& j) {
    HttpOut out;
    out.status = status;
    out.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    return out;
}

// Takes the store fields out of a create body (the rest must be a generation body).
bool take_store_fields(json* body, std::optional<bool>* pinned, int* priority, double* ttl_s, ApiError* err) {
    if (body->contains("pinned")) {
        const json& v = (*body)["pinned"];
        if (!v.is_boolean()) return *err = invalid_field("pinned", "expected a boolean"), false;
        *pinned = v.get<bool>();
        body->erase("pinned");
    }
    if (body->contains("priority")) {
        const json& v = (*body)["priority"];
        if (!v.is_number_integer() || v.get<int64_t>() < -kMaxCapsulePriority || v.get<int64_t>() > kMaxCapsulePriority)
            return *err = invalid_field("priority", "expected an integer in [-1000, 1000]"), false;
        *priority = int(v.get<int64_t>());
        body->erase("priority");
    }
    if (body->contains("ttl_s")) {
        const json& v = (*body)["ttl_s"];
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > kMaxTtlSeconds)
            return *err = invalid_field("ttl_s", "expected seconds in [0, 30 days] (0 = none)"), false;
        *ttl_s = v.get<double>();
        body->erase("ttl_s");
    }
    for (const char* gen_only : {"stream", "stream_options", "n", "max_tokens", "max_completion_tokens", "stop"})
        if (body->contains(gen_only))
            return *err = invalid_field(gen_only, "a capsule is created without generating; remove this field"), false;
    return true;
}

}  // namespace

HttpOut Api::create_capsule(const HttpIn& in, const std::string& owner) {
    metrics_.requests_total++;
    json body;
    ApiError err;
    if (!parse_json_body(in.body, cfg_.limits.max_depth, &body, &err)) return error_reply(err);
    if (!body.is_object()) return error_reply(invalid_field("", "the body must be a JSON object"));
    std::optional<bool> pinned;
    int priority = 0;
    double ttl_s = 0;
    if (!take_store_fields(&body, &pinned, &priority, &ttl_s, &err)) return error_reply(err);
    const bool chat = body.contains("messages");
    if (chat == body.contains("prompt"))
        return error_reply(invalid_field(chat ? "prompt" : "messages",
                                         "give exactly one of messages (a chat prefix) or prompt (text or token ids)"));
    if (pinned) body["pin_prefix"] = *pinned;
    auto job = std::make_shared<Job>();
    if (!parse_gen_request(chat ? Endpoint::Chat : Endpoint::Completion, body.dump(), cfg_.limits, &job->req, &err))
        return error_reply(err);
    if (!job->req.model.empty() && job->req.model != cfg_.model_name)
        return error_reply(make_error(404, "invalid_request_error", "model_not_found",
                                      "model: '" + job->req.model + "' is not served here"));
    if (!job->req.session_id.empty() && !owns_session(job->req.session_id, owner))
        return error_reply(make_error(404, "invalid_request_error", "session_not_found",
                                      "session_id: no session '" + job->req.session_id + "'"));
    if (chat) {
        // The prefix the next chat turn shares: the history without a generation prompt.
        ChatRender r;
        r.messages = job->req.messages;
        r.tools = job->req.tools;
        r.enable_thinking = job->req.enable_thinking;
        r.add_generation_prompt = false;
        std::string text;
        bool has_user = false;
        for (const auto& m : r.messages) has_user = has_user || m.value("role", "") == "user";
        if (!has_user) {
            // A system-only prefix (an agent's frozen system prompt): the Qwen3.5 templates refuse
            // a conversation without a user query, so render it with a placeholder user turn and
            // keep what precedes that turn: exactly how every later request renders its start.
            static const std::string kMark = "\x01frost-prefix-end\x01";
            r.messages.push_back({{"role", "user"}, {"content", kMark}});
            if (text_.render_chat(r, &text) != FROST_OK)
                return error_reply(invalid_field("messages", "cannot render the chat template: " + last_error()));
            const size_t mark = text.rfind(kMark);
            const size_t turn = mark == std::string::npos ? std::string::npos : text.rfind("<|im_start|>", mark);
            if (turn == std::string::npos)
                return error_reply(invalid_field("messages", "cannot find where the prefix ends in the rendered chat"));
            text.resize(turn);
        } else if (text_.render_chat(r, &text) != FROST_OK)
            return error_reply(invalid_field("messages", "cannot render the chat template: " + last_error()));
        if (!encode_prompt(text, "messages", &job->prompt, &err)) return error_reply(err);
    } else if (job->req.prompt_is_ids) {
        job->prompt = job->req.prompt_ids;
    } else if (!encode_prompt(job->req.prompt_text, "prompt", &job->prompt, &err)) {
        return error_reply(err);
    }
    GenRequest sizing = job->req;
    sizing.max_tokens = 1;  // the prompt must still leave room for a turn after it
    if (!check_context(sizing, job->prompt.size(), engine_.max_seq_len(), cfg_.limits, &job->max_new, &err))
        return error_reply(err);
    if (!sched_.capsules_supported())
        return error_reply(make_error(409, "invalid_request_error", "capsule_refused", "capsules are not enabled on this server"));
    job->capsule_only = true;
    job->capsule_priority = priority;
    job->capsule_ttl_s = ttl_s;
    job->capsule_pin = pinned;
    job->req.temperature = 0;
    job->id = new_id("capreq");
    job->owner = owner;
    job->channel = std::make_shared<Channel>(cfg_.channel_cap);
    // The reply is made when the job's final event arrives; the I/O thread never waits for the
    // engine (two creates behind busy slots must not stall every other connection). Built before
    // the job is queued, so nothing after submit() can throw (T33: a queued job nobody awaits).
    HttpOut out;
    out.on_final = [this](const StreamEvent& ev) {
        if (ev.kind == StreamEvent::Kind::Error) return error_reply(ev.error);
        if (ev.capsule.is_null())
            return error_reply(make_error(409, "invalid_request_error", "capsule_refused", "the capsule was evicted at once"));
        json cap = ev.capsule;
        cap["frost"] = json{{"plan", ev.usage.plan_action}, {"cached_tokens", ev.usage.cached_tokens}};
        return reply(200, cap);
    };
    const Admit a = sched_.submit(job);
    if (a != Admit::Ok) return rejection(a);
    out.job = job;
    return out;
}

HttpOut Api::generate_from_capsule(const HttpIn& in, const std::string& id, const std::string& owner) {
    json body;
    ApiError err;
    if (!parse_json_body(in.body, cfg_.limits.max_depth, &body, &err)) return error_reply(err);
    if (!body.is_object()) return error_reply(invalid_field("", "the body must be a JSON object"));
    if (body.contains("capsule_id") && body["capsule_id"] != json(id))
        return error_reply(invalid_field("capsule_id", "must be absent or equal the capsule in the path"));
    body["capsule_id"] = id;
    HttpIn forced = in;
    forced.body = body.dump();
    return generate(body.contains("messages") ? Endpoint::Chat : Endpoint::Completion, forced, owner);
}

}  // namespace frost::serve
