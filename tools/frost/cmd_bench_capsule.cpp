// `frost bench capsule`: cold TTFT (prefill prefix + suffix) against capsule TTFT (restore the
// prefix's capsule from each tier + prefill the suffix) across prefix lengths; snapshot and restore
// time per tier with GB/s against copy ceilings measured in the same run (D2D, D2H, H2D buffer
// copies of the same size; a raw file write+fsync and read); capsule bytes. Writes JSON and an SVG
// plot of TTFT against prefix length.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_registry.h"
#include "bench_util.h"
#include "capsule_plot.h"
#include "engine_args.h"
#include "model/capsule.h"
#include "model/engine.h"
#include "model/synth.h"

namespace {

namespace fm = frost::model;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: frost bench capsule [--model DIR | --preset NAME] [--backend cpu|cuda] [--lengths L1,L2,...]\n"
    "         [--suffix N] [--reps N] [--chunk C_p] [--chunk-invariant] [--out-dir DIR] [--json]\n"
    "  Prefix lengths are rounded down to multiples of 64 (the capsule alignment unit). Without --model a\n"
    "  synthetic checkpoint of --preset (default tiny) is written under --out-dir. --chunk: the prefill\n"
    "  chunk C_p (default 256; 0: the engine's own choice). Each row says whether the capsule path's\n"
    "  last logits equal the cold prefill's bit for bit (and their largest difference);\n"
    "  --chunk-invariant runs the engine's chunk-invariant numerics. Writes\n"
    "  DIR/capsule_bench.json and DIR/capsule_ttft.svg (default DIR: ./capsule-bench).";

constexpr double kBytesPerGB = 1e9;
constexpr int kDefaultChunk = 256;  // C_p of the benchmark engine unless --chunk says
const fm::CapsuleTier kTiers[] = {fm::CapsuleTier::Device, fm::CapsuleTier::Host, fm::CapsuleTier::Disk};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Median wall time (ms) of `reps` runs of fn; -1 if any run fails.
double time_ms(int reps, const std::function<bool()>& fn) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        if (!fn()) return -1;
        t.push_back(ms_since(t0));
    }
    return median(t);
}

double gbps(uint64_t bytes, double ms) { return ms > 0 ? double(bytes) / kBytesPerGB / (ms / 1e3) : 0; }

struct Ceilings {
    double d2d = 0, d2h = 0, h2d = 0, disk_write = 0, disk_read = 0;  // GB/s
};

// Copy ceilings for `bytes`, measured with the same contract calls the capsule layer uses.
Ceilings measure_ceilings(fm::Engine& e, size_t bytes, int reps, const std::string& dir) {
    Ceilings c;
    frost_buffer *d0 = nullptr, *d1 = nullptr, *h = nullptr;
    frost_stream* st = e.stream();
    if (frost_buffer_alloc(e.ctx(), "bench.d0", bytes, FROST_SPACE_DEVICE, &d0) == FROST_OK &&
        frost_buffer_alloc(e.ctx(), "bench.d1", bytes, FROST_SPACE_DEVICE, &d1) == FROST_OK &&
        frost_buffer_alloc(e.ctx(), "bench.h", bytes, FROST_SPACE_HOST_PINNED, &h) == FROST_OK) {
        frost_buffer_fill(d0, 0, 1, bytes, st);
        frost_buffer_fill(h, 0, 2, bytes, st);
        frost_stream_sync(st);
        auto copy = [&](frost_buffer* dst, frost_buffer* src) {
            return time_ms(reps, [&] {
                return frost_buffer_copy(dst, 0, src, 0, bytes, st) == FROST_OK && frost_stream_sync(st) == FROST_OK;
            });
        };
        c.d2d = gbps(bytes, copy(d1, d0));
        c.d2h = gbps(bytes, copy(h, d0));
        c.h2d = gbps(bytes, copy(d1, h));
        const std::string path = dir + "/ceiling.bin";
        const void* p = frost_buffer_ptr(h);
        c.disk_write = gbps(bytes, time_ms(reps, [&] {
                                int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                                if (fd < 0) return false;
                                bool ok = ::write(fd, p, bytes) == ssize_t(bytes) && ::fsync(fd) == 0;
                                ::close(fd);
                                return ok;
                            }));
        c.disk_read = gbps(bytes, time_ms(reps, [&] {
                               int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
                               if (fd < 0) return false;
                               bool ok = ::pread(fd, frost_buffer_ptr(h), bytes, 0) == ssize_t(bytes);
                               ::close(fd);
                               return ok;
                           }));
        std::filesystem::remove(path);
    }
    frost_buffer_free(d0);
    frost_buffer_free(d1);
    frost_buffer_free(h);
    return c;
}

