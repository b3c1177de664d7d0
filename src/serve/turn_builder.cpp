// TurnBuilder (see turn_builder.h).
#include "serve/turn_builder.h"

namespace frost::serve {

void TurnBuilder::add(const StreamEvent& e) { record(e); }

bool TurnBuilder::record(const StreamEvent& e) {
    if (e.index != 0) return false;
    switch (e.kind) {
        case StreamEvent::Kind::Delta:
            reasoning_ += e.reasoning;
            text_ += e.text;
            break;
        case StreamEvent::Kind::ToolCalls:
            take_calls(e.tool_calls);
            break;
        case StreamEvent::Kind::Error:
            failed_ = true;
            error_ = e.error;
            break;
        case StreamEvent::Kind::Finish:
            finished_ = true;
            finish_reason_ = e.finish_reason;
            stop_sequence_ = e.finish_reason == "stop" ? e.stop_sequence : "";
            output_tokens_ = e.usage.completion_tokens;
            cached_tokens_ = e.usage.cached_tokens;
            if (e.usage.prompt_tokens) prompt_tokens_ = e.usage.prompt_tokens;
            break;
    }
    return true;
}

}  // namespace frost::serve
