// Field-by-field validation of /v1/chat/completions and /v1/completions bodies. Every rejection
// names the field; numbers are checked for type (bool and float are not ints), finiteness and
// range before any value is used.
#include "serve/openai_request.h"

#include <cmath>
#include <limits>
#include <cctype>
#include <cstdio>

#include "serve/ids.h"
#include "serve/json_guard.h"

namespace frost::serve {
namespace {

using nlohmann::json;

constexpr double kMaxTemperature = 2.0;
constexpr double kMaxPenalty = 2.0;
constexpr double kMaxLogitBias = 100.0;
constexpr int kMaxTopK = 1 << 20;
constexpr size_t kMaxToolNameBytes = 64;

struct Ctx {
    ApiError* err;
    bool fail(const std::string& param, const std::string& msg) {
        *err = invalid_field(param, msg);
        return false;
    }
};

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "boolean";
        case json::value_t::string: return "string";
        case json::value_t::array: return "array";
        case json::value_t::object: return "object";
        case json::value_t::number_float: return "number";
        default: return "integer";
    }
}

// Integer in [lo, hi]. Rejects floats (even 5.0), bools, and values outside int64.
bool get_int(Ctx& c, const json& body, const char* key, int64_t lo, int64_t hi,
             std::optional<int64_t>* out) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return true;
    if (it->is_number_unsigned()) {
        const uint64_t u = it->get<uint64_t>();
        if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo)))
            return c.fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                   std::to_string(u));
        *out = int64_t(u);
        return true;
    }
    if (!it->is_number_integer())
        return c.fail(key, std::string("must be an integer, got ") + type_name(*it));
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
        return c.fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "], got " + std::to_string(v));
    *out = v;
    return true;
}

// Finite number in [lo, hi] (or (lo, hi] when lo_open).
bool get_number(Ctx& c, const json& body, const char* key, double lo, double hi, bool lo_open,
                double* out) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return true;
    if (!it->is_number()) return c.fail(key, std::string("must be a number, got ") + type_name(*it));
    const double v = it->get<double>();
    if (!std::isfinite(v)) return c.fail(key, "must be finite");
    if (v > hi || v < lo || (lo_open && v == lo)) {
        char buf[128];
        std::snprintf(buf, sizeof(buf), "must be in %s%g, %g], got %g", lo_open ? "(" : "[", lo, hi, v);
        return c.fail(key, buf);
    }
    *out = v;
    return true;
}

// The sampling values reach the engine as float: a double that rounds to 0 (or to a subnormal)
// there would pass a check made in double and then fail in the engine. Checked in float.
bool get_float(Ctx& c, const json& body, const char* key, float lo, float hi, bool lo_open, double* out) {
    double v = *out;
    if (!get_number(c, body, key, lo, hi, lo_open, &v)) return false;
    const float f = float(v);
    if ((v != 0 && !std::isnormal(f)) || f > hi || f < lo || (lo_open && f == lo)) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "must be 0 or a normal 32-bit float in %s%g, %g], got %g", lo_open ? "(" : "[",
                      double(lo), double(hi), v);
        return c.fail(key, buf);
    }
    *out = double(f);
    return true;
}

bool get_bool(Ctx& c, const json& obj, const char* key, const std::string& param, std::optional<bool>* out) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return true;
    if (!it->is_boolean()) return c.fail(param, std::string("must be a boolean, got ") + type_name(*it));
    *out = it->get<bool>();
    return true;
}

bool get_string(Ctx& c, const json& obj, const char* key, const std::string& param, std::string* out) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return true;
    if (!it->is_string()) return c.fail(param, std::string("must be a string, got ") + type_name(*it));
    *out = it->get<std::string>();
    return true;
}

bool valid_tool_name(const std::string& s) {
    if (s.empty() || s.size() > kMaxToolNameBytes) return false;
    for (char ch : s)
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-')) return false;
    return true;
}