std::vector<int32_t> random_ids(size_t n, std::mt19937_64& rng, int vocab) {
    std::uniform_int_distribution<int32_t> d(0, vocab - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

int fail_msg(const char* what) {
    std::fprintf(stderr, "frost bench capsule: %s: %s\n", what, frost_last_error());
    return 1;
}

int run_bench_capsule(const std::vector<std::string>& args) {
    std::string model, preset = "tiny", backend = "cpu", out_dir = "capsule-bench", lengths_arg = "256,512,1024,2048";
    int suffix = 16, reps = 3, chunk = kDefaultChunk;
    bool as_json = false, chunk_invariant = false;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (a == "--json") { as_json = true; continue; }
            if (a == "--chunk-invariant") { chunk_invariant = true; continue; }
            if (a == "--help" || a == "-h") { std::printf("%s\n", kUsage); return 0; }
            if (i + 1 >= args.size()) { std::fprintf(stderr, "%s\n", kUsage); return 2; }
            const std::string& v = args[++i];
            if (a == "--model") model = v;
            else if (a == "--preset") preset = v;
            else if (a == "--backend") backend = v;
            else if (a == "--lengths") lengths_arg = v;
            else if (a == "--suffix") suffix = std::max(1, std::stoi(v));
            else if (a == "--reps") reps = std::max(1, std::stoi(v));
            else if (a == "--chunk") chunk = std::stoi(v);
            else if (a == "--out-dir") out_dir = v;
            else { std::fprintf(stderr, "frost bench capsule: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr, "frost bench capsule: bad numeric value\n%s\n", kUsage);
        return 2;
    }
    if (chunk < 0 || chunk % fm::kCapsuleAlignment) {
        std::fprintf(stderr, "frost bench capsule: --chunk must be 0 (auto) or a positive multiple of %d\n",
                     fm::kCapsuleAlignment);
        return 2;
    }
    std::vector<int32_t> lens;
    if (!fm::parse_id_list(lengths_arg, &lens)) { std::fprintf(stderr, "--lengths wants L1,L2,...\n"); return 2; }
    for (auto& l : lens) l = l / fm::kCapsuleAlignment * fm::kCapsuleAlignment;
    lens.erase(std::remove(lens.begin(), lens.end(), 0), lens.end());
    if (lens.empty()) { std::fprintf(stderr, "frost bench capsule: no prefix length >= 64\n"); return 2; }
    std::error_code ec;
    std::filesystem::create_directories(out_dir + "/capsules", ec);
    if (frost::cli::model_from_preset(&model, preset, out_dir) != FROST_OK) return fail_msg("synthesising the model");
    fm::EngineOptions eo;
    if (!frost::cli::parse_backend(backend, &eo.backend)) { std::fprintf(stderr, "--backend must be cpu or cuda\n"); return 2; }
    eo.sessions = 2;
    eo.prefill_chunk = chunk;
    eo.chunk_invariant = chunk_invariant;
    eo.max_seq_len = *std::max_element(lens.begin(), lens.end()) + suffix + 1;
    std::unique_ptr<fm::Engine> e;
    if (fm::Engine::create(model, eo, &e) != FROST_OK) return fail_msg("loading the model");
    std::unique_ptr<fm::CapsuleManager> mgr;
    if (fm::CapsuleManager::for_model_dir(*e, model, {out_dir + "/capsules"}, &mgr) != FROST_OK)
        return fail_msg("fingerprinting the model");
    std::mt19937_64 rng(1);
    const int vocab = e->config().vocab_size;

    nlohmann::json rows = nlohmann::json::array();
    std::map<fm::CapsuleTier, std::vector<double>> capsule_ttft;
    std::vector<double> xs, cold_ttft;
    size_t max_payload = 0;
    for (int L : lens) {
        const auto prefix = random_ids(size_t(L), rng, vocab);
        const auto suf = random_ids(size_t(suffix), rng, vocab);
        std::vector<int32_t> full = prefix;
        full.insert(full.end(), suf.begin(), suf.end());
        int32_t cold_tok = -1;
        const double cold = time_ms(reps, [&] {
            return e->reset(0) == FROST_OK && e->prefill(0, full.data(), full.size(), &cold_tok) == FROST_OK;
        });
        if (cold < 0) return fail_msg("cold prefill");
        std::vector<float> cold_logits, warm_logits;
        if (e->last_logits(0, &cold_logits) != FROST_OK) return fail_msg("cold logits");
        if (e->reset(0) != FROST_OK || e->prefill(0, prefix.data(), prefix.size(), nullptr) != FROST_OK)
            return fail_msg("prefix prefill");
        nlohmann::json row = {{"prefix_tokens", L}, {"suffix_tokens", suffix}, {"cold_ttft_ms", cold}};
        xs.push_back(L);
        cold_ttft.push_back(cold);
        bool tokens_match = true, logits_equal = true;
        double max_diff = 0;  // largest |capsule - cold| over the last logits of every tier
        for (fm::CapsuleTier t : kTiers) {
            fm::CapsuleId id = 0;
            const double snap = time_ms(reps, [&] {
                if (id) mgr->release(id);
                return mgr->snapshot(0, t, &id) == FROST_OK;
            });
            if (snap < 0) return fail_msg("snapshot");
            fm::CapsuleInfo info;
            mgr->info(id, &info);
            const uint64_t bytes = info.meta.bytes().total();
            max_payload = std::max(max_payload, info.meta.payload_bytes);
            // Bytes a restore moves: the parts' valid bytes into the live buffers (device, host);
            // from disk the whole payload is read (parts + 4 KiB alignment gaps), which is what the
            // file-read ceiling is compared with.
            const uint64_t moved = t == fm::CapsuleTier::Disk ? info.meta.payload_bytes : bytes;
            // One untimed restore first: the disk tier allocates its pinned staging ring on first
            // use, and the first copies touch cold pages. The timed region is the manager's restore
            // alone: its copies plus the one stream sync inside it (the engine's cursor read-back);
            // the bench adds no sync of its own.
            if (mgr->restore(id, 1, nullptr) != FROST_OK) return fail_msg("restore (warm-up)");
            const double restore = time_ms(reps, [&] { return mgr->restore(id, 1, nullptr) == FROST_OK; });
            int32_t tok = -1;
            const double ttft = time_ms(reps, [&] {
                return mgr->restore(id, 1, nullptr) == FROST_OK && e->prefill(1, suf.data(), suf.size(), &tok) == FROST_OK;
            });
            if (restore < 0 || ttft < 0) return fail_msg("restore");
            tokens_match = tokens_match && tok == cold_tok;
            if (e->last_logits(1, &warm_logits) != FROST_OK || warm_logits.size() != cold_logits.size())
                return fail_msg("capsule logits");
            logits_equal = logits_equal && std::memcmp(warm_logits.data(), cold_logits.data(),
                                                       cold_logits.size() * sizeof(float)) == 0;
            for (size_t i = 0; i < cold_logits.size(); ++i)
                max_diff = std::max(max_diff, double(std::fabs(warm_logits[i] - cold_logits[i])));
            capsule_ttft[t].push_back(ttft);
            const std::string tn = fm::capsule_tier_name(t);
            row["capsule_bytes"] = bytes;
            row["payload_bytes"] = info.meta.payload_bytes;
            row["snapshot_ms_" + tn] = snap;
            row["restore_ms_" + tn] = restore;
            row["snapshot_gbps_" + tn] = gbps(bytes, snap);
            row["restore_bytes_" + tn] = moved;
            row["restore_gbps_" + tn] = gbps(moved, restore);
            row["capsule_ttft_ms_" + tn] = ttft;
            row["ttft_speedup_" + tn] = ttft > 0 ? cold / ttft : 0;
            mgr->release(id);
        }
        row["first_token_matches_cold"] = tokens_match;
        row["logits_bitwise_equal_cold"] = logits_equal;
        row["logits_max_abs_diff"] = max_diff;
        rows.push_back(row);
    }
    const Ceilings c = measure_ceilings(*e, std::max<size_t>(max_payload, 1), reps, out_dir);
    // Ceiling per tier and direction: device D2D both ways; host D2H / H2D; disk the raw file
    // write+fsync / read of the same byte count.
    const std::map<std::string, std::pair<double, double>> ceil = {
        {"device", {c.d2d, c.d2d}}, {"host", {c.d2h, c.h2d}}, {"disk", {c.disk_write, c.disk_read}}};
    for (auto& row : rows)
        for (const auto& [tn, cw] : ceil) {
            row["snapshot_pct_of_ceiling_" + tn] = cw.first > 0 ? 100 * row["snapshot_gbps_" + tn].get<double>() / cw.first : 0;
            row["restore_pct_of_ceiling_" + tn] = cw.second > 0 ? 100 * row["restore_gbps_" + tn].get<double>() / cw.second : 0;
        }
    nlohmann::json out = {{"bench", "capsule"},
                          {"model", model},
                          {"backend", backend},
                          {"prefill_chunk", e->options().prefill_chunk},
                          {"chunk_invariant", chunk_invariant},
                          {"alignment", fm::kCapsuleAlignment},
                          {"reps", reps},
                          {"ceilings_gbps", {{"d2d", c.d2d}, {"d2h", c.d2h}, {"h2d", c.h2d},
                                             {"disk_write_fsync", c.disk_write}, {"disk_read", c.disk_read}}},
                          {"rows", rows}};
    std::vector<frost::cli::PlotSeries> series = {{"cold prefill", "#d62728", xs, cold_ttft},
                                                  {"capsule (device)", "#1f77b4", xs, capsule_ttft[fm::CapsuleTier::Device]},
                                                  {"capsule (host)", "#2ca02c", xs, capsule_ttft[fm::CapsuleTier::Host]},
                                                  {"capsule (disk)", "#9467bd", xs, capsule_ttft[fm::CapsuleTier::Disk]}};
    const std::string svg = frost::cli::svg_line_chart("TTFT vs shared prefix (" + backend + ", suffix " +
                                                           std::to_string(suffix) + " tokens)",
                                                       "prefix tokens", "TTFT (ms)", series);
    std::ofstream(out_dir + "/capsule_ttft.svg") << svg;
    std::ofstream(out_dir + "/capsule_bench.json") << out.dump(2) << "\n";
    if (as_json) {
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    std::printf("ceilings GB/s: d2d %.2f  d2h %.2f  h2d %.2f  disk write+fsync %.2f  disk read %.2f\n", c.d2d, c.d2h,
                c.h2d, c.disk_write, c.disk_read);
    std::printf("prefill chunk %d%s; \"logits\": the capsule path's last logits against the cold prefill's\n",
                e->options().prefill_chunk, chunk_invariant ? ", chunk-invariant numerics" : "");
    std::printf("%8s %10s %10s %10s %10s %10s %8s %10s %10s %10s %s\n", "prefix", "bytes", "cold ms", "dev ms", "host ms",
                "disk ms", "speedup", "rst dev", "rst host", "rst disk", "logits");
    for (const auto& r : rows)
        std::printf("%8d %10llu %10.2f %10.2f %10.2f %10.2f %7.1fx %7.2fGB/s %7.2fGB/s %7.2fGB/s %s%s\n",
                    r["prefix_tokens"].get<int>(), static_cast<unsigned long long>(r["capsule_bytes"].get<uint64_t>()),
                    r["cold_ttft_ms"].get<double>(), r["capsule_ttft_ms_device"].get<double>(),
                    r["capsule_ttft_ms_host"].get<double>(), r["capsule_ttft_ms_disk"].get<double>(),
                    r["ttft_speedup_device"].get<double>(), r["restore_gbps_device"].get<double>(),
                    r["restore_gbps_host"].get<double>(), r["restore_gbps_disk"].get<double>(),
                    r["logits_bitwise_equal_cold"].get<bool>()
                        ? "bitwise equal"
                        : ("max |diff| " + std::to_string(r["logits_max_abs_diff"].get<double>())).c_str(),
                    r["first_token_matches_cold"].get<bool>() ? "" : "  (first token differs!)");
    std::printf("wrote %s/capsule_bench.json and %s/capsule_ttft.svg\n", out_dir.c_str(), out_dir.c_str());
    return 0;
}

}  // namespace

FROST_BENCH_KIND("capsule", "cold vs capsule TTFT across prefix lengths; snapshot/restore GB/s per tier",
                 run_bench_capsule);
