// Parsing of Qwen tool calls (JSON and XML forms) and the streaming content filter.
#include "text/tool_calls.h"

#include <cctype>

namespace frost::text {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";

std::string_view trim_ws(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// One newline on each side belongs to the markup (the template writes "\n" + value + "\n").
std::string_view strip_one_newline(std::string_view s) {
    if (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}

// JSON schema type of a function's parameter, "" when unknown.
std::string param_type(const ojson& tools, const std::string& fn, const std::string& param) {
    if (!tools.is_array()) return "";
    for (const ojson& t : tools) {
        const ojson& f = (t.is_object() && t.contains("function")) ? t["function"] : t;
        if (!f.is_object() || f.value("name", "") != fn) continue;
        const ojson* props = nullptr;
        if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("properties"))
            props = &f["parameters"]["properties"];
        if (!props || !props->is_object() || !props->contains(param)) return "";
        const ojson& p = (*props)[param];
        if (p.is_object() && p.contains("type") && p["type"].is_string()) return p["type"].get<std::string>();
        return "";
    }
    return "";
}

ojson typed_value(std::string_view raw, const std::string& type) {
    if (type.empty() || type == "string") return std::string(raw);
    ojson v = ojson::parse(raw, nullptr, false);
    if (v.is_discarded()) return std::string(raw);
    const bool ok = (type == "integer" && v.is_number_integer()) || (type == "number" && v.is_number()) ||
                    (type == "boolean" && v.is_boolean()) || (type == "object" && v.is_object()) ||
                    (type == "array" && v.is_array()) || type == "null" || (type != "integer" && type != "number" &&
                    type != "boolean" && type != "object" && type != "array");
    return ok ? v : ojson(std::string(raw));
}

bool parse_xml_call(std::string_view body, const ojson& tools, std::string* name, ojson* args) {
    body = trim_ws(body);
    if (body.substr(0, kFunctionOpen.size()) != kFunctionOpen) return false;
    const size_t gt = body.find('>');
    if (gt == std::string_view::npos) return false;
    *name = std::string(trim_ws(body.substr(kFunctionOpen.size(), gt - kFunctionOpen.size())));
    if (name->empty()) return false;
    std::string_view rest = body.substr(gt + 1);
    const size_t fend = rest.find(kFunctionClose);
    if (fend != std::string_view::npos) rest = rest.substr(0, fend);
    *args = ojson::object();
    for (size_t p = rest.find(kParamOpen); p != std::string_view::npos; p = rest.find(kParamOpen, p)) {
        const size_t name_end = rest.find('>', p);
        if (name_end == std::string_view::npos) return false;
        const std::string pname(trim_ws(rest.substr(p + kParamOpen.size(), name_end - p - kParamOpen.size())));
        size_t vend = rest.find(kParamClose, name_end + 1);
        // A parameter cut short by the next <parameter= or the end still yields its text.
        const size_t next = rest.find(kParamOpen, name_end + 1);
        if (vend == std::string_view::npos || (next != std::string_view::npos && next < vend)) vend = next;
        if (vend == std::string_view::npos) vend = rest.size();
        const std::string_view raw = strip_one_newline(rest.substr(name_end + 1, vend - name_end - 1));
        (*args)[pname] = typed_value(raw, param_type(tools, *name, pname));
        p = vend;
    }
    return true;
}

// JSON-form arguments carry their own types, but models often quote numbers and booleans
// ("days": "3"); a string whose schema type is not string is re-read as that type when it parses
// as one (else it stays as the model wrote it).
void coerce_to_schema(const ojson& tools, const std::string& fn, ojson* args) {
    if (!args->is_object()) return;
    for (auto it = args->begin(); it != args->end(); ++it) {
        if (!it.value().is_string()) continue;
        const std::string type = param_type(tools, fn, it.key());
        if (type.empty() || type == "string") continue;
        it.value() = typed_value(it.value().get<std::string>(), type);
    }
}

bool parse_json_call(std::string_view body, std::string* name, ojson* args) {
    const ojson j = ojson::parse(trim_ws(body), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    *name = j["name"].get<std::string>();
    const ojson* a = j.contains("arguments") ? &j["arguments"] : (j.contains("parameters") ? &j["parameters"] : nullptr);
    if (!a || a->is_null()) *args = ojson::object();
    else if (a->is_string()) {  // arguments already serialised
        ojson inner = ojson::parse(a->get<std::string>(), nullptr, false);
        *args = inner.is_discarded() ? *a : inner;
    } else *args = *a;
    return true;
}

}  // namespace

ParsedAssistant parse_tool_calls(std::string_view text, const ojson& tools, int id_base) {
    ParsedAssistant r;
    r.tool_calls = ojson::array();
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t open = text.find(kToolCallOpen, pos);
        if (open == std::string_view::npos) { r.content += text.substr(pos); break; }
        r.content += text.substr(pos, open - pos);
        const size_t body_start = open + kToolCallOpen.size();
        const size_t close = text.find(kToolCallClose, body_start);
        const size_t body_end = close == std::string_view::npos ? text.size() : close;
        const size_t block_end = close == std::string_view::npos ? text.size() : close + kToolCallClose.size();
        const std::string_view body = text.substr(body_start, body_end - body_start);
        std::string name;
        ojson args;
        const bool ok = trim_ws(body).substr(0, kFunctionOpen.size()) == kFunctionOpen
                            ? parse_xml_call(body, tools, &name, &args)
                            : parse_json_call(body, &name, &args);
        if (ok) coerce_to_schema(tools, name, &args);
        if (ok) {
            ojson call = ojson::object();
            call["id"] = "call_" + std::to_string(id_base + static_cast<int>(r.tool_calls.size()));
            call["type"] = "function";
            call["function"] = {{"name", name},
                                {"arguments", args.is_string() ? args.get<std::string>()
                                                               : args.dump(-1, ' ', false, ojson::error_handler_t::replace)}};
            r.tool_calls.push_back(std::move(call));
        } else {
            r.content += text.substr(open, block_end - open);
        }
        pos = block_end;
    }
    while (!r.content.empty() && std::isspace(static_cast<unsigned char>(r.content.back()))) r.content.pop_back();
    return r;
}

void split_reasoning(std::string_view text, std::string* reasoning, std::string* content) {
    constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
    const size_t close = text.rfind(kThinkClose);
    if (close == std::string_view::npos) {
        reasoning->clear();
        *content = std::string(text);
        return;
    }
    std::string_view r = text.substr(0, close);
    const size_t open = r.find(kThinkOpen);
    if (open != std::string_view::npos) r = r.substr(open + kThinkOpen.size());
    while (!r.empty() && r.front() == '\n') r.remove_prefix(1);
    while (!r.empty() && r.back() == '\n') r.remove_suffix(1);
    std::string_view c = text.substr(close + kThinkClose.size());
    while (!c.empty() && c.front() == '\n') c.remove_prefix(1);
    *reasoning = std::string(r);
    *content = std::string(c);
}

std::string ToolCallStream::push(std::string_view delta) {
    all_ += delta;
    pending_ += delta;
    std::string out;
    while (!pending_.empty()) {
        if (in_call_) {
            const size_t close = pending_.find(kToolCallClose);
            if (close == std::string::npos) {
                // Keep only what could still be the start of </tool_call>.
                const size_t keep = std::min(pending_.size(), kToolCallClose.size() - 1);
                pending_.erase(0, pending_.size() - keep);
                return out;
            }
            pending_.erase(0, close + kToolCallClose.size());
            in_call_ = false;
            continue;
        }
        const size_t open = pending_.find(kToolCallOpen);
        if (open != std::string::npos) {
            out += pending_.substr(0, open);
            pending_.erase(0, open + kToolCallOpen.size());
            in_call_ = true;
            continue;
        }
        // Hold back the longest suffix that is a proper prefix of <tool_call>.
        size_t hold = 0;
        for (size_t k = std::min(pending_.size(), kToolCallOpen.size() - 1); k > 0; --k) {
            if (kToolCallOpen.substr(0, k) == std::string_view(pending_).substr(pending_.size() - k)) { hold = k; break; }
        }
        out += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        break;
    }
    emitted_ += out;
    return out;
}

ParsedAssistant ToolCallStream::finish() {
    ParsedAssistant full = parse_tool_calls(all_, tools_);
    ParsedAssistant r;
    r.tool_calls = std::move(full.tool_calls);
    // What was not emitted yet: the parsed content minus the prefix already streamed (the parsed
    // content has its trailing whitespace trimmed, so it may also be shorter than what went out).
    if (full.content.size() > emitted_.size() && full.content.compare(0, emitted_.size(), emitted_) == 0)
        r.content = full.content.substr(emitted_.size());
    pending_.clear();
    in_call_ = false;
    return r;
}

}  // namespace frost::text
