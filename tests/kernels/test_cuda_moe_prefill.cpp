// CUDA MoE prefill (moe_prefill_launch: device-side grouping, grouped tensor-core GEMMs with the
// row gather and SwiGLU fused, per-row combine) against the CPU reference op (cpu/moe.cpp) on the
// same bf16-representable inputs, fresh random, outputs poisoned. The activations between the two
// GEMMs and each expert's output are bf16 here (fp32 in the CPU op), so the output tolerance is
// the bf16 one: relative L2 <= 1e-2 per row. Rows whose CPU top-k gap is a near-tie are named and
// not compared. Also: the grouping's invariants (every pair once, by row inside each group, the
// tile table), bitwise equal reruns, a captured graph following the device row count.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaMoePrefill, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/moe.h"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda_test_util.h"
#include "util/fp8.h"

namespace frost::test {
namespace {

constexpr double kNearTie = 1e-4;  // bf16-exact inputs: GPU and CPU logits differ by fp32 sum order only
constexpr double kTol = 1e-2;

struct Shape {
    int H, E, k, I, Is;
    bool norm;
};
// The released shapes: Qwen3.5/3.6-35B-A3B and Qwen3-Next-80B-A3B.
constexpr Shape k35bA3b{2048, 256, 8, 512, 512, true};
constexpr Shape kNext80b{2048, 512, 10, 512, 512, false};

// Uniform bf16-representable values in [lo, hi) from a counter-based generator (splitmix64): the
// released shapes hold ~10^9 weights, too many for std::uniform_real_distribution in a test.
std::vector<float> fast_uniform(std::mt19937& rng, size_t n, float lo, float hi) {
    uint64_t state = (uint64_t(rng()) << 32) | rng();
    std::vector<float> v(n);
    for (auto& x : v) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x = round_bf(lo + (hi - lo) * float(z >> 40) * 0x1p-24f);
    }
    return v;
}

struct Weights {
    Shape s;
    std::vector<float> router, gu, down, sgu, sdown, sgate;
};

Weights make_weights(std::mt19937& rng, Shape s) {
    const float wh = 1.0f / std::sqrt(float(s.H)), wi = 1.0f / std::sqrt(float(s.I)),
                ws = 1.0f / std::sqrt(float(s.Is));
    return {s,
            fast_uniform(rng, size_t(s.E) * s.H, -2 * wh, 2 * wh),
            fast_uniform(rng, size_t(s.E) * 2 * s.I * s.H, -wh, wh),
            fast_uniform(rng, size_t(s.E) * s.H * s.I, -wi, wi),
            fast_uniform(rng, size_t(2) * s.Is * s.H, -wh, wh),
            fast_uniform(rng, size_t(s.H) * s.Is, -ws, ws),
            fast_uniform(rng, size_t(s.H), -wh, wh)};
}

struct CpuOut {
    std::vector<float> y, probs, w;
    std::vector<int32_t> ids;
};

// The CPU reference on the given rows of x ([rows, H]).
CpuOut run_cpu(const Weights& w, const std::vector<float>& x, int rows) {
    const Shape& s = w.s;
    CpuOut o;
    o.y.assign(size_t(rows) * s.H, 0.0f);  // y starts at 0: y = the MoE output
    o.probs.resize(size_t(rows) * s.E);
    o.ids.resize(size_t(rows) * s.k);
    o.w.resize(size_t(rows) * s.k);
    std::vector<float> work(size_t(rows) * kernels::moe_work_floats(s.H, s.I, s.Is));
    kernels::MoeParams p{};
    p.x = x.data(); p.y = o.y.data(); p.router = w.router.data(); p.experts_gate_up = w.gu.data();
    p.experts_down = w.down.data(); p.shared_gate_up = w.sgu.data(); p.shared_down = w.sdown.data();
    p.shared_gate = w.sgate.data(); p.probs = o.probs.data(); p.topk_ids = o.ids.data(); p.topk_w = o.w.data();
    p.work = work.data(); p.H = s.H; p.E = s.E; p.k = s.k; p.I = s.I; p.Is = s.Is; p.norm_topk = s.norm;
    p.max_rows = rows;
    EXPECT_EQ(kernels::cpu::moe(p), FROST_OK);
    return o;
}

// Device weights, inputs, outputs and the prefill scratch (moe_prefill_scratch) for max_rows rows.
struct Gpu {
    Dev<uint16_t> x, router, gu, down, sgu, sdown, sgate;
    Dev<float> probs, w, sw, out;
    Dev<int32_t> ids, n_rows;
    kernels::MoePrefillScratch sc;
    Dev<int32_t> offsets, chunk_base, tiles, entry_row, entry_pos;
    Dev<uint16_t> ag, yg;
    kernels::MoeBf16Params p{};

