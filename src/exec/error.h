// Error reporting shared by every frost layer: a status code plus a thread-local message.
// Library code never exits; it calls frost::fail(...) and returns the status up the stack.
#pragma once
#include <string>

#include "frost/exec.h"

namespace frost {

// Sets the calling thread's last error to the printf-formatted message and returns `s`.
frost_status fail(frost_status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Prefixes the current last error with `context: ` (keeps the status); returns `s`.
frost_status add_context(frost_status s, const std::string& context);

void set_last_error(const std::string& msg);
std::string last_error();

}  // namespace frost

// Propagates a non-OK status from a frost call.
#define FROST_TRY(expr)                         \
    do {                                        \
        frost_status frost_try_s_ = (expr);     \
        if (frost_try_s_ != FROST_OK) return frost_try_s_; \
    } while (0)

// Fails with FROST_ERR_INVALID_ARG naming the file:line and expression when `cond` is false.
#define FROST_CHECK_ARG(cond)                                                                    \
    do {                                                                                         \
        if (!(cond))                                                                             \
            return ::frost::fail(FROST_ERR_INVALID_ARG, "%s:%d: invalid argument: %s", __FILE__, \
                                 __LINE__, #cond);                                               \
    } while (0)
