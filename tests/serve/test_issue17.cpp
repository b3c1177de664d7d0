// Regression tests for issue 17's bug list, over HTTP on a loopback server with the scripted fake
// engine (fake_backend.h: with `script` set, the output is exactly those ids whatever the prompt).
// Each test failed on the main branch before its fix; the bug number is in the test name.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <set>
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

json user(const std::string& s) { return json{{"role", "user"}, {"content", s}}; }

json weather_tools() {
    return json::array({json{{"type", "function"},
                             {"function",
                              {{"name", "get_weather"},
                               {"parameters",
                                {{"type", "object"},
                                 {"properties",
                                  {{"city", {{"type", "string"}}},
                                   {"days", {{"type", "integer"}}},
                                   {"metric", {{"type", "boolean"}}}}}}}}}}});
}

}  // namespace

// Bug 3: a JSON-form call quoting its integer/boolean arguments comes back typed by the request's
// schema, and tool-call ids differ between responses (and between calls of one response).
TEST(Issue17, Bug3ToolArgumentsFollowTheSchemaAndIdsAreUnique) {
    Server s("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"7\", \"days\": \"3\", "
             "\"metric\": \"true\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
             "{\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>");
    std::set<std::string> ids;
    for (bool stream : {false, true, false}) {
        const json body = {{"model", "fake"}, {"messages", json::array({user("weather?")})}, {"max_tokens", 400},
                           {"temperature", 0}, {"tools", weather_tools()}, {"stream", stream}};
        const RawResponse r = s.post("/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        json calls = json::array();
        if (!stream) {
            const json j = json::parse(r.body);
            EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
            calls = j["choices"][0]["message"]["tool_calls"];
        } else {
            size_t at = 0;
            while ((at = r.body.find("data: {", at)) != std::string::npos) {
                const size_t end = r.body.find("\n\n", at);
                const json j = json::parse(r.body.substr(at + 6, end - at - 6));
                at = end;
                for (const auto& ch : j["choices"])
                    if (ch.contains("delta") && ch["delta"].contains("tool_calls"))
                        for (const auto& c : ch["delta"]["tool_calls"]) calls.push_back(c);
            }
        }
        ASSERT_EQ(calls.size(), 2u) << r.body;
        const json a0 = json::parse(calls[0]["function"]["arguments"].get<std::string>());
        EXPECT_EQ(a0, json({{"city", "7"}, {"days", 3}, {"metric", true}})) << a0.dump();
        const json a1 = json::parse(calls[1]["function"]["arguments"].get<std::string>());
        EXPECT_EQ(a1, json({{"city", "Oslo"}, {"days", 2}})) << a1.dump();
        for (const auto& c : calls) {
            ASSERT_TRUE(c.contains("id") && c["id"].is_string()) << c.dump();
            EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u);
            EXPECT_TRUE(ids.insert(c["id"].get<std::string>()).second) << "repeated id " << c["id"];
        }
    }
    EXPECT_EQ(ids.size(), 6u);
}

// Bug 5: max_tokens omitted is not a silent cap at 256: the output runs to its end token.
TEST(Issue17, Bug5OmittedMaxTokensIsNotCappedAt256) {
    const std::string out(300, 'z');
    Server s(out);
    for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
        json body = {{"model", "fake"}, {"temperature", 0}};
        if (std::string(path) == "/v1/completions") body["prompt"] = "go";
        else body["messages"] = json::array({user("go")});
        const RawResponse r = s.post(path, body);
        ASSERT_EQ(r.status, 200) << r.body;
        const json j = json::parse(r.body);
        const json& ch = j["choices"][0];
        const std::string text = ch.contains("message") ? ch["message"]["content"].get<std::string>()
                                                        : ch["text"].get<std::string>();
        EXPECT_EQ(text, out) << path;
        EXPECT_EQ(ch["finish_reason"], "stop") << path;
        EXPECT_EQ(j["usage"]["completion_tokens"], 301) << path;  // 300 bytes + the end token
    }
}

