// JSON Schema (OpenAI's strict structured-output subset) and "any JSON object" -> GBNF text ->
// Grammar (see front_ends.h).
//
// Supported: type (a name or an array of names, which is how strict mode spells nullable),
// properties / required / additionalProperties (false, true or absent: only the declared
// properties are generated, in declaration order; required ones always, the others optionally),
// items / minItems / maxItems, enum, const, anyOf, $ref to "#", "#/$defs/..." or
// "#/definitions/...", $defs / definitions, minLength / maxLength, and the annotations
// (description, title, default, examples, $schema, $id, $comment). Anything else is an error
// naming the keyword and where it is.
//
// Whitespace between tokens is optional and bounded (at most 20 of space/tab/newline), numbers
// have at most 16 integer, 15 fraction and 2 exponent digits: a model, however random, cannot
// pad forever, and every number is a finite, non-zero-underflowing double (|x| < 1e116, and a
// non-zero one >= 1e-114). Every accepted output is valid JSON for strict parsers too: string
// bytes are UTF-8 scalar values only (the class is expanded by utf8_ranges.h: no encoded
// surrogates, no overlongs), and a \u escape of a high surrogate (D800-DBFF) is accepted only
// as the first half of a pair with a low one (DC00-DFFF) right after it, never alone; a lone low
// surrogate is refused. RFC 8259 tolerates lone surrogates, but nlohmann::json, Python's
// codecs and most strict readers refuse them (a random CI generation tripped nlohmann on one).
#include <map>
#include <set>

#include "exec/error.h"
#include "text/grammar/front_ends.h"

namespace frost::text::grammar {

namespace {

const char* kBaseRules = R"(
ws ::= [ \t\n\r]{0,20}
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" json-u )
json-hex ::= [0-9a-fA-F]
json-u ::= ( [0-9a-cA-CeEfF] json-hex | [dD] [0-7] ) json-hex json-hex | [dD] [89abAB] json-hex json-hex "\\u" [dD] [c-fC-F] json-hex json-hex
json-int-part ::= "0" | [1-9] [0-9]{0,15}
json-integer ::= "-"? json-int-part
json-number ::= "-"? json-int-part ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?
json-bool ::= "true" | "false"
json-value ::= json-obj | json-arr | json-string | json-number | json-bool | "null"
json-member ::= json-string ws ":" ws json-value
json-obj ::= "{" ws ( json-member ( ws "," ws json-member )* ws )? "}"
json-arr ::= "[" ws ( json-value ( ws "," ws json-value )* ws )? "]"
)";

}  // namespace

std::string gbnf_literal(const std::string& bytes) {
    std::string o = "\"";
    for (unsigned char c : bytes) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += char(c);
        } else if (c < 0x20 || c == 0x7F) {
            static const char* hex = "0123456789ABCDEF";
            o += "\\x";
            o += hex[c >> 4];
            o += hex[c & 15];
        } else {
            o += char(c);
        }
    }
    return o + "\"";
}

namespace {

std::string lit(const std::string& bytes) { return gbnf_literal(bytes); }

using Json = nlohmann::ordered_json;
// The grammar of one JSON value (enum / const): scalars as their canonical text (a number or
// string must be written as the schema writes it), arrays and objects with any whitespace
// between their tokens.
std::string value_expr(const nlohmann::ordered_json& v) {
    if (v.is_array()) {
        if (v.empty()) return "( \"[\" ws \"]\" )";
        std::string o = "( \"[\" ws";
        for (size_t i = 0; i < v.size(); ++i) o += (i ? " ws \",\" ws " : " ") + value_expr(v[i]);
        return o + " ws \"]\" )";
    }
    if (v.is_object()) {
        if (v.empty()) return "( \"{\" ws \"}\" )";
        std::string o = "( \"{\" ws";
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            o += (first ? " " : " ws \",\" ws ") + lit(nlohmann::ordered_json(it.key()).dump()) + " ws \":\" ws " +
                 value_expr(it.value());
            first = false;
        }
        return o + " ws \"}\" )";
    }
    return lit(v.dump());
}