    static kernels::MoePrefillScratch scratch(Shape s, int rows) {
        kernels::MoeBf16Params q{};
        q.H = s.H; q.E = s.E; q.k = s.k; q.I = s.I; q.Is = s.Is; q.max_rows = rows;
        return kernels::moe_prefill_scratch(q);
    }
    Gpu(const Weights& wt, const std::vector<float>& xs, int rows, int n)
        : x(to_bf(xs)), router(to_bf(wt.router)), gu(to_bf(wt.gu)), down(to_bf(wt.down)), sgu(to_bf(wt.sgu)),
          sdown(to_bf(wt.sdown)), sgate(to_bf(wt.sgate)), probs(size_t(rows) * wt.s.E), w(size_t(rows) * wt.s.k),
          sw(size_t(rows)), out(size_t(rows) * wt.s.H), ids(size_t(rows) * wt.s.k), n_rows(std::vector<int32_t>{n}),
          sc(scratch(wt.s, rows)), offsets(sc.offsets_ints), chunk_base(sc.chunk_ints), tiles(sc.tile_ints),
          entry_row(sc.entry_row_ints), entry_pos(sc.entry_pos_ints), ag(sc.ag_elems), yg(sc.yg_elems) {
        const Shape& s = wt.s;
        p.x = bf(x); p.router = bf(router); p.experts_gate_up = bf(gu); p.experts_down = bf(down);
        p.shared_gate_up = bf(sgu); p.shared_down = bf(sdown); p.shared_gate = bf(sgate);
        p.probs = probs.get(); p.topk_ids = ids.get(); p.topk_w = w.get(); p.shared_w = sw.get();
        p.out = out.get(); p.out_bf16 = nullptr;
        p.H = s.H; p.E = s.E; p.k = s.k; p.I = s.I; p.Is = s.Is; p.norm_topk = s.norm;
        p.max_rows = rows; p.n_rows = n_rows.get();
        p.group_offsets = offsets.get(); p.chunk_base = chunk_base.get(); p.tile_table = tiles.get();
        p.entry_row = entry_row.get(); p.entry_pos = entry_pos.get(); p.ag = bf(ag); p.yg = bf(yg);
    }
};

// The grouping of the last launch: every (row, slot) pair of rows < n exactly once, in its
// expert's group (shared expert = group E), rows ascending inside each group, and the tile table
// = per group ceil(count / bm) tiles of bm entries, groups in order.
void check_grouping(const Gpu& g, int n, int bm) {
    const kernels::MoeBf16Params& p = g.p;
    const auto off = g.offsets.download(), er = g.entry_row.download(), ep = g.entry_pos.download(),
               ids = g.ids.download(), tt = g.tiles.download();
    ASSERT_EQ(off[0], 0);
    ASSERT_EQ(off[size_t(p.E) + 1], n * (p.k + 1)) << "every (row, expert) pair and every row's shared entry";
    ASSERT_EQ(off[size_t(p.E) + 1] - off[size_t(p.E)], n);
    std::vector<int> seen(size_t(n) * (p.k + 1), 0);
    for (int r = 0; r < n; ++r)
        for (int j = 0; j <= p.k; ++j) {
            const int e = ep[size_t(r) * (p.k + 1) + j];
            ASSERT_TRUE(e >= 0 && e < n * (p.k + 1)) << "row " << r << " slot " << j << " entry " << e;
            ++seen[size_t(e)];
            EXPECT_EQ(er[size_t(e)], r) << "entry " << e;
            const int grp = j < p.k ? ids[size_t(r) * p.k + j] : p.E;
            EXPECT_TRUE(e >= off[size_t(grp)] && e < off[size_t(grp) + 1]) << "row " << r << " slot " << j;
        }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), long(seen.size())) << "an entry used twice or never";
    int tile = 0;
    for (int grp = 0; grp <= p.E; ++grp) {
        for (int e = off[size_t(grp)] + 1; e < off[size_t(grp) + 1]; ++e)
            ASSERT_LT(er[size_t(e) - 1], er[size_t(e)]) << "group " << grp << " not in row order at entry " << e;
        for (int first = off[size_t(grp)]; first < off[size_t(grp) + 1]; first += bm, ++tile) {
            ASSERT_EQ(tt[1 + 2 * size_t(tile)], grp) << "tile " << tile;
            ASSERT_EQ(tt[2 + 2 * size_t(tile)], first) << "tile " << tile;
        }
    }
    EXPECT_EQ(tt[0], tile) << "tile count";
}

// GPU rows `rows_at[i]` against CPU rows i; returns the near-tie rows skipped.
int compare(const Gpu& g, const CpuOut& c, const std::vector<int>& rows_at) {
    const kernels::MoeBf16Params& p = g.p;
    const auto out = g.out.download(), probs = g.probs.download(), w = g.w.download();
    const auto ids = g.ids.download();
    int ties = 0;
    for (size_t i = 0; i < rows_at.size(); ++i) {
        const int r = rows_at[i];
        std::vector<float> sorted(c.probs.begin() + long(i) * p.E, c.probs.begin() + long(i + 1) * p.E);
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        const double gap = p.k < p.E ? double(sorted[size_t(p.k) - 1]) - sorted[size_t(p.k)] : 1.0;
        if (gap < kNearTie) {
            ++ties;
            std::printf("[ near-tie ] prefill row %d: CPU top-k gap %.3g; not compared\n", r, gap);
            continue;
        }
        for (int e = 0; e < p.E; ++e)
            EXPECT_NEAR(probs[size_t(r) * p.E + e], c.probs[i * p.E + e], 1e-5) << "row " << r << " expert " << e;
        // The same experts; in the same order except between two of them whose probabilities are
        // a near-tie (inside the top k the order is the fp32 sum's call, and the output does not
        // depend on it: the routed sum runs in expert order).
        const int32_t* gi = ids.data() + size_t(r) * p.k;
        const int32_t* ci = c.ids.data() + i * p.k;
        std::vector<int32_t> gs(gi, gi + p.k), cs(ci, ci + p.k);
        std::sort(gs.begin(), gs.end());
        std::sort(cs.begin(), cs.end());
        EXPECT_EQ(gs, cs) << "row " << r << ": the GPU router chose other experts than the CPU";
        if (gs != cs) continue;
        const auto cpu_prob = [&](int e) { return double(c.probs[i * p.E + e]); };
        for (int j = 0; j < p.k; ++j) {
            EXPECT_LT(std::fabs(cpu_prob(gi[j]) - cpu_prob(ci[j])), kNearTie)
                << "row " << r << " slot " << j << ": GPU expert " << gi[j] << " (CPU p " << cpu_prob(gi[j])
                << "), CPU expert " << ci[j] << " (p " << cpu_prob(ci[j]) << ")";
            const int m = int(std::find(ci, ci + p.k, gi[j]) - ci);
            EXPECT_NEAR(w[size_t(r) * p.k + j], c.w[i * p.k + m], 1e-5) << "row " << r << " slot " << j;
        }
        std::vector<double> ref(c.y.begin() + long(i) * p.H, c.y.begin() + long(i + 1) * p.H);
        std::vector<float> got(out.begin() + long(r) * p.H, out.begin() + long(r + 1) * p.H);
        EXPECT_LE(rel_l2(ref, got), kTol) << "row " << r;
    }
    return ties;
}

