// Which stop ended a turn: the stop matcher names the stop string that fired, the scheduler puts
// it on the choice's Finish event, and POST /v1/messages reports Anthropic's
// `stop_reason: "stop_sequence"` with `stop_sequence` = that string (streamed in message_delta
// and in the message object), while OpenAI's routes keep `finish_reason: "stop"`. Over HTTP on
// the scripted fake engine (the output is exactly the script's bytes, one token each, so every
// stop string straddles token boundaries). End to end with the official `anthropic` client:
// tests/python/serve/test_messages.py (test_stop_sequence_*).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/fake_backend.h"
#include "serve/fake_server.h"
#include "serve/http_client.h"
#include "serve/stop_matcher.h"

using namespace frost::serve;
using namespace frost::serve::testing;
using nlohmann::json;

namespace {

// The body of a 200 reply: parsed JSON, or the raw SSE text for a stream.
json post(const ScriptedServer& s, const std::string& path, const json& body) {
    const RawResponse r = s.post(path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body.empty() || body.value("stream", false) ? json(r.body) : json::parse(r.body);
}

json messages_body(const std::vector<std::string>& stops, bool stream) {
    json b = {{"model", "fake"}, {"max_tokens", 200}, {"messages", json::array({{{"role", "user"}, {"content", "go"}}})}};
    if (!stops.empty()) b["stop_sequences"] = stops;
    if (stream) b["stream"] = true;
    return b;
}

// The SSE events of an Anthropic stream, by name.
std::vector<std::pair<std::string, json>> anthropic_events(const std::string& text) {
    std::vector<std::pair<std::string, json>> out;
    for (size_t at = 0;;) {
        const size_t ev = text.find("event: ", at);
        if (ev == std::string::npos) break;
        const size_t nl = text.find('\n', ev);
        const size_t data = text.find("data: ", nl);
        const size_t end = text.find("\n\n", data);
        out.emplace_back(text.substr(ev + 7, nl - ev - 7), json::parse(text.substr(data + 6, end - data - 6)));
        at = end + 2;
    }
    return out;
}

std::string streamed_text(const std::vector<std::pair<std::string, json>>& evs) {
    std::string s;
    for (const auto& [name, j] : evs)
        if (name == "content_block_delta" && j["delta"]["type"] == "text_delta") s += j["delta"]["text"].get<std::string>();
    return s;
}

}  // namespace

// The matcher names the stop that fired: the earliest in the text, whatever its place in the
// list, across random piece boundaries, against a naive oracle on the whole text.
TEST(StopMatcher, NamesTheStopThatFired) {
    std::mt19937_64 rng(std::random_device{}());
    const std::string alphabet = "abc";
    int fired = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        std::string text;
        for (int i = 0, n = 1 + int(rng() % 30); i < n; ++i) text.push_back(alphabet[rng() % alphabet.size()]);
        std::vector<std::string> stops;
        for (int s = 0, ns = 1 + int(rng() % 4); s < ns; ++s) {
            std::string st;
            for (int i = 0, sl = 1 + int(rng() % 4); i < sl; ++i) st.push_back(alphabet[rng() % alphabet.size()]);
            stops.push_back(st);
        }
        // Oracle: the matcher sees the text piece by piece and stops after the first piece whose
        // end completes a stop; of the stops complete by then, the one starting earliest wins
        // (ties: the first listed).
        std::vector<size_t> ends;
        for (size_t i = 0; i < text.size();) ends.push_back(i = std::min(text.size(), i + 1 + rng() % 3));
        std::string want;
        for (size_t e : ends) {
            size_t cut = std::string::npos;
            for (const auto& st : stops) {
                const size_t at = text.substr(0, e).find(st);
                if (at < cut) {
                    cut = at;
                    want = st;
                }
            }
            if (cut != std::string::npos) break;
        }
        StopMatcher m(stops);
        size_t prev = 0;
        for (size_t e : ends) {
            m.feed(text.substr(prev, e - prev));
            prev = e;
        }
        m.flush();
        ASSERT_EQ(m.matched(), want) << "text=" << text;
        ASSERT_EQ(m.stopped(), !want.empty());
        fired += !want.empty();
    }
    EXPECT_GT(fired, 200);
}