// content: string, null (assistant with tool_calls), or an array of {type:"text", text} parts.
bool check_content(Ctx& c, const json& m, const std::string& p, const std::string& role) {
    auto it = m.find("content");
    if (it == m.end() || it->is_null()) {
        if (role == "assistant") return true;
        return c.fail(p + ".content", "is required for role '" + role + "'");
    }
    if (it->is_string()) return true;
    if (!it->is_array()) return c.fail(p + ".content", std::string("must be a string or an array of parts, got ") + type_name(*it));
    for (size_t i = 0; i < it->size(); ++i) {
        const json& part = (*it)[i];
        const std::string pp = p + ".content[" + std::to_string(i) + "]";
        if (!part.is_object()) return c.fail(pp, "must be an object");
        auto t = part.find("type");
        if (t == part.end() || !t->is_string() || *t != "text")
            return c.fail(pp + ".type", "only 'text' content parts are supported");
        auto tx = part.find("text");
        if (tx == part.end() || !tx->is_string()) return c.fail(pp + ".text", "must be a string");
    }
    return true;
}

bool check_tool_calls(Ctx& c, const json& m, const std::string& p, const RequestLimits& lim) {
    auto it = m.find("tool_calls");
    if (it == m.end() || it->is_null()) return true;
    if (!it->is_array()) return c.fail(p + ".tool_calls", "must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
        const json& tc = (*it)[i];
        const std::string pp = p + ".tool_calls[" + std::to_string(i) + "]";
        if (!tc.is_object()) return c.fail(pp, "must be an object");
        auto fn = tc.find("function");
        if (fn == tc.end() || !fn->is_object()) return c.fail(pp + ".function", "must be an object");
        auto name = fn->find("name");
        if (name == fn->end() || !name->is_string()) return c.fail(pp + ".function.name", "must be a string");
        auto args = fn->find("arguments");
        if (args != fn->end() && !args->is_string() && !args->is_object())
            return c.fail(pp + ".function.arguments", "must be a JSON string or object");
        // The body's depth guard cannot see inside a string; the chat template parses it.
        if (args != fn->end() && args->is_string() &&
            json_nesting_depth(args->get_ref<const std::string&>(), lim.max_arguments_depth) > lim.max_arguments_depth)
            return c.fail(pp + ".function.arguments",
                          "JSON nested deeper than " + std::to_string(lim.max_arguments_depth) + " levels");
    }
    return true;
}

bool check_messages(Ctx& c, const json& body, const RequestLimits& lim, GenRequest* out) {
    auto it = body.find("messages");
    if (it == body.end()) return c.fail("messages", "is required");
    if (!it->is_array()) return c.fail("messages", std::string("must be an array, got ") + type_name(*it));
    if (it->empty()) return c.fail("messages", "must not be empty");
    if (it->size() > lim.max_messages)
        return c.fail("messages", "at most " + std::to_string(lim.max_messages) + " messages");
    for (size_t i = 0; i < it->size(); ++i) {
        const json& m = (*it)[i];
        const std::string p = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return c.fail(p, std::string("must be an object, got ") + type_name(m));
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) return c.fail(p + ".role", "must be a string");
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
            return c.fail(p + ".role", "must be one of system, developer, user, assistant, tool; got '" + r + "'");
        if (!check_content(c, m, p, r)) return false;
        std::string tmp;
        if (!get_string(c, m, "name", p + ".name", &tmp)) return false;
        if (!get_string(c, m, "reasoning_content", p + ".reasoning_content", &tmp)) return false;
        if (r == "assistant" && !check_tool_calls(c, m, p, lim)) return false;
        if (r == "tool" && !get_string(c, m, "tool_call_id", p + ".tool_call_id", &tmp)) return false;
    }
    out->messages = *it;
    return true;
}

