// Builds small tokenizer.json documents for loader tests and the fuzz seed corpus: the 256
// byte-level tokens, a few merges, a few added tokens, Qwen's normaliser and pre-tokenizer.
#include "tiny_tokenizer_util.h"

#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace frost::text::testing {

nlohmann::json tiny_tokenizer_json() {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) {
        std::string ch;
        utf8_append(ch, byte_level_char(static_cast<uint8_t>(b)));
        vocab[ch] = b;
    }
    // "he", "ll", "hell", "hello", "\u0120w" (space + w)
    vocab["he"] = 256;
    vocab["ll"] = 257;
    vocab["hell"] = 258;
    vocab["hello"] = 259;
    vocab["\xC4\xA0w"] = 260;
    nlohmann::json merges = nlohmann::json::array({"h e", "l l", "he ll", "hell o"});
    merges.push_back(nlohmann::json::array({"\xC4\xA0", "w"}));
    nlohmann::json added = nlohmann::json::array();
    added.push_back({{"id", 261}, {"content", "<|end|>"}, {"special", true}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"single_word", false}});
    added.push_back({{"id", 262}, {"content", "<x>"}, {"special", false}, {"lstrip", true},
                     {"rstrip", true}, {"normalized", false}, {"single_word", false}});
    nlohmann::json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    return {
        {"version", "1.0"},
        {"added_tokens", added},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           nlohmann::json::array({{{"type", "Split"}, {"pattern", {{"Regex", std::string(kQwen2SplitRegex)}}},
                                   {"behavior", "Isolated"}, {"invert", false}},
                                  bl})}}},
        {"post_processor", bl},
        {"decoder", bl},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"byte_fallback", false},
          {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}},
    };
}

}  // namespace frost::text::testing
