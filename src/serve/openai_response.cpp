// ResponseBuilder implementation (see openai_response.h).
#include "serve/openai_response.h"

#include <algorithm>

#include "serve/ids.h"
#include "serve/sse_text.h"

namespace frost::serve {

using nlohmann::json;

namespace {

// OpenAI tool_call objects with an index, as streamed deltas carry them.
json indexed_calls(const json& calls) {
    json out = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        json c = calls[i];
        c["index"] = i;
        if (!c.contains("id")) c["id"] = new_id("call");
        if (!c.contains("type")) c["type"] = "function";
        out.push_back(c);
    }
    return out;
}
// Chat logprob entries (scheduler_logprobs.cpp) in the legacy completions shape: parallel arrays,
// top_logprobs as {token: logprob} (null for an echoed first prompt token), text_offset counted
// from *offset, the bytes of the choice's text before each token.
json completion_logprobs(const json& entries, size_t* offset) {
    json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const auto& e : entries) {
        out["tokens"].push_back(e["token"]);
        out["token_logprobs"].push_back(e["logprob"]);
        if (e["top_logprobs"].is_null()) {
            out["top_logprobs"].push_back(nullptr);
        } else {
            json m = json::object();
            for (const auto& t : e["top_logprobs"]) m[t["token"].get<std::string>()] = t["logprob"];
            out["top_logprobs"].push_back(m);
        }
        out["text_offset"].push_back(*offset);
        *offset += e["token"].get<std::string>().size();
    }
    return out;
}
}  // namespace

json ResponseBuilder::logprobs_json(const json& entries, size_t* offset) const {
    if (!entries.is_array() || entries.empty()) return nullptr;
    if (endpoint_ == Endpoint::Chat) return json{{"content", entries}};
    return completion_logprobs(entries, offset);
}

ResponseBuilder::ResponseBuilder(Endpoint endpoint, std::string id, std::string model, int64_t created, int n,
                                 bool include_usage)
    : endpoint_(endpoint), id_(std::move(id)), model_(std::move(model)), created_(created), n_(n),
      include_usage_(include_usage), text_(size_t(n)), reasoning_(size_t(n)), tool_calls_(size_t(n), json::array()),
      finish_(size_t(n)), logprobs_(size_t(n), json::array()), offsets_(size_t(n), 0) {}

json ResponseBuilder::chunk_base() const {
    return json{{"id", id_},
                {"object", endpoint_ == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_}};
}

json ResponseBuilder::usage_json() const {
    const size_t prompt = per_prompt_ > 0 ? batch_prompt_tokens_ : first_usage_.prompt_tokens;
    return json{{"prompt_tokens", prompt},
                {"completion_tokens", completion_tokens_},
                {"total_tokens", prompt + completion_tokens_},
                {"prompt_tokens_details", {{"cached_tokens", first_usage_.cached_tokens}}}};
}

void ResponseBuilder::account(const StreamEvent& e) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (e.index == 0 && first_pickup_ == SteadyTime{}) first_pickup_ = now;
    if (e.kind == StreamEvent::Kind::Finish && e.index == 0 && e.usage.has_timings) {
        // Emit: first token sampled -> first event picked up here; AfterFirst: from then until
        // this Finish was picked up (decode and the store work deferred past the first token).
        timings_ = e.usage.timings;
        if (timings_.first_token != SteadyTime{})
            timings_.ms[size_t(Phase::Emit)] = std::max(0.0, ms_between(timings_.first_token, first_pickup_));
        timings_.ms[size_t(Phase::AfterFirst)] = std::max(0.0, ms_between(first_pickup_, now));
        has_timings_ = true;
        if (metrics_) metrics_->observe_phases(timings_);
    }
    if (e.kind == StreamEvent::Kind::Finish) {
        if (e.index == 0) first_usage_ = e.usage;
        if (per_prompt_ > 0 && e.index % per_prompt_ == 0) batch_prompt_tokens_ += e.usage.prompt_tokens;
        completion_tokens_ += e.usage.completion_tokens;
        finished_++;
    } else if (e.kind == StreamEvent::Kind::Error) {
        failed_ = true;
        error_ = e.error;
    }
}

std::string ResponseBuilder::sse_open() {
    if (endpoint_ != Endpoint::Chat) return "";
    std::string out;
    for (int i = 0; i < n_; ++i) {
        json c = chunk_base();
        c["choices"] = json::array({json{{"index", i},
                                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                                         {"logprobs", nullptr},
                                         {"finish_reason", nullptr}}});
        out += sse_data(c);
    }
    return out;
}

