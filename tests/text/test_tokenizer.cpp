// Tokenizer against the real Qwen3 tokenizer.json: ids known from the `tokenizers` package,
// round trips, streaming decode that never splits a UTF-8 character, added tokens.
#include <gtest/gtest.h>

#include <random>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text_test_util.h"

using namespace frost::text;
using frost::text::testing::qwen3_tokenizer;

#define REQUIRE_TOKENIZER()                                                  \
    const Tokenizer* tok = qwen3_tokenizer();                                \
    ASSERT_NE(tok, nullptr) << "fixture missing or unreadable: " FROST_FIXTURES_DIR "/tokenizer-qwen3 (" << frost_last_error() << ")";

TEST(Tokenizer, LoadsQwen3Fixture) {
    REQUIRE_TOKENIZER();
    EXPECT_EQ(tok->vocab_size(), 151669);
    EXPECT_EQ(tok->split_pattern(), SplitPattern::kQwen2);
    EXPECT_EQ(tok->token_to_id("<|im_end|>"), 151645);
    EXPECT_TRUE(tok->is_special(151645));
    EXPECT_FALSE(tok->is_special(151667));  // <think> is added but not special
    EXPECT_EQ(tok->added_tokens().size(), 26u);
}

TEST(Tokenizer, EncodesLikeTheReference) {
    REQUIRE_TOKENIZER();
    // Expected ids from tokenizers.Tokenizer.from_file(...).encode(text).ids (tokenizers 0.23).
    EXPECT_EQ(tok->encode("Hello world, it's 2024! \xE4\xBD\xA0\xE5\xA5\xBD I'M here   \r\n\n  ok"),
              (std::vector<int32_t>{9707, 1879, 11, 432, 594, 220, 17, 15, 17, 19, 0, 220, 108386, 358, 27603, 1588,
                                    262, 80823, 220, 5394}));
    EXPECT_EQ(tok->encode("<|im_start|>user\nhi<|im_end|>"),
              (std::vector<int32_t>{151644, 872, 198, 6023, 151645}));
    EXPECT_TRUE(tok->encode("").empty());
}

TEST(Tokenizer, DecodeInvertsEncodeUpToNfc) {
    REQUIRE_TOKENIZER();
    std::mt19937_64 rng(std::random_device{}());
    for (int iter = 0; iter < 300; ++iter) {
        const std::string text = frost::text::testing::random_text(rng, 60);
        const std::vector<int32_t> ids = tok->encode(text);
        // NFC applies to the text between added tokens only, so normalise piecewise via a
        // second encode: decode(encode(x)) must be a fixed point.
        const std::string back = tok->decode(ids);
        EXPECT_EQ(tok->encode(back), ids) << text;
        if (text == nfc_normalize_utf8(text)) {
            EXPECT_EQ(back, text);
        }
    }
}

// encode_at_most: the same ids as encode() whenever the text fits, false exactly when it has more
// tokens than the bound, at every bound around the true count; random texts with added tokens.
TEST(Tokenizer, EncodeAtMostAgreesWithEncodeAtEveryBound) {
    REQUIRE_TOKENIZER();
    std::mt19937_64 rng(std::random_device{}());
    for (int iter = 0; iter < 200; ++iter) {
        std::string text = frost::text::testing::random_text(rng, 80);
        if (iter % 3 == 0) text = "<|im_start|>user\n" + text + "<|im_end|>\n";
        const std::vector<int32_t> full = tok->encode(text);
        const size_t n = full.size();
        for (size_t bound : {size_t(0), n / 2, n > 0 ? n - 1 : 0, n, n + 1, n * 3 + 7}) {
            std::vector<int32_t> ids = {-7};  // poisoned: must be replaced, not appended to
            const bool fits = tok->encode_at_most(text, bound, &ids);
            EXPECT_EQ(fits, n <= bound) << text << " bound " << bound;
            if (fits) {
                EXPECT_EQ(ids, full) << text;
            }
        }
    }
}

