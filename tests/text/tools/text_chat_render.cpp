// Test helper for tests/text/py/test_chat_template_ref.py: renders conversations with
// frost::text::render_chat. Reads JSONL requests {kind, messages, tools, add_generation_prompt,
// enable_thinking?, preserve_thinking?} from argv[1]; prints one JSON result per line:
// {"ok": true, "text": ...} or {"ok": false, "error": ...}.
#include <cstdio>
#include <fstream>
#include <string>

#include "exec/error.h"
#include "text/chat_template.h"

int main(int argc, char** argv) {
    using ojson = nlohmann::ordered_json;
    if (argc != 2) {
        std::fprintf(stderr, "usage: text_chat_render REQUESTS.jsonl\n");
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const ojson req = ojson::parse(line, nullptr, false);
        ojson res;
        if (req.is_discarded() || !req.is_object()) {
            res = {{"ok", false}, {"error", "bad request line"}};
        } else {
            frost::text::ChatTemplateKind kind = frost::text::ChatTemplateKind::kQwen3;
            const std::string k = req.value("kind", "qwen3");
            if (k == "qwen35") kind = frost::text::ChatTemplateKind::kQwen35;
            if (k == "qwen36") kind = frost::text::ChatTemplateKind::kQwen36;
            frost::text::ChatOptions opt;
            opt.add_generation_prompt = req.value("add_generation_prompt", false);
            if (req.contains("enable_thinking")) opt.enable_thinking = req["enable_thinking"].get<bool>();
            opt.preserve_thinking = req.value("preserve_thinking", false);
            std::string text;
            const ojson tools = req.contains("tools") ? req["tools"] : ojson();
            if (frost::text::render_chat(kind, req["messages"], tools, opt, &text) == FROST_OK)
                res = {{"ok", true}, {"text", text}};
            else
                res = {{"ok", false}, {"error", frost::last_error()}};
        }
        std::printf("%s\n", res.dump(-1, ' ', false, ojson::error_handler_t::replace).c_str());
    }
    return 0;
}
