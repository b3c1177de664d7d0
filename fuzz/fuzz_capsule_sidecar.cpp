// libFuzzer target for the capsule sidecar reader (issue 13 C): any byte string is a
// <capsule-dir>/<id>.json found at start. Reading must return a status; an accepted sidecar must
// hold a valid id and owner, and re-writing it must read back to the same fields. With
// authentication on (the server's mode) only a sidecar whose mac matches is accepted: a fuzzed
// input without one must be refused.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "serve/ids.h"
#include "serve/persistence.h"

namespace {

bool same(const frost::serve::SidecarMeta& a, const frost::serve::SidecarMeta& b) {
    return a.id == b.id && a.owner == b.owner && a.pinned == b.pinned && a.priority == b.priority &&
           a.ttl_s == b.ttl_s && a.expires_unix == b.expires_unix && a.session_id == b.session_id &&
           a.token_digest == b.token_digest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace frost::serve;
    const std::string text(reinterpret_cast<const char*>(data), size);
    static const SidecarAuth auth = [] {
        SidecarAuth a;
        a.secret = std::string(32, '\x5a');
        a.owner_keys = {{"key0", "sk-a"}, {"key1", "sk-b"}, {"local", ""}};
        return a;
    }();
    SidecarMeta m;
    if (sidecar_from_json(text, &m) == FROST_OK) {
        std::string why;
        if (!valid_id(m.id, &why) || m.owner.empty() || m.ttl_s < 0 || m.expires_unix < 0) std::abort();
        SidecarMeta back;
        if (sidecar_from_json(sidecar_to_json(m), &back) != FROST_OK || !same(m, back)) std::abort();
        // Authenticated round trip: what the server writes, it reads back; for a known owner.
        if (auth.owner_keys.count(m.owner)) {
            if (sidecar_from_json(sidecar_to_json(m, &auth), &back, &auth) != FROST_OK || !same(m, back)) std::abort();
        }
    }
    SidecarMeta a;
    if (sidecar_from_json(text, &a, &auth) == FROST_OK && text.find("\"mac\"") == std::string::npos) std::abort();
    return 0;
}