void expect_untouched_past(const Gpu& g, int n) {
    const auto out = g.out.download();
    for (int r = n; r < g.p.max_rows; ++r)
        EXPECT_TRUE(std::isnan(out[size_t(r) * g.p.H])) << "row " << r << " past n_rows was written";
}

// A second launch over poisoned output and grouped scratch gives `first` again, bit for bit.
void expect_rerun_bitwise(Gpu& g, const std::vector<float>& first) {
    g.out.poison();
    g.ag.poison();
    g.yg.poison();
    CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
    const auto second = g.out.download();
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0) << "reruns differ";
}

std::vector<int> first_rows(int n) {
    std::vector<int> v(size_t(n), 0);
    for (int i = 0; i < n; ++i) v[size_t(i)] = i;
    return v;
}

// Small shapes (odd row counts, partial tiles, K tails, Is != I, narrow experts), every tile shape.
TEST(CudaMoePrefill, GroupedGemmMatchesTheCpuReference) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("CudaMoePrefill");
    for (Shape s : {Shape{128, 8, 2, 64, 96, true}, Shape{256, 64, 4, 128, 64, true},
                    Shape{512, 128, 10, 32, 256, false}, Shape{272, 16, 3, 208, 48, true}})
        for (int shape = 1; shape <= kernels::kMoeTileShapeCount; ++shape) {
            const kernels::MoeTileShape t = kernels::kMoeTileShapes[shape - 1];
            SCOPED_TRACE("H " + std::to_string(s.H) + " E " + std::to_string(s.E) + " tile " + std::to_string(t.rows) +
                         "x" + std::to_string(t.k) + " warp cols " + std::to_string(t.warp_cols));
            const int rows = 333, n = 301;  // rows 301.. past n_rows stay poisoned; 5 chunks, the last partial
            const Weights w = make_weights(rng, s);
            const std::vector<float> x = uniform(rng, size_t(rows) * s.H, -2, 2);
            Gpu g(w, x, rows, n);
            g.p.tile_shape = shape;
            if (t.wgmma && !kernels::moe_prefill_wgmma_supported()) {
                std::printf("[ not run  ] tile shape %d needs compute capability 9.0\n", shape);
                EXPECT_EQ(kernels::moe_prefill_launch(g.p, nullptr), cudaErrorNotSupported);
                continue;
            }
            CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            check_grouping(g, n, t.rows);
            const CpuOut c = run_cpu(w, x, n);
            EXPECT_LT(compare(g, c, first_rows(n)), n / 2) << "most rows near-ties: degenerate inputs";
            expect_untouched_past(g, n);
        }
}

// The released shapes at real chunk sizes: the CPU reference on a sample of rows spread over the
// chunk (every row's routing and grouping is still checked), two launches bitwise equal.
// tile_shape 0: the launcher's pick.
void check_released(Shape s, const char* name, int rows, int sample, int tile_shape = 0) {
    SCOPED_TRACE(std::string(name) + " rows " + std::to_string(rows));
    auto rng = fresh_rng(name);
    const Weights w = make_weights(rng, s);
    const std::vector<float> x = fast_uniform(rng, size_t(rows) * s.H, -2, 2);
    Gpu g(w, x, rows, rows);
    g.p.tile_shape = tile_shape;
    CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    check_grouping(g, rows, kernels::moe_prefill_tile_rows(g.p));
    expect_rerun_bitwise(g, g.out.download());
    std::vector<int> at;
    std::vector<float> xs;
    const int start = int(rng() % uint32_t(rows / sample));
    for (int r = start; r < rows && int(at.size()) < sample; r += rows / sample) {
        at.push_back(r);
        xs.insert(xs.end(), x.begin() + long(r) * s.H, x.begin() + long(r + 1) * s.H);
    }
    const CpuOut c = run_cpu(w, xs, int(at.size()));
    EXPECT_LT(compare(g, c, at), int(at.size()) / 2) << "most rows near-ties: degenerate inputs";
}

TEST(CudaMoePrefill, MatchesTheCpuReferenceAtTheReleasedShapes) {
    FROST_SKIP_WITHOUT_CUDA();
    check_released(k35bA3b, "35B-A3B", 1024, 128);
    check_released(k35bA3b, "35B-A3B", 4096, 128);
    check_released(kNext80b, "Qwen3-Next-80B", 2048, 128);
}

// Tile shape 4 (persistent warp-specialised blocks, lm_moe_gemm_ws.cuh) where each block takes
// many work items: the shared-memory ring's barrier phases carry from tile to tile, groups of
// ~750 rows span several tiles, a warpgroup whose 64 rows are all past its group's end skips its
// MMAs, and the shared expert's narrower FFN (Is 384 of 512) skips a column tile.
TEST(CudaMoePrefill, PersistentTileCarriesTheRingAcrossManyTiles) {
    FROST_SKIP_WITHOUT_CUDA();
    const Shape s{512, 8, 2, 512, 384, false};
    if (!kernels::moe_prefill_wgmma_supported()) {
        std::printf("[ not run  ] tile shape 4 needs compute capability 9.0\n");
        auto rng = fresh_rng("CudaMoePrefillWsRefused");
        const Weights w = make_weights(rng, s);
        Gpu g(w, uniform(rng, size_t(8) * s.H, -2, 2), 8, 8);
        g.p.tile_shape = 4;
        EXPECT_EQ(kernels::moe_prefill_launch(g.p, nullptr), cudaErrorNotSupported);
        return;
    }
    for (int shape = 4; shape <= kernels::kMoeTileShapeCount; ++shape)
        check_released(s, "CudaMoePrefillWs", 3000, 160, shape);
}

