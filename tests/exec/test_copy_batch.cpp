// Contract tests for frost_buffer_copy_batch: many ops across spaces with odd sizes and offsets
// (more than one launch's worth on cuda), each destination byte equal to its source and every
// byte outside the destinations untouched; every refusal (range, overlap between ops, injected
// fault at any op) enqueues nothing and writes nothing; legal inside a capture.
#include <cstring>

#include "contract_util.h"

namespace frost::test {
namespace {

constexpr uint8_t kPoison = 0x5A;

using ExecCopyBatch = ContractTest;

struct Layout {
    std::vector<frost_copy_op> ops;
    std::vector<uint8_t> expect;  // the destination buffer after the batch
};

// `n` ops from random places of `src` to disjoint, gap-separated places of `dst`.
Layout plan(std::mt19937_64& rng, size_t n, frost_buffer* dst, frost_buffer* src, const std::vector<uint8_t>& src_bytes) {
    Layout l;
    l.expect.assign(frost_buffer_bytes(dst), kPoison);
    size_t at = rng() % 64;
    for (size_t i = 0; i < n; ++i) {
        const size_t bytes = i % 7 == 0 ? 1 + rng() % 5 : 16 * (1 + rng() % 40) + (i % 3 ? 0 : rng() % 16);
        if (at + bytes > l.expect.size()) break;
        const size_t from = rng() % (src_bytes.size() - bytes);
        l.ops.push_back({dst, at, src, from, bytes});
        std::memcpy(l.expect.data() + at, src_bytes.data() + from, bytes);
        at += bytes + 1 + rng() % 32;
    }
    return l;
}

TEST_P(ExecCopyBatch, EveryOpLandsAndNothingElseChanges) {
    const frost_space spaces[] = {FROST_SPACE_DEVICE, FROST_SPACE_HOST_PINNED, FROST_SPACE_HOST};
    for (frost_space ds : spaces) {
        for (frost_space ss : spaces) {
            const size_t src_size = 64 << 10, dst_size = 256 << 10;
            frost_buffer* src = alloc("batch.src", src_size, ss);
            frost_buffer* dst = alloc("batch.dst", dst_size, ds);
            ASSERT_TRUE(src && dst);
            const auto src_bytes = random_bytes(src_size);
            write(src, src_bytes);
            write(dst, std::vector<uint8_t>(dst_size, kPoison));
            const Layout l = plan(rng, 300, dst, src, src_bytes);  // > 128: several launches on cuda
            ASSERT_GT(l.ops.size(), 200u);
            FROST_ASSERT_OK(frost_buffer_copy_batch(l.ops.data(), l.ops.size(), stream));
            FROST_ASSERT_OK(frost_stream_sync(stream));
            EXPECT_TRUE(read(dst) == l.expect) << space_name(ss) << " -> " << space_name(ds);
            FROST_EXPECT_OK(frost_buffer_free(src));
            FROST_EXPECT_OK(frost_buffer_free(dst));
        }
    }
    FROST_EXPECT_OK(frost_buffer_copy_batch(nullptr, 0, stream));
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

TEST_P(ExecCopyBatch, RefusalsEnqueueNothing) {
    const size_t size = 8192;
    frost_buffer* a = alloc("batch.a", size, FROST_SPACE_DEVICE);
    frost_buffer* b = alloc("batch.b", size, FROST_SPACE_DEVICE);
    ASSERT_TRUE(a && b);
    const auto a_bytes = random_bytes(size);
    write(a, a_bytes);
    write(b, std::vector<uint8_t>(size, kPoison));
    const std::vector<uint8_t> untouched(size, kPoison);
    auto refused = [&](std::vector<frost_copy_op> ops, frost_status want, const char* what) {
        FROST_EXPECT_STATUS(want, frost_buffer_copy_batch(ops.data(), ops.size(), stream));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        EXPECT_TRUE(read(b) == untouched) << what;
    };
    const frost_copy_op good{b, 0, a, 0, 256};
    refused({good, {b, size - 8, a, 0, 16}}, FROST_ERR_OUT_OF_RANGE, "destination out of range");
    refused({good, {b, 512, a, size - 8, 16}}, FROST_ERR_OUT_OF_RANGE, "source out of range");
    refused({good, {b, 128, a, 1024, 256}}, FROST_ERR_INVALID_ARG, "two destinations overlap");
    refused({good, {a, 0, b, 4096, 64}}, FROST_ERR_INVALID_ARG, "a destination overlaps another op's source");
    refused({good, {b, 4096, nullptr, 0, 8}}, FROST_ERR_INVALID_ARG, "null buffer");
    for (uint64_t nth = 1; nth <= 3; ++nth) {
        frost_fault_arm(FROST_FAULT_COPY, nth, 0);
        refused({good, {b, 1024, a, 0, 64}, {b, 2048, a, 64, 64}}, FROST_ERR_IO, "injected fault");
        frost_fault_arm(FROST_FAULT_COPY, 0, 0);
    }
    EXPECT_TRUE(read(a) == a_bytes);
    FROST_EXPECT_OK(frost_buffer_free(a));
    FROST_EXPECT_OK(frost_buffer_free(b));
}

struct BatchJob {
    const std::vector<frost_copy_op>* ops;
};

TEST_P(ExecCopyBatch, CapturedBatchReplaysWithCurrentSourceBytes) {
    const size_t size = 16384;
    frost_buffer* src = alloc("batch.src", size, FROST_SPACE_DEVICE);
    frost_buffer* dst = alloc("batch.dst", 2 * size, FROST_SPACE_DEVICE);
    ASSERT_TRUE(src && dst);
    std::vector<frost_copy_op> ops = {{dst, 0, src, 4096, 4096}, {dst, 8192, src, 0, 4000}, {dst, 20000, src, 9000, 5}};
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "batch", 0, &g));
    BatchJob job{&ops};
    auto record = [](void* user, frost_stream* st) -> frost_status {
        const auto* j = static_cast<const BatchJob*>(user);
        return frost_buffer_copy_batch(j->ops->data(), j->ops->size(), st);
    };
    FROST_ASSERT_OK(frost_graph_capture(g, 1, stream, record, &job));
    for (int round = 0; round < 2; ++round) {  // the graph reads the source as it is at replay
        const auto src_bytes = random_bytes(size);
        write(src, src_bytes);
        write(dst, std::vector<uint8_t>(2 * size, kPoison));
        FROST_ASSERT_OK(frost_graph_replay(g, 1, stream));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        std::vector<uint8_t> expect(2 * size, kPoison);
        for (const auto& op : ops) std::memcpy(expect.data() + op.dst_off, src_bytes.data() + op.src_off, op.bytes);
        EXPECT_TRUE(read(dst) == expect) << "round " << round;
    }
    FROST_EXPECT_OK(frost_graph_destroy(g));
    FROST_EXPECT_OK(frost_buffer_free(src));
    FROST_EXPECT_OK(frost_buffer_free(dst));
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecCopyBatch, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