// Bug 5: with no max_tokens the whole context is the limit (finish "length" exactly there).
TEST(Issue17, Bug5OmittedMaxTokensRunsToTheContextEnd) {
    Server s(std::string(2000, 'y'), 1, 512);
    const RawResponse r = s.post("/v1/completions", {{"model", "fake"}, {"prompt", "abcd"}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>(), 512);
}

// Bug 6: no seed at temperature > 0 draws a fresh one per request (reported as frost.seed);
// sending the reported seed back reproduces that output.
TEST(Issue17, Bug6UnseededSampledRequestsDifferAndReportTheirSeed) {
    Server s;
    const json body = {{"model", "fake"}, {"prompt", "tell me"}, {"max_tokens", 24}, {"temperature", 1.0}};
    std::set<std::string> texts;
    std::set<int64_t> seeds;
    json first;
    for (int i = 0; i < 4; ++i) {
        const RawResponse r = s.post("/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const json j = json::parse(r.body);
        ASSERT_TRUE(j["frost"].contains("seed")) << r.body;
        texts.insert(j["choices"][0]["text"].get<std::string>());
        seeds.insert(j["frost"]["seed"].get<int64_t>());
        if (i == 0) first = j;
    }
    EXPECT_EQ(seeds.size(), 4u);
    EXPECT_GE(texts.size(), 3u);  // 24 tokens of 26 letters: equal outputs would be a collision
    json again = body;
    again["seed"] = first["frost"]["seed"];
    const RawResponse r = s.post("/v1/completions", again);
    ASSERT_EQ(r.status, 200);
    const json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["text"], first["choices"][0]["text"]);
    EXPECT_EQ(j["frost"]["seed"], first["frost"]["seed"]);
    // Greedy requests report no seed (none is used).
    const json g = json::parse(s.post("/v1/completions", {{"model", "fake"}, {"prompt", "x"}, {"max_tokens", 2},
                                                          {"temperature", 0}}).body);
    EXPECT_FALSE(g["frost"].contains("seed"));
}

// Bug 7: legacy completions take logprobs as an integer 0..5 (a boolean or 6 is a 400 naming it).
TEST(Issue17, Bug7CompletionsLogprobsIsAnInteger) {
    Server s;
    const json base = {{"model", "fake"}, {"prompt", "hi"}, {"max_tokens", 3}, {"temperature", 0}};
    json b = base;
    b["logprobs"] = 0;
    RawResponse r = s.post("/v1/completions", b);
    EXPECT_EQ(r.status, 200) << r.body;
    b["logprobs"] = nullptr;
    EXPECT_EQ(s.post("/v1/completions", b).status, 200);
    b["logprobs"] = 6;
    r = s.post("/v1/completions", b);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "logprobs") << r.body;
    b["logprobs"] = true;  // a boolean is the chat spelling
    r = s.post("/v1/completions", b);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "logprobs") << r.body;
    // Chat keeps the boolean.
    json c = {{"model", "fake"}, {"messages", json::array({user("hi")})}, {"max_tokens", 2}, {"logprobs", false}};
    EXPECT_EQ(s.post("/v1/chat/completions", c).status, 200);
}

