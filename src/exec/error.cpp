// Thread-local last-error storage and status names (the C side of frost/exec.h's error API).
#include "exec/error.h"

#include <cstdarg>
#include <cstdio>

namespace {
thread_local std::string t_last_error;
}

namespace frost {

frost_status fail(frost_status s, const char* fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t_last_error = buf;
    return s;
}

frost_status add_context(frost_status s, const std::string& context) {
    t_last_error = context + ": " + t_last_error;
    return s;
}

void set_last_error(const std::string& msg) { t_last_error = msg; }
std::string last_error() { return t_last_error; }

}  // namespace frost

extern "C" {

const char* frost_status_name(frost_status s) {
    switch (s) {
        case FROST_OK: return "FROST_OK";
        case FROST_ERR_INVALID_ARG: return "FROST_ERR_INVALID_ARG";
        case FROST_ERR_OUT_OF_RANGE: return "FROST_ERR_OUT_OF_RANGE";
        case FROST_ERR_NOT_FOUND: return "FROST_ERR_NOT_FOUND";
        case FROST_ERR_OUT_OF_MEMORY: return "FROST_ERR_OUT_OF_MEMORY";
        case FROST_ERR_BACKEND: return "FROST_ERR_BACKEND";
        case FROST_ERR_UNSUPPORTED: return "FROST_ERR_UNSUPPORTED";
        case FROST_ERR_STATE: return "FROST_ERR_STATE";
        case FROST_ERR_IO: return "FROST_ERR_IO";
        case FROST_ERR_CORRUPT: return "FROST_ERR_CORRUPT";
        case FROST_ERR_INCOMPATIBLE: return "FROST_ERR_INCOMPATIBLE";
    }
    return "FROST_ERR_UNKNOWN";
}

const char* frost_last_error(void) { return t_last_error.c_str(); }
void frost_clear_error(void) { t_last_error.clear(); }
uint32_t frost_exec_abi_version(void) { return FROST_EXEC_ABI_VERSION; }

}  // extern "C"
