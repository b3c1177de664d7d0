// GBNF-like grammar text -> rule syntax trees -> Grammar (see front_ends.h).
#include <cctype>

#include "exec/error.h"
#include "text/grammar/front_ends.h"
#include "text/grammar/utf8_ranges.h"

namespace frost::text::grammar {

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

class GbnfParser {
public:
    explicit GbnfParser(std::string_view t) : t_(t) {}

    frost_status rules(std::vector<RuleDef>* out) {
        skip();
        while (i_ < t_.size()) {
            RuleDef d;
            d.name = name();
            if (d.name.empty()) return err("expected a rule name");
            skip();
            if (t_.substr(i_, 3) != "::=") return err("expected '::=' after rule name '" + d.name + "'");
            i_ += 3;
            FROST_TRY(alternatives(&d.body, 0));
            out->push_back(std::move(d));
            skip();
        }
        if (out->empty()) return fail(FROST_ERR_INVALID_ARG, "grammar: no rules");
        return FROST_OK;
    }

private:
    frost_status err(const std::string& what) {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
            if (t_[k] == '\n') { ++line; col = 1; } else { ++col; }
        }
        return fail(FROST_ERR_INVALID_ARG, "grammar: %s at line %zu column %zu", what.c_str(), line, col);
    }
    void skip() {
        while (i_ < t_.size()) {
            if (t_[i_] == '#') {
                while (i_ < t_.size() && t_[i_] != '\n') ++i_;
            } else if (std::isspace(static_cast<unsigned char>(t_[i_]))) {
                ++i_;
            } else {
                break;
            }
        }
    }
    std::string name() {
        size_t b = i_;
        while (i_ < t_.size() && name_char(t_[i_])) ++i_;
        return std::string(t_.substr(b, i_ - b));
    }
    // A rule starts here: NAME ::=
    bool at_rule_start() {
        size_t k = i_;
        while (k < t_.size() && name_char(t_[k])) ++k;
        if (k == i_) return false;
        while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
        return t_.substr(k, 3) == "::=";
    }

    frost_status alternatives(Expr* out, int depth) {
        if (depth > kMaxNesting) return err("groups nested too deep");
        std::vector<Expr> alts;
        for (;;) {
            Expr seq;
            FROST_TRY(sequence(&seq, depth));
            alts.push_back(std::move(seq));
            skip();
            if (i_ < t_.size() && t_[i_] == '|') {
                ++i_;
                continue;
            }
            break;
        }
        *out = alts.size() == 1 ? std::move(alts[0]) : expr_alt(std::move(alts));
        return FROST_OK;
    }

