// Regular expression subset -> one-rule Grammar (see front_ends.h). The pattern must match the
// whole output, so the language is exactly the regex's.
#include <cctype>

#include "exec/error.h"
#include "text/grammar/front_ends.h"
#include "text/grammar/utf8_ranges.h"

namespace frost::text::grammar {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

class RegexParser {
public:
    explicit RegexParser(std::string_view p) : p_(p) {}

    frost_status run(Expr* out) {
        if (!p_.empty() && p_[0] == '^') ++i_;
        FROST_TRY(alternatives(out, 0));
        if (i_ < p_.size()) return err(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
        return FROST_OK;
    }

private:
    frost_status err(const std::string& what) {
        return fail(FROST_ERR_INVALID_ARG, "regex: %s at offset %zu", what.c_str(), i_);
    }
    bool at_end_anchor() const { return i_ + 1 == p_.size() && p_[i_] == '$'; }

    frost_status alternatives(Expr* out, int depth) {
        if (depth > kMaxNesting) return err("groups nested too deep");
        std::vector<Expr> alts;
        for (;;) {
            std::vector<Expr> items;
            while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
                if (at_end_anchor()) { ++i_; break; }
                Expr e;
                FROST_TRY(atom(&e, depth));
                FROST_TRY(quantifiers(&e));
                items.push_back(std::move(e));
            }
            alts.push_back(expr_seq(std::move(items)));
            if (i_ < p_.size() && p_[i_] == '|') { ++i_; continue; }
            break;
        }
        *out = alts.size() == 1 ? std::move(alts[0]) : expr_alt(std::move(alts));
        return FROST_OK;
    }

    frost_status quantifiers(Expr* e) {
        while (i_ < p_.size()) {
            const char c = p_[i_];
            int m, n;
            if (c == '*') { m = 0; n = -1; ++i_; }
            else if (c == '+') { m = 1; n = -1; ++i_; }
            else if (c == '?') { m = 0; n = 1; ++i_; }
            else if (c == '{' && i_ + 1 < p_.size() && std::isdigit(static_cast<unsigned char>(p_[i_ + 1]))) {
                ++i_;
                FROST_TRY(number(&m));
                n = m;
                if (i_ < p_.size() && p_[i_] == ',') {
                    ++i_;
                    if (i_ < p_.size() && p_[i_] == '}') n = -1;
                    else FROST_TRY(number(&n));
                }
                if (i_ >= p_.size() || p_[i_] != '}') return err("expected '}'");
                ++i_;
                if (n >= 0 && n < m) return err("repetition {m,n} with n < m");
            } else {
                return FROST_OK;
            }
            if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: same language
            *e = expr_repeat(std::move(*e), m, n);
        }
        return FROST_OK;
    }
    frost_status number(int* v) {
        long x = 0;
        size_t b = i_;
        while (i_ < p_.size() && std::isdigit(static_cast<unsigned char>(p_[i_]))) {
            x = x * 10 + (p_[i_++] - '0');
            if (x > kMaxRepeat) return err("repetition count over " + std::to_string(kMaxRepeat));
        }
        if (b == i_) return err("expected a number");
        *v = int(x);
        return FROST_OK;
    }

    frost_status utf8_char(uint32_t* cp) {
        const unsigned char c = static_cast<unsigned char>(p_[i_]);
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i_ + size_t(len) > p_.size()) return err("invalid UTF-8");
        uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (int k = 1; k < len; ++k) v = (v << 6) | (static_cast<unsigned char>(p_[i_ + size_t(k)]) & 0x3F);
        i_ += size_t(len);
        *cp = v;
        return FROST_OK;
    }

