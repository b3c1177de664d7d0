// The Anthropic Messages / OpenAI Responses translators and body builders as pure functions
// (messages_api.h, responses_api.h): what each request field becomes in the chat body the one
// chat handler runs, and the event grammar each builder writes for a scripted event sequence.
// End to end through the official clients: tests/python/serve/test_messages.py, test_responses.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/messages_api.h"
#include "serve/responses_api.h"

namespace frost::serve {
namespace {

using nlohmann::json;

std::vector<json> sse_events(const std::string& text, std::vector<std::string>* names) {
    std::vector<json> out;
    size_t at = 0;
    while (true) {
        const size_t ev = text.find("event: ", at);
        if (ev == std::string::npos) break;
        const size_t nl = text.find('\n', ev);
        names->push_back(text.substr(ev + 7, nl - ev - 7));
        const size_t data = text.find("data: ", nl);
        const size_t end = text.find("\n\n", data);
        out.push_back(json::parse(text.substr(data + 6, end - data - 6)));
        EXPECT_EQ(out.back()["type"], names->back());
        at = end + 2;
    }
    return out;
}

StreamEvent delta(const std::string& text, const std::string& reasoning = "") {
    StreamEvent e;
    e.text = text;
    e.reasoning = reasoning;
    return e;
}

StreamEvent calls(const json& c) {
    StreamEvent e;
    e.kind = StreamEvent::Kind::ToolCalls;
    e.tool_calls = c;
    return e;
}

// The same events through a streaming builder (its SSE text is returned) and a non-streaming one.
std::string play(const std::vector<StreamEvent>& evs, BodyBuilder* stream, BodyBuilder* body) {
    std::string text = stream->sse_open();
    for (const auto& e : evs) {
        text += stream->sse(e);
        body->add(e);
    }
    return text;
}

StreamEvent finish(const std::string& reason, size_t prompt, size_t completion, size_t cached) {
    StreamEvent e;
    e.kind = StreamEvent::Kind::Finish;
    e.finish_reason = reason;
    e.usage.prompt_tokens = prompt;
    e.usage.completion_tokens = completion;
    e.usage.cached_tokens = cached;
    return e;
}

TEST(AnthropicToChat, MapsEveryBlockKindAndOrdersToolResultsFirst) {
    const json body = json::parse(R"({
      "model": "frost", "max_tokens": 7, "system": [{"type": "text", "text": "S1"}, {"type": "text", "text": "S2"}],
      "stop_sequences": ["END"], "top_k": 5, "thinking": {"type": "disabled"},
      "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true},
      "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": ""},
                                          {"type": "text", "text": "ok"},
                                          {"type": "tool_use", "id": "t1", "name": "f", "input": {"b": [1, 2], "a": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "R"},
                                     {"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}]}]})");
    json chat;
    ApiError err;
    ASSERT_TRUE(anthropic_to_chat(body, &chat, &err)) << err.message;
    const json& m = chat["messages"];
    ASSERT_EQ(m.size(), 5u);
    EXPECT_EQ(m[0], (json{{"role", "system"}, {"content", "S1\nS2"}}));
    EXPECT_EQ(m[1], (json{{"role", "user"}, {"content", "hi"}}));
    EXPECT_EQ(m[2]["reasoning_content"], "hmm");
    EXPECT_EQ(m[2]["content"], "ok");
    // The template's tojson form (Python's separators), keys sorted.
    EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], R"({"a": "x", "b": [1, 2]})");
    EXPECT_EQ(m[3], (json{{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "R"}}));
    EXPECT_EQ(m[4], (json{{"role", "user"}, {"content", "next"}}));
    EXPECT_EQ(chat["max_tokens"], 7);
    EXPECT_EQ(chat["stop"], json::array({"END"}));
    EXPECT_EQ(chat["top_k"], 5);
    EXPECT_EQ(chat["enable_thinking"], false);
    EXPECT_EQ(chat["tool_choice"]["function"]["name"], "f");
    EXPECT_EQ(chat["parallel_tool_calls"], false);
    EXPECT_EQ(chat["tools"][0]["function"]["parameters"], (json{{"type", "object"}}));
}

TEST(AnthropicToChat, ErrorsNameTheAnthropicField) {
    struct Case {
        const char* body;
        const char* param;
    } cases[] = {
        {R"({"messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
        {R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
        {R"({"max_tokens": 1, "messages": []})", "messages"},
        {R"({"max_tokens": 1, "zz": 1, "aa": 2, "messages": [{"role": "user", "content": "x"}]})", "aa"},
        {R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}]})",
         "messages[0].content[0].type"},
        {R"({"max_tokens": 1, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": 3, "name": "f"}]}]})",
         "messages[0].content[0].id"},
        {R"({"max_tokens": 1, "tool_choice": {"type": "some"}, "messages": [{"role": "user", "content": "x"}]})",
         "tool_choice.type"},
        {R"({"max_tokens": 1, "stop_sequences": ["a", 1], "messages": [{"role": "user", "content": "x"}]})",
         "stop_sequences[1]"},
        {R"({"max_tokens": 1, "system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]})", "system[0]"},
    };
    for (const auto& c : cases) {
        json chat;
        ApiError err;
        EXPECT_FALSE(anthropic_to_chat(json::parse(c.body), &chat, &err)) << c.body;
        EXPECT_EQ(err.param, c.param) << c.body;
        EXPECT_NE(err.message.find(c.param), std::string::npos) << err.message;
    }
}

