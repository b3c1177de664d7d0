// Reasoning split (issue 7): the streaming <think> splitter against a naive whole-text reference
// over random texts cut at random points (tags split across pieces included), the response
// bodies (delta.reasoning_content, message.reasoning_content), and end to end over HTTP with a
// scripted fake engine: tool calls are parsed from the content part only, and disabled
// thinking leaves the output untouched.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/http_server.h"
#include "serve/openai_response.h"
#include "serve/reasoning_split.h"
#include "serve/scheduler.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

bool nl(char c) { return c == '\n' || c == '\r'; }

// Whole-text reference, written independently of the streaming state machine.
SplitText reference(const std::string& text, bool starts_inside) {
    std::string body;
    if (starts_inside) {
        body = text;
    } else {
        size_t i = text.find_first_not_of(" \t\r\n");
        if (i == std::string::npos || text.compare(i, 7, "<think>") != 0) return {"", text};
        body = text.substr(i + 7);
    }
    size_t b = 0;
    while (b < body.size() && nl(body[b])) ++b;
    body = body.substr(b);
    const size_t close = body.find("</think>");
    if (close == std::string::npos) return {body, ""};
    std::string r = body.substr(0, close);
    while (!r.empty() && nl(r.back())) r.pop_back();
    std::string c = body.substr(close + 8);
    size_t k = 0;
    while (k < c.size() && nl(c[k])) ++k;
    return {r, c.substr(k)};
}

SplitText stream(const std::vector<std::string>& pieces, bool starts_inside) {
    ReasoningSplitter s(starts_inside);
    SplitText all;
    for (const auto& p : pieces) {
        const SplitText o = s.feed(p);
        all.reasoning += o.reasoning;
        all.content += o.content;
    }
    const SplitText o = s.flush();
    all.reasoning += o.reasoning;
    all.content += o.content;
    return all;
}

}  // namespace

TEST(ReasoningSplit, TagSplitAcrossPieces) {
    const SplitText a = stream({"<th", "ink>\nI plan", " to answer.\n</th", "ink>", "\n\nAns", "wer."}, false);
    EXPECT_EQ(a.reasoning, "I plan to answer.");
    EXPECT_EQ(a.content, "Answer.");
    // Qwen3.5: the prompt opened the block, the output has no opening tag.
    const SplitText b = stream({"thin", "king<", "/", "think>", "done"}, true);
    EXPECT_EQ(b.reasoning, "thinking");
    EXPECT_EQ(b.content, "done");
    // No tag at the start: all content, even a later <think>.
    const SplitText c = stream({"Hi <think>x</think>"}, false);
    EXPECT_EQ(c.reasoning, "");
    EXPECT_EQ(c.content, "Hi <think>x</think>");
    // Unclosed block (length stop): everything stays reasoning, held text included.
    const SplitText d = stream({"<think>still going\n", "</thi"}, false);
    EXPECT_EQ(d.reasoning, "still going\n</thi");
    EXPECT_EQ(d.content, "");
}

TEST(ReasoningSplit, NothingPartialIsEmittedEarly) {
    ReasoningSplitter s(true);
    const SplitText a = s.feed("abc\n</thi");
    EXPECT_EQ(a.reasoning, "abc");  // the newline and the partial tag wait
    EXPECT_EQ(a.content, "");
    const SplitText b = s.feed("nk>x");
    EXPECT_EQ(b.reasoning, "");
    EXPECT_EQ(b.content, "x");
    EXPECT_FALSE(s.in_reasoning());
}

TEST(ReasoningSplit, RandomTextsAndCutsMatchTheReference) {
    std::random_device rd;
    const unsigned seed = rd();
    std::mt19937 rng(seed);
    const std::vector<std::string> frags = {"a", "bc", " ", "\n", "\r\n", "<think>", "</think>", "<", "/", "think",
                                            ">", "</", "<th", "ink>", "\n\n", "x y"};
    for (int iter = 0; iter < 3000; ++iter) {
        std::string text;
        const int n = int(rng() % 12);
        for (int i = 0; i < n; ++i) text += frags[rng() % frags.size()];
        std::vector<std::string> pieces;
        for (size_t at = 0; at < text.size();) {
            const size_t len = 1 + rng() % 5;
            pieces.push_back(text.substr(at, len));
            at += len;
        }
        for (const bool inside : {false, true}) {
            const SplitText want = reference(text, inside);
            const SplitText got = stream(pieces, inside);
            ASSERT_EQ(got.reasoning, want.reasoning) << "seed " << seed << " text [" << text << "] inside " << inside;
            ASSERT_EQ(got.content, want.content) << "seed " << seed << " text [" << text << "] inside " << inside;
        }
    }
}

TEST(ReasoningSplit, PromptOpensThinking) {
    EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
    EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>"));
    EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
    EXPECT_FALSE(prompt_opens_thinking(""));
}