bool check_tools(Ctx& c, const json& body, const RequestLimits& lim, GenRequest* out) {
    auto it = body.find("tools");
    if (it != body.end() && !it->is_null()) {
        if (!it->is_array()) return c.fail("tools", "must be an array");
        if (it->size() > lim.max_tools) return c.fail("tools", "at most " + std::to_string(lim.max_tools) + " tools");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& t = (*it)[i];
            const std::string p = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) return c.fail(p, "must be an object");
            auto ty = t.find("type");
            if (ty == t.end() || !ty->is_string() || *ty != "function") return c.fail(p + ".type", "must be 'function'");
            auto fn = t.find("function");
            if (fn == t.end() || !fn->is_object()) return c.fail(p + ".function", "must be an object");
            auto name = fn->find("name");
            if (name == fn->end() || !name->is_string() || !valid_tool_name(name->get<std::string>()))
                return c.fail(p + ".function.name", "must be 1-64 characters of [a-zA-Z0-9_-]");
            std::string desc;
            if (!get_string(c, *fn, "description", p + ".function.description", &desc)) return false;
            auto params = fn->find("parameters");
            if (params != fn->end() && !params->is_null() && !params->is_object())
                return c.fail(p + ".function.parameters", "must be a JSON Schema object");
        }
        out->tools = *it;
    }
    std::optional<bool> par;
    if (!get_bool(c, body, "parallel_tool_calls", "parallel_tool_calls", &par)) return false;
    out->parallel_tool_calls = par.value_or(true);
    auto tc = body.find("tool_choice");
    if (tc == body.end() || tc->is_null()) return true;
    if (tc->is_string()) {
        const std::string s = tc->get<std::string>();
        if (s == "auto") out->tool_choice = ToolChoice::Auto;
        else if (s == "none") out->tool_choice = ToolChoice::None;
        else if (s == "required") out->tool_choice = ToolChoice::Required;
        else return c.fail("tool_choice", "must be 'auto', 'none', 'required' or a function object");
        if (out->tool_choice == ToolChoice::Required && out->tools.empty())
            return c.fail("tool_choice", "'required' needs a non-empty tools list");
        return true;
    }
    if (!tc->is_object()) return c.fail("tool_choice", "must be a string or an object");
    auto fn = tc->find("function");
    if (fn == tc->end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        return c.fail("tool_choice.function.name", "must be a string");
    const std::string name = (*fn)["name"].get<std::string>();
    bool found = false;
    for (const auto& t : out->tools)
        if (t["function"]["name"] == name) found = true;
    if (!found) return c.fail("tool_choice.function.name", "names no tool in 'tools': '" + name + "'");
    out->tool_choice = ToolChoice::Named;
    out->tool_choice_name = name;
    return true;
}

bool check_stop(Ctx& c, const json& body, const RequestLimits& lim, GenRequest* out) {
    auto it = body.find("stop");
    if (it == body.end() || it->is_null()) return true;
    std::vector<std::string> stops;
    if (it->is_string()) stops.push_back(it->get<std::string>());
    else if (it->is_array()) {
        for (size_t i = 0; i < it->size(); ++i) {
            if (!(*it)[i].is_string()) return c.fail("stop[" + std::to_string(i) + "]", "must be a string");
            stops.push_back((*it)[i].get<std::string>());
        }
    } else {
        return c.fail("stop", "must be a string or an array of strings");
    }
    if (stops.size() > lim.max_stop) return c.fail("stop", "at most " + std::to_string(lim.max_stop) + " stop strings");
    for (const auto& s : stops) {
        if (s.empty()) return c.fail("stop", "stop strings must not be empty");
        if (s.size() > lim.max_stop_bytes)
            return c.fail("stop", "each stop string is at most " + std::to_string(lim.max_stop_bytes) + " bytes");
    }
    out->stop = std::move(stops);
    return true;
}

