// SHA-256 (FIPS 180-4) over bytes and over token-id lists. Capsule and prefix identity in the
// serve layer is keyed by this digest (reliability.md G12: no predictable/weak prefix hashes).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace frost::serve {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t bytes);
    Digest finish();  // the object must not be updated after finish()

private:
    void block(const uint8_t* p);  // one 64-byte block
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t buf_len_ = 0;
    uint64_t total_ = 0;
};

Digest sha256(const void* data, size_t bytes);
// Digest of token ids [0, n) as little-endian int32, with a domain-separation salt so a token
// digest can never equal the digest of some unrelated byte string.
Digest token_digest(const int32_t* ids, size_t n);
std::string digest_hex(const Digest& d);

}  // namespace frost::serve