    frost_status sequence(Expr* out, int depth) {
        std::vector<Expr> items;
        for (;;) {
            skip();
            if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')' || at_rule_start()) break;
            Expr e;
            FROST_TRY(primary(&e, depth));
            FROST_TRY(postfix(&e));
            items.push_back(std::move(e));
        }
        *out = expr_seq(std::move(items));
        return FROST_OK;
    }

    frost_status postfix(Expr* e) {
        for (;;) {
            if (i_ >= t_.size()) return FROST_OK;
            const char c = t_[i_];
            if (c == '*') { ++i_; *e = expr_repeat(std::move(*e), 0, -1); }
            else if (c == '+') { ++i_; *e = expr_repeat(std::move(*e), 1, -1); }
            else if (c == '?') { ++i_; *e = expr_repeat(std::move(*e), 0, 1); }
            else if (c == '{') {
                ++i_;
                int m = 0, n = 0;
                FROST_TRY(number(&m));
                if (i_ < t_.size() && t_[i_] == ',') {
                    ++i_;
                    skip();
                    if (i_ < t_.size() && t_[i_] == '}') n = -1;
                    else FROST_TRY(number(&n));
                } else {
                    n = m;
                }
                skip();
                if (i_ >= t_.size() || t_[i_] != '}') return err("expected '}' closing a repetition");
                ++i_;
                if (n >= 0 && n < m) return err("repetition {m,n} with n < m");
                *e = expr_repeat(std::move(*e), m, n);
            } else {
                return FROST_OK;
            }
        }
    }
    frost_status number(int* v) {
        skip();
        size_t b = i_;
        long x = 0;
        while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
            x = x * 10 + (t_[i_++] - '0');
            if (x > kMaxRepeat) return err("repetition count over " + std::to_string(kMaxRepeat));
        }
        if (i_ == b) return err("expected a number in a repetition");
        *v = int(x);
        skip();
        return FROST_OK;
    }

    // One character (code point) of a literal or class, escapes decoded.
    frost_status character(uint32_t* cp) {
        if (i_ >= t_.size()) return err("unexpected end of grammar");
        unsigned char c = static_cast<unsigned char>(t_[i_]);
        if (c == '\\') {
            if (++i_ >= t_.size()) return err("unfinished escape");
            const char e = t_[i_++];
            int hex = 0;
            switch (e) {
                case 'n': *cp = '\n'; return FROST_OK;
                case 'r': *cp = '\r'; return FROST_OK;
                case 't': *cp = '\t'; return FROST_OK;
                case 'f': *cp = '\f'; return FROST_OK;
                case 'v': *cp = '\v'; return FROST_OK;
                case '0': *cp = 0; return FROST_OK;
                case 'x': hex = 2; break;
                case 'u': hex = 4; break;
                case 'U': hex = 8; break;
                default: *cp = static_cast<unsigned char>(e); return FROST_OK;  // \\ \" \] \[ \- ...
            }
            uint32_t v = 0;
            for (int k = 0; k < hex; ++k) {
                if (i_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_]))) return err("bad hex escape");
                const char h = char(std::tolower(static_cast<unsigned char>(t_[i_++])));
                v = v * 16 + uint32_t(h <= '9' ? h - '0' : h - 'a' + 10);
            }
            if (v > 0x10FFFF) return err("escape beyond U+10FFFF");
            *cp = v;
            return FROST_OK;
        }
        // Raw UTF-8 in the grammar text: decode one code point.
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i_ + size_t(len) > t_.size()) return err("invalid UTF-8 in grammar text");
        uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (int k = 1; k < len; ++k) {
            const unsigned char d = static_cast<unsigned char>(t_[i_ + size_t(k)]);
            if ((d & 0xC0) != 0x80) return err("invalid UTF-8 in grammar text");
            v = (v << 6) | (d & 0x3F);
        }
        i_ += size_t(len);
        *cp = v;
        return FROST_OK;
    }

    frost_status primary(Expr* out, int depth) {
        const char c = t_[i_];
        if (c == '"') {
            ++i_;
            std::string bytes;
            while (i_ < t_.size() && t_[i_] != '"') {
                uint32_t cp;
                FROST_TRY(character(&cp));
                append_utf8(cp, &bytes);  // \xHH is that code point, as in llama.cpp
            }
            if (i_ >= t_.size()) return err("unterminated string literal");
            ++i_;
            *out = expr_bytes(std::move(bytes));
            return FROST_OK;
        }
        if (c == '[') {
            ++i_;
            bool neg = false;
            if (i_ < t_.size() && t_[i_] == '^') { neg = true; ++i_; }
            std::vector<std::pair<uint32_t, uint32_t>> ranges;
            while (i_ < t_.size() && t_[i_] != ']') {
                uint32_t lo, hi;
                FROST_TRY(character(&lo));
                hi = lo;
                if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
                    ++i_;
                    FROST_TRY(character(&hi));
                    if (hi < lo) return err("character range out of order");
                }
                ranges.push_back({lo, hi});
            }
            if (i_ >= t_.size()) return err("unterminated character class");
            ++i_;
            *out = expr_class(std::move(ranges), neg);
            return FROST_OK;
        }
        if (c == '(') {
            ++i_;
            FROST_TRY(alternatives(out, depth + 1));
            skip();
            if (i_ >= t_.size() || t_[i_] != ')') return err("expected ')'");
            ++i_;
            return FROST_OK;
        }
        if (c == '.') {
            ++i_;
            *out = expr_class({}, true);
            return FROST_OK;
        }
        if (name_char(c)) {
            *out = expr_ref(name());
            return FROST_OK;
        }
        return err(std::string("unexpected character '") + std::string(1, c) + "'");
    }

    std::string_view t_;
    size_t i_ = 0;
};

}  // namespace

frost_status parse_gbnf_rules(std::string_view text, std::vector<RuleDef>* out) {
    if (text.size() > kMaxGrammarBytes)
        return fail(FROST_ERR_INVALID_ARG, "grammar: text over %zu bytes", kMaxGrammarBytes);
    return GbnfParser(text).rules(out);
}

frost_status parse_gbnf(std::string_view text, Grammar* out) {
    std::vector<RuleDef> defs;
    FROST_TRY(parse_gbnf_rules(text, &defs));
    return lower(defs, "root", out);
}

}  // namespace frost::text::grammar
