// Per-op table of the model's own forward: builds the engine on a checkpoint (or a synthetic
// preset), lets it record one prefill chunk and one decode step with an op observer
// (Engine::record_ops), then times every recorded op alone through its replay closure: the
// launch the captured graphs hold, with the same params. Bytes and FLOPs are the ops' cost model
// (ops/cost.cpp), at the step's context. Works on both backends.
// Usage: bench_ops [--model DIR | --preset NAME] [--backend cpu|cuda] [--rows R] [--pos P]
//                  [--reps N] [--batch B] [--quant FMT] [--fp8-prefill w8a8] [--json out.json]
// --batch B (2, 4 or 8; CUDA batched kernels or the CPU): B sessions at `pos`, and the decode phase
// is one batched step of all B (Engine::record_batch_ops) instead of a solo step.
// --quant FMT synthesises the preset in that format (fp8, nvfp4, int4, ...: SynthOptions::quant);
// --fp8-prefill w8a8 runs an FP8 checkpoint's prefill GEMMs on FP8 tensor cores
// (EngineOptions::fp8_w8a8_prefill), so the table shows where W8A8 prefill spends its time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "model/engine.h"
#include "model/synth.h"

namespace {

namespace fm = frost::model;
namespace fo = frost::ops;
using Clock = std::chrono::steady_clock;

struct Args {
    std::string model, preset = "tiny", backend = "cpu", json, quant;
    int rows = 256, pos = 1024, reps = 20, batch = 1;
    bool fp8_w8a8 = false;
};

struct Line {
    std::string label;
    fo::OpKind kind;
    int count = 0;     // launches per step
    double us = 0;     // summed median time of those launches
    double bytes = 0, flops = 0;
};

// Median wall time (us) of one replay: `reps` replays back to back per sample, 5 samples.
double time_op(frost_stream* st, const fo::OpRecord& r, int reps) {
    std::vector<double> samples;
    for (int s = 0; s < 6; ++s) {  // sample 0 warms up
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i)
            if (r.replay(st) != FROST_OK) return -1;
        if (frost_stream_sync(st) != FROST_OK) return -1;
        if (s) samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

// Records one step, times each op, groups the lines by label in forward order.
bool run_phase(fm::Engine& e, const char* phase, int rows, bool decode, int batch, int reps, nlohmann::json* out) {
    std::vector<fo::OpRecord> recs;
    const fo::OpObserver keep = [&](const fo::OpRecord& r) { recs.push_back(r); };
    if ((batch > 1 ? e.record_batch_ops(batch, keep) : e.record_ops(0, rows, decode, keep)) != FROST_OK) return false;
    fo::OpCost step_cost;
    for (const auto& r : recs) step_cost.add(r.cost);
    std::vector<Line> lines;
    std::map<std::string, size_t> at;
    double total_us = 0;
    for (const auto& r : recs) {
        const double us = time_op(e.stream(), r, reps);
        if (us < 0) return false;
        auto it = at.find(r.label);
        if (it == at.end()) {
            it = at.emplace(r.label, lines.size()).first;
            lines.push_back({r.label, r.kind});
        }
        Line& l = lines[it->second];
        l.count += 1;
        l.us += us;
        l.bytes += r.cost.bytes;
        l.flops += r.cost.flops;
        total_us += us;
    }
    std::printf("\n%s: %d rows, %zu ops, %.1f us summed (ops timed alone)\n", phase, rows, recs.size(), total_us);
    std::printf("  %-28s %-18s %5s %10s %6s %10s %10s\n", "op", "kind", "n", "us", "%", "GB/s", "TFLOP/s");
    for (const Line& l : lines) {
        const double s = l.us / 1e6;
        std::printf("  %-28s %-18s %5d %10.1f %5.1f%% %10.1f %10.3f\n", l.label.c_str(), fo::op_name(l.kind), l.count,
                    l.us, 100.0 * l.us / total_us, l.bytes / s / 1e9, l.flops / s / 1e12);
        (*out)["ops"].push_back({{"phase", phase}, {"op", l.label}, {"kind", fo::op_name(l.kind)}, {"count", l.count},
                                 {"us", l.us}, {"bytes", l.bytes}, {"flops", l.flops}});
    }
    (*out)["steps"].push_back({{"phase", phase}, {"rows", rows}, {"ops", recs.size()}, {"us", total_us},
                               {"bytes", step_cost.bytes}, {"flops", step_cost.flops}});
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!v) return std::fprintf(stderr, "bench_ops: %s needs a value\n", k.c_str()), 2;
        if (k == "--model") a.model = v;
        else if (k == "--preset") a.preset = v;
        else if (k == "--backend") a.backend = v;
        else if (k == "--rows") a.rows = std::atoi(v);
        else if (k == "--pos") a.pos = std::atoi(v);
        else if (k == "--reps") a.reps = std::atoi(v);
        else if (k == "--batch") a.batch = std::atoi(v);
        else if (k == "--json") a.json = v;
        else if (k == "--quant") a.quant = v;
        else if (k == "--fp8-prefill") {
            if (std::strcmp(v, "w8a8") != 0 && std::strcmp(v, "dequant") != 0)
                return std::fprintf(stderr, "bench_ops: --fp8-prefill takes w8a8 or dequant, not %s\n", v), 2;
            a.fp8_w8a8 = std::strcmp(v, "w8a8") == 0;
        }
        else return std::fprintf(stderr, "bench_ops: unknown option %s\n", k.c_str()), 2;
        ++i;
    }
    if (a.model.empty()) {
        const std::string tag = a.quant.empty() ? a.preset : a.preset + "-" + a.quant;
        a.model = (std::filesystem::temp_directory_path() / ("frost-bench-ops-" + tag)).string();
        if (!std::filesystem::exists(a.model + "/config.json")) {
            fm::SynthOptions so;
            so.out_dir = a.model;
            so.preset = a.preset;
            so.quant = a.quant;
            if (fm::synth_checkpoint(so) != FROST_OK)
                return std::fprintf(stderr, "bench_ops: synth %s: %s\n", a.preset.c_str(), frost_last_error()), 1;
        }
    }
    fm::EngineOptions o;
    o.backend = a.backend == "cuda" ? FROST_BACKEND_CUDA : FROST_BACKEND_CPU;
    o.prefill_chunk = (a.rows + 63) / 64 * 64;
    o.fp8_w8a8_prefill = a.fp8_w8a8;
    o.max_seq_len = std::max(a.pos + 2 * o.prefill_chunk, 1024);
    if (a.batch > 1) {  // every replay of the batched cursor advance moves the members on
        o.sessions = a.batch;
        o.max_seq_len += 2048;
    }
    std::unique_ptr<fm::Engine> e;
    if (fm::Engine::create(a.model, o, &e) != FROST_OK)
        return std::fprintf(stderr, "bench_ops: engine: %s\n", frost_last_error()), 1;
    // The context: a prefill of `pos` tokens, so attention reads a realistic KV prefix.
    std::mt19937 rng(7);
    std::vector<int32_t> ids(size_t(std::max(1, a.pos)));
    for (auto& t : ids) t = int32_t(rng() % uint32_t(e->config().vocab_size));
    for (int m = 0; m < std::max(1, a.batch); ++m)
        if (e->prefill(m, ids.data(), ids.size(), nullptr) != FROST_OK)
            return std::fprintf(stderr, "bench_ops: prefill: %s\n", frost_last_error()), 1;
    if (a.batch > 1) {  // one batched step first: its slot vector and cursors are what the replays read
        std::vector<int> members(size_t(a.batch));
        std::vector<int32_t> next(size_t(a.batch));
        for (int m = 0; m < a.batch; ++m) members[size_t(m)] = m;
        if (e->decode_batch(members.data(), a.batch, next.data()) != FROST_OK)
            return std::fprintf(stderr, "bench_ops: decode_batch: %s\n", frost_last_error()), 1;
    }
    nlohmann::json out = {{"model", a.model}, {"backend", a.backend}, {"pos", a.pos}, {"ops", nlohmann::json::array()},
                          {"steps", nlohmann::json::array()}};
    const std::string dphase = a.batch > 1 ? "decode x" + std::to_string(a.batch) : "decode";
    if (!run_phase(*e, dphase.c_str(), a.batch > 1 ? a.batch : 1, true, a.batch, a.reps, &out) ||
        !run_phase(*e, "prefill", o.prefill_chunk, false, 1, a.reps, &out))
        return std::fprintf(stderr, "bench_ops: %s\n", frost_last_error()), 1;
    if (!a.json.empty())
        if (FILE* f = std::fopen(a.json.c_str(), "w")) {
            std::fputs(out.dump(2).c_str(), f);
            std::fclose(f);
        }
    return 0;
}
