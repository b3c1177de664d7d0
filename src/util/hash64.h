// A fast 64-bit checksum for capsule payloads and other integrity checks (not cryptographic).
// Algorithm: XXH64 as specified in the public xxHash spec (doc/xxhash_spec.md), implemented here
// from the spec; results equal the reference XXH64 for the same seed, so files can be checked
// with the `xxhsum -H1` tool.
#pragma once
#include <cstddef>
#include <cstdint>

namespace frost::util {

uint64_t hash64(const void* data, size_t bytes, uint64_t seed = 0);

// Streaming form: feed any split of the input, get the same value as hash64 over the whole.
class Hash64 {
public:
    explicit Hash64(uint64_t seed = 0);
    void update(const void* data, size_t bytes);
    uint64_t digest() const;  // may be called at any point; does not change the state

private:
    static constexpr size_t kStripeBytes = 32;
    uint64_t seed_;
    uint64_t acc_[4];
    uint8_t buffer_[kStripeBytes];
    size_t buffered_ = 0;
    uint64_t total_bytes_ = 0;
};

}  // namespace frost::util
