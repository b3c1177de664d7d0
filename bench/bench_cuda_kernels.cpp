// Per-op benchmark of the CUDA engine on a real model folder (the 9B-style synthetic checkpoint in
// scripts/gpu/bench_kernels.sh): the ceilings measured in the same run (device copy bandwidth,
// cuBLASLt bf16 8192^3), then one prefill chunk and one decode step per requested position, op by
// op. The ops are the model's own: the engine records one step with an observer
// (Engine::record_ops) and every recorded launch is replayed alone with its captured params:
// median time (CUDA events, warm-up, L2 flushed before every timed launch by a read-only pass),
// GB/s, TFLOP/s and % of the floor max(bytes / bandwidth, FLOPs / GEMM rate), bytes and FLOPs from
// the ops' cost model. No copy of the forward lives here.
// Usage: bench_cuda_kernels out.json MODEL_DIR [prefill_chunk] [decode_pos...]
#if !FROST_WITH_CUDA
#include <cstdio>
int main() {
    std::printf("bench_cuda_kernels: built without CUDA\n");
    return 0;
}
#else
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_cuda_check.h"
#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_gemm_swiglu.h"
#include "kernels/cuda/lm_kernels.h"
#include "kernels/cuda/lm_launch_probe.h"
#include "kernels/gemm_pick.h"
#include "model/engine.h"

using namespace frost::kernels;
namespace fm = frost::model;
namespace fo = frost::ops;

