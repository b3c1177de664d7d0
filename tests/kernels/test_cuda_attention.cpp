// CUDA attention: the flash prefill kernel (single-kernel and split-KV paths) and the split decode
// kernel against an fp64 causal GQA softmax with the sigmoid gate, over a cache whose unwritten rows
// hold NaN (they must never leak in) and NaN-poisoned outputs and work areas (an empty split's
// partial must never be read), plus bitwise determinism.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaAttention, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <algorithm>
#include <cmath>

#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda_test_util.h"

namespace frost::test {
namespace {

using kernels::StepCursor;
constexpr double kBf16Tol = 1e-2;
constexpr double kRowTol = 2e-2;  // one row (all heads): bf16 output rounding is ~4e-3 of it
constexpr int D = 256;

struct Case {
    int Hq, Hkv, pos, rows, max_rows, max_seq;
    bool gate = true;
    int splits = 0;    // prefill: 0 = the launcher's choice, else forced (attn_prefill_launch_splits)
    int row_step = 1;  // reference checked on every row_step-th row (and the last) at long positions
    int hopper = 0;  // prefill: this variant of the Hopper kernel alone, also compared on every row with the mma.sync kernel
                     // (with splits > 1: its split path, attn_prefill_hopper_launch's splits)
};

// fp64 causal GQA softmax attention with the sigmoid gate for query row r (all heads), appended
// to ref. q rows: per head [q (D) | gate (D)]; cache [max_seq, Hkv, D].
void reference_row(const Case& k, const std::vector<float>& q, int64_t q_stride, const std::vector<float>& kc,
                   const std::vector<float>& vc, int r, std::vector<double>& ref) {
    const int qpos = k.pos + r;
    const int G = k.Hq / k.Hkv;
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
        std::vector<double> acc(D, 0.0);
        for (int j = 0; j <= qpos; ++j) {
            const float* vj = &vc[(static_cast<size_t>(j) * k.Hkv + kvh) * D];
            for (int i = 0; i < D; ++i) acc[i] += s[j] * vj[i];
        }
        for (int i = 0; i < D; ++i) {
            const double gt = k.gate ? 1 / (1 + std::exp(-double(qh[D + i]))) : 1.0;
            ref.push_back(acc[i] / sum * gt);
        }
    }
}

// The Hopper kernel's output (raw, bf16 bits) against the mma.sync kernel on every valid row;
// nothing written past the valid rows; and the launcher picks the Hopper kernel exactly where it
// should (bitwise equal output, where it also picks the case's split count).
void check_hopper_against_fallback(const Case& k, kernels::AttentionBf16Params p, const std::vector<uint16_t>& raw) {
    Dev<uint16_t> dold(k.max_rows * k.Hq * D), dlaunch(k.max_rows * k.Hq * D);
    p.o = bf(dold);
    CUDA_OK(kernels::attn_prefill_launch_splits(p, nullptr, 1));
    const auto old_out = from_bf(dold.download());
    const auto out = from_bf(raw);
    const size_t valid = static_cast<size_t>(k.rows) * k.Hq * D;
    std::vector<double> want(old_out.begin(), old_out.begin() + valid);
    std::vector<float> got(out.begin(), out.begin() + valid);
    EXPECT_LE(rel_l2(want, got), kBf16Tol) << "against the mma.sync kernel";
    double worst_row = 0;
    int worst = -1;
    const size_t row = static_cast<size_t>(k.Hq) * D;
    for (int r = 0; r < k.rows; ++r) {
        const double e = rel_l2(std::vector<double>(want.begin() + r * row, want.begin() + (r + 1) * row),
                                std::vector<float>(got.begin() + r * row, got.begin() + (r + 1) * row));
        if (!(e <= worst_row)) {
            worst_row = e;
            worst = r;
        }
    }
    EXPECT_LE(worst_row, kRowTol) << "against the mma.sync kernel, row " << worst;
    size_t written = 0;
    for (size_t i = valid; i < out.size(); ++i) written += !std::isnan(out[i]);
    EXPECT_EQ(written, 0u) << "wrote past the valid rows";
    p.o = bf(dlaunch);
    CUDA_OK(kernels::attn_prefill_launch(p, nullptr));
    // Only the positive direction: a tiny launch on the split path can round to the same bits.
    const bool dispatched =
        kernels::attn_prefill_takes_hopper(p) && kernels::attn_prefill_hopper_splits(p) == std::max(1, k.splits);
    if (k.hopper == kernels::kAttnPrefillHopperVariant && dispatched) {
        EXPECT_TRUE(dlaunch.download() == raw) << "the launcher should pick the Hopper kernel";
    }
}

// q rows: per head [q (D) | gate (D)]; cache [max_seq, Hkv, D] valid for [0, pos + rows).
void run_case(const Case& k, bool decode, const char* name) {
    SCOPED_TRACE(testing::Message() << name << ": Hq " << k.Hq << " Hkv " << k.Hkv << " pos " << k.pos << " rows "
                                    << k.rows << "/" << k.max_rows << " gate " << k.gate << " splits " << k.splits
                                    << " hopper variant " << k.hopper);
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
    p.gate = k.gate ? bf(dq) + D : nullptr;
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
    const size_t work_floats = decode ? kernels::attn_decode_work_floats(p)
                                      : std::max(kernels::attn_prefill_work_floats(p),
                                                 kernels::attn_prefill_split_work_floats(p, k.splits));
    Dev<float> work(std::max<size_t>(1, work_floats));  // NaN-poisoned
    p.work = work.get();
    auto launch = [&] {
        if (decode) return kernels::attn_decode_launch(p, nullptr);
        if (k.hopper) return kernels::attn_prefill_hopper_launch(p, nullptr, k.hopper, std::max(1, k.splits));
        if (k.splits > 0) return kernels::attn_prefill_launch_splits(p, nullptr, k.splits);
        return kernels::attn_prefill_launch(p, nullptr);
    };
    CUDA_OK(launch());
    p.o = bf(dout2);
    CUDA_OK(launch());
    const auto raw = dout.download();
    EXPECT_EQ(raw, dout2.download()) << "two runs differ";
    const auto out = from_bf(raw);
    std::vector<double> ref;
    std::vector<float> got;
    double worst_row = 0;  // a row broken alone (e.g. one crossing a split boundary) shows here
    int worst = -1;
    for (int r = 0; r < k.rows; ++r) {
        if (r % k.row_step != 0 && r != k.rows - 1) continue;
        const size_t row_begin = ref.size();
        reference_row(k, q, q_stride, kc, vc, r, ref);
        for (int i = 0; i < k.Hq * D; ++i) got.push_back(out[r * k.Hq * D + i]);
        const double e = rel_l2(std::vector<double>(ref.begin() + row_begin, ref.end()),
                                std::vector<float>(got.begin() + row_begin, got.end()));
        if (!(e <= worst_row)) {  // also catches NaN
            worst_row = e;
            worst = r;
        }
    }
    EXPECT_LE(rel_l2(ref, got), kBf16Tol);
    EXPECT_LE(worst_row, kRowTol) << "row " << worst;
    if (k.rows < k.max_rows) {
        EXPECT_TRUE(std::isnan(out[k.rows * k.Hq * D])) << "wrote past the valid rows";
    }
    if (k.hopper) check_hopper_against_fallback(k, p, raw);
}

TEST(CudaAttention, PrefillMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({4, 2, 70, 100, 128, 256}, false, "AttnPrefill");
}

TEST(CudaAttention, PrefillFromPositionZeroGqa4) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({8, 2, 0, 64, 64, 128}, false, "AttnPrefill0");
}

