// SHA-256 (FIPS 180-4), our own implementation: used for deployment fingerprints and any digest
// that must be collision-resistant. Streaming (update many times, then finish) or one-shot.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace frost::util {

class Sha256 {
public:
    static constexpr size_t kDigestBytes = 32;
    static constexpr size_t kBlockBytes = 64;
    using Digest = std::array<uint8_t, kDigestBytes>;

    Sha256();
    void update(const void* data, size_t bytes);
    Digest finish();  // the object must not be updated afterwards (call reset() to reuse)
    void reset();

private:
    void compress(const uint8_t* block);  // one 64-byte block
    uint32_t state_[8];
    uint8_t buffer_[kBlockBytes];
    size_t buffered_ = 0;
    uint64_t total_bytes_ = 0;
};

Sha256::Digest sha256(const void* data, size_t bytes);
std::string to_hex(const uint8_t* bytes, size_t n);
std::string sha256_hex(const void* data, size_t bytes);

}  // namespace frost::util