// Bug 7: batched prompts (strings or id arrays) answer prompt k's choice i at index k * n + i,
// each equal to the single request of that prompt; usage sums the prompts.
TEST(Issue17, Bug7BatchedPromptsAreServed) {
    Server s("", 2);
    s.engine.end_after = 6;
    auto single = [&](const json& prompt, int seed) {
        const json j = json::parse(s.post("/v1/completions", {{"model", "fake"}, {"prompt", prompt}, {"max_tokens", 8},
                                                              {"temperature", 1.0}, {"seed", seed}}).body);
        return std::make_pair(j["choices"][0]["text"].get<std::string>(), j["usage"]["prompt_tokens"].get<int>());
    };
    for (bool stream : {false, true}) {
        const json prompts = json::array({"alpha beta", "gamma", "delta epsilon zeta"});
        const json body = {{"model", "fake"}, {"prompt", prompts}, {"max_tokens", 8}, {"temperature", 1.0},
                           {"seed", 40}, {"n", 2}, {"stream", stream}};
        const RawResponse r = s.post("/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        std::vector<std::string> texts(6);
        std::vector<int> finished(6, 0);
        if (!stream) {
            const json j = json::parse(r.body);
            ASSERT_EQ(j["choices"].size(), 6u) << r.body;
            for (const auto& ch : j["choices"]) texts[ch["index"].get<size_t>()] = ch["text"].get<std::string>();
            for (const auto& ch : j["choices"]) finished[ch["index"].get<size_t>()] = 1;
            int want_prompt = 0;
            for (int k = 0; k < 3; ++k) want_prompt += single(prompts[k], 0).second;
            EXPECT_EQ(j["usage"]["prompt_tokens"], want_prompt);
        } else {
            size_t at = 0;
            while ((at = r.body.find("data: {", at)) != std::string::npos) {
                const size_t end = r.body.find("\n\n", at);
                const json j = json::parse(r.body.substr(at + 6, end - at - 6));
                at = end;
                for (const auto& ch : j["choices"]) {
                    const size_t i = ch["index"].get<size_t>();
                    ASSERT_LT(i, 6u);
                    texts[i] += ch.value("text", "");
                    if (ch["finish_reason"].is_string()) finished[i]++;
                }
            }
        }
        for (int k = 0; k < 3; ++k)
            for (int i = 0; i < 2; ++i) {
                EXPECT_EQ(finished[size_t(k * 2 + i)], 1);
                EXPECT_EQ(texts[size_t(k * 2 + i)], single(prompts[k], 40 + k * 2 + i).first) << k << " " << i;
            }
    }
    // Token-id batches too, and a bad id names its place.
    const RawResponse ok = s.post("/v1/completions", {{"model", "fake"}, {"prompt", {{97, 98}, {99}}}, {"max_tokens", 2}});
    ASSERT_EQ(ok.status, 200) << ok.body;
    EXPECT_EQ(json::parse(ok.body)["choices"].size(), 2u);
    const RawResponse bad = s.post("/v1/completions", {{"model", "fake"}, {"prompt", {{97, 98}, {99, -1}}}, {"max_tokens", 2}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(json::parse(bad.body)["error"]["param"], "prompt[1][1]") << bad.body;
}

// Bug 1, each parameter's effect on the choice: tests/kernels/test_cpu_sample.cpp (the device
// sampler's CPU reference over the same scripted step) and tests/model/test_engine_sampler.cpp.

// Bug 1: unknown fields are a 400 that names every one of them.
TEST(Issue17, Bug1UnknownFieldsAre400NamingEachOne) {
    Server s;
    const RawResponse r = s.post("/v1/chat/completions", {{"model", "fake"}, {"messages", json::array({user("x")})},
                                                          {"min_q", 1}, {"typo_field", true}, {"max_tokens", 2}});
    ASSERT_EQ(r.status, 400) << r.body;
    const json e = json::parse(r.body)["error"];
    EXPECT_NE(e["message"].get<std::string>().find("'min_q'"), std::string::npos) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find("'typo_field'"), std::string::npos) << r.body;
    EXPECT_EQ(e["param"], "min_q");
    // A chat-only field is unknown to completions.
    const RawResponse c = s.post("/v1/completions", {{"model", "fake"}, {"prompt", "x"}, {"messages", 1}});
    EXPECT_EQ(c.status, 400);
    EXPECT_EQ(json::parse(c.body)["error"]["param"], "messages");
    // Every accepted sampling field is accepted together.
    const RawResponse ok = s.post("/v1/completions", {{"model", "fake"}, {"prompt", "x"}, {"max_tokens", 2},
                                                      {"presence_penalty", 1}, {"frequency_penalty", 1},
                                                      {"repetition_penalty", 1.1}, {"min_p", 0.05},
                                                      {"logit_bias", {{"97", 5}}}, {"user", "u"}});
    EXPECT_EQ(ok.status, 200) << ok.body;
}

// Bug 2: tool_choice "required" and a named function are enforced (the prompt ends inside the
// call markup, so the model's text continues the call), and parallel_tool_calls: false returns
// one call and stops generating after it.
namespace {
json tool_request(const json& choice, std::optional<bool> parallel = std::nullopt, bool stream = false) {
    json b = {{"model", "fake"}, {"messages", json::array({user("weather?")})}, {"max_tokens", 300},
              {"temperature", 0}, {"tools", weather_tools()}, {"stream", stream}};
    if (!choice.is_null()) b["tool_choice"] = choice;
    if (parallel) b["parallel_tool_calls"] = *parallel;
    return b;
}
json calls_of(const RawResponse& r) {
    const json j = json::parse(r.body);
    return j["choices"][0]["message"].value("tool_calls", json::array());
}
}  // namespace

TEST(Issue17, Bug2RequiredToolChoiceIsEnforced) {
    // The model would answer in prose under "auto"; under "required" its text continues a call.
    Server prose("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>");
    const RawResponse r = prose.post("/v1/chat/completions", tool_request("required"));
    ASSERT_EQ(r.status, 200) << r.body;
    const json calls = calls_of(r);
    ASSERT_EQ(calls.size(), 1u) << r.body;
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "Rome"}}));
    EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "tool_calls");
    // The same output under "auto" is plain content (nothing was forced).
    const RawResponse a = prose.post("/v1/chat/completions", tool_request("auto"));
    EXPECT_TRUE(calls_of(a).empty()) << a.body;
}