class SchemaGen {
public:
    SchemaGen(const nlohmann::ordered_json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

    // Rules only (no base rules); *root_rule names the schema's rule.
    frost_status run(std::string* rules, std::string* root_rule) {
        FROST_TRY(rule_for(root_, "#", 0, root_rule));
        *rules = rules_;
        return FROST_OK;
    }

private:
    frost_status bad(const std::string& path, const std::string& what) {
        return fail(FROST_ERR_INVALID_ARG, "JSON schema at %s: %s", path.c_str(), what.c_str());
    }
    std::string fresh() {
        std::string n = std::to_string(next_++);
        n.insert(0, prefix_ + "s");
        return n;
    }
    void emit(const std::string& name, const std::string& body) { rules_ += name + " ::= " + body + "\n"; }

    // A rule for schema `s` at `path`; *name receives its name.
    frost_status rule_for(const nlohmann::ordered_json& s, const std::string& path, int depth, std::string* name) {
        if (depth > kMaxNesting) return bad(path, "nested too deep");
        std::string body;
        FROST_TRY(expr_for(s, path, depth, &body));
        *name = fresh();
        emit(*name, body);
        return FROST_OK;
    }

    frost_status resolve(const std::string& ref, const std::string& path, int depth, std::string* name) {
        auto it = refs_.find(ref);
        if (it != refs_.end()) {
            *name = it->second;
            return FROST_OK;
        }
        const nlohmann::ordered_json* target = nullptr;
        if (ref == "#") {
            target = &root_;
        } else {
            for (const char* base : {"#/$defs/", "#/definitions/"}) {
                const std::string b = base;
                if (ref.compare(0, b.size(), b) != 0) continue;
                std::string key = ref.substr(b.size());
                // JSON pointer escapes.
                for (size_t p; (p = key.find("~1")) != std::string::npos;) key.replace(p, 2, "/");
                for (size_t p; (p = key.find("~0")) != std::string::npos;) key.replace(p, 2, "~");
                const std::string container = b.substr(2, b.size() - 3);
                auto c = root_.find(container);
                if (c != root_.end() && c->is_object()) {
                    auto t = c->find(key);
                    if (t != c->end()) target = &*t;
                }
            }
        }
        if (!target) return bad(path, "$ref '" + ref + "' does not resolve (supported: '#', '#/$defs/NAME', '#/definitions/NAME')");
        // Named before its body is generated, so recursive references terminate.
        *name = fresh();
        refs_[ref] = *name;
        std::string body;
        FROST_TRY(expr_for(*target, ref, depth + 1, &body));
        emit(*name, body);
        return FROST_OK;
    }

    frost_status expr_for(const nlohmann::ordered_json& s, const std::string& path, int depth, std::string* out) {
        if (depth > kMaxNesting) return bad(path, "nested too deep");
        if (s.is_boolean()) {
            if (!s.get<bool>()) return bad(path, "the schema 'false' matches nothing");
            *out = "json-value";
            return FROST_OK;
        }
        if (!s.is_object()) return bad(path, "a schema must be an object");
        static const std::set<std::string> kKnown = {
            "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum",
            "const", "anyOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "description", "title",
            "default", "examples", "$schema", "$id", "$comment"};
        for (auto it = s.begin(); it != s.end(); ++it)
            if (!kKnown.count(it.key()))
                return bad(path, "unsupported keyword '" + it.key() +
                                     "' (supported: type, properties, required, additionalProperties, items, "
                                     "minItems, maxItems, enum, const, anyOf, $ref, $defs, minLength, maxLength)");
        if (auto r = s.find("$ref"); r != s.end()) {
            if (!r->is_string()) return bad(path, "'$ref' must be a string");
            return resolve(r->get<std::string>(), path, depth, out);
        }
        if (auto c = s.find("const"); c != s.end()) {
            *out = value_expr(*c);
            return FROST_OK;
        }
        if (auto e = s.find("enum"); e != s.end()) {
            if (!e->is_array() || e->empty()) return bad(path, "'enum' must be a non-empty array");
            std::string alts;
            for (const auto& v : *e) alts += (alts.empty() ? "" : " | ") + value_expr(v);
            *out = "( " + alts + " )";
            return FROST_OK;
        }
        if (auto a = s.find("anyOf"); a != s.end()) {
            if (!a->is_array() || a->empty()) return bad(path, "'anyOf' must be a non-empty array of schemas");
            std::string alts;
            for (size_t i = 0; i < a->size(); ++i) {
                std::string r;
                FROST_TRY(rule_for((*a)[i], path + "/anyOf/" + std::to_string(i), depth + 1, &r));
                alts += (alts.empty() ? "" : " | ") + r;
            }
            *out = "( " + alts + " )";
            return FROST_OK;
        }
        std::vector<std::string> types;
        if (auto t = s.find("type"); t != s.end()) {
            if (t->is_string()) {
                types.push_back(t->get<std::string>());
            } else if (t->is_array() && !t->empty()) {
                for (const auto& x : *t) {
                    if (!x.is_string()) return bad(path, "'type' array items must be strings");
                    types.push_back(x.get<std::string>());
                }
            } else {
                return bad(path, "'type' must be a string or a non-empty array of strings");
            }
        } else if (s.contains("properties")) {
            types.push_back("object");
        } else if (s.contains("items")) {
            types.push_back("array");
        } else {
            *out = "json-value";
            return FROST_OK;
        }
        std::string alts;
        for (const auto& t : types) {
            std::string e;
            FROST_TRY(typed(s, t, path, depth, &e));
            alts += (alts.empty() ? "" : " | ") + e;
        }
        *out = types.size() == 1 ? alts : "( " + alts + " )";
        return FROST_OK;
    }

    static frost_status count(const nlohmann::ordered_json& s, const char* key, const std::string& path, int64_t* v,
                              SchemaGen* g) {
        auto it = s.find(key);
        if (it == s.end()) return FROST_OK;
        if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxRepeat)
            return g->bad(path, std::string("'") + key + "' must be an integer in [0, " + std::to_string(kMaxRepeat) + "]");
        *v = it->get<int64_t>();
        return FROST_OK;
    }

