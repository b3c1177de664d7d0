// Contract tests for buffers: allocation and wrapping, copies in every pair of spaces with
// offsets, out-of-range and overlap rejection that writes nothing, and fill.
#include <cstring>
#include <limits>

#include "contract_util.h"

namespace frost::test {
namespace {

constexpr uint8_t kPoison = 0xCD;
constexpr size_t kAlign = 256;

using ExecBuffer = ContractTest;

TEST_P(ExecBuffer, AllocCopiesNameAndReportsGettersAndAlignment) {
    char name[] = "weights.layer0";
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST};
    for (frost_space sp : spaces) {
        frost_buffer* b = nullptr;
        const size_t bytes = 1 + rng() % 5000;
        FROST_ASSERT_OK(frost_buffer_alloc(ctx, name, bytes, sp, &b));
        name[0] = 'X';  // the buffer keeps its own copy
        EXPECT_STREQ(frost_buffer_name(b), "weights.layer0");
        name[0] = 'w';
        EXPECT_EQ(frost_buffer_bytes(b), bytes);
        EXPECT_EQ(frost_buffer_space(b), sp);
        EXPECT_EQ(frost_buffer_ctx(b), ctx);
        EXPECT_EQ(frost_buffer_is_wrapped(b), 0);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(frost_buffer_ptr(b)) % kAlign, 0u) << space_name(sp);
        FROST_EXPECT_OK(frost_buffer_free(b));
    }
    FROST_EXPECT_OK(frost_buffer_free(nullptr));
}

TEST_P(ExecBuffer, AllocRejectsBadArgumentsAndAllocatesNothing) {
    frost_buffer* b = nullptr;
    const std::string long_name(256, 'n');
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_alloc(ctx, "zero", 0, FROST_SPACE_HOST, &b));
    EXPECT_NE(std::string(frost_last_error()).find("zero"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_alloc(ctx, "", 8, FROST_SPACE_HOST, &b));
    EXPECT_NE(std::string(frost_last_error()).find("empty"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_alloc(ctx, long_name.c_str(), 8, FROST_SPACE_HOST, &b));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_alloc(ctx, "s", 8, static_cast<frost_space>(5), &b));
    EXPECT_NE(std::string(frost_last_error()).find("space"), std::string::npos) << frost_last_error();
    EXPECT_EQ(b, nullptr);
    const std::string max_name(255, 'm');
    FROST_ASSERT_OK(frost_buffer_alloc(ctx, max_name.c_str(), 8, FROST_SPACE_HOST, &b));
    FROST_EXPECT_OK(frost_buffer_free(b));
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

TEST_P(ExecBuffer, WrapDoesNotOwnTheMemory) {
    std::vector<uint8_t> ext = random_bytes(512);
    const std::vector<uint8_t> copy = ext;
    frost_buffer* w = nullptr;
    FROST_ASSERT_OK(frost_buffer_wrap(ctx, "ext", ext.data(), ext.size(), FROST_SPACE_HOST, &w));
    EXPECT_EQ(frost_buffer_ptr(w), ext.data());
    EXPECT_EQ(frost_buffer_is_wrapped(w), 1);
    EXPECT_EQ(read(w), copy);
    FROST_EXPECT_OK(frost_buffer_free(w));
    ext[0] ^= 1;  // still ours: sanitizers would flag a free by frost
    EXPECT_TRUE(same_stats(stats(), baseline));
}

TEST_P(ExecBuffer, CopyRejectsBuffersOfAnotherCtx) {
    frost_ctx* other = nullptr;
    FROST_ASSERT_OK(frost_ctx_create(GetParam(), 0, &other));
    frost_buffer* ob = nullptr;
    FROST_ASSERT_OK(frost_buffer_alloc(other, "foreign", 64, FROST_SPACE_HOST, &ob));
    frost_buffer* b = alloc("local", 64, FROST_SPACE_HOST);
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_copy(b, 0, ob, 0, 8, stream));
    EXPECT_NE(std::string(frost_last_error()).find("ctx"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_fill(ob, 0, 1, 8, stream));
    FROST_EXPECT_OK(frost_ctx_destroy(other));
}

// Copy between every pair of spaces (device, pinned, host) at random offsets.
class ExecCopy : public ContractTest {};

TEST_P(ExecCopy, AllSpacePairsWithOffsets) {
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST};
    constexpr size_t kSrcBytes = 4099, kDstBytes = 3001;
    for (frost_space ds : spaces)
        for (frost_space ss : spaces) {
            SCOPED_TRACE(std::string(space_name(ds)) + " <- " + space_name(ss));
            frost_buffer* src = alloc("src", kSrcBytes, ss);
            frost_buffer* dst = alloc("dst", kDstBytes, ds);
            ASSERT_TRUE(src && dst);
            const std::vector<uint8_t> data = random_bytes(kSrcBytes);
            write(src, data);
            write(dst, std::vector<uint8_t>(kDstBytes, kPoison));
            const size_t n = 1 + rng() % 2000;
            const size_t src_off = rng() % (kSrcBytes - n + 1);
            const size_t dst_off = rng() % (kDstBytes - n + 1);
            FROST_ASSERT_OK(frost_buffer_copy(dst, dst_off, src, src_off, n, stream));
            const std::vector<uint8_t> got = read(dst);
            std::vector<uint8_t> want(kDstBytes, kPoison);
            std::memcpy(want.data() + dst_off, data.data() + src_off, n);
            EXPECT_EQ(got, want) << "n=" << n << " src_off=" << src_off << " dst_off=" << dst_off;
            // The whole source to the end of the destination: exact-fit boundary.
            const size_t tail = kDstBytes - dst_off < kSrcBytes ? kDstBytes - dst_off : kSrcBytes;
            FROST_ASSERT_OK(frost_buffer_copy(dst, kDstBytes - tail, src, kSrcBytes - tail, tail, stream));
            std::memcpy(want.data() + kDstBytes - tail, data.data() + kSrcBytes - tail, tail);
            EXPECT_EQ(read(dst), want);
            FROST_EXPECT_OK(frost_buffer_free(src));
            FROST_EXPECT_OK(frost_buffer_free(dst));
        }
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

TEST_P(ExecCopy, OutOfRangeIsRejectedAndWritesNothing) {
    constexpr size_t kBytes = 256;
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST};
    for (frost_space sp : spaces) {
        SCOPED_TRACE(space_name(sp));
        frost_buffer* src = alloc("range.src", kBytes, FROST_SPACE_HOST);
        frost_buffer* dst = alloc("range.dst", kBytes, sp);
        ASSERT_TRUE(src && dst);
        write(src, random_bytes(kBytes));
        const std::vector<uint8_t> poison(kBytes, kPoison);
        write(dst, poison);
        constexpr size_t kMax = std::numeric_limits<size_t>::max();
        struct Case {
            size_t dst_off, src_off, bytes;
        };
        const Case cases[] = {
            {0, 0, kBytes + 1},        {1, 0, kBytes},   {0, 1, kBytes},  {kBytes + 1, 0, 0},
            {0, kBytes + 1, 0},        {kMax, 0, 2},     {2, kMax, 2},    {8, 0, kMax},
            {kMax - 4, 0, 8},          {kBytes, 0, 1},
        };
        for (const Case& c : cases) {
            FROST_EXPECT_STATUS(FROST_ERR_OUT_OF_RANGE,
                                frost_buffer_copy(dst, c.dst_off, src, c.src_off, c.bytes, stream));
            EXPECT_NE(std::string(frost_last_error()).find("range."), std::string::npos) << frost_last_error();
        }
        FROST_EXPECT_STATUS(FROST_ERR_OUT_OF_RANGE, frost_buffer_fill(dst, kBytes - 3, 0, 4, stream));
        FROST_EXPECT_STATUS(FROST_ERR_OUT_OF_RANGE, frost_buffer_fill(dst, kMax, 0, 2, stream));
        FROST_EXPECT_OK(frost_ctx_sync(ctx));
        EXPECT_EQ(read(dst), poison);
        // bytes == 0 at the very end is in range and a no-op.
        FROST_EXPECT_OK(frost_buffer_copy(dst, kBytes, src, kBytes, 0, stream));
        EXPECT_EQ(read(dst), poison);
        FROST_EXPECT_OK(frost_buffer_free(src));
        FROST_EXPECT_OK(frost_buffer_free(dst));
    }
}

