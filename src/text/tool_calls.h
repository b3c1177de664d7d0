// Tool calls in generated text, both Qwen forms: Qwen3's JSON inside <tool_call>...</tool_call>
// and Qwen3.5's XML <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>
// (the vLLM `qwen3_coder` format), turned into OpenAI tool_call JSON; plus a streaming filter that
// never lets partial tool-call markup out as content.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "frost/exec.h"

namespace frost::text {

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";

struct ParsedAssistant {
    std::string content;                // text outside tool-call blocks, trailing whitespace trimmed
    nlohmann::ordered_json tool_calls;  // OpenAI array: {id, type:"function", function:{name, arguments}}
};

// Splits `text` into content and tool calls. Each <tool_call> block (the closing tag may be
// missing at the end of the text: the model stopped after it) is parsed as XML when it starts
// with <function=, else as JSON {"name", "arguments"}. A block that parses as neither stays in
// the content verbatim. `tools` (null or the request's OpenAI tools array) gives XML parameter
// values their types (integer/number/boolean/object/array parsed from the text; string and
// unknown kept as text). `arguments` is the compact JSON string OpenAI clients expect; ids are
// "call_<id_base + n>".
ParsedAssistant parse_tool_calls(std::string_view text, const nlohmann::ordered_json& tools = nullptr,
                                 int id_base = 0);

// Splits a Qwen "thinking" completion at its last </think>: reasoning is the text before it
// (without a leading <think>, newlines trimmed), content the text after (leading newlines
// trimmed). Without </think> all of it is content.
void split_reasoning(std::string_view text, std::string* reasoning, std::string* content);

// Streaming filter: feed decoded text deltas, get back only the part that is surely content.
// Text that might be the start of "<tool_call>" is held until it is decided; everything from
// <tool_call> to </tool_call> is withheld and parsed at finish().
class ToolCallStream {
public:
    explicit ToolCallStream(nlohmann::ordered_json tools = nullptr) : tools_(std::move(tools)) {}
    // Returns the content safe to emit now (possibly empty).
    std::string push(std::string_view delta);
    // Ends the stream: returns the remaining content and the parsed tool calls.
    ParsedAssistant finish();
    bool in_tool_call() const { return in_call_; }

private:
    nlohmann::ordered_json tools_;
    std::string all_;       // everything pushed (parsed again at finish)
    std::string pending_;   // held back: a possible prefix of <tool_call>
    std::string emitted_;   // content already returned
    bool in_call_ = false;  // inside an unclosed <tool_call>
};

}  // namespace frost::text