// The TMA-fed tiles (shapes 5-7, lm_moe_gemm_tma.cuh) on a routing made to hold the edge cases:
// a constant input feature with router weight -64 for expert 0, so expert 0 gets no rows (its
// weights never stream), and 8 experts for 977 rows x top-2, so groups average ~280 entries
// (several tiles each, the last partial; asserted, as is the empty group);
// K tails (H 272, I 208: not multiples of the 64-wide TMA box, the zero fill must hold), a
// gate|up column tile past I (rows of the next expert arrive and are dropped), a narrower shared
// FFN (Is 96) whose columns past Is read zeros from the map, not other groups' activations.
// Every row against the CPU reference; a rerun with poisoned scratch is bitwise equal.
TEST(CudaMoePrefill, TmaTilesHandleEmptyFullAndPartialGroups) {
    FROST_SKIP_WITHOUT_CUDA();
    const Shape s{272, 8, 2, 208, 96, true};
    const int rows = 1000, n = 977;
    for (int shape = 5; shape <= kernels::kMoeTileShapeCount; ++shape) {
        SCOPED_TRACE("tile shape " + std::to_string(shape));
        auto rng = fresh_rng("CudaMoePrefillTma");
        Weights w = make_weights(rng, s);
        std::vector<float> x = uniform(rng, size_t(rows) * s.H, -2, 2);
        for (int r = 0; r < rows; ++r) x[size_t(r) * s.H] = 1.0f;
        w.router[0] = -64.0f;  // expert 0, feature 0
        Gpu g(w, x, rows, n);
        g.p.tile_shape = shape;
        if (!kernels::moe_prefill_wgmma_supported()) {
            std::printf("[ not run  ] tile shape %d needs compute capability 9.0\n", shape);
            EXPECT_EQ(kernels::moe_prefill_launch(g.p, nullptr), cudaErrorNotSupported);
            continue;
        }
        CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        check_grouping(g, n, kernels::kMoeTileShapes[shape - 1].rows);
        const auto off = g.offsets.download();
        ASSERT_EQ(off[1] - off[0], 0) << "expert 0 should get no rows";
        const int bm = kernels::kMoeTileShapes[shape - 1].rows;
        int biggest = 0, partial = 0;
        for (int e = 1; e < s.E; ++e) {
            biggest = std::max(biggest, off[size_t(e) + 1] - off[size_t(e)]);
            partial += (off[size_t(e) + 1] - off[size_t(e)]) % bm != 0;
        }
        ASSERT_GT(biggest, bm) << "no routed group spans two tiles";
        ASSERT_GT(partial, 0) << "no routed group ends in a partial tile";
        const auto first = g.out.download();
        const CpuOut c = run_cpu(w, x, n);
        EXPECT_LT(compare(g, c, first_rows(n)), n / 2) << "most rows near-ties: degenerate inputs";
        expect_untouched_past(g, n);
        expect_rerun_bitwise(g, first);
    }
}

// One captured graph replayed with different device-side row counts: the grouping, the tile
// table and the GEMM grids follow *n_rows without recapture; the launcher's pick and two TMA
// tiles (their tensor maps are encoded at capture).
TEST(CudaMoePrefill, CapturedGraphFollowsTheDeviceRowCount) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("CudaMoePrefillGraph");
    const Shape s{256, 32, 4, 128, 128, true};
    const int rows = 200;
    const Weights w = make_weights(rng, s);
    const std::vector<float> x = uniform(rng, size_t(rows) * s.H, -2, 2);
    for (int shape : {0, 5, 7}) {
        SCOPED_TRACE("tile shape " + std::to_string(shape));
        if (shape && !kernels::moe_prefill_wgmma_supported()) continue;  // refusal checked above
        Gpu g(w, x, rows, rows);
        g.p.tile_shape = shape;
        cudaStream_t st;
        CUDA_OK(cudaStreamCreate(&st));
        cudaGraph_t graph;
        CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CUDA_OK(kernels::moe_prefill_launch(g.p, st));
        CUDA_OK(cudaStreamEndCapture(st, &graph));
        cudaGraphExec_t exec;
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        for (int n : {rows, 57, 129}) {
            SCOPED_TRACE("n_rows " + std::to_string(n));
            g.n_rows.upload({n});
            g.out.poison();
            CUDA_OK(cudaGraphLaunch(exec, st));
            CUDA_OK(cudaStreamSynchronize(st));
            check_grouping(g, n, kernels::moe_prefill_tile_rows(g.p));
            const CpuOut c = run_cpu(w, x, n);
            compare(g, c, first_rows(n));
            expect_untouched_past(g, n);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(st);
    }
}

