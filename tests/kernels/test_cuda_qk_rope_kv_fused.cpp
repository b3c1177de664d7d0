// Decode's q/k RMSNorm + RoPE with the KV append in one launch (qk_norm_rope_kv_launch) against the
// two launches it replaces (qk_norm_rope_launch, kv_append_launch), bit for bit: q and k in place,
// the K and V caches; solo and batched (a padding member, members out of session order), at the
// attention shapes of 9B (16 q / 4 kv heads) and 0.8B / 35B-A3B (8 or 16 / 2), head_dim 256.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaQkRopeKvFused, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <memory>
#include <string>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

constexpr int kD = 256, kRot = 64, kMaxSeq = 64;

struct Side {
    Dev<uint16_t> proj;
    std::vector<std::unique_ptr<Dev<uint16_t>>> caches;  // per session: K, V
    std::unique_ptr<Dev<void*>> table;                   // [sessions, 2]
    Side(const std::vector<uint16_t>& x, const std::vector<std::vector<uint16_t>>& kv) : proj(x) {
        std::vector<void*> t;
        for (const auto& c : kv) {
            caches.push_back(std::make_unique<Dev<uint16_t>>(c));
            t.push_back(caches.back()->get());
        }
        table = std::make_unique<Dev<void*>>(t);
    }
};

void check(int Hq, int Hkv, int B, const char* name) {
    SCOPED_TRACE(name);
    auto rng = fresh_rng(name);
    const bool batched = B > 0;
    const int rows = batched ? B : 1, sessions = batched ? B + 1 : 1;
    const int W = 2 * Hq * kD + 2 * Hkv * kD, kv_dim = Hkv * kD;
    std::vector<int32_t> slots;
    for (int r = 0; r < B; ++r) slots.push_back(r == 1 ? -1 : (r == 0 ? sessions - 1 : r - 1));
    const auto x = to_bf(uniform(rng, size_t(rows) * W, -2, 2));
    std::vector<std::vector<uint16_t>> kv;
    for (int s = 0; s < 2 * sessions; ++s) kv.push_back(to_bf(uniform(rng, size_t(kMaxSeq) * kv_dim, -1, 1)));
    Dev<float> qw(uniform(rng, kD, -0.3f, 0.3f, false)), kw(uniform(rng, kD, -0.3f, 0.3f, false));
    std::vector<kernels::StepCursor> cur(rows);
    for (int r = 0; r < rows; ++r) cur[r] = kernels::StepCursor{}, cur[r].pos = 17 + 9 * r, cur[r].n_tokens = 1;
    if (batched) cur[1 % rows].pos = 0;  // what decode_begin leaves a padding row
    Dev<kernels::StepCursor> cursors(cur);
    Dev<int32_t> dslots(batched ? slots : std::vector<int32_t>{0});
    Side ref(x, kv), fused(x, kv);
    for (int pdl = 0; pdl < 2; ++pdl) {
        auto params = [&](Side& S) {
            kernels::QkRopeKvBf16Params f{};
            kernels::bf16* p = bf(S.proj);
            f.qk = kernels::QkNormRopeBf16Params{p, p + 2 * Hq * kD, qw.get(), kw.get(), W, 2 * kD, W, kD, Hq, Hkv, kD,
                                                 kRot, 1, 1e-6f, 1e7f, rows, cursors.get(), 1};
            f.qk.pdl = pdl;
            f.kv = kernels::KvAppendBf16Params{p + 2 * Hq * kD, p + 2 * Hq * kD + kv_dim, bf(*S.caches[0]),
                                               bf(*S.caches[1]), W, kv_dim, kMaxSeq, rows, cursors.get()};
            f.kv.pdl = pdl;
            if (batched) {
                f.qk.batch = kernels::BatchRef{S.table->get(), dslots.get(), cursors.get(), 2, 0, sessions, B};
                f.kv.batch = f.qk.batch;
            }
            return f;
        };
        const auto pr = params(ref), pf = params(fused);
        ASSERT_TRUE(kernels::qk_norm_rope_kv_applies(pf));
        CUDA_OK(kernels::qk_norm_rope_launch(pr.qk, nullptr));
        CUDA_OK(kernels::kv_append_launch(pr.kv, nullptr));
        CUDA_OK(kernels::qk_norm_rope_kv_launch(pf, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ(ref.proj.download(), fused.proj.download()) << "q / k rows, pdl " << pdl;
        for (int s = 0; s < 2 * sessions; ++s)
            EXPECT_EQ(ref.caches[s]->download(), fused.caches[s]->download()) << (s % 2 ? "V" : "K") << " cache "
                                                                              << s / 2 << ", pdl " << pdl;
    }
}

TEST(CudaQkRopeKvFused, MatchesTheTwoLaunchesBitForBit) {
    FROST_SKIP_WITHOUT_CUDA();
    check(16, 4, 0, "9b solo");
    check(8, 2, 0, "0.8b solo");
    check(16, 2, 0, "35b solo");
    check(16, 4, 8, "9b batch 8");
    check(8, 2, 3, "0.8b batch 3");
}

TEST(CudaQkRopeKvFused, RefusesParamsItDoesNotFuse) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> buf(size_t(1) << 16);
    Dev<kernels::StepCursor> cur(1), other(1);
    kernels::bf16* p = bf(buf);
    const int Hq = 2, Hkv = 1, W = 2 * Hq * kD + 2 * Hkv * kD;
    kernels::QkRopeKvBf16Params f{};
    f.qk = kernels::QkNormRopeBf16Params{p, p + 2 * Hq * kD, nullptr, nullptr, W, 2 * kD, W, kD, Hq, Hkv, kD, kRot,
                                         1, 1e-6f, 1e7f, 1, cur.get(), 1};
    f.kv = kernels::KvAppendBf16Params{p + 2 * Hq * kD, p + 2 * Hq * kD + kD, p + W, p + 2 * W, W, Hkv * kD, 8, 1, cur.get()};
    EXPECT_TRUE(kernels::qk_norm_rope_kv_applies(f));
    auto g = f;
    g.kv.cursor = other.get();  // another cursor
    EXPECT_FALSE(kernels::qk_norm_rope_kv_applies(g));
    g = f;
    g.kv.k = p;  // not the rows qk normalises
    EXPECT_FALSE(kernels::qk_norm_rope_kv_applies(g));
    g = f;
    g.qk.k_head_stride = 2 * kD;  // k heads not contiguous
    EXPECT_FALSE(kernels::qk_norm_rope_kv_applies(g));
    EXPECT_EQ(kernels::qk_norm_rope_kv_launch(g, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace frost::test
#endif