    frost_status typed(const nlohmann::ordered_json& s, const std::string& t, const std::string& path, int depth,
                       std::string* out) {
        if (t == "string") {
            int64_t mn = 0, mx = -1;
            FROST_TRY(count(s, "minLength", path, &mn, this));
            FROST_TRY(count(s, "maxLength", path, &mx, this));
            if (mx >= 0 && mx < mn) return bad(path, "'maxLength' is below 'minLength'");
            if (mn == 0 && mx < 0) *out = "json-string";
            else *out = "\"\\\"\" json-char{" + std::to_string(mn) + "," + (mx < 0 ? "" : std::to_string(mx)) + "} \"\\\"\"";
            return FROST_OK;
        }
        if (t == "number") { *out = "json-number"; return FROST_OK; }
        if (t == "integer") { *out = "json-integer"; return FROST_OK; }
        if (t == "boolean") { *out = "json-bool"; return FROST_OK; }
        if (t == "null") { *out = "\"null\""; return FROST_OK; }
        if (t == "object") return object(s, path, depth, out);
        if (t == "array") return array(s, path, depth, out);
        return bad(path, "unknown type '" + t + "'");
    }

    frost_status object(const nlohmann::ordered_json& s, const std::string& path, int depth, std::string* out) {
        auto ap = s.find("additionalProperties");
        if (ap != s.end() && !ap->is_boolean())
            return bad(path, "'additionalProperties' as a schema is not supported (use false)");
        auto props = s.find("properties");
        if (props == s.end()) {
            if (ap != s.end() && !ap->get<bool>()) { *out = "( \"{\" ws \"}\" )"; return FROST_OK; }
            *out = "json-obj";
            return FROST_OK;
        }
        if (!props->is_object()) return bad(path, "'properties' must be an object");
        std::set<std::string> required;
        if (auto r = s.find("required"); r != s.end()) {
            if (!r->is_array()) return bad(path, "'required' must be an array of names");
            for (const auto& x : *r) {
                if (!x.is_string()) return bad(path, "'required' must be an array of names");
                if (!props->contains(x.get<std::string>()))
                    return bad(path, "'required' names '" + x.get<std::string>() + "', which is not in 'properties'");
                required.insert(x.get<std::string>());
            }
        }
        // P_i: one member. F_i: members from i on, none emitted yet; R_i: after one was emitted.
        std::vector<std::string> p;
        std::vector<bool> req;
        for (auto it = props->begin(); it != props->end(); ++it) {
            std::string v;
            FROST_TRY(rule_for(it.value(), path + "/properties/" + it.key(), depth + 1, &v));
            p.push_back(lit(nlohmann::ordered_json(it.key()).dump()) + " ws \":\" ws " + v);
            req.push_back(required.count(it.key()) > 0);
        }
        const size_t n = p.size();
        const std::string base = fresh();
        auto F = [&](size_t i) { return base + "-f" + std::to_string(i); };
        auto R = [&](size_t i) { return base + "-r" + std::to_string(i); };
        emit(F(n), "\"\"");
        emit(R(n), "ws");
        for (size_t i = n; i-- > 0;) {
            emit(R(i), "ws \",\" ws " + p[i] + " " + R(i + 1) + (req[i] ? "" : " | " + R(i + 1)));
            emit(F(i), p[i] + " " + R(i + 1) + (req[i] ? "" : " | " + F(i + 1)));
        }
        *out = "( \"{\" ws " + F(0) + " \"}\" )";
        return FROST_OK;
    }