// moe_prefill_gemms_launch (benches) reruns only the grouped GEMMs over the last launch's
// grouping: the same expert outputs, bit for bit, into a poisoned yg.
TEST(CudaMoePrefill, GemmsAloneRepeatTheLaunchsGemms) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("CudaMoePrefillGemmsAlone");
    const Shape s{256, 16, 2, 128, 64, true};
    const int rows = 150;
    const Weights w = make_weights(rng, s);
    Gpu g(w, uniform(rng, size_t(rows) * s.H, -2, 2), rows, rows);
    for (int shape : {1, 5}) {
        SCOPED_TRACE("tile shape " + std::to_string(shape));
        if (kernels::kMoeTileShapes[shape - 1].wgmma && !kernels::moe_prefill_wgmma_supported()) continue;
        g.p.tile_shape = shape;
        CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
        const auto first = g.yg.download();
        const int used = rows * (s.k + 1) * s.H;  // the entries of this launch
        g.yg.poison();
        CUDA_OK(kernels::moe_prefill_gemms_launch(g.p, nullptr));
        const auto second = g.yg.download();
        ASSERT_FALSE(std::isnan(bf2f(second[0]))) << "yg not rewritten";
        EXPECT_EQ(std::memcmp(first.data(), second.data(), size_t(used) * sizeof(uint16_t)), 0);
    }
}

// The TMA tiles' blocks claim their work items from a device counter (lm_moe_prefill_tma.cu,
// next_item); FROST_MOE_CLAIM=0 gives each block a fixed stride of the grid instead. Which block
// runs an item must not change a bit. Groups of ~750 rows give ~300 gate|up items per launch, so
// every block takes two or three; the expert outputs and the mixed rows are equal between the two
// orders, and a second claimed launch (its counters zeroed by the scan again) equals the first.
template <class V>
bool same_bytes(const std::vector<V>& a, const std::vector<V>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(V)) == 0;
}

TEST(CudaMoePrefill, ClaimedItemsGiveTheFixedStridesBits) {
    FROST_SKIP_WITHOUT_CUDA();
    if (!kernels::moe_prefill_wgmma_supported()) {
        std::printf("[ not run  ] the TMA tiles need compute capability 9.0\n");
        return;
    }
    auto rng = fresh_rng("CudaMoePrefillClaim");
    const Shape s{512, 8, 2, 512, 384, false};
    const int rows = 3000;
    const Weights w = make_weights(rng, s);
    Gpu g(w, uniform(rng, size_t(rows) * s.H, -2, 2), rows, rows);
    const size_t used = size_t(rows) * (s.k + 1) * s.H;  // yg elements this launch writes
    using Result = std::pair<std::vector<uint16_t>, std::vector<float>>;
    auto run = [&](Result& r) {  // void: CUDA_OK returns on failure
        g.yg.poison();
        g.out.poison();
        CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        r.first = g.yg.download();
        r.first.resize(used);
        r.second = g.out.download();
    };
    for (int shape = 5; shape <= kernels::kMoeTileShapeCount; ++shape) {
        SCOPED_TRACE("tile shape " + std::to_string(shape));
        g.p.tile_shape = shape;
        Result strided, claimed, again;
        ASSERT_EQ(setenv("FROST_MOE_CLAIM", "0", 1), 0);
        run(strided);
        unsetenv("FROST_MOE_CLAIM");
        run(claimed);
        run(again);
        ASSERT_EQ(claimed.first.size(), used);
        ASSERT_FALSE(std::isnan(bf2f(claimed.first[0]))) << "yg not written";
        ASSERT_FALSE(std::isnan(claimed.second[0])) << "out not written";
        EXPECT_TRUE(same_bytes(claimed.first, strided.first)) << "expert outputs differ between the two orders";
        EXPECT_TRUE(same_bytes(claimed.second, strided.second)) << "mixed rows differ between the two orders";
        EXPECT_TRUE(same_bytes(again.first, claimed.first) && same_bytes(again.second, claimed.second))
            << "a second launch differs";
    }
}

// FROST_MOE_PREFILL_TILE overrides the launcher's pick when params leave it (tile_shape 0): the
// tile table's granularity follows it, and an unknown shape is refused like a bad tile_shape.
TEST(CudaMoePrefill, EnvironmentOverridesThePickedTile) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("CudaMoePrefillEnv");
    const Shape s{64, 8, 2, 32, 32, true};
    const Weights w = make_weights(rng, s);
    Gpu g(w, uniform(rng, size_t(4) * s.H, -2, 2), 4, 4);
    // The pick for few rows per expert: on Hopper the 128 x 256 TMA tile (every group size), before
    // it the 64-row tile. The environment then forces the other granularity.
    const int picked = kernels::moe_prefill_tile_rows(g.p);
    EXPECT_EQ(picked, kernels::moe_prefill_wgmma_supported() ? 128 : 64);
    const int forced_rows = picked == 64 ? 128 : 64;
    ASSERT_EQ(setenv("FROST_MOE_PREFILL_TILE", picked == 64 ? "2" : "1", 1), 0);
    EXPECT_EQ(kernels::moe_prefill_tile_rows(g.p), forced_rows);
    CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    check_grouping(g, 4, forced_rows);
    ASSERT_EQ(setenv("FROST_MOE_PREFILL_TILE", "99", 1), 0);
    EXPECT_EQ(kernels::moe_prefill_launch(g.p, nullptr), cudaErrorInvalidValue);
    g.p.tile_shape = 1;  // an explicit shape wins over the environment
    EXPECT_EQ(kernels::moe_prefill_tile_rows(g.p), 64);
    unsetenv("FROST_MOE_PREFILL_TILE");
}

