// Qwen ChatML chat templates implemented in C++ (no jinja engine): renders an OpenAI-format
// conversation byte-identically to transformers' apply_chat_template with the checkpoint's own
// template — Qwen3 (JSON tool calls) and Qwen3.5 / Qwen3.6 (XML <function=...> tool calls,
// <think> generation prompts). Verified against jinja renders in tests/text/py/.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "frost/exec.h"

namespace frost::text {

enum class ChatTemplateKind : uint8_t {
    kQwen3,   // Qwen3 / Qwen3-Next tokenizer_config.json chat_template
    kQwen35,  // Qwen3.5 chat_template.jinja
    kQwen36,  // Qwen3.6: Qwen3.5 plus preserve_thinking; non-string tool arguments as JSON
};

struct ChatOptions {
    bool add_generation_prompt = false;
    // Unset = the template variable is undefined (the templates then think by default).
    std::optional<bool> enable_thinking;
    bool preserve_thinking = false;  // Qwen3.6 only: keep reasoning of every assistant turn
};

// Deepest JSON nesting the renderer accepts anywhere: in messages and tools, and inside a
// tool call's arguments string (which a request body's depth guard cannot see into). Deeper
// input is refused with FROST_ERR_INVALID_ARG before any recursive walk.
constexpr size_t kMaxChatJsonDepth = 64;

// Recognises the kind from a chat template's text (tokenizer_config.json "chat_template" or
// chat_template.jinja); false when it is none of the known Qwen templates.
bool chat_template_kind_from_text(std::string_view template_text, ChatTemplateKind* out);

// The kind for a model or tokenizer folder: its chat_template.jinja, else the "chat_template" of
// tokenizer_config.json. FROST_ERR_NOT_FOUND when neither exists, FROST_ERR_UNSUPPORTED when the
// template is not a known Qwen one (callers may then fall back, e.g. on the tokenizer's split
// regex: Qwen3.5 regex -> kQwen35).
frost_status chat_template_kind_from_dir(const std::string& dir, ChatTemplateKind* out);

// Renders `messages` (array of OpenAI messages: role, content, reasoning_content, tool_calls,
// ...) with `tools` (null or an array of tool schemas) into *out. Key order of tools and tool
// arguments is kept as given (ordered_json), as Python's json.dumps keeps dict order.
// Where the jinja template would raise (system message not first, unknown role, no user query
// for Qwen3.5, non-string content for Qwen3) this returns FROST_ERR_INVALID_ARG with the
// template's message. Deliberate leniencies, where jinja would fail: content null renders as "",
// and tool_call arguments given as a JSON string (the OpenAI wire form) are parsed into an object
// for the XML form (Qwen3 prints the string as is, like the template).
frost_status render_chat(ChatTemplateKind kind, const nlohmann::ordered_json& messages,
                         const nlohmann::ordered_json& tools, const ChatOptions& options,
                         std::string* out);

// Same for plain nlohmann::json input (its objects are key-sorted, so tool schemas and arguments
// render in sorted key order rather than the client's order).
frost_status render_chat(ChatTemplateKind kind, const nlohmann::json& messages, const nlohmann::json& tools,
                         const ChatOptions& options, std::string* out);

// Python's json.dumps(x, ensure_ascii=False) — the `tojson` filter transformers installs.
// Throws std::invalid_argument for x nested deeper than kMaxChatJsonDepth (bounded recursion).
std::string python_json_dumps(const nlohmann::ordered_json& x);
// Python's str(x) for a JSON scalar (True, None, 1.5) — jinja's `| string`.
std::string python_str(const nlohmann::ordered_json& x);

}  // namespace frost::text