// Short chunks (the 64/128-row buckets) at short and long positions, GQA groups 1/2/4, with and
// without the gate: small launches take the split-KV path (checked), whose partials are merged by
// the combine kernel. Rows at pos 100 with 128 rows cross 64-key split boundaries.
TEST(CudaAttention, PrefillSplitKvMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    const Case cases[] = {
        {4, 4, 0, 64, 64, 128, true},            // most splits empty: pos + rows < S * 64
        {8, 4, 0, 128, 128, 192, false},
        {8, 2, 100, 64, 64, 200, false},
        {4, 4, 100, 128, 128, 300, true},
        {8, 4, 4000, 64, 64, 4100, true, 0, 3},
        {16, 4, 4000, 120, 128, 4200, false, 0, 5},  // valid rows < bucket rows
        {4, 1, 33000, 64, 64, 33100, true, 0, 9},
        {4, 2, 33000, 128, 128, 33200, false, 0, 13},
    };
    for (const Case& k : cases) {
        kernels::AttentionBf16Params p{};
        p.Hq = k.Hq;
        p.max_rows = k.max_rows;
        EXPECT_GT(kernels::attn_prefill_splits(p), 1) << "this launch should split its keys";
        run_case(k, false, "AttnPrefillSplit");
    }
}

// Forced split counts: the single-kernel path, an uneven split, and 16 splits of which most are
// empty, so a partial nobody wrote (NaN in the poisoned work area) must be skipped by the combine.
TEST(CudaAttention, PrefillForcedSplitsMatchReference) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({8, 2, 100, 128, 128, 256, true, 1}, false, "AttnPrefillS1");
    run_case({8, 4, 1000, 100, 128, 1200, true, 3}, false, "AttnPrefillS3");
    run_case({4, 1, 100, 64, 64, 200, false, 16}, false, "AttnPrefillS16");
    run_case({4, 2, 0, 128, 128, 128, true, 16}, false, "AttnPrefillS16Pos0");
}