bool check_prompt(Ctx& c, const json& body, const RequestLimits& lim, GenRequest* out) {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) return c.fail("prompt", "is required");
    if (it->is_string()) {
        out->prompt_text = it->get<std::string>();
        return true;
    }
    if (!it->is_array()) return c.fail("prompt", "must be a string or an array of token ids");
    if (it->size() == 1 && (*it)[0].is_string()) {
        out->prompt_text = (*it)[0].get<std::string>();
        return true;
    }
    if (it->empty()) return c.fail("prompt", "must not be empty");
    // Batched: an array of strings or of token-id arrays; each prompt gets its n choices.
    if ((*it)[0].is_string() || (*it)[0].is_array()) {
        if (it->size() > lim.max_batch_prompts)
            return c.fail("prompt", "at most " + std::to_string(lim.max_batch_prompts) + " prompts per request");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& v = (*it)[i];
            const std::string p = "prompt[" + std::to_string(i) + "]";
            BatchPrompt b;
            if (v.is_string()) {
                b.text = v.get<std::string>();
            } else if (v.is_array()) {
                if (v.empty()) return c.fail(p, "must not be empty");
                b.is_ids = true;
                for (size_t k = 0; k < v.size(); ++k) {
                    const json& t = v[k];
                    const std::string pk = p + "[" + std::to_string(k) + "]";
                    if (!t.is_number_integer() || (t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
                                                                         : t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()))
                        return c.fail(pk, "token ids must be integers in the vocabulary");
                    if (lim.vocab_size > 0 && t.get<int64_t>() >= lim.vocab_size)
                        return c.fail(pk, "token id is outside the vocabulary (size " + std::to_string(lim.vocab_size) + ")");
                    b.ids.push_back(int32_t(t.get<int64_t>()));
                }
            } else {
                return c.fail(p, "a batch holds strings or arrays of token ids");
            }
            if ((v.is_string() != (*it)[0].is_string()))
                return c.fail(p, "a batch mixes text and token-id prompts");
            out->batch.push_back(std::move(b));
        }
        out->prompt_text = out->batch[0].text;
        out->prompt_ids = out->batch[0].ids;
        out->prompt_is_ids = out->batch[0].is_ids;
        return true;
    }
    out->prompt_is_ids = true;
    out->prompt_ids.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
        const json& v = (*it)[i];
        const std::string p = "prompt[" + std::to_string(i) + "]";
        if (v.is_string() || v.is_array()) return c.fail(p, "a batch holds strings or arrays of token ids, not both kinds");
        if (!v.is_number_integer()) return c.fail(p, "token ids must be integers");
        if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
                                   : v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())
            return c.fail(p, "token id out of range");
        const int64_t id = v.get<int64_t>();
        if (lim.vocab_size > 0 && id >= lim.vocab_size)
            return c.fail(p, "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                                 std::to_string(lim.vocab_size) + ")");
        out->prompt_ids.push_back(int32_t(id));
    }
    return true;
}

bool check_logit_bias(Ctx& c, const json& body, const RequestLimits& lim, GenRequest* out) {
    auto it = body.find("logit_bias");
    if (it == body.end() || it->is_null()) return true;
    if (!it->is_object()) return c.fail("logit_bias", "must be an object of token id -> bias");
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
        const std::string& k = kv.key();
        const std::string p = "logit_bias[" + k + "]";
        if (k.empty() || k.size() > 10 || k.find_first_not_of("0123456789") != std::string::npos)
            return c.fail(p, "key must be a token id");
        const int64_t id = std::stoll(k);
        if (id > std::numeric_limits<int32_t>::max()) return c.fail(p, "key must be a token id");
        if (lim.vocab_size > 0 && id >= lim.vocab_size)
            return c.fail(p, "token id is outside the vocabulary (size " + std::to_string(lim.vocab_size) + ")");
        if (!kv.value().is_number() || !std::isfinite(kv.value().get<double>()) ||
            std::fabs(kv.value().get<double>()) > kMaxLogitBias)
            return c.fail(p, "bias must be a finite number in [-100, 100]");
        out->logit_bias.emplace_back(int32_t(id), float(kv.value().get<double>()));
    }
    return true;
}

bool check_unsupported(Ctx& c, const json& body, Endpoint endpoint, GenRequest* out) {
    if (endpoint == Endpoint::Chat) {
        // Chat: logprobs is a boolean, top_logprobs (0..20) the alternatives beside each token.
        std::optional<bool> b;
        if (!get_bool(c, body, "logprobs", "logprobs", &b)) return false;
        std::optional<int64_t> top;
        if (!get_int(c, body, "top_logprobs", 0, 20, &top)) return false;
        if (top && !(b && *b)) return c.fail("top_logprobs", "requires \"logprobs\": true");
        if (b && *b) out->logprobs = int(top.value_or(0));
    } else {
        // Legacy completions: logprobs is the integer count of alternatives (0..5); 0 returns the
        // chosen tokens' logprobs alone (as vLLM), null none.
        std::optional<int64_t> n;
        if (!get_int(c, body, "logprobs", 0, 5, &n)) return false;
        if (n) out->logprobs = int(*n);
        std::optional<bool> echo;
        if (!get_bool(c, body, "echo", "echo", &echo)) return false;
        out->echo = echo.value_or(false);
    }
    return true;
}

