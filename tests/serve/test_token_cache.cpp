// Re-tokenising only the new part of a resent history (token_cache.h): with the real Qwen3
// tokenizer and chat template (shared fixtures), the cached path's ids equal a full encode of the
// whole prompt over random multi-turn conversations with awkward content (whitespace at the
// edges, partial and complete special-token strings, non-ASCII); the split rule refuses cuts
// that a token straddles or that lstrip / whitespace could cross; and over HTTP with the fake
// text layer, later turns encode fewer bytes while the prompt stays identical.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/fake_backend.h"
#include "serve/model_backend.h"
#include "serve/token_cache.h"

using namespace frost::serve;
using nlohmann::json;

namespace {

std::string random_text(std::mt19937& rng) {
    static const char* kPieces[] = {"read the file", " ", "\n", "  ", "\t", "<|im_start|>", "<|im_end|>", "<|im_",
                                    "|>", "<think>", "</think>", "<tool_call>", "é", "数据", "🙂", "fn()", "x=1;",
                                    "<", "assistant", "user\n", "\n\n", "<|endoftext|>", "a"};
    std::string s;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) s += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    return s;
}

}  // namespace

TEST(TokenCache, CachedEncodeEqualsFullEncodeWithTheRealQwen3Tokenizer) {
    std::unique_ptr<ModelText> text;
    ASSERT_EQ(ModelText::load(std::string(FROST_FIXTURES_DIR) + "/tokenizer-qwen3", {}, &text), FROST_OK);
    std::mt19937 rng(std::random_device{}());
    TokenCache cache;
    size_t checked = 0;
    for (int conv = 0; conv < 6; ++conv) {
        const std::string owner = "key" + std::to_string(conv % 2);
        json messages = json::array({json{{"role", "system"}, {"content", random_text(rng)}}});
        for (int turn = 0; turn < 5; ++turn) {
            messages.push_back(json{{"role", "user"}, {"content", random_text(rng)}});
            ChatRender r;
            r.messages = messages;
            r.tools = json::array();
            std::string full, hist;
            ASSERT_EQ(text->render_chat(r, &full), FROST_OK);
            r.add_generation_prompt = false;
            ASSERT_EQ(text->render_chat(r, &hist), FROST_OK);
            ASSERT_EQ(full.compare(0, hist.size(), hist), 0);
            const std::string suffix = full.substr(hist.size());
            const std::vector<int32_t> want = text->encode(full);
            std::vector<int32_t> got = cache.encode(*text, owner, hist);
            EXPECT_EQ(got, text->encode(hist));
            if (text->split_safe(hist, suffix)) {
                const std::vector<int32_t> tail = text->encode(suffix);
                got.insert(got.end(), tail.begin(), tail.end());
                EXPECT_EQ(got, want) << "conversation " << conv << " turn " << turn;
                ++checked;
            }
            messages.push_back(json{{"role", "assistant"}, {"content", random_text(rng)}});
        }
    }
    EXPECT_GT(checked, 0u);     // the generation prompt is a safe cut for the Qwen3 template
    EXPECT_GT(cache.hits(), 0u);  // and earlier turns' ids were reused
}

TEST(TokenCache, SplitRuleRefusesUnsafeCuts) {
    const std::vector<SplitToken> toks = {SplitToken{"<|im_start|>"}, SplitToken{"<|im_end|>"},
                                          SplitToken{"<|im_start|>x"}, SplitToken{"<s>", true},
                                          SplitToken{"<w>", false, true}, SplitToken{"<n>", false, false, true}};
    EXPECT_TRUE(split_is_safe("abc", "<|im_start|>user", toks));
    EXPECT_FALSE(split_is_safe("abc<|im_", "start|>user", toks));   // a token straddles the cut
    EXPECT_FALSE(split_is_safe("abc<|im_start", "|>x", toks));       // ... from deep inside it
    EXPECT_FALSE(split_is_safe("abc ", "<s>x", toks));               // lstrip reaches left
    EXPECT_FALSE(split_is_safe("abc", "<w>x", toks));                // single_word looks left
    EXPECT_FALSE(split_is_safe("abc", "<n>x", toks));                // matched after NFC only
    EXPECT_FALSE(split_is_safe("abc", " <|im_start|>", toks));       // whitespace at the cut
    EXPECT_FALSE(split_is_safe("abc", "plain", toks));               // no token at the cut
    EXPECT_TRUE(split_is_safe("", "anything", toks));
}

TEST(TokenCache, LaterTurnsEncodeOnlyTheNewTextAndKeysDoNotShare) {
    frost::serve::testing::FakeText text;
    TokenCache cache;
    std::mt19937 rng(std::random_device{}());
    std::string hist;
    for (int turn = 0; turn < 4; ++turn) {
        std::string add = "<|im_start|>user\n";
        for (int i = 0; i < 200; ++i) add += char('a' + rng() % 26);
        add += "<|im_end|>\n";
        hist += add;
        const uint64_t before = text.encoded_bytes.load();
        const std::vector<int32_t> got = cache.encode(text, "key0", hist);
        const uint64_t used = text.encoded_bytes.load() - before;
        EXPECT_EQ(used, turn == 0 ? hist.size() : add.size()) << turn;
        EXPECT_EQ(got, text.encode(hist));
    }
    const uint64_t before = text.encoded_bytes.load();
    (void)cache.encode(text, "key1", hist);  // another key never sees key0's entries
    EXPECT_EQ(text.encoded_bytes.load() - before, hist.size());
}

// The bounded form (a prompt past the context is refused without encoding all of it): with the
// real tokenizer, over growing histories that reuse earlier turns, it agrees with the full encode
// at every bound around the true count, and a refused text is not remembered.
TEST(TokenCache, EncodeAtMostAgreesWithEncodeAtEveryBound) {
    std::unique_ptr<ModelText> text;
    ASSERT_EQ(ModelText::load(std::string(FROST_FIXTURES_DIR) + "/tokenizer-qwen3", {}, &text), FROST_OK);
    std::mt19937 rng(std::random_device{}());
    TokenCache cache;
    std::string hist;
    for (int turn = 0; turn < 8; ++turn) {
        hist += "<|im_start|>user\n" + random_text(rng) + random_text(rng) + "<|im_end|>\n";
        const std::vector<int32_t> full = text->encode(hist);
        const size_t n = full.size();
        for (size_t bound : {n > 0 ? n - 1 : 0, n / 3, n, n + 5}) {
            std::vector<int32_t> ids = {-1};
            const bool fits = cache.encode_at_most(*text, "k", hist, bound, &ids);
            EXPECT_EQ(fits, n <= bound) << turn << " bound " << bound;
            if (fits) {
                EXPECT_EQ(ids, full) << turn;
            }
        }
    }
    EXPECT_GT(cache.hits(), 0u);
}