// The Hopper (wgmma) kernel: chunks of 64, 1000 and 4096 rows at positions 0, 37 and 3000 (keys
// [0, pos + T), so 37 and 3000 start mid-tile), the GQA ratios of the presets (2, 4, 6, 8), gate on
// and off, buckets larger than the valid rows; against fp64 on sampled rows and the mma.sync kernel
// on every row; every variant (block-synchronous here; the TMA ones below).
void run_hopper_cases(int variant) {
    FROST_SKIP_WITHOUT_CUDA();
    kernels::AttentionBf16Params probe{};
    if (!kernels::attn_prefill_hopper_supported(probe)) GTEST_SKIP() << "the Hopper kernel needs compute capability 9.0";
    //  Hq Hkv pos   rows  max_rows max_seq gate splits row_step
    const Case cases[] = {
        {2, 1, 0, 64, 128, 128, true, 0, 1},
        {8, 2, 37, 64, 128, 128, false, 0, 1},
        {6, 1, 3000, 64, 64, 3100, true, 0, 3},
        {8, 1, 0, 1000, 1024, 1024, false, 0, 7},
        {16, 4, 37, 1000, 1024, 1100, true, 0, 11},
        {24, 4, 3000, 1000, 2048, 4100, false, 0, 41},
        {16, 4, 0, 4096, 4096, 4096, true, 0, 61},
        {4, 2, 37, 4096, 4096, 4200, false, 0, 53},
        {16, 2, 3000, 4096, 4096, 7100, true, 0, 97},
    };
    for (Case k : cases) {
        k.hopper = variant;
        run_case(k, false, "AttnPrefillHopper");
    }
}

TEST(CudaAttention, HopperPrefillMatchesReferenceAndFallback) { run_hopper_cases(1); }  // block-synchronous

