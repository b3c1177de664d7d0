// The Qwen chat templates, transcribed from their jinja logic. Each branch below names the
// template construct it mirrors; string helpers reproduce Python's str methods (strip, split)
// because the templates run on Python strings.
#include "text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "exec/error.h"
#include "text/json_depth.h"
#include "text/unicode.h"

namespace frost::text {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kImStart = "<|im_start|>";
// Every recursive walk of user JSON here (python_json_dumps, nlohmann's dump) is bounded by this
// nesting depth: deeper input is refused before the walk, so no input can exhaust the stack.
constexpr size_t kMaxRenderDepth = kMaxChatJsonDepth;
constexpr std::string_view kImEnd = "<|im_end|>";

// ---- Python string semantics -------------------------------------------------------------

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
std::string lstrip_nl(std::string_view s) {
    size_t i = 0;
    while (i < s.size() && s[i] == '\n') ++i;
    return std::string(s.substr(i));
}
std::string rstrip_nl(std::string_view s) {
    size_t n = s.size();
    while (n > 0 && s[n - 1] == '\n') --n;
    return std::string(s.substr(0, n));
}
std::string strip_nl(std::string_view s) { return rstrip_nl(lstrip_nl(s)); }
// str.strip() / jinja trim: removes Python whitespace (str.isspace) at both ends.
std::string py_strip(std::string_view s) {
    const std::vector<uint32_t> cps = utf8_decode(s);
    size_t a = 0, b = cps.size();
    while (a < b && is_python_space(cps[a])) ++a;
    while (b > a && is_python_space(cps[b - 1])) --b;
    return utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(a), cps.begin() + static_cast<long>(b)));
}
// s.split(sep)[0] and s.split(sep)[-1].
std::string split_first(std::string_view s, std::string_view sep) {
    const size_t p = s.find(sep);
    return std::string(p == std::string_view::npos ? s : s.substr(0, p));
}
std::string split_last(std::string_view s, std::string_view sep) {
    const size_t p = s.rfind(sep);
    return std::string(p == std::string_view::npos ? s : s.substr(p + sep.size()));
}

const ojson* field(const ojson& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}
std::string role_of(const ojson& m) {
    const ojson* r = field(m, "role");
    return (r && r->is_string()) ? r->get<std::string>() : std::string();
}
// Jinja truthiness of a JSON value.
bool truthy(const ojson* v) {
    if (!v || v->is_null()) return false;
    if (v->is_boolean()) return v->get<bool>();
    if (v->is_string()) return !v->get_ref<const std::string&>().empty();
    if (v->is_array() || v->is_object()) return !v->empty();
    if (v->is_number_integer()) return v->get<int64_t>() != 0;
    if (v->is_number()) return v->get<double>() != 0.0;
    return true;
}

std::string scalar_text(const ojson* v) {  // {{ v }} for a name-like field
    if (!v || v->is_null()) return std::string();
    return v->is_string() ? v->get<std::string>() : python_str(*v);
}

// The tool call's function object (`tool_call.function` when defined) and its arguments.
const ojson& call_function(const ojson& call) {
    const ojson* f = field(call, "function");
    return f ? *f : call;
}

struct Renderer {
    ChatTemplateKind kind;
    const ojson& messages;
    const ojson& tools;
    const ChatOptions& opt;
    std::string out;

    frost_status invalid(const char* msg) { return fail(FROST_ERR_INVALID_ARG, "chat template: %s", msg); }

    // Qwen3: message.content must be a string (null tolerated as "").
    frost_status qwen3_content(const ojson& m, std::string* s) {
        const ojson* c = field(m, "content");
        if (!c || c->is_null()) { s->clear(); return FROST_OK; }
        if (!c->is_string()) return invalid("Qwen3 template needs string message content");
        *s = c->get<std::string>();
        return FROST_OK;
    }