TEST_P(ExecCopy, OverlappingRangesAreRejected) {
    constexpr size_t kBytes = 128;
    frost_buffer* b = alloc("ovl", kBytes, FROST_SPACE_HOST);
    ASSERT_NE(b, nullptr);
    const std::vector<uint8_t> data = random_bytes(kBytes);
    write(b, data);
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_copy(b, 0, b, 0, 16, stream));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_copy(b, 10, b, 0, 16, stream));
    EXPECT_NE(std::string(frost_last_error()).find("overlap"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_copy(b, 0, b, 15, 16, stream));
    // A second buffer wrapping the same memory is the same bytes.
    frost_buffer* alias = nullptr;
    FROST_ASSERT_OK(frost_buffer_wrap(ctx, "alias", frost_buffer_ptr(b), kBytes, FROST_SPACE_HOST, &alias));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_buffer_copy(alias, 4, b, 0, 8, stream));
    FROST_EXPECT_OK(frost_ctx_sync(ctx));
    EXPECT_EQ(read(b), data);
    // Adjacent, non-overlapping ranges in one buffer are fine.
    FROST_ASSERT_OK(frost_buffer_copy(b, 64, b, 0, 64, stream));
    std::vector<uint8_t> want = data;
    std::memcpy(want.data() + 64, data.data(), 64);
    EXPECT_EQ(read(b), want);
    FROST_EXPECT_OK(frost_buffer_free(alias));
}

TEST_P(ExecCopy, FillSetsOnlyItsRange) {
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST};
    constexpr size_t kBytes = 1000;
    for (frost_space sp : spaces) {
        SCOPED_TRACE(space_name(sp));
        frost_buffer* b = alloc("fill", kBytes, sp);
        ASSERT_NE(b, nullptr);
        std::vector<uint8_t> want = random_bytes(kBytes);
        write(b, want);
        const size_t off = rng() % kBytes;
        const size_t n = rng() % (kBytes - off + 1);
        const auto value = static_cast<uint8_t>(rng());
        FROST_ASSERT_OK(frost_buffer_fill(b, off, value, n, stream));
        std::memset(want.data() + off, value, n);
        EXPECT_EQ(read(b), want) << "off=" << off << " n=" << n;
        FROST_EXPECT_OK(frost_buffer_free(b));
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecBuffer, testing::ValuesIn(available_backends()), backend_param_name);
INSTANTIATE_TEST_SUITE_P(Backends, ExecCopy, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