// Constrained decoding (issue 17): response_format json_object / json_schema and the `grammar` /
// `regex` extensions, at most one of them. Only the shape is checked here; the source is
// compiled by the API (constraint.h), which names the field when it does not compile. The
// schema is re-read from the raw body in key order, so properties are generated in the order
// the client declared them.
bool check_constraint(Ctx& c, const json& body, std::string_view body_text, GenRequest* out) {
    int given = 0;
    auto rf = body.find("response_format");
    if (rf != body.end() && !rf->is_null()) {
        if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
            return c.fail("response_format", "must be an object with a string 'type'");
        const std::string type = (*rf)["type"];
        if (type == "json_object") {
            out->constraint_kind = ConstraintKind::JsonObject;
            out->constraint_field = "response_format";
            ++given;
        } else if (type == "json_schema") {
            auto js = rf->find("json_schema");
            if (js == rf->end() || !js->is_object())
                return c.fail("response_format.json_schema", "must be an object with 'name' and 'schema'");
            if (js->contains("name") && !(*js)["name"].is_string())
                return c.fail("response_format.json_schema.name", "must be a string");
            if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null())
                return c.fail("response_format.json_schema.strict", "must be a boolean");
            auto sc = js->find("schema");
            if (sc == js->end() || !(sc->is_object() || sc->is_boolean()))
                return c.fail("response_format.json_schema.schema", "must be a JSON Schema object");
            const auto raw = nlohmann::ordered_json::parse(body_text, nullptr, false);
            out->constraint_source = raw.is_discarded() ? sc->dump()
                                                        : raw["response_format"]["json_schema"]["schema"].dump();
            out->constraint_kind = ConstraintKind::JsonSchema;
            out->constraint_field = "response_format.json_schema.schema";
            ++given;
        } else if (type != "text") {
            return c.fail("response_format.type", "must be 'text', 'json_object' or 'json_schema'");
        }
    }
    for (const char* key : {"grammar", "regex"}) {
        auto it = body.find(key);
        if (it == body.end() || it->is_null()) continue;
        if (!it->is_string() || it->get<std::string>().empty()) return c.fail(key, "must be a non-empty string");
        out->constraint_kind = key[0] == 'g' ? ConstraintKind::Grammar : ConstraintKind::Regex;
        out->constraint_source = it->get<std::string>();
        out->constraint_field = key;
        ++given;
    }
    if (given > 1)
        return c.fail(out->constraint_field,
                      "only one of response_format (json_object/json_schema), grammar and regex may be given");
    return true;
}

// Every field a body may carry; anything else is a 400 naming all of them (a parameter that is
// accepted must take effect, so one we do not know must not be silently dropped). `user`,
// `metadata`, `store` and `service_tier` are accepted as documented no-ops (bookkeeping fields of
// the OpenAI API that change no output).
bool check_known_fields(Ctx& c, const json& body, Endpoint endpoint) {
    static const char* kCommon[] = {"model", "stream", "stream_options", "max_tokens", "temperature", "top_p",
                                    "top_k", "min_p", "presence_penalty", "frequency_penalty",
                                    "repetition_penalty", "seed", "n", "stop", "logit_bias", "logprobs", "user",
                                    "metadata", "store", "service_tier", "session_id", "capsule_id", "pin_prefix",
                                    "response_format", "grammar", "regex"};
    static const char* kChat[] = {"messages", "tools", "tool_choice", "parallel_tool_calls", "max_completion_tokens",
                                  "top_logprobs", "response_format", "enable_thinking", "chat_template_kwargs",
                                  "continue_final_message", "add_generation_prompt"};
    static const char* kCompletion[] = {"prompt", "suffix", "echo", "best_of"};
    std::string unknown;
    std::string first;
    for (auto it = body.begin(); it != body.end(); ++it) {
        const std::string& k = it.key();
        bool known = false;
        for (const char* f : kCommon) known = known || k == f;
        if (endpoint == Endpoint::Chat)
            for (const char* f : kChat) known = known || k == f;
        else
            for (const char* f : kCompletion) known = known || k == f;
        if (known) continue;
        if (first.empty()) first = k;
        unknown += (unknown.empty() ? "'" : ", '") + k + "'";
    }
    if (unknown.empty()) return true;
    c.fail(first, "unknown field(s) " + unknown + ": not an OpenAI " +
                      (endpoint == Endpoint::Chat ? "chat completions" : "completions") + " parameter Frost supports");
    return false;
}

