// MessagesBuilder: a generation's events as Anthropic's message object or its SSE events (see
// messages_api.h).
#include <algorithm>

#include "serve/ids.h"
#include "serve/messages_api.h"
#include "serve/sse_text.h"

namespace frost::serve {

using nlohmann::json;

MessagesBuilder::MessagesBuilder(std::string id, std::string model, size_t prompt_tokens)
    : TurnBuilder(prompt_tokens), id_(std::move(id)), model_(std::move(model)) {}

std::string MessagesBuilder::stop_reason() const {
    // The end token is end_turn; a stop string is stop_sequence (stop_sequence_ names it).
    if (finish_reason_ == "length") return "max_tokens";
    if (finish_reason_ == "tool_calls") return "tool_use";
    return stop_sequence_.empty() ? "end_turn" : "stop_sequence";
}

json MessagesBuilder::stop_sequence_json() const {
    return stop_sequence_.empty() ? json(nullptr) : json(stop_sequence_);
}

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
                                  {"id", c.contains("id") ? c["id"].get<std::string>() : new_id("toolu", '_')},
                                  {"name", fn.value("name", "")},
                                  {"input", input}});
    }
}

std::string MessagesBuilder::close_block() {
    if (open_ == Open::None) return "";
    open_ = Open::None;
    return sse_event("content_block_stop", json{{"type", "content_block_stop"}, {"index", next_index_++}});
}

std::string MessagesBuilder::open_block(Open kind) {
    if (open_ == kind) return "";
    std::string out = close_block();
    open_ = kind;
    const json block = kind == Open::Thinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                              : json{{"type", "text"}, {"text", ""}};
    return out + sse_event("content_block_start",
                           json{{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}});
}

std::string MessagesBuilder::sse_open() {
    json msg = {{"id", id_},           {"type", "message"},      {"role", "assistant"},   {"model", model_},
                {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", usage_json()}};
    return sse_event("message_start", json{{"type", "message_start"}, {"message", msg}});
}

std::string MessagesBuilder::sse(const StreamEvent& e) {
    const size_t calls_before = tool_uses_.size();
    if (!record(e)) return "";  // n is always 1 here
    std::string out;
    if (e.kind == StreamEvent::Kind::Error) {
        return sse_event("error", json::parse(anthropic_error_body(e.error.status, e.error.message)));
    }
    if (e.kind == StreamEvent::Kind::Delta) {
        if (!e.reasoning.empty()) {
            out += open_block(Open::Thinking);
            out += sse_event("content_block_delta", json{{"type", "content_block_delta"},
                                                         {"index", next_index_},
                                                         {"delta", {{"type", "thinking_delta"}, {"thinking", e.reasoning}}}});
        }
        if (!e.text.empty()) {
            out += open_block(Open::Text);
            out += sse_event("content_block_delta", json{{"type", "content_block_delta"},
                                                         {"index", next_index_},
                                                         {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
        }
        return out;
    }
    if (e.kind == StreamEvent::Kind::ToolCalls) {
        out += close_block();
        for (size_t k = calls_before; k < tool_uses_.size(); ++k) {
            json start = tool_uses_[k];
            start["input"] = json::object();  // the input follows as input_json_delta
            out += sse_event("content_block_start",
                             json{{"type", "content_block_start"}, {"index", next_index_}, {"content_block", start}});
            out += sse_event("content_block_delta",
                             json{{"type", "content_block_delta"},
                                  {"index", next_index_},
                                  {"delta", {{"type", "input_json_delta"}, {"partial_json", json_text(tool_uses_[k]["input"])}}}});
            out += sse_event("content_block_stop", json{{"type", "content_block_stop"}, {"index", next_index_++}});
        }
        return out;
    }
    // Finish
    // No text and no tool call (a stop string or the token budget hit before any text): one
    // empty text block, as the message object has.
    if (text_.empty() && tool_uses_.empty()) out += open_block(Open::Text);
    out += close_block();
    out += sse_event("message_delta", json{{"type", "message_delta"},
                                           {"delta", {{"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence_json()}}},
                                           {"usage", usage_json()}});
    out += sse_event("message_stop", json{{"type", "message_stop"}});
    return out;
}

std::string MessagesBuilder::final_json() const {
    json content = json::array();
    if (!reasoning_.empty()) content.push_back(json{{"type", "thinking"}, {"thinking", reasoning_}, {"signature", ""}});
    // Always a text block unless tool calls came instead (the stream sends an empty one then too).
    if (!text_.empty() || tool_uses_.empty()) content.push_back(json{{"type", "text"}, {"text", text_}});
    for (const auto& t : tool_uses_) content.push_back(t);
    return json_text(json{{"id", id_},
                            {"type", "message"},
                            {"role", "assistant"},
                            {"model", model_},
                            {"content", content},
                            {"stop_reason", stop_reason()},
                            {"stop_sequence", stop_sequence_json()},
                            {"usage", usage_json()}});
}

}  // namespace frost::serve
