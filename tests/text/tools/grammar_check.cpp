// Test helper for tests/python/test_constrained_grammar.py: compiles one constraint and says, for
// each candidate string, whether the matcher accepts it as a complete output.
// stdin: line 1 {"kind": "json_object"|"json_schema"|"gbnf"|"regex", "source": <text or schema>},
// then one JSON string per line. stdout: "1" or "0" per candidate. A constraint that does not
// compile prints "error: <message>" and exits 2.
// With "generate": N (and "seed": S) in line 1 it instead prints N random sentences of the
// grammar (grammar_sample_util.h), one per line as lowercase hex of the exact bytes, and nothing
// reads stdin; a dead end (a prefix the grammar allows but cannot finish) prints "dead end: <hex>"
// and exits 3.
#include <cstdio>
#include <iostream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "text/grammar/front_ends.h"
#include "text/grammar/machine.h"
#include "text/grammar_sample_util.h"

namespace g = frost::text::grammar;

namespace {

std::string hex(const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string o;
    for (unsigned char c : s) {
        o += d[c >> 4];
        o += d[c & 15];
    }
    return o;
}

}  // namespace

int main() {
    std::string line;
    if (!std::getline(std::cin, line)) return 2;
    const auto spec = nlohmann::ordered_json::parse(line, nullptr, false);
    if (spec.is_discarded() || !spec.contains("kind")) {
        std::cout << "error: bad spec line\n";
        return 2;
    }
    const std::string kind = spec["kind"];
    g::Grammar gr;
    frost_status st = FROST_ERR_INVALID_ARG;
    if (kind == "json_object") st = g::parse_gbnf(g::json_object_gbnf(), &gr);
    else if (kind == "json_schema") st = g::parse_json_schema(spec["source"], &gr);
    else if (kind == "gbnf") st = g::parse_gbnf(spec["source"].get<std::string>(), &gr);
    else if (kind == "regex") st = g::parse_regex(spec["source"].get<std::string>(), &gr);
    if (st != FROST_OK) {
        std::cout << "error: " << frost::last_error() << "\n";
        return 2;
    }
    g::Machine m(std::move(gr));
    if (spec.contains("generate")) {
        std::mt19937_64 rng(spec.value("seed", uint64_t{1}));
        const int n = spec["generate"].get<int>();
        for (int made = 0, tries = 0; made < n && tries < 20 * n; ++tries) {
            std::string s;
            bool dead = false;
            if (frost::text::testing::sample_sentence(m, rng, 3000, &s, &dead)) {
                std::cout << hex(s) << "\n";
                ++made;
            } else if (dead) {
                std::cout << "dead end: " << hex(s) << "\n";
                return 3;
            }
        }
        return 0;
    }
    while (std::getline(std::cin, line)) {
        const std::string s = nlohmann::json::parse(line).get<std::string>();
        const uint32_t f = m.walk(m.start(), s.data(), s.size());
        std::cout << (f != g::kDead && m.accepts(f) ? "1" : "0") << "\n";
    }
    return 0;
}
