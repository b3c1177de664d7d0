// OpenAI Responses API: the request translation (responses_to_chat) and its routes, Api::responses
// (the builder and the store: responses_builder.cpp).
#include "serve/responses_api.h"

#include <algorithm>
#include <vector>

#include "serve/api.h"
#include "serve/http_route.h"
#include "serve/ids.h"
#include "serve/json_guard.h"
#include "serve/request_fields.h"
#include "serve/sse_text.h"

namespace frost::serve {

using nlohmann::json;

namespace {
// A message item's content: a string or input_text / output_text parts.
bool content_text(const json& c, const std::string& p, std::string* out, ApiError* err) {
    if (c.is_string()) {
        *out = c.get<std::string>();
        return true;
    }
    if (!c.is_array()) return reject(err, p, "must be a string or an array of input_text parts");
    out->clear();
    for (size_t j = 0; j < c.size(); ++j) {
        const std::string pp = p + "[" + std::to_string(j) + "]";
        const std::string type = str_of(c[j], "type");
        if (type != "input_text" && type != "output_text" && type != "text")
            return reject(err, pp + ".type", "only input_text / output_text parts are supported (got '" + type + "')");
        if (!c[j].contains("text") || !c[j]["text"].is_string()) return reject(err, pp + ".text", "must be a string");
        *out += c[j]["text"].get<std::string>();
    }
    return true;
}

bool translate_input(const json& input, json* msgs, ApiError* err) {
    if (input.is_string()) {
        msgs->push_back(json{{"role", "user"}, {"content", input}});
        return true;
    }
    if (!input.is_array() || input.empty()) return reject(err, "input", "must be a string or a non-empty array of items");
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string p = "input[" + std::to_string(i) + "]";
        const json& it = input[i];
        if (!it.is_object()) return reject(err, p, "must be an object");
        const std::string type = it.contains("type") ? str_of(it, "type") : std::string(it.contains("role") ? "message" : "");
        if (type == "message") {
            std::string role = str_of(it, "role");
            if (role != "user" && role != "assistant" && role != "system" && role != "developer")
                return reject(err, p + ".role", "must be user, assistant, system or developer");
            if (role == "developer") role = "system";
            std::string text;
            if (!it.contains("content") || !content_text(it["content"], p + ".content", &text, err)) {
                if (!it.contains("content")) return reject(err, p + ".content", "required");
                return false;
            }
            msgs->push_back(json{{"role", role}, {"content", text}});
        } else if (type == "function_call") {
            for (const char* k : {"call_id", "name", "arguments"})
                if (!it.contains(k) || !it[k].is_string()) return reject(err, p + "." + k, "must be a string");
            const json call = {{"id", it["call_id"]},
                               {"type", "function"},
                               {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}};
            // Calls following an assistant message (or each other) belong to that turn.
            if (!msgs->empty() && msgs->back().value("role", "") == "assistant") {
                json& last = msgs->back();
                if (!last.contains("tool_calls")) last["tool_calls"] = json::array();
                last["tool_calls"].push_back(call);
            } else {
                msgs->push_back(json{{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
            }
        } else if (type == "function_call_output") {
            if (!it.contains("call_id") || !it["call_id"].is_string()) return reject(err, p + ".call_id", "must be a string");
            std::string out;
            if (!it.contains("output") || !content_text(it["output"], p + ".output", &out, err)) {
                if (!it.contains("output")) return reject(err, p + ".output", "required");
                return false;
            }
            msgs->push_back(json{{"role", "tool"}, {"tool_call_id", it["call_id"]}, {"content", out}});
        } else if (type == "reasoning") {
            // A previous turn's reasoning: the chat template drops past thinking anyway.
        } else {
            return reject(err, p + ".type",
                          "'" + type + "' is not supported (message, function_call, function_call_output, reasoning)");
        }
    }
    return true;
}

bool translate_tools(const json& tools, json* chat, ApiError* err) {
    if (!tools.is_array()) return reject(err, "tools", "must be an array");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string p = "tools[" + std::to_string(i) + "]";
        const json& t = tools[i];
        if (!t.is_object() || str_of(t, "type") != "function")
            return reject(err, p + ".type", "only function tools are supported");
        if (!t.contains("name") || !t["name"].is_string()) return reject(err, p + ".name", "must be a string");
        for (auto k = t.begin(); k != t.end(); ++k)
            if (k.key() != "type" && k.key() != "name" && k.key() != "description" && k.key() != "parameters" &&
                k.key() != "strict")
                return reject(err, p + "." + k.key(), "unknown field");
        json fn = {{"name", t["name"]}};
        if (t.contains("description")) fn["description"] = t["description"];
        fn["parameters"] = t.contains("parameters") && !t["parameters"].is_null() ? t["parameters"]
                                                                                  : json{{"type", "object"}, {"properties", json::object()}};
        out.push_back(json{{"type", "function"}, {"function", fn}});
    }
    (*chat)["tools"] = out;
    return true;
}
}  // namespace
bool responses_to_chat(const json& body, const json& prior, json* chat, json* conversation, ApiError* err) {
    if (!body.is_object()) return reject(err, "body", "must be a JSON object");
    if (!only_known_fields(body,
                           {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
                            "temperature", "top_p", "stream", "store", "previous_response_id", "metadata", "user",
                            "parallel_tool_calls", "text", "reasoning", "truncation", "service_tier"},
                           err, "not a Responses API field Frost supports"))
        return false;
    if (!body.contains("input")) return reject(err, "input", "required");
    json conv = prior.is_array() ? prior : json::array();
    if (!translate_input(body["input"], &conv, err)) return false;
    json msgs = json::array();
    if (body.contains("instructions") && !body["instructions"].is_null()) {
        if (!body["instructions"].is_string()) return reject(err, "instructions", "must be a string");
        msgs.push_back(json{{"role", "system"}, {"content", body["instructions"]}});
    }
    for (const auto& m : conv) msgs.push_back(m);
    json c = {{"messages", msgs}};
    if (body.contains("model")) c["model"] = body["model"];
    if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null()) {
        if (!body["max_output_tokens"].is_number_integer() || body["max_output_tokens"].get<int64_t>() < 1)
            return reject(err, "max_output_tokens", "must be an integer >= 1");
        c["max_tokens"] = body["max_output_tokens"];
    }
    for (const char* k : {"temperature", "top_p", "stream", "parallel_tool_calls", "metadata", "user", "service_tier"})
        if (body.contains(k) && !body[k].is_null()) c[k] = body[k];
    if (body.contains("tools") && !translate_tools(body["tools"], &c, err)) return false;
    if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
        const json& tc = body["tool_choice"];
        if (tc.is_string()) c["tool_choice"] = tc;
        else if (tc.is_object() && str_of(tc, "type") == "function" && tc.contains("name") && tc["name"].is_string())
            c["tool_choice"] = json{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
        else return reject(err, "tool_choice", "must be auto, none, required or {\"type\":\"function\",\"name\":...}");
    }
    if (body.contains("store") && !body["store"].is_boolean()) return reject(err, "store", "must be a boolean");
    if (body.contains("truncation") && body["truncation"] != "disabled")
        return reject(err, "truncation", "only \"disabled\" is supported (a prompt that does not fit is a 400)");
    if (body.contains("reasoning") && !body["reasoning"].is_null()) {
        const json& r = body["reasoning"];
        if (!r.is_object()) return reject(err, "reasoning", "must be an object");
        for (auto k = r.begin(); k != r.end(); ++k)
            if (k.key() != "effort") return reject(err, "reasoning." + k.key(), "unknown field (only effort)");
        if (r.contains("effort") && !r["effort"].is_null()) {
            const std::string e = r["effort"].is_string() ? r["effort"].get<std::string>() : "";
            if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high")
                return reject(err, "reasoning.effort", "must be none, minimal, low, medium or high");
            // The model has one thinking switch: none/minimal turn it off, the others on.
            c["enable_thinking"] = !(e == "none" || e == "minimal");
        }
    }
    if (body.contains("text") && !body["text"].is_null()) {
        const json& t = body["text"];
        if (!t.is_object()) return reject(err, "text", "must be an object");
        for (auto k = t.begin(); k != t.end(); ++k)
            if (k.key() != "format") return reject(err, "text." + k.key(), "unknown field (only format)");
        if (t.contains("format")) {
            const json& f = t["format"];
            const std::string type = str_of(f, "type");
            if (type == "json_object") c["response_format"] = json{{"type", "json_object"}};
            else if (type == "json_schema") {
                json js = {{"name", str_of(f, "name", "response")}};
                if (f.contains("schema")) js["schema"] = f["schema"];
                if (f.contains("strict")) js["strict"] = f["strict"];
                c["response_format"] = json{{"type", "json_schema"}, {"json_schema", js}};
            } else if (type != "text") {
                return reject(err, "text.format.type", "must be text, json_object or json_schema");
            }
        }
    }
    *chat = std::move(c);
    *conversation = std::move(conv);
    return true;
}

HttpOut Api::input_items_page(const json& items, const std::string& query) const {
    // ?order=asc|desc (default desc, as OpenAI), ?limit=1..100 (default 20), ?after=<item id>;
    // include[] is accepted (there is nothing more to include).
    bool asc = false;
    long limit = 20;
    std::string after;
    for (size_t at = 0; at < query.size();) {
        const size_t amp = std::min(query.find('&', at), query.size());
        const std::string kv = query.substr(at, amp - at);
        const size_t eq = kv.find('=');
        const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
        if (k == "order" && (v == "asc" || v == "desc")) asc = v == "asc";
        else if (k == "limit" && !v.empty() && v.size() <= 3 && v.find_first_not_of("0123456789") == std::string::npos &&
                 std::stol(v) >= 1 && std::stol(v) <= 100)
            limit = std::stol(v);
        else if (k == "after" && !v.empty()) after = v;
        else if (k != "include" && k != "include[]" && k != "include%5B%5D" && !k.empty())
            return error_reply(invalid_field(k, "expected order=asc|desc, limit=1..100, after=<item id> or include"));
        at = amp + 1;
    }
    std::vector<json> all(items.begin(), items.end());
    if (!asc) std::reverse(all.begin(), all.end());
    size_t from = 0;
    if (!after.empty()) {
        while (from < all.size() && all[from].value("id", "") != after) ++from;
        if (from == all.size())
            return error_reply(invalid_field("after", "no item '" + after + "' in this response's input"));
        ++from;
    }
    json data = json::array();
    for (size_t i = from; i < all.size() && data.size() < size_t(limit); ++i) data.push_back(all[i]);
    HttpOut out;
    out.body = json_text(json{{"object", "list"},
                              {"data", data},
                              {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
                              {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
                              {"has_more", from + data.size() < all.size()}});
    return out;
}

HttpOut Api::responses(const HttpIn& in, const std::string& path, const std::string& owner) {
    auto reply = [](int status, const json& j) {
        HttpOut out;
        out.status = status;
        out.body = json_text(j);
        return out;
    };
    if (path != "/v1/responses") {
        // GET|DELETE /v1/responses/{id} (the id as the client spelled it)
        RoutePath route;
        std::string why;
        normalize_target(in.target, &route, &why);
        std::string id = route.raw_path.substr(std::string("/v1/responses/").size());
        const size_t slash = id.find('/');
        const std::string verb = slash == std::string::npos ? "" : id.substr(slash + 1);
        id = id.substr(0, slash);
        if (!valid_id(id, &why)) return error_reply(invalid_field("response_id", why));
        if (!verb.empty() && verb != "input_items")
            return error_reply(make_error(404, "invalid_request_error", "not_found", "no route " + path));
        const auto e = responses_->get(id, owner);
        if (!e) return error_reply(make_error(404, "invalid_request_error", "not_found", "No response found with id '" + id + "'"));
        if (!verb.empty()) {
            if (in.method != "GET") return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET"));
            return input_items_page(e->input_items, route.query);
        }
        if (in.method == "GET") return reply(200, e->response);
        if (in.method == "DELETE") {
            responses_->remove(id, owner);
            return reply(200, json{{"id", id}, {"object", "response"}, {"deleted", true}});
        }
        return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use GET or DELETE"));
    }
    if (in.method != "POST") return error_reply(make_error(405, "invalid_request_error", "method_not_allowed", "use POST"));
    json body, chat, conv;
    ApiError err;
    if (!parse_json_body(in.body, cfg_.limits.max_depth, &body, &err)) return error_reply(err);
    json prior = json::array();
    std::string prev;
    if (body.is_object() && body.contains("previous_response_id") && !body["previous_response_id"].is_null()) {
        if (!body["previous_response_id"].is_string())
            return error_reply(invalid_field("previous_response_id", "must be a string"));
        prev = body["previous_response_id"].get<std::string>();
        const auto e = responses_->get(prev, owner);
        if (!e) {
            ApiError nf = make_error(404, "invalid_request_error", "previous_response_not_found",
                                     "previous_response_id: no stored response '" + prev + "'");
            nf.param = "previous_response_id";
            return error_reply(nf);
        }
        prior = e->conversation;
    }
    if (!responses_to_chat(body, prior, &chat, &conv, &err)) return error_reply(err);
    const bool store = body.value("store", true);
    json echo = {{"instructions", body.value("instructions", json(nullptr))},
                 {"tools", body.value("tools", json::array())},
                 {"tool_choice", body.value("tool_choice", json("auto"))},
                 {"temperature", body.value("temperature", json(1.0))},
                 {"top_p", body.value("top_p", json(1.0))},
                 {"max_output_tokens", body.value("max_output_tokens", json(nullptr))},
                 {"previous_response_id", prev.empty() ? json(nullptr) : json(prev)},
                 {"parallel_tool_calls", body.value("parallel_tool_calls", json(true))},
                 {"metadata", body.value("metadata", json::object())},
                 {"store", store},
                 {"text", body.value("text", json{{"format", {{"type", "text"}}}})},
                 {"truncation", "disabled"}};
    auto st = store ? responses_ : nullptr;
    const json items = store ? input_items_of(body["input"]) : json::array();
    return generate_chat(chat, in, owner, [echo, st, owner, conv, items](const Job& job, const std::string& model) {
        auto b = std::make_unique<ResponsesBuilder>(new_id("resp", '_'), model, echo, job.prompt.size(), st, owner, conv);
        if (st) b->set_input_items(items);
        return b;
    });
}

}  // namespace frost::serve
