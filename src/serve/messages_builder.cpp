// MessagesBuilder: a generation's events as Anthropic's message object or its SSE events (see
// messages_api.h).
#include <algorithm>

#include "serve/ids.h"
#include "serve/messages_api.h"

namespace frost::serve {

using nlohmann::json;

namespace {
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string event(const char* name, const json& data) { return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n"; }
}  // namespace

std::string anthropic_id(const char* prefix) {  // "msg-<hex>" -> "msg_<hex>": Anthropic's spelling
    std::string id = new_id(prefix);
    const size_t dash = id.find('-');
    if (dash != std::string::npos) id[dash] = '_';
    return id;
}

MessagesBuilder::MessagesBuilder(std::string id, std::string model, size_t prompt_tokens)
    : id_(std::move(id)), model_(std::move(model)), prompt_tokens_(prompt_tokens) {}

json MessagesBuilder::usage_json() const {
    // Anthropic counts input_tokens without the cached part (cache_read_input_tokens).
    return json{{"input_tokens", prompt_tokens_ - std::min(prompt_tokens_, cached_tokens_)},
                {"output_tokens", output_tokens_},
                {"cache_read_input_tokens", cached_tokens_},
                {"cache_creation_input_tokens", 0}};
}

void MessagesBuilder::take_calls(const json& calls) {
    for (const auto& c : calls) {
        const json fn = c.value("function", json::object());
        json input = json::parse(fn.value("arguments", "{}"), nullptr, false);
        if (input.is_discarded() || !input.is_object()) input = json::object();
        tool_uses_.push_back(json{{"type", "tool_use"},
                                  {"id", c.contains("id") ? c["id"].get<std::string>() : anthropic_id("toolu")},
                                  {"name", fn.value("name", "")},
                                  {"input", input}});
    }
}

std::string MessagesBuilder::close_block() {
    if (open_ == Open::None) return "";
    open_ = Open::None;
    return event("content_block_stop", json{{"type", "content_block_stop"}, {"index", next_index_++}});
}

std::string MessagesBuilder::open_block(Open kind) {
    if (open_ == kind) return "";
    std::string out = close_block();
    open_ = kind;
    const json block = kind == Open::Thinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                              : json{{"type", "text"}, {"text", ""}};
    return out + event("content_block_start",
                       json{{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}});
}

std::string MessagesBuilder::sse_open() {
    json msg = {{"id", id_},           {"type", "message"},      {"role", "assistant"},   {"model", model_},
                {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", usage_json()}};
    return event("message_start", json{{"type", "message_start"}, {"message", msg}});
}

std::string MessagesBuilder::sse(const StreamEvent& e) {
    if (e.index != 0) return "";  // n is always 1 here
    std::string out;
    if (e.kind == StreamEvent::Kind::Error) {
        failed_ = true;
        error_ = e.error;
        return event("error", json::parse(anthropic_error_body(e.error.status, e.error.message)));
    }
    if (e.kind == StreamEvent::Kind::Delta) {
        if (!e.reasoning.empty()) {
            out += open_block(Open::Thinking);
            out += event("content_block_delta", json{{"type", "content_block_delta"},
                                                     {"index", next_index_},
                                                     {"delta", {{"type", "thinking_delta"}, {"thinking", e.reasoning}}}});
        }
        if (!e.text.empty()) {
            out += open_block(Open::Text);
            out += event("content_block_delta", json{{"type", "content_block_delta"},
                                                     {"index", next_index_},
                                                     {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
        }
        return out;
    }
    if (e.kind == StreamEvent::Kind::ToolCalls) {
        out += close_block();
        const size_t from = tool_uses_.size();
        take_calls(e.tool_calls);
        for (size_t k = from; k < tool_uses_.size(); ++k) {
            json start = tool_uses_[k];
            start["input"] = json::object();  // the input follows as input_json_delta
            out += event("content_block_start",
                         json{{"type", "content_block_start"}, {"index", next_index_}, {"content_block", start}});
            out += event("content_block_delta",
                         json{{"type", "content_block_delta"},
                              {"index", next_index_},
                              {"delta", {{"type", "input_json_delta"}, {"partial_json", dump(tool_uses_[k]["input"])}}}});
            out += event("content_block_stop", json{{"type", "content_block_stop"}, {"index", next_index_++}});
        }
        return out;
    }
    // Finish
    add(e);
    out += close_block();
    out += event("message_delta", json{{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", nullptr}}},
                                       {"usage", usage_json()}});
    out += event("message_stop", json{{"type", "message_stop"}});
    return out;
}

void MessagesBuilder::add(const StreamEvent& e) {
    if (e.index != 0) return;
    switch (e.kind) {
        case StreamEvent::Kind::Delta:
            thinking_ += e.reasoning;
            text_ += e.text;
            break;
        case StreamEvent::Kind::ToolCalls:
            if (tool_uses_.empty()) take_calls(e.tool_calls);
            break;
        case StreamEvent::Kind::Error:
            failed_ = true;
            error_ = e.error;
            break;
        case StreamEvent::Kind::Finish:
            finished_ = true;
            output_tokens_ = e.usage.completion_tokens;
            cached_tokens_ = e.usage.cached_tokens;
            if (e.usage.prompt_tokens) prompt_tokens_ = e.usage.prompt_tokens;
            stop_reason_ = e.finish_reason == "length"       ? "max_tokens"
                           : e.finish_reason == "tool_calls" ? "tool_use"
                                                             : "end_turn";
            break;
    }
}

std::string MessagesBuilder::final_json() const {
    json content = json::array();
    if (!thinking_.empty()) content.push_back(json{{"type", "thinking"}, {"thinking", thinking_}, {"signature", ""}});
    if (!text_.empty() || tool_uses_.empty()) content.push_back(json{{"type", "text"}, {"text", text_}});
    for (const auto& t : tool_uses_) content.push_back(t);
    return dump(json{{"id", id_},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", model_},
                     {"content", content},
                     {"stop_reason", stop_reason_},
                     {"stop_sequence", nullptr},
                     {"usage", usage_json()}});
}

}  // namespace frost::serve