TEST(StopSequence, MessagesNameTheStopThatFired) {
    ScriptedServer s("alpha STOP beta END gamma");
    // Listed second, but first in the text.
    json m = post(s, "/v1/messages", messages_body({"END", "STOP"}, false));
    EXPECT_EQ(m["stop_reason"], "stop_sequence") << m.dump();
    EXPECT_EQ(m["stop_sequence"], "STOP") << m.dump();
    EXPECT_EQ(m["content"][0]["text"], "alpha ");
    // Only the later one.
    m = post(s, "/v1/messages", messages_body({"END", "zzz"}, false));
    EXPECT_EQ(m["stop_reason"], "stop_sequence");
    EXPECT_EQ(m["stop_sequence"], "END");
    EXPECT_EQ(m["content"][0]["text"], "alpha STOP beta ");
    // None fires: the end token is end_turn, stop_sequence null.
    m = post(s, "/v1/messages", messages_body({"zzz"}, false));
    EXPECT_EQ(m["stop_reason"], "end_turn");
    EXPECT_TRUE(m["stop_sequence"].is_null());
    EXPECT_EQ(m["content"][0]["text"], "alpha STOP beta END gamma");
    m = post(s, "/v1/messages", messages_body({}, false));
    EXPECT_EQ(m["stop_reason"], "end_turn");
    // The token budget ends first: max_tokens, even though the stop would have come later.
    json b = messages_body({"END"}, false);
    b["max_tokens"] = 4;
    m = post(s, "/v1/messages", b);
    EXPECT_EQ(m["stop_reason"], "max_tokens");
    EXPECT_TRUE(m["stop_sequence"].is_null());
}

TEST(StopSequence, StreamedMessageDeltaNamesIt) {
    ScriptedServer s("alpha STOP beta END gamma");
    for (const auto& [stops, reason, seq, text] :
         std::vector<std::tuple<std::vector<std::string>, std::string, json, std::string>>{
             {{"END", "STOP"}, "stop_sequence", "STOP", "alpha "},
             {{"a END g"}, "stop_sequence", "a END g", "alpha STOP bet"},
             {{"zzz"}, "end_turn", nullptr, "alpha STOP beta END gamma"}}) {
        const json raw = post(s, "/v1/messages", messages_body(stops, true));
        const auto evs = anthropic_events(raw.get<std::string>());
        ASSERT_GE(evs.size(), 3u) << raw;
        EXPECT_EQ(evs.front().first, "message_start");
        EXPECT_TRUE(evs.front().second["message"]["stop_sequence"].is_null());
        const auto& delta = evs[evs.size() - 2];
        ASSERT_EQ(delta.first, "message_delta");
        EXPECT_EQ(delta.second["delta"]["stop_reason"], reason);
        EXPECT_EQ(delta.second["delta"]["stop_sequence"], seq);
        EXPECT_EQ(evs.back().first, "message_stop");
        EXPECT_EQ(streamed_text(evs), text);
    }
}

// A stop string whose last part the detokenizer releases only at the end (the real one holds an
// unfinished UTF-8 character so): the token budget ran out first, but the text is cut by the
// stop, so the stop is the reason, on both APIs.
TEST(StopSequence, AStopCompletedByTheFinalFlushIsTheReason) {
    ScriptedServer s("alpha STOP beta");
    s.text.lagging_detok = true;
    json b = messages_body({"STOP"}, false);
    b["max_tokens"] = 10;  // "alpha STOP": the P comes out of the flush
    json m = post(s, "/v1/messages", b);
    EXPECT_EQ(m["stop_reason"], "stop_sequence") << m.dump();
    EXPECT_EQ(m["stop_sequence"], "STOP");
    EXPECT_EQ(m["content"][0]["text"], "alpha ");
    json c = post(s, "/v1/chat/completions", {{"model", "fake"},
                                             {"max_tokens", 10},
                                             {"stop", "STOP"},
                                             {"messages", json::array({{{"role", "user"}, {"content", "go"}}})}});
    EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(c["choices"][0]["message"]["content"], "alpha ");
    // One token short of the stop: a plain length finish with everything released.
    b["max_tokens"] = 9;
    m = post(s, "/v1/messages", b);
    EXPECT_EQ(m["stop_reason"], "max_tokens");
    EXPECT_EQ(m["content"][0]["text"], "alpha STO");
}

// OpenAI's routes are unchanged: a stop string is finish_reason "stop", like the end token.
TEST(StopSequence, OpenAIRoutesKeepFinishReasonStop) {
    ScriptedServer s("alpha STOP beta END gamma");
    json c = post(s, "/v1/chat/completions", {{"model", "fake"},
                                             {"max_tokens", 200},
                                             {"stop", {"END", "STOP"}},
                                             {"messages", json::array({{{"role", "user"}, {"content", "go"}}})}});
    EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(c["choices"][0]["message"]["content"], "alpha ");
    c = post(s, "/v1/completions", {{"model", "fake"}, {"max_tokens", 200}, {"stop", "END"}, {"prompt", "go"}});
    EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(c["choices"][0]["text"], "alpha STOP beta ");
}
