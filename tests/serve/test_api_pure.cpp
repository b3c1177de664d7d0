// Pure request-side logic of the serve layer: OpenAI body validation (T09-T11), id rules (T14),
// path normalisation and constant-time auth (T13), incremental stop strings, SHA-256 vectors.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "serve/http_route.h"
#include "serve/ids.h"
#include "serve/json_guard.h"
#include "serve/openai_request.h"
#include "serve/sha256.h"
#include "serve/stop_matcher.h"

using namespace frost::serve;

namespace {

RequestLimits limits() {
    RequestLimits l;
    l.vocab_size = 1000;
    return l;
}

ApiError expect_bad(Endpoint ep, const std::string& body, const std::string& param_substr) {
    GenRequest r;
    ApiError e;
    EXPECT_FALSE(parse_gen_request(ep, body, limits(), &r, &e)) << body;
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(e.param.find(param_substr), std::string::npos) << body << " -> param '" << e.param << "' " << e.message;
    return e;
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

std::string chat(const std::string& extra) { return "{" + kMsgs + (extra.empty() ? "" : "," + extra) + "}"; }

}  // namespace

TEST(Request, ValidChatParses) {
    GenRequest r;
    ApiError e;
    ASSERT_TRUE(parse_gen_request(Endpoint::Chat,
                                  chat(R"("model":"m","stream":true,"stream_options":{"include_usage":true},
                                   "max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,"seed":-3,"n":2,
                                   "stop":["x","yz"],"chat_template_kwargs":{"enable_thinking":false},
                                   "tools":[{"type":"function","function":{"name":"get_w","parameters":{"type":"object"}}}],
                                   "tool_choice":{"type":"function","function":{"name":"get_w"}}, "session_id":"s_1")"),
                                  limits(), &r, &e))
        << e.message;
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_EQ(*r.max_tokens, 7);
    EXPECT_EQ(r.top_k, 40);
    EXPECT_EQ(r.seed, uint64_t(int64_t(-3)));
    EXPECT_EQ(r.n, 2);
    EXPECT_EQ(r.stop.size(), 2u);
    EXPECT_EQ(r.enable_thinking, false);
    EXPECT_EQ(r.tool_choice, ToolChoice::Named);
    EXPECT_EQ(r.session_id, "s_1");
}

TEST(Request, EveryNumericFieldRejectsBadValues) {
    // T10: zero/negative/huge ints, floats for ints, NaN-ish and out-of-range floats, wrong types.
    expect_bad(Endpoint::Chat, chat(R"("max_tokens":0)"), "max_tokens");
    expect_bad(Endpoint::Chat, chat(R"("max_tokens":-1)"), "max_tokens");
    expect_bad(Endpoint::Chat, chat(R"("max_tokens":99999999999999999999)"), "max_tokens");
    expect_bad(Endpoint::Chat, chat(R"("max_tokens":1.5)"), "max_tokens");
    expect_bad(Endpoint::Chat, chat(R"("max_tokens":"5")"), "max_tokens");
    expect_bad(Endpoint::Chat, chat(R"("max_tokens":true)"), "max_tokens");
    expect_bad(Endpoint::Chat, chat(R"("max_completion_tokens":0)"), "max_completion_tokens");
    expect_bad(Endpoint::Chat, chat(R"("n":0)"), "n");
    expect_bad(Endpoint::Chat, chat(R"("n":5)"), "n");  // over the cap of 4
    expect_bad(Endpoint::Chat, chat(R"("n":18446744073709551615)"), "n");
    expect_bad(Endpoint::Chat, chat(R"("temperature":-0.1)"), "temperature");
    expect_bad(Endpoint::Chat, chat(R"("temperature":2.5)"), "temperature");
    expect_bad(Endpoint::Chat, chat(R"("temperature":"hot")"), "temperature");
    expect_bad(Endpoint::Chat, chat(R"("top_p":0)"), "top_p");
    expect_bad(Endpoint::Chat, chat(R"("top_p":1.01)"), "top_p");
    expect_bad(Endpoint::Chat, chat(R"("top_k":-2)"), "top_k");
    expect_bad(Endpoint::Chat, chat(R"("top_k":4294967296)"), "top_k");
    expect_bad(Endpoint::Chat, chat(R"("seed":1.0)"), "seed");
    expect_bad(Endpoint::Chat, chat(R"("seed":99999999999999999999)"), "seed");
    expect_bad(Endpoint::Chat, chat(R"("presence_penalty":3)"), "presence_penalty");
    expect_bad(Endpoint::Chat, chat(R"("frequency_penalty":-2.5)"), "frequency_penalty");
    expect_bad(Endpoint::Chat, chat(R"("logit_bias":{"5000":1})"), "logit_bias");
    expect_bad(Endpoint::Chat, chat(R"("logit_bias":{"5":1000})"), "logit_bias");
    expect_bad(Endpoint::Chat, chat(R"("logit_bias":{"abc":1})"), "logit_bias");
}

TEST(Request, NonFiniteLiteralsAndMalformedJsonAre400) {
    for (const char* body : {R"({"messages":[],"temperature":NaN})", R"({"messages":[{"role":"user","content":"x"}],"temperature":Infinity})",
                             R"({"messages":[{"role":"user","content":"x"}],"temperature":1e400})",
                             "{", "[1,2]", "", "null", R"({"messages":[{"role":"user","content":"x"}],})"}) {
        GenRequest r;
        ApiError e;
        EXPECT_FALSE(parse_gen_request(Endpoint::Chat, body, limits(), &r, &e)) << body;
        EXPECT_EQ(e.status, 400);
    }
}

TEST(Request, MessagesAndToolsAreChecked) {
    expect_bad(Endpoint::Chat, "{}", "messages");
    expect_bad(Endpoint::Chat, R"({"messages":[]})", "messages");
    expect_bad(Endpoint::Chat, R"({"messages":"hi"})", "messages");
    expect_bad(Endpoint::Chat, R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role");
    expect_bad(Endpoint::Chat, R"({"messages":[{"role":"user","content":"x"},{"role":"user","content":5}]})",
               "messages[1].content");
    expect_bad(Endpoint::Chat, R"({"messages":[{"role":"user"}]})", "messages[0].content");
    expect_bad(Endpoint::Chat, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content[0]");
    expect_bad(Endpoint::Chat, chat(R"("tools":[{"type":"function","function":{"name":"bad name!"}}])"), "tools[0].function.name");
    expect_bad(Endpoint::Chat, chat(R"("tools":{})"), "tools");
    expect_bad(Endpoint::Chat, chat(R"("tool_choice":"sometimes")"), "tool_choice");
    expect_bad(Endpoint::Chat, chat(R"("tool_choice":"required")"), "tool_choice");
    expect_bad(Endpoint::Chat, chat(R"("tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}})"),
               "tool_choice.function.name");
    expect_bad(Endpoint::Chat, chat(R"("stop":["a","b","c","d","e"])"), "stop");
    expect_bad(Endpoint::Chat, chat(R"("stop":[""])"), "stop");
    expect_bad(Endpoint::Chat, chat(R"("stop":5)"), "stop");
    expect_bad(Endpoint::Chat, chat(R"("enable_thinking":"yes")"), "enable_thinking");
    expect_bad(Endpoint::Chat, chat(R"("chat_template_kwargs":{"enable_thinking":1})"), "chat_template_kwargs.enable_thinking");
    expect_bad(Endpoint::Chat, chat(R"("stream":"true")"), "stream");
    expect_bad(Endpoint::Chat, chat(R"("logprobs":1)"), "logprobs");
    expect_bad(Endpoint::Chat, chat(R"("top_logprobs":2)"), "top_logprobs");  // needs logprobs: true
    expect_bad(Endpoint::Chat, chat(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs");
    expect_bad(Endpoint::Chat, chat(R"("session_id":"../etc")"), "session_id");
    expect_bad(Endpoint::Chat, chat(R"("capsule_id":"a\u0000b")"), "capsule_id");
}

TEST(Request, CompletionPrompts) {
    GenRequest r;
    ApiError e;
    ASSERT_TRUE(parse_gen_request(Endpoint::Completion, R"({"prompt":[1,2,3]})", limits(), &r, &e));
    EXPECT_TRUE(r.prompt_is_ids);
    EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
    ASSERT_TRUE(parse_gen_request(Endpoint::Completion, R"({"prompt":["hello"]})", limits(), &r, &e));
    EXPECT_EQ(r.prompt_text, "hello");
    expect_bad(Endpoint::Completion, R"({"prompt":[1,1000]})", "prompt[1]");
    expect_bad(Endpoint::Completion, R"({"prompt":[-1]})", "prompt[0]");
    ASSERT_TRUE(parse_gen_request(Endpoint::Completion, R"({"prompt":["a","b"]})", limits(), &r, &e));
    EXPECT_EQ(r.batch.size(), 2u);  // batched prompts (issue 17 bug 7)
    expect_bad(Endpoint::Completion, R"({"prompt":["a",[1]]})", "prompt[1]");
    expect_bad(Endpoint::Completion, R"({"prompt":5})", "prompt");
    expect_bad(Endpoint::Completion, R"({})", "prompt");
    expect_bad(Endpoint::Completion, R"({"prompt":"x","echo":1})", "echo");
    expect_bad(Endpoint::Completion, R"({"prompt":"x","logprobs":6})", "logprobs");
    ASSERT_TRUE(parse_gen_request(Endpoint::Completion, R"({"prompt":"x","echo":true,"logprobs":0})", limits(), &r, &e));
    EXPECT_TRUE(r.echo);
    EXPECT_EQ(r.logprobs, 0);
}

TEST(Request, InvalidUtf8AndDeepNestingAreBoundedAndRejected) {
    const std::string bad_utf8 = std::string(R"({"messages":[{"role":"user","content":")") + "\xC3\x28" + "\"}]}";
    GenRequest r;
    ApiError e;
    EXPECT_FALSE(parse_gen_request(Endpoint::Chat, bad_utf8, limits(), &r, &e));
    EXPECT_EQ(e.code, "invalid_utf8");
    // 10 MB of '[': rejected by the linear pre-scan, never handed to a recursive parser.
    const std::string deep(10 << 20, '[');
    EXPECT_FALSE(parse_gen_request(Endpoint::Chat, deep, limits(), &r, &e));
    EXPECT_EQ(e.code, "json_too_deep");
    // Brackets inside strings do not count.
    EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[[[["})", 100), 1u);
}

TEST(Request, Utf8Validator) {
    EXPECT_TRUE(valid_utf8("plain ascii"));
    EXPECT_TRUE(valid_utf8("\xE2\x82\xAC \xF0\x9F\x98\x80"));
    EXPECT_FALSE(valid_utf8("\xC0\xAF"));          // overlong '/'
    EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));      // surrogate
    EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
    EXPECT_FALSE(valid_utf8("\xE2\x82"));          // truncated
}

TEST(Request, ContextLengthChecks) {
    GenRequest r;
    ApiError e;
    int64_t max_new = -1;
    ASSERT_TRUE(parse_gen_request(Endpoint::Chat, chat(""), limits(), &r, &e));
    EXPECT_FALSE(check_context(r, 100, 100, limits(), &max_new, &e));
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_NE(e.message.find("100"), std::string::npos);
    EXPECT_FALSE(check_context(r, 150, 100, limits(), &max_new, &e));
    EXPECT_NE(e.message.find("150"), std::string::npos);
    EXPECT_TRUE(check_context(r, 90, 100, limits(), &max_new, &e));
    EXPECT_EQ(max_new, 10);  // default clamped to the room left
    ASSERT_TRUE(parse_gen_request(Endpoint::Chat, chat(R"("max_tokens":11)"), limits(), &r, &e));
    EXPECT_FALSE(check_context(r, 90, 100, limits(), &max_new, &e));
    EXPECT_EQ(e.param, "max_tokens");
}

TEST(Ids, RulesAndFreshIds) {
    std::string why;
    EXPECT_TRUE(valid_id("sess-0123_abc", &why));
    for (const std::string& bad : {std::string(""), std::string("../x"), std::string("a/b"), std::string("a\0b", 3),
                                  std::string(10240, 'a'), std::string("caf\xC3\xA9"), std::string("-x"), std::string("a b"),
                                  std::string("a.b")})
        EXPECT_FALSE(valid_id(bad, &why)) << bad;
    const std::string a = new_id("cap"), b = new_id("cap");
    EXPECT_NE(a, b);
    EXPECT_TRUE(valid_id(a, &why));
}

TEST(Route, NormalisationRefusesAmbiguousSpellings) {
    RoutePath p;
    std::string why;
    ASSERT_TRUE(normalize_target("/v1/chat/completions", &p, &why));
    EXPECT_EQ(p.path, "/v1/chat/completions");
    ASSERT_TRUE(normalize_target("/V1/Models/", &p, &why));
    EXPECT_EQ(p.path, "/v1/models");
    ASSERT_TRUE(normalize_target("/HEALTH?x=1", &p, &why));
    EXPECT_EQ(p.path, "/health");
    EXPECT_EQ(p.query, "x=1");
    ASSERT_TRUE(normalize_target("/v1/mod%65ls", &p, &why));
    EXPECT_EQ(p.path, "/v1/models");
    for (const char* bad : {"//v1/models", "/v1//models", "/v1/../health", "/v1/./models", "/v1%2Fmodels", "/v1%2fmodels",
                            "/v1/%2e%2e/health", "/v1\\models", "/v1/models%", "/v1/models%zz", "v1/models", "",
                            "/v1/mod\x01ls", "/v1/caf\xC3\xA9", "http://x/v1/models",
                            "/v1/capsules/x%3Fy", "/v1/models%23", "/.%3Fmodels/-"})
        EXPECT_FALSE(normalize_target(bad, &p, &why)) << bad;
    EXPECT_TRUE(is_public_path("/health"));
    EXPECT_FALSE(is_public_path("/metrics"));
    EXPECT_FALSE(is_public_path("/v1/models"));
}

TEST(Route, ConstantTimeCompareAndBearer) {
    EXPECT_TRUE(ct_equal("abc", "abc"));
    EXPECT_FALSE(ct_equal("abc", "abd"));
    EXPECT_FALSE(ct_equal("abc", "abcd"));
    EXPECT_FALSE(ct_equal("", "a"));
    EXPECT_TRUE(ct_equal("", ""));
    EXPECT_TRUE(authorized("Bearer sk-1", "sk-1"));
    EXPECT_TRUE(authorized("bearer sk-1", "sk-1"));
    EXPECT_FALSE(authorized("Bearer sk-2", "sk-1"));
    EXPECT_FALSE(authorized("sk-1", "sk-1"));
    EXPECT_FALSE(authorized("", "sk-1"));
    EXPECT_FALSE(authorized("Basic sk-1", "sk-1"));
    EXPECT_FALSE(authorized("Bearer sk-1 ", "sk-1"));
    EXPECT_TRUE(authorized("", ""));  // no key configured: auth off
}

TEST(Stop, MatchesAcrossPiecesLikeANaiveSearch) {
    std::mt19937 rng(std::random_device{}());
    const std::string alphabet = "abc";
    for (int trial = 0; trial < 300; ++trial) {
        std::string text;
        const int len = 1 + int(rng() % 40);
        for (int i = 0; i < len; ++i) text.push_back(alphabet[rng() % alphabet.size()]);
        std::vector<std::string> stops;
        const int ns = 1 + int(rng() % 3);
        for (int s = 0; s < ns; ++s) {
            std::string st;
            const int sl = 1 + int(rng() % 4);
            for (int i = 0; i < sl; ++i) st.push_back(alphabet[rng() % alphabet.size()]);
            stops.push_back(st);
        }
        // Oracle with the same piece boundaries: generation stops at the first piece after which
        // the text contains a stop string, cut where the earliest contained stop string begins.
        std::vector<size_t> ends;
        for (size_t i = 0; i < text.size();) {
            i = std::min(text.size(), i + 1 + rng() % 3);
            ends.push_back(i);
        }
        size_t cut = std::string::npos;
        for (size_t e : ends) {
            const std::string seen = text.substr(0, e);
            for (const auto& st : stops) cut = std::min(cut, seen.find(st));
            if (cut != std::string::npos) break;
        }
        const std::string expect = cut == std::string::npos ? text : text.substr(0, cut);
        StopMatcher m(stops);
        std::string got;
        size_t prev = 0;
        for (size_t e : ends) {
            got += m.feed(text.substr(prev, e - prev));
            prev = e;
        }
        got += m.flush();
        ASSERT_EQ(got, expect) << "text=" << text;
        ASSERT_EQ(m.stopped(), cut != std::string::npos);
    }
}

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(digest_hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(digest_hex(sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    EXPECT_EQ(digest_hex(sha256(two_blocks.data(), two_blocks.size())),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const std::string million(1000000, 'a');
    EXPECT_EQ(digest_hex(sha256(million.data(), million.size())),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    const int32_t a[] = {1, 2, 3}, b[] = {1, 2, 4};
    EXPECT_NE(token_digest(a, 3), token_digest(b, 3));
    EXPECT_NE(token_digest(a, 2), token_digest(a, 3));
}

// Issue 13 B3: top_p 1e-46 passed the double check, became 0 as the engine's float and failed
// there (500), poisoning the slot. Sampling values are validated as the float they become.
TEST(Request, SamplingValuesAreValidatedAsFloat) {
    for (const char* v : {"1e-46", "1e-39", "4e-45"}) {
        expect_bad(Endpoint::Chat, chat(std::string("\"top_p\":") + v), "top_p");
        expect_bad(Endpoint::Chat, chat(std::string("\"temperature\":") + v), "temperature");
    }
    GenRequest r;
    ApiError e;
    ASSERT_TRUE(parse_gen_request(Endpoint::Chat, chat("\"top_p\":1e-30,\"temperature\":0"), limits(), &r, &e)) << e.message;
    EXPECT_GT(float(r.top_p), 0.0f);
    EXPECT_EQ(r.temperature, 0.0);
}

// Issue 13 B1: a tool call's arguments string nested past the bound is a 400 naming that field
// (the body's own depth guard cannot see inside strings).
TEST(Request, DeepArgumentsStringIsRefused) {
    auto body = [](size_t depth) {
        std::string args;
        for (size_t i = 0; i < depth; ++i) args += "{\\\"a\\\":";
        args += '1';
        args.append(depth, '}');
        return std::string(R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,)"
                           R"("tool_calls":[{"type":"function","function":{"name":"f","arguments":")") +
               args + "\"}}]}]}";
    };
    expect_bad(Endpoint::Chat, body(10000), "messages[1].tool_calls[0].function.arguments");
    expect_bad(Endpoint::Chat, body(limits().max_arguments_depth + 1), "function.arguments");
    GenRequest r;
    ApiError e;
    EXPECT_TRUE(parse_gen_request(Endpoint::Chat, body(limits().max_arguments_depth), limits(), &r, &e)) << e.message;
}
