// Digests for the serve layer: SHA-256 (util/sha256.h) over bytes and over token-id lists. Capsule
// and prefix identity is keyed by this digest (reliability.md G12: no predictable or weak prefix
// hashes); a hit is still verified by a full token compare.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "util/sha256.h"

namespace frost::serve {

using Sha256 = util::Sha256;
using Digest = util::Sha256::Digest;

Digest sha256(const void* data, size_t bytes);
// Digest of token ids [0, n) as little-endian int32, with a domain-separation salt so a token
// digest can never equal the digest of some unrelated byte string.
Digest token_digest(const int32_t* ids, size_t n);
std::string digest_hex(const Digest& d);

// token_digest() of a growing prefix: one pass over the ids gives the digest of every prefix
// length asked for (the planner's candidate lengths), instead of one pass per length.
class TokenDigester {
public:
    TokenDigester();
    void update(const int32_t* ids, size_t n);
    Digest digest() const;  // of everything fed so far; feeding may continue
    size_t size() const { return n_; }

private:
    Sha256 s_;
    size_t n_ = 0;
};

}  // namespace frost::serve
