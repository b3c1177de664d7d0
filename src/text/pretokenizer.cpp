// Matcher for Qwen's pre-tokenizer regex. Alternatives are tried in order at each position, as
// Oniguruma (leftmost-first) does; each one is a greedy run whose backtracking outcome is computed
// directly (see the comment on each alternative), so a match costs O(its length).
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+ | \s+(?!\S) | \s+          (Qwen3.5: \p{L} -> [\p{L}\p{M}] in the 2nd and 4th)
#include "text/pretokenizer.h"

#include "text/unicode.h"

namespace frost::text {

const std::string_view kQwen2SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string_view kQwen35SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool split_pattern_from_regex(std::string_view regex, SplitPattern* out) {
    if (regex == kQwen2SplitRegex) { *out = SplitPattern::kQwen2; return true; }
    if (regex == kQwen35SplitRegex) { *out = SplitPattern::kQwen35; return true; }
    return false;
}

namespace {

constexpr uint32_t kLongS = 0x17F;  // LATIN SMALL LETTER LONG S case-folds to 's' under (?i)

struct Matcher {
    const uint32_t* c;
    size_t end;
    bool marks_are_letters;  // Qwen3.5

    bool is_newline(size_t i) const { return c[i] == '\r' || c[i] == '\n'; }
    bool is_space(size_t i) const { return is_regex_space(c[i]); }
    // The "word" class: \p{L} (Qwen2) or [\p{L}\p{M}] (Qwen3.5).
    bool is_word(size_t i) const {
        const CharClass k = char_class(c[i]);
        return k == CharClass::kLetter || (marks_are_letters && k == CharClass::kMark);
    }
    bool is_number(size_t i) const { return char_class(c[i]) == CharClass::kNumber; }
    // [^\r\n\p{L}\p{N}] (marks included in both patterns).
    bool is_prefix(size_t i) const {
        const CharClass k = char_class(c[i]);
        return !is_newline(i) && k != CharClass::kLetter && k != CharClass::kNumber;
    }
    // [^\s\p{L}\p{N}] (Qwen3.5 also excludes \p{M}).
    bool is_symbol(size_t i) const { return !is_space(i) && !is_word(i) && !is_number(i); }
    bool lower_is(size_t i, char ch) const {
        const uint32_t x = c[i];
        if (ch == 's' && x == kLongS) return true;
        return x < 0x80 && static_cast<char>(x | 0x20) == ch;
    }

    size_t contraction(size_t i) const {
        if (c[i] != '\'' || i + 1 >= end) return 0;
        if (lower_is(i + 1, 's') || lower_is(i + 1, 't') || lower_is(i + 1, 'm') || lower_is(i + 1, 'd'))
            return 2;
        if (i + 2 >= end) return 0;
        if ((lower_is(i + 1, 'r') || lower_is(i + 1, 'v')) && lower_is(i + 2, 'e')) return 3;
        if (lower_is(i + 1, 'l') && lower_is(i + 2, 'l')) return 3;
        return 0;
    }
    size_t run(size_t i, bool (Matcher::*pred)(size_t) const) const {
        size_t j = i;
        while (j < end && (this->*pred)(j)) ++j;
        return j - i;
    }
    // Length of the match starting at i, 0 when no alternative matches there.
    size_t match(size_t i) const {
        if (size_t n = contraction(i)) return n;
        // Optional prefix then a word run; if the prefix is taken but no word follows, the
        // engine retries without it, which needs c[i] itself to be a word character.
        if (i + 1 < end && is_prefix(i) && is_word(i + 1)) return 1 + run(i + 1, &Matcher::is_word);
        if (is_word(i)) return run(i, &Matcher::is_word);
        if (is_number(i)) return 1;
        // ' ?' then symbols then newlines (symbols never include \r\n, so no interaction).
        {
            const size_t s = (c[i] == ' ' && i + 1 < end && is_symbol(i + 1)) ? i + 1 : i;
            if (is_symbol(s)) {
                const size_t j = s + run(s, &Matcher::is_symbol);
                return j + run(j, &Matcher::is_newline) - i;
            }
        }
        const size_t ws = run(i, &Matcher::is_space);
        if (ws == 0) return 0;
        // \s*[\r\n]+: \s* backs off to the last newline in the whitespace run; [\r\n]+ then
        // takes exactly that one (anything after it in the run is not a newline).
        for (size_t k = i + ws; k > i; --k)
            if (is_newline(k - 1)) return k - i;
        // \s+(?!\S): the whole run at the end of input, else the run minus its last character.
        if (i + ws == end) return ws;
        if (ws >= 2) return ws - 1;
        return ws;  // \s+
    }
};

}  // namespace

void split_pretokenize(const uint32_t* cps, size_t begin, size_t end, SplitPattern pattern,
                       std::vector<std::pair<size_t, size_t>>& pieces) {
    const Matcher m{cps, end, pattern == SplitPattern::kQwen35};
    size_t gap = begin;  // start of text not yet covered by a match
    for (size_t i = begin; i < end;) {
        const size_t n = m.match(i);
        if (n == 0) { ++i; continue; }
        if (gap < i) pieces.emplace_back(gap, i);
        pieces.emplace_back(i, i + n);
        i += n;
        gap = i;
    }
    if (gap < end) pieces.emplace_back(gap, end);
}

}  // namespace frost::text
