// Token-list digests on top of util's SHA-256.
#include "serve/sha256.h"

namespace frost::serve {

namespace {
constexpr char kTokenSalt[] = "frost.tokens.v1";  // domain separation for token digests
}

Digest sha256(const void* data, size_t bytes) { return util::sha256(data, bytes); }

Digest token_digest(const int32_t* ids, size_t n) {
    Sha256 s;
    s.update(kTokenSalt, sizeof(kTokenSalt));
    for (size_t i = 0; i < n; ++i) {
        const uint32_t v = uint32_t(ids[i]);
        const uint8_t le[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
        s.update(le, 4);
    }
    return s.finish();
}

std::string digest_hex(const Digest& d) { return util::to_hex(d.data(), d.size()); }

}  // namespace frost::serve