bool check_id_field(Ctx& c, const json& body, const char* key, std::string* out) {
    if (!get_string(c, body, key, key, out)) return false;
    if (out->empty()) return true;
    std::string why;
    if (!valid_id(*out, &why)) return c.fail(key, why);
    return true;
}

}  // namespace

bool parse_gen_request(Endpoint endpoint, std::string_view body_text, const RequestLimits& lim,
                       GenRequest* out, ApiError* err) {
    json body;
    if (!parse_json_body(body_text, lim.max_depth, &body, err)) return false;
    Ctx c{err};
    if (!body.is_object()) return c.fail("", "the body must be a JSON object");
    if (!check_known_fields(c, body, endpoint)) return false;
    GenRequest r;
    r.endpoint = endpoint;
    if (!get_string(c, body, "model", "model", &r.model)) return false;

    if (endpoint == Endpoint::Chat) {
        if (!check_messages(c, body, lim, &r)) return false;
        if (!check_tools(c, body, lim, &r)) return false;
    } else {
        if (!check_prompt(c, body, lim, &r)) return false;
        std::string suffix;
        if (!get_string(c, body, "suffix", "suffix", &suffix)) return false;
        if (!suffix.empty()) return c.fail("suffix", "is not supported by this server");
    }

    std::optional<bool> stream;
    if (!get_bool(c, body, "stream", "stream", &stream)) return false;
    r.stream = stream.value_or(false);
    auto so = body.find("stream_options");
    if (so != body.end() && !so->is_null()) {
        if (!so->is_object()) return c.fail("stream_options", "must be an object");
        std::optional<bool> iu;
        if (!get_bool(c, *so, "include_usage", "stream_options.include_usage", &iu)) return false;
        r.include_usage = iu.value_or(false);
    }

    std::optional<int64_t> mt, mct;
    if (!get_int(c, body, "max_tokens", 1, lim.max_tokens_cap, &mt)) return false;
    if (!get_int(c, body, "max_completion_tokens", 1, lim.max_tokens_cap, &mct)) return false;
    r.max_tokens = mct ? mct : mt;

    if (!get_float(c, body, "temperature", 0.0f, float(kMaxTemperature), false, &r.temperature)) return false;
    if (!get_float(c, body, "top_p", 0.0f, 1.0f, true, &r.top_p)) return false;
    std::optional<int64_t> top_k;
    if (!get_int(c, body, "top_k", -1, kMaxTopK, &top_k)) return false;
    if (top_k) r.top_k = *top_k < 0 ? 0 : int(*top_k);
    if (!get_float(c, body, "presence_penalty", float(-kMaxPenalty), float(kMaxPenalty), false, &r.presence_penalty))
        return false;
    if (!get_float(c, body, "frequency_penalty", float(-kMaxPenalty), float(kMaxPenalty), false, &r.frequency_penalty))
        return false;
    if (!get_float(c, body, "repetition_penalty", 0.0f, 10.0f, true, &r.repetition_penalty)) return false;
    if (!get_float(c, body, "min_p", 0.0f, 1.0f, false, &r.min_p)) return false;
    std::optional<int64_t> seed;
    if (!get_int(c, body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &seed))
        return false;
    if (seed) {
        r.seed = uint64_t(*seed);
        r.seed_set = true;
    }
    std::optional<int64_t> n;
    if (!get_int(c, body, "n", 1, lim.n_cap, &n)) return false;
    r.n = n ? int(*n) : 1;
    std::optional<int64_t> best_of;
    if (!get_int(c, body, "best_of", 1, lim.n_cap, &best_of)) return false;
    if (best_of && *best_of != r.n) return c.fail("best_of", "must equal n (best_of selection is not supported)");

    if (!check_stop(c, body, lim, &r)) return false;
    if (!check_logit_bias(c, body, lim, &r)) return false;
    if (!check_unsupported(c, body, endpoint, &r)) return false;
    if (!check_constraint(c, body, body_text, &r)) return false;
    std::string user;
    if (!get_string(c, body, "user", "user", &user)) return false;

    if (!get_bool(c, body, "enable_thinking", "enable_thinking", &r.enable_thinking)) return false;
    auto kw = body.find("chat_template_kwargs");
    if (kw != body.end() && !kw->is_null()) {
        if (!kw->is_object()) return c.fail("chat_template_kwargs", "must be an object");
        std::optional<bool> et;
        if (!get_bool(c, *kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &et)) return false;
        if (et) r.enable_thinking = et;
    }

    if (endpoint == Endpoint::Chat) {
        std::optional<bool> agp, cfm;
        if (!get_bool(c, body, "add_generation_prompt", "add_generation_prompt", &agp)) return false;
        if (!get_bool(c, body, "continue_final_message", "continue_final_message", &cfm)) return false;
        if (kw != body.end() && kw->is_object()) {  // also accepted inside chat_template_kwargs
            if (!agp && !get_bool(c, *kw, "add_generation_prompt", "chat_template_kwargs.add_generation_prompt", &agp))
                return false;
            if (!cfm && !get_bool(c, *kw, "continue_final_message", "chat_template_kwargs.continue_final_message", &cfm))
                return false;
        }
        r.continue_final_message = cfm.value_or(false);
        r.add_generation_prompt = agp.value_or(!r.continue_final_message);
        if (r.continue_final_message && r.add_generation_prompt)
            return c.fail("continue_final_message", "cannot be combined with add_generation_prompt: true");
        if (r.continue_final_message && (r.messages.back().value("role", "") != "assistant"))
            return c.fail("continue_final_message", "the last message must be the assistant's to continue");
    }
    if (!check_id_field(c, body, "session_id", &r.session_id)) return false;
    if (!check_id_field(c, body, "capsule_id", &r.capsule_id)) return false;
    std::optional<bool> pin;
    if (!get_bool(c, body, "pin_prefix", "pin_prefix", &pin)) return false;
    r.pin_prefix = pin.value_or(false);

    *out = std::move(r);
    return true;
}

