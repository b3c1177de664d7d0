// Chat templates: goldens rendered by transformers' apply_chat_template from the public
// Qwen3.5 / Qwen3.6 chat_template.jinja (data/chat_goldens_qwen35.json), the Qwen3 template
// on hand-checked cases, errors where the jinja template raises, and json.dumps formatting.
#include <gtest/gtest.h>

#include <fstream>

#include "exec/error.h"
#include "text/chat_template.h"

using namespace frost::text;
using ojson = nlohmann::ordered_json;

TEST(ChatTemplate, Qwen35GoldensFromTransformers) {
    std::ifstream in(std::string(FROST_SOURCE_DIR) + "/tests/text/data/chat_goldens_qwen35.json");
    ASSERT_TRUE(in.good());
    const ojson cases = ojson::parse(in);
    ASSERT_GE(cases.size(), 5u);
    for (const ojson& c : cases) {
        const std::string k = c["kind"];
        const ChatTemplateKind kind = k == "qwen36" ? ChatTemplateKind::kQwen36 : ChatTemplateKind::kQwen35;
        ChatOptions opt;
        const ojson& o = c["options"];
        opt.add_generation_prompt = o.value("add_generation_prompt", false);
        if (o.contains("enable_thinking")) opt.enable_thinking = o["enable_thinking"].get<bool>();
        opt.preserve_thinking = o.value("preserve_thinking", false);
        std::string out = "poison";
        ASSERT_EQ(render_chat(kind, c["messages"], c["tools"], opt, &out), FROST_OK) << frost::last_error();
        EXPECT_EQ(out, c["expected"].get<std::string>());
    }
}

TEST(ChatTemplate, Qwen3BasicAndGenerationPrompts) {
    const ojson msgs = ojson::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"Hi"}])");
    std::string out;
    ChatOptions opt;
    opt.add_generation_prompt = true;
    ASSERT_EQ(render_chat(ChatTemplateKind::kQwen3, msgs, nullptr, opt, &out), FROST_OK);
    EXPECT_EQ(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    opt.enable_thinking = false;
    ASSERT_EQ(render_chat(ChatTemplateKind::kQwen3, msgs, nullptr, opt, &out), FROST_OK);
    EXPECT_EQ(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                   "<think>\n\n</think>\n\n");
    ASSERT_EQ(render_chat(ChatTemplateKind::kQwen35, msgs, nullptr, ChatOptions{true, std::nullopt, false}, &out), FROST_OK);
    EXPECT_EQ(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

TEST(ChatTemplate, Qwen3ToolCallsAndGroupedToolResults) {
    const ojson msgs = ojson::parse(R"([
      {"role":"user","content":"q"},
      {"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"b":1,"a":"x"}}},
                                                     {"name":"g","arguments":"{\"raw\": true}"}]},
      {"role":"tool","content":"r1"},{"role":"tool","content":"r2"}])");
    std::string out;
    ASSERT_EQ(render_chat(ChatTemplateKind::kQwen3, msgs, nullptr, ChatOptions{}, &out), FROST_OK);
    EXPECT_EQ(out,
              "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
              "{\"b\": 1, \"a\": \"x\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"raw\": true}}\n"
              "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
              "</tool_response><|im_end|>\n");
}

