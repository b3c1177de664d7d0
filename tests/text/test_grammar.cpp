// Constrained decoding engine (src/text/grammar): each front end's language against an
// independent reader (std::regex for the regex subset, nlohmann::json for JSON), on fresh random
// strings, plus the errors bad grammars and schemas must give.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "text/grammar/front_ends.h"
#include "text/grammar/machine.h"
#include "text/grammar/utf8_ranges.h"
#include "grammar_sample_util.h"

namespace g = frost::text::grammar;

namespace {

bool matches(g::Machine& m, const std::string& s) {
    const uint32_t f = m.walk(m.start(), s.data(), s.size());
    return f != g::kDead && m.accepts(f);
}

std::unique_ptr<g::Machine> gbnf(const std::string& text) {
    g::Grammar gr;
    const frost_status st = g::parse_gbnf(text, &gr);
    EXPECT_EQ(st, FROST_OK) << frost::last_error() << "\n" << text;
    return std::make_unique<g::Machine>(std::move(gr));
}

std::unique_ptr<g::Machine> regex(const std::string& p) {
    g::Grammar gr;
    const frost_status st = g::parse_regex(p, &gr);
    EXPECT_EQ(st, FROST_OK) << frost::last_error() << " for " << p;
    return std::make_unique<g::Machine>(std::move(gr));
}

template <class J>
std::unique_ptr<g::Machine> schema(const J& s) {
    g::Grammar gr;
    const frost_status st = g::parse_json_schema(s, &gr);
    EXPECT_EQ(st, FROST_OK) << frost::last_error() << " for " << s.dump();
    return std::make_unique<g::Machine>(std::move(gr));
}

std::string schema_error(const nlohmann::json& s) {
    g::Grammar gr;
    if (g::parse_json_schema(s, &gr) == FROST_OK) return "(accepted)";
    return frost::last_error();
}

}  // namespace

TEST(Utf8Ranges, CoverExactlyTheRange) {
    std::mt19937_64 rng(std::random_device{}());
    for (int trial = 0; trial < 200; ++trial) {
        uint32_t lo = uint32_t(rng() % 0x110000), hi = uint32_t(rng() % 0x110000);
        if (trial % 3 == 0) hi = lo + uint32_t(rng() % 3000);
        if (lo > hi) std::swap(lo, hi);
        std::vector<g::ByteRangeSeq> seqs;
        g::utf8_sequences(lo, hi, &seqs);
        for (int k = 0; k < 300; ++k) {
            uint32_t cp = k < 150 ? lo + uint32_t(rng() % (uint64_t(hi - lo) + 1)) : uint32_t(rng() % 0x110000);
            if (k == 0) cp = lo;
            if (k == 1) cp = std::min<uint32_t>(hi, 0x10FFFF);
            std::string enc;
            g::append_utf8(cp, &enc);
            int hits = 0;
            for (const auto& s : seqs) {
                if (s.size() != enc.size()) continue;
                bool ok = true;
                for (size_t i = 0; i < s.size(); ++i) {
                    const uint8_t b = static_cast<uint8_t>(enc[i]);
                    ok = ok && b >= s[i].first && b <= s[i].second;
                }
                hits += ok;
            }
            const bool want = cp >= lo && cp <= hi && !(cp >= 0xD800 && cp <= 0xDFFF);
            ASSERT_EQ(hits, want ? 1 : 0) << std::hex << "cp " << cp << " range " << lo << ".." << hi;
        }
    }
}

TEST(Gbnf, LiteralsClassesRepetitionAndRecursion) {
    auto m = gbnf(R"G(
# balanced parentheses around a number, then an optional unit
root ::= expr unit?
expr ::= "(" expr ")" | num
num  ::= [1-9] [0-9]{0,2} | "0"
unit ::= " " ( "kg" | "m" ) | "°" [A-Zé]
)G");
    for (const char* ok : {"0", "((7))", "(((120)))", "999 kg", "5 m", "(3)°C", "3°é"})
        EXPECT_TRUE(matches(*m, ok)) << ok;
    for (const char* bad : {"", "((7)", "1000", "01", "5 g", "5kg", "(3)°c", "3°"})
        EXPECT_FALSE(matches(*m, bad)) << bad;
}