// An FP8 stack of n rows x K (e4m3 codes up to +-2^3, every code class: zeros, subnormals,
// normals, both signs; no NaN) with its scales per bn x bk block; `deq` = bf16(e4m3 * scale) per
// weight, what dequant_bf16_launch writes, for the bf16 reference launch.
struct Fp8Stack {
    std::vector<uint8_t> w;
    std::vector<float> scale, deq;
    int bn, bk;
};
Fp8Stack make_fp8(std::mt19937& rng, size_t n, int K, int bn, int bk, float scale_mid) {
    Fp8Stack f{std::vector<uint8_t>(n * size_t(K)), {}, std::vector<float>(n * size_t(K)), bn, bk};
    std::uniform_int_distribution<int> code(0, 255), exp(0, 10);
    for (auto& b : f.w) {
        const int c = code(rng);
        b = uint8_t((c & 0x80) | (exp(rng) << 3) | (c & 7));  // exponent field <= 10: |v| <= 15
    }
    const size_t rows_s = (n + size_t(bn) - 1) / size_t(bn), cols_s = (size_t(K) + bk - 1) / size_t(bk);
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    f.scale.resize(rows_s * cols_s);
    for (auto& x : f.scale) x = scale_mid * u(rng);
    for (size_t r = 0; r < n; ++r)
        for (int k = 0; k < K; ++k)
            f.deq[r * K + k] = round_bf(util::e4m3_to_f32(f.w[r * K + k]) * f.scale[(r / bn) * cols_s + k / bk]);
    return f;
}

// A launch's four FP8 stacks (blocks bn x bk; bk 0: one scale per row) on the device, beside g:
// a Gpu whose bf16 weights are their dequantization, on fresh random x of `rows` rows, n valid.
struct Fp8Case {
    Shape s;
    Fp8Stack gu, dn, sgu, sdn;
    std::vector<float> x;
    std::unique_ptr<Gpu> g;
    std::unique_ptr<Dev<uint8_t>> w[4];
    std::unique_ptr<Dev<float>> scale[4];

    Fp8Case(std::mt19937& rng, Shape shape, int rows, int n, int bn, int bk) : s(shape) {
        Weights wt = make_weights(rng, s);
        const auto stack = [&](size_t nr, int K) {
            return make_fp8(rng, nr, K, bn, bk ? bk : K, 0.25f / std::sqrt(float(K)));
        };
        gu = stack(size_t(s.E) * 2 * s.I, s.H);
        dn = stack(size_t(s.E) * s.H, s.I);
        sgu = stack(size_t(2) * s.Is, s.H);
        sdn = stack(size_t(s.H), s.Is);
        wt.gu = gu.deq; wt.down = dn.deq; wt.sgu = sgu.deq; wt.sdown = sdn.deq;
        x = uniform(rng, size_t(rows) * s.H, -2, 2);
        g = std::make_unique<Gpu>(wt, x, rows, n);
        const Fp8Stack* st[] = {&gu, &dn, &sgu, &sdn};
        for (int i = 0; i < 4; ++i) {
            w[i] = std::make_unique<Dev<uint8_t>>(st[i]->w);
            scale[i] = std::make_unique<Dev<float>>(st[i]->scale);
        }
    }
    // f reading the four stacks in `mode` (MoeBf16Params::fp8).
    kernels::MoeBf16Params with_fp8(kernels::MoeBf16Params f, int mode) const {
        const Fp8Stack* st[] = {&gu, &dn, &sgu, &sdn};
        const int K[] = {s.H, s.I, s.H, s.Is};
        kernels::MoeFp8Weights* dst[] = {&f.fp8_gate_up, &f.fp8_down, &f.fp8_shared_gate_up, &f.fp8_shared_down};
        for (int i = 0; i < 4; ++i)
            *dst[i] = {w[i]->get(), scale[i]->get(), st[i]->bn, st[i]->bk ? st[i]->bk : K[i]};
        f.fp8 = mode;
        return f;
    }
};

// The grouped GEMMs reading FP8 stacks as stored (MoeBf16Params::fp8: each weight converted on
// its way into shared memory) give the bits of the same launch on the dequantized bf16 stacks,
// at every TMA tile shape, with Qwen's 128 x 128 blocks (narrow experts: a partial row block,
// K tails inside a block), odd blocks (64 x 48) and one scale per row; other tiles refuse them.
TEST(CudaMoePrefill, Fp8StacksGiveTheDequantizedStacksBits) {
    FROST_SKIP_WITHOUT_CUDA();
    const Shape s{272, 8, 2, 208, 96, true};
    const int rows = 700, n = 683;
    const int blocks[][2] = {{128, 128}, {64, 48}, {1, 0}};  // {1, 0}: one scale per row (block_k = K)
    for (const auto& blk : blocks) {
        auto rng = fresh_rng("CudaMoePrefillFp8");
        const Fp8Case c(rng, s, rows, n, blk[0], blk[1]);
        Gpu& g = *c.g;
        const auto with_fp8 = [&](const kernels::MoeBf16Params& f) { return c.with_fp8(f, 1); };
        for (int shape = 2; shape <= kernels::kMoeTileShapeCount; ++shape) {
            SCOPED_TRACE("tile shape " + std::to_string(shape) + ", blocks " + std::to_string(blk[0]) + " x " +
                         std::to_string(blk[1]));
            g.p.tile_shape = shape;
            const kernels::MoeBf16Params f = with_fp8(g.p);
            const bool tma = shape >= 5 && kernels::moe_prefill_wgmma_supported();
            EXPECT_EQ(kernels::moe_prefill_reads_fp8(f), tma);
            if (!tma) {
                if (shape == 2 || kernels::moe_prefill_wgmma_supported()) {
                    EXPECT_EQ(kernels::moe_prefill_launch(f, nullptr), cudaErrorInvalidValue) << "FP8 on a bf16-only tile";
                }
                continue;
            }
            g.out.poison(); g.ag.poison(); g.yg.poison();
            CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
            const auto ref = g.out.download();
            g.out.poison(); g.ag.poison(); g.yg.poison();
            CUDA_OK(kernels::moe_prefill_launch(f, nullptr));
            const auto got = g.out.download();
            for (int r = 0; r < n; ++r)
                ASSERT_EQ(std::memcmp(&ref[size_t(r) * s.H], &got[size_t(r) * s.H], sizeof(float) * s.H), 0)
                    << "row " << r << ": the FP8 stacks' output differs from the dequantized stacks'";
            expect_untouched_past(g, n);
            EXPECT_FALSE(std::isnan(got[0]));
        }
        // A misaligned stack is not taken (the caller dequantizes instead).
        kernels::MoeBf16Params f = with_fp8(g.p);
        f.tile_shape = 0;
        f.fp8_down.w += 8;
        EXPECT_FALSE(kernels::moe_prefill_reads_fp8(f));
    }
}

