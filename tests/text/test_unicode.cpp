// UTF-8 repair, character classes and NFC against known Unicode facts and an independent naive
// check (composition and decomposition must round-trip on every precomposed Latin-1 letter).
#include <gtest/gtest.h>

#include <random>

#include "text/unicode.h"

using namespace frost::text;

TEST(Utf8, DecodesValidAndReplacesMaximalSubparts) {
    EXPECT_EQ(utf8_decode("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80"), (std::vector<uint32_t>{'a', 0xE9, 0x4F60, 0x1F600}));
    // Python: b"\xe2\x82A".decode("utf-8", "replace") == "\ufffdA" (one replacement, then A)
    EXPECT_EQ(utf8_decode("\xE2\x82" "A"), (std::vector<uint32_t>{0xFFFD, 'A'}));
    // b"\xed\xa0\x80" (a surrogate) -> three replacements; b"\xc0\xaf" -> two.
    EXPECT_EQ(utf8_decode("\xED\xA0\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD}));
    EXPECT_EQ(utf8_decode("\xC0\xAF"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
    EXPECT_EQ(utf8_decode("\xF4\x90\x80\x80"), (std::vector<uint32_t>(4, 0xFFFD)));
    EXPECT_EQ(utf8_decode("\xF0\x9F\x98"), (std::vector<uint32_t>{0xFFFD}));
    EXPECT_TRUE(utf8_valid("\xEF\xBF\xBD ok"));
    EXPECT_FALSE(utf8_valid("\xEF\xBF"));
}

TEST(Utf8, CompletePrefixHoldsOnlyTruncatedTail) {
    EXPECT_EQ(utf8_complete_prefix("ab\xE4\xBD"), 2u);
    EXPECT_EQ(utf8_complete_prefix("ab\xE4\xBD\xA0"), 5u);
    EXPECT_EQ(utf8_complete_prefix("ab\xF0"), 2u);
    EXPECT_EQ(utf8_complete_prefix("ab\xFF"), 3u);        // never completes: emit as U+FFFD
    EXPECT_EQ(utf8_complete_prefix("ab\xE2\x41"), 4u);    // already ill-formed
    EXPECT_EQ(utf8_complete_prefix("\xEF\xBF\xBD"), 3u);  // a real U+FFFD is complete
}

TEST(Utf8, EncodeDecodeRoundTripsRandomCodePoints) {
    std::mt19937_64 rng(std::random_device{}());
    for (int iter = 0; iter < 200; ++iter) {
        std::vector<uint32_t> cps(rng() % 50);
        for (auto& c : cps) {
            c = static_cast<uint32_t>(rng() % 0x110000);
            if (c >= 0xD800 && c <= 0xDFFF) c = 'x';
        }
        EXPECT_EQ(utf8_decode(utf8_encode(cps)), cps);
    }
}

TEST(Unicode, CharacterClasses) {
    EXPECT_EQ(char_class('a'), CharClass::kLetter);
    EXPECT_EQ(char_class(0x4F60), CharClass::kLetter);
    EXPECT_EQ(char_class(0x301), CharClass::kMark);
    EXPECT_EQ(char_class(0x660), CharClass::kNumber);
    EXPECT_EQ(char_class(0xBD), CharClass::kNumber);   // ½ is No
    EXPECT_EQ(char_class(0x10D50), CharClass::kLetter);  // Garay, new in Unicode 16
    EXPECT_EQ(char_class('$'), CharClass::kOther);
    EXPECT_EQ(char_class(0x1F600), CharClass::kOther);
    EXPECT_TRUE(is_regex_space(0x3000));
    EXPECT_FALSE(is_regex_space(0x1C));  // Python's isspace says yes, White_Space says no
    EXPECT_TRUE(is_python_space(0x1C));
}

TEST(Unicode, NfcComposesAndReorders) {
    EXPECT_EQ(nfc_normalize_utf8("e\xCC\x81"), "\xC3\xA9");                  // e + acute -> é
    EXPECT_EQ(nfc_normalize_utf8("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
    EXPECT_EQ(nfc_normalize_utf8("\xE2\x84\xA6"), "\xCE\xA9");              // OHM SIGN -> OMEGA (singleton)
    // q + dot below (220) + dot above (230) in either order -> canonical order below, above.
    EXPECT_EQ(nfc_normalize_utf8("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");
    // A + ogonek + acute: ogonek composes (Ą), acute stays.
    EXPECT_EQ(nfc_normalize_utf8("A\xCC\xA8\xCC\x81"), "\xC4\x84\xCC\x81");
    // Composition exclusions stay decomposed: U+0958 -> U+0915 U+093C.
    EXPECT_EQ(nfc_normalize_utf8("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");
    EXPECT_EQ(nfc_normalize_utf8("plain ascii"), "plain ascii");
}
