// CPU baseline: the machine's measured FMA peak, the GEMM's GFLOP/s beside it, and engine prefill
// tokens/s and decode ms/token on a tiny and a 0.8B-shaped synthetic Qwen3.5 (made on first use
// under $FROST_BENCH_DIR, default .frost/bench). Not a test: prints a table, asserts nothing.
// usage: bench_cpu_engine [--skip-08b] [--prefill N] [--decode N]
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "exec/error.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "model/engine.h"
#include "model/synth.h"

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kPeakChains = 10;            // independent FMA chains: covers latency x throughput
constexpr long kPeakIters = 40'000'000;    // per thread
constexpr double kFlopsPerFmaVec = 16;     // 8 lanes x (mul + add)

// One thread's independent AVX2 FMA chains (the bench target is built without -march flags).
__attribute__((target("avx2,fma"))) float fma_chains() {
    __m256 acc[kPeakChains];
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < kPeakIters; ++it)
        for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    float s = 0;
    for (int i = 0; i < kPeakChains; ++i) s += _mm256_cvtss_f32(acc[i]);
    return s;
}

// Peak FMA GFLOP/s of `threads` threads running fma_chains.
double fma_peak(int threads) {
    std::vector<std::thread> ts;
    std::vector<float> sink(threads);
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t) ts.emplace_back([t, &sink] { sink[t] = fma_chains(); });
    for (auto& th : ts) th.join();
    const double dt = secs(t0);
    return threads * double(kPeakIters) * kPeakChains * kFlopsPerFmaVec / dt / 1e9;
}

double gemm_gflops(int M, int K, int N, int reps) {
    std::mt19937 r(1);
    std::normal_distribution<float> d;
    std::vector<float> x(size_t(M) * K), w(size_t(N) * K), y(size_t(M) * N);
    for (auto& v : x) v = d(r);
    for (auto& v : w) v = d(r);
    frost::kernels::GemmParams p{};
    p.x = x.data(); p.w = w.data(); p.y = y.data(); p.ldx = K; p.ldy = N; p.K = K; p.N = N; p.max_rows = M;
    frost::kernels::cpu::gemm(p);  // warm
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) frost::kernels::cpu::gemm(p);
    return 2.0 * M * K * N * reps / secs(t0) / 1e9;
}

bool ensure_model(const std::string& dir, const std::string& preset) {
    std::error_code ec;
    if (std::filesystem::exists(dir + "/config.json", ec)) return true;
    frost::model::SynthOptions so;
    so.out_dir = dir;
    so.preset = preset;
    so.seed = 7;
    std::printf("  creating synthetic %s checkpoint in %s ...\n", preset.c_str(), dir.c_str());
    std::fflush(stdout);
    if (frost::model::synth_checkpoint(so) != FROST_OK) {
        std::fprintf(stderr, "synth %s: %s\n", preset.c_str(), frost_last_error());
        return false;
    }
    return true;
}

void bench_engine(const std::string& dir, const std::string& label, int prefill, int decode, int chunk) {
    using namespace frost::model;
    EngineOptions o;
    o.max_seq_len = prefill + decode + 1;
    o.prefill_chunk = chunk;
    std::unique_ptr<Engine> e;
    const auto tl = Clock::now();
    if (Engine::create(dir, o, &e) != FROST_OK) {
        std::fprintf(stderr, "%s: %s\n", label.c_str(), frost_last_error());
        return;
    }
    const double load_s = secs(tl);
    std::vector<int32_t> ids(prefill);
    for (int i = 0; i < prefill; ++i) ids[i] = (i * 7919 + 13) % e->config().vocab_size;
    int32_t next = 0;
    const auto t0 = Clock::now();
    if (e->prefill(0, ids.data(), ids.size(), &next) != FROST_OK) {
        std::fprintf(stderr, "%s prefill: %s\n", label.c_str(), frost_last_error());
        return;
    }
    const double pf = secs(t0);
    const auto t1 = Clock::now();
    for (int i = 0; i < decode; ++i)
        if (e->decode(0, &next) != FROST_OK) {
            std::fprintf(stderr, "%s decode: %s\n", label.c_str(), frost_last_error());
            return;
        }
    const double dc = secs(t1);
    const double wbytes = double(e->weight_bytes());
    std::printf("  %-6s load %6.2f s | prefill %4d tok (C_p %d): %8.1f tok/s | decode %3d tok: %8.2f ms/token "
                "(%.1f GB/s of fp32 weights)\n",
                label.c_str(), load_s, prefill, chunk, prefill / pf, decode, 1e3 * dc / decode,
                wbytes * decode / dc / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
    bool skip08 = false;
    int prefill = 256, decode = 16;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--skip-08b")) skip08 = true;
        else if (!std::strcmp(argv[i], "--prefill") && i + 1 < argc) prefill = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--decode") && i + 1 < argc) decode = std::atoi(argv[++i]);
    }
    const int threads = frost::kernels::cpu::threads();
    std::printf("frost CPU baseline (%d threads)\n", threads);
    const double peak1 = fma_peak(1), peakN = fma_peak(threads);
    std::printf("  FMA peak: %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads)\n", peak1, peakN, threads);
    struct Shape { int M, K, N; const char* what; };
    const Shape shapes[] = {{256, 1024, 3584, "prefill 256 x MLP up (0.8B)"},
                            {64, 1024, 1024, "prefill 64 x 1024^2"},
                            {1, 1024, 3584, "decode 1 x MLP up (0.8B)"}};
    for (int t : {threads, 1}) {
        frost::kernels::cpu::set_threads(t);
        const double peak = t == 1 ? peak1 : peakN;
        for (const auto& s : shapes) {
            const double flop = 2.0 * s.M * s.K * s.N;
            const int reps = std::max(1, int(2e10 / flop));
            const double g = gemm_gflops(s.M, s.K, s.N, std::min(reps, 200));
            std::printf("  GEMM %-30s M=%-4d K=%-5d N=%-5d %7.1f GFLOP/s = %5.1f%% of %d-thread peak\n", s.what,
                        s.M, s.K, s.N, g, 100 * g / peak, t);
        }
    }
    frost::kernels::cpu::set_threads(threads);
    const char* env = std::getenv("FROST_BENCH_DIR");
    const std::string base = env ? env : ".frost/bench";
    if (ensure_model(base + "/tiny", "tiny")) bench_engine(base + "/tiny", "tiny", prefill, decode, 256);
    if (!skip08 && ensure_model(base + "/0.8b", "0.8b"))
        bench_engine(base + "/0.8b", "0.8b", std::min(prefill, 128), std::min(decode, 4), 128);
    return 0;
}