TEST(Gbnf, DotEscapesAndNegatedClassesAreUtf8) {
    auto m = gbnf("root ::= \"\\x41\\u00e9\\n\" [^a-z\\]] .+");
    EXPECT_TRUE(matches(*m, "A\xC3\xA9\nQ\xF0\x9F\x98\x80"));
    EXPECT_TRUE(matches(*m, "A\xC3\xA9\n\xE4\xB8\xAD" "abc"));
    EXPECT_FALSE(matches(*m, "A\xC3\xA9\nb1"));
    EXPECT_FALSE(matches(*m, "A\xC3\xA9\n]1"));
    EXPECT_FALSE(matches(*m, "A\xC3\xA9\nX\xC3"));         // truncated character
    EXPECT_FALSE(matches(*m, "A\xC3\xA9\nX\xED\xA0\x80"));  // a surrogate is not a character
}

TEST(Gbnf, ErrorsNameTheProblem) {
    struct Case {
        const char* text;
        const char* needle;
    } cases[] = {
        {"root ::= a", "rule 'a' is used but not defined"},
        {"start ::= \"x\"", "no rule named 'root'"},
        {"root ::= root \"x\" | \"y\"", "left recursion through rule 'root'"},
        {"root ::= (\"a\"?)*", "left recursion"},
        {"root ::= \"abc", "unterminated string literal"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= \"a\"{3,2}", "n < m"},
        {"root ::= \"a\"{5000}", "repetition count"},
        {"root ::= (\"a\"", "expected ')'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
    };
    for (const auto& c : cases) {
        g::Grammar gr;
        EXPECT_EQ(g::parse_gbnf(c.text, &gr), FROST_ERR_INVALID_ARG) << c.text;
        EXPECT_NE(frost::last_error().find(c.needle), std::string::npos) << c.text << " -> " << frost::last_error();
    }
}

// Random strings over each pattern's alphabet: the regex front end and std::regex agree.
TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
    struct Case {
        const char* pattern;
        const char* alphabet;
    } cases[] = {
        {"^(ab|a)*c$", "abc"},
        {"[a-c]{2,4}d?", "abcd"},
        {"(x|y+)+z{1,2}", "xyz"},
        {"\\d{3}-\\d{2,}", "0123-"},
        {"[^ab]b*.", "abc\n"},
        {"(?:ab?){2}|c+", "abc"},
        {"\\w+\\s\\W", "a_9 \t!"},
        {"a{0,3}b{2}", "ab"},
        {"(a|b)*abb", "ab"},
        {"[\\d.]+e[+-]?\\d", "1.e+-"},
    };
    std::mt19937_64 rng(std::random_device{}());
    for (const auto& c : cases) {
        auto m = regex(c.pattern);
        const std::regex ref(c.pattern, std::regex::ECMAScript);
        const std::string alpha = c.alphabet;
        int yes = 0;
        for (int k = 0; k < 3000; ++k) {
            std::string s;
            const size_t len = rng() % 9;
            for (size_t i = 0; i < len; ++i) s += alpha[rng() % alpha.size()];
            const bool want = std::regex_match(s, ref);
            yes += want;
            ASSERT_EQ(matches(*m, s), want) << c.pattern << " on '" << s << "'";
        }
        EXPECT_GT(yes, 0) << c.pattern << ": no random string matched (the test would prove nothing)";
    }
}

TEST(Regex, ErrorsNameTheProblem) {
    for (auto [p, needle] : std::vector<std::pair<const char*, const char*>>{
             {"(a", "expected ')'"}, {"a)", "unbalanced"}, {"*a", "nothing to repeat"},
             {"(a)\\1", "backreferences"}, {"(?=a)", "lookaround"}, {"a^b", "anchors"}, {"[b-a]", "out of order"}}) {
        g::Grammar gr;
        EXPECT_EQ(g::parse_regex(p, &gr), FROST_ERR_INVALID_ARG) << p;
        EXPECT_NE(frost::last_error().find(needle), std::string::npos) << p << " -> " << frost::last_error();
    }
}

