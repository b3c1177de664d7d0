// The launch-chain probe (lm_launch_probe.h, bench_cuda_kernels --launch-chain): its kernels must
// form a real dependency sequence, or the bench would time launches that overlap. Each kernel adds
// one to its block's counter after waiting for its predecessor, so a chain of K kernels leaves
// every counter at exactly K, with plain launches, wait-then-trigger and trigger-then-wait, on a
// stream and replayed from a captured graph (a lost update would leave less), with and without
// each kernel streaming a slice of a source before its wait.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaLaunchProbe, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <tuple>
#include <vector>

#include "kernels/cuda/lm_launch_probe.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

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
            CUDA_OK(cudaMemset(buf.get(), 0, sizeof(float) * size_t(blocks)));
            CUDA_OK(cudaDeviceSynchronize());
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
            CUDA_OK(kernels::launch_chain_probe(p, s));  // on the stream
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            CUDA_OK(kernels::launch_chain_probe(p, s));
            CUDA_OK(cudaStreamEndCapture(s, &g));
            CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
            CUDA_OK(cudaGraphLaunch(ge, s));  // replayed twice
            CUDA_OK(cudaGraphLaunch(ge, s));
            CUDA_OK(cudaStreamSynchronize(s));
            CUDA_OK(cudaGraphExecDestroy(ge));
            CUDA_OK(cudaGraphDestroy(g));
            const std::vector<float> got = buf.download();
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

}  // namespace
}  // namespace frost::test
#endif
