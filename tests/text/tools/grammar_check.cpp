// Test helper for tests/python/test_constrained_grammar.py: compiles one constraint and says, for
// each candidate string, whether the matcher accepts it as a complete output.
// stdin: line 1 {"kind": "json_object"|"json_schema"|"gbnf"|"regex", "source": <text or schema>},
// then one JSON string per line. stdout: "1" or "0" per candidate. A constraint that does not
// compile prints "error: <message>" and exits 2.
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "text/grammar/front_ends.h"
#include "text/grammar/machine.h"

namespace g = frost::text::grammar;

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
    while (std::getline(std::cin, line)) {
        const std::string s = nlohmann::json::parse(line).get<std::string>();
        const uint32_t f = m.walk(m.start(), s.data(), s.size());
        std::cout << (f != g::kDead && m.accepts(f) ? "1" : "0") << "\n";
    }
    return 0;
}
