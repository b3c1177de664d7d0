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

std::string api_error_body(const ApiError& e) {
    nlohmann::json err = {{"message", e.message}, {"type", e.type}};
    err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
    err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
    // Messages may quote user bytes; replace invalid UTF-8 rather than throw.
    return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace frost::serve
