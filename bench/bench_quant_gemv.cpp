// Quantized decode GEMV (issue 15) on the 9B decode shapes (H 4096, F 12288: one gate or up
// matrix, the fused gate+up with SwiGLU the decode runs, fused GDN in_proj, fused attention qkv,
// out / o / down projections), against the bf16 GEMV of lm_gemv.cu in the
// same run. The ceiling is measured in the same run (device-to-device copy: bytes read + written
// per second); each kernel's floor is its bytes (gemv_quant_cost: quantized weights + scales + x +
// y) over that rate. Two timings (CUDA events, warm-up, medians): "alone" = one launch after the
// L2 was flushed by reading 256 MiB (includes the launch gap and the cold start of one kernel);
// "stream" = 64 launches back to back cycling through 16 copies of the weights (more than the L2
// holds), per launch, as a decode step runs them. GB/s and time / floor use the stream timing
// (1.00 = at the quantized-bytes floor). Quantized rows: the SIMT and the tensor-core kernel
// (kern "tc", its default launch), and with --tune every tensor-core variant ("u<steps per load
// group>b<blocks per SM>", "p": pipelined, the next group loaded before the current one is
// computed, "t2" / "t4": two / four 16-row tiles per block, "w12": one tile of 12 warps; "tc"
// picks one by shape). --m M runs M x rows at once (a batched decode step; the SIMT kernel takes M = 1 only).
// "-w8a8" rows: the FP8 formats with x quantized in the kernel (GemvQuantParams::act_fp8, FP8 mma;
// tensor-core kernel, u1b3p, u1b3pt2 and u1b2pw12 only).
// --moe: instead, the routed experts of a 35B-A3B-shaped MoE decode step (256 experts stacked, 8
// routed entries whose ids come from device memory, the shared expert folded in as a 9th entry:
// GemvQuantParams::expert_ids / routed_entries), gate/up (SwiGLU, K 2048) and down (K 512); each
// back-to-back launch reads another random set of experts, so the selected weights come from DRAM.
// The floor counts the 9 experts' bytes; "tc-sep" runs the routed launch and the shared expert's own
// launch (the unfolded decode) and counts the same bytes. Down adds "tc+comb" (the folded GEMV and
// moe_combine_launch: the quantized decode's down before the mix launch), "mix" (the down
// projection and the mix in one launch, gemv_quant_moe_down_launch) and "mix-early" (its ids_ready
// form: the expert weights requested before the PDL wait; here the ids are always ready).
// --pdl launches the plain shapes' quantized GEMVs with programmatic dependent launch, as the decode
// graph does: a launch's blocks may start (and load their weights, which do not depend on the
// previous launch) while the previous launch drains. H200, 2026-11-29: fp8 block 1.47-1.61x ->
// 1.23-1.39x at N >= 10240, 2.25x -> 1.59x at 4096 x 4096 (the bf16 rows are launched without).
// --only F[,F...] measures those formats only (the names of the format column).
// --row-major keeps the 4-bit rows row-major instead of in the 8-row blocks the engine stores
// (GemvQuantParams::row_blocks), for an A/B of the layout in one process.
// --dequant: instead, the prefill's dequantization of each plain shape's whole weight to bf16
// (dequant_bf16_launch, what a quantized prefill GEMM runs first), kern "rows" (row-major) and,
// for 4-bit weights, "blocked" (8-row blocks); its bytes are the stored weight and scales read and
// the bf16 weight written.
// Usage: bench_quant_gemv [repeats] [--m M] [--tune] [--moe] [--pdl] [--row-major] [--dequant] [--only F,...]
#if !FROST_WITH_CUDA
#include <cstdio>
int main() {
    std::printf("bench_quant_gemv: built without CUDA\n");
    return 0;
}
#else
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_cuda_check.h"
#include "kernels/cuda/lm_gemv_quant.h"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda/lm_kernels.h"

using namespace frost::kernels;

