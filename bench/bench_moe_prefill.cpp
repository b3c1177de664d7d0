// The MoE prefill kernel alone (moe_prefill_launch) at a released shape, per chunk size and GEMM
// tile shape (rows x K per stage), against the same run's cuBLASLt on dense GEMMs of the same FLOPs (gate|up
// [entries x H] · [H x 2I] and down [entries x I] · [I x H], entries = rows x (k + 1)), and the
// two routers alone (the decode one, and the tensor-core one every prefill launch runs). Median
// of CUDA-event timings over repeated launches after a warm-up; random bf16 inputs (never zeros).
// TFLOP/s counts the active FLOPs, 6 H I per entry; GB/s the expert weights the GEMMs must stream
// (every expert hit at least once, and the shared one: 6 H I bytes each), against ~3.35 TB/s of HBM.
// Usage: bench_moe_prefill [--shape 35b|next] [--rows 1024,4096,16384] [--reps N] [--tiles 1,4]
// (--tiles: only these tile shapes, e.g. under a profiler).
#if !FROST_WITH_CUDA
#include <cstdio>
int main() {
    std::printf("bench_moe_prefill: built without CUDA\n");
    return 0;
}
#else
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_cuda_check.h"
#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_moe.h"

using namespace frost::kernels;

namespace {

template <class T>
T* dev_alloc(size_t n) {
    T* p = nullptr;
    CK(cudaMalloc(&p, n * sizeof(T)));
    return p;
}

// A device array of n bf16 uniform in [-scale, scale) (splitmix64 on the host, then one upload).
bf16* dev_random(size_t n, float scale, uint64_t seed) {
    std::vector<uint16_t> h(n);
    uint64_t s = seed;
    for (auto& v : h) {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float f = scale * (2.0f * float(z >> 40) * 0x1p-24f - 1.0f);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        v = uint16_t((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);  // round to nearest even
    }
    bf16* d = dev_alloc<bf16>(n);
    CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
    return d;
}

// Median ms of one call of f: 7 samples of `reps` calls each, after a warm-up sample.
double time_ms(cudaStream_t st, int reps, const std::function<void()>& f) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<double> ms;
    for (int s = 0; s < 8; ++s) {
        CK(cudaEventRecord(a, st));
        for (int i = 0; i < reps; ++i) f();
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float t = 0;
        CK(cudaEventElapsedTime(&t, a, b));
        if (s) ms.push_back(double(t) / reps);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::string shape = "35b";
    std::vector<int> rows_list{1024, 4096, 16384};
    int reps = 10;
    std::vector<int> tiles;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--shape") shape = v;
        else if (k == "--reps") reps = std::atoi(v.c_str());
        else if (k == "--rows" || k == "--tiles") {
            std::vector<int>& list = k == "--rows" ? rows_list : tiles;
            list.clear();
            for (size_t at = 0; at < v.size();) {
                const size_t comma = v.find(',', at);
                list.push_back(std::atoi(v.substr(at, comma - at).c_str()));
                at = comma == std::string::npos ? v.size() : comma + 1;
            }
        } else {
            std::fprintf(stderr, "usage: bench_moe_prefill [--shape 35b|next] [--rows R1,R2,..] [--reps N] [--tiles T1,..]\n");
            return 2;
        }
    }
    if (tiles.empty())
        for (int t = 1; t <= kMoeTileShapeCount; ++t) tiles.push_back(t);
    for (int t : tiles)
        if (t < 1 || t > kMoeTileShapeCount) {
            std::fprintf(stderr, "bench_moe_prefill: --tiles: %d is not a tile shape (1..%d)\n", t, kMoeTileShapeCount);
            return 2;
        }
    if (shape != "35b" && shape != "next") {
        std::fprintf(stderr, "bench_moe_prefill: --shape must be 35b or next, got %s\n", shape.c_str());
        return 2;
    }
    const int H = 2048, I = 512, E = shape == "35b" ? 256 : 512, k = shape == "35b" ? 8 : 10;
    const int max_rows = *std::max_element(rows_list.begin(), rows_list.end());
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    MoeBf16Params p{};
    p.H = H; p.E = E; p.k = k; p.I = I; p.Is = I; p.norm_topk = shape == "35b";
    p.router = dev_random(size_t(E) * H, 0.04f, 1);
    p.experts_gate_up = dev_random(size_t(E) * 2 * I * H, 0.022f, 2);
    p.experts_down = dev_random(size_t(E) * H * I, 0.044f, 3);
    p.shared_gate_up = dev_random(size_t(2) * I * H, 0.022f, 4);
    p.shared_down = dev_random(size_t(H) * I, 0.044f, 5);
    p.shared_gate = dev_random(size_t(H), 0.022f, 6);
    p.x = dev_random(size_t(max_rows) * H, 2.0f, 7);
    p.probs = dev_alloc<float>(size_t(max_rows) * E);
    p.topk_ids = dev_alloc<int32_t>(size_t(max_rows) * k);
    p.topk_w = dev_alloc<float>(size_t(max_rows) * k);
    p.shared_w = dev_alloc<float>(size_t(max_rows));
    p.out_bf16 = dev_alloc<bf16>(size_t(max_rows) * H);
    p.max_rows = max_rows;
    const MoePrefillScratch sc = moe_prefill_scratch(p);
    p.group_offsets = dev_alloc<int32_t>(sc.offsets_ints);
    p.chunk_base = dev_alloc<int32_t>(sc.chunk_ints);
    p.tile_table = dev_alloc<int32_t>(sc.tile_ints);
    p.entry_row = dev_alloc<int32_t>(sc.entry_row_ints);
    p.entry_pos = dev_alloc<int32_t>(sc.entry_pos_ints);
    p.ag = dev_alloc<bf16>(sc.ag_elems);
    p.yg = dev_alloc<bf16>(sc.yg_elems);

    // Dense operands for cuBLASLt, sized for the largest chunk.
    const size_t max_entries = size_t(max_rows) * (k + 1);
    bf16* dx = dev_random(max_entries * H, 1.0f, 8);
    bf16* dh = dev_alloc<bf16>(max_entries * 2 * I);
    bf16* dy = dev_alloc<bf16>(max_entries * H);
    void* ws = dev_alloc<char>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));

    std::printf("MoE prefill, shape %s (H %d, E %d, k %d + shared, I = Is = %d), ms and TFLOP/s over 6 H I per entry\n",
                shape.c_str(), H, E, k, I);
    std::printf("per chunk: the routers alone, then per tile shape the whole launch (ms, TF/s) and its two grouped\n"
                "GEMMs alone (moe_prefill_gemms_launch: ms, TF/s, GB/s of the weights of the experts hit + shared)\n");
    for (const int rows : rows_list) {
        const int64_t entries = int64_t(rows) * (k + 1);
        const double flops = 6.0 * H * I * double(entries);
        MoeBf16Params q = p;
        q.max_rows = rows;  // the grids shrink with the capacity; n_rows null = max_rows
        const double router = time_ms(st, reps, [&] { CK(moe_router_launch(q, st)); });
        const double router_tc = time_ms(st, reps, [&] { CK(moe_prefill_router_launch(q, st)); });
        std::printf("rows %d entries %lld: router %.3f ms, router_tc %.3f ms\n", rows, (long long)entries, router, router_tc);
        for (int t : tiles) {
            q.tile_shape = t;
            const MoeTileShape& ts = kMoeTileShapes[t - 1];
            const double ms = time_ms(st, reps, [&] { CK(moe_prefill_launch(q, st)); });
            // The grouping the launches left: which experts were hit (their weights are streamed).
            std::vector<int32_t> off(size_t(E) + 2);
            CK(cudaMemcpy(off.data(), q.group_offsets, off.size() * 4, cudaMemcpyDeviceToHost));
            int hit = 0;
            for (int e = 0; e < E; ++e) hit += off[size_t(e) + 1] > off[size_t(e)];
            const double bytes = double(hit + 1) * 3.0 * H * I * 2.0;
            const double gm = time_ms(st, reps, [&] { CK(moe_prefill_gemms_launch(q, st)); });
            std::printf("  t%d %3dx%-2d w%-3d launch %8.3f ms %6.1f TF/s | gemms %8.3f ms %6.1f TF/s %6.0f GB/s (%d experts hit)\n",
                        t, ts.rows, ts.k, ts.warp_cols, ms, flops / ms / 1e9, gm, flops / gm / 1e9, bytes / gm / 1e6, hit);
            std::fflush(stdout);  // a failing shape still leaves the others' numbers
        }
        GemmBf16Params g1{}, g2{};
        g1.x = dx; g1.w = p.experts_gate_up; g1.y = dh; g1.ldx = H; g1.ldy = 2 * I;
        g1.M = int(entries); g1.N = 2 * I; g1.K = H;
        g2.x = dh; g2.w = p.experts_down; g2.y = dy; g2.ldx = 2 * I; g2.ldy = H;  // the first I columns of dh
        g2.M = int(entries); g2.N = H; g2.K = I;
        GemmPlan *p1 = nullptr, *p2 = nullptr;
        CK(gemm_plan_create(lt, g1, &p1));
        CK(gemm_plan_create(lt, g2, &p2));
        const double dense = time_ms(st, reps, [&] {
            CK(gemm_launch(p1, g1, st));
            CK(gemm_launch(p2, g2, st));
        });
        gemm_plan_destroy(p1);
        gemm_plan_destroy(p2);
        std::printf("  cublasLt dense GEMMs of the same FLOPs %8.3f ms %6.1f TF/s\n", dense, flops / dense / 1e9);
    }
    gemm_lt_destroy(lt);
    CK(cudaDeviceSynchronize());
    return 0;
}
#endif