namespace {

// A random JSON-ish string: pieces of valid JSON, sometimes broken.
std::string random_jsonish(std::mt19937_64& rng, int depth) {
    // Surrogate escapes whole, lone and crossed, and raw bytes strict readers refuse (an encoded
    // surrogate, overlongs, a code point past U+10FFFF, a cut character).
    static const char* atoms[] = {"1", "-0", "12.5e3", "0.25", "01", "1.", "true", "false", "null", "nul",
                                  "\"a\"", "\"\\n\\u00e9\"", "\"\\x\"", "\"é😀\"", "\"\"", "-", "1e+2", ".5",
                                  "\"\\ud83d\\ude00\"", "\"\\uD800\\uDFFF\"", "\"\\ud800\"", "\"\\udc00\"",
                                  "\"\\ud800\\ud800\"", "\"\\udbff\\u0041\"", "\"\\udc00\\ud800\"", "\"x\\ud83d\"",
                                  "\"\xED\xA0\x80\"", "\"\xC0\x80\"", "\"\xF4\x90\x80\x80\"", "\"\xE2\x82\"",
                                  "\"\xED\x9F\xBF\xEE\x80\x80\"", "1e99", "-9999999999999999.5e-99"};
    const int r = int(rng() % 10);
    if (depth > 3 || r < 4) return atoms[rng() % (sizeof(atoms) / sizeof(atoms[0]))];
    const char* ws[] = {"", "", " ", "\n  ", "\t"};
    std::string s;
    const int n = int(rng() % 4);
    if (r < 7) {
        s = "{";
        for (int i = 0; i < n; ++i) {
            if (i) s += rng() % 12 ? "," : "";
            s += ws[rng() % 5];
            s += rng() % 10 ? "\"k" + std::to_string(rng() % 3) + "\"" : "k";
            s += ws[rng() % 5];
            s += rng() % 12 ? ":" : "";
            s += ws[rng() % 5] + random_jsonish(rng, depth + 1);
        }
        s += ws[rng() % 5];
        s += rng() % 15 ? "}" : "";
    } else {
        s = "[";
        for (int i = 0; i < n; ++i) {
            if (i) s += rng() % 12 ? "," : "";
            s += ws[rng() % 5] + random_jsonish(rng, depth + 1);
        }
        s += rng() % 15 ? "]" : ",]";
    }
    return s;
}

// Whether every number in JSON text s (which a parser accepted) keeps json-number's bounds: at most
// 16 integer, 15 fraction and 2 exponent digits (json_schema.cpp). A parser takes any length, so
// two atoms run together ("-9999999999999999.5e-99" then "1") are valid JSON the grammar refuses.
bool numbers_within_grammar_bounds(const std::string& s) {
    size_t i = 0;
    auto digits = [&] {
        size_t n = 0;
        for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) ++n;
        return n;
    };
    bool in_string = false;
    while (i < s.size()) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') i += 2;  // an escape: the next byte is never the closing quote
            else in_string = c != '"', ++i;
            continue;
        }
        if (c == '"') {
            in_string = true;
            ++i;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (c == '-') ++i;
            if (digits() > 16) return false;
            if (i < s.size() && s[i] == '.' && (++i, digits() > 15)) return false;
            if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
                ++i;
                if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
                if (digits() > 2) return false;
            }
        } else {
            ++i;
        }
    }
    return true;
}

}  // namespace