// The TMA-producer variants (4, 5; 6, 7 with three K stages; 8, 9 in clusters of two CTAs that
// multicast K and V): the cases above, and the edges of
// the tensor-map loads: a cache that ends mid-tile (max_seq = pos + rows = 150, so the last tile's
// rows past the map arrive as TMA zeros) and KV lengths that end mid-tile inside a NaN cache (the
// consumers zero those V rows), at positions that start mid-tile, valid rows below the bucket.
void run_hopper_tma_cases(int variant) {
    run_hopper_cases(variant);
    FROST_SKIP_WITHOUT_CUDA();
    kernels::AttentionBf16Params probe{};
    if (!kernels::attn_prefill_hopper_supported(probe)) GTEST_SKIP() << "the Hopper kernel needs compute capability 9.0";
    //  Hq Hkv pos   rows  max_rows max_seq gate splits row_step
    const Case cases[] = {
        {4, 2, 50, 100, 128, 150, true, 0, 1},
        {16, 4, 1234, 777, 1024, 2100, true, 0, 13},
        {8, 2, 4000, 300, 384, 4301, false, 0, 7},
        {6, 2, 100, 200, 256, 400, true, 0, 3},  // Hq / Hkv = 3: no cluster pairs (8, 9 launch plain)
    };
    for (Case k : cases) {
        k.hopper = variant;
        run_case(k, false, "AttnPrefillHopperTma");
    }
}

// The Hopper kernel's split path (key splits of each row tile as blocks of their own, merged by
// the combine kernel): the launcher's split count for the 0.8B's 1k prompt (8 q / 2 KV heads,
// 64 blocks), uneven splits, rows that see no key of a later split (position 0), more splits than
// key tiles (empty splits skipped), valid rows below the bucket, positions mid-tile, GQA 3; every
// TMA variant that splits (4-7). Clustered variants refuse a split.
TEST(CudaAttention, HopperSplitPrefillMatchesReferenceAndFallback) {
    FROST_SKIP_WITHOUT_CUDA();
    kernels::AttentionBf16Params probe{};
    if (!kernels::attn_prefill_hopper_supported(probe)) GTEST_SKIP() << "the Hopper kernel needs compute capability 9.0";
    probe.Hq = 8;
    probe.max_rows = 1024;
    const int launcher = kernels::attn_prefill_hopper_splits(probe);
    //  Hq Hkv pos   rows  max_rows max_seq gate splits row_step
    const Case cases[] = {
        {8, 2, 0, 1024, 1024, 1024, true, std::max(2, launcher), 7},
        {8, 2, 37, 1000, 1024, 1100, false, 2, 11},
        {16, 4, 3000, 300, 384, 3400, true, 3, 7},
        {4, 2, 0, 128, 128, 128, true, 4, 1},
        {6, 2, 100, 200, 256, 400, false, 5, 3},
    };
    for (int variant : {4, 5, 6, 7}) {
        for (Case k : cases) {
            k.hopper = variant;
            run_case(k, false, "AttnPrefillHopperSplit");
        }
    }
    probe.Hkv = 2;
    probe.head_dim = D;
    probe.q = probe.k_cache = probe.v_cache = probe.o = reinterpret_cast<kernels::bf16*>(16);
    probe.cursor = reinterpret_cast<StepCursor*>(16);
    probe.work = reinterpret_cast<float*>(16);
    for (int variant : {1, 8, 9})
        EXPECT_EQ(kernels::attn_prefill_hopper_launch(probe, nullptr, variant, 2), cudaErrorInvalidValue) << variant;
}

TEST(CudaAttention, HopperTmaPrefillMatchesReferenceAndFallback) { run_hopper_tma_cases(4); }
TEST(CudaAttention, HopperTmaPingpongPrefillMatchesReferenceAndFallback) { run_hopper_tma_cases(5); }
TEST(CudaAttention, HopperTmaK3PrefillMatchesReferenceAndFallback) { run_hopper_tma_cases(6); }
TEST(CudaAttention, HopperTmaK3PingpongPrefillMatchesReferenceAndFallback) { run_hopper_tma_cases(7); }
TEST(CudaAttention, HopperTmaClusterPrefillMatchesReferenceAndFallback) { run_hopper_tma_cases(8); }
TEST(CudaAttention, HopperTmaClusterPingpongPrefillMatchesReferenceAndFallback) { run_hopper_tma_cases(9); }

