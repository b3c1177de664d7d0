// Logprobs and echo over HTTP with the scripted fake engine (fake_backend.h: the sampled token
// scores -0.25 with alternatives 'a', 'b', ... at -1, -2, ...; prompt tokens -0.5): the entries
// the engine reports reach OpenAI's shapes, one per generated token, streamed and not, on chat
// (choices[].logprobs.content) and legacy completions (tokens / token_logprobs / top_logprobs /
// text_offset), and echo returns the prompt first (its first token without a logprob).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/scheduler.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

using Server = ScriptedServer;

std::vector<json> sse_chunks(const std::string& body) {
    std::vector<json> out;
    size_t at = 0;
    while ((at = body.find("data: {", at)) != std::string::npos) {
        const size_t end = body.find("\n\n", at);
        out.push_back(json::parse(body.substr(at + 6, end - at - 6)));
        at = end;
    }
    return out;
}

void expect_chat_entry(const json& e, const std::string& token, int top) {
    EXPECT_EQ(e["token"], token) << e.dump();
    EXPECT_FLOAT_EQ(e["logprob"].get<float>(), -0.25f);
    json bytes = json::array();
    for (unsigned char c : token) bytes.push_back(int(c));
    EXPECT_EQ(e["bytes"], bytes);
    ASSERT_EQ(e["top_logprobs"].size(), size_t(top)) << e.dump();
    for (int k = 0; k < top; ++k) {
        EXPECT_EQ(e["top_logprobs"][k]["token"], std::string(1, char('a' + k)));
        EXPECT_FLOAT_EQ(e["top_logprobs"][k]["logprob"].get<float>(), -1.0f - float(k));
    }
}

}  // namespace

TEST(Logprobs, ChatReportsOneEntryPerGeneratedToken) {
    Server s("xyz");
    const json body = {{"model", "fake"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                       {"max_tokens", 10}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}};
    const RawResponse r = s.post("/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json ch = json::parse(r.body)["choices"][0];
    EXPECT_EQ(ch["message"]["content"], "xyz");
    const json content = ch["logprobs"]["content"];
    ASSERT_EQ(content.size(), 3u) << r.body;  // the end token is not an output token
    for (size_t i = 0; i < 3; ++i) expect_chat_entry(content[i], std::string(1, "xyz"[i]), 3);

    // Streamed: the entries ride on the deltas; together they are the same list.
    json stream_body = body;
    stream_body["stream"] = true;
    const RawResponse rs = s.post("/v1/chat/completions", stream_body);
    ASSERT_EQ(rs.status, 200) << rs.body;
    json all = json::array();
    std::string text;
    for (const json& c : sse_chunks(rs.body))
        for (const auto& x : c["choices"]) {
            if (x.contains("delta") && x["delta"].contains("content")) text += x["delta"]["content"].get<std::string>();
            if (x["logprobs"].is_object())
                for (const auto& e : x["logprobs"]["content"]) all.push_back(e);
        }
    EXPECT_EQ(text, "xyz");
    EXPECT_EQ(all, content);

    // Without logprobs: null, as before.
    json plain = body;
    plain.erase("logprobs");
    plain.erase("top_logprobs");
    const RawResponse rp = s.post("/v1/chat/completions", plain);
    ASSERT_EQ(rp.status, 200) << rp.body;
    EXPECT_TRUE(json::parse(rp.body)["choices"][0]["logprobs"].is_null()) << rp.body;
}

TEST(Logprobs, CompletionsUseTheLegacyShape) {
    Server s("pq");
    const json body = {{"model", "fake"}, {"prompt", "hi"}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}};
    const RawResponse r = s.post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json ch = json::parse(r.body)["choices"][0];
    EXPECT_EQ(ch["text"], "pq");
    const json lp = ch["logprobs"];
    EXPECT_EQ(lp["tokens"], json({"p", "q"})) << lp.dump();
    EXPECT_EQ(lp["token_logprobs"], json({-0.25, -0.25}));
    EXPECT_EQ(lp["top_logprobs"][0], json({{"a", -1.0}, {"b", -2.0}}));
    EXPECT_EQ(lp["text_offset"], json({0, 1}));
    // logprobs 0: the chosen tokens' logprobs, no alternatives.
    json zero = body;
    zero["logprobs"] = 0;
    const RawResponse rz = s.post("/v1/completions", zero);
    ASSERT_EQ(rz.status, 200) << rz.body;
    EXPECT_EQ(json::parse(rz.body)["choices"][0]["logprobs"]["top_logprobs"][1], json::object());
}

TEST(Logprobs, EchoReturnsThePromptAndScoresIt) {
    Server s("ok");
    json body = {{"model", "fake"}, {"prompt", "abc"}, {"max_tokens", 5}, {"temperature", 0}, {"echo", true}};
    RawResponse r = s.post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "abcok");
    EXPECT_TRUE(json::parse(r.body)["choices"][0]["logprobs"].is_null());
    for (bool stream : {false, true}) {
        body["logprobs"] = 1;
        body["stream"] = stream;
        r = s.post("/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                   {"text_offset", json::array()}};
        std::string text;
        if (!stream) {
            const json ch = json::parse(r.body)["choices"][0];
            text = ch["text"];
            lp = ch["logprobs"];
        } else {
            for (const json& c : sse_chunks(r.body))
                for (const auto& x : c["choices"]) {
                    text += x["text"].get<std::string>();
                    if (x["logprobs"].is_object())
                        for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
                            for (const auto& v : x["logprobs"][k]) lp[k].push_back(v);
                }
        }
        EXPECT_EQ(text, "abcok");
        EXPECT_EQ(lp["tokens"], json({"a", "b", "c", "o", "k"})) << lp.dump();
        EXPECT_EQ(lp["token_logprobs"], json({nullptr, -0.5, -0.5, -0.25, -0.25})) << lp.dump();
        EXPECT_TRUE(lp["top_logprobs"][0].is_null());
        EXPECT_EQ(lp["top_logprobs"][1], json({{"a", -1.0}}));
        EXPECT_EQ(lp["text_offset"], json({0, 1, 2, 3, 4}));
    }
}