// W8A8 (MoeBf16Params::fp8 = 2): FP8 stacks in 128 x 128 blocks, or with one scale per row (the
// per-channel form), times activations quantized per row and 128-wide group (x before gate|up,
// the bf16 SwiGLU activations before down). Each GEMM is
// checked on its own against a host reference in double, entry by entry through the grouping:
// gate|up's ag against silu(g) * u over the quantized x row (cpu quantize_act_e4m3, the device
// quantizer's arithmetic); down's yg against the device's own ag quantized on the host, times the
// weights; the mixed rows against the device's yg. Exact e4m3 x e4m3 products and scales leave
// the bf16 rounding of ag / yg and the FP8 tensor cores' accumulation, ~1e-3; skipping either
// quantization would cost the e4m3 rounding, a few % (the exact launch on the dequantized stacks
// shows how far). Shapes 5 and 6 run it (128-row tiles), the others refuse it, and so does a
// stack of other blocks or a missing activation buffer.
constexpr double kW8a8EntryTol = 5e-3;

TEST(CudaMoePrefill, W8a8MatchesTheQuantizedReference) {
    FROST_SKIP_WITHOUT_CUDA();
    if (!kernels::moe_prefill_wgmma_supported()) {
        std::printf("[ not run  ] W8A8 runs on the TMA tiles, compute capability 9.0\n");
        return;
    }
    const Shape s{384, 8, 2, 256, 256, true};
    const int rows = 700, n = 683, entries = rows * (s.k + 1);
    const int blocks[][2] = {{128, 128}, {1, 0}};  // {1, 0}: one scale per row (per-channel, block_k = K)
    for (const auto& blk : blocks) {
        SCOPED_TRACE("blocks " + std::to_string(blk[0]) + " x " + std::to_string(blk[1]));
        auto rng = fresh_rng("CudaMoePrefillW8a8");
        const Fp8Case c(rng, s, rows, n, blk[0], blk[1]);
        Gpu& g = *c.g;
        const Fp8Stack &gu = c.gu, &dn = c.dn, &sgu = c.sgu, &sdn = c.sdn;
        const std::vector<float>& x = c.x;
        Dev<uint8_t> xq(size_t(rows) * s.H), agq(size_t(entries) * s.I);
        Dev<float> xs(kernels::act_scale_floats(rows, s.H)), ags(kernels::act_scale_floats(entries, s.I));
        kernels::MoeBf16Params f = c.with_fp8(g.p, 2);
        f.xq = xq.get(); f.xq_scale = xs.get(); f.agq = agq.get(); f.agq_scale = ags.get();

        // Each stack's weights as exact values (e4m3 x its block's scale, in double).
        const auto values = [](const Fp8Stack& st, int K) {
            const size_t cols = (size_t(K) + st.bk - 1) / size_t(st.bk);
            std::vector<double> v(st.w.size());
            for (size_t i = 0; i < v.size(); ++i) {
                const size_t row = i / size_t(K), k = i % size_t(K);
                v[i] = double(util::e4m3_to_f32(st.w[i])) * double(st.scale[(row / st.bn) * cols + k / st.bk]);
            }
            return v;
        };
        const std::vector<double> wgu = values(gu, s.H), wdn = values(dn, s.I), wsgu = values(sgu, s.H),
                                  wsdn = values(sdn, s.Is);
        const auto dot = [](const float* a, const double* b, int K) {
            double acc = 0;
            for (int k = 0; k < K; ++k) acc += double(a[k]) * b[k];
            return acc;
        };
        const size_t width = size_t(s.I);
        for (int shape = 1; shape <= kernels::kMoeTileShapeCount; ++shape) {
            SCOPED_TRACE("tile shape " + std::to_string(shape));
            g.p.tile_shape = shape;
            f.tile_shape = shape;
            const bool runs = shape == 5 || shape == 6;
            EXPECT_EQ(kernels::moe_prefill_w8a8_ok(f), runs);
            if (!runs) {
                EXPECT_EQ(kernels::moe_prefill_launch(f, nullptr), cudaErrorInvalidValue) << "W8A8 on another tile";
                continue;
            }
            g.out.poison(); g.ag.poison(); g.yg.poison();
            CUDA_OK(kernels::moe_prefill_launch(g.p, nullptr));
            const auto exact = g.out.download();
            g.out.poison(); g.ag.poison(); g.yg.poison(); xq.poison(); agq.poison();
            CUDA_OK(kernels::moe_prefill_launch(f, nullptr));
            const auto got = g.out.download(), tw = g.w.download(), sw = g.sw.download();
            const auto ids = g.ids.download();
            const auto ag = g.ag.download(), yg = g.yg.download();
            const auto pos = g.entry_pos.download();
            double worst_gu = 0, worst_dn = 0, worst_mix = 0, mean_gu = 0, mean_dn = 0, mean_exact = 0;
            std::vector<float> xr(s.H), a_got(width), a_q(width), y_got(s.H);
            std::vector<double> a_ref(width), y_ref(s.H), mix_ref(s.H);
            for (int r = 0; r < n; ++r) {
                std::copy(x.begin() + size_t(r) * s.H, x.begin() + size_t(r + 1) * s.H, xr.begin());
                ASSERT_EQ(kernels::cpu::quantize_act_e4m3(xr.data(), 1, s.H, s.H), FROST_OK);
                std::fill(mix_ref.begin(), mix_ref.end(), 0.0);
                for (int j = 0; j <= s.k; ++j) {
                    const bool shared = j == s.k;
                    const size_t ex = shared ? 0 : size_t(ids[size_t(r) * s.k + j]);
                    const size_t e = size_t(pos[size_t(r) * (s.k + 1) + j]);
                    const double* wa = shared ? wsgu.data() : wgu.data() + ex * 2 * s.I * s.H;
                    const double* wd = shared ? wsdn.data() : wdn.data() + ex * s.H * s.I;
                    for (size_t i = 0; i < width; ++i) {
                        const double gs = dot(xr.data(), wa + i * s.H, s.H), us = dot(xr.data(), wa + (s.I + i) * s.H, s.H);
                        a_ref[i] = gs / (1.0 + std::exp(-gs)) * us;
                        a_got[i] = a_q[i] = bf2f(ag[e * width + i]);
                    }
                    const double egu = rel_l2(a_ref, a_got);
                    ASSERT_LE(egu, kW8a8EntryTol) << "gate|up, row " << r << " slot " << j;
                    ASSERT_EQ(kernels::cpu::quantize_act_e4m3(a_q.data(), 1, s.I, s.I), FROST_OK);
                    for (int h = 0; h < s.H; ++h) {
                        y_ref[h] = dot(a_q.data(), wd + size_t(h) * s.I, s.I);
                        y_got[h] = bf2f(yg[e * s.H + h]);
                    }
                    const double edn = rel_l2(y_ref, y_got);
                    ASSERT_LE(edn, kW8a8EntryTol) << "down, row " << r << " slot " << j;
                    const double mix = shared ? double(sw[r]) : double(tw[size_t(r) * s.k + j]);
                    for (int h = 0; h < s.H; ++h) mix_ref[h] += mix * double(y_got[h]);
                    worst_gu = std::max(worst_gu, egu);
                    worst_dn = std::max(worst_dn, edn);
                    mean_gu += egu / (n * (s.k + 1));
                    mean_dn += edn / (n * (s.k + 1));
                }
                const std::vector<float> gr(got.begin() + size_t(r) * s.H, got.begin() + size_t(r + 1) * s.H);
                const std::vector<float> er(exact.begin() + size_t(r) * s.H, exact.begin() + size_t(r + 1) * s.H);
                const double emix = rel_l2(mix_ref, gr);
                ASSERT_LE(emix, 1e-5) << "mixed row " << r;
                worst_mix = std::max(worst_mix, emix);
                mean_exact += rel_l2(mix_ref, er) / n;
            }
            std::printf("[ W8A8 MoE, tile %d ] rel L2 per entry: gate|up mean %.2e max %.2e, down mean %.2e max %.2e; "
                        "mixed rows max %.2e; the exact launch's rows from these: mean %.2e\n",
                        shape, mean_gu, worst_gu, mean_dn, worst_dn, worst_mix, mean_exact);
            EXPECT_GT(mean_exact, kW8a8EntryTol) << "the exact path is as close: the test cannot tell them apart";
            expect_untouched_past(g, n);
            // Deterministic: a second launch, bit for bit.
            g.out.poison();
            CUDA_OK(kernels::moe_prefill_launch(f, nullptr));
            const auto again = g.out.download();
            EXPECT_EQ(std::memcmp(got.data(), again.data(), sizeof(float) * size_t(n) * s.H), 0);
        }
        // Stacks of other blocks (64-row blocks; one scale per row and 128 columns), or a missing
        // activation buffer: not taken.
        f.tile_shape = 0;
        kernels::MoeBf16Params bad = f;
        bad.fp8_down.block_n = 64;
        bad.fp8_down.block_k = 128;
        EXPECT_FALSE(kernels::moe_prefill_w8a8_ok(bad));
        bad.fp8_down.block_n = 1;
        EXPECT_FALSE(kernels::moe_prefill_w8a8_ok(bad));
        bad = f;
        bad.agq = nullptr;
        EXPECT_FALSE(kernels::moe_prefill_w8a8_ok(bad));
        EXPECT_EQ(kernels::moe_prefill_launch(bad, nullptr), cudaErrorInvalidValue);
    }
}