// TMA reads only 16-byte aligned bases: a q view 8 bytes off is refused (cudaErrorInvalidValue) before
// any launch (the poisoned output stays untouched), for every TMA variant.
TEST(CudaAttention, HopperTmaRefusesUnalignedBase) {
    FROST_SKIP_WITHOUT_CUDA();
    kernels::AttentionBf16Params probe{};
    if (!kernels::attn_prefill_hopper_supported(probe)) GTEST_SKIP() << "the Hopper kernel needs compute capability 9.0";
    constexpr int Hq = 2, Hkv = 1, rows = 128, seq = 128;
    Dev<uint16_t> dq(static_cast<size_t>(rows) * Hq * D + 64), dk(static_cast<size_t>(seq) * Hkv * D),
        dv(static_cast<size_t>(seq) * Hkv * D), dout(static_cast<size_t>(rows) * Hq * D);
    StepCursor c{};
    c.n_tokens = rows;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    kernels::AttentionBf16Params p{};
    p.q = bf(dq) + 4;  // 8 bytes off
    p.k_cache = bf(dk);
    p.v_cache = bf(dv);
    p.o = bf(dout);
    p.q_row_stride = Hq * D;
    p.q_head_stride = D;
    p.Hq = Hq;
    p.Hkv = Hkv;
    p.head_dim = D;
    p.scale = 0.0625f;
    p.max_seq = seq;
    p.max_rows = rows;
    p.cursor = dc.get();
    for (int variant = 4; variant <= 9; ++variant)
        EXPECT_EQ(kernels::attn_prefill_hopper_launch(p, nullptr, variant), cudaErrorInvalidValue) << "variant " << variant;
    // Variants 2 and 3 (the removed cp.async producer) are refused even on an aligned view that
    // variant 1 takes (checked last: its launch writes the output).
    p.q = bf(dq);
    for (int variant : {2, 3, 10, -1})
        EXPECT_EQ(kernels::attn_prefill_hopper_launch(p, nullptr, variant), cudaErrorInvalidValue) << "variant " << variant;
    CUDA_OK(cudaDeviceSynchronize());
    const auto out = from_bf(dout.download());
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); })) << "a refused launch wrote";
    EXPECT_EQ(kernels::attn_prefill_hopper_launch(p, nullptr, 1), cudaSuccess);  // the same view is launchable
    CUDA_OK(cudaDeviceSynchronize());
}