TEST(JsonObject, NumberBoundsCheckOfTheTestItself) {
    EXPECT_TRUE(numbers_within_grammar_bounds(R"({"a":[-9999999999999999.5e-99,"1e999",12.5e3]})"));
    EXPECT_FALSE(numbers_within_grammar_bounds(R"({"x":[[-9999999999999999.5e-991]]})"));
    EXPECT_FALSE(numbers_within_grammar_bounds(R"({"x":99999999999999999})"));
    EXPECT_FALSE(numbers_within_grammar_bounds(R"({"x":0.1234567890123456})"));
    EXPECT_TRUE(numbers_within_grammar_bounds(R"({"x\"1e999":0})"));
}

TEST(JsonObject, AgreesWithAJsonParser) {
    g::Grammar gr;
    ASSERT_EQ(g::parse_gbnf(g::json_object_gbnf(), &gr), FROST_OK) << frost::last_error();
    g::Machine m(std::move(gr));
    std::mt19937_64 rng(std::random_device{}());
    int valid = 0;
    for (int k = 0; k < 4000; ++k) {
        std::string s = random_jsonish(rng, 0);
        if (k % 2) s = "{\"x\":" + s + "}";
        const bool ref = nlohmann::json::accept(s) && nlohmann::json::parse(s).is_object() &&
                         numbers_within_grammar_bounds(s);
        valid += ref;
        ASSERT_EQ(matches(m, s), ref) << s;
    }
    EXPECT_GT(valid, 200);
}

TEST(JsonSchema, StrictSubsetLanguage) {
    const nlohmann::ordered_json s = nlohmann::ordered_json::parse(R"({
      "type": "object",
      "properties": {
        "name": {"type": "string", "maxLength": 3},
        "age": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 2},
        "kind": {"const": "x"},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "boolean"}]}
      },
      "required": ["name", "age", "tags"],
      "additionalProperties": false,
      "$defs": {"node": {"type": "object", "properties": {"v": {"type": "number"}, "n": {"$ref": "#/$defs/node"}},
                         "required": ["v"]}}
    })");
    auto m = schema(s);
    for (const char* ok : {
             R"({"name":"ab","age":3,"tags":["a"]})",
             R"({"name": "", "age": null, "tags": [3, "b"], "kind": "x"})",
             R"({"name":"abc","age":-12,"tags":["b"],"next":{"v":1.5,"n":{"v":-2e3}}})",
             R"({"name":"a","age":0,"tags":["a"],"kind":"x","next":true})",
             "{\n  \"name\": \"\\u00e9\",\n  \"age\": 1,\n  \"tags\": [\"a\"]\n}"})
        EXPECT_TRUE(matches(*m, ok)) << ok;
    for (const char* bad : {
             R"({"name":"abcd","age":3,"tags":["a"]})",          // maxLength
             R"({"name":"a","tags":["a"]})",                     // required age
             R"({"name":"a","age":1.5,"tags":["a"]})",           // integer
             R"({"name":"a","age":1,"tags":[]})",                // minItems
             R"({"name":"a","age":1,"tags":["a","b","a"]})",     // maxItems
             R"({"name":"a","age":1,"tags":["c"]})",             // enum
             R"({"name":"a","age":1,"tags":["a"],"kind":"y"})",  // const
             R"({"name":"a","age":1,"tags":["a"],"zz":1})",      // additionalProperties
             R"({"age":1,"name":"a","tags":["a"]})",             // declared order
             R"({"name":"a","age":1,"tags":["a"],"next":{"n":{"v":1}}})"})  // nested required v
        EXPECT_FALSE(matches(*m, bad)) << bad;
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
    EXPECT_NE(schema_error({{"type", "string"}, {"pattern", "a+"}}).find("unsupported keyword 'pattern'"), std::string::npos);
    EXPECT_NE(schema_error({{"type", "object"}, {"properties", {{"a", {{"type", "number"}, {"minimum", 0}}}}}})
                  .find("#/properties/a: unsupported keyword 'minimum'"),
              std::string::npos);
    EXPECT_NE(schema_error({{"$ref", "#/$defs/missing"}}).find("does not resolve"), std::string::npos);
    EXPECT_NE(schema_error({{"type", "strin"}}).find("unknown type 'strin'"), std::string::npos);
    EXPECT_NE(schema_error({{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}, {"required", {"b"}}})
                  .find("'required' names 'b'"),
              std::string::npos);
    EXPECT_NE(schema_error({{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}).find("additionalProperties"),
              std::string::npos);
    EXPECT_NE(schema_error({{"enum", nlohmann::json::array()}}).find("'enum' must be a non-empty array"), std::string::npos);
}

