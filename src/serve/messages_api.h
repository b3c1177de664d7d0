// The Anthropic Messages API (POST /v1/messages) on the OpenAI chat path: the body is translated
// into a chat-completions body (anthropic_to_chat, a pure function) that the one chat handler
// validates, renders and schedules; MessagesBuilder turns the job's events back into Anthropic's
// message object or its SSE events (message_start, content_block_*, message_delta, message_stop).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/body_builder.h"

namespace frost::serve {

// Anthropic's error body {"type":"error","error":{"type","message"}}; the type follows the
// status (400 invalid_request_error, 401 authentication_error, 404 not_found_error, 429
// rate_limit_error, 503 overloaded_error, ...).
std::string anthropic_error_body(int status, const std::string& message);

// An Anthropic request body -> an OpenAI chat-completions body. False + *err naming the
// Anthropic field (e.g. "messages[1].content[0].type", "max_tokens") on a bad or unknown one.
bool anthropic_to_chat(const nlohmann::json& body, nlohmann::json* chat, ApiError* err);

// A fresh id in Anthropic's spelling: "<prefix>_<24 hex>" (msg_, toolu_).
std::string anthropic_id(const char* prefix);

class MessagesBuilder : public BodyBuilder {
public:
    MessagesBuilder(std::string id, std::string model, size_t prompt_tokens);
    std::string sse_open() override;
    std::string sse(const StreamEvent& e) override;
    void add(const StreamEvent& e) override;
    std::string final_json() const override;
    bool done() const override { return finished_ || failed_; }
    bool failed() const override { return failed_; }
    const ApiError& error() const override { return error_; }
    std::string error_json(const ApiError& e) const override { return anthropic_error_body(e.status, e.message); }

private:
    enum class Open { None, Thinking, Text };
    std::string open_block(Open kind);  // closes the open block first when it differs
    std::string close_block();
    nlohmann::json usage_json() const;
    void take_calls(const nlohmann::json& calls);

    std::string id_, model_;
    size_t prompt_tokens_;
    Open open_ = Open::None;
    int next_index_ = 0;
    std::string thinking_, text_;
    nlohmann::json tool_uses_ = nlohmann::json::array();  // Anthropic tool_use blocks
    std::string stop_reason_;
    size_t output_tokens_ = 0, cached_tokens_ = 0;
    bool finished_ = false, failed_ = false;
    ApiError error_;
};

}  // namespace frost::serve