// attn_prefill_invariant_launch (EngineOptions::chunk_invariant): rows prefilled as a cold prompt
// (chunks of 2048 rows and the rest) and again in chunks that start at other multiples of 64,
// bucketed from 64 to 1088 rows, get the same bits; the launcher's own rule would run those
// buckets on other kernels and split counts. Cache rows past the valid keys hold NaN. A few rows
// are also checked against the fp64 reference (the invariant launch is a real attention).
TEST(CudaAttention, InvariantLaunchGivesARowTheSameBitsWhateverItsChunk) {
    FROST_SKIP_WITHOUT_CUDA();
    constexpr int kTotal = 2560, kMaxSeq = 2600;
    struct Chunk {
        int pos, rows, max_rows;
    };
    const Chunk cold[] = {{0, 2048, 2048}, {2048, 512, 512}};
    const Chunk others[] = {{1024, 97, 128}, {1984, 576, 576}, {64, 1088, 1088}, {2496, 64, 64}, {0, 64, 64}, {128, 200, 256}};
    for (const auto& [Hq, Hkv] : {std::pair{8, 2}, std::pair{16, 4}}) {
        SCOPED_TRACE(testing::Message() << "Hq " << Hq << " Hkv " << Hkv);
        auto rng = fresh_rng("AttnInvariant");
        const int64_t q_stride = 2 * Hq * D;
        auto q = uniform(rng, static_cast<size_t>(kTotal) * q_stride, -2, 2);
        auto kc = uniform(rng, static_cast<size_t>(kMaxSeq) * Hkv * D, -2, 2);
        auto vc = uniform(rng, static_cast<size_t>(kMaxSeq) * Hkv * D, -2, 2);
        for (size_t i = static_cast<size_t>(kTotal) * Hkv * D; i < kc.size(); ++i) kc[i] = vc[i] = NAN;
        Dev<uint16_t> dq(to_bf(q)), dk(to_bf(kc)), dv(to_bf(vc));
        const size_t row = static_cast<size_t>(Hq) * D;
        // The output rows of one chunk, as bf16 bits.
        auto run = [&](const Chunk& c) {
            StepCursor cur{};
            cur.pos = c.pos;
            cur.n_tokens = c.rows;
            Dev<StepCursor> dc(std::vector<StepCursor>{cur});
            Dev<uint16_t> dout(c.max_rows * row);
            kernels::AttentionBf16Params p{};
            p.q = bf(dq) + c.pos * q_stride;
            p.gate = p.q + D;
            p.k_cache = bf(dk);
            p.v_cache = bf(dv);
            p.o = bf(dout);
            p.q_row_stride = q_stride;
            p.q_head_stride = 2 * D;
            p.Hq = Hq;
            p.Hkv = Hkv;
            p.head_dim = D;
            p.scale = 1.0f / std::sqrt(float(D));
            p.max_seq = kMaxSeq;
            p.max_rows = c.max_rows;
            p.cursor = dc.get();
            EXPECT_EQ(kernels::attn_prefill_invariant_launch(p, nullptr), cudaSuccess) << c.pos << " + " << c.rows;
            auto out = dout.download();
            out.resize(c.rows * row);
            return out;
        };
        std::vector<uint16_t> all;
        for (const Chunk& c : cold) {
            const auto o = run(c);
            all.insert(all.end(), o.begin(), o.end());
        }
        for (const Chunk& c : others) {
            const auto o = run(c);
            EXPECT_TRUE(std::equal(o.begin(), o.end(), all.begin() + c.pos * row))
                << "rows " << c.pos << " .. " << c.pos + c.rows << " (bucket " << c.max_rows << ") differ from the cold prompt's";
        }
        const auto got_all = from_bf(all);
        for (int r : {0, 777, 2047, 2048, kTotal - 1}) {
            Case k{Hq, Hkv, 0, kTotal, kTotal, kMaxSeq};
            std::vector<double> ref;
            reference_row(k, q, q_stride, kc, vc, r, ref);
            EXPECT_LE(rel_l2(ref, std::vector<float>(got_all.begin() + r * row, got_all.begin() + (r + 1) * row)), kRowTol)
                << "row " << r;
        }
    }
}

TEST(CudaAttention, DecodeMatchesReference) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({16, 4, 1000, 1, 1, 2048}, true, "AttnDecode");
    run_case({4, 4, 0, 1, 1, 300}, true, "AttnDecodeFirst");
    run_case({8, 4, 255, 1, 1, 300}, true, "AttnDecodeSplitEdge");
    // Every group size: 3 in one block, 6 (Qwen3.5-27B 24/4) and 8 (35B-A3B, Qwen3-Next 16/2) as
    // two blocks per kv head.
    run_case({6, 2, 700, 1, 1, 1024}, true, "AttnDecodeGroup3");
    run_case({24, 4, 1500, 1, 1, 2048}, true, "AttnDecodeGroup6");
    run_case({16, 2, 2100, 1, 1, 4096}, true, "AttnDecodeGroup8");
    run_case({8, 1, 31, 1, 1, 300}, true, "AttnDecodeGroup8OneKvHead");
    // Each split size (32 keys up to 4096, 64 to 8192, 128 beyond) and its edges.
    run_case({16, 4, 2047, 1, 1, 2048}, true, "AttnDecodeSplit32Full");
    run_case({16, 4, 4095, 1, 1, 4096}, true, "AttnDecodeSplit32Last");
    run_case({16, 4, 4096, 1, 1, 8192}, true, "AttnDecodeSplit64First");
    run_case({16, 2, 4500, 1, 1, 8192}, true, "AttnDecodeSplit64");
    run_case({8, 2, 9000, 1, 1, 10000}, true, "AttnDecodeSplit128");
    // Past 16384 keys there are more splits than the split launch's 128 blocks per kv head
    // (split_grid): blocks loop over splits blockIdx.x + i * 128 (158 and 313 splits here).
    run_case({8, 2, 20100, 1, 1, 20200}, true, "AttnDecodeSplitsLoopTwice");
    run_case({8, 1, 40000, 1, 1, 40100}, true, "AttnDecodeSplitsLoopThrice");
    // A session sized far past its position (frost serve: the model's context): the capped grid
    // leaves most blocks idle, which must write nothing the merge reads.
    run_case({8, 1, 1000, 1, 1, 70000}, true, "AttnDecodeShortInLongSession");
}

