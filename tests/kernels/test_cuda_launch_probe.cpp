// The launch-chain probe (lm_launch_probe.h, bench_cuda_kernels --launch-chain): its kernels must
// form a real dependency sequence, or the bench would time launches that overlap. Each kernel adds
// one to its block's counter after waiting for its predecessor, so a chain of K kernels leaves
// every counter at exactly K, with plain launches, wait-then-trigger and trigger-then-wait, on a
// stream and replayed from a captured graph (a lost update would leave less), with and without
// each kernel streaming a slice of a source before its wait, in every read pattern (the
// grid-stride read and the quantized GEMV's load shapes). The persistent form (one launch, phases
// meeting at a grid barrier) carries each phase's value from a neighbouring block, so a barrier
// that let a block through early would leave a stale, smaller value.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaLaunchProbe, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/lm_launch_probe.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

// p's chain with zeroed counters: once on the stream, then captured and replayed `replays`
// times; *got receives every block's counter after that (the chain's kernel count times
// 1 + replays when the chain is a true dependency sequence), and stays empty on a CUDA failure.
void run_chain(const kernels::LaunchChainProbe& p, cudaStream_t s, int replays, std::vector<float>* got) {
    CUDA_OK(cudaMemset(p.buf, 0, sizeof(float) * size_t(p.blocks)));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(kernels::launch_chain_probe(p, s));  // on the stream
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CUDA_OK(kernels::launch_chain_probe(p, s));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < replays; ++r) CUDA_OK(cudaGraphLaunch(ge, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaGraphExecDestroy(ge));
    CUDA_OK(cudaGraphDestroy(g));
    std::vector<float> h(size_t(p.blocks));
    CUDA_OK(cudaMemcpy(h.data(), p.buf, sizeof(float) * h.size(), cudaMemcpyDeviceToHost));
    *got = std::move(h);
}

TEST(CudaLaunchProbe, ChainsRunInOrderInEveryMode) {
    FROST_SKIP_WITHOUT_CUDA();
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    constexpr int kKernels = 97;
    constexpr size_t kSrc = size_t(8) << 20;
    Dev<uint8_t> src(kSrc);  // its bytes do not matter: the counters are what the chain computes
    for (int mode = 0; mode <= 2; ++mode) {
        for (const auto& [blocks, threads, bytes] : {std::tuple{1, 32, size_t(0)}, std::tuple{133, 256, size_t(0)},
                                                     std::tuple{300, 128, size_t(0)}, std::tuple{264, 256, size_t(1) << 20},
                                                     std::tuple{7, 64, size_t(4096 + 16)}}) {
            Dev<float> buf(static_cast<size_t>(blocks));
            kernels::LaunchChainProbe p;
            p.buf = buf.get();
            p.blocks = blocks;
            p.threads = threads;
            p.kernels = kKernels;
            p.pdl = mode;
            if (bytes) {
                p.src = src.get();
                p.src_bytes = kSrc;
                p.bytes = bytes;
            }
            std::vector<float> got;
            run_chain(p, s, 2, &got);  // replayed twice
            ASSERT_EQ(got.size(), size_t(blocks));
            for (int b = 0; b < blocks; ++b)
                ASSERT_EQ(got[size_t(b)], float(3 * kKernels))
                    << "mode " << mode << ", " << blocks << " blocks, " << bytes << " bytes streamed, block " << b;
        }
    }
    CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaLaunchProbe, RefusesBadShapes) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<float> buf(4);
    kernels::LaunchChainProbe p;
    p.buf = buf.get();
    p.blocks = 4;
    p.threads = 32;
    p.kernels = 1;
    for (auto bad : {+[](kernels::LaunchChainProbe& q) { q.buf = nullptr; }, +[](kernels::LaunchChainProbe& q) { q.blocks = 0; },
                     +[](kernels::LaunchChainProbe& q) { q.threads = 1025; }, +[](kernels::LaunchChainProbe& q) { q.kernels = 0; },
                     +[](kernels::LaunchChainProbe& q) { q.pdl = 3; },
                     +[](kernels::LaunchChainProbe& q) { q.src_bytes = 64, q.bytes = 0; },
                     +[](kernels::LaunchChainProbe& q) { q.src_bytes = 64, q.bytes = 24; },
                     +[](kernels::LaunchChainProbe& q) { q.src_bytes = 64, q.bytes = 80; }}) {
        kernels::LaunchChainProbe q = p;
        bad(q);
        if (q.src_bytes) q.src = buf.get();
        EXPECT_EQ(kernels::launch_chain_probe(q, nullptr), cudaErrorInvalidValue);
    }
}

