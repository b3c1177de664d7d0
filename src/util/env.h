// The A/B switches read from the environment (FROST_FP8_ACT_FUSE=0 and the like): one way to ask.
#pragma once
#include <cstdlib>
#include <cstring>

namespace frost::util {

// Whether environment variable `name` is set to exactly `value`.
inline bool env_is(const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v && std::strcmp(v, value) == 0;
}

}  // namespace frost::util