TEST(ChatTemplate, RefusesWhereTheTemplateRaises) {
    std::string out = "untouched";
    ojson late_system = ojson::parse(R"([{"role":"user","content":"a"},{"role":"system","content":"b"}])");
    EXPECT_EQ(render_chat(ChatTemplateKind::kQwen35, late_system, nullptr, ChatOptions{}, &out), FROST_ERR_INVALID_ARG);
    EXPECT_NE(frost::last_error().find("System message must be at the beginning"), std::string::npos);
    ojson no_user = ojson::parse(R"([{"role":"assistant","content":"a"}])");
    EXPECT_EQ(render_chat(ChatTemplateKind::kQwen35, no_user, nullptr, ChatOptions{}, &out), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(render_chat(ChatTemplateKind::kQwen3, ojson::object(), nullptr, ChatOptions{}, &out), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(out, "untouched");
}

TEST(ChatTemplate, PythonJsonDumps) {
    EXPECT_EQ(python_json_dumps(ojson::parse(R"({"z":[1,2.5,true,null],"a":{"k":"\"q\"\n\u0001é"}})")),
              "{\"z\": [1, 2.5, true, null], \"a\": {\"k\": \"\\\"q\\\"\\n\\u0001\xC3\xA9\"}}");
    EXPECT_EQ(python_str(ojson(true)), "True");
    EXPECT_EQ(python_str(ojson(nullptr)), "None");
    EXPECT_EQ(python_str(ojson(2.0)), "2.0");
}

TEST(ChatTemplate, KindFromTemplateText) {
    ChatTemplateKind k;
    EXPECT_TRUE(chat_template_kind_from_text("<|im_start|> {\"name\": <function-name>, ...", &k));
    EXPECT_EQ(k, ChatTemplateKind::kQwen3);
    EXPECT_TRUE(chat_template_kind_from_text("'<tool_call>\\n<function=' + tool_call.name", &k));
    EXPECT_EQ(k, ChatTemplateKind::kQwen35);
    EXPECT_TRUE(chat_template_kind_from_text("<function= preserve_thinking", &k));
    EXPECT_EQ(k, ChatTemplateKind::kQwen36);
    EXPECT_FALSE(chat_template_kind_from_text("{{ messages }}", &k));
}

TEST(ChatTemplate, KindFromFixtureDirAndPlainJsonOverload) {
    ChatTemplateKind k = ChatTemplateKind::kQwen36;
    ASSERT_EQ(chat_template_kind_from_dir(std::string(FROST_FIXTURES_DIR) + "/tokenizer-qwen3", &k), FROST_OK)
        << frost::last_error();
    EXPECT_EQ(k, ChatTemplateKind::kQwen3);
    EXPECT_EQ(chat_template_kind_from_dir("/nonexistent-dir", &k), FROST_ERR_NOT_FOUND);
    const nlohmann::json msgs = nlohmann::json::parse(R"([{"role":"user","content":"Hi"}])");
    std::string out;
    ASSERT_EQ(render_chat(ChatTemplateKind::kQwen3, msgs, nlohmann::json(), ChatOptions{}, &out), FROST_OK);
    EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n");
}

namespace {
// "{"a": {"a": ... 1 ... }}" nested `depth` objects deep, as a JSON text (no recursion to build).
std::string nested_object_text(size_t depth) {
    std::string s;
    for (size_t i = 0; i < depth; ++i) s += "{\"a\": ";
    s += "1";
    s.append(depth, '}');
    return s;
}
ojson call_with_arguments(const ojson& args) {
    ojson m = ojson::parse(R"([{"role":"user","content":"q"},
        {"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f"}}]}])");
    m[1]["tool_calls"][0]["function"]["arguments"] = args;
    return m;
}
}  // namespace

// Issue 13 B1: a tool call's arguments STRING holding JSON nested 10,000 deep (the body's own
// depth guard cannot see inside strings) crashed the Qwen3.5 renderer's recursive re-serialiser.
TEST(ChatTemplate, DeepArgumentsStringIsRefusedNotACrash) {
    for (ChatTemplateKind kind : {ChatTemplateKind::kQwen35, ChatTemplateKind::kQwen36}) {
        for (size_t depth : {size_t(kMaxChatJsonDepth) + 1, size_t(10000), size_t(200000)}) {
            std::string out = "untouched";
            EXPECT_EQ(render_chat(kind, call_with_arguments(nested_object_text(depth)), nullptr, ChatOptions{}, &out),
                      FROST_ERR_INVALID_ARG)
                << depth;
            EXPECT_NE(frost::last_error().find("too deeply"), std::string::npos) << frost::last_error();
            EXPECT_EQ(out, "untouched");
        }
        // At the bound it still renders, and the value is re-serialised as json.dumps would.
        std::string out;
        const std::string ok = nested_object_text(kMaxChatJsonDepth - 1);
        ASSERT_EQ(render_chat(kind, call_with_arguments(ok), nullptr, ChatOptions{}, &out), FROST_OK) << frost::last_error();
        EXPECT_NE(out.find("<parameter=a>\n" + nested_object_text(kMaxChatJsonDepth - 2) + "\n</parameter>"),
                  std::string::npos);
    }
}

// Deep values given as JSON (not a string) are refused before any recursive walk, by both
// overloads, and python_json_dumps itself refuses to recurse past the bound.
TEST(ChatTemplate, DeepMessagesAndToolsAreRefused) {
    const ojson deep = ojson::parse(nested_object_text(5000));
    std::string out = "untouched";
    for (ChatTemplateKind kind : {ChatTemplateKind::kQwen3, ChatTemplateKind::kQwen35}) {
        EXPECT_EQ(render_chat(kind, call_with_arguments(deep), nullptr, ChatOptions{}, &out), FROST_ERR_INVALID_ARG);
        const ojson msgs = ojson::parse(R"([{"role":"user","content":"q"}])");
        EXPECT_EQ(render_chat(kind, msgs, ojson::array({deep}), ChatOptions{}, &out), FROST_ERR_INVALID_ARG);
        const nlohmann::json plain = nlohmann::json::parse(nested_object_text(5000));
        EXPECT_EQ(render_chat(kind, nlohmann::json::array({plain}), nlohmann::json::array(), ChatOptions{}, &out),
                  FROST_ERR_INVALID_ARG);
    }
    EXPECT_EQ(out, "untouched");
    EXPECT_THROW(python_json_dumps(deep), std::invalid_argument);
}