bool check_context(const GenRequest& req, size_t prompt_tokens, size_t context_len,
                   const RequestLimits& /*limits*/, int64_t* max_new, ApiError* err) {
    if (prompt_tokens == 0) {
        *err = invalid_field(req.endpoint == Endpoint::Chat ? "messages" : "prompt", "the prompt is empty");
        return false;
    }
    if (prompt_tokens >= context_len) {
        *err = invalid_field(req.endpoint == Endpoint::Chat ? "messages" : "prompt",
                             "this model's maximum context length is " + std::to_string(context_len) +
                                 " tokens, but the prompt has " + std::to_string(prompt_tokens) +
                                 " tokens (at least one token must be left for the completion)");
        err->code = "context_length_exceeded";
        return false;
    }
    const int64_t room = int64_t(context_len - prompt_tokens);
    if (req.max_tokens) {
        if (*req.max_tokens > room) {
            *err = invalid_field("max_tokens",
                                 "this model's maximum context length is " + std::to_string(context_len) +
                                     " tokens; the prompt has " + std::to_string(prompt_tokens) +
                                     " tokens and max_tokens asks for " + std::to_string(*req.max_tokens) +
                                     " more");
            err->code = "context_length_exceeded";
            return false;
        }
        *max_new = *req.max_tokens;
    } else {
        *max_new = room;
    }
    return true;
}

}  // namespace frost::serve