TEST(Issue17, Bug2NamedToolChoiceIsEnforced) {
    Server s("{\"city\": \"Lima\", \"days\": \"4\"}}\n</tool_call>");
    for (bool stream : {false, true}) {
        const json choice = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
        const RawResponse r = s.post("/v1/chat/completions", tool_request(choice, std::nullopt, stream));
        ASSERT_EQ(r.status, 200) << r.body;
        if (!stream) {
            const json calls = calls_of(r);
            ASSERT_EQ(calls.size(), 1u) << r.body;
            EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
            EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
                      json({{"city", "Lima"}, {"days", 4}}));
        } else {
            EXPECT_NE(r.body.find("\"tool_calls\""), std::string::npos) << r.body;
            EXPECT_NE(r.body.find("get_weather"), std::string::npos) << r.body;
            EXPECT_EQ(r.body.find("Lima\\\", \\\"days"), std::string::npos) << "call text leaked as content";
        }
    }
}

TEST(Issue17, Bug2ParallelToolCallsFalseGivesOneCall) {
    const std::string two = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n</tool_call>\n"
                            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}\n</tool_call>";
    Server s(two);
    const RawResponse all = s.post("/v1/chat/completions", tool_request(nullptr));
    ASSERT_EQ(calls_of(all).size(), 2u) << all.body;
    const RawResponse one = s.post("/v1/chat/completions", tool_request(nullptr, false));
    ASSERT_EQ(one.status, 200) << one.body;
    const json calls = calls_of(one);
    ASSERT_EQ(calls.size(), 1u) << one.body;
    EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "A"}}));
    const json j = json::parse(one.body);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    // Generation stopped at the first call's end, not after the second.
    EXPECT_LT(j["usage"]["completion_tokens"].get<size_t>(), two.size() / 2 + 10);
}

