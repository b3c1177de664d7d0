// Bounded JSON intake for request bodies: UTF-8 validation and a nesting-depth pre-scan run in
// O(bytes) before nlohmann parses anything, so a 10 MB "[[[[..." body costs one linear pass and
// never a deep recursion (T11).
#pragma once
#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "text/json_depth.h"

namespace frost::serve {

constexpr size_t kDefaultMaxJsonDepth = 32;

// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool valid_utf8(std::string_view s);

// Deepest object/array nesting in a JSON text (text/json_depth.h: the one linear pre-scan).
using text::json_nesting_depth;

// Parses `body` into *out. On failure returns false with a 400 naming the problem.
bool parse_json_body(std::string_view body, size_t max_depth, nlohmann::json* out, ApiError* err);

}  // namespace frost::serve
