// Lowering front-end syntax trees into the byte-level rule IR (see grammar.h).
#include "text/grammar/grammar.h"

#include <map>
#include <unordered_map>

#include "exec/error.h"
#include "text/grammar/utf8_ranges.h"

namespace frost::text::grammar {

Expr expr_bytes(std::string s) {
    Expr e;
    e.kind = Expr::Kind::Bytes;
    e.text = std::move(s);
    return e;
}
Expr expr_ref(std::string name) {
    Expr e;
    e.kind = Expr::Kind::Ref;
    e.text = std::move(name);
    return e;
}
Expr expr_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
    Expr e;
    e.kind = Expr::Kind::Class;
    e.ranges = std::move(ranges);
    e.negated = negated;
    return e;
}
Expr expr_repeat(Expr x, int min, int max) {
    Expr e;
    e.kind = Expr::Kind::Repeat;
    e.kids.push_back(std::move(x));
    e.min = min;
    e.max = max;
    return e;
}
Expr expr_seq(std::vector<Expr> kids) {
    Expr e;
    e.kind = Expr::Kind::Seq;
    e.kids = std::move(kids);
    return e;
}
Expr expr_alt(std::vector<Expr> kids) {
    Expr e;
    e.kind = Expr::Kind::Alt;
    e.kids = std::move(kids);
    return e;
}

namespace {

using Alts = std::vector<std::vector<Elem>>;

class Lowerer {
public:
    explicit Lowerer(Grammar* g) : g_(g) {}

    frost_status run(const std::vector<RuleDef>& defs, const std::string& root) {
        for (const auto& d : defs) {
            if (names_.count(d.name)) return fail(FROST_ERR_INVALID_ARG, "rule '%s' is defined twice", d.name.c_str());
            names_[d.name] = uint32_t(g_->rules.size());
            g_->rules.push_back(Rule{d.name, {}});
        }
        auto it = names_.find(root);
        if (it == names_.end()) return fail(FROST_ERR_INVALID_ARG, "no rule named '%s' (the start rule)", root.c_str());
        g_->root = it->second;
        for (const auto& d : defs) {
            Alts alts;
            FROST_TRY(alts_of(d.body, d.name, &alts));
            g_->rules[names_[d.name]].alts = std::move(alts);
        }
        return check_left_recursion();
    }

private:
    uint32_t set_index(const ByteSet& s) {
        auto it = sets_.find(s);
        if (it != sets_.end()) return it->second;
        const uint32_t id = uint32_t(g_->sets.size());
        g_->sets.push_back(s);
        sets_[s] = id;
        return id;
    }
    Elem byte_elem(uint8_t lo, uint8_t hi) {
        ByteSet s{};
        for (unsigned b = lo; b <= hi; ++b) byteset_add(s, uint8_t(b));
        return Elem{false, set_index(s)};
    }
    frost_status new_rule(const std::string& parent, Alts alts, uint32_t* id) {
        if (g_->rules.size() >= kMaxRules)
            return fail(FROST_ERR_INVALID_ARG, "grammar too large (over %zu rules after expansion)", kMaxRules);
        *id = uint32_t(g_->rules.size());
        g_->rules.push_back(Rule{parent + "#" + std::to_string(*id), std::move(alts)});
        return FROST_OK;
    }

    frost_status alts_of(const Expr& e, const std::string& parent, Alts* out) {
        if (e.kind == Expr::Kind::Alt) {
            for (const auto& k : e.kids) {
                std::vector<Elem> seq;
                FROST_TRY(seq_of(k, parent, &seq));
                out->push_back(std::move(seq));
            }
            return FROST_OK;
        }
        std::vector<Elem> seq;
        FROST_TRY(seq_of(e, parent, &seq));
        out->push_back(std::move(seq));
        return FROST_OK;
    }

    frost_status seq_of(const Expr& e, const std::string& parent, std::vector<Elem>* out) {
        switch (e.kind) {
            case Expr::Kind::Seq:
                for (const auto& k : e.kids) FROST_TRY(seq_of(k, parent, out));
                return FROST_OK;
            case Expr::Kind::Bytes:
                for (unsigned char c : e.text) out->push_back(byte_elem(c, c));
                return FROST_OK;
            case Expr::Kind::Ref: {
                auto it = names_.find(e.text);
                if (it == names_.end()) return fail(FROST_ERR_INVALID_ARG, "rule '%s' is used but not defined", e.text.c_str());
                out->push_back(Elem{true, it->second});
                return FROST_OK;
            }
            case Expr::Kind::Class: {
                std::vector<ByteRangeSeq> seqs;
                for (const auto& r : normalize_ranges(e.ranges, e.negated)) utf8_sequences(r.first, r.second, &seqs);
                if (seqs.empty()) return fail(FROST_ERR_INVALID_ARG, "a character class in rule '%s' matches nothing", parent.c_str());
                // All one-byte: a single byte set; otherwise a helper rule of byte sequences.
                bool ascii = true;
                for (const auto& s : seqs) ascii = ascii && s.size() == 1;
                if (ascii) {
                    ByteSet set{};
                    for (const auto& s : seqs)
                        for (unsigned b = s[0].first; b <= s[0].second; ++b) byteset_add(set, uint8_t(b));
                    out->push_back(Elem{false, set_index(set)});
                    return FROST_OK;
                }
                Alts alts;
                for (const auto& s : seqs) {
                    std::vector<Elem> a;
                    for (const auto& br : s) a.push_back(byte_elem(br.first, br.second));
                    alts.push_back(std::move(a));
                }
                uint32_t id;
                FROST_TRY(new_rule(parent, std::move(alts), &id));
                out->push_back(Elem{true, id});
                return FROST_OK;
            }
            case Expr::Kind::Alt: {
                Alts alts;
                FROST_TRY(alts_of(e, parent, &alts));
                uint32_t id;
                FROST_TRY(new_rule(parent, std::move(alts), &id));
                out->push_back(Elem{true, id});
                return FROST_OK;
            }
            case Expr::Kind::Repeat:
                return repeat(e, parent, out);
        }
        return FROST_OK;
    }

