// What a connection needs from the object that turns a generation's StreamEvents into response
// bytes: OpenAI chat/completions (ResponseBuilder), Anthropic Messages (messages_api.h) and the
// OpenAI Responses API (responses_api.h) all run on the same Job path and differ only here.
#pragma once
#include <string>

#include "serve/api_error.h"
#include "serve/channel.h"

namespace frost::serve {

class BodyBuilder {
public:
    virtual ~BodyBuilder() = default;
    // Streaming: bytes written right after the SSE header, then the bytes for each event.
    virtual std::string sse_open() = 0;
    virtual std::string sse(const StreamEvent& e) = 0;
    // Non-streaming: every event, then final_json() once done().
    virtual void add(const StreamEvent& e) = 0;
    virtual std::string final_json() const = 0;
    virtual bool done() const = 0;
    virtual bool failed() const = 0;
    virtual const ApiError& error() const = 0;
    // The body of a non-streamed request that failed (each API has its own error shape).
    virtual std::string error_json(const ApiError& e) const { return api_error_body(e); }
};

}  // namespace frost::serve