// The GEMV-shaped reads (patterns 1..4): whole chains in order, with grids smaller and larger
// than the tile count, every unroll, and ragged step counts per warp (row_bytes not a multiple of
// 8 steps). Every block, including one that owns no tile, still waits and counts.
TEST(CudaLaunchProbe, GemvShapedChainsRunInOrder) {
    FROST_SKIP_WITHOUT_CUDA();
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    constexpr int kKernels = 33;
    constexpr size_t kSrc = size_t(8) << 20;
    Dev<uint8_t> src(kSrc);
    for (int pattern = 1; pattern <= 4; ++pattern) {
        const size_t step = pattern == 2 || pattern == 4 ? 128 : 64;
        for (const int unroll : {1, 2, 4}) {
            for (const auto& [blocks, row_steps, tiles] : {std::tuple{5, 32, 40}, std::tuple{264, 13, 7}, std::tuple{16, 3, 16}}) {
                Dev<float> buf(static_cast<size_t>(blocks));
                kernels::LaunchChainProbe p;
                p.buf = buf.get();
                p.blocks = blocks;
                p.threads = 256;
                p.kernels = kKernels;
                p.pdl = 1;
                p.src = src.get();
                p.src_bytes = kSrc;
                p.pattern = pattern;
                p.unroll = unroll;
                p.row_bytes = step * size_t(row_steps);
                p.bytes = size_t(tiles) * 16 * p.row_bytes;
                EXPECT_GE(kernels::chain_probe_blocks_per_sm(p), 1);
                std::vector<float> got;
                run_chain(p, s, 1, &got);
                ASSERT_EQ(got.size(), size_t(blocks));
                for (int b = 0; b < blocks; ++b)
                    ASSERT_EQ(got[size_t(b)], float(2 * kKernels))
                        << "pattern " << pattern << ", unroll " << unroll << ", " << blocks << " blocks, block " << b;
            }
        }
    }
    CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaLaunchProbe, RefusesBadGemvShapes) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<float> buf(8);
    Dev<uint8_t> src(size_t(1) << 20);
    kernels::LaunchChainProbe p;
    p.buf = buf.get();
    p.blocks = 8;
    p.threads = 256;
    p.kernels = 1;
    p.src = src.get();
    p.src_bytes = size_t(1) << 20;
    p.pattern = 2;
    p.row_bytes = 512;
    p.bytes = 16 * 512 * 4;
    CUDA_OK(kernels::launch_chain_probe(p, nullptr));  // the shape the cases below break
    CUDA_OK(cudaDeviceSynchronize());
    for (auto bad : {+[](kernels::LaunchChainProbe& q) { q.pattern = 5; }, +[](kernels::LaunchChainProbe& q) { q.pattern = -1; },
                     +[](kernels::LaunchChainProbe& q) { q.threads = 128; }, +[](kernels::LaunchChainProbe& q) { q.unroll = 3; },
                     +[](kernels::LaunchChainProbe& q) { q.pdl = 2; }, +[](kernels::LaunchChainProbe& q) { q.row_bytes = 64; },
                     +[](kernels::LaunchChainProbe& q) { q.row_bytes = 0; },
                     +[](kernels::LaunchChainProbe& q) { q.bytes = 16 * 512 * 4 + 512; }}) {
        kernels::LaunchChainProbe q = p;
        bad(q);
        EXPECT_EQ(kernels::launch_chain_probe(q, nullptr), cudaErrorInvalidValue);
    }
}

