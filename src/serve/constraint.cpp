// Request constraints -> shared compiled automata (see constraint.h).
#include "serve/constraint.h"

#include <functional>
#include <algorithm>
#include <list>
#include <mutex>
#include <utility>

#include "exec/error.h"
#include "text/grammar/front_ends.h"

namespace frost::serve {

namespace {

namespace g = text::grammar;

// A small LRU of compiled automata by (kind, source). Machines are internally locked, so one
// may serve several requests at once.
class MachineCache {
public:
    std::shared_ptr<g::Machine> get(const std::string& key) {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = items_.begin(); it != items_.end(); ++it)
            if (it->first == key) {
                items_.splice(items_.begin(), items_, it);
                return it->second;
            }
        return nullptr;
    }
    void put(const std::string& key, std::shared_ptr<g::Machine> m) {
        std::lock_guard<std::mutex> lock(mu_);
        items_.emplace_front(key, std::move(m));
        if (items_.size() > kCap) items_.pop_back();
    }

private:
    static constexpr size_t kCap = 8;  // each holds up to ~16 MiB of memo tables and masks
    std::mutex mu_;
    std::list<std::pair<std::string, std::shared_ptr<g::Machine>>> items_;
};

MachineCache& cache() {
    static MachineCache c;
    return c;
}

frost_status cached(const std::string& key, const std::function<frost_status(g::Grammar*)>& build,
                    std::shared_ptr<g::Machine>* out) {
    if ((*out = cache().get(key))) return FROST_OK;
    g::Grammar gr;
    FROST_TRY(build(&gr));
    *out = std::make_shared<g::Machine>(std::move(gr));
    cache().put(key, *out);
    return FROST_OK;
}

}  // namespace

frost_status compile_constraint(ConstraintKind kind, const std::string& source, std::shared_ptr<g::Machine>* out) {
    out->reset();
    switch (kind) {
        case ConstraintKind::None:
            return FROST_OK;
        case ConstraintKind::JsonObject:
            return cached("o", [](g::Grammar* gr) { return g::parse_gbnf(g::json_object_gbnf(), gr); }, out);
        case ConstraintKind::JsonSchema:
            return cached("s" + source, [&](g::Grammar* gr) {
                nlohmann::ordered_json schema = nlohmann::ordered_json::parse(source, nullptr, false);
                if (schema.is_discarded()) return fail(FROST_ERR_INVALID_ARG, "the schema is not JSON");
                return g::parse_json_schema(schema, gr);
            }, out);
        case ConstraintKind::Grammar:
            return cached("g" + source, [&](g::Grammar* gr) { return g::parse_gbnf(source, gr); }, out);
        case ConstraintKind::Regex:
            return cached("r" + source, [&](g::Grammar* gr) { return g::parse_regex(source, gr); }, out);
    }
    return FROST_OK;
}