TEST(Machine, AmbiguityIsBoundedNotExponential) {
    // Every split of a run of a's is a parse: the frontier stays small because equal stacks merge.
    auto m = gbnf("root ::= x+\nx ::= \"a\" | \"aa\" | \"aaa\"");
    const std::string s(5000, 'a');
    EXPECT_TRUE(matches(*m, s));
    EXPECT_LT(m->frontier_count(), 20u);
}

namespace {

// The grammar's verdict on s and nlohmann::json's (the strict reader the mask test uses), as
// "1"/"0" pairs, so one EXPECT shows both.
std::string verdicts(g::Machine& m, const std::string& s) {
    const bool ref = nlohmann::json::accept(s);
    return std::string(matches(m, s) ? "1" : "0") + (ref ? "1" : "0");
}

std::unique_ptr<g::Machine> json_object_machine() { return gbnf(g::json_object_gbnf()); }

// Every number in v is a finite double (and *numbers counts them).
bool all_numbers_finite(const nlohmann::json& v, int* numbers) {
    if (v.is_number()) {
        ++*numbers;
        return std::isfinite(v.get<double>());
    }
    if (v.is_structured())
        for (const auto& x : v)
            if (!all_numbers_finite(x, numbers)) return false;
    return true;
}

}  // namespace

TEST(JsonStrings, SurrogateEscapesOnlyAsPairs) {
    auto m = json_object_machine();
    auto obj = [](const char* str) { return std::string("{\"s\":\"") + str + "\"}"; };
    for (const char* ok : {"\\ud83d\\ude00", "\\uD800\\uDC00", "\\uDBFF\\uDFFF", "a\\ud83d\\ude00b", "\\uD7FF",
                           "\\uE000", "\\uFFFF", "\\u0000", "\\u00e9\\ud834\\udd1e"})
        EXPECT_EQ(verdicts(*m, obj(ok)), "11") << obj(ok);
    for (const char* bad : {"\\ud800", "\\uDBFF", "x\\ud83d", "\\udc00", "\\uDFFF", "\\ud800\\ud800", "\\udbff\\u0041",
                            "\\udc00\\ud800", "\\ud800\\n", "\\ud800\\\\udc00", "\\ud800 \\udc00", "\\ud800\\uDBFF"})
        EXPECT_EQ(verdicts(*m, obj(bad)), "00") << obj(bad);
    // A high surrogate may wait for its partner, but nothing else: the prefix stays alive only
    // on the way to a low surrogate escape.
    const std::string pre = "{\"s\":\"\\ud83d";
    const uint32_t f = m->walk(m->start(), pre.data(), pre.size());
    ASSERT_NE(f, g::kDead);
    EXPECT_EQ(m->step(f, '"'), g::kDead);
    EXPECT_EQ(m->step(f, 'a'), g::kDead);
    EXPECT_NE(m->step(f, '\\'), g::kDead);
    // Schema strings share the rule, and a pair is ONE character for maxLength (a code point, as
    // JSON Schema counts).
    auto s1 = schema(nlohmann::json::parse(R"({"type":"string","minLength":1,"maxLength":1})"));
    EXPECT_TRUE(matches(*s1, "\"\\ud83d\\ude00\""));
    EXPECT_FALSE(matches(*s1, "\"\\ud83d\""));
    EXPECT_FALSE(matches(*s1, "\"\\ude00\""));
}

