// Anthropic Messages API: the request translation (anthropic_to_chat) and its routes, Api::messages
// (the builder: messages_builder.cpp).
#include "serve/messages_api.h"

#include <new>

#include "serve/api.h"
#include "serve/ids.h"
#include "serve/json_guard.h"
#include "serve/request_fields.h"
#include "serve/sse_text.h"
#include "text/chat_template.h"

namespace frost::serve {

using nlohmann::json;

namespace {
// A tool_use input as the arguments string a chat message carries: Python's json.dumps form
// (", " and ": "), which is what the template's tojson writes and the model itself produces.
std::string tool_arguments(const json& input) {
    try {
        return text::python_json_dumps(nlohmann::ordered_json(input));
    } catch (const std::bad_alloc&) {
        throw;  // the heap refused (T33): the request fails, its input is not the cause
    } catch (const std::exception&) {  // deeper than the template's bound: the validator names it
        return json_text(input);
    }
}

bool known_version(const std::string& v) {
    if (v.size() != 10 || v[4] != '-' || v[7] != '-') return false;
    for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
        if (v[i] < '0' || v[i] > '9') return false;
    return v >= "2023-06-01" && v.substr(5, 2) >= "01" && v.substr(5, 2) <= "12" && v.substr(8, 2) >= "01" &&
           v.substr(8, 2) <= "31";
}

const char* error_type(int status) {
    switch (status) {
        case 401: return "authentication_error";
        case 403: return "permission_error";
        case 404: return "not_found_error";
        case 413: return "request_too_large";
        case 429: return "rate_limit_error";
        case 503: return "overloaded_error";
        default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

// Text of a string or of an array of {"type":"text","text"} blocks (system, tool_result).
bool text_of(const json& v, const std::string& param, std::string* out, ApiError* err) {
    if (v.is_string()) {
        *out = v.get<std::string>();
        return true;
    }
    if (!v.is_array()) return reject(err, param, "must be a string or an array of text blocks");
    out->clear();
    for (size_t j = 0; j < v.size(); ++j) {
        const std::string p = param + "[" + std::to_string(j) + "]";
        if (!v[j].is_object() || str_of(v[j], "type") != "text" || !v[j].contains("text") || !v[j]["text"].is_string())
            return reject(err, p, "only text blocks ({\"type\":\"text\",\"text\":...}) are supported here");
        if (!out->empty()) *out += "\n";
        *out += v[j]["text"].get<std::string>();
    }
    return true;
}

// One Anthropic message -> one or more OpenAI messages (tool_result blocks become "tool" messages
// placed before the user's own text, as Anthropic requires them first in the turn).
bool translate_message(const json& m, size_t i, json* out, ApiError* err) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return reject(err, p, "must be an object");
    const std::string role = str_of(m, "role");
    if (role != "user" && role != "assistant") return reject(err, p + ".role", "must be \"user\" or \"assistant\"");
    if (!m.contains("content")) return reject(err, p + ".content", "required");
    const json& c = m["content"];
    if (c.is_string()) {
        out->push_back(json{{"role", role}, {"content", c}});
        return true;
    }
    if (!c.is_array()) return reject(err, p + ".content", "must be a string or an array of content blocks");
    std::string text, thinking;
    json calls = json::array();
    for (size_t j = 0; j < c.size(); ++j) {
        const std::string bp = p + ".content[" + std::to_string(j) + "]";
        const json& b = c[j];
        if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) return reject(err, bp + ".type", "required");
        const std::string type = b["type"].get<std::string>();
        if (type == "text") {
            if (!b.contains("text") || !b["text"].is_string()) return reject(err, bp + ".text", "must be a string");
            text += b["text"].get<std::string>();
        } else if (type == "thinking" && role == "assistant") {
            thinking += str_of(b, "thinking");
        } else if (type == "redacted_thinking" && role == "assistant") {
            // Opaque by definition: nothing of it can be rendered.
        } else if (type == "tool_use" && role == "assistant") {
            if (!b.contains("id") || !b["id"].is_string()) return reject(err, bp + ".id", "must be a string");
            if (!b.contains("name") || !b["name"].is_string()) return reject(err, bp + ".name", "must be a string");
            const json input = b.contains("input") ? b["input"] : json::object();
            if (!input.is_object()) return reject(err, bp + ".input", "must be an object");
            calls.push_back(json{{"id", b["id"]},
                                 {"type", "function"},
                                 {"function", {{"name", b["name"]}, {"arguments", tool_arguments(input)}}}});
        } else if (type == "tool_result" && role == "user") {
            if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
                return reject(err, bp + ".tool_use_id", "must be a string");
            std::string result;
            if (b.contains("content") && !text_of(b["content"], bp + ".content", &result, err)) return false;
            out->push_back(json{{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
        } else {
            return reject(err, bp + ".type",
                          "'" + type + "' is not supported in a " + role +
                              " message (text, tool_result; assistant: text, thinking, tool_use)");
        }
    }
    if (role == "user") {
        if (!text.empty() || out->empty() || out->back().value("role", "") != "tool")
            out->push_back(json{{"role", "user"}, {"content", text}});
        return true;
    }
    json a = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) a["reasoning_content"] = thinking;
    if (!calls.empty()) a["tool_calls"] = calls;
    out->push_back(a);
    return true;
}

bool translate_tools(const json& tools, json* chat, ApiError* err) {
    if (!tools.is_array()) return reject(err, "tools", "must be an array");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string p = "tools[" + std::to_string(i) + "]";
        const json& t = tools[i];
        if (!t.is_object()) return reject(err, p, "must be an object");
        if (t.contains("type") && !(t["type"].is_string() && t["type"].get<std::string>() == "custom"))
            return reject(err, p + ".type", "only custom (client) tools with an input_schema are supported");
        for (auto it = t.begin(); it != t.end(); ++it)
            if (it.key() != "name" && it.key() != "description" && it.key() != "input_schema" && it.key() != "type" &&
                it.key() != "cache_control")
                return reject(err, p + "." + it.key(), "unknown field");
        if (!t.contains("name") || !t["name"].is_string()) return reject(err, p + ".name", "must be a string");
        if (!t.contains("input_schema") || !t["input_schema"].is_object())
            return reject(err, p + ".input_schema", "required, a JSON schema object");
        json fn = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
        if (t.contains("description")) fn["description"] = t["description"];
        out.push_back(json{{"type", "function"}, {"function", fn}});
    }
    (*chat)["tools"] = out;
    return true;
}

bool translate_tool_choice(const json& tc, json* chat, ApiError* err) {
    if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
        return reject(err, "tool_choice.type", "required: auto, any, tool or none");
    const std::string type = tc["type"].get<std::string>();
    if (type == "auto") (*chat)["tool_choice"] = "auto";
    else if (type == "any") (*chat)["tool_choice"] = "required";
    else if (type == "none") (*chat)["tool_choice"] = "none";
    else if (type == "tool") {
        if (!tc.contains("name") || !tc["name"].is_string()) return reject(err, "tool_choice.name", "required with type tool");
        (*chat)["tool_choice"] = json{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    } else {
        return reject(err, "tool_choice.type", "must be auto, any, tool or none");
    }
    if (tc.contains("disable_parallel_tool_use")) {
        if (!tc["disable_parallel_tool_use"].is_boolean())
            return reject(err, "tool_choice.disable_parallel_tool_use", "must be a boolean");
        if (tc["disable_parallel_tool_use"].get<bool>()) (*chat)["parallel_tool_calls"] = false;
    }
    return true;
}
}  // namespace

std::string anthropic_error_body(int status, const std::string& message) {
    return json_text(json{{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}});
}

bool anthropic_to_chat(const json& body, json* chat, ApiError* err) {
    if (!body.is_object()) return reject(err, "body", "must be a JSON object");
    if (!only_known_fields(body,
                           {"model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature",
                            "top_p", "top_k", "tools", "tool_choice", "metadata", "thinking", "service_tier",
                            "cache_control", "output_config"},
                           err, "not an Anthropic Messages field Frost supports"))
        return false;
    if (!body.contains("max_tokens")) return reject(err, "max_tokens", "required");
    if (!body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1)
        return reject(err, "max_tokens", "must be an integer >= 1");
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        return reject(err, "messages", "required, a non-empty array");
    json msgs = json::array();
    if (body.contains("system")) {
        std::string sys;
        if (!text_of(body["system"], "system", &sys, err)) return false;
        msgs.push_back(json{{"role", "system"}, {"content", sys}});
    }
    for (size_t i = 0; i < body["messages"].size(); ++i)
        if (!translate_message(body["messages"][i], i, &msgs, err)) return false;
    json c = {{"messages", msgs}, {"max_tokens", body["max_tokens"]}};
    if (body.contains("model")) c["model"] = body["model"];
    for (const char* k : {"stream", "temperature", "top_p", "top_k"})
        if (body.contains(k)) c[k] = body[k];
    if (body.contains("stop_sequences")) {
        const json& s = body["stop_sequences"];
        if (!s.is_array()) return reject(err, "stop_sequences", "must be an array of strings");
        for (size_t i = 0; i < s.size(); ++i)
            if (!s[i].is_string()) return reject(err, "stop_sequences[" + std::to_string(i) + "]", "must be a string");
        if (!s.empty()) c["stop"] = s;
    }
    if (body.contains("tools") && !translate_tools(body["tools"], &c, err)) return false;
    if (body.contains("tool_choice") && !translate_tool_choice(body["tool_choice"], &c, err)) return false;
    if (body.contains("thinking")) {
        const json& t = body["thinking"];
        const std::string type = str_of(t, "type");
        // The model has one switch: enabled / adaptive / between_tools turn thinking on
        // (budget_tokens: max_tokens bounds it all), disabled turns it off.
        if (type == "enabled" || type == "adaptive" || type == "between_tools") c["enable_thinking"] = true;
        else if (type == "disabled") c["enable_thinking"] = false;
        else return reject(err, "thinking.type", "must be enabled, adaptive, between_tools or disabled");
    }
    // cache_control (top level or on blocks) is a no-op: every prefix is reused by capsules anyway.
    if (body.contains("output_config") && !body["output_config"].is_null()) {
        const json& oc = body["output_config"];
        if (!oc.is_object()) return reject(err, "output_config", "must be an object");
        for (auto it = oc.begin(); it != oc.end(); ++it) {
            if (it.key() == "effort") continue;  // no effort control beyond thinking: a documented no-op
            if (it.key() != "format") return reject(err, "output_config." + it.key(), "unknown field");
            const json& f = it.value();
            if (f.is_null()) continue;
            if (!f.is_object() || str_of(f, "type") != "json_schema" || !f.contains("schema"))
                return reject(err, "output_config.format", "must be {\"type\":\"json_schema\",\"schema\":{...}}");
            // Structured output runs on the chat path's response_format (constrained decoding).
            c["response_format"] = json{{"type", "json_schema"},
                                        {"json_schema", {{"name", "output"}, {"schema", f["schema"]}, {"strict", true}}}};
        }
    }
    *chat = std::move(c);
    return true;
}

HttpOut Api::messages(const HttpIn& in, const std::string& owner, bool count_only) {
    auto anthropic = [](HttpOut out) {  // an OpenAI-shaped error reply -> Anthropic's shape
        if (out.status < 400 || out.job) return out;
        const json e = json::parse(out.body, nullptr, false);
        std::string msg = out.body;
        if (e.is_object() && e.contains("error") && e["error"].is_object()) msg = e["error"].value("message", msg);
        out.body = anthropic_error_body(out.status, msg);
        return out;
    };
    if (in.method != "POST")
        return anthropic(error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use POST")));
    // A version is a date (the SDKs send 2023-06-01 or later): the shapes served here are those
    // of every dated version since 2023-06-01, so a well-formed date from then on is accepted and
    // anything else refused rather than guessed at.
    if (!in.anthropic_version.empty() && !known_version(in.anthropic_version))
        return anthropic(error_reply(invalid_field("anthropic-version", "'" + in.anthropic_version +
                                                                            "' is not a supported version (YYYY-MM-DD, 2023-06-01 or later)")));
    json body, chat;
    ApiError err;
    if (!parse_json_body(in.body, cfg_.limits.max_depth, &body, &err)) return anthropic(error_reply(err));
    if (count_only) {
        // POST /v1/messages/count_tokens: the same translation and rendering, nothing generated.
        // It takes no max_tokens (nor sampling or stream fields); the translator needs one.
        if (body.is_object()) {
            for (const char* k : {"max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata",
                                  "service_tier"})
                if (body.contains(k))
                    return anthropic(error_reply(invalid_field(k, "not a count_tokens field")));
            body["max_tokens"] = 1;
        }
        if (!anthropic_to_chat(body, &chat, &err)) return anthropic(error_reply(err));
        json tok = {{"messages", chat["messages"]}};
        for (const char* k : {"model", "tools", "enable_thinking"})
            if (chat.contains(k)) tok[k] = chat[k];
        HttpIn t = in;
        t.body = json_text(tok);
        HttpOut out = tokenize(t);
        if (out.status != 200) return anthropic(std::move(out));
        out.body = json_text(json{{"input_tokens", json::parse(out.body)["count"]}});
        return out;
    }
    if (!anthropic_to_chat(body, &chat, &err)) return anthropic(error_reply(err));
    return anthropic(generate_chat(chat, in, owner, [](const Job& job, const std::string& model) {
        return std::make_unique<MessagesBuilder>(new_id("msg", '_'), model, job.prompt.size());
    }));
}

}  // namespace frost::serve
