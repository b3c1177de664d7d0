// `frost bench load MODEL_DIR [--json]`: weight-loading throughput of model/loader.h against a raw
// sequential read of the same files measured in the same run, cold (page cache dropped where
// permitted) and warm. The ratio loader/raw is the number that matters (target >= 0.7).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_registry.h"
#include "model/loader.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "util/progress.h"

namespace {

namespace fm = frost::model;
constexpr size_t kRawReadBytes = size_t(16) << 20;
constexpr double kBytesPerGB = 1e9;

// Evicts the files from the page cache: the global drop_caches if we may write it (root), else
// POSIX_FADV_DONTNEED per file (evicts clean, unmapped pages). Returns which method worked.
std::string drop_cache(const std::vector<std::string>& paths) {
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        bool ok = write(fd, "1", 1) == 1;
        close(fd);
        if (ok) return "drop_caches";
    }
    bool all = true;
    for (const auto& p : paths) {
        int f = open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (f < 0 || posix_fadvise(f, 0, 0, POSIX_FADV_DONTNEED) != 0) all = false;
        if (f >= 0) close(f);
    }
    return all ? "fadvise_dontneed" : "none";
}

// Plain sequential read() of every file; returns bytes read, or 0 on error.
uint64_t raw_read(const std::vector<std::string>& paths, double* seconds) {
    std::vector<char> buf(kRawReadBytes);
    uint64_t total = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& p : paths) {
        int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return 0;
        for (ssize_t n; (n = read(fd, buf.data(), buf.size())) > 0;) total += uint64_t(n);
        close(fd);
    }
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return total;
}

struct Pass {
    double raw_gbps = 0, loader_gbps = 0;
    std::string cache;
};

int run_load(const std::vector<std::string>& args) {
    std::string dir;
    bool as_json = false;
    fm::WeightUploadOptions opt;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--json") as_json = true;
        else if (args[i] == "--threads" && i + 1 < args.size()) opt.read_threads = std::max(1, std::atoi(args[++i].c_str()));
        else if (args[i] == "--staging-mb" && i + 1 < args.size()) opt.staging_bytes = size_t(std::max(1, std::atoi(args[++i].c_str()))) << 20;
        else if (dir.empty()) dir = args[i];
        else {
            std::fprintf(stderr, "usage: frost bench load MODEL_DIR [--json] [--threads N] [--staging-mb M]\n");
            return 2;
        }
    }
    if (dir.empty()) {
        std::fprintf(stderr, "usage: frost bench load MODEL_DIR [--json] [--threads N] [--staging-mb M]\n");
        return 2;
    }
    opt.progress = !as_json;
    fm::ModelWeights w;
    if (fm::load_weights(dir, &w) != FROST_OK) {
        std::fprintf(stderr, "frost bench load: %s\n", frost_last_error());
        return 1;
    }
    const frost_backend backend = frost_backend_available(FROST_BACKEND_CUDA) ? FROST_BACKEND_CUDA : FROST_BACKEND_CPU;
    frost_ctx* ctx = nullptr;
    if (frost_ctx_create(backend, 0, &ctx) != FROST_OK) {
        std::fprintf(stderr, "frost bench load: %s\n", frost_last_error());
        return 1;
    }
    const auto paths = w.checkpoint->paths();
    Pass passes[2];
    uint64_t raw_bytes = 0, loaded_bytes = 0;
    int rc = 0;
    for (int warm = 0; warm < 2 && rc == 0; ++warm) {
        Pass& p = passes[warm];
        p.cache = warm ? "warm" : drop_cache(paths);
        double raw_s = 0;
        raw_bytes = raw_read(paths, &raw_s);
        if (!warm) drop_cache(paths);
        fm::UploadedWeights u;
        if (raw_bytes == 0 || fm::upload_weights(ctx, w, opt, &u) != FROST_OK) {
            std::fprintf(stderr, "frost bench load: %s\n", raw_bytes ? frost_last_error() : "raw read failed");
            rc = 1;
            break;
        }
        loaded_bytes = u.bytes_from_files + u.bytes_from_memory;
        p.raw_gbps = double(raw_bytes) / raw_s / kBytesPerGB;
        p.loader_gbps = double(loaded_bytes) / u.seconds / kBytesPerGB;
        u.release();
    }
    if (rc == 0) {
        if (as_json) {
            nlohmann::json j = {{"model_dir", dir}, {"backend", backend == FROST_BACKEND_CUDA ? "cuda" : "cpu"},
                                {"raw_bytes", raw_bytes}, {"loaded_bytes", loaded_bytes},
                                {"read_threads", opt.read_threads}, {"staging_bytes", opt.staging_bytes}};
            for (int k = 0; k < 2; ++k)
                j[k ? "warm" : "cold"] = {{"cache_drop", passes[k].cache}, {"raw_gbps", passes[k].raw_gbps},
                                          {"loader_gbps", passes[k].loader_gbps},
                                          {"ratio", passes[k].loader_gbps / passes[k].raw_gbps}};
            std::printf("%s\n", j.dump(2).c_str());
        } else {
            std::printf("load %s on %s: %.3f GB of weights (%.3f GB of files)\n", dir.c_str(),
                        backend == FROST_BACKEND_CUDA ? "cuda" : "cpu", double(loaded_bytes) / kBytesPerGB,
                        double(raw_bytes) / kBytesPerGB);
            for (int k = 0; k < 2; ++k)
                std::printf("  %-4s (%s): raw sequential read %.2f GB/s, loader %.2f GB/s, ratio %.2f\n",
                            k ? "warm" : "cold", passes[k].cache.c_str(), passes[k].raw_gbps, passes[k].loader_gbps,
                            passes[k].loader_gbps / passes[k].raw_gbps);
        }
    }
    frost_ctx_destroy(ctx);
    return rc;
}

}  // namespace

FROST_BENCH_KIND("load", "weight load GB/s vs a raw sequential read of the same files (cold and warm)", run_load);