namespace {

constexpr int kWarmup = 3, kRepeats = 25;
constexpr size_t kFlushBytes = 256u << 20;  // > 5x the H100's 50 MB L2
constexpr size_t kCopyBytes = 1u << 30;
constexpr int kCeilGemm = 8192;

// The L2 is flushed by READING a buffer 5x its size (a GEMV over it): a memset would leave the L2
// full of dirty lines whose write-back the timed kernel would pay (seen: ~12 us per kernel).
struct Timer {
    cudaStream_t s;
    cudaEvent_t a, b;
    GemmBf16Params flush;
    // Median over repeats of one launch; the flush runs outside the timed region.
    double median_ms(const std::function<cudaError_t()>& launch, bool flush_l2 = true) {
        for (int i = 0; i < kWarmup; ++i) CK(launch());
        std::vector<float> t;
        for (int i = 0; i < kRepeats; ++i) {
            if (flush_l2) CK(gemv_launch(flush, s));
            CK(cudaEventRecord(a, s));
            CK(launch());
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, a, b));
            t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};

template <class T>
T* dalloc(size_t n) {
    void* p = nullptr;
    CK(cudaMalloc(&p, n * sizeof(T) + 256));
    return static_cast<T*>(p);
}

struct Row {
    std::string phase, name, kind;
    int per_forward = 0;  // launches per step
    double ms = 0;        // summed median time of those launches
    fo::OpCost cost;
};

struct Ceilings {
    double copy_gbs;    // bytes copied per second (D2D)
    double rw_gbs;      // bytes read + written per second = 2 x copy
    double gemm_tflops; // cuBLASLt bf16 8192^3
};

double floor_ms(const fo::OpCost& c, const Ceilings& ce) {
    return std::max(c.bytes / (ce.rw_gbs * 1e9), c.flops / (ce.gemm_tflops * 1e12)) * 1e3;
}

// One step of the engine's forward at position `pos`: recorded, then every op timed alone.
bool run_phase(fm::Engine& e, const std::string& phase, int rows, int pos, Timer& t, std::vector<Row>& out) {
    std::mt19937 rng(11);
    std::vector<int32_t> ids(size_t(std::max(pos, 1)));
    for (auto& x : ids) x = int32_t(rng() % uint32_t(e.config().vocab_size));
    if (e.reset(0) != FROST_OK || (pos > 0 && e.prefill(0, ids.data(), size_t(pos), nullptr) != FROST_OK)) return false;
    std::vector<fo::OpRecord> recs;
    if (e.record_ops(0, rows, rows == 1, [&](const fo::OpRecord& r) { recs.push_back(r); }) != FROST_OK) return false;
    std::map<std::string, size_t> at;
    frost_stream* st = e.stream();
    for (const auto& r : recs) {
        const double ms = t.median_ms([&] { return r.replay(st) == FROST_OK ? cudaSuccess : cudaErrorUnknown; });
        auto it = at.find(r.label);
        if (it == at.end()) {
            it = at.emplace(r.label, out.size()).first;
            Row row;
            row.phase = phase;
            row.name = r.label;
            row.kind = fo::op_name(r.kind);
            out.push_back(row);
        }
        Row& row = out[it->second];
        row.per_forward += 1;
        row.ms += ms;
        row.cost.add(r.cost);
    }
    return true;
}

void print_table(const std::string& phase, const std::vector<Row>& rows, const Ceilings& ce) {
    double total = 0;
    for (const auto& r : rows)
        if (r.phase == phase) total += r.ms;
    std::printf("\n%s: %.3f ms summed over ops timed alone\n", phase.c_str(), total);
    std::printf("  %-28s %-18s %4s %9s %6s %8s %8s %7s\n", "op", "kind", "n", "us", "%", "GB/s", "TFLOP/s", "%floor");
    for (const auto& r : rows) {
        if (r.phase != phase) continue;
        const double s = r.ms / 1e3;
        std::printf("  %-28s %-18s %4d %9.1f %5.1f%% %8.0f %8.1f %6.1f%%\n", r.name.c_str(), r.kind.c_str(),
                    r.per_forward, r.ms * 1e3, 100.0 * r.ms / total, r.cost.bytes / s / 1e9, r.cost.flops / s / 1e12,
                    100.0 * floor_ms(r.cost, ce) / r.ms);
    }
}

Timer make_timer(cudaStream_t s) {
    Timer t{};
    t.s = s;
    CK(cudaEventCreate(&t.a));
    CK(cudaEventCreate(&t.b));
    constexpr int kFlushK = 4096;
    const int rows = static_cast<int>(kFlushBytes / (kFlushK * sizeof(bf16)));
    auto* fw = dalloc<bf16>(kFlushBytes / sizeof(bf16));
    auto* fx = dalloc<bf16>(kFlushK);
    auto* fy = dalloc<bf16>(rows);
    CK(cudaMemset(fw, 0x3C, kFlushBytes));
    CK(cudaMemset(fx, 0x3C, kFlushK * sizeof(bf16)));
    t.flush = GemmBf16Params{fx, fw, fy, kFlushK, rows, 1, rows, kFlushK, 0, 0};
    return t;
}

// Attention section (--attn): the prefill attention kernels alone on the 9B shape (16 q heads,
// 4 KV heads, d = 256, gate on) at (chunk rows, position) = (16384, 0), (4096, 0), (2048, 14336):
// the mma.sync kernel as the launcher ran it before (its split choice) against the Hopper wgmma
// kernel, in the same process. (2048, 30720) is the last chunk of a 32k prefill. Then the short
// prompts of the 0.8B shape (8 q heads, 2 KV heads; 512-4096 rows from 0) and the 9B's 512 and 1024,
// where the launcher splits the keys (splits > 1) and so takes the mma.sync kernel; "1 split" is
// that kernel unsplit. Last, the MoE models' attention layers (35B-A3B, Qwen3-Next: 16 q heads,
// 2 KV heads) at 4096 and 16384 rows: at 4096 bench_ops put them at 352 TFLOP/s (H200,
// 2026-12-01; 439-463 after the thirty-ninth session's epilogue fix), two thirds of the 9B's rate
// at 16k. Then short chunks late in a long prompt (a capsule's appended turn, the tail of a
// chunked prefill): 512 / 1024 rows at 15-30k keys, where the split path's extra blocks meet the
// Hopper kernel's longer rows (the launcher's split rule was measured at position 0 only). Random
// bf16 inputs in [-2, 2) (never zeros), TFLOP/s from attn_prefill_cost (causal pairs only).
int bench_attention(const char* json_path, bool split_sweep) {
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    constexpr int D = kAttnHeadDim;
    const int shapes[][4] = {{16, 4, 16384, 0}, {16, 4, 4096, 0},  {16, 4, 2048, 14336}, {16, 4, 2048, 30720},
                             {16, 4, 1024, 0},  {16, 4, 512, 0},   {8, 2, 512, 0},        {8, 2, 1024, 0},
                             {8, 2, 2048, 0},   {8, 2, 4096, 0},   {16, 2, 4096, 0},      {16, 2, 16384, 0},
                             {16, 4, 512, 30720}, {8, 2, 512, 15360}, {8, 2, 1024, 15360}, {8, 2, 256, 0},
                             {8, 2, 256, 15360}, {8, 2, 128, 15360}};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    auto random_bf16 = [&](size_t n) {
        std::vector<bf16> h(n);
        for (auto& x : h) x = __float2bfloat16(u(rng));
        bf16* d = dalloc<bf16>(n);
        CK(cudaMemcpy(d, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
        return d;
    };
    struct Shape {
        int Hq, Hkv, rows, pos, splits;
        AttentionBf16Params p;
        double flops;
        std::vector<void*> bufs;
    };
    std::vector<Shape> all;
    for (const auto& sh : shapes) {
        Shape x{};
        x.Hq = sh[0];
        x.Hkv = sh[1];
        x.rows = sh[2];
        x.pos = sh[3];
        const int Hq = x.Hq, Hkv = x.Hkv;
        const int seq = x.pos + x.rows;
        const int64_t q_stride = 2 * Hq * D;  // per head [q | gate], as the engine's fused projection
        bf16* q = random_bf16(static_cast<size_t>(x.rows) * q_stride);
        bf16* k = random_bf16(static_cast<size_t>(seq) * Hkv * D);
        bf16* v = random_bf16(static_cast<size_t>(seq) * Hkv * D);
        bf16* o = dalloc<bf16>(static_cast<size_t>(x.rows) * Hq * D);
        StepCursor c{};
        c.pos = x.pos;
        c.n_tokens = x.rows;
        StepCursor* dc = dalloc<StepCursor>(1);
        CK(cudaMemcpy(dc, &c, sizeof(c), cudaMemcpyHostToDevice));
        AttentionBf16Params& p = x.p;
        p.q = q;
        p.gate = q + D;
        p.k_cache = k;
        p.v_cache = v;
        p.o = o;
        p.q_row_stride = q_stride;
        p.q_head_stride = 2 * D;
        p.Hq = Hq;
        p.Hkv = Hkv;
        p.head_dim = D;
        p.scale = 1.0f / std::sqrt(float(D));
        p.max_seq = seq;
        p.max_rows = x.rows;
        p.cursor = dc;
        x.splits = attn_prefill_splits(p);
        float* work = dalloc<float>(std::max<size_t>(1, attn_prefill_split_work_floats(p, kAttnPrefillMaxSplits)));
        p.work = work;
        x.flops = attn_prefill_cost(p, x.rows, x.pos).flops;
        x.bufs = {q, k, v, o, dc, work};
        all.push_back(x);
    }
    if (split_sweep) {  // --attn-splits: the mma.sync kernel at every split count beside the Hopper kernel
        std::printf("attention prefill split sweep, d %d, gate on [%s]; ms per launch (split path: the combine "
                    "launch included), the launcher's choice marked *\n", D, prop.name);
        const int counts[] = {1, 2, 3, 4, 6, 8, 12, 16};
        for (Shape& x : all) {
            if (x.rows > 4096 || (x.pos != 0 && x.rows > 1024)) continue;
            std::printf("  Hq %2d Hkv %d rows %5d pos %5d:", x.Hq, x.Hkv, x.rows, x.pos);
            for (const int n : counts) {
                const double ms = t.median_ms([&] { return attn_prefill_launch_splits(x.p, s, n); });
                std::printf(" %d%s %.4f", n, n == x.splits ? "*" : "", ms);
            }
            const double hop = t.median_ms([&] { return attn_prefill_hopper_launch(x.p, s); });  // the launcher's variant
            std::printf(" | hopper %.4f%s", hop, attn_prefill_takes_hopper(x.p) ? "*" : "");
            // The same variant with its keys split (the combine launch included); the launcher's
            // split count marked +.
            const int hs = attn_prefill_hopper_splits(x.p);
            for (const int n : {2, 3, 4, 8}) {
                const double ms = t.median_ms([&] { return attn_prefill_hopper_launch(x.p, s, 0, n); });
                std::printf(" h%d%s %.4f", n, n == hs ? "+" : "", ms);
            }
            std::printf("\n");
            std::fflush(stdout);
        }
        for (Shape& x : all)
            for (void* b : x.bufs) CK(cudaFree(b));
        return 0;
    }
    nlohmann::json j;
    j["device"] = prop.name;
    std::printf("attention prefill, d %d, gate on [%s]; old = mma.sync kernel with the launcher's "
                "split count (and unsplit), sync / ws = Hopper wgmma kernel, block-synchronous / warp-specialised\n",
                D, prop.name);
    std::printf("  %3s %3s %6s %6s %6s %9s %9s %9s %9s %9s %9s %7s\n", "Hq", "Hkv", "rows", "pos", "splits", "old ms",
                "old TF/s", "1 split", "sync ms", "sync TF/s", "sync2 ms", "speedup");
    for (Shape& x : all) {  // the warp-specialised variant separately below, last
        const double old_ms = t.median_ms([&] { return attn_prefill_launch_splits(x.p, s, x.splits); });
        const double one_ms = t.median_ms([&] { return attn_prefill_launch_splits(x.p, s, 1); });
        const double new_ms = t.median_ms([&] { return attn_prefill_hopper_launch(x.p, s, 1); });
        const double again_ms = t.median_ms([&] { return attn_prefill_hopper_launch(x.p, s, 1); });  // spread
        std::printf("  %3d %3d %6d %6d %6d %9.3f %9.1f %9.3f %9.3f %9.1f %9.3f %6.2fx\n", x.Hq, x.Hkv, x.rows, x.pos,
                    x.splits, old_ms, x.flops / (old_ms * 1e9), one_ms, new_ms, x.flops / (new_ms * 1e9), again_ms,
                    old_ms / new_ms);
        std::fflush(stdout);
        j["attention"].push_back({{"rows", x.rows}, {"pos", x.pos}, {"Hq", x.Hq}, {"Hkv", x.Hkv}, {"flops", x.flops},
                                  {"old_splits", x.splits}, {"old_ms", old_ms}, {"unsplit_ms", one_ms},
                                  {"hopper_sync_ms", new_ms}, {"hopper_sync_again_ms", again_ms}});
    }
    auto write = [&] {
        if (FILE* f = std::fopen(json_path, "w")) {
            std::fputs(j.dump(1).c_str(), f);
            std::fclose(f);
        }
    };
    write();
    // 4-9: the TMA producer (6, 7 with three K stages, 8, 9 in clusters of two with K/V multicast);
    // 5 twice (its spread); each a separate pass, so a hang or a failure in one leaves the others'
    // numbers in the JSON.
    const char* names[] = {"", "", "", "", "tma ws", "tma ping-pong", "tma ws k3",
                           "tma ping-pong k3", "tma ws cluster", "tma pp cluster", "tma ping-pong again"};
    const char* keys[] = {"", "", "", "", "hopper_tma_ws_ms", "hopper_tma_pingpong_ms",
                          "hopper_tma_ws_k3_ms", "hopper_tma_pingpong_k3_ms", "hopper_tma_ws_cluster_ms",
                          "hopper_tma_pingpong_cluster_ms", "hopper_tma_pingpong_again_ms"};
    for (const int pass : {4, 5, 6, 7, 10, 8, 9}) {
        const int variant = pass == 10 ? 5 : pass;
        const char* name = names[pass];
        for (size_t i = 0; i < all.size(); ++i) {
            Shape& x = all[i];
            const double ms = t.median_ms([&] { return attn_prefill_hopper_launch(x.p, s, variant); });
            std::printf("  %3d %6d %6d %16s %9.3f ms %9.1f TF/s\n", x.Hq, x.rows, x.pos, name, ms, x.flops / (ms * 1e9));
            std::fflush(stdout);
            j["attention"][i][keys[pass]] = ms;
        }
        write();
    }
    for (Shape& x : all)
        for (void* b : x.bufs) CK(cudaFree(b));
    return 0;
}

// Conv section (--conv): the GDN conv1d + SiLU + q/k l2norm of one prefill chunk (4 taps, 16 q + 16
// k heads of 128 normalised, input a view into the in_proj row: qkv | z | b | a), L2 flushed, at
// the 9B shape (8192 channels of a 12352-wide row, 2048 rows) and the 0.8B (6144 of 8224; 4096 and
// 16384 rows), every kernel in the same process, twice (the spread), beside a device-to-device copy
// of the same byte count. GB/s over input read once + output written once. FROST_BENCH_CONV=i: shape
// i only (0, 1, 2; e.g. under ncu).
// H100 (2026-11-25, one call, two runs; us per launch, 9B 2048 rows / 0.8B 4096 / 0.8B 16384): copy
// 21.1 / 31.4 / 130.7 (3.1-3.2 TB/s); per-channel loop 70.6-71.3 / 107.2 / 378-385; round-1 vector
// kernel 42.8-43.0 / 60.7-60.8 / 200.6-204.0; row pairs (the default) 38.0-38.5 / 55.5-55.7 /
// 191.3-193.4 (1.77 / 1.81 / 2.1 TB/s); numbers per variant in lm_conv1d.cu.
int bench_conv() {
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    struct Shape {
        const char* name;
        int rows, C, W;
    };
    const Shape shapes[] = {{"9B", 2048, 8192, 12352}, {"0.8B", 4096, 6144, 8224}, {"0.8B", 16384, 6144, 8224}};
    struct Variant {
        const char* name;
        int loop, kernel, tile_rows;
    };
    const Variant variants[] = {{"loop (per channel)", 1, 0, 0},          {"v1 vector, 16 rows", 0, 1, 16},
                                {"one launch, 16 rows", 0, 2, 16},         {"scatter l2, 16 rows", 0, 3, 16},
                                {"scatter l2, 32 rows", 0, 3, 32},         {"scatter l2, 16 rows, 80 regs", 0, 3, -16},
                                {"row pairs, 16 rows (default)", 0, 4, 16}, {"row pairs, 32 rows", 0, 4, 32}};
    const char* only = std::getenv("FROST_BENCH_CONV");
    constexpr int K = 4;
    for (int si = 0; si < 3; ++si) {
        if (only && *only && std::atoi(only) != si) continue;
        const Shape& sh = shapes[si];
        const int rows = sh.rows, C = sh.C, W = sh.W;
        std::mt19937 rng(11);
        std::uniform_real_distribution<float> u(-2.0f, 2.0f);
        std::vector<bf16> hx(static_cast<size_t>(rows + 1) * W);
        for (auto& v : hx) v = __float2bfloat16(u(rng));
        std::vector<float> hw(static_cast<size_t>(C) * K);
        for (auto& v : hw) v = 0.3f * u(rng);
        bf16* x = dalloc<bf16>(hx.size());
        CK(cudaMemcpy(x, hx.data(), hx.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        float* w = dalloc<float>(hw.size());
        CK(cudaMemcpy(w, hw.data(), hw.size() * sizeof(float), cudaMemcpyHostToDevice));
        bf16* st = dalloc<bf16>(static_cast<size_t>(C) * (K - 1));
        CK(cudaMemset(st, 0, static_cast<size_t>(C) * (K - 1) * sizeof(bf16)));
        bf16* y = dalloc<bf16>(static_cast<size_t>(rows) * C);
        int32_t* n = dalloc<int32_t>(1);
        CK(cudaMemcpy(n, &rows, sizeof(rows), cudaMemcpyHostToDevice));
        const double bytes = 2.0 * rows * C * sizeof(bf16);
        std::printf("conv1d+silu+l2norm, %s shape: %d rows x %d channels (row %d), K %d\n", sh.name, rows, C, W, K);
        for (int rep = 0; rep < 2; ++rep) {
            const double cms = t.median_ms([&] {
                return cudaMemcpyAsync(y, x, static_cast<size_t>(rows) * C * sizeof(bf16), cudaMemcpyDeviceToDevice, s);
            });
            std::printf("  %-28s %8.1f us %8.1f GB/s\n", "copy, same bytes", cms * 1e3, bytes / (cms * 1e6));
            for (const Variant& v : variants) {
                Conv1dBf16Params p{x, w, st, y, W, C, K, 128, 32, 16, 1e-6f, 0.0625f, rows, n};
                p.prefill_loop = v.loop;
                p.prefill_kernel = v.kernel;
                p.tile_rows = v.tile_rows;
                const double ms = t.median_ms([&] { return conv1d_launch(p, s); });
                std::printf("  %-28s %8.1f us %8.1f GB/s\n", v.name, ms * 1e3, bytes / (ms * 1e6));
                std::fflush(stdout);
            }
        }
        for (void* b : std::initializer_list<void*>{x, w, st, y, n}) CK(cudaFree(b));
    }
    return 0;
}

// GDN section (--gdn [Hv...]): the chunked gated delta rule alone at 16 key heads and the given
// value-head counts (default 16 and 32: the 0.8B and 9B shapes; dk = dv = 128) at 2048, 4096 and
// 16384 rows, per launch (prep, state pass, both) and per path, in one process: median µs, L2
// flushed before each timed launch (FROST_BENCH_GDN_ROWS=T: that length only, e.g. under ncu). Inputs: q, k of norm ~1 (as after the l2norm), β in
// (0.02, 0.98), g in (-0.05, -0.001).
// H100 (2026-11-24, one run, 9B shape): default 57.1 + 74.6 µs (prep + state) at 2048 rows, 383.5 +
// 554.4 at 16384; v1 (chunk_v1 = 1) 56.3 + 76.8 / 378.6 + 569.1; the 16-warp state pass 82.6 / 622.9.
// H100 (2026-11-25, one call, two runs each; µs of the state pass): 16 value heads, 4096 / 16384
// rows: 32-column 146.3-146.4 / 544.0-569.0, 16-column with the producer warp (the default there)
// 114.6-115.1 / 453.9-457.2; prep 58-59 / 193-198. 32 value heads: 32-column (the default) 139.4-143.0
// / 537.1-569.0.
// H200 (2026-11-30, one call, µs of the state pass; prep unchanged): 9B shape 4096 / 16384 rows:
// mma.sync default 142.3-143.3 / 548.2, wgmma 32-column (the default on sm_90a) 84.5-85.3 / 321.6;
// 0.8B shape (16 heads) 1024 / 4096 rows: mma.sync 27.9 / 93.6, wgmma 16-column 20.9 / 65.5.
// H200 (2026-12-01, the wgmma pass's chain shortened, lm_gdn_wgmma.cu): 16 / 32 heads at 1024 rows
// 19.9 / 23.8, 4096 62.0 / 75.2, 16384 228 / 279 (FROST_BENCH_GDN_ROWS=T for 1024).
int bench_gdn(std::vector<int> heads) {
    if (heads.empty()) heads = {16, 32};
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    constexpr int Hk = 16, D = 128, Tmax = 16384;
    for (int h : heads)
        if (h < Hk || h % Hk) return std::fprintf(stderr, "--gdn: value heads must be a multiple of %d\n", Hk), 2;
    for (int Hv : heads) {
        const int64_t W = 2 * Hk * D + Hv * D;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<bf16> hqkv(static_cast<size_t>(Tmax) * W);
        for (size_t i = 0; i < hqkv.size(); ++i)
            hqkv[i] = __float2bfloat16(i % W < 2 * Hk * D ? 0.153f * u(rng) : u(rng));  // |q|, |k| ~ 1
        std::vector<float> hbeta(static_cast<size_t>(Tmax) * Hv), hg(hbeta.size()),
            hs(static_cast<size_t>(Hv) * D * D);
        for (auto& v : hbeta) v = 0.5f + 0.48f * u(rng);
        for (auto& v : hg) v = -0.0255f + 0.0245f * u(rng);
        for (auto& v : hs) v = 0.2f * u(rng);
        GdnBf16Params p{};
        p.Hk = Hk;
        p.Hv = Hv;
        p.dk = D;
        p.dv = D;
        p.chunk = kGdnChunk;
        p.max_rows = Tmax;
        bf16* qkv = dalloc<bf16>(hqkv.size());
        CK(cudaMemcpy(qkv, hqkv.data(), hqkv.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        float* beta = dalloc<float>(hbeta.size());
        float* g = dalloc<float>(hg.size());
        float* state = dalloc<float>(hs.size());
        CK(cudaMemcpy(beta, hbeta.data(), hbeta.size() * sizeof(float), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g, hg.data(), hg.size() * sizeof(float), cudaMemcpyHostToDevice));
        bf16* o = dalloc<bf16>(static_cast<size_t>(Tmax) * Hv * D);
        float* work = dalloc<float>(gdn_chunk_work_floats(p));
        StepCursor* cursor = dalloc<StepCursor>(1);
        p.q = qkv;
        p.k = qkv + Hk * D;
        p.v = qkv + 2 * Hk * D;
        p.beta = beta;
        p.g = g;
        p.state = state;
        p.o = o;
        p.work = work;
        p.qkv_row_stride = W;
        p.cursor = cursor;
        struct Path {
            const char* name;
            int tf32, v1, slice, producer, wgmma;
        };
        const Path paths[] = {{"bf16 (default)", 0, 0, 0, 0, 0},
                              {"bf16 wgmma 16-col", 0, 0, 16, 0, 1},
                              {"bf16 wgmma 32-col", 0, 0, 32, 0, 1},
                              {"bf16 mma.sync default", 0, 0, 0, 0, -1},
                              {"bf16 32-col slices", 0, 0, 32, 0, -1},
                              {"bf16 16-col, compute copies", 0, 0, 16, -1, -1},
                              {"bf16 16-col + producer", 0, 0, 16, 0, -1},
                              {"bf16 v1 (before round 2)", 0, 1, 0, 0, -1},
                              {"tf32", 1, 0, 0, 0, -1}};
        std::printf("gdn chunked, Hk %d, Hv %d, d %d, us per launch (median, L2 flushed)\n", Hk, Hv, D);
        std::printf("  %-26s %6s %9s %9s %9s\n", "path", "T", "prep", "state", "all");
        std::vector<int> lengths = {2048, 4096, 16384};
        if (const char* e = std::getenv("FROST_BENCH_GDN_ROWS")) lengths = {std::clamp(std::atoi(e), 64, Tmax)};
        for (int T : lengths) {
            StepCursor c{};
            c.pos = 0;
            c.n_tokens = T;
            CK(cudaMemcpy(cursor, &c, sizeof(c), cudaMemcpyHostToDevice));
            p.max_rows = T;
            for (int rep = 0; rep < 2; ++rep)
                for (const Path& path : paths) {
                    if (path.tf32 && (T > 4096 || rep)) continue;  // the old path, for scale only
                    p.chunk_tf32 = path.tf32;
                    p.chunk_v1 = path.v1;
                    p.chunk_slice = path.slice;
                    p.chunk_producer = path.producer;
                    p.chunk_wgmma = path.wgmma;
                    CK(cudaMemcpy(state, hs.data(), hs.size() * sizeof(float), cudaMemcpyHostToDevice));
                    CK(gdn_chunk_launch(p, s));  // fills the scratch the stage timings read
                    const double prep = t.median_ms([&] { return gdn_chunk_launch_stages(p, s, kGdnStagePrep); });
                    const double rest = t.median_ms(
                        [&] { return gdn_chunk_launch_stages(p, s, kGdnStageAll & ~kGdnStagePrep); });
                    const double all = t.median_ms([&] { return gdn_chunk_launch(p, s); });
                    std::printf("  %-26s %6d %9.1f %9.1f %9.1f\n", path.name, T, prep * 1e3, rest * 1e3, all * 1e3);
                }
        }
        for (void* b : std::initializer_list<void*>{qkv, beta, g, state, o, work, cursor}) CK(cudaFree(b));
    }
    return 0;
}

// Uniform [-1, 1) bf16 from a hash of the index (host; the bench has no kernels of its own).
void fill_random_bf16(bf16* dst, size_t n, uint32_t seed) {
    std::vector<bf16> h(n);
    for (size_t i = 0; i < n; ++i) {
        uint32_t v = uint32_t(i) * 2654435761u ^ seed;
        v ^= v >> 15;
        v *= 2246822519u;
        v ^= v >> 13;
        h[i] = __float2bfloat16(float(v & 0xFFFF) / 32768.0f - 1.0f);
    }
    CK(cudaMemcpy(dst, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
}

// The 9B-style (or, with model "0.8b", the 0.8B-style) prefill GEMMs at `rows` rows with random
// operands (constant ones draw less power and clock higher): the heuristic's first few bf16
// algorithms, TFLOP/s, then which of them the engine's plan takes (gemm_pick_rank) and the
// heuristic's wavesCount of the first few.
int bench_gemm(int rows, const std::string& model) {
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    struct Shape { const char* name; int N, K; };
    const std::vector<Shape> shapes =
        model == "0.8b" ? std::vector<Shape>{{"lin in_proj", 8224, 1024}, {"mlp gate|up", 7168, 1024},
                                             {"mlp down", 1024, 3584},    {"lin out_proj", 1024, 2048},
                                             {"full qkv_proj", 5120, 1024}, {"full o_proj", 1024, 2048}}
                        : std::vector<Shape>{{"lin in_proj", 12352, 4096}, {"mlp gate|up", 24576, 4096},
                                             {"mlp down", 4096, 12288},    {"lin out_proj", 4096, 4096},
                                             {"full qkv_proj", 10240, 4096}, {"lin in_proj b|a", 64, 4096}};
    constexpr int kRanks = 12;
    uint8_t* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
    std::printf("bf16 GEMMs at M = %d rows, random operands: TFLOP/s at heuristic rank 0..%d\n", rows, kRanks - 1);
    for (const Shape& sh : shapes) {
        const double flops = 2.0 * rows * sh.N * double(sh.K);
        bf16* x = dalloc<bf16>(size_t(rows) * sh.K);
        bf16* w = dalloc<bf16>(size_t(sh.N) * sh.K);
        bf16* y = dalloc<bf16>(size_t(rows) * sh.N);
        fill_random_bf16(x, size_t(rows) * sh.K, 1u);
        fill_random_bf16(w, size_t(sh.N) * sh.K, 2u);
        std::printf("  %-16s N %5d K %5d:", sh.name, sh.N, sh.K);
        GemmBf16Params b{x, w, y, sh.K, sh.N, rows, sh.N, sh.K, 0, 0};
        std::string waves;
        for (int r = 0; r < kRanks; ++r) {
            GemmPlan* bp = nullptr;
            if (gemm_plan_create(lt, b, &bp, nullptr, r) != cudaSuccess) {
                std::printf("      -");
                continue;
            }
            const double ms = t.median_ms([&] { return gemm_launch(bp, b, s); });
            std::printf(" %6.0f", flops / (ms * 1e9));
            if (r < kGemmPickCandidates) waves += " " + std::to_string(gemm_plan_info(bp).waves).substr(0, 5);
            gemm_plan_destroy(bp);
        }
        GemmPlan* pick = nullptr;
        CK(gemm_plan_create(lt, b, &pick));  // the engine's plan
        std::printf("  | engine: rank %d; waves of ranks 0-%d:%s\n", gemm_plan_info(pick).rank, kGemmPickCandidates - 1,
                    waves.c_str());
        gemm_plan_destroy(pick);
        for (void* p : std::initializer_list<void*>{x, w, y}) CK(cudaFree(p));
    }
    gemm_lt_destroy(lt);
    CK(cudaFree(ws));
    return 0;
}

// The MLP's gate|up + SwiGLU at `rows` rows (9B or 0.8B shape, random operands): cuBLASLt's
// projection (the engine's plan) then the SwiGLU kernel, against the fused GEMM
// (lm_gemm_swiglu.h) at each column tile and at the launcher's pick; TFLOP/s over 4 M F K, and
// the fused launch's time over the unfused pair's. L2 flushed before each launch (pair).
int bench_swiglu(int rows, const std::string& model) {
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    const int F = model == "0.8b" ? 3584 : 12288, K = model == "0.8b" ? 1024 : 4096;
    const double flops = 4.0 * rows * F * double(K);
    bf16* x = dalloc<bf16>(size_t(rows) * K);
    bf16* w = dalloc<bf16>(size_t(2) * F * K);
    bf16* proj = dalloc<bf16>(size_t(rows) * 2 * F);
    bf16* y = dalloc<bf16>(size_t(rows) * F);
    fill_random_bf16(x, size_t(rows) * K, 1u);
    fill_random_bf16(w, size_t(2) * F * K, 2u);
    uint8_t* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
    const GemmBf16Params g{x, w, proj, K, 2 * F, rows, 2 * F, K, 0, 0};
    GemmPlan* plan = nullptr;
    CK(gemm_plan_create(lt, g, &plan));
    const SwigluBf16Params sw{proj, y, F, rows, nullptr};
    const double gemm_ms = t.median_ms([&] { return gemm_launch(plan, g, s); });
    const double pair_ms = t.median_ms([&] {
        const cudaError_t e = gemm_launch(plan, g, s);
        return e != cudaSuccess ? e : swiglu_launch(sw, s);
    });
    std::printf("gate|up + SwiGLU, %s shape, M %d F %d K %d (TFLOP/s over 4 M F K):\n", model.c_str(), rows, F, K);
    std::printf("  cuBLASLt gate|up alone     %8.1f us %6.0f TFLOP/s\n", gemm_ms * 1e3, flops / (gemm_ms * 1e9));
    std::printf("  cuBLASLt + SwiGLU kernel   %8.1f us %6.0f TFLOP/s\n", pair_ms * 1e3, flops / (pair_ms * 1e9));
    const GemmBf16Params f{x, w, y, K, F, rows, 2 * F, K, 0, 0};
    if (!gemm_swiglu_supported(f)) {
        std::printf("  fused: not on this device\n");
    } else {
        for (int tile : {112, 128, 0}) {
            const double ms = t.median_ms([&] { return gemm_swiglu_launch(f, s, tile); });
            std::printf("  fused, tile %-4s           %8.1f us %6.0f TFLOP/s  %.3fx the pair\n",
                        tile ? std::to_string(tile).c_str() : "pick", ms * 1e3, flops / (ms * 1e9), ms / pair_ms);
        }
    }
    gemm_plan_destroy(plan);
    gemm_lt_destroy(lt);
    for (void* p : std::initializer_list<void*>{x, w, proj, y, ws}) CK(cudaFree(p));
    return 0;
}

// One 9B-style GEMM (the MLP gate|up, rows x 24576 x 4096, random operands) in two regimes: the
// bursts bench_gemm times (one launch between an L2 flush and an event sync, the chip idle in
// between) and back to back for `seconds` (what a long prefill asks of the chip), TFLOP/s per
// window of 20 launches. Run it beside `nvidia-smi --query-gpu=clocks.sm,power.draw` to see whether
// the sustained rate falls with the clock (the power limit) rather than with the kernel.
int bench_gemm_sustained(int rows, double seconds) {
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    constexpr int N = 24576, K = 4096, kWindow = 20;
    const double flops = 2.0 * rows * N * double(K);
    bf16* x = dalloc<bf16>(size_t(rows) * K);
    bf16* w = dalloc<bf16>(size_t(N) * K);
    bf16* y = dalloc<bf16>(size_t(rows) * N);
    fill_random_bf16(x, size_t(rows) * K, 1u);
    fill_random_bf16(w, size_t(N) * K, 2u);
    uint8_t* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
    GemmBf16Params b{x, w, y, K, N, rows, N, K, 0, 0};
    GemmPlan* plan = nullptr;
    CK(gemm_plan_create(lt, b, &plan));
    const auto burst = [&] { return flops / (t.median_ms([&] { return gemm_launch(plan, b, s); }) * 1e9); };
    std::printf("GEMM %d x %d x %d, random operands: bursts %.0f TFLOP/s\n", rows, N, K, burst());
    std::vector<cudaEvent_t> ev;
    std::vector<double> rate;
    cudaEvent_t e0;
    CK(cudaEventCreate(&e0));
    CK(cudaEventRecord(e0, s));
    ev.push_back(e0);
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
        for (int i = 0; i < kWindow; ++i) CK(gemm_launch(plan, b, s));
        cudaEvent_t e;
        CK(cudaEventCreate(&e));
        CK(cudaEventRecord(e, s));
        ev.push_back(e);
        if (ev.size() > 4) CK(cudaEventSynchronize(ev[ev.size() - 4]));  // stay a few windows ahead
    }
    CK(cudaStreamSynchronize(s));
    for (size_t i = 1; i < ev.size(); ++i) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[i - 1], ev[i]));
        rate.push_back(kWindow * flops / (ms * 1e9));
    }
    std::vector<double> sorted = rate;
    std::sort(sorted.begin(), sorted.end());
    std::printf("back to back for %.1f s (%zu windows of %d): first %.0f, median %.0f, last %.0f TFLOP/s\n", seconds,
                rate.size(), kWindow, rate.front(), sorted[sorted.size() / 2], rate.back());
    std::printf("  per window:");
    for (size_t i = 0; i < rate.size(); i += std::max<size_t>(1, rate.size() / 24)) std::printf(" %.0f", rate[i]);
    std::printf("\nbursts again: %.0f TFLOP/s\n", burst());
    for (cudaEvent_t e : ev) CK(cudaEventDestroy(e));
    gemm_plan_destroy(plan);
    gemm_lt_destroy(lt);
    for (void* p : std::initializer_list<void*>{x, w, y, ws}) CK(cudaFree(p));
    return 0;
}

// The 9B-style prefill GEMMs at M rows (4096 unless given), random operands: bf16 cuBLASLt against the FP8 block-scaled GEMM
// (W8A8: activation quantization + GEMM, the ops layer's sequence), each of the heuristic's first
// few FP8 algorithms (rank 0 is what the engine took before our kernel), then the GEMMs alone:
// cuBLASLt rank 0 and our wgmma kernel's pipeline variants (lm_gemm_fp8_wgmma.cu; 128x128 weight
// blocks only), with the relative L2 difference of our kernel's output from cuBLASLt's.
// TFLOP/s over the GEMM's 2MNK.
int bench_fp8(int M) {
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    Timer t = make_timer(s);
    // residual: the model's epilogue (y += x Wᵀ into the bf16 residual stream, qwen35/forward.cpp).
    // grid: per-row scales whose first `grid` rows also come as a 128x128 grid (the split plan,
    // GemmFp8Params::grid_rows: the engine's in_proj since 2026-11-25).
    struct Shape { const char* name; int N, K, block_n, residual, grid = 0; };
    const Shape shapes[] = {{"lin in_proj (per-row scales)", 12352, 4096, 1, 0},
                            {"lin in_proj (split: grid|rows)", 12352, 4096, 1, 0, 12288},
                            {"lin in_proj qkv|z (grid only)", 12288, 4096, 128, 0},
                            {"lin in_proj b|a (rows only)", 64, 4096, 1, 0}, {"mlp gate|up", 24576, 4096, 128, 0},
                            {"mlp down (residual)", 4096, 12288, 128, 1}, {"lin out_proj (residual)", 4096, 4096, 128, 1},
                            {"full qkv_proj", 10240, 4096, 128, 0}, {"full o_proj (residual)", 4096, 4096, 128, 1}};
    constexpr int kRanks = 6, kVariants = kFp8WgmmaVariants;
    uint8_t* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
    std::printf("GEMMs at M = %d rows: TFLOP/s (bf16 | fp8 act-quant+gemm at heuristic rank 0..%d | act-quant us |"
                " gemm alone: cuBLASLt rank 0, wgmma variants 0..%d | wgmma vs cuBLASLt rel L2)\n",
                M, kRanks - 1, kVariants - 1);
    for (const Shape& sh : shapes) {
        const double flops = 2.0 * M * sh.N * double(sh.K);
        bf16* x = dalloc<bf16>(size_t(M) * sh.K);
        bf16* w = dalloc<bf16>(size_t(sh.N) * sh.K);
        bf16* y = dalloc<bf16>(size_t(M) * sh.N);
        bf16* y2 = dalloc<bf16>(size_t(M) * sh.N);
        fill_random_bf16(x, size_t(M) * sh.K, 1u);
        fill_random_bf16(w, size_t(sh.N) * sh.K, 2u);
        uint8_t* wq = dalloc<uint8_t>(size_t(sh.N) * sh.K);
        uint8_t* xq = dalloc<uint8_t>(size_t(M) * sh.K);
        {
            std::vector<uint8_t> h(size_t(sh.N) * sh.K);
            uint32_t v = 12345u;
            for (auto& b : h) {
                v = v * 1664525u + 1013904223u;
                b = uint8_t(v >> 24) & 0xF7u;  // clears bit 3: never the NaN codes 0x7F / 0xFF
            }
            CK(cudaMemcpy(wq, h.data(), h.size(), cudaMemcpyHostToDevice));
        }
        const size_t wsn = sh.block_n == 1 ? size_t(sh.N) * (sh.K / 128) : size_t((sh.N + 127) / 128) * (sh.K / 128);
        float* wsc = dalloc<float>(std::max(wsn, act_scale_floats(sh.N, sh.K)));
        float* wsr = dalloc<float>(act_scale_floats(sh.N, sh.K));
        float* xs = dalloc<float>(act_scale_floats(M, sh.K));
        {
            std::vector<float> h(wsn);
            for (size_t i = 0; i < wsn; ++i) h[i] = (0.5f + float(i % 7) / 4.0f) / 448.0f;  // distinct block scales
            CK(cudaMemcpy(wsc, h.data(), wsn * sizeof(float), cudaMemcpyHostToDevice));
        }
        std::printf("  %-30s N %5d K %5d:", sh.name, sh.N, sh.K);
        GemmBf16Params b{x, w, y, sh.K, sh.N, M, sh.N, sh.K, 0, 0};
        GemmPlan* bp = nullptr;
        if (gemm_plan_create(lt, b, &bp) == cudaSuccess) {
            const double ms = t.median_ms([&] { return gemm_launch(bp, b, s); });
            std::printf(" bf16 %6.0f |", flops / (ms * 1e9));
            gemm_plan_destroy(bp);
        }
        GemmFp8Params f{};
        f.xq = xq; f.x_scale = xs; f.w = wq; f.w_scale = sh.block_n == 1 ? wsr : wsc; f.y = y; f.ldy = sh.N;
        f.M = M; f.N = sh.N; f.K = sh.K; f.w_block_n = sh.block_n; f.impl = kFp8ImplCublasLt;
        f.accumulate = sh.residual;
        f.grid_rows = sh.grid;
        f.w_grid_scale = sh.grid ? wsc : nullptr;  // its first grid / 128 rows of distinct scales
        // The per-row scales the ops layer lays out per call: rows from the plan's grid rows on.
        const auto rows_layout = [&](GemmFp8Plan* fp) {
            const int G = gemm_fp8_plan_grid_rows(fp);
            return w_scale_rows_launch(wsc + size_t(G) * (sh.K / 128), sh.N - G, sh.K, wsr, s);
        };
        GemmFp8Plan* lt0 = nullptr;
        for (int r = 0; r < kRanks; ++r) {
            GemmFp8Plan* fp = nullptr;
            if (gemm_fp8_plan_create(lt, f, &fp, nullptr, r) != cudaSuccess) {
                std::printf("      -");
                continue;
            }
            const double ms = t.median_ms([&] {
                if (sh.block_n == 1) CK(rows_layout(fp));
                CK(act_quant_fp8_launch(x, sh.K, M, sh.K, xq, xs, s));
                return gemm_fp8_launch(fp, f, s);
            });
            std::printf(" %6.0f", flops / (ms * 1e9));
            if (r == 0) lt0 = fp; else gemm_fp8_plan_destroy(fp);
        }
        const double q_ms = t.median_ms([&] { return act_quant_fp8_launch(x, sh.K, M, sh.K, xq, xs, s); });
        std::printf(" | %5.0f |", q_ms * 1e3);
        if (sh.block_n == 1 && lt0) CK(rows_layout(lt0));
        if (lt0) {
            const double ms = t.median_ms([&] { return gemm_fp8_launch(lt0, f, s); });
            std::printf(" %6.0f", flops / (ms * 1e9));
            gemm_fp8_plan_destroy(lt0);
        } else {
            std::printf("      -");
        }
        GemmFp8Params g = f;
        g.y = y2;
        for (int v = 0; v < kVariants; ++v) {
            if (!gemm_fp8_wgmma_supported(g)) {
                std::printf("      -");
                continue;
            }
            const double ms = t.median_ms([&] { return gemm_fp8_wgmma_launch(g, s, v); });
            std::printf(" %6.0f", flops / (ms * 1e9));
        }
        if (lt0 && gemm_fp8_wgmma_supported(g)) {
            // One fresh launch each, from the same residual (zeros), for the comparison.
            CK(cudaMemsetAsync(y, 0, size_t(M) * sh.N * 2, s));
            CK(cudaMemsetAsync(y2, 0, size_t(M) * sh.N * 2, s));
            GemmFp8Plan* cmp = nullptr;
            CK(gemm_fp8_plan_create(lt, f, &cmp));
            CK(gemm_fp8_launch(cmp, f, s));
            CK(gemm_fp8_wgmma_launch(g, s, 0));
            CK(cudaStreamSynchronize(s));
            gemm_fp8_plan_destroy(cmp);
            std::vector<uint16_t> a(size_t(M) * sh.N), c(a.size());
            CK(cudaMemcpy(a.data(), y, a.size() * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(c.data(), y2, c.size() * 2, cudaMemcpyDeviceToHost));
            const auto f32 = [](uint16_t h) { uint32_t u = uint32_t(h) << 16; float v; std::memcpy(&v, &u, 4); return double(v); };
            double num = 0, den = 0;
            for (size_t i = 0; i < a.size(); ++i) {
                const double d = f32(c[i]) - f32(a[i]);
                num += d * d;
                den += f32(a[i]) * f32(a[i]);
            }
            std::printf(" | %.2g (rms %.3g)", std::sqrt(num / std::max(den, 1e-30)), std::sqrt(den / double(a.size())));
        }
        std::printf("\n");
        for (void* p : std::initializer_list<void*>{x, w, y, y2, wq, xq, wsc, wsr, xs}) CK(cudaFree(p));
    }
    gemm_lt_destroy(lt);
    CK(cudaFree(ws));
    return 0;
}

// One launch each of cuBLASLt's FP8 GEMM and the named wgmma variants on one M 4096 shape (bf16
// out, residual), inside cudaProfilerStart/Stop after a warm-up, for
// `ncu --profile-from-start off`: the profiler sees exactly those kernels.
int bench_fp8_profile(int N, int Kd, const std::vector<int>& variants) {
    constexpr int M = 4096;
    cudaStream_t s = nullptr;
    CK(cudaStreamCreate(&s));
    uint8_t* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
    bf16* x = dalloc<bf16>(size_t(M) * Kd);
    fill_random_bf16(x, size_t(M) * Kd, 1u);
    uint8_t* xq = dalloc<uint8_t>(size_t(M) * Kd);
    uint8_t* wq = dalloc<uint8_t>(size_t(N) * Kd);
    {
        std::vector<uint8_t> h(size_t(N) * Kd);
        uint32_t v = 12345u;
        for (auto& b : h) {
            v = v * 1664525u + 1013904223u;
            b = uint8_t(v >> 24) & 0xF7u;
        }
        CK(cudaMemcpy(wq, h.data(), h.size(), cudaMemcpyHostToDevice));
    }
    const size_t wsn = size_t((N + 127) / 128) * (Kd / 128);
    float* wsc = dalloc<float>(wsn);
    {
        std::vector<float> h(wsn);
        for (size_t i = 0; i < wsn; ++i) h[i] = (0.5f + float(i % 7) / 4.0f) / 448.0f;
        CK(cudaMemcpy(wsc, h.data(), wsn * sizeof(float), cudaMemcpyHostToDevice));
    }
    float* xs = dalloc<float>(act_scale_floats(M, Kd));
    bf16* y = dalloc<bf16>(size_t(M) * N);
    CK(cudaMemset(y, 0, size_t(M) * N * 2));
    CK(act_quant_fp8_launch(x, Kd, M, Kd, xq, xs, s));
    GemmFp8Params f{};
    f.xq = xq; f.x_scale = xs; f.w = wq; f.w_scale = wsc; f.y = y; f.ldy = N;
    f.M = M; f.N = N; f.K = Kd; f.accumulate = 1; f.impl = kFp8ImplCublasLt;
    GemmFp8Plan* plan = nullptr;
    CK(gemm_fp8_plan_create(lt, f, &plan));
    const auto all = [&] {
        CK(gemm_fp8_launch(plan, f, s));
        for (int v : variants) CK(gemm_fp8_wgmma_launch(f, s, v));
    };
    all();
    CK(cudaStreamSynchronize(s));
    CK(cudaProfilerStart());
    all();
    CK(cudaStreamSynchronize(s));
    CK(cudaProfilerStop());
    gemm_fp8_plan_destroy(plan);
    gemm_lt_destroy(lt);
    for (void* q : std::initializer_list<void*>{x, xq, wq, wsc, xs, y, ws}) CK(cudaFree(q));
    std::printf("profiled: cuBLASLt + %zu wgmma variants at M %d N %d K %d\n", variants.size(), M, N, Kd);
    return 0;
}

// --launch-chain: what a launch boundary costs inside a replayed graph (lm_launch_probe.h): a chain
// of kernels per grid shape and trigger order, captured once, replayed; µs per kernel is the
// median replay over the chain length. Compare with `frost bench graph-ops`, where a small op left
// out of the decode step saves a few µs: this is the part of it no faster kernel removes. Then
// the same chain with each kernel streaming a matrix-sized read before its wait, as a decode GEMV
// streams its weights: µs per kernel against the bytes' floor at this process's copy rate (as the
// engine bench's floor: a copy moves its bytes twice), i.e. what one launch per matrix can reach.
// "%.2f" of v, or "-" for a negative v (a shape that was not run).
std::string us_or_dash(double v) {
    char b[32];
    if (v < 0) return "-";
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

double chain_us(Timer& t, const LaunchChainProbe& p) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(t.s, cudaStreamCaptureModeThreadLocal));
    CK(launch_chain_probe(p, t.s));
    CK(cudaStreamEndCapture(t.s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    const double ms = t.median_ms([&] { return cudaGraphLaunch(ge, t.s); }, false);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return 1e3 * ms / p.kernels;
}

// The same steps as phases of one persistent launch (LaunchChainProbe::persistent, µs per phase),
// or a negative value where its grid cannot be resident at once. The barrier's counter is zeroed
// first: a grid of another size may have left it at a count that is not a multiple of this one.
double persistent_us(Timer& t, LaunchChainProbe p, unsigned long long* sync) {
    p.persistent = 1;
    p.sync = sync;
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (p.blocks > chain_probe_blocks_per_sm(p) * sms) return -1.0;
    CK(cudaMemset(sync, 0, sizeof(unsigned long long)));
    CK(cudaDeviceSynchronize());
    return chain_us(t, p);
}

int bench_launch_chain() {
    constexpr int kLaunches = 240;  // about one 9B decode step
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Timer t = make_timer(s);
    float* buf = nullptr;  // 2 x the largest grid: the persistent form's two halves
    CK(cudaMalloc(&buf, sizeof(float) * 8192));
    CK(cudaMemset(buf, 0, sizeof(float) * 8192));
    unsigned long long* sync = nullptr;
    CK(cudaMalloc(&sync, sizeof(unsigned long long)));
    std::printf("launch chain: %d kernels per graph, median of %d replays, us per kernel; persistent = the same steps as\n"
                "phases of one launch meeting at a grid barrier, us per phase (- where the grid cannot be resident at once)\n",
                kLaunches, kRepeats);
    std::printf("%8s %8s | %10s %14s %14s %12s\n", "blocks", "threads", "plain", "wait+trigger", "trigger+wait", "persistent");
    const int shapes[][2] = {{1, 32}, {66, 256}, {132, 256}, {132, 512}, {264, 256}, {528, 256}};
    for (const auto& [blocks, threads] : shapes) {
        double us[3] = {};
        LaunchChainProbe p;
        p.buf = buf;
        p.blocks = blocks;
        p.threads = threads;
        p.kernels = kLaunches;
        for (int mode = 0; mode <= 2; ++mode) {
            p.pdl = mode;
            us[mode] = chain_us(t, p);
        }
        p.pdl = 1;
        const double pu = persistent_us(t, p, sync);
        std::printf("%8d %8d | %10.2f %14.2f %14.2f %12s\n", blocks, threads, us[0], us[1], us[2], us_or_dash(pu).c_str());
    }

    // Streaming kernels: a 2 GB source, so no slice of a 64-kernel chain is still in L2.
    constexpr size_t kSrc = size_t(2) << 30;
    constexpr int kStreamLaunches = 64;
    void* src = nullptr;
    CK(cudaMalloc(&src, kSrc));
    CK(cudaMemset(src, 0x5A, kSrc));
    // The copy rate timed as `frost bench engine` times it for its decode floors (on the host
    // around a synchronised copy, median of five after one warm-up), but over 1 GB where the
    // engine copies 256 MB: its rate reads a few percent lower (its fixed cost weighs more), so
    // the engine's floors are that much looser than this table's.
    double copy = 0;
    {
        void* dst = nullptr;
        CK(cudaMalloc(&dst, kCopyBytes));
        std::vector<double> ms;
        for (int r = 0; r < 6; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            CK(cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, s));
            CK(cudaStreamSynchronize(s));
            if (r) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        copy = double(kCopyBytes) / 1e9 / (ms[ms.size() / 2] / 1e3);
        CK(cudaFree(dst));
    }
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    // A chain of kStreamLaunches 256-thread kernels (wait, then trigger), each reading `bytes` of src.
    auto streaming = [&](int blocks, size_t bytes) {
        LaunchChainProbe p;
        p.buf = buf;
        p.blocks = blocks;
        p.threads = 256;
        p.kernels = kStreamLaunches;
        p.pdl = 1;
        p.src = src;
        p.src_bytes = kSrc;
        p.bytes = bytes;
        return p;
    };
    std::printf("streaming chain: %d kernels per graph, each reading its slice before the wait (wait, then trigger);\n"
                "copy rate %.0f GB/s of bytes copied, floor = bytes / (2 x copy rate)\n",
                kStreamLaunches, copy);
    std::printf("%10s %8s | %10s %10s %10s | %12s %10s\n", "MB", "blocks", "us", "GB/s", "x floor", "persistent", "x floor");
    for (const double mb : {2.0, 8.4, 16.8, 25.2, 50.3, 100.7}) {
        const size_t bytes = size_t(mb * 1e6) / 16 * 16;
        for (const int per_sm : {2, 4}) {
            const LaunchChainProbe p = streaming(per_sm * sms, bytes);
            const double us = chain_us(t, p), pu = persistent_us(t, p, sync);
            const double floor_us = double(bytes) / (2 * copy * 1e9) * 1e6;
            std::printf("%10.1f %8d | %10.2f %10.0f %10.2f | %12s %10s\n", mb, p.blocks, us, double(bytes) / (us * 1e3),
                        us / floor_us, us_or_dash(pu).c_str(), us_or_dash(pu / floor_us).c_str());
        }
    }
    // The quantized decode GEMV's loads alone (LaunchChainProbe::pattern): its 4-bit and fp8 load
    // shapes against the same bytes stored so that every warp load reads 512 contiguous bytes, per
    // steps in flight and blocks per SM (the GEMV runs 3 of 8 warps at 80 registers). K 4096: 2048
    // bytes per row at 4 bits, 4096 at fp8.
    std::printf("GEMV-shaped reads (same chain): 4bit = per step four lanes read a 64-byte half line of each of 8 rows,\n"
                "fp8 = a 128-byte line; +repack = the same bytes per warp step, each warp load 512 contiguous bytes\n");
    std::printf("%10s %-12s %6s %8s %9s | %10s %10s %10s | %12s %10s\n", "MB", "shape", "unroll", "blocks", "fit/SM", "us",
                "GB/s", "x floor", "persistent", "x floor");
    const char* names[] = {"", "4bit", "fp8", "4bit+repack", "fp8+repack"};
    for (const size_t bytes : {size_t(50331648), size_t(16777216)}) {
        for (const int pattern : {1, 3, 2, 4}) {
            for (const int unroll : {1, 2, 4}) {
                for (const int per_sm : {2, 3, 4}) {
                    LaunchChainProbe p = streaming(per_sm * sms, bytes);
                    p.pattern = pattern;
                    p.unroll = unroll;
                    p.row_bytes = pattern == 1 || pattern == 3 ? 2048 : 4096;
                    const double us = chain_us(t, p), pu = persistent_us(t, p, sync);
                    const double floor_us = double(bytes) / (2 * copy * 1e9) * 1e6;
                    std::printf("%10.1f %-12s %6d %8d %9d | %10.2f %10.0f %10.2f | %12s %10s\n", double(bytes) / 1e6,
                                names[pattern], unroll, p.blocks, chain_probe_blocks_per_sm(p), us, double(bytes) / (us * 1e3),
                                us / floor_us, us_or_dash(pu).c_str(), us_or_dash(pu / floor_us).c_str());
                }
            }
        }
    }
    CK(cudaFree(src));
    CK(cudaFree(buf));
    CK(cudaFree(sync));
    CK(cudaStreamDestroy(s));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--attn") return bench_attention(argv[2], false);
    if (argc == 2 && std::string(argv[1]) == "--attn-splits") return bench_attention(nullptr, true);
    if (argc == 2 && std::string(argv[1]) == "--conv") return bench_conv();
    if (argc == 2 && std::string(argv[1]) == "--launch-chain") return bench_launch_chain();
    if (argc >= 2 && std::string(argv[1]) == "--gdn") {
        std::vector<int> heads;
        for (int i = 2; i < argc; ++i) heads.push_back(std::atoi(argv[i]));
        return bench_gdn(heads);
    }
    if ((argc == 2 || argc == 3) && std::string(argv[1]) == "--fp8") return bench_fp8(argc == 3 ? std::atoi(argv[2]) : 4096);
    if (argc >= 4 && std::string(argv[1]) == "--fp8-profile") {
        std::vector<int> variants;
        for (int i = 4; i < argc; ++i) variants.push_back(std::atoi(argv[i]));
        return bench_fp8_profile(std::atoi(argv[2]), std::atoi(argv[3]), variants);
    }
    if ((argc == 3 || argc == 4) && std::string(argv[1]) == "--gemm") {
        const std::string model = argc == 4 ? argv[3] : "9b";
        if (model != "9b" && model != "0.8b") return std::fprintf(stderr, "--gemm: shapes are 9b or 0.8b\n"), 2;
        return bench_gemm(std::atoi(argv[2]), model);
    }
    if ((argc == 3 || argc == 4) && std::string(argv[1]) == "--swiglu") {
        const std::string model = argc == 4 ? argv[3] : "9b";
        if (model != "9b" && model != "0.8b") return std::fprintf(stderr, "--swiglu: shapes are 9b or 0.8b\n"), 2;
        return bench_swiglu(std::atoi(argv[2]), model);
    }
    if (argc == 4 && std::string(argv[1]) == "--gemm-sustained")
        return bench_gemm_sustained(std::atoi(argv[2]), std::atof(argv[3]));
    if (argc < 3) {
        std::fprintf(stderr, "usage: bench_cuda_kernels out.json MODEL_DIR [prefill_chunk] [decode_pos...]\n"
                             "       bench_cuda_kernels --attn out.json   (attention prefill kernels alone)\n"
                             "       bench_cuda_kernels --attn-splits     (short prompts: every split count of the mma.sync kernel)\n"
                             "       bench_cuda_kernels --conv            (GDN conv1d kernels alone)\n"
                             "       bench_cuda_kernels --launch-chain    (a launch boundary inside a replayed graph, per grid shape)\n"
                             "       bench_cuda_kernels --gdn [Hv...]     (GDN chunked prefill launches alone; default Hv 16 32)\n"
                             "       bench_cuda_kernels --fp8 [ROWS]      (FP8 W8A8 vs bf16 prefill GEMMs, 4096 rows by default)\n"
                             "       bench_cuda_kernels --fp8-profile N K [variant...]  (one launch each, for ncu)\n"
                             "       bench_cuda_kernels --gemm ROWS [9b|0.8b] (bf16 prefill GEMMs per heuristic rank; 9B shapes by default)\n"
                             "       bench_cuda_kernels --swiglu ROWS [9b|0.8b] (gate|up + SwiGLU: cuBLASLt + kernel against the fused GEMM)\n"
                             "       bench_cuda_kernels --gemm-sustained ROWS SECONDS  (one GEMM in bursts and back to back)\n");
        return 2;
    }
    const std::string json_path = argv[1], model_dir = argv[2];
    const int chunk = argc > 3 ? std::atoi(argv[3]) : 2048;
    std::vector<int> decode_pos;
    for (int i = 4; i < argc; ++i) decode_pos.push_back(std::atoi(argv[i]));
    if (decode_pos.empty()) decode_pos = {1024, 32768};
    if (chunk <= 0 || chunk % 64) return std::fprintf(stderr, "prefill_chunk must be a multiple of 64\n"), 2;

    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

    fm::EngineOptions o;
    o.backend = FROST_BACKEND_CUDA;
    o.prefill_chunk = chunk;
    o.max_seq_len = *std::max_element(decode_pos.begin(), decode_pos.end()) + chunk + 64;
    std::unique_ptr<fm::Engine> e;
    if (fm::Engine::create(model_dir, o, &e) != FROST_OK) {
        std::fprintf(stderr, "bench_cuda_kernels: engine on %s: %s\n", model_dir.c_str(), frost_last_error());
        return 1;
    }
    Timer t = make_timer(static_cast<cudaStream_t>(frost_stream_native(e->stream())));

    // Ceilings.
    Ceilings ce{};
    {
        uint8_t* a = dalloc<uint8_t>(kCopyBytes);
        uint8_t* b = dalloc<uint8_t>(kCopyBytes);
        CK(cudaMemset(a, 0x5A, kCopyBytes));
        const double ms = t.median_ms([=] { return cudaMemcpyAsync(b, a, kCopyBytes, cudaMemcpyDeviceToDevice, t.s); }, false);
        ce.copy_gbs = kCopyBytes / (ms * 1e-3) / 1e9;
        ce.rw_gbs = 2 * ce.copy_gbs;
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    {
        void* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
        GemmLt* lt = nullptr;
        CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
        const size_t n = size_t(kCeilGemm) * kCeilGemm;
        bf16* a = dalloc<bf16>(n);
        bf16* b = dalloc<bf16>(n);
        bf16* c = dalloc<bf16>(n);
        CK(cudaMemset(a, 0x3C, n * sizeof(bf16)));
        CK(cudaMemset(b, 0x3C, n * sizeof(bf16)));
        GemmBf16Params p{a, b, c, kCeilGemm, kCeilGemm, kCeilGemm, kCeilGemm, kCeilGemm, 0, 0};
        GemmPlan* plan = nullptr;
        CK(gemm_plan_create(lt, p, &plan));
        const double ms = t.median_ms([=] { return gemm_launch(plan, p, t.s); }, false);
        ce.gemm_tflops = gemm_cost(p).flops / (ms * 1e-3) / 1e12;
        gemm_plan_destroy(plan);
        gemm_lt_destroy(lt);
        CK(cudaFree(a));
        CK(cudaFree(b));
        CK(cudaFree(c));
        CK(cudaFree(ws));
    }
    std::printf("ceilings: D2D copy %.0f GB/s copied (%.0f GB/s read+write), cuBLASLt bf16 %d^3 %.0f TFLOP/s\n",
                ce.copy_gbs, ce.rw_gbs, kCeilGemm, ce.gemm_tflops);

    std::vector<Row> rows;
    std::vector<std::string> phases;
    const std::string pre = "prefill chunk of " + std::to_string(chunk) + " rows from position 0";
    if (!run_phase(*e, pre, chunk, 0, t, rows)) return std::fprintf(stderr, "prefill: %s\n", frost_last_error()), 1;
    phases.push_back(pre);
    for (int pos : decode_pos) {
        const std::string ph = "decode step at position " + std::to_string(pos);
        if (!run_phase(*e, ph, 1, pos, t, rows)) return std::fprintf(stderr, "decode: %s\n", frost_last_error()), 1;
        phases.push_back(ph);
    }
    std::printf("\n[%s] ceilings: copy %.0f GB/s (rw %.0f), GEMM %.0f TFLOP/s; %%floor = max(bytes/rw, flops/GEMM) / time\n",
                prop.name, ce.copy_gbs, ce.rw_gbs, ce.gemm_tflops);
    for (const auto& ph : phases) print_table(ph, rows, ce);

    nlohmann::json j;
    j["device"] = prop.name;
    j["model"] = model_dir;
    j["ceilings"] = {{"d2d_copy_GBps", ce.copy_gbs}, {"rw_GBps", ce.rw_gbs}, {"gemm_bf16_TFLOPs", ce.gemm_tflops}};
    for (const auto& r : rows)
        j["kernels"].push_back({{"phase", r.phase}, {"kernel", r.name}, {"kind", r.kind}, {"per_forward", r.per_forward},
                                {"median_us", r.ms * 1e3}, {"bytes", r.cost.bytes}, {"flops", r.cost.flops},
                                {"floor_us", floor_ms(r.cost, ce) * 1e3}});
    if (FILE* f = std::fopen(json_path.c_str(), "w")) {
        std::fputs(j.dump(1).c_str(), f);
        std::fclose(f);
    }
    return 0;
}
#endif
