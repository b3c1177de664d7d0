// OpenAI-style error values: what validation and the HTTP layer return instead of throwing.
// The body is {"error": {"message", "type", "param", "code"}} and the HTTP status equals `status`.
#pragma once
#include <string>

#include "frost/exec.h"

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
// 503 insufficient_memory: the host heap refused an allocation (std::bad_alloc) while this
// request was handled (design/reliability.md T33); the server goes on, the client may retry.
ApiError out_of_memory_error();
// 500 internal_error: any other exception escaped a request's handling; `what` is its text.
ApiError internal_error(const char* what);
// A failed engine call: 503 insufficient_memory when memory was refused (FROST_ERR_OUT_OF_MEMORY:
// the same request may succeed once others finish), else 500 engine_error.
ApiError engine_failure(frost_status st, const std::string& message);

}  // namespace frost::serve