    frost_status array(const nlohmann::ordered_json& s, const std::string& path, int depth, std::string* out) {
        int64_t mn = 0, mx = -1;
        FROST_TRY(count(s, "minItems", path, &mn, this));
        FROST_TRY(count(s, "maxItems", path, &mx, this));
        if (mx >= 0 && mx < mn) return bad(path, "'maxItems' is below 'minItems'");
        std::string item = "json-value";
        if (auto it = s.find("items"); it != s.end()) FROST_TRY(rule_for(*it, path + "/items", depth + 1, &item));
        if (mx == 0) { *out = "( \"[\" ws \"]\" )"; return FROST_OK; }
        // item ( ws "," ws item ){max(mn-1,0), mx-1}
        const std::string more = "( ws \",\" ws " + item + " ){" + std::to_string(mn > 0 ? mn - 1 : 0) + "," +
                                 (mx < 0 ? "" : std::to_string(mx - 1)) + "}";
        const std::string list = item + " " + more + " ws";
        *out = "( \"[\" ws " + (mn > 0 ? list : "( " + list + " )?") + " \"]\" )";
        return FROST_OK;
    }

    const nlohmann::ordered_json& root_;
    std::string prefix_;
    std::string rules_;
    std::map<std::string, std::string> refs_;
    int next_ = 0;
};

}  // namespace

std::string json_object_gbnf() { return std::string("root ::= json-obj\n") + kBaseRules; }

std::string json_base_gbnf() { return kBaseRules; }

frost_status json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix, std::string* rules,
                               std::string* root_rule) {
    return SchemaGen(schema, prefix).run(rules, root_rule);
}

frost_status json_schema_gbnf(const nlohmann::ordered_json& schema, std::string* out) {
    std::string rules, root;
    FROST_TRY(json_schema_rules(schema, "", &rules, &root));
    *out = "root ::= " + root + "\n" + rules + kBaseRules;
    return FROST_OK;
}

frost_status json_schema_gbnf(const nlohmann::json& schema, std::string* out) {
    return json_schema_gbnf(nlohmann::ordered_json(schema), out);
}

frost_status parse_json_schema(const nlohmann::json& schema, Grammar* out) {
    return parse_json_schema(nlohmann::ordered_json(schema), out);
}

frost_status parse_json_schema(const nlohmann::ordered_json& schema, Grammar* out) {
    std::string text;
    FROST_TRY(json_schema_gbnf(schema, &text));
    std::vector<RuleDef> defs;
    FROST_TRY(parse_gbnf_rules(text, &defs));
    return lower(defs, "root", out);
}

}  // namespace frost::text::grammar