// A prompt far past the bound is refused from its length alone: 4M newlines (an 8 MiB JSON body
// of "\n" escapes) against a 1024-token context, where the whole encoding takes seconds.
TEST(Tokenizer, EncodeAtMostRefusesAHugePieceBeforeMergingIt) {
    REQUIRE_TOKENIZER();
    const std::string lines(4u << 20, '\n');
    std::vector<int32_t> ids;
    EXPECT_FALSE(tok->encode_at_most(lines, 1023, &ids));
    EXPECT_TRUE(ids.empty());  // refused before any token was made
    // Near the true count it still answers exactly (32 newlines per token here).
    const std::string some(32 * 100, '\n');
    EXPECT_EQ(tok->encode(some).size(), 100u);
    EXPECT_TRUE(tok->encode_at_most(some, 100, &ids));
    EXPECT_EQ(ids, tok->encode(some));
    EXPECT_FALSE(tok->encode_at_most(some, 99, &ids));
}

TEST(Tokenizer, SkipSpecialDropsOnlySpecialTokens) {
    REQUIRE_TOKENIZER();
    const auto ids = tok->encode("<|im_start|>a<think>b</think><|im_end|>");
    EXPECT_EQ(tok->decode(ids, true), "a<think>b</think>");
    EXPECT_EQ(tok->decode(ids, false), "<|im_start|>a<think>b</think><|im_end|>");
    const int32_t unknown[] = {151700, -5, 9707};  // padded-vocab ids name no token: skipped
    EXPECT_EQ(tok->decode(unknown, 3), "Hello");
}

TEST(Tokenizer, InvalidUtf8EncodesAsReplacement) {
    REQUIRE_TOKENIZER();
    EXPECT_EQ(tok->encode("a\xFF" "b\xE2\x82"), tok->encode("a\xEF\xBF\xBD" "b\xEF\xBF\xBD"));
}

TEST(DecodeStream, NeverSplitsACharacterAndMatchesDecode) {
    REQUIRE_TOKENIZER();
    std::mt19937_64 rng(std::random_device{}());
    for (int iter = 0; iter < 300; ++iter) {
        std::vector<int32_t> ids = tok->encode(frost::text::testing::random_text(rng, 40));
        // Mix in raw byte tokens (ids 0..255 are single bytes) to cut characters mid-sequence.
        for (int k = 0; k < 3; ++k) ids.insert(ids.begin() + static_cast<long>(rng() % (ids.size() + 1)), static_cast<int32_t>(rng() % 256));
        for (bool skip : {false, true}) {
            DecodeStream ds(*tok, skip);
            std::string all;
            for (int32_t id : ids) {
                const std::string piece = ds.push(id);
                EXPECT_TRUE(utf8_valid(piece));
                EXPECT_LE(ds.pending_bytes(), 3u);
                all += piece;
            }
            all += ds.flush();
            EXPECT_EQ(all, tok->decode(ids, skip));
        }
    }
}

TEST(DecodeStream, HoldsAPartialCharacterUntilComplete) {
    REQUIRE_TOKENIZER();
    // "你" is E4 BD A0; the byte-level tokens for single bytes let us feed it one byte at a time.
    auto byte_token = [&](uint8_t b) {
        std::string s;
        utf8_append(s, byte_level_char(b));
        return tok->token_to_id(s);
    };
    const int32_t b0 = byte_token(0xE4), b1 = byte_token(0xBD), b2 = byte_token(0xA0);
    ASSERT_GE(b0, 0);
    ASSERT_GE(b1, 0);
    ASSERT_GE(b2, 0);
    DecodeStream ds(*tok);
    EXPECT_EQ(ds.push(b0), "");
    EXPECT_EQ(ds.push(b1), "");
    EXPECT_EQ(ds.push(b2), "\xE4\xBD\xA0");
    EXPECT_EQ(ds.push(b0), "");
    EXPECT_EQ(ds.flush(), "\xEF\xBF\xBD");  // a truncated character at the end becomes U+FFFD
}