    // After a backslash: a class escape (*cls set, *neg) or one code point (*cp).
    frost_status escape(uint32_t* cp, const Ranges** cls, bool* neg) {
        if (i_ >= p_.size()) return err("pattern ends in a backslash");
        const char e = p_[i_++];
        *cls = nullptr;
        *neg = false;
        switch (e) {
            case 'd': *cls = &kDigit; return FROST_OK;
            case 'D': *cls = &kDigit; *neg = true; return FROST_OK;
            case 'w': *cls = &kWord; return FROST_OK;
            case 'W': *cls = &kWord; *neg = true; return FROST_OK;
            case 's': *cls = &kSpace; return FROST_OK;
            case 'S': *cls = &kSpace; *neg = true; return FROST_OK;
            case 'n': *cp = '\n'; return FROST_OK;
            case 'r': *cp = '\r'; return FROST_OK;
            case 't': *cp = '\t'; return FROST_OK;
            case 'f': *cp = '\f'; return FROST_OK;
            case 'v': *cp = '\v'; return FROST_OK;
            case 'b': case 'B': case 'A': case 'z': case 'Z':
                return err(std::string("unsupported assertion \\") + std::string(1, e));
            case 'x': case 'u': {
                const int n = e == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (int k = 0; k < n; ++k) {
                    if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) return err("bad hex escape");
                    const char h = char(std::tolower(static_cast<unsigned char>(p_[i_++])));
                    v = v * 16 + uint32_t(h <= '9' ? h - '0' : h - 'a' + 10);
                }
                *cp = v;
                return FROST_OK;
            }
            default:
                if (std::isdigit(static_cast<unsigned char>(e))) return err("backreferences are not supported");
                if (std::isalpha(static_cast<unsigned char>(e))) return err(std::string("unknown escape \\") + std::string(1, e));
                *cp = static_cast<unsigned char>(e);
                return FROST_OK;
        }
    }

    frost_status klass(Expr* out) {
        bool neg = false;
        if (i_ < p_.size() && p_[i_] == '^') { neg = true; ++i_; }
        Ranges ranges;
        bool first = true;
        while (i_ < p_.size() && (p_[i_] != ']' || first)) {
            first = false;
            uint32_t lo = 0;
            if (p_[i_] == '\\') {
                ++i_;
                const Ranges* cls;
                bool cneg;
                FROST_TRY(escape(&lo, &cls, &cneg));
                if (cls) {
                    for (const auto& r : normalize_ranges(*cls, cneg)) ranges.push_back(r);
                    continue;
                }
            } else {
                FROST_TRY(utf8_char(&lo));
            }
            uint32_t hi = lo;
            if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
                ++i_;
                if (p_[i_] == '\\') {
                    ++i_;
                    const Ranges* cls;
                    bool cneg;
                    FROST_TRY(escape(&hi, &cls, &cneg));
                    if (cls) return err("a class escape cannot end a range");
                } else {
                    FROST_TRY(utf8_char(&hi));
                }
                if (hi < lo) return err("character range out of order");
            }
            ranges.push_back({lo, hi});
        }
        if (i_ >= p_.size()) return err("unterminated character class");
        ++i_;
        *out = expr_class(std::move(ranges), neg);
        return FROST_OK;
    }

    frost_status atom(Expr* out, int depth) {
        const char c = p_[i_];
        if (c == '(') {
            ++i_;
            if (i_ < p_.size() && p_[i_] == '?') {
                if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
                else return err("lookaround and named groups are not supported");
            }
            FROST_TRY(alternatives(out, depth + 1));
            if (i_ >= p_.size() || p_[i_] != ')') return err("expected ')'");
            ++i_;
            return FROST_OK;
        }
        if (c == '[') {
            ++i_;
            return klass(out);
        }
        if (c == '.') {
            ++i_;
            *out = expr_class({{'\n', '\n'}}, true);
            return FROST_OK;
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') return err("nothing to repeat");
        if (c == '^' || c == '$') return err("anchors are only allowed at the start and end");
        if (c == '\\') {
            ++i_;
            uint32_t cp = 0;
            const Ranges* cls;
            bool neg;
            FROST_TRY(escape(&cp, &cls, &neg));
            if (cls) { *out = expr_class(*cls, neg); return FROST_OK; }
            std::string b;
            append_utf8(cp, &b);
            *out = expr_bytes(std::move(b));
            return FROST_OK;
        }
        uint32_t cp = 0;
        FROST_TRY(utf8_char(&cp));
        std::string b;
        append_utf8(cp, &b);
        *out = expr_bytes(std::move(b));
        return FROST_OK;
    }

    std::string_view p_;
    size_t i_ = 0;
};

}  // namespace

frost_status parse_regex(std::string_view pattern, Grammar* out) {
    if (pattern.size() > kMaxGrammarBytes) return fail(FROST_ERR_INVALID_ARG, "regex: pattern over %zu bytes", kMaxGrammarBytes);
    Expr body;
    FROST_TRY(RegexParser(pattern).run(&body));
    return lower({RuleDef{"root", std::move(body)}}, "root", out);
}

}  // namespace frost::text::grammar