std::string ResponseBuilder::sse(const StreamEvent& e) {
    account(e);
    if (e.kind == StreamEvent::Kind::Error) return sse_error(e.error);
    json c = chunk_base();
    json choice = {{"index", e.index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (e.index >= 0 && e.index < n_) choice["logprobs"] = logprobs_json(e.logprobs, &offsets_[size_t(e.index)]);
    if (e.kind == StreamEvent::Kind::Delta) {
        if (endpoint_ == Endpoint::Chat) {
            choice["delta"] = json::object();
            if (!e.reasoning.empty()) choice["delta"]["reasoning_content"] = e.reasoning;
            if (!e.text.empty() || e.reasoning.empty()) choice["delta"]["content"] = e.text;
        } else {
            choice["text"] = e.reasoning + e.text;  // completions have no reasoning field
        }
    } else if (e.kind == StreamEvent::Kind::ToolCalls) {
        choice["delta"] = {{"tool_calls", indexed_calls(e.tool_calls)}};
    } else {  // Finish
        if (endpoint_ == Endpoint::Chat) choice["delta"] = json::object();
        else choice["text"] = "";
        choice["finish_reason"] = e.finish_reason;
    }
    c["choices"] = json::array({choice});
    // Without a usage chunk the last finish chunk is the final one: it carries the extension.
    if (finished_ == n_ && !include_usage_) c["frost"] = frost_json();
    std::string out = sse_data(c);
    if (finished_ == n_) {
        if (include_usage_) {
            json u = chunk_base();
            u["choices"] = json::array();
            u["usage"] = usage_json();
            u["frost"] = frost_json();
            out += sse_data(u);
        }
        out += "data: [DONE]\n\n";
    }
    return out;
}

void ResponseBuilder::add(const StreamEvent& e) {
    account(e);
    if (e.index < 0 || e.index >= n_) return;
    const size_t i = size_t(e.index);
    if (e.logprobs.is_array())
        for (const auto& x : e.logprobs) logprobs_[i].push_back(x);
    if (e.kind == StreamEvent::Kind::Delta) {
        text_[i] += e.text;
        reasoning_[i] += e.reasoning;
    }
    else if (e.kind == StreamEvent::Kind::ToolCalls) tool_calls_[i] = indexed_calls(e.tool_calls);
    else if (e.kind == StreamEvent::Kind::Finish) finish_[i] = e.finish_reason;
}

std::string ResponseBuilder::final_json() const {
    json body = {{"id", id_},
                 {"object", endpoint_ == Endpoint::Chat ? "chat.completion" : "text_completion"},
                 {"created", created_},
                 {"model", model_}};
    json choices = json::array();
    for (int i = 0; i < n_; ++i) {
        const size_t k = size_t(i);
        size_t offset = 0;
        json ch = {{"index", i}, {"logprobs", logprobs_json(logprobs_[k], &offset)}, {"finish_reason", finish_[k]}};
        if (endpoint_ == Endpoint::Chat) {
            json msg = {{"role", "assistant"}, {"content", text_[k]}};
            if (!reasoning_[k].empty()) msg["reasoning_content"] = reasoning_[k];
            if (!tool_calls_[k].empty()) {
                json calls = tool_calls_[k];
                for (auto& c : calls) c.erase("index");
                msg["tool_calls"] = calls;
                if (text_[k].empty()) msg["content"] = nullptr;
            }
            ch["message"] = msg;
        } else {
            ch["text"] = text_[k];
        }
        choices.push_back(ch);
    }
    body["choices"] = choices;
    body["usage"] = usage_json();
    body["frost"] = frost_json();
    return json_text(body);
}

json ResponseBuilder::frost_json() const {
    json f = {{"plan", first_usage_.plan_action}, {"cached_tokens", first_usage_.cached_tokens}};
    if (!first_usage_.capsule_id.empty()) f["capsule_id"] = first_usage_.capsule_id;
    if (has_seed_) f["seed"] = int64_t(seed_);  // as the request spelled it (int64)
    if (has_timings_) {
        json t = json::object();
        for (size_t i = 0; i < kPhaseCount; ++i) t[phase_name(Phase(i))] = timings_.ms[i];
        f["timings_ms"] = t;
        // Informative, already inside after_first_token: not one of the summed phases.
        f["deferred_store_ms"] = timings_.deferred_store_ms;
        f["prefill_calls"] = timings_.prefill_calls;
    }
    return f;
}

std::string ResponseBuilder::sse_error(const ApiError& e) {
    json err = {{"message", e.message}, {"type", e.type}, {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
    return sse_data(json{{"error", err}});
}

}  // namespace frost::serve
