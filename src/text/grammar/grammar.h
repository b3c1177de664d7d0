// Constrained decoding, part 1: the grammar IR every front end lowers to. A Grammar is a set of
// rules; each rule is a list of alternatives; each alternative a sequence of elements, an element
// being either one byte drawn from a 256-bit set or a reference to a rule. Everything works on
// BYTES (tokens are byte strings): Unicode character classes are lowered to UTF-8 byte sequences
// (utf8_ranges.h), repetition to helper rules. Front ends (gbnf.h, regex.h, json_schema.h) build
// an Expr tree per rule and call lower(); machine.h runs the result as a pushdown automaton.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frost/exec.h"

namespace frost::text::grammar {

using ByteSet = std::array<uint64_t, 4>;  // bit b set: byte b allowed
inline bool byteset_has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1u; }
inline void byteset_add(ByteSet& s, uint8_t b) { s[b >> 6] |= uint64_t{1} << (b & 63); }

struct Elem {
    bool is_ref = false;
    uint32_t id = 0;  // index into Grammar::sets (a byte) or Grammar::rules (a reference)
};

struct Rule {
    std::string name;                       // "" never; helper rules are named "<parent>#n"
    std::vector<std::vector<Elem>> alts;    // an empty alternative matches the empty string
};

struct Grammar {
    std::vector<Rule> rules;
    std::vector<ByteSet> sets;
    uint32_t root = 0;
};

// Front-end syntax tree of one rule body.
struct Expr {
    enum class Kind { Seq, Alt, Bytes, Class, Ref, Repeat } kind = Kind::Seq;
    std::vector<Expr> kids;                               // Seq / Alt items; Repeat: kids[0]
    std::string text;                                     // Bytes: the bytes; Ref: rule name
    std::vector<std::pair<uint32_t, uint32_t>> ranges;    // Class: code point ranges, inclusive
    bool negated = false;                                 // Class: complement over all code points
    int min = 0, max = -1;                                // Repeat: {min,max}; max -1 = unbounded
};

struct RuleDef {
    std::string name;
    Expr body;
};

// Limits that keep hostile grammars bounded (a request carries them).
constexpr size_t kMaxGrammarBytes = size_t{1} << 20;
constexpr int kMaxRepeat = 1000;         // {m,n} bounds
constexpr size_t kMaxRules = 200000;     // after lowering
constexpr int kMaxNesting = 200;         // parenthesis / schema nesting while parsing

// Lowers `defs` (rule `root` is the start) into *out: resolves names (an undefined one is an
// error naming it), turns classes into UTF-8 byte sequences and repetition into helper rules,
// and rejects left recursion (a rule that can reach itself without consuming a byte), which a
// top-down pushdown matcher cannot run. FROST_ERR_INVALID_ARG + last_error() on failure.
frost_status lower(const std::vector<RuleDef>& defs, const std::string& root, Grammar* out);

// Convenience constructors for front ends.
Expr expr_bytes(std::string s);
Expr expr_ref(std::string name);
Expr expr_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated);
Expr expr_repeat(Expr e, int min, int max);
Expr expr_seq(std::vector<Expr> kids);
Expr expr_alt(std::vector<Expr> kids);

}  // namespace frost::text::grammar