TEST(ResponsesToChat, ItemsPriorConversationAndInstructions) {
    const json prior = json::array({json{{"role", "user"}, {"content", "p"}}, json{{"role", "assistant"}, {"content", "q"}}});
    const json body = json::parse(R"({
      "instructions": "I", "max_output_tokens": 9, "reasoning": {"effort": "minimal"},
      "tool_choice": {"type": "function", "name": "f"},
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": true}],
      "input": [{"role": "developer", "content": "D"},
                {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
                 "content": [{"type": "output_text", "text": "A", "annotations": []}]},
                {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{\"x\": 1}"},
                {"type": "reasoning", "id": "rs", "summary": []},
                {"type": "function_call_output", "call_id": "c1", "output": "o1"}]})");
    json chat, conv;
    ApiError err;
    ASSERT_TRUE(responses_to_chat(body, prior, &chat, &conv, &err)) << err.message;
    const json& m = chat["messages"];
    ASSERT_EQ(m.size(), 6u) << m.dump();
    EXPECT_EQ(m[0], (json{{"role", "system"}, {"content", "I"}}));
    EXPECT_EQ(m[1]["content"], "p");
    EXPECT_EQ(m[3], (json{{"role", "system"}, {"content", "D"}}));
    EXPECT_EQ(m[4]["content"], "A");  // the calls join the assistant turn before them
    ASSERT_EQ(m[4]["tool_calls"].size(), 2u);
    EXPECT_EQ(m[4]["tool_calls"][1]["id"], "c2");
    EXPECT_EQ(m[5], (json{{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "o1"}}));
    EXPECT_EQ(conv.size(), 5u);  // no instructions: the next turn brings its own
    EXPECT_EQ(chat["max_tokens"], 9);
    EXPECT_EQ(chat["enable_thinking"], false);
    EXPECT_EQ(chat["tool_choice"]["function"]["name"], "f");
}

TEST(MessagesBuilder, StreamGrammarAndFinalBodyAgree) {
    MessagesBuilder s("msg_1", "frost", 100), b("msg_1", "frost", 100);
    const json tc = json::array({json{{"id", "call_a"}, {"type", "function"},
                                      {"function", {{"name", "f"}, {"arguments", R"({"x": 1})"}}}}});
    const std::vector<StreamEvent> evs = {delta("", "th"), delta("", "ink"), delta("Hel"), delta("lo"), calls(tc),
                                          finish("tool_calls", 100, 9, 64)};
    const std::string text = play(evs, &s, &b);
    std::vector<std::string> names;
    const auto j = sse_events(text, &names);
    const std::vector<std::string> want = {"message_start",       "content_block_start", "content_block_delta",
                                           "content_block_delta", "content_block_stop",  "content_block_start",
                                           "content_block_delta", "content_block_delta", "content_block_stop",
                                           "content_block_start", "content_block_delta", "content_block_stop",
                                           "message_delta",       "message_stop"};
    EXPECT_EQ(names, want);
    EXPECT_EQ(j[1]["index"], 0);
    EXPECT_EQ(j[5]["index"], 1);
    EXPECT_EQ(j[9]["index"], 2);
    EXPECT_EQ(j[10]["delta"]["partial_json"], R"({"x":1})");
    EXPECT_EQ(j[12]["delta"]["stop_reason"], "tool_use");
    EXPECT_EQ(j[12]["usage"]["input_tokens"], 36);
    EXPECT_EQ(j[12]["usage"]["cache_read_input_tokens"], 64);
    ASSERT_TRUE(s.done() && b.done());
    const json fin = json::parse(b.final_json());
    ASSERT_EQ(fin["content"].size(), 3u);
    EXPECT_EQ(fin["content"][0]["thinking"], "think");
    EXPECT_EQ(fin["content"][1]["text"], "Hello");
    EXPECT_EQ(fin["content"][2]["input"], (json{{"x", 1}}));
    EXPECT_EQ(fin["usage"], j[12]["usage"]);
}

