// ResponseBuilder implementation (see openai_response.h).
#include "serve/openai_response.h"

#include "serve/ids.h"

namespace frost::serve {

using nlohmann::json;

namespace {
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string data_line(const json& j) { return "data: " + dump(j) + "\n\n"; }

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
}  // namespace

ResponseBuilder::ResponseBuilder(Endpoint endpoint, std::string id, std::string model, int64_t created, int n,
                                 bool include_usage)
    : endpoint_(endpoint), id_(std::move(id)), model_(std::move(model)), created_(created), n_(n),
      include_usage_(include_usage), text_(size_t(n)), reasoning_(size_t(n)), tool_calls_(size_t(n), json::array()),
      finish_(size_t(n)) {}

json ResponseBuilder::chunk_base() const {
    return json{{"id", id_},
                {"object", endpoint_ == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_}};
}

json ResponseBuilder::usage_json() const {
    const size_t prompt = first_usage_.prompt_tokens;
    return json{{"prompt_tokens", prompt},
                {"completion_tokens", completion_tokens_},
                {"total_tokens", prompt + completion_tokens_},
                {"prompt_tokens_details", {{"cached_tokens", first_usage_.cached_tokens}}}};
}

void ResponseBuilder::account(const StreamEvent& e) {
    if (e.kind == StreamEvent::Kind::Finish) {
        if (e.index == 0) first_usage_ = e.usage;
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
        out += data_line(c);
    }
    return out;
}

std::string ResponseBuilder::sse(const StreamEvent& e) {
    account(e);
    if (e.kind == StreamEvent::Kind::Error) return sse_error(e.error);
    json c = chunk_base();
    json choice = {{"index", e.index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
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
    std::string out = data_line(c);
    if (finished_ == n_) {
        if (include_usage_) {
            json u = chunk_base();
            u["choices"] = json::array();
            u["usage"] = usage_json();
            u["frost"] = {{"plan", first_usage_.plan_action}, {"cached_tokens", first_usage_.cached_tokens}};
            if (!first_usage_.capsule_id.empty()) u["frost"]["capsule_id"] = first_usage_.capsule_id;
            out += data_line(u);
        }
        out += "data: [DONE]\n\n";
    }
    return out;
}

void ResponseBuilder::add(const StreamEvent& e) {
    account(e);
    if (e.index < 0 || e.index >= n_) return;
    const size_t i = size_t(e.index);
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
        json ch = {{"index", i}, {"logprobs", nullptr}, {"finish_reason", finish_[k]}};
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
    body["frost"] = {{"plan", first_usage_.plan_action}, {"cached_tokens", first_usage_.cached_tokens}};
    if (!first_usage_.capsule_id.empty()) body["frost"]["capsule_id"] = first_usage_.capsule_id;
    return dump(body);
}

std::string ResponseBuilder::sse_error(const ApiError& e) {
    json err = {{"message", e.message}, {"type", e.type}, {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
    return "data: " + dump(json{{"error", err}}) + "\n\n";
}

}  // namespace frost::serve
