// fs.h, mapped_file.h (incl. a file shrunk after open: still_intact() turns false, no access),
// and bf16 round-to-nearest-even against an independent double-based rounding.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>

#include "util/bf16.h"
#include "util/fs.h"
#include "util/mapped_file.h"

using namespace frost::util;

namespace {
std::string temp_dir() {
    char tmpl[] = "/tmp/frost_util_XXXXXX";
    return mkdtemp(tmpl);
}
}  // namespace

TEST(Fs, WriteReadListStat) {
    std::string dir = temp_dir(), err;
    ASSERT_TRUE(make_dirs(join_path(dir, "a/b"), &err)) << err;
    std::string data(100000, '\0');
    std::mt19937 rng(std::random_device{}());
    for (auto& c : data) c = char(rng());
    ASSERT_TRUE(write_file(join_path(dir, "x.bin"), data, &err)) << err;
    std::string back = "poison";
    ASSERT_TRUE(read_file(join_path(dir, "x.bin"), &back, &err)) << err;
    EXPECT_EQ(back, data);
    std::vector<std::string> names;
    ASSERT_TRUE(list_dir(dir, &names, &err));
    EXPECT_EQ(names, (std::vector<std::string>{"a", "x.bin"}));
    FileStat st;
    ASSERT_TRUE(stat_file(join_path(dir, "x.bin"), &st));
    EXPECT_EQ(st.size, data.size());
    EXPECT_FALSE(read_file(join_path(dir, "missing"), &back, &err));
    EXPECT_NE(err.find("missing"), std::string::npos);
}

TEST(MappedFile, MapsAndDetectsShrinkAfterOpen) {
    std::string dir = temp_dir(), err;
    std::string path = join_path(dir, "m.bin");
    std::string data(1 << 16, 'q');
    ASSERT_TRUE(write_file(path, data, &err));
    MappedFile mf;
    ASSERT_TRUE(mf.open(path, &err)) << err;
    ASSERT_EQ(mf.size(), data.size());
    EXPECT_EQ(std::memcmp(mf.data(), data.data(), data.size()), 0);
    EXPECT_TRUE(mf.still_intact());
    ASSERT_EQ(truncate(path.c_str(), 100), 0);
    uint64_t now = 0;
    EXPECT_FALSE(mf.still_intact(&now));
    EXPECT_EQ(now, 100u);
    // pread past the new end is a clean short-read error, not a signal.
    std::vector<char> buf(4096);
    EXPECT_FALSE(pread_full(mf.fd(), buf.data(), buf.size(), 50, &err));
    EXPECT_NE(err.find("unexpected end of file"), std::string::npos);
    MappedFile missing;
    EXPECT_FALSE(missing.open(join_path(dir, "nope"), &err));
}

TEST(Bf16, RoundTripAndRoundToNearestEven) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> u(-1000.f, 1000.f);
    for (int i = 0; i < 100000; ++i) {
        float f = u(rng);
        uint16_t b = f32_to_bf16(f);
        // Independent reference: the two bf16 neighbours of f, pick the nearer, ties to even.
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t lo = uint16_t(bits >> 16), hi = uint16_t(lo + 1);
        double dlo = std::fabs(double(bf16_to_f32(lo)) - f), dhi = std::fabs(double(bf16_to_f32(hi)) - f);
        uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
        ASSERT_EQ(b, want) << f;
    }
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
    EXPECT_TRUE(std::isinf(bf16_to_f32(f32_to_bf16(INFINITY))));
}