// A Finish naming the stop string that fired is stop_reason "stop_sequence" with that string,
// streamed and not; a plain "stop" (the end token) stays end_turn with a null stop_sequence.
TEST(MessagesBuilder, StopSequenceIsNamed) {
    for (const std::string seq : {"", "END", "\n\nHuman:"}) {
        MessagesBuilder s("msg_1", "frost", 10), b("msg_1", "frost", 10);
        StreamEvent fin = finish("stop", 10, 3, 0);
        fin.stop_sequence = seq;
        const std::string text = play({delta("abc"), fin}, &s, &b);
        std::vector<std::string> names;
        const auto j = sse_events(text, &names);
        ASSERT_EQ(names[names.size() - 2], "message_delta");
        const json& d = j[names.size() - 2]["delta"];
        const json body = json::parse(b.final_json());
        EXPECT_EQ(d["stop_reason"], seq.empty() ? "end_turn" : "stop_sequence");
        EXPECT_EQ(body["stop_reason"], d["stop_reason"]);
        EXPECT_EQ(d["stop_sequence"], seq.empty() ? json(nullptr) : json(seq));
        EXPECT_EQ(body["stop_sequence"], d["stop_sequence"]);
    }
}

// A stop string right at the start, or in the thinking: no text at all. The stream and the
// message object agree on one empty text block (after the thinking block, if any).
TEST(MessagesBuilder, EmptyOutputsAgreeStreamedAndNot) {
    for (const bool thought : {false, true}) {
        MessagesBuilder s("msg_1", "frost", 10), b("msg_1", "frost", 10);
        std::vector<StreamEvent> evs = {finish("stop", 10, 1, 0)};
        evs.back().stop_sequence = std::string(thought ? "STOP" : "END");
        if (thought) evs.insert(evs.begin(), delta("", "hmm"));
        const std::string text = play(evs, &s, &b);
        std::vector<std::string> names;
        const auto j = sse_events(text, &names);
        json blocks = json::array();
        for (size_t i = 0; i < j.size(); ++i)
            if (names[i] == "content_block_start") blocks.push_back(j[i]["content_block"]["type"]);
        const json body = json::parse(b.final_json());
        json final_types = json::array();
        for (const auto& c : body["content"]) final_types.push_back(c["type"]);
        EXPECT_EQ(blocks, final_types);
        EXPECT_EQ(final_types, thought ? json::array({"thinking", "text"}) : json::array({"text"}));
    }
}

TEST(ResponsesBuilder, SequenceNumbersIndicesAndStore) {
    auto store = make_response_store(2);
    ResponsesBuilder s("resp_1", "frost", json::object(), 10, store, "key0", json::array({json{{"role", "user"}, {"content", "u"}}}));
    const json tc = json::array({json{{"id", "call_a"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}});
    std::string text = s.sse_open();
    for (const auto& e : {delta("", "r"), delta("A"), delta("B"), calls(tc), finish("tool_calls", 10, 4, 0)}) text += s.sse(e);
    std::vector<std::string> names;
    const auto j = sse_events(text, &names);
    for (size_t i = 0; i < j.size(); ++i) EXPECT_EQ(j[i]["sequence_number"], int(i));
    EXPECT_EQ(names.front(), "response.created");
    EXPECT_EQ(names.back(), "response.completed");
    std::vector<int> added;
    for (size_t i = 0; i < j.size(); ++i)
        if (names[i] == "response.output_item.added") added.push_back(j[i]["output_index"]);
    EXPECT_EQ(added, (std::vector<int>{0, 1, 2}));
    const json done = j.back()["response"];
    ASSERT_EQ(done["output"].size(), 3u);
    EXPECT_EQ(done["output"][1]["content"][0]["text"], "AB");
    EXPECT_EQ(done["output"][2]["call_id"], "call_a");
    const auto kept = store->get("resp_1", "key0");
    ASSERT_TRUE(kept.has_value());
    EXPECT_FALSE(store->get("resp_1", "key1").has_value());
    ASSERT_EQ(kept->conversation.size(), 2u);
    EXPECT_EQ(kept->conversation[1]["tool_calls"][0]["id"], "call_a");
    EXPECT_EQ(kept->response, done);
    // Bounded: the oldest goes first.
    store->put("b", {"key0", json::array(), json::object()});
    store->put("c", {"key0", json::array(), json::object()});
    EXPECT_FALSE(store->get("resp_1", "key0").has_value());
    EXPECT_TRUE(store->get("c", "key0").has_value());
}

}  // namespace
}  // namespace frost::serve