TEST(JsonStrings, RawBytesAreUtf8ScalarValuesOnly) {
    auto m = json_object_machine();
    auto obj = [](const char* str) { return std::string("{\"s\":\"") + str + "\"}"; };
    for (const char* ok : {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF",
                           "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\x7F"})
        EXPECT_EQ(verdicts(*m, obj(ok)), "11") << obj(ok);
    for (const char* bad : {"\xED\xA0\x80", "\xED\xBF\xBF",             // encoded surrogates
                            "\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xF0\x8F\xBF\xBF",  // overlongs
                            "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xFE",   // past U+10FFFF, never bytes
                            "\x80", "\xC2", "\xE2\x82", "\xC2\x41", "\x01", "\x1F"})  // stray, cut, controls
        EXPECT_EQ(verdicts(*m, obj(bad)), "00") << obj(bad);
}

TEST(JsonNumbers, BoundedToFiniteDoubles) {
    auto m = json_object_machine();
    auto obj = [](const char* num) { return std::string("{\"n\":") + num + "}"; };
    for (const char* ok : {"9999999999999999.999999999999999e+99", "-9999999999999999.999999999999999E99",
                           "0.000000000000001e-99", "-0", "0e00", "1E-01"})
        EXPECT_EQ(verdicts(*m, obj(ok)), "11") << obj(ok);
    // Valid JSON, but beyond the bounds (1e-400 would underflow to 0; nlohmann refuses 1e400,
    // which is no finite double, so it is not in this list).
    for (const char* big : {"1e100", "1e-400", "99999999999999999", "0.1234567890123456"})
        EXPECT_EQ(verdicts(*m, obj(big)), "01") << obj(big);
    int numbers = 0;
    for (const char* ok : {"9999999999999999.999999999999999e+99", "0.000000000000001e-99"}) {
        const double d = std::strtod(ok, nullptr);
        EXPECT_TRUE(std::isfinite(d) && d != 0.0) << ok;
        EXPECT_TRUE(all_numbers_finite(nlohmann::json::parse(obj(ok)), &numbers)) << ok;
    }
}

// Everything the JSON grammars let through, drawn at random byte by byte (biased toward escapes
// and surrogate pairs), parses with nlohmann::json, and every number in it is a finite double.
TEST(JsonGrammar, RandomSentencesParseStrictly) {
    const uint64_t seed = frost::text::testing::grammar_test_seed("JsonGrammar.RandomSentencesParseStrictly");
    SCOPED_TRACE("FROST_GRAMMAR_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::vector<std::unique_ptr<g::Machine>> machines;
    machines.push_back(json_object_machine());
    machines.push_back(schema(nlohmann::ordered_json::parse(R"({
      "type": "object",
      "properties": {"city": {"type": "string"}, "code": {"type": "string", "minLength": 1, "maxLength": 3},
                     "n": {"type": ["number", "null"]}, "k": {"type": "integer"},
                     "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                     "any": {}},
      "required": ["city", "code", "n", "k", "tags"], "additionalProperties": false})")));
    int finished = 0, pairs = 0, numbers = 0;
    for (auto& m : machines) {
        for (int k = 0; k < 300; ++k) {
            std::string s;
            bool dead = false;
            if (!frost::text::testing::sample_sentence(*m, rng, 3000, &s, &dead)) {
                ASSERT_FALSE(dead) << "dead end after " << s;
                continue;
            }
            ++finished;
            ASSERT_TRUE(nlohmann::json::accept(s)) << s;
            ASSERT_TRUE(all_numbers_finite(nlohmann::json::parse(s), &numbers)) << s;
            for (size_t p = 0; (p = s.find("\\u", p)) != std::string::npos; p += 2)
                pairs += p + 2 < s.size() && (s[p + 2] == 'd' || s[p + 2] == 'D') && std::strchr("89abAB", s[p + 3]);
        }
    }
    EXPECT_GE(finished, 400) << "too few random walks ended";
    EXPECT_GT(pairs, 10) << "the walks produced too few surrogate pairs to test them";
    EXPECT_GT(numbers, 100) << "the walks produced too few numbers to test them";
}
