// libFuzzer target for the HTTP request head + body parser (issue 13 C): any byte string is what
// a client sent on a connection. Parsing must answer a status (never crash, never read past the
// input); a parsed request then goes through the same path normalisation and key check every
// request passes before routing, and a path that normalises must be stable (normalising the
// canonical form gives itself).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "serve/http_route.h"
#include "serve/http_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    std::string method, target, auth, body;
    const int status = frost::serve::parse_http_request(bytes, 4096, 8192, &method, &target, &auth, &body);
    if (status != 0 && status != -1 && status != 400 && status != 413 && status != 431) std::abort();
    if (status != 0) return 0;
    if (body.size() > 8192) std::abort();  // the body limit held
    frost::serve::RoutePath route;
    std::string why;
    if (frost::serve::normalize_target(target, &route, &why)) {
        frost::serve::RoutePath again;
        if (!frost::serve::normalize_target(route.path, &again, &why) || again.path != route.path) std::abort();
    }
    (void)frost::serve::authorized(auth, "sk-fuzz-key");
    return 0;
}
