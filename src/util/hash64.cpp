// XXH64 (xxHash spec v0.1.1 §"XXH64 algorithm"): four 64-bit lanes over 32-byte stripes, then a
// merge, the tail in 8/4/1-byte steps and an avalanche. Little-endian reads regardless of host.
#include "util/hash64.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace frost::util {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
// The bulk loop's lane read: one unaligned load on little-endian hosts (the byte loop above is
// the portable definition; compilers do not always fold it into a load).
inline uint64_t read64_le(const uint8_t* p) {
    if constexpr (std::endian::native == std::endian::little) {
        uint64_t v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    return read64(p);
}
inline uint32_t read32(const uint8_t* p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline uint64_t round(uint64_t acc, uint64_t lane) {
    acc += lane * kPrime2;
    acc = rotl(acc, 31);
    return acc * kPrime1;
}
inline uint64_t merge(uint64_t acc, uint64_t lane) {
    acc ^= round(0, lane);
    return acc * kPrime1 + kPrime4;
}

}  // namespace

Hash64::Hash64(uint64_t seed) : seed_(seed) {
    acc_[0] = seed + kPrime1 + kPrime2;
    acc_[1] = seed + kPrime2;
    acc_[2] = seed;
    acc_[3] = seed - kPrime1;
}

void Hash64::update(const void* data, size_t bytes) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    total_bytes_ += bytes;
    if (buffered_ > 0) {
        size_t take = std::min(bytes, kStripeBytes - buffered_);
        std::memcpy(buffer_ + buffered_, p, take);
        buffered_ += take; p += take; bytes -= take;
        if (buffered_ < kStripeBytes) return;
        for (int i = 0; i < 4; ++i) acc_[i] = round(acc_[i], read64(buffer_ + 8 * i));
        buffered_ = 0;
    }
    // Lanes in locals: stores to the member array may alias the uint8_t input, which would force
    // a reload per stripe and run ~6x slower (capsule restores hash every payload byte).
    uint64_t a0 = acc_[0], a1 = acc_[1], a2 = acc_[2], a3 = acc_[3];
    for (; bytes >= kStripeBytes; p += kStripeBytes, bytes -= kStripeBytes) {
        a0 = round(a0, read64_le(p));
        a1 = round(a1, read64_le(p + 8));
        a2 = round(a2, read64_le(p + 16));
        a3 = round(a3, read64_le(p + 24));
    }
    acc_[0] = a0;
    acc_[1] = a1;
    acc_[2] = a2;
    acc_[3] = a3;
    std::memcpy(buffer_, p, bytes);
    buffered_ = bytes;
}

uint64_t Hash64::digest() const {
    uint64_t h;
    if (total_bytes_ >= kStripeBytes) {
        h = rotl(acc_[0], 1) + rotl(acc_[1], 7) + rotl(acc_[2], 12) + rotl(acc_[3], 18);
        for (int i = 0; i < 4; ++i) h = merge(h, acc_[i]);
    } else {
        h = seed_ + kPrime5;
    }
    h += total_bytes_;
    const uint8_t* p = buffer_;
    size_t n = buffered_;
    for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ round(0, read64(p)), 27) * kPrime1 + kPrime4;
    if (n >= 4) {
        h = rotl(h ^ (uint64_t(read32(p)) * kPrime1), 23) * kPrime2 + kPrime3;
        p += 4; n -= 4;
    }
    for (; n > 0; ++p, --n) h = rotl(h ^ (uint64_t(*p) * kPrime5), 11) * kPrime1;
    h ^= h >> 33; h *= kPrime2;
    h ^= h >> 29; h *= kPrime3;
    h ^= h >> 32;
    return h;
}

uint64_t hash64(const void* data, size_t bytes, uint64_t seed) {
    Hash64 h(seed);
    h.update(data, bytes);
    return h.digest();
}

}  // namespace frost::util
