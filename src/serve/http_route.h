// Request-target normalisation and API-key checks, kept free of Beast so they are unit-tested
// directly (T13). The rule: decode once, refuse anything ambiguous (encoded '/', '\\', NUL, dot
// segments, non-ASCII), collapse nothing silently except a trailing '/', and match routes on the
// lower-cased result. Auth is decided on the normalised path, so no spelling reaches a handler
// without passing the same check as its canonical form.
#pragma once
#include <string>
#include <string_view>

namespace frost::serve {

struct RoutePath {
    std::string path;   // canonical, e.g. "/v1/chat/completions"
    std::string query;  // raw query string after '?', may be empty
    std::string raw_path;  // `path` with the client's letter case (for ids compared exactly)
};

// Returns false (caller answers 400) for targets that are not a plain absolute path.
bool normalize_target(std::string_view target, RoutePath* out, std::string* why);

// True when the canonical path needs no API key (only /health).
bool is_public_path(std::string_view canonical);

// Constant-time equality: the time depends only on the lengths, not on where bytes differ.
bool ct_equal(std::string_view a, std::string_view b);

// Checks an Authorization header value ("Bearer <key>") against the configured key in constant
// time. An empty configured key means auth is off.
bool authorized(std::string_view authorization_header, std::string_view api_key);

}  // namespace frost::serve