namespace {

constexpr int kH = 4096, kF = 12288;
constexpr int kLinIn = 2 * 16 * 128 + 32 * 128 + 32 * 128 + 2 * 32;  // qkv | z | b | a = 12352
constexpr int kFullQkv = 2 * 16 * 256 + 2 * 4 * 256;                  // q+gate | k | v = 10240
constexpr int kWarmup = 3;
constexpr size_t kFlushBytes = 256u << 20;  // > 5x the H100's 50 MB L2
constexpr size_t kCopyBytes = 1u << 30;
constexpr int kCopies = 16;        // weight copies the back-to-back timing cycles through
constexpr int kStreamLaunches = 64;

struct Shape {
    const char* name;
    int N, K;
    bool swiglu = false;  // the decode's fused gate/up: N stacked rows, SwiGLU of row pairs in the epilogue
};
// "mlp gate|up (x2)" is one of the two 12288-row matrices (768 tiles); the engine's decode runs
// them as the one fused SwiGLU GEMV of 24576 rows (1536 tiles), the next row.
const Shape kShapes[] = {{"mlp gate|up (x2)", kF, kH},  {"mlp gate+up SwiGLU", 2 * kF, kH, true},
                         {"mlp down", kH, kF},          {"gdn in_proj", kLinIn, kH},
                         {"gdn out_proj", kH, kH},      {"attn qkv", kFullQkv, kH},
                         {"attn o_proj", kH, kH}};

struct Timer {
    cudaStream_t s;
    cudaEvent_t a, b;
    GemmBf16Params flush;
    int repeats;
    double median_ms(const std::function<cudaError_t()>& launch) {
        for (int i = 0; i < kWarmup; ++i) CK(launch());
        std::vector<float> t;
        for (int i = 0; i < repeats; ++i) {
            CK(gemv_launch(flush, s));  // reading a large buffer evicts the weights from L2
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

void* dalloc(size_t bytes) {
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes + 256));
    return p;
}

// Random bytes (weights, fp8 scales avoided: see fill_scales) from a host pattern.
void fill_bytes(void* p, size_t n, std::mt19937& rng) {
    std::vector<uint8_t> h(n);
    for (auto& b : h) b = uint8_t(rng());
    for (size_t i = 0; i < n; ++i)
        if ((h[i] & 0x7F) == 0x7F) h[i] = 0x3F;  // no fp8 NaN codes
    CK(cudaMemcpy(p, h.data(), n, cudaMemcpyHostToDevice));
}

double copy_gbs(cudaStream_t s, Timer& t) {
    void* a = dalloc(kCopyBytes);
    void* b = dalloc(kCopyBytes);
    const double ms = t.median_ms([&] { return cudaMemcpyAsync(b, a, kCopyBytes, cudaMemcpyDeviceToDevice, s); });
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * kCopyBytes / (ms * 1e-3) / 1e9;  // read + write
}

// One row of the plain shapes' table: `launch` timed alone (after an L2 flush) on w and back to back
// over the weight copies, against `bytes` at the copy rate gbs.
void time_row(Timer& t, double gbs, const char* shape, const char* format, const char* kern, double bytes,
              const std::function<cudaError_t(const void*)>& launch, const void* w, const std::vector<void*>& copies) {
    const double one_ms = t.median_ms([&] { return launch(w); });
    const double ms = t.median_ms([&] {
        for (int i = 0; i < kStreamLaunches; ++i)
            if (const cudaError_t e = launch(copies[size_t(i % kCopies)]); e != cudaSuccess) return e;
        return cudaSuccess;
    }) / kStreamLaunches;
    const double floor_ms = bytes / (gbs * 1e9) * 1e3;
    std::printf("%-18s %-14s %-7s %8.2f %9.2f %9.2f %8.0f %9.2f %7.2f\n", shape, format, kern, bytes / 1e6, one_ms * 1e3,
                ms * 1e3, bytes / (ms * 1e-3) / 1e9, floor_ms * 1e3, ms / floor_ms);
}

}  // namespace

// The tensor-core variants --tune times: {unroll, min blocks per SM, pipe, warps per tile}.
constexpr int kVariants[][4] = {{2, 2, 0, 8}, {2, 3, 0, 8}, {2, 4, 0, 8}, {4, 2, 0, 8}, {1, 2, 1, 8},
                                {1, 3, 1, 8}, {2, 2, 1, 8}, {2, 3, 1, 8}, {1, 3, 1, 4},
                                {1, 2, 1, 12}, {1, 3, 1, 2}};
constexpr int kVariantCount = static_cast<int>(sizeof kVariants / sizeof kVariants[0]);

namespace {

bool g_row_blocks = true;  // 4-bit weights in 8-row blocks (off: --row-major)

// The params both modes launch: 128-wide FP8 blocks and INT4 groups, the NVFP4 global scale the
// scale bytes (0x38) keep finite.
GemvQuantParams bench_params(const bf16* x, const void* w, const void* scale, void* y, int N, int K, int format, int M) {
    GemvQuantParams p{};
    p.x = x;
    p.w = w;
    p.scale = scale;
    p.global_scale = 2688.0f;
    p.y = y;
    p.N = N;
    p.K = K;
    p.format = format;
    p.block_n = p.block_k = 128;
    p.group_size = 128;
    p.M = M;
    // 4-bit: the order and layout the engine's load writes (ops::Backend::prepare_quant_weight:
    // paired nibbles, 8-row blocks unless --row-major); the bytes are random, so nothing needs
    // rewriting.
    const bool four_bit = format == kGemvQuantNvfp4 || format == kGemvQuantInt4;
    p.nibble_pairs = four_bit ? 1 : 0;
    p.row_blocks = four_bit && g_row_blocks && quant4_row_blocks_eligible(N, K) ? 1 : 0;
    return p;
}

// The --moe rows (see the file comment).
void run_moe(Timer& t, double gbs, bool tune, std::mt19937& rng) {
    constexpr int E = 256, kTop = 8, kI = 512, kHm = 2048, kSets = kStreamLaunches;
    struct MoeShape {
        const char* name;
        int N, K;  // per expert
        bool down;
    };
    const MoeShape shapes[] = {{"moe gate|up x9", 2 * kI, kHm, false}, {"moe down x9", kHm, kI, true}};
    struct Fmt {
        const char* name;
        int format;
    };
    const Fmt fmts[] = {{"fp8-block", kGemvQuantFp8Block}, {"nvfp4", kGemvQuantNvfp4}, {"int4", kGemvQuantInt4}};
    // kSets sets of kTop distinct expert ids, one set per back-to-back launch.
    std::vector<int32_t> ids(size_t(kSets) * kTop);
    for (int s = 0; s < kSets; ++s) {
        std::vector<int32_t> all(E);
        for (int e = 0; e < E; ++e) all[size_t(e)] = e;
        std::shuffle(all.begin(), all.end(), rng);
        std::copy(all.begin(), all.begin() + kTop, ids.begin() + long(s) * kTop);
    }
    auto* dids = static_cast<int32_t*>(dalloc(ids.size() * 4));
    CK(cudaMemcpy(dids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    const size_t max_w = size_t(E) * 2 * kI * kHm;  // the fp8 gate|up stack, the largest
    void* w = dalloc(max_w);
    void* shared_w = dalloc(size_t(2) * kI * kHm);
    const size_t scale_bytes = size_t(E) * 2 * kI * kHm / 16 * 4;
    void* scale = dalloc(scale_bytes);
    void* shared_scale = dalloc(scale_bytes / E);
    fill_bytes(w, max_w, rng);
    fill_bytes(shared_w, size_t(2) * kI * kHm, rng);
    {
        std::vector<uint8_t> h(scale_bytes, 0x38);  // positive and finite in every scale dtype
        CK(cudaMemcpy(scale, h.data(), scale_bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(shared_scale, h.data(), scale_bytes / E, cudaMemcpyHostToDevice));
    }
    auto* x = static_cast<bf16*>(dalloc(size_t(kTop + 1) * kHm * 2));
    CK(cudaMemset(x, 0x3c, size_t(kTop + 1) * kHm * 2));
    void* y = dalloc(size_t(kTop + 1) * kHm * 4);
    // The mix's inputs (routing weights, the shared gate) and the residual it adds into.
    auto* mix_w = static_cast<float*>(dalloc(size_t(kTop + 1) * 4));
    CK(cudaMemset(mix_w, 0, size_t(kTop + 1) * 4));
    auto* mix_out = static_cast<bf16*>(dalloc(size_t(kHm) * 2));
    CK(cudaMemset(mix_out, 0, size_t(kHm) * 2));
    for (const MoeShape& sh : shapes) {
        for (const Fmt& f : fmts) {
            GemvQuantParams p = bench_params(x, w, scale, y, sh.N, sh.K, f.format, 1);
            p.ldx = sh.K;
            p.swiglu = sh.down ? 0 : 1;
            p.out_f32 = sh.down ? 1 : 0;
            p.ldy = sh.down ? sh.N : sh.N / 2;
            p.expert_ids = dids;
            p.entries = kTop;
            p.x_entry_div = sh.down ? 1 : kTop;
            GemvQuantParams shared = p;  // the shared expert's own launch (unfolded)
            shared.expert_ids = nullptr;
            shared.entries = 0;
            shared.x_entry_div = 1;
            shared.w = shared_w;
            shared.scale = shared_scale;
            shared.x = x + (sh.down ? size_t(kTop) * sh.K : 0);
            shared.y = static_cast<char*>(y) + size_t(kTop) * size_t(p.ldy) * (sh.down ? 4 : 2);
            shared.ldx = shared.ldy = 0;
            GemvQuantParams folded = p;
            folded.routed_entries = kTop;
            folded.entries = kTop + 1;
            folded.shared_x_row0 = sh.down ? kTop : 0;
            folded.shared_w = shared_w;
            folded.shared_scale = shared_scale;
            if (!gemv_quant_tc_eligible(folded)) {
                std::printf("%-18s %-14s not eligible for the tensor-core kernel\n", sh.name, f.name);
                continue;
            }
            GemvQuantParams one = shared;  // one expert's bytes
            one.ldx = one.ldy = 0;
            const double bytes = gemv_quant_cost(one).bytes * (kTop + 1);
            // The rows: "tc-sep", "tc" (folded), for down also the folded GEMV + the combine
            // ("tc+comb", the decode before the mix launch) and the down-and-mix launch ("mix",
            // and "mix-early": ids_ready); with --tune every variant of the folded GEMV.
            struct Row {
                std::string name;
                std::function<cudaError_t(int)> launch;  // back-to-back launch i
            };
            std::vector<Row> rows;
            auto at_set = [&](GemvQuantParams a, int set) {
                a.expert_ids = dids + size_t(set % kSets) * kTop;
                return a;
            };
            rows.push_back({"tc-sep", [&](int set) {
                                if (const cudaError_t e = gemv_quant_tc_launch(at_set(p, set), t.s); e != cudaSuccess) return e;
                                return gemv_quant_tc_launch(shared, t.s);
                            }});
            rows.push_back({"tc", [&](int set) { return gemv_quant_tc_launch(at_set(folded, set), t.s); }});
            if (sh.down) {
                rows.push_back({"tc+comb", [&](int set) {
                                    if (const cudaError_t e = gemv_quant_tc_launch(at_set(folded, set), t.s); e != cudaSuccess) return e;
                                    const MoeCombineParams c{static_cast<const float*>(y), static_cast<const float*>(y) + size_t(kTop) * kHm,
                                                             mix_w, mix_w + kTop, mix_out, 1, kTop, kHm, 0};
                                    return moe_combine_launch(c, t.s);
                                }});
                for (const int early : {0, 1}) {
                    rows.push_back({early ? "mix-early" : "mix", [&, early](int set) {
                                        const GemvQuantMoeMix m{mix_w, mix_w + kTop, mix_out, 1, kTop, kHm, early};
                                        return gemv_quant_moe_down_launch(at_set(folded, set), m, t.s);
                                    }});
                }
            }
            for (int v = 0; tune && v < kVariantCount; ++v) {
                const int unroll = kVariants[v][0], blocks = kVariants[v][1], pipe = kVariants[v][2], tw = kVariants[v][3];
                char variant[32];
                std::snprintf(variant, sizeof variant, "u%db%d%s%s", unroll, blocks, pipe ? "p" : "", tw == 4 ? "t2" : tw == 12 ? "w12" : tw == 2 ? "t4" : "");
                rows.push_back({variant, [&, unroll, blocks, pipe, tw](int set) {
                                    return gemv_quant_tc_launch_tuned(at_set(folded, set), unroll, blocks, pipe, t.s, tw);
                                }});
            }
            for (const Row& row : rows) {
                const std::string& kname = row.name;
                const auto& launch = row.launch;
                const double one_ms = t.median_ms([&] { return launch(0); });
                const double ms = t.median_ms([&] {
                    for (int i = 0; i < kStreamLaunches; ++i)
                        if (const cudaError_t e = launch(i); e != cudaSuccess) return e;
                    return cudaSuccess;
                }) / kStreamLaunches;
                const double floor_ms = bytes / (gbs * 1e9) * 1e3;
                std::printf("%-18s %-14s %-9s %10.2f %9.2f %9.2f %8.0f %9.2f %7.2f\n", sh.name, f.name, kname.c_str(), bytes / 1e6,
                            one_ms * 1e3, ms * 1e3, bytes / (ms * 1e-3) / 1e9, floor_ms * 1e3, ms / floor_ms);
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    Timer t{};
    t.repeats = 25;
    int M = 1;
    bool tune = false, moe = false, pdl = false, dequant = false;
    std::string only;  // comma-separated format names, empty: all
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--m" && i + 1 < argc) M = std::clamp(std::atoi(argv[++i]), 1, 8);
        else if (a == "--tune") tune = true;
        else if (a == "--moe") moe = true;
        else if (a == "--pdl") pdl = true;
        else if (a == "--row-major") g_row_blocks = false;
        else if (a == "--dequant") dequant = true;
        else if (a == "--only" && i + 1 < argc) (only = ",").append(argv[++i]).append(",");
        else t.repeats = std::max(1, std::atoi(argv[i]));
    }
    CK(cudaStreamCreate(&t.s));
    CK(cudaEventCreate(&t.a));
    CK(cudaEventCreate(&t.b));
    std::mt19937 rng(7);
    const int flush_k = 8192;
    const int flush_n = int(kFlushBytes / (flush_k * sizeof(bf16)));
    t.flush = GemmBf16Params{static_cast<bf16*>(dalloc(flush_k * 2)), static_cast<bf16*>(dalloc(kFlushBytes)),
                             dalloc(size_t(flush_n) * 4), flush_k, flush_n, 1, flush_n, flush_k, 1, 0};
    fill_bytes(const_cast<bf16*>(t.flush.x), flush_k * 2, rng);
    CK(cudaMemset(const_cast<bf16*>(t.flush.w), 0, kFlushBytes));
    const double gbs = copy_gbs(t.s, t);
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device %s; copy ceiling %.0f GB/s (read + write); floor = bytes / ceiling; M = %d x rows\n", prop.name,
                gbs, M);
    std::printf("%-18s %-14s %-7s %8s %9s %9s %8s %9s %7s\n", "shape", "format", "kern", "MB", "alone us", "stream us",
                "GB/s", "floor us", "ratio");
    if (moe) {
        run_moe(t, gbs, tune, rng);
        return 0;
    }

    bf16* x = static_cast<bf16*>(dalloc(size_t(kF) * 2 * M));
    CK(cudaMemset(x, 0x3c, size_t(kF) * 2 * M));  // bf16 ~0.0115: finite, no overflow in any format
    void* y = dalloc(size_t(kLinIn) * 4 * M);
    const size_t max_w = size_t(kF) * kH * 2;  // the largest: bf16 12288 x 4096, fp8 24576 x 4096 (fused gate+up)
    void* w = dalloc(max_w);
    void* scale = dalloc(size_t(kF) * kH / 16 * 4);
    void* zp = dalloc(size_t(kF) * kH / 128);
    fill_bytes(w, max_w, rng);
    // Back-to-back launches (as in a decode graph) walk kCopies copies of the weights, more bytes
    // than the L2 holds, so each launch streams its weights from DRAM without a flush between.
    std::vector<void*> copies(kCopies);
    for (auto& c : copies) {
        c = dalloc(max_w);
        CK(cudaMemcpy(c, w, max_w, cudaMemcpyDeviceToDevice));
    }
    {
        // Scales: positive, finite in every dtype they are read as (fp32, bf16, e4m3 bytes 0x38).
        std::vector<uint8_t> h(size_t(kF) * kH / 16 * 4, 0x38);
        CK(cudaMemcpy(scale, h.data(), h.size(), cudaMemcpyHostToDevice));
        fill_bytes(zp, size_t(kF) * kH / 128, rng);
    }
    struct Fmt {
        const char* name;
        int format;  // -1: bf16 gemv_launch
        bool zero_point;
        bool act8 = false;
    };
    const Fmt fmts[] = {{"bf16", -1, false},
                        {"fp8-block", kGemvQuantFp8Block, false},
                        {"fp8-channel", kGemvQuantFp8Channel, false},
                        {"fp8-block-w8a8", kGemvQuantFp8Block, false, true},
                        {"fp8-chan-w8a8", kGemvQuantFp8Channel, false, true},
                        {"nvfp4", kGemvQuantNvfp4, false},
                        {"int4", kGemvQuantInt4, false},
                        {"int4-zp", kGemvQuantInt4, true}};
    auto wanted = [&](const Fmt& f) {
        return only.empty() || only.find(std::string(",").append(f.name).append(",")) != std::string::npos;
    };
    if (dequant) {
        bf16* out = static_cast<bf16*>(dalloc(size_t(kLinIn) * kH * 2));
        for (const Shape& sh : kShapes) {
            if (sh.swiglu) continue;
            for (const Fmt& f : fmts) {
                if (f.format < 0 || f.act8 || !wanted(f)) continue;
                for (const bool blocked : {false, true}) {
                    GemvQuantParams p = bench_params(x, w, scale, y, sh.N, sh.K, f.format, 1);
                    p.zero_point = f.zero_point ? static_cast<const int32_t*>(zp) : nullptr;
                    if (blocked && !p.row_blocks) continue;
                    if (!blocked) p.row_blocks = 0;
                    // gemv_quant_cost counts x and the bf16 y of one row beside the weight and scales.
                    const double bytes = gemv_quant_cost(p).bytes - 2.0 * sh.K - 2.0 * sh.N + 2.0 * sh.N * sh.K;
                    auto launch = [p, out, &t](const void* wp) {
                        GemvQuantParams q = p;
                        q.w = wp;
                        return dequant_bf16_launch(q, out, t.s);
                    };
                    time_row(t, gbs, sh.name, f.name, blocked ? "blocked" : "rows", bytes, launch, w, copies);
                }
            }
        }
        return 0;
    }
    for (const Shape& sh : kShapes) {
        for (const Fmt& f : fmts) {
            if (!wanted(f)) continue;
            if (sh.swiglu && f.format < 0) continue;  // the bf16 GEMV has no SwiGLU form (nor room in w)
            // bf16: the GEMV of lm_gemv.cu; quantized: the SIMT kernel (0), the tensor-core one's
            // default (1) and its variants (2..9: unroll / blocks per SM / pipe, kVariants).
            const int kernels = f.format < 0 ? 1 : tune ? 2 + kVariantCount : 2;
            for (int kernel = 0; kernel < kernels; ++kernel) {
                KernelCost cost;
                std::function<cudaError_t(const void*)> launch;
                std::string kname = "gemv";
                if (f.format < 0) {
                    GemmBf16Params p{x, static_cast<const bf16*>(w), y, sh.K, sh.N, M, sh.N, sh.K, 0, 0};
                    cost = gemm_cost(p);
                    launch = [p, &t](const void* wp) {
                        GemmBf16Params q = p;
                        q.w = static_cast<const bf16*>(wp);
                        return gemv_launch(q, t.s);
                    };
                } else {
                    GemvQuantParams p = bench_params(x, w, scale, y, sh.N, sh.K, f.format, M);
                    p.zero_point = f.zero_point ? static_cast<const int32_t*>(zp) : nullptr;
                    p.swiglu = sh.swiglu ? 1 : 0;
                    p.act_fp8 = f.act8 ? 1 : 0;
                    p.pdl = pdl ? 1 : 0;
                    cost = gemv_quant_cost(p);
                    if (kernel == 0 && (M > 1 || f.act8)) continue;
                    if (kernel >= 1 && !gemv_quant_tc_eligible(p)) continue;
                    const int v = std::max(kernel - 2, 0);
                    const int unroll = kVariants[v][0], blocks = kVariants[v][1], pipe = kVariants[v][2], tw = kVariants[v][3];
                    if (kernel >= 2 && f.act8 && !(unroll == 1 && pipe && blocks == (tw == 12 ? 2 : 3))) continue;
                    char variant[32];
                    std::snprintf(variant, sizeof variant, "u%db%d%s%s", unroll, blocks, pipe ? "p" : "", tw == 4 ? "t2" : tw == 12 ? "w12" : tw == 2 ? "t4" : "");
                    kname = kernel == 0 ? "simt" : kernel == 1 ? "tc" : variant;
                    launch = [p, kernel, unroll, blocks, pipe, tw, &t](const void* wp) {
                        GemvQuantParams q = p;
                        q.w = wp;
                        return kernel == 0   ? gemv_quant_simt_launch(q, t.s)
                               : kernel == 1 ? gemv_quant_tc_launch(q, t.s)
                                             : gemv_quant_tc_launch_tuned(q, unroll, blocks, pipe, t.s, tw);
                    };
                }
                time_row(t, gbs, sh.name, f.name, kname.c_str(), cost.bytes, launch, w, copies);
            }
        }
    }
    return 0;
}
#endif
