// The Anthropic Messages API (POST /v1/messages) on the OpenAI chat path: the body is translated
// into a chat-completions body (anthropic_to_chat, a pure function) that the one chat handler
// validates, renders and schedules; MessagesBuilder turns the job's events back into Anthropic's
// message object or its SSE events (message_start, content_block_*, message_delta, message_stop).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/turn_builder.h"

namespace frost::serve {

// Anthropic's error body {"type":"error","error":{"type","message"}}; the type follows the
// status (400 invalid_request_error, 401 authentication_error, 404 not_found_error, 429
// rate_limit_error, 503 overloaded_error, ...).
std::string anthropic_error_body(int status, const std::string& message);

// An Anthropic request body -> an OpenAI chat-completions body. False + *err naming the
// Anthropic field (e.g. "messages[1].content[0].type", "max_tokens") on a bad or unknown one.
bool anthropic_to_chat(const nlohmann::json& body, nlohmann::json* chat, ApiError* err);

class MessagesBuilder : public TurnBuilder {
public:
    MessagesBuilder(std::string id, std::string model, size_t prompt_tokens);
    std::string sse_open() override;
    std::string sse(const StreamEvent& e) override;
    std::string final_json() const override;
    std::string error_json(const ApiError& e) const override { return anthropic_error_body(e.status, e.message); }

private:
    enum class Open { None, Thinking, Text };
    std::string open_block(Open kind);  // closes the open block first when it differs
    std::string close_block();
    nlohmann::json usage_json() const;
    nlohmann::json stop_sequence_json() const;  // the stop string, or null
    std::string stop_reason() const;
    void take_calls(const nlohmann::json& calls) override;

    std::string id_, model_;
    Open open_ = Open::None;
    int next_index_ = 0;
    nlohmann::json tool_uses_ = nlohmann::json::array();  // Anthropic tool_use blocks
};

}  // namespace frost::serve
