// SHA-256 against FIPS 180-4 / NIST CAVP vectors, XXH64 against the reference xxhash package
// (values printed by python `xxhash.xxh64`), and streaming == one-shot on random splits.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "util/hash64.h"
#include "util/sha256.h"

using namespace frost::util;

TEST(Sha256, FipsVectors) {
    EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two_block = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    EXPECT_EQ(sha256_hex(two_block.data(), two_block.size()),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const std::string million(1000000, 'a');
    EXPECT_EQ(sha256_hex(million.data(), million.size()),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingMatchesOneShotOnRandomSplits) {
    std::mt19937_64 rng(std::random_device{}());
    std::vector<uint8_t> data(5000);
    for (auto& b : data) b = uint8_t(rng());
    for (int trial = 0; trial < 20; ++trial) {
        Sha256 h;
        size_t pos = 0;
        while (pos < data.size()) {
            size_t n = std::min<size_t>(rng() % 200, data.size() - pos);
            h.update(data.data() + pos, n);
            pos += n;
        }
        auto d = h.finish();
        EXPECT_EQ(to_hex(d.data(), d.size()), sha256_hex(data.data(), data.size()));
    }
}

TEST(Hash64, ReferenceXxh64Vectors) {
    EXPECT_EQ(hash64("", 0, 0), 0xef46db3751d8e999ULL);
    EXPECT_EQ(hash64("a", 1, 0), 0xd24ec4f1a98c6e5bULL);
    EXPECT_EQ(hash64("abc", 3, 0), 0x44bc2cf5ad770999ULL);
    const std::string s = "Nobody inspects the spammish repetition";
    EXPECT_EQ(hash64(s.data(), s.size(), 0), 0xfbcea83c8a378bf1ULL);
    std::vector<uint8_t> ramp;
    for (int r = 0; r < 3; ++r)
        for (int i = 0; i < 256; ++i) ramp.push_back(uint8_t(i));
    EXPECT_EQ(hash64(ramp.data(), ramp.size(), 0), 0x8e03c838c596036fULL);
    EXPECT_EQ(hash64(ramp.data(), ramp.size(), 12345), 0x6ecac135863f12b2ULL);
    const std::string t = "0123456789abcdef0123456789abcdef!";
    EXPECT_EQ(hash64(t.data(), t.size(), 7), 0xc1efd54a62ef942fULL);
}

TEST(Hash64, StreamingMatchesOneShotAndDetectsFlips) {
    std::mt19937_64 rng(std::random_device{}());
    std::vector<uint8_t> data(3000);
    for (auto& b : data) b = uint8_t(rng());
    const uint64_t whole = hash64(data.data(), data.size(), 99);
    Hash64 h(99);
    size_t pos = 0;
    while (pos < data.size()) {
        size_t n = std::min<size_t>(rng() % 70, data.size() - pos);
        h.update(data.data() + pos, n);
        pos += n;
    }
    EXPECT_EQ(h.digest(), whole);
    data[rng() % data.size()] ^= uint8_t(1u << (rng() % 8));
    EXPECT_NE(hash64(data.data(), data.size(), 99), whole);
}
