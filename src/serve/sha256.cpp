// Token-list digests on top of util's SHA-256.
#include "serve/sha256.h"

#include <algorithm>

namespace frost::serve {

namespace {
constexpr char kTokenSalt[] = "frost.tokens.v1";  // domain separation for token digests
}

Digest sha256(const void* data, size_t bytes) { return util::sha256(data, bytes); }

Digest token_digest(const int32_t* ids, size_t n) {
    TokenDigester d;
    d.update(ids, n);
    return d.digest();
}

TokenDigester::TokenDigester() { s_.update(kTokenSalt, sizeof(kTokenSalt)); }

void TokenDigester::update(const int32_t* ids, size_t n) {
    constexpr size_t kChunk = 256;  // ids per update() call: fewer calls, same bytes
    uint8_t le[kChunk * 4];
    for (size_t i = 0; i < n;) {
        const size_t m = std::min(kChunk, n - i);
        for (size_t k = 0; k < m; ++k) {
            const uint32_t v = uint32_t(ids[i + k]);
            le[4 * k] = uint8_t(v);
            le[4 * k + 1] = uint8_t(v >> 8);
            le[4 * k + 2] = uint8_t(v >> 16);
            le[4 * k + 3] = uint8_t(v >> 24);
        }
        s_.update(le, 4 * m);
        i += m;
    }
    n_ += n;
}

Digest TokenDigester::digest() const {
    Sha256 copy = s_;  // finish() ends a context: finish a copy so feeding can go on
    return copy.finish();
}

std::string digest_hex(const Digest& d) { return util::to_hex(d.data(), d.size()); }

}  // namespace frost::serve
