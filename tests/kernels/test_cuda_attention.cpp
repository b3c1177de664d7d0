// CUDA attention: the flash prefill kernel and the split decode kernel against an fp64 causal GQA
// softmax with the sigmoid gate, over a cache whose unwritten rows hold NaN (they must never leak
// in), plus bitwise determinism of both.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaAttention, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <cmath>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::StepCursor;
constexpr double kBf16Tol = 1e-2;
constexpr int D = 256;

struct Case {
    int Hq, Hkv, pos, rows, max_rows, max_seq;
};

// q rows: per head [q (D) | gate (D)]; cache [max_seq, Hkv, D] valid for [0, pos + rows).
void run_case(const Case& k, bool decode, const char* name) {
    auto rng = fresh_rng(name);
    const int64_t q_stride = 2 * k.Hq * D + 64;
    const int valid = k.pos + k.rows;
    auto q = uniform(rng, k.max_rows * q_stride, -2, 2);
    auto kc = uniform(rng, static_cast<size_t>(k.max_seq) * k.Hkv * D, -2, 2);
    auto vc = uniform(rng, static_cast<size_t>(k.max_seq) * k.Hkv * D, -2, 2);
    for (size_t i = static_cast<size_t>(valid) * k.Hkv * D; i < kc.size(); ++i) kc[i] = vc[i] = NAN;
    Dev<uint16_t> dq(to_bf(q)), dk(to_bf(kc)), dv(to_bf(vc)), dout(k.max_rows * k.Hq * D), dout2(k.max_rows * k.Hq * D);
    StepCursor c{};
    c.pos = k.pos;
    c.n_tokens = k.rows;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    kernels::AttentionBf16Params p{};
    p.q = bf(dq);
    p.gate = bf(dq) + D;
    p.k_cache = bf(dk);
    p.v_cache = bf(dv);
    p.o = bf(dout);
    p.q_row_stride = q_stride;
    p.q_head_stride = 2 * D;
    p.Hq = k.Hq;
    p.Hkv = k.Hkv;
    p.head_dim = D;
    p.scale = 1.0f / std::sqrt(float(D));
    p.max_seq = k.max_seq;
    p.max_rows = k.max_rows;
    p.cursor = dc.get();
    Dev<float> work(decode ? kernels::attn_decode_work_floats(p) : 1);
    p.work = work.get();
    auto launch = [&] { return decode ? kernels::attn_decode_launch(p, nullptr) : kernels::attn_prefill_launch(p, nullptr); };
    CUDA_OK(launch());
    p.o = bf(dout2);
    CUDA_OK(launch());
    const auto raw = dout.download();
    EXPECT_EQ(raw, dout2.download()) << "two runs differ";
    const auto out = from_bf(raw);
    std::vector<double> ref;
    std::vector<float> got;
    const int G = k.Hq / k.Hkv;
    for (int r = 0; r < k.rows; ++r) {
        const int qpos = k.pos + r;
        for (int h = 0; h < k.Hq; ++h) {
            const float* qh = &q[r * q_stride + h * 2 * D];
            const int kvh = h / G;
            std::vector<double> s(qpos + 1);
            double mx = -INFINITY;
            for (int j = 0; j <= qpos; ++j) {
                double dot = 0;
                for (int i = 0; i < D; ++i) dot += double(qh[i]) * kc[(static_cast<size_t>(j) * k.Hkv + kvh) * D + i];
                s[j] = dot / std::sqrt(double(D));
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (int i = 0; i < D; ++i) {
                double acc = 0;
                for (int j = 0; j <= qpos; ++j) acc += s[j] * vc[(static_cast<size_t>(j) * k.Hkv + kvh) * D + i];
                const double gt = qh[D + i];
                ref.push_back(acc / sum / (1 + std::exp(-gt)));
                got.push_back(out[(r * k.Hq + h) * D + i]);
            }
        }
    }
    EXPECT_LE(rel_l2(ref, got), kBf16Tol);
    if (k.rows < k.max_rows) {
        EXPECT_TRUE(std::isnan(out[k.rows * k.Hq * D])) << "wrote past the valid rows";
    }
}

TEST(CudaAttention, PrefillMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({4, 2, 70, 100, 128, 256}, false, "AttnPrefill");
}

TEST(CudaAttention, PrefillFromPositionZeroGqa4) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({8, 2, 0, 64, 64, 128}, false, "AttnPrefill0");
}

TEST(CudaAttention, DecodeMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({16, 4, 1000, 1, 1, 2048}, true, "AttnDecode");
    run_case({4, 4, 0, 1, 1, 300}, true, "AttnDecodeFirst");
    run_case({8, 4, 255, 1, 1, 300}, true, "AttnDecodeSplitEdge");
}

}  // namespace
}  // namespace frost::test
#endif