namespace {

// Qwen3.5/3.6's XML call body for one tool: <parameter=P>\nVALUE\n</parameter>\n per property, in
// declared order (optional ones may be left out). text::parse_tool_calls types a value by its
// property's single "type": those values are that schema's JSON; a "string" one is raw text
// (without '<', so it cannot close its tag early); any other (type arrays, anyOf, untyped) comes
// back as a string from the parser, so it is raw text too, or the enum's strings.
frost_status xml_params(const nlohmann::ordered_json& params, const std::string& prefix, std::string* rules,
                        std::string* seq) {
    seq->clear();
    if (!params.is_object() || !params.contains("properties")) return FROST_OK;
    const auto& props = params["properties"];
    if (!props.is_object())
        return fail(FROST_ERR_INVALID_ARG, "JSON schema at #: 'properties' must be an object");
    std::vector<std::string> required;
    if (params.contains("required") && params["required"].is_array())
        for (const auto& r : params["required"])
            if (r.is_string()) required.push_back(r.get<std::string>());
    size_t k = 0;
    for (auto it = props.begin(); it != props.end(); ++it, ++k) {
        const auto& sub = it.value();
        const std::string type = sub.is_object() && sub.contains("type") && sub["type"].is_string()
                                     ? sub["type"].get<std::string>() : std::string();
        std::string value;
        if (type == "string" || type.empty()) {
            if (sub.is_object() && sub.contains("enum") && sub["enum"].is_array()) {
                for (const auto& v : sub["enum"])
                    if (v.is_string()) value += (value.empty() ? "" : " | ") + g::gbnf_literal(v.get<std::string>());
            }
            if (value.empty()) {
                const int64_t lo = sub.is_object() ? sub.value("minLength", int64_t{0}) : 0;
                const int64_t hi = sub.is_object() ? sub.value("maxLength", int64_t{-1}) : -1;
                value = hi < 0 && lo == 0 ? "[^<]*"
                                          : "[^<]{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
            }
            value = "( " + value + " )";
        } else {
            std::string r;
            FROST_TRY(g::json_schema_rules(sub, prefix + "p" + std::to_string(k) + "-", &r, &value));
            *rules += r;
        }
        const bool req = std::find(required.begin(), required.end(), it.key()) != required.end();
        const std::string one = g::gbnf_literal("<parameter=" + it.key() + ">\n") + " " + value + " " +
                                g::gbnf_literal("\n</parameter>\n");
        *seq += (seq->empty() ? "" : " ") + (req ? one : "( " + one + " )?");
    }
    return FROST_OK;
}

}  // namespace

frost_status compile_tool_call(const nlohmann::json& tools, const std::string& name, bool parallel, bool xml,
                               std::shared_ptr<g::Machine>* out) {
    out->reset();
    std::string rules;
    std::string calls;  // alternatives: one per tool (named: only that tool's arguments)
    for (size_t i = 0; i < tools.size(); ++i) {
        const auto& f = tools[i]["function"];
        const std::string tname = f.value("name", "");
        if (!name.empty() && tname != name) continue;
        // ordered: properties are generated in the order the client declared them.
        nlohmann::ordered_json params = nlohmann::ordered_json::parse(
            f.contains("parameters") ? f["parameters"].dump() : std::string("{\"type\":\"object\"}"));
        std::string r, root;
        std::string prefix = std::to_string(i);
        prefix.insert(0, 1, 't');
        prefix += '-';
        const frost_status st = xml ? xml_params(params, prefix, &r, &root) : g::json_schema_rules(params, prefix, &r, &root);
        if (st != FROST_OK)
            return add_context(FROST_ERR_INVALID_ARG, "tools[" + std::to_string(i) + "].function.parameters");
        rules += r;
        if (xml) {
            // Named: the prompt already holds "<function=NAME>\n".
            const std::string head = name.empty() ? g::gbnf_literal("<function=" + tname + ">\n") + " " : std::string();
            calls += std::string(calls.empty() ? "" : " | ") + "( " + head + root + " " + g::gbnf_literal("</function>") + " )";
            continue;
        }
        const std::string head = name.empty()
            ? g::gbnf_literal("{\"name\": " + nlohmann::json(tname).dump() + ", \"arguments\": ") + " "
            : std::string();
        // JSON allows whitespace between "arguments": and its value and before the closing brace
        // (a model may emit " {" after the prompt's space; measured: the scripted API-test model
        // did, and without ws the mask left it nothing to say).
        calls += (calls.empty() ? "" : " | ") + head + "ws " + root + " ws \"}\"";
    }
    if (calls.empty()) return fail(FROST_ERR_INVALID_ARG, "tool_choice: no tool named '%s'", name.c_str());
    std::string text = "call ::= " + calls + "\n";
    const std::string end = g::gbnf_literal("\n</tool_call>");
    if (name.empty() && parallel)
        text += "root ::= call " + end + " ( " + g::gbnf_literal("\n<tool_call>\n") + " call " + end + " ){0,15}\n";
    else
        text += "root ::= call " + end + "\n";
    text += rules + g::json_base_gbnf();
    return cached("t" + text, [&](g::Grammar* gr) { return g::parse_gbnf(text, gr); }, out);
}

}  // namespace frost::serve
