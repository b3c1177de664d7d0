// Target normalisation and constant-time key comparison (see http_route.h).
#include "serve/http_route.h"

#include <cstdint>

namespace frost::serve {
namespace {

constexpr size_t kMaxTargetBytes = 2048;

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

bool normalize_target(std::string_view target, RoutePath* out, std::string* why) {
    if (target.empty() || target[0] != '/') {
        *why = "request target must be an absolute path";
        return false;
    }
    if (target.size() > kMaxTargetBytes) {
        *why = "request target too long";
        return false;
    }
    const size_t q = target.find('?');
    std::string_view raw = target.substr(0, q);
    out->query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));

    std::string decoded, cased;  // cased: the same bytes, case kept (ids in paths)
    decoded.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c == '%') {
            if (i + 2 >= raw.size()) {
                *why = "truncated percent-escape";
                return false;
            }
            const int hi = hex_value(raw[i + 1]), lo = hex_value(raw[i + 2]);
            if (hi < 0 || lo < 0) {
                *why = "bad percent-escape";
                return false;
            }
            c = char(hi * 16 + lo);
            // An encoded separator or dot could change the route after a proxy decodes it (and
            // a decoded '?' or '#' would end the path there): refuse rather than guess which
            // reading the client meant. (Found by fuzz/fuzz_http_request.cpp.)
            if (c == '/' || c == '\\' || c == '.' || c == '%' || c == '?' || c == '#') {
                *why = "encoded '/', '\\\\', '.', '%', '?' or '#' in path";
                return false;
            }
            i += 2;
        }
        const auto uc = static_cast<unsigned char>(c);
        if (uc < 0x20 || uc >= 0x7F || c == '\\') {
            *why = "control, backslash or non-ASCII byte in path";
            return false;
        }
        decoded.push_back(c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c);
        cased.push_back(c);
    }
    // Segments: empty segments ("//") and dot segments are refused, not collapsed.
    std::string canon;
    size_t pos = 1;
    while (pos <= decoded.size()) {
        size_t end = decoded.find('/', pos);
        if (end == std::string::npos) end = decoded.size();
        std::string_view seg(decoded.data() + pos, end - pos);
        const bool last = end == decoded.size();
        if (seg.empty() && !(last && pos == end)) {
            *why = "empty path segment";
            return false;
        }
        if (seg == "." || seg == "..") {
            *why = "dot segment in path";
            return false;
        }
        if (!seg.empty()) {
            canon.push_back('/');
            canon.append(seg);
        }
        pos = end + 1;
    }
    if (canon.empty()) canon.push_back('/');  // (push_back: GCC 12 warns falsely (-Wrestrict) on = "/")
    out->path = canon;
    // Segments are refused, never collapsed, and lower-casing keeps lengths: canon is the
    // decoded path without its trailing '/', so the cased spelling is the same prefix.
    out->raw_path = canon.size() > 1 ? cased.substr(0, canon.size()) : canon;
    return true;
}

bool is_public_path(std::string_view canonical) { return canonical == "/health"; }

bool ct_equal(std::string_view a, std::string_view b) {
    // Compare over the longer length, folding the length difference into the result, so the
    // loop count reveals only max(len) and no early exit reveals a matching prefix.
    const size_t n = a.size() > b.size() ? a.size() : b.size();
    volatile uint8_t diff = uint8_t(a.size() != b.size());
    for (size_t i = 0; i < n; ++i) {
        const uint8_t x = i < a.size() ? uint8_t(a[i]) : 0;
        const uint8_t y = i < b.size() ? uint8_t(b[i]) : 0;
        diff = uint8_t(diff | (x ^ y));
    }
    return diff == 0;
}

bool authorized(std::string_view header, std::string_view api_key) {
    if (api_key.empty()) return true;
    constexpr std::string_view kBearer = "Bearer ";
    if (header.size() < kBearer.size()) return false;
    bool scheme_ok = true;
    for (size_t i = 0; i < kBearer.size(); ++i) {
        char c = header[i];
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
        char k = kBearer[i];
        if (k >= 'A' && k <= 'Z') k = char(k - 'A' + 'a');
        scheme_ok = scheme_ok && c == k;
    }
    const bool key_ok = ct_equal(header.substr(kBearer.size()), api_key);
    return scheme_ok && key_ok;
}

}  // namespace frost::serve
