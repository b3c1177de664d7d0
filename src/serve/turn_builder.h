// The part of a reply builder every non-OpenAI API shares (Anthropic Messages, OpenAI Responses):
// one assistant turn folded from choice 0's events - its reasoning and content text, its tool
// calls (handed to the API's own shape through take_calls), how it finished (reason, the stop
// string that fired, token counts) or the error that ended it. Each API then writes only its
// own bytes from these fields (MessagesBuilder, ResponsesBuilder).
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/body_builder.h"

namespace frost::serve {

class TurnBuilder : public BodyBuilder {
public:
    // Non-streaming: folds the event in (choice 0 only: these APIs have no n).
    void add(const StreamEvent& e) override;
    bool done() const override { return finished_ || failed_; }
    bool failed() const override { return failed_; }
    const ApiError& error() const override { return error_; }

protected:
    explicit TurnBuilder(size_t prompt_tokens) : prompt_tokens_(prompt_tokens) {}
    // Folds e into the fields below; false for another choice's event (ignored).
    bool record(const StreamEvent& e);
    // The OpenAI tool_call objects of a ToolCalls event, appended in the API's own shape.
    virtual void take_calls(const nlohmann::json& calls) = 0;

    std::string reasoning_, text_;
    std::string finish_reason_;  // stop | length | tool_calls ("" until the Finish)
    std::string stop_sequence_;  // the stop string that ended the turn, "" if none
    size_t prompt_tokens_, output_tokens_ = 0, cached_tokens_ = 0;
    bool finished_ = false, failed_ = false;
    ApiError error_;
};

}  // namespace frost::serve