TEST(CudaMoePrefill, BadParamsAreRefused) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("CudaMoePrefillBad");
    const Shape s{64, 8, 2, 32, 32, true};
    const Weights w = make_weights(rng, s);
    Gpu g(w, uniform(rng, size_t(4) * s.H, -2, 2), 4, 4);
    kernels::MoeBf16Params p = g.p;
    p.tile_shape = kernels::kMoeTileShapeCount + 1;
    EXPECT_EQ(kernels::moe_prefill_launch(p, nullptr), cudaErrorInvalidValue);
    p.tile_shape = -1;
    EXPECT_EQ(kernels::moe_prefill_launch(p, nullptr), cudaErrorInvalidValue);
    p = g.p;
    p.tile_table = nullptr;
    EXPECT_EQ(kernels::moe_prefill_launch(p, nullptr), cudaErrorInvalidValue);
    p = g.p;
    p.chunk_base = nullptr;
    EXPECT_EQ(kernels::moe_prefill_launch(p, nullptr), cudaErrorInvalidValue);
    p = g.p;
    p.I = 24;  // not a multiple of 16
    EXPECT_EQ(kernels::moe_prefill_launch(p, nullptr), cudaErrorInvalidValue);
    p = g.p;
    p.yg = p.yg + 1;  // 16-byte vector loads
    EXPECT_EQ(kernels::moe_prefill_launch(p, nullptr), cudaErrorInvalidValue);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(std::isnan(g.out.download()[0])) << "a refused launch wrote its output";
}

}  // namespace
}  // namespace frost::test
#endif