TEST(ReasoningSplit, ResponseBodiesCarryReasoningContent) {
    ResponseBuilder b(Endpoint::Chat, "chatcmpl-x", "m", 0, 1, false);
    StreamEvent r;
    r.kind = StreamEvent::Kind::Delta;
    r.reasoning = "thinking";
    const json chunk = json::parse(b.sse(r).substr(6));
    EXPECT_EQ(chunk["choices"][0]["delta"]["reasoning_content"], "thinking");
    EXPECT_FALSE(chunk["choices"][0]["delta"].contains("content"));

    ResponseBuilder nb(Endpoint::Chat, "chatcmpl-y", "m", 0, 1, false);
    nb.add(r);
    StreamEvent c;
    c.kind = StreamEvent::Kind::Delta;
    c.text = "answer";
    nb.add(c);
    StreamEvent fin;
    fin.kind = StreamEvent::Kind::Finish;
    fin.finish_reason = "stop";
    nb.add(fin);
    const json body = json::parse(nb.final_json());
    EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "thinking");
    EXPECT_EQ(body["choices"][0]["message"]["content"], "answer");
}

namespace {

json tool_body(bool stream, std::optional<bool> thinking) {
    json tools = json::array({json{{"type", "function"},
                                   {"function", {{"name", "run"}, {"parameters", {{"type", "object"}}}}}}});
    json b = {{"model", "fake"},
              {"messages", json::array({json{{"role", "user"}, {"content", "go"}}})},
              {"max_tokens", 200},
              {"temperature", 0},
              {"tools", tools},
              {"stream", stream}};
    if (thinking) b["chat_template_kwargs"] = {{"enable_thinking", *thinking}};
    return b;
}

// Concatenated delta.reasoning_content / delta.content / tool call names of an SSE body.
struct Streamed {
    std::string reasoning, content, finish;
    std::vector<std::string> calls;
};
Streamed parse_sse(const std::string& body) {
    Streamed s;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
        const size_t end = body.find("\n\n", at);
        const std::string payload = body.substr(at + 6, end - at - 6);
        at = end;
        if (payload == "[DONE]") break;
        const json j = json::parse(payload);
        for (const auto& ch : j["choices"]) {
            const json& d = ch["delta"];
            if (d.contains("reasoning_content")) s.reasoning += d["reasoning_content"].get<std::string>();
            if (d.contains("content") && d["content"].is_string()) s.content += d["content"].get<std::string>();
            if (d.contains("tool_calls"))
                for (const auto& c : d["tool_calls"]) s.calls.push_back(c["function"]["name"]);
            if (ch["finish_reason"].is_string()) s.finish = ch["finish_reason"];
        }
    }
    return s;
}

}  // namespace

TEST(ReasoningSplit, OverHttpToolCallsComeFromTheContentOnly) {
    // A tool call written inside the reasoning is thinking, not a call; the one after it is.
    const std::string out =
        "<think>\nMaybe <tool_call>{\"name\":\"nope\"}</tool_call> first.\n</think>\n\nOK."
        "<tool_call>{\"name\":\"run\",\"arguments\":{}}</tool_call>";
    ScriptedServer s(out, 1, 2048);
    const RawResponse r = s.post("/v1/chat/completions", tool_body(false, std::nullopt));
    ASSERT_EQ(r.status, 200) << r.body;
    const json msg = json::parse(r.body)["choices"][0]["message"];
    EXPECT_EQ(msg["reasoning_content"], "Maybe <tool_call>{\"name\":\"nope\"}</tool_call> first.");
    EXPECT_EQ(msg["content"], "OK.");
    ASSERT_EQ(msg["tool_calls"].size(), 1u);
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "run");
    EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "tool_calls");

    const RawResponse st = s.post("/v1/chat/completions", tool_body(true, std::nullopt));
    ASSERT_EQ(st.status, 200);
    const Streamed got = parse_sse(st.body);
    EXPECT_EQ(got.reasoning, "Maybe <tool_call>{\"name\":\"nope\"}</tool_call> first.");
    EXPECT_EQ(got.content, "OK.");
    EXPECT_EQ(got.calls, std::vector<std::string>{"run"});
    EXPECT_EQ(got.finish, "tool_calls");
}

TEST(ReasoningSplit, OverHttpDisabledThinkingIsUnchanged) {
    const std::string out = "<think>x</think>plain";
    ScriptedServer s(out, 1, 2048);
    json b = tool_body(false, false);
    b.erase("tools");
    const RawResponse r = s.post("/v1/chat/completions", b);
    ASSERT_EQ(r.status, 200) << r.body;
    const json msg = json::parse(r.body)["choices"][0]["message"];
    EXPECT_FALSE(msg.contains("reasoning_content"));
    EXPECT_EQ(msg["content"], out);
}