// The decode chain as a captured decode graph holds it: kv_append then attention decode (split,
// merge), all three chained by programmatic dependent launch. The split launch may start while
// the append still runs, so it must not read the cache (the new key at pos) or q before its
// pdl_wait: each replay appends a fresh key / value at pos and must give the bits of the same two
// launches made plainly on the legacy stream.
TEST(CudaAttention, DecodeChainedByPdlInACapturedGraphEqualsPlainLaunches) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("AttnDecodePdl");
    const int Hq = 16, Hkv = 2, max_seq = 2048, pos = 1300;  // 35B-A3B's group of 8
    const int64_t kv_dim = int64_t(Hkv) * D, q_stride = 2 * Hq * D;
    const auto q = uniform(rng, q_stride, -2, 2);
    const auto kc = uniform(rng, size_t(max_seq) * kv_dim, -2, 2);
    const auto vc = uniform(rng, size_t(max_seq) * kv_dim, -2, 2);
    Dev<uint16_t> dq(to_bf(q)), dk(to_bf(kc)), dv(to_bf(vc)), dkn(kv_dim), dvn(kv_dim), plain(Hq * D), graph(Hq * D);
    StepCursor c{};
    c.pos = pos;
    c.n_tokens = 1;
    Dev<StepCursor> dc(std::vector<StepCursor>{c});
    kernels::KvAppendBf16Params a{};
    a.k = bf(dkn); a.v = bf(dvn); a.k_cache = bf(dk); a.v_cache = bf(dv);
    a.src_row_stride = kv_dim; a.kv_dim = int32_t(kv_dim); a.max_seq = max_seq; a.max_rows = 1; a.cursor = dc.get();
    kernels::AttentionBf16Params p{};
    p.q = bf(dq); p.gate = bf(dq) + D; p.k_cache = bf(dk); p.v_cache = bf(dv);
    p.q_row_stride = q_stride; p.q_head_stride = 2 * D; p.Hq = Hq; p.Hkv = Hkv; p.head_dim = D;
    p.scale = 1.0f / std::sqrt(float(D)); p.max_seq = max_seq; p.max_rows = 1; p.cursor = dc.get();
    Dev<float> work(kernels::attn_decode_work_floats(p));
    p.work = work.get();
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    kernels::KvAppendBf16Params ag = a;
    kernels::AttentionBf16Params pg = p;
    ag.pdl = pg.pdl = 1;
    pg.o = bf(graph);
    cudaGraph_t g;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    CUDA_OK(kernels::kv_append_launch(ag, st));
    CUDA_OK(kernels::attn_decode_launch(pg, st));
    CUDA_OK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
    p.o = bf(plain);
    for (int step = 0; step < 3; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        const auto kn = to_bf(uniform(rng, size_t(kv_dim), -2, 2)), vn = to_bf(uniform(rng, size_t(kv_dim), -2, 2));
        dkn.upload(kn);
        dvn.upload(vn);
        plain.poison();
        graph.poison();
        CUDA_OK(kernels::kv_append_launch(a, nullptr));
        CUDA_OK(kernels::attn_decode_launch(p, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        dk.upload(to_bf(kc));  // the old row at pos again: the graph's own append must land first
        dv.upload(to_bf(vc));
        CUDA_OK(cudaGraphLaunch(exec, st));
        CUDA_OK(cudaStreamSynchronize(st));
        const auto want = plain.download();
        EXPECT_FALSE(std::isnan(from_bf(want)[0])) << "the plain launch wrote nothing";
        EXPECT_EQ(graph.download(), want) << "PDL-chained graph differs from the plain launches";
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(st);
}

}  // namespace
}  // namespace frost::test
#endif
