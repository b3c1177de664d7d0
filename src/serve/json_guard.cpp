// UTF-8 validation and depth pre-scan for request JSON (see json_guard.h).
#include "serve/json_guard.h"

#include <string>

namespace frost::serve {

bool valid_utf8(std::string_view s) {
    size_t i = 0;
    const size_t n = s.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        static constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

bool parse_json_body(std::string_view body, size_t max_depth, nlohmann::json* out, ApiError* err) {
    if (!valid_utf8(body)) {
        *err = invalid_field("", "request body is not valid UTF-8");
        err->code = "invalid_utf8";
        return false;
    }
    if (json_nesting_depth(body, max_depth) > max_depth) {
        *err = invalid_field("", "JSON nesting deeper than " + std::to_string(max_depth) + " levels");
        err->code = "json_too_deep";
        return false;
    }
    // allow_exceptions=false: nlohmann returns a discarded value instead of throwing.
    nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded()) {
        *err = invalid_field("", "malformed JSON body");
        err->code = "invalid_json";
        return false;
    }
    if (!j.is_object()) {
        *err = invalid_field("", "request body must be a JSON object");
        err->code = "invalid_json";
        return false;
    }
    *out = std::move(j);
    return true;
}

}  // namespace frost::serve
