// WeightStager: every queued byte lands at its place for pieces smaller than, equal to and larger
// than a staging buffer (fills that split pieces), owned (converted) pieces, empty queues; an
// injected copy or allocation fault is reported and leaves nothing allocated or queued.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "frost/exec.h"
#include "model/weight_stager.h"

namespace {

using frost::model::WeightStager;

struct Ctx {
    frost_ctx* ctx = nullptr;
    frost_stream* st = nullptr;
    Ctx() {
        EXPECT_EQ(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx), FROST_OK);
        EXPECT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK);
    }
    ~Ctx() {
        frost_stream_destroy(st);
        frost_ctx_destroy(ctx);
    }
};

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

TEST(WeightStager, EveryPieceLandsAtItsOffset) {
    Ctx c;
    std::mt19937_64 rng(std::random_device{}());
    WeightStager::Options o;
    o.staging_bytes = 4096 + 16 * (rng() % 8);  // odd-ish: fills split pieces at varying points
    o.threads = 3;
    WeightStager s(o);
    const size_t sizes[] = {1, 7, 4096, o.staging_bytes, o.staging_bytes + 1, 3 * o.staging_bytes + 123, 100};
    size_t total = 0;
    for (size_t n : sizes) total += n + 5;  // a 5-byte gap between pieces must stay untouched
    frost_buffer* dst = nullptr;
    ASSERT_EQ(frost_buffer_alloc(c.ctx, "dst", total, FROST_SPACE_DEVICE, &dst), FROST_OK);
    std::memset(frost_buffer_ptr(dst), 0xAB, total);  // poison
    std::vector<std::vector<uint8_t>> srcs;
    std::vector<uint8_t> expect(total, 0xAB);
    size_t off = 0;
    int i = 0;
    for (size_t n : sizes) {
        srcs.push_back(random_bytes(n, rng));
        if (i++ % 2) {
            std::memcpy(s.add_owned(n, dst, off), srcs.back().data(), n);
        } else {
            s.add(srcs.back().data(), n, dst, off);
        }
        std::memcpy(expect.data() + off, srcs.back().data(), n);
        off += n + 5;
    }
    EXPECT_GT(s.queued_bytes(), 0u);
    ASSERT_EQ(s.run(c.ctx, c.st), FROST_OK) << frost_last_error();
    EXPECT_EQ(s.queued_bytes(), 0u);
    EXPECT_EQ(std::memcmp(frost_buffer_ptr(dst), expect.data(), total), 0);
    EXPECT_EQ(s.run(c.ctx, c.st), FROST_OK);  // empty queue: nothing to do
    frost_buffer_free(dst);
}

TEST(WeightStager, InjectedFaultsAreReported) {
    for (frost_fault_kind kind : {FROST_FAULT_COPY, FROST_FAULT_ALLOC}) {
        Ctx c;
        WeightStager::Options o;
        o.staging_bytes = 1024;
        WeightStager s(o);
        frost_buffer* dst = nullptr;
        ASSERT_EQ(frost_buffer_alloc(c.ctx, "dst", 8192, FROST_SPACE_DEVICE, &dst), FROST_OK);
        std::vector<uint8_t> src(8192, 1);
        s.add(src.data(), src.size(), dst, 0);
        frost_fault_arm(kind, 2, 0);  // the second gated call of this kind fails once
        EXPECT_NE(s.run(c.ctx, c.st), FROST_OK) << "fault kind " << kind;
        frost_fault_arm(kind, 0, 0);
        EXPECT_EQ(s.queued_bytes(), 0u);
        frost_buffer_free(dst);
    }
}

}  // namespace
