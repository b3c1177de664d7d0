// Loader validation (reliability T08): malformed tokenizer.json inputs are refused with a clear
// message, in bounded time, without crashing; a valid tiny tokenizer works end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "exec/error.h"
#include "text/tokenizer.h"
#include "tiny_tokenizer_util.h"

using namespace frost::text;
using frost::text::testing::tiny_tokenizer_json;
using nlohmann::json;

namespace {

frost_status load(const json& j, std::unique_ptr<Tokenizer>* out) { return Tokenizer::load_json(j.dump(), "test.json", out); }

void expect_refused(const json& j, const char* needle, frost_status want = FROST_ERR_CORRUPT) {
    std::unique_ptr<Tokenizer> t;
    EXPECT_EQ(load(j, &t), want) << needle;
    EXPECT_EQ(t, nullptr);
    EXPECT_NE(frost::last_error().find(needle), std::string::npos) << frost::last_error();
}

}  // namespace

TEST(TokenizerLoad, TinyTokenizerEncodesWithMergesAndAddedTokens) {
    std::unique_ptr<Tokenizer> t;
    ASSERT_EQ(load(tiny_tokenizer_json(), &t), FROST_OK) << frost::last_error();
    EXPECT_EQ(t->encode("hello"), (std::vector<int32_t>{259}));
    EXPECT_EQ(t->encode("hello world"), (std::vector<int32_t>{259, 260, 'o', 'r', 'l', 'd'}));
    EXPECT_EQ(t->encode("hello<|end|>he"), (std::vector<int32_t>{259, 261, 256}));
    // <x> strips the whitespace around it.
    EXPECT_EQ(t->encode("he  <x>  he"), (std::vector<int32_t>{256, 262, 256}));
    EXPECT_EQ(t->decode(std::vector<int32_t>{259, 261, 260}, true), "hello w");
}

TEST(TokenizerLoad, RefusesMalformedDocuments) {
    expect_refused(json::array(), "top level");
    std::unique_ptr<Tokenizer> t;
    EXPECT_EQ(Tokenizer::load_json("{\"model\": ", "x", &t), FROST_ERR_CORRUPT);
    EXPECT_EQ(Tokenizer::load_json("", "x", &t), FROST_ERR_CORRUPT);
    json j = tiny_tokenizer_json();
    j.erase("model");
    expect_refused(j, "model");
}

TEST(TokenizerLoad, RefusesDeepNestingQuickly) {
    const size_t depth = 100000;
    const std::string doc = "{\"model\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
    std::unique_ptr<Tokenizer> t;
    EXPECT_EQ(Tokenizer::load_json(doc, "deep.json", &t), FROST_ERR_CORRUPT);
    EXPECT_NE(frost::last_error().find("nests"), std::string::npos);
}

TEST(TokenizerLoad, RefusesHugeStringsAndFiles) {
    json j = tiny_tokenizer_json();
    j["model"]["vocab"][std::string(kMaxTokenBytes + 1, 'a')] = 300;
    expect_refused(j, "length");
    std::unique_ptr<Tokenizer> t;
    std::string big(kMaxTokenizerFileBytes + 1, ' ');
    EXPECT_EQ(Tokenizer::load_json(big, "big.json", &t), FROST_ERR_CORRUPT);
    EXPECT_NE(frost::last_error().find("limit"), std::string::npos);
}

TEST(TokenizerLoad, RefusesDuplicateAndOutOfRangeIds) {
    json j = tiny_tokenizer_json();
    j["model"]["vocab"]["zz"] = 5;  // id 5 already names a byte token
    expect_refused(j, "duplicate id");
    j = tiny_tokenizer_json();
    j["model"]["vocab"]["zz"] = -1;
    expect_refused(j, "out of range");
    j = tiny_tokenizer_json();
    j["model"]["vocab"]["zz"] = int64_t{1} << 40;
    expect_refused(j, "out of range");
    j = tiny_tokenizer_json();
    j["model"]["vocab"]["zz"] = "7";
    expect_refused(j, "not an integer");
    j = tiny_tokenizer_json();
    j["added_tokens"][1]["id"] = 261;
    expect_refused(j, "duplicate");
    j = tiny_tokenizer_json();
    j["added_tokens"][0]["id"] = 259;  // "<|end|>" on the id of "hello"
    expect_refused(j, "duplicate id");
    j = tiny_tokenizer_json();
    j["added_tokens"][0]["id"] = kMaxTokenId + 1;
    expect_refused(j, "out of range");
}

TEST(TokenizerLoad, RefusesMergesNamingUnknownTokens) {
    json j = tiny_tokenizer_json();
    j["model"]["merges"].push_back("h zzz");
    expect_refused(j, "not in the vocab");
    j = tiny_tokenizer_json();
    j["model"]["merges"].push_back("o w");  // "ow" is not a token
    expect_refused(j, "produces a token");
    j = tiny_tokenizer_json();
    j["model"]["merges"].push_back("a b c");
    expect_refused(j, "is not");
    j = tiny_tokenizer_json();
    j["model"]["merges"].push_back(json::array({"a"}));
    expect_refused(j, "neither");
}

TEST(TokenizerLoad, RefusesByteFallbackAndMissingByteTokens) {
    json j = tiny_tokenizer_json();
    j["model"]["byte_fallback"] = true;
    j["model"]["vocab"]["<0xZZ>"] = 300;
    j["model"]["vocab"]["<0x-1>"] = 301;
    expect_refused(j, "byte_fallback", FROST_ERR_UNSUPPORTED);
    j = tiny_tokenizer_json();
    j["model"]["vocab"].erase("a");
    expect_refused(j, "byte-level token");
}

TEST(TokenizerLoad, RefusesUnknownPreTokenizerRegex) {
    json j = tiny_tokenizer_json();
    // A classic catastrophic-backtracking pattern: never handed to a regex engine.
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a+)+$";
    expect_refused(j, "not one of the known", FROST_ERR_UNSUPPORTED);
    j = tiny_tokenizer_json();
    j["normalizer"] = {{"type", "NFKC"}};
    expect_refused(j, "normalizer", FROST_ERR_UNSUPPORTED);
    j = tiny_tokenizer_json();
    j["post_processor"] = {{"type", "TemplateProcessing"}};
    expect_refused(j, "post_processor", FROST_ERR_UNSUPPORTED);
}

TEST(TokenizerLoad, LoadsFromFileOrDirectoryAndReportsMissingFiles) {
    const auto dir = std::filesystem::temp_directory_path() / ("frost_tok_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        std::ofstream(dir / "tokenizer.json") << tiny_tokenizer_json().dump();
    }
    std::unique_ptr<Tokenizer> t;
    EXPECT_EQ(Tokenizer::load(dir.string(), &t), FROST_OK) << frost::last_error();
    EXPECT_EQ(Tokenizer::load((dir / "tokenizer.json").string(), &t), FROST_OK);
    EXPECT_EQ(Tokenizer::load((dir / "nope.json").string(), &t), FROST_ERR_IO);
    EXPECT_EQ(t, nullptr);
    std::filesystem::remove_all(dir);
}
