// libFuzzer target for the chat template renderer (issue 13 C; issue 13 B1 was a stack overflow
// here): the input is a JSON document {"messages": ..., "tools": ...} (any bytes; most are
// refused by the parser), rendered with every template kind and option mix the first byte picks.
// Rendering must return a status, never recurse without bound, and an accepted render must be
// deterministic (the same input renders the same text twice).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    using namespace frost::text;
    using ojson = nlohmann::ordered_json;
    const uint8_t mode = data[0];
    // The parser itself is iterative; a body's depth is bounded upstream, here anything goes.
    const ojson doc = ojson::parse(data + 1, data + size, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return 0;
    const ojson messages = doc.contains("messages") ? doc["messages"] : ojson::array();
    const ojson tools = doc.contains("tools") ? doc["tools"] : ojson();
    ChatOptions opt;
    opt.add_generation_prompt = mode & 1;
    if (mode & 2) opt.enable_thinking = bool(mode & 4);
    opt.preserve_thinking = mode & 8;
    const ChatTemplateKind kinds[] = {ChatTemplateKind::kQwen3, ChatTemplateKind::kQwen35, ChatTemplateKind::kQwen36};
    const ChatTemplateKind kind = kinds[(mode >> 4) % 3];
    std::string a, b;
    const frost_status s = render_chat(kind, messages, tools, opt, &a);
    if (s != FROST_OK) return 0;
    if (render_chat(kind, messages, tools, opt, &b) != FROST_OK || a != b) std::abort();
    return 0;
}
