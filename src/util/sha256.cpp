// SHA-256 per FIPS 180-4 §6.2: message schedule of 64 words, 64 rounds, big-endian length padding.
#include "util/sha256.h"

#include <algorithm>
#include <cstring>

namespace frost::util {
namespace {

constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t kInitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256() { reset(); }

void Sha256::reset() {
    std::memcpy(state_, kInitialState, sizeof(state_));
    buffered_ = 0;
    total_bytes_ = 0;
}

void Sha256::compress(const uint8_t* block) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
        w[i] = (uint32_t(block[4 * i]) << 24) | (uint32_t(block[4 * i + 1]) << 16) |
               (uint32_t(block[4 * i + 2]) << 8) | uint32_t(block[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
        uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + s1 + ch + kRoundConstants[i] + w[i];
        uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = s0 + maj;
        h = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    state_[0] += a; state_[1] += b; state_[2] += c; state_[3] += d;
    state_[4] += e; state_[5] += f; state_[6] += g; state_[7] += h;
}

void Sha256::update(const void* data, size_t bytes) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    total_bytes_ += bytes;
    if (buffered_ > 0) {
        size_t take = std::min(bytes, kBlockBytes - buffered_);
        std::memcpy(buffer_ + buffered_, p, take);
        buffered_ += take; p += take; bytes -= take;
        if (buffered_ < kBlockBytes) return;
        compress(buffer_);
        buffered_ = 0;
    }
    for (; bytes >= kBlockBytes; p += kBlockBytes, bytes -= kBlockBytes) compress(p);
    std::memcpy(buffer_, p, bytes);
    buffered_ = bytes;
}

Sha256::Digest Sha256::finish() {
    // Padding: 0x80, zeros up to 56 mod 64, then the bit length big-endian (FIPS 180-4 §5.1.1).
    constexpr size_t kLengthOffset = 56;
    const uint64_t bit_length = total_bytes_ * 8;
    uint8_t pad[kBlockBytes * 2] = {0x80};
    size_t pad_len = (buffered_ < kLengthOffset ? kLengthOffset : kLengthOffset + kBlockBytes) - buffered_;
    uint8_t len_be[8];
    for (int i = 0; i < 8; ++i) len_be[i] = uint8_t(bit_length >> (56 - 8 * i));
    update(pad, pad_len);
    update(len_be, sizeof(len_be));
    Digest out;
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) out[4 * i + j] = uint8_t(state_[i] >> (24 - 8 * j));
    return out;
}

Sha256::Digest sha256(const void* data, size_t bytes) {
    Sha256 h;
    h.update(data, bytes);
    return h.finish();
}

std::string to_hex(const uint8_t* bytes, size_t n) {
    static const char kDigits[] = "0123456789abcdef";
    std::string s(n * 2, '0');
    for (size_t i = 0; i < n; ++i) {
        s[2 * i] = kDigits[bytes[i] >> 4];
        s[2 * i + 1] = kDigits[bytes[i] & 0xf];
    }
    return s;
}

std::string sha256_hex(const void* data, size_t bytes) {
    auto d = sha256(data, bytes);
    return to_hex(d.data(), d.size());
}

}  // namespace frost::util