// Bug 8: assistant prefill. continue_final_message leaves the final assistant message open and
// add_generation_prompt: false renders no new turn: the engine sees exactly the prompt a
// completions request with that text gives (the fake's greedy output is a hash of its state).
TEST(Issue17, Bug8AssistantPrefillIsHonoured) {
    Server s;
    s.engine.end_after = 12;
    const json msgs = json::array({user("hi"), json{{"role", "assistant"}, {"content", "The answer is"}}});
    auto chat = [&](const json& extra) {
        json b = {{"model", "fake"}, {"messages", msgs}, {"max_tokens", 20}, {"temperature", 0}};
        b.update(extra);
        const RawResponse r = s.post("/v1/chat/completions", b);
        EXPECT_EQ(r.status, 200) << r.body;
        const json j = json::parse(r.body);
        return std::make_pair(j["choices"][0]["message"]["content"].get<std::string>(), j["usage"]["prompt_tokens"].get<int>());
    };
    auto completion = [&](const std::string& prompt) {
        const json j = json::parse(s.post("/v1/completions", {{"model", "fake"}, {"prompt", prompt}, {"max_tokens", 20},
                                                              {"temperature", 0}}).body);
        return std::make_pair(j["choices"][0]["text"].get<std::string>(), j["usage"]["prompt_tokens"].get<int>());
    };
    const std::string open = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nThe answer is";
    EXPECT_EQ(chat({{"continue_final_message", true}, {"add_generation_prompt", false}}), completion(open));
    EXPECT_EQ(chat({{"continue_final_message", true}}), completion(open));
    EXPECT_EQ(chat({{"add_generation_prompt", false}}), completion(open + "<|im_end|>\n"));
    EXPECT_EQ(chat(json::object()), completion(open + "<|im_end|>\n<|im_start|>assistant\n"));
    // Contradictions and a non-assistant last message name the field.
    RawResponse r = s.post("/v1/chat/completions", {{"model", "fake"}, {"messages", msgs}, {"continue_final_message", true},
                                                    {"add_generation_prompt", true}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "continue_final_message");
    r = s.post("/v1/chat/completions", {{"model", "fake"}, {"messages", json::array({user("x")})},
                                        {"continue_final_message", true}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "continue_final_message");
}

// Bug 9: POST /v1/sessions keeps a requested id; capsule objects carry created / last-used times
// and the TTL left.
TEST(Issue17, Bug9SessionIdsAndCapsuleTimes) {
    Server s;
    RawResponse r = s.post("/v1/sessions", {{"id", "agent-7"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["id"], "agent-7");
    EXPECT_EQ(s.get("/v1/sessions/agent-7").status, 200);
    r = s.post("/v1/sessions", {{"id", "agent-7"}});
    EXPECT_EQ(r.status, 409) << r.body;
    r = s.post("/v1/sessions", {{"id", "../etc"}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "id");
    r = s.post("/v1/sessions", {{"name", "x"}});
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "name");
    EXPECT_NE(json::parse(s.post("/v1/sessions", json::object()).body)["id"].get<std::string>().rfind("sess-", 0),
              std::string::npos);

    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    std::vector<int> ids(80);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = 'a' + int(i % 26);
    r = s.post("/v1/capsules", {{"prompt", ids}, {"ttl_s", 100}, {"session_id", "agent-7"}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json cap = json::parse(r.body);
    ASSERT_TRUE(cap.contains("created") && cap.contains("last_used_at") && cap.contains("ttl_remaining_s")) << r.body;
    EXPECT_NEAR(cap["created"].get<double>(), double(now), 5.0);
    EXPECT_GE(cap["last_used_at"].get<int64_t>(), cap["created"].get<int64_t>());
    EXPECT_GT(cap["ttl_remaining_s"].get<double>(), 90.0);
    EXPECT_LE(cap["ttl_remaining_s"].get<double>(), 100.0);
    const json listed = json::parse(s.get("/v1/capsules").body);
    ASSERT_EQ(listed["data"].size(), 1u);
    EXPECT_EQ(listed["data"][0]["created"], cap["created"]);
    const RawResponse no_ttl = s.post("/v1/capsules", {{"prompt", std::vector<int>(70, 'q')}});
    ASSERT_EQ(no_ttl.status, 200) << no_ttl.body;
    EXPECT_TRUE(json::parse(no_ttl.body)["ttl_remaining_s"].is_null());
}
