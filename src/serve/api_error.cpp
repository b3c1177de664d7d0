// Serialisation of ApiError into the OpenAI error envelope.
#include "serve/api_error.h"

#include <nlohmann/json.hpp>

namespace frost::serve {

ApiError invalid_field(const std::string& param, const std::string& message) {
    ApiError e;
    e.param = param;
    e.code = "invalid_value";
    e.message = param.empty() ? message : param + ": " + message;
    return e;
}

ApiError make_error(int status, const std::string& type, const std::string& code,
                    const std::string& message) {
    ApiError e;
    e.status = status;
    e.type = type;
    e.code = code;
    e.message = message;
    return e;
}

ApiError out_of_memory_error() {
    return make_error(503, "server_error", "insufficient_memory",
                      "the server ran out of host memory while handling this request; retry later");
}

ApiError internal_error(const char* what) {
    return make_error(500, "server_error", "internal_error", std::string("internal error: ") + what);
}

ApiError engine_failure(frost_status st, const std::string& message) {
    if (st == FROST_ERR_OUT_OF_MEMORY) return make_error(503, "server_error", "insufficient_memory", message);
    return make_error(500, "server_error", "engine_error", message);
}

std::string api_error_body(const ApiError& e) {
    nlohmann::json err = {{"message", e.message}, {"type", e.type}};
    err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
    err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
    // Messages may quote user bytes; replace invalid UTF-8 rather than throw.
    return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace frost::serve
