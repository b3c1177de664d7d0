// Reply bytes shared by every API's body builder: JSON text that never throws (invalid UTF-8 a
// model produced mid-character is replaced, not an exception on the I/O thread) and the two SSE
// framings in use (OpenAI's bare `data:` lines, Anthropic's and Responses' named events).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace frost::serve {

inline std::string json_text(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "data: <json>\n\n"
inline std::string sse_data(const nlohmann::json& j) { return "data: " + json_text(j) + "\n\n"; }

// "event: <name>\ndata: <json>\n\n"
inline std::string sse_event(const std::string& name, const nlohmann::json& data) {
    return "event: " + name + "\n" + sse_data(data);
}

}  // namespace frost::serve