// The persistent form: `kernels` phases in one launch. buf's first half must hold, in every entry,
// the phases run since it was zeroed (an even count per launch), once on the stream and then
// replayed from a graph, for an empty phase (the barrier alone), the grid-stride read and every
// GEMV-shaped read, at grids of one block, one per SM and as many as fit.
TEST(CudaLaunchProbe, PersistentPhasesMeetAtTheBarrier) {
    FROST_SKIP_WITHOUT_CUDA();
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev = 0, sms = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    constexpr int kPhases = 40;
    constexpr size_t kSrc = size_t(8) << 20;
    Dev<uint8_t> src(kSrc);
    Dev<unsigned long long> sync(1);
    struct Case {
        int pattern, unroll, threads;
        size_t row_bytes, bytes;
    };
    for (const Case& c : {Case{0, 1, 256, 0, 0}, Case{0, 1, 128, 0, size_t(1) << 20}, Case{1, 1, 256, 64 * 13, 16 * 64 * 13 * 40},
                          Case{2, 2, 256, 128 * 32, 16 * 128 * 32 * 7}, Case{3, 4, 256, 64 * 32, 16 * 64 * 32 * 20},
                          Case{4, 1, 256, 128 * 8, 16 * 128 * 8 * 300}}) {
        kernels::LaunchChainProbe p;
        p.threads = c.threads;
        p.kernels = kPhases;
        p.pdl = 1;
        p.persistent = 1;
        p.sync = sync.get();
        p.pattern = c.pattern;
        p.unroll = c.unroll;
        p.row_bytes = c.row_bytes;
        if (c.bytes) {
            p.src = src.get();
            p.src_bytes = kSrc;
            p.bytes = c.bytes;
        }
        const int fit = kernels::chain_probe_blocks_per_sm(p);
        ASSERT_GE(fit, 1) << "pattern " << c.pattern;
        for (const int blocks : {1, sms, fit * sms}) {
            Dev<float> buf(2 * static_cast<size_t>(blocks));
            p.buf = buf.get();
            p.blocks = blocks;
            CUDA_OK(cudaMemset(buf.get(), 0, sizeof(float) * 2 * size_t(blocks)));
            CUDA_OK(cudaMemset(sync.get(), 0, sizeof(unsigned long long)));  // a multiple of this grid
            std::vector<float> got;
            run_chain(p, s, 2, &got);  // zeroes only the first half: the second is written before it is read
            ASSERT_EQ(got.size(), size_t(blocks));
            for (int b = 0; b < blocks; ++b)
                ASSERT_EQ(got[size_t(b)], float(3 * kPhases)) << "pattern " << c.pattern << ", " << blocks << " blocks, block " << b;
        }
    }
    // A grid that cannot be resident at once, a missing counter and the early trigger are refused
    // before anything runs.
    Dev<float> buf(2);
    kernels::LaunchChainProbe p;
    p.buf = buf.get();
    p.threads = 256;
    p.kernels = 2;
    p.persistent = 1;
    p.sync = sync.get();
    p.blocks = kernels::chain_probe_blocks_per_sm(p) * sms + 1;
    EXPECT_EQ(kernels::launch_chain_probe(p, s), cudaErrorInvalidValue);
    p.blocks = 1;
    for (auto bad : {+[](kernels::LaunchChainProbe& q) { q.sync = nullptr; }, +[](kernels::LaunchChainProbe& q) { q.pdl = 2; },
                     +[](kernels::LaunchChainProbe& q) { q.persistent = 2; }}) {
        kernels::LaunchChainProbe q = p;
        bad(q);
        EXPECT_EQ(kernels::launch_chain_probe(q, s), cudaErrorInvalidValue);
    }
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace frost::test
#endif