    // Qwen3.5 render_content macro: string, list of parts (text / image / video), or none.
    frost_status qwen35_content(const ojson& m, bool is_system, std::string* s) {
        s->clear();
        const ojson* c = field(m, "content");
        if (!c || c->is_null()) return FROST_OK;
        if (c->is_string()) { *s = c->get<std::string>(); return FROST_OK; }
        if (!c->is_array()) return invalid("Unexpected content type.");
        for (const ojson& item : *c) {
            if (!item.is_object()) return invalid("Unexpected item type in content.");
            const ojson* type = field(item, "type");
            const bool image = item.contains("image") || item.contains("image_url") || (type && *type == "image");
            const bool video = !image && (item.contains("video") || (type && *type == "video"));
            if (image || video) {
                if (is_system) return invalid(image ? "System message cannot contain images." : "System message cannot contain videos.");
                *s += image ? "<|vision_start|><|image_pad|><|vision_end|>" : "<|vision_start|><|video_pad|><|vision_end|>";
            } else if (item.contains("text")) {
                *s += scalar_text(field(item, "text"));
            } else {
                return invalid("Unexpected item type in content.");
            }
        }
        return FROST_OK;
    }

    // ---- Qwen3 ---------------------------------------------------------------------------
    frost_status qwen3() {
        const size_t n = messages.size();
        const bool has_tools = tools.is_array() && !tools.empty();
        std::string first_content;
        const bool first_is_system = n > 0 && role_of(messages[0]) == "system";
        if (first_is_system) FROST_TRY(qwen3_content(messages[0], &first_content));
        if (has_tools) {
            out += "<|im_start|>system\n";
            if (first_is_system) out += first_content + "\n\n";
            out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                   "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
            for (const ojson& t : tools) out += "\n" + python_json_dumps(t);
            out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                   "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                   "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
        } else if (first_is_system) {
            out += "<|im_start|>system\n" + first_content + "<|im_end|>\n";
        }
        // Last user turn that is a real query (not a wrapped tool response).
        size_t last_query = n > 0 ? n - 1 : 0;
        for (size_t k = n; k-- > 0;) {
            if (role_of(messages[k]) != "user") continue;
            std::string c;
            FROST_TRY(qwen3_content(messages[k], &c));
            if (!(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) { last_query = k; break; }
        }
        for (size_t i = 0; i < n; ++i) {
            const ojson& m = messages[i];
            const std::string role = role_of(m);
            std::string content;
            if (role == "user" || (role == "system" && i != 0)) {
                FROST_TRY(qwen3_content(m, &content));
                out += std::string(kImStart) + role + "\n" + content + std::string(kImEnd) + "\n";
            } else if (role == "assistant") {
                FROST_TRY(qwen3_content(m, &content));
                std::string reasoning;
                const ojson* rc = field(m, "reasoning_content");
                if (rc && !rc->is_null()) {
                    reasoning = scalar_text(rc);
                } else if (content.find("</think>") != std::string::npos) {
                    reasoning = lstrip_nl(split_last(rstrip_nl(split_first(content, "</think>")), "<think>"));
                    content = lstrip_nl(split_last(content, "</think>"));
                }
                const bool last = i + 1 == n;
                if (i > last_query && (last || !reasoning.empty())) {
                    out += std::string(kImStart) + role + "\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" +
                           lstrip_nl(content);
                } else {
                    out += std::string(kImStart) + role + "\n" + content;
                }
                const ojson* calls = field(m, "tool_calls");
                if (truthy(calls) && calls->is_array()) {
                    for (size_t k = 0; k < calls->size(); ++k) {
                        if ((k == 0 && !content.empty()) || k > 0) out += "\n";
                        const ojson& f = call_function((*calls)[k]);
                        out += "<tool_call>\n{\"name\": \"" + scalar_text(field(f, "name")) + "\", \"arguments\": ";
                        const ojson* args = field(f, "arguments");
                        if (args && args->is_string()) out += args->get<std::string>();
                        else out += args ? python_json_dumps(*args) : std::string();
                        out += "}\n</tool_call>";
                    }
                }
                out += "<|im_end|>\n";
            } else if (role == "tool") {
                FROST_TRY(qwen3_content(m, &content));
                if (i == 0 || role_of(messages[i - 1]) != "tool") out += "<|im_start|>user";
                out += "\n<tool_response>\n" + content + "\n</tool_response>";
                if (i + 1 == n || role_of(messages[i + 1]) != "tool") out += "<|im_end|>\n";
            }
        }
        if (opt.add_generation_prompt) {
            out += "<|im_start|>assistant\n";
            if (opt.enable_thinking.has_value() && !*opt.enable_thinking) out += "<think>\n\n</think>\n\n";
        }
        return FROST_OK;
    }

    // ---- Qwen3.5 / Qwen3.6 ---------------------------------------------------------------
    std::string xml_argument_value(const ojson& v) {
        if (kind == ChatTemplateKind::kQwen36) return v.is_string() ? v.get<std::string>() : python_json_dumps(v);
        if (v.is_object() || v.is_array()) return python_json_dumps(v);
        return v.is_string() ? v.get<std::string>() : python_str(v);
    }

    frost_status qwen35() {
        const size_t n = messages.size();
        if (n == 0) return invalid("No messages provided.");
        const bool first_is_system = role_of(messages[0]) == "system";
        std::string sys;
        if (first_is_system) {
            FROST_TRY(qwen35_content(messages[0], true, &sys));
            sys = py_strip(sys);
        }
        if (tools.is_array() && !tools.empty()) {
            out += "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
            for (const ojson& t : tools) out += "\n" + python_json_dumps(t);
            out += "\n</tools>"
                   "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                   "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                   "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
                   "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
                   "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
                   "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
                   "specified\n- You may provide optional reasoning for your function call in natural language "
                   "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
                   "question like normal with your current knowledge and do not tell the user about function "
                   "calls\n</IMPORTANT>";
            if (first_is_system && !sys.empty()) out += "\n\n" + sys;
            out += "<|im_end|>\n";
        } else if (first_is_system) {
            out += "<|im_start|>system\n" + sys + "<|im_end|>\n";
        }
        size_t last_query = n - 1;
        bool multi_step_tool = true;
        for (size_t k = n; k-- > 0;) {
            if (role_of(messages[k]) != "user") continue;
            std::string c;
            FROST_TRY(qwen35_content(messages[k], false, &c));
            c = py_strip(c);
            if (!(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
                multi_step_tool = false;
                last_query = k;
                break;
            }
        }
        if (multi_step_tool) return invalid("No user query found in messages.");
        for (size_t i = 0; i < n; ++i) {
            const ojson& m = messages[i];
            const std::string role = role_of(m);
            std::string content;
            FROST_TRY(qwen35_content(m, false, &content));
            content = py_strip(content);
            if (role == "system") {
                if (i != 0) return invalid("System message must be at the beginning.");
            } else if (role == "user") {
                out += std::string(kImStart) + role + "\n" + content + std::string(kImEnd) + "\n";
            } else if (role == "assistant") {
                std::string reasoning;
                const ojson* rc = field(m, "reasoning_content");
                if (rc && rc->is_string()) {
                    reasoning = rc->get<std::string>();
                } else if (content.find("</think>") != std::string::npos) {
                    reasoning = lstrip_nl(split_last(rstrip_nl(split_first(content, "</think>")), "<think>"));
                    content = lstrip_nl(split_last(content, "</think>"));
                }
                reasoning = py_strip(reasoning);
                const bool keep = (kind == ChatTemplateKind::kQwen36 && opt.preserve_thinking) || i > last_query;
                if (keep) out += std::string(kImStart) + role + "\n<think>\n" + reasoning + "\n</think>\n\n" + content;
                else out += std::string(kImStart) + role + "\n" + content;
                const ojson* calls = field(m, "tool_calls");
                if (truthy(calls) && calls->is_array()) {
                    for (size_t k = 0; k < calls->size(); ++k) {
                        const ojson& f = call_function((*calls)[k]);
                        const std::string name = scalar_text(field(f, "name"));
                        if (k == 0) out += py_strip(content).empty() ? "" : "\n\n";
                        else out += "\n";
                        out += "<tool_call>\n<function=" + name + ">\n";
                        const ojson* args = field(f, "arguments");
                        ojson parsed;
                        if (args && args->is_string()) {  // OpenAI wire form: a JSON string
                            // The depth guard of the request body cannot see inside this string.
                            if (json_nesting_depth(args->get_ref<const std::string&>(), kMaxRenderDepth) > kMaxRenderDepth)
                                return invalid("tool_call arguments string nests JSON too deeply");
                            parsed = ojson::parse(args->get<std::string>(), nullptr, false);
                            if (parsed.is_discarded() || !parsed.is_object())
                                return invalid("tool_call arguments string is not a JSON object");
                            args = &parsed;
                        }
                        if (args && !args->is_null()) {
                            if (!args->is_object()) return invalid("tool_call arguments must be an object");
                            for (auto it = args->begin(); it != args->end(); ++it)
                                out += "<parameter=" + it.key() + ">\n" + xml_argument_value(it.value()) + "\n</parameter>\n";
                        }
                        out += "</function>\n</tool_call>";
                    }
                }
                out += "<|im_end|>\n";
            } else if (role == "tool") {
                if (i > 0 && role_of(messages[i - 1]) != "tool") out += "<|im_start|>user";
                out += "\n<tool_response>\n" + content + "\n</tool_response>";
                if (i + 1 == n || role_of(messages[i + 1]) != "tool") out += "<|im_end|>\n";
            } else {
                return invalid("Unexpected message role.");
            }
        }
        if (opt.add_generation_prompt) {
            out += "<|im_start|>assistant\n";
            out += (opt.enable_thinking.has_value() && !*opt.enable_thinking) ? "<think>\n\n</think>\n\n" : "<think>\n";
        }
        return FROST_OK;
    }
};

}  // namespace

namespace {
std::string dumps_at(const ojson& x, size_t depth) {
    if (depth > kMaxChatJsonDepth) throw std::invalid_argument("JSON nested deeper than the chat template allows");
    switch (x.type()) {
        case ojson::value_t::object: {
            std::string s = "{";
            bool first = true;
            for (auto it = x.begin(); it != x.end(); ++it) {
                if (!first) s += ", ";
                first = false;
                s += ojson(it.key()).dump(-1, ' ', false, ojson::error_handler_t::replace) + ": " + dumps_at(it.value(), depth + 1);
            }
            return s + "}";
        }
        case ojson::value_t::array: {
            std::string s = "[";
            for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + dumps_at(x[i], depth + 1);
            return s + "]";
        }
        default:  // nlohmann escapes strings exactly as json.dumps(ensure_ascii=False) does
            return x.dump(-1, ' ', false, ojson::error_handler_t::replace);
    }
}
}  // namespace

std::string python_json_dumps(const ojson& x) { return dumps_at(x, 1); }

std::string python_str(const ojson& x) {
    if (x.is_null()) return "None";
    if (x.is_boolean()) return x.get<bool>() ? "True" : "False";
    if (x.is_string()) return x.get<std::string>();
    return python_json_dumps(x);
}

bool chat_template_kind_from_text(std::string_view t, ChatTemplateKind* out) {
    const bool xml = t.find("<function=") != std::string_view::npos;
    const bool json_calls = t.find("{\\\"name\\\": <function-name>") != std::string_view::npos ||
                            t.find("{\"name\": <function-name>") != std::string_view::npos;
    if (xml) {
        *out = t.find("preserve_thinking") != std::string_view::npos ? ChatTemplateKind::kQwen36 : ChatTemplateKind::kQwen35;
        return true;
    }
    if (json_calls && t.find("<|im_start|>") != std::string_view::npos) {
        *out = ChatTemplateKind::kQwen3;
        return true;
    }
    return false;
}

frost_status chat_template_kind_from_dir(const std::string& dir, ChatTemplateKind* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "chat_template_kind_from_dir: out is null");
    const std::filesystem::path base(dir);
    auto read = [](const std::filesystem::path& p, std::string* text) {
        std::ifstream in(p, std::ios::binary);
        if (!in) return false;
        text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        return true;
    };
    std::string text, origin = (base / "chat_template.jinja").string();
    if (!read(base / "chat_template.jinja", &text)) {
        origin = (base / "tokenizer_config.json").string();
        std::string cfg;
        if (!read(base / "tokenizer_config.json", &cfg))
            return fail(FROST_ERR_NOT_FOUND, "%s: no chat_template.jinja or tokenizer_config.json", dir.c_str());
        const ojson j = ojson::parse(cfg, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
            return fail(FROST_ERR_NOT_FOUND, "%s: no string \"chat_template\"", origin.c_str());
        text = j["chat_template"].get<std::string>();
    }
    if (!chat_template_kind_from_text(text, out))
        return fail(FROST_ERR_UNSUPPORTED, "%s: not a known Qwen chat template (Qwen3, Qwen3.5, Qwen3.6)", origin.c_str());
    return FROST_OK;
}

namespace {
template <class Json>
size_t value_depth(const Json& root, size_t limit) {  // iterative: no recursion on user data
    std::vector<std::pair<const Json*, size_t>> todo{{&root, 1}};
    size_t deepest = 0;
    while (!todo.empty()) {
        auto [v, d] = todo.back();
        todo.pop_back();
        if (!v->is_structured()) continue;
        deepest = std::max(deepest, d);
        if (deepest > limit) return deepest;
        for (const auto& child : *v) todo.emplace_back(&child, d + 1);
    }
    return deepest;
}
}  // namespace

frost_status render_chat(ChatTemplateKind kind, const nlohmann::json& messages, const nlohmann::json& tools,
                         const ChatOptions& options, std::string* out) {
    // dump() below recurses: bound the depth first.
    if (value_depth(messages, kMaxRenderDepth) > kMaxRenderDepth || value_depth(tools, kMaxRenderDepth) > kMaxRenderDepth)
        return fail(FROST_ERR_INVALID_ARG, "chat template: messages or tools nest deeper than %zu levels", kMaxRenderDepth);
    const ojson m = ojson::parse(messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const ojson t = ojson::parse(tools.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return render_chat(kind, m, t, options, out);
}

frost_status render_chat(ChatTemplateKind kind, const ojson& messages, const ojson& tools, const ChatOptions& options,
                         std::string* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "render_chat: out is null");
    if (!messages.is_array()) return fail(FROST_ERR_INVALID_ARG, "chat template: messages must be an array");
    if (!tools.is_null() && !tools.is_array()) return fail(FROST_ERR_INVALID_ARG, "chat template: tools must be an array");
    if (value_depth(messages, kMaxRenderDepth) > kMaxRenderDepth || value_depth(tools, kMaxRenderDepth) > kMaxRenderDepth)
        return fail(FROST_ERR_INVALID_ARG, "chat template: messages or tools nest deeper than %zu levels", kMaxRenderDepth);
    Renderer r{kind, messages, tools, options, std::string()};
    frost_status s;
    try {
        s = kind == ChatTemplateKind::kQwen3 ? r.qwen3() : r.qwen35();
    } catch (const std::bad_alloc&) {
        throw;  // the heap refused: not the messages' fault, so not an invalid-argument error
    } catch (const std::exception& e) {
        return fail(FROST_ERR_INVALID_ARG, "chat template: %s", e.what());
    }
    if (s == FROST_OK) *out = std::move(r.out);
    return s;
}

}  // namespace frost::text