    frost_status repeat(const Expr& e, const std::string& parent, std::vector<Elem>* out) {
        if (e.min < 0 || e.min > kMaxRepeat || (e.max >= 0 && (e.max < e.min || e.max > kMaxRepeat)))
            return fail(FROST_ERR_INVALID_ARG, "repetition {%d,%d} in rule '%s' is out of range (0 <= m <= n <= %d)",
                        e.min, e.max, parent.c_str(), kMaxRepeat);
        // The repeated item as one element (a helper rule unless it already is one element).
        std::vector<Elem> item;
        FROST_TRY(seq_of(e.kids[0], parent, &item));
        Elem x;
        if (item.size() == 1) {
            x = item[0];
        } else {
            uint32_t id;
            FROST_TRY(new_rule(parent, Alts{item}, &id));
            x = Elem{true, id};
        }
        for (int i = 0; i < e.min; ++i) out->push_back(x);
        if (e.max < 0) {  // star: S ::= x S | ""
            uint32_t s;
            FROST_TRY(new_rule(parent, Alts{}, &s));
            g_->rules[s].alts = Alts{{x, Elem{true, s}}, {}};
            out->push_back(Elem{true, s});
        } else if (e.max > e.min) {  // O_k ::= x O_{k-1} | "" ; O_1 ::= x | ""
            uint32_t prev;
            FROST_TRY(new_rule(parent, Alts{{x}, {}}, &prev));
            for (int k = 2; k <= e.max - e.min; ++k) {
                uint32_t o;
                FROST_TRY(new_rule(parent, Alts{{x, Elem{true, prev}}, {}}, &o));
                prev = o;
            }
            out->push_back(Elem{true, prev});
        }
        return FROST_OK;
    }

    // A rule that can reach itself before consuming a byte would make the matcher's closure
    // loop forever; find such cycles once here.
    frost_status check_left_recursion() {
        const size_t n = g_->rules.size();
        std::vector<char> nullable(n, 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (const auto& a : g_->rules[r].alts) {
                    bool all = true;
                    for (const auto& el : a) all = all && el.is_ref && nullable[el.id];
                    if (all) { nullable[r] = 1; changed = true; break; }
                }
            }
        }
        std::vector<std::vector<uint32_t>> first(n);
        for (size_t r = 0; r < n; ++r)
            for (const auto& a : g_->rules[r].alts)
                for (const auto& el : a) {
                    if (!el.is_ref) break;
                    first[r].push_back(el.id);
                    if (!nullable[el.id]) break;
                }
        // Iterative DFS with colours (0 new, 1 on the path, 2 done).
        std::vector<char> colour(n, 0);
        for (size_t s = 0; s < n; ++s) {
            if (colour[s]) continue;
            std::vector<std::pair<uint32_t, size_t>> stack{{uint32_t(s), 0}};
            colour[s] = 1;
            while (!stack.empty()) {
                auto& [r, i] = stack.back();
                if (i == first[r].size()) {
                    colour[r] = 2;
                    stack.pop_back();
                    continue;
                }
                const uint32_t nx = first[r][i++];
                if (colour[nx] == 1) {
                    std::string name = g_->rules[nx].name;
                    name = name.substr(0, name.find('#'));
                    return fail(FROST_ERR_INVALID_ARG,
                                "left recursion through rule '%s' (it can reach itself without consuming input; "
                                "a repetition of something that can be empty counts too)", name.c_str());
                }
                if (colour[nx] == 0) {
                    colour[nx] = 1;
                    stack.push_back({nx, 0});
                }
            }
        }
        return FROST_OK;
    }

    Grammar* g_;
    std::unordered_map<std::string, uint32_t> names_;
    std::map<ByteSet, uint32_t> sets_;
};

}  // namespace

frost_status lower(const std::vector<RuleDef>& defs, const std::string& root, Grammar* out) {
    *out = Grammar{};
    Grammar g;
    FROST_TRY(Lowerer(&g).run(defs, root));
    *out = std::move(g);
    return FROST_OK;
}

}  // namespace frost::text::grammar
