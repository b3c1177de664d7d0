// Tool-call parsing (Qwen3 JSON and Qwen3.5 XML forms) and the streaming filter that must never
// emit tool-call markup as content, whatever the chunking.
#include <gtest/gtest.h>

#include <random>

#include "text/tool_calls.h"

using namespace frost::text;
using ojson = nlohmann::ordered_json;

TEST(ToolCalls, ParsesQwen3JsonForm) {
    const ParsedAssistant p = parse_tool_calls(
        "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>");
    EXPECT_EQ(p.content, "Let me look.");
    ASSERT_EQ(p.tool_calls.size(), 2u);
    EXPECT_EQ(p.tool_calls[0]["type"], "function");
    EXPECT_EQ(p.tool_calls[0]["id"], "call_0");
    EXPECT_EQ(p.tool_calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(ojson::parse(p.tool_calls[0]["function"]["arguments"].get<std::string>()),
              ojson::parse(R"({"city":"Paris","days":3})"));
    EXPECT_EQ(p.tool_calls[1]["function"]["arguments"], "{}");
}

TEST(ToolCalls, ParsesQwen35XmlFormWithSchemaTypes) {
    const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"n":{"type":"integer"},"x":{"type":"number"},"ok":{"type":"boolean"},"o":{"type":"object"},
        "s":{"type":"string"}}}}}])");
    const ParsedAssistant p = parse_tool_calls(
        "<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=x>\n1.5\n</parameter>\n"
        "<parameter=ok>\ntrue\n</parameter>\n<parameter=o>\n{\"a\": [1]}\n</parameter>\n<parameter=s>\n007\nline2\n"
        "</parameter>\n<parameter=u>\n12\n</parameter>\n</function>\n</tool_call>",
        tools);
    EXPECT_EQ(p.content, "");
    ASSERT_EQ(p.tool_calls.size(), 1u);
    const ojson args = ojson::parse(p.tool_calls[0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(args, ojson::parse(R"({"n":42,"x":1.5,"ok":true,"o":{"a":[1]},"s":"007\nline2","u":"12"})"));
}

TEST(ToolCalls, UnclosedFinalBlockAndGarbage) {
    ParsedAssistant p = parse_tool_calls("<tool_call>\n<function=f>\n<parameter=a>\nv\n</parameter>\n</function>\n");
    ASSERT_EQ(p.tool_calls.size(), 1u);
    EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], "{\"a\":\"v\"}");
    p = parse_tool_calls("text <tool_call>not json</tool_call> more");
    EXPECT_TRUE(p.tool_calls.empty());
    EXPECT_EQ(p.content, "text <tool_call>not json</tool_call> more");
}

TEST(ToolCalls, SplitReasoning) {
    std::string r, c;
    split_reasoning("<think>\nplan\n</think>\n\nanswer", &r, &c);
    EXPECT_EQ(r, "plan");
    EXPECT_EQ(c, "answer");
    split_reasoning("no think here", &r, &c);
    EXPECT_EQ(r, "");
    EXPECT_EQ(c, "no think here");
}

TEST(ToolCallStream, NeverEmitsMarkupUnderAnyChunking) {
    const std::string text =
        "Sure <tool <b> x<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
        " tail<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
    const ParsedAssistant whole = parse_tool_calls(text);
    ASSERT_EQ(whole.tool_calls.size(), 2u);
    std::mt19937_64 rng(std::random_device{}());
    for (int iter = 0; iter < 500; ++iter) {
        ToolCallStream s;
        std::string streamed;
        for (size_t i = 0; i < text.size();) {
            const size_t n = 1 + rng() % 7;
            const std::string piece = s.push(std::string_view(text).substr(i, n));
            EXPECT_EQ(piece.find("<tool_call"), std::string::npos);
            EXPECT_EQ(piece.find("function="), std::string::npos);
            streamed += piece;
            i += n;
        }
        const ParsedAssistant end = s.finish();
        streamed += end.content;
        EXPECT_EQ(streamed.find("<tool_call>"), std::string::npos);
        EXPECT_EQ(streamed.substr(0, whole.content.size()), whole.content);
        EXPECT_EQ(end.tool_calls, whole.tool_calls);
    }
}
