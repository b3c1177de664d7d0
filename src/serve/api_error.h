// OpenAI-style error values: what validation and the HTTP layer return instead of throwing.
// The body is {"error": {"message", "type", "param", "code"}} and the HTTP status equals `status`.
#pragma once
#include <string>

namespace frost::serve {

struct ApiError {
    int status = 400;
    std::string type = "invalid_request_error";
    std::string code;     // machine-readable, e.g. "context_length_exceeded"; may be empty
    std::string param;    // the offending field ("messages[2].role"); may be empty
    std::string message;  // human-readable, names the field and the rule
};

ApiError invalid_field(const std::string& param, const std::string& message);
ApiError make_error(int status, const std::string& type, const std::string& code,
                    const std::string& message);
std::string api_error_body(const ApiError& e);  // serialized JSON

}  // namespace frost::serve
