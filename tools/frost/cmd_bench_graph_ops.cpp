// `frost bench graph-ops`: what each op of a decode step costs inside the captured graph. Timing an
// op alone (bench_ops) misses how a graph's launches overlap under programmatic dependent launch, and
// the GPU machine has no Nsight Systems, so this measures the step with each op label left out in
// turn (EngineOptions::leave_out_ops "=label": recorded, not launched), one engine per label from
// the same loaded weights, against the full step in the same run. Per label: the ops per step, the
// bytes the cost model counts and their time at the copy ceiling measured in the run, ms/token
// without them, and the time saved per token, per op and over those bytes' time. The probe
// engines' outputs are wrong; only their time is used. Cursor ops are never left out (Engine
// refuses it): without decode_begin the token count stayed the prefill chunk's, the position ran
// past the KV cache, and on the GPU the illegal address poisoned every later probe's context
// (H200, 2026-11-30, the first GPU run).
//
// Paired runs. The first form timed the full step once, before every probe: on the H200 (9B INT4,
// 2026-12-04) a label of one op that costs nothing ("embed") then "saved" 39 us a token, i.e. the
// step drifted by about as much as a label of 8 ops costs, over the minutes the sweep takes. Now
// the full engine stays loaded beside each probe and the two are timed in alternation, one run
// each per repetition (the order flipped every repetition), so each saving is the median of
// differences taken a few seconds apart, and the row gives their range. Where the second engine
// does not fit (its creation fails while the full one is loaded) the sweep frees the full engine
// and goes on unpaired, against the first timing, and says so per row; `--unpaired` asks for that
// from the start.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_registry.h"
#include "bench_util.h"
#include "engine_args.h"
#include "model/engine.h"
#include "model/synth.h"
#include "model/weights.h"

namespace {

namespace fm = frost::model;
using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;

constexpr const char* kUsage =
    "usage: frost bench graph-ops [--model DIR | --preset NAME] [--backend cpu|cuda] [--context N]\n"
    "         [--steps N] [--reps N] [--only L1,L2,...] [--unpaired] [--out-dir DIR] [--json]\n"
    "  Decode ms/token at --context tokens (default 1024; --steps timed steps, default 32, median of\n"
    "  --reps runs, default 3) of the full step and of the step with each op label left out in turn\n"
    "  (every label of the decode step, or the --only ones), each probe a fresh engine on the same\n"
    "  weights. Prints per label: ops per step, MB the cost model counts, their time at the copy\n"
    "  ceiling (a device copy, read + write) measured in the run, ms/token without them, the time\n"
    "  saved per token and per op, and saved over floor. Each probe is timed in alternation with the\n"
    "  full step, one run of each per repetition, and a saving is the median of the paired\n"
    "  differences (their range in the JSON); --unpaired (or a second engine that does not fit) times\n"
    "  the full step once and holds one engine at a time. Cursor ops are kept (every later op\n"
    "  addresses memory by the position they hold). A probe that fails is reported and the others\n"
    "  go on. Without --model a\n"
    "  synthetic checkpoint of --preset (default tiny) is written under --out-dir (default\n"
    "  ./engine-bench). --json prints JSON on stdout and the table on stderr.";

constexpr int kSeqSlack = 64;
constexpr int kWarmSteps = 2;  // untimed decode steps before each timed run
constexpr size_t kCeilingBytesCuda = size_t(256) << 20;
constexpr size_t kCeilingBytesCpu = size_t(16) << 20;

struct Args {
    std::string model, preset = "tiny", backend = "cpu", out_dir = "engine-bench";
    int context = 1024, steps = 32, reps = 3;
    std::vector<std::string> only;
    bool json = false;
    bool unpaired = false;
};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// Returns -1 when parsing succeeded, else the exit code.
int parse_args(const std::vector<std::string>& args, Args* a) {
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& k = args[i];
            if (k == "--json") { a->json = true; continue; }
            if (k == "--unpaired") { a->unpaired = true; continue; }
            if (k == "--help" || k == "-h") { std::printf("%s\n", kUsage); return 0; }
            if (i + 1 >= args.size()) { std::fprintf(stderr, "%s\n", kUsage); return 2; }
            const std::string& v = args[++i];
            if (k == "--model") a->model = v;
            else if (k == "--preset") a->preset = v;
            else if (k == "--backend") a->backend = v;
            else if (k == "--out-dir") a->out_dir = v;
            else if (k == "--context") a->context = std::stoi(v);
            else if (k == "--steps") a->steps = std::stoi(v);
            else if (k == "--reps") a->reps = std::stoi(v);
            else if (k == "--only") a->only = frost::cli::split_list(v);
            else {
                std::fprintf(stderr, "frost bench graph-ops: unknown option %s\n%s\n", k.c_str(), kUsage);
                return 2;
            }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr, "frost bench graph-ops: bad numeric value\n%s\n", kUsage);
        return 2;
    }
    if (a->context < 1 || a->steps < 1 || a->reps < 1) {
        std::fprintf(stderr, "frost bench graph-ops: --context, --steps and --reps must be positive\n");
        return 2;
    }
    return -1;
}

int fail_msg(const char* what) {
    std::fprintf(stderr, "frost bench graph-ops: %s: %s\n", what, frost_last_error());
    return 1;
}

// One run's decode ms/token at the prompt's length: a reset, the prompt, kWarmSteps untimed steps,
// then `steps` timed ones (every run at the same positions). False (and frost_last_error) when a
// step fails.
bool time_run(fm::Engine& e, const std::vector<int32_t>& prompt, int steps, double* ms_per_token) {
    int32_t tok = -1;
    if (e.reset(0) != FROST_OK || e.prefill(0, prompt.data(), prompt.size(), &tok) != FROST_OK) return false;
    for (int i = 0; i < kWarmSteps; ++i)
        if (e.decode(0, &tok) != FROST_OK) return false;
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i)
        if (e.decode(0, &tok) != FROST_OK) return false;
    *ms_per_token = ms_since(t0) / steps;
    return true;
}

// The median of `reps` runs.
bool time_decode(fm::Engine& e, const std::vector<int32_t>& prompt, int steps, int reps, double* ms_per_token) {
    std::vector<double> runs(static_cast<size_t>(reps));
    for (double& r : runs)
        if (!time_run(e, prompt, steps, &r)) return false;
    *ms_per_token = median(runs);
    return true;
}

// A probe against the full step: `reps` runs of each, alternating (the full one first in even
// repetitions, the probe first in odd ones). full / probe: the medians of each engine's runs;
// diffs: full - probe per repetition.
struct Paired {
    double full = 0, probe = 0;
    std::vector<double> diffs;
};
bool time_paired(fm::Engine& full, fm::Engine& probe, const std::vector<int32_t>& prompt, int steps, int reps, Paired* out) {
    std::vector<double> f(static_cast<size_t>(reps)), q(static_cast<size_t>(reps));
    out->diffs.clear();
    for (int r = 0; r < reps; ++r) {
        const size_t i = size_t(r);
        const bool full_first = r % 2 == 0;
        if (!time_run(full_first ? full : probe, prompt, steps, full_first ? &f[i] : &q[i]) ||
            !time_run(full_first ? probe : full, prompt, steps, full_first ? &q[i] : &f[i]))
            return false;
        out->diffs.push_back(f[i] - q[i]);
    }
    out->full = median(f);
    out->probe = median(q);
    return true;
}

int run(const std::vector<std::string>& args) {
    Args a;
    if (const int rc = parse_args(args, &a); rc >= 0) return rc;
    fm::EngineOptions eo;
    if (!frost::cli::parse_backend(a.backend, &eo.backend)) {
        std::fprintf(stderr, "frost bench graph-ops: --backend must be cpu or cuda\n");
        return 2;
    }
    const bool cuda = eo.backend == FROST_BACKEND_CUDA;
    if (frost::cli::model_from_preset(&a.model, a.preset, a.out_dir) != FROST_OK) return fail_msg("synthesising the model");
    eo.max_seq_len = a.context + kWarmSteps + a.steps + kSeqSlack;
    eo.sessions = 1;
    fm::ModelWeights w;  // loaded once: every probe engine uploads from it
    if (fm::load_weights(a.model, &w, fm::weight_load_options(eo)) != FROST_OK) return fail_msg("loading the weights");

    std::unique_ptr<fm::Engine> full;
    if (fm::Engine::create_from_weights(w, eo, &full) != FROST_OK) return fail_msg("creating the engine");
    std::mt19937_64 rng(std::random_device{}());
    std::vector<int32_t> prompt(size_t(a.context));
    for (auto& id : prompt) id = int32_t(rng() % uint64_t(full->config().vocab_size));
    const double gbps = frost::cli::copy_ceiling(*full, cuda ? kCeilingBytesCuda : kCeilingBytesCpu);
    std::vector<fm::Engine::LabelCost> labels;
    if (full->step_label_costs(1, true, a.context, &labels) != FROST_OK) return fail_msg("the decode step's ops");
    for (const std::string& l : a.only)
        if (std::none_of(labels.begin(), labels.end(), [&l](const fm::Engine::LabelCost& c) { return c.label == l; }))
            return (std::fprintf(stderr, "frost bench graph-ops: --only %s is no op label of the decode step\n", l.c_str()), 2);
    double full_ms = 0;
    if (!time_decode(*full, prompt, a.steps, a.reps, &full_ms)) return fail_msg("decode");
    if (a.unpaired) full.reset();  // one engine on the device at a time

    json rows = json::array();
    for (const fm::Engine::LabelCost& l : labels) {
        if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), l.label) == a.only.end()) continue;
        const double floor_ms = gbps > 0 ? l.cost.bytes / (gbps * 1e9) * 1e3 : 0.0;
        json row = {{"label", l.label}, {"ops", l.ops}, {"bytes", l.cost.bytes}, {"flops", l.cost.flops},
                    {"floor_ms", floor_ms}};
        if (l.kind == frost::ops::OpKind::Cursor) {  // Engine refuses it: later ops address memory by it
            row["skipped"] = "cursor op: holds the step's position, cannot be left out";
            rows.push_back(row);
            continue;
        }
        fm::EngineOptions po = eo;
        po.leave_out_ops = {"=" + l.label};
        std::unique_ptr<fm::Engine> probe;
        frost_status st = fm::Engine::create_from_weights(w, po, &probe);
        if (st != FROST_OK && full) {  // most likely no room for two engines: unpaired from here on
            full.reset();
            st = fm::Engine::create_from_weights(w, po, &probe);
        }
        Paired pr;
        bool ok = st == FROST_OK;
        if (ok && full) {
            ok = time_paired(*full, *probe, prompt, a.steps, a.reps, &pr);
        } else if (ok) {
            pr.full = full_ms;
            ok = time_decode(*probe, prompt, a.steps, a.reps, &pr.probe);
            pr.diffs = {full_ms - pr.probe};
        }
        if (!ok) {
            row["error"] = frost_last_error();
        } else {
            const double saved = median(pr.diffs);
            row["paired"] = full != nullptr;
            row["full_ms_per_token"] = pr.full;
            row["ms_per_token"] = pr.probe;
            row["saved_ms"] = saved;
            row["saved_ms_range"] = {*std::min_element(pr.diffs.begin(), pr.diffs.end()),
                                     *std::max_element(pr.diffs.begin(), pr.diffs.end())};
            row["saved_per_op_us"] = saved * 1e3 / l.ops;
            row["saved_over_floor"] = floor_ms > 0 ? saved / floor_ms : 0.0;
        }
        rows.push_back(row);
    }

    const json out = {{"bench", "graph-ops"}, {"model_dir", a.model}, {"backend", a.backend}, {"context", a.context},
                      {"steps", a.steps}, {"reps", a.reps}, {"copy_gbps", gbps}, {"full_ms_per_token", full_ms},
                      {"measure", "decode ms/token of the full step and of the step with one op label left out "
                                  "(EngineOptions::leave_out_ops \"=label\"), same weights, same run; paired rows: "
                                  "saved_ms is the median over repetitions of full minus probe, timed in alternation"},
                      {"labels", rows}};
    FILE* tbl = a.json ? stderr : stdout;
    std::fprintf(tbl, "graph-ops bench (%s, decode @%d, %d steps x %d): full step %.3f ms/token; copy %.1f GB/s\n",
                 a.backend.c_str(), a.context, a.steps, a.reps, full_ms, gbps);
    std::fprintf(tbl, "  %-34s %4s %9s %9s %10s %9s %11s %11s %17s\n", "left out", "ops", "MB/step", "floor_ms", "ms/token",
                 "saved_ms", "saved/op_us", "saved/floor", "saved range (ms)");
    for (const json& r : rows) {
        std::fprintf(tbl, "  %-34s %4d %9.2f %9.4f", r["label"].get<std::string>().c_str(), r["ops"].get<int>(),
                     r["bytes"].get<double>() / 1e6, r["floor_ms"].get<double>());
        if (r.contains("skipped"))
            std::fprintf(tbl, "  kept: %s\n", r["skipped"].get<std::string>().c_str());
        else if (r.contains("error"))
            std::fprintf(tbl, "  failed: %s\n", r["error"].get<std::string>().c_str());
        else
            std::fprintf(tbl, " %10.3f %9.3f %11.2f %10.2fx %8.3f..%-7.3f%s\n", r["ms_per_token"].get<double>(),
                         r["saved_ms"].get<double>(), r["saved_per_op_us"].get<double>(), r["saved_over_floor"].get<double>(),
                         r["saved_ms_range"][0].get<double>(), r["saved_ms_range"][1].get<double>(),
                         r["paired"].get<bool>() ? "" : " unpaired");
    }
    if (a.json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
}

}  // namespace

FROST_BENCH_KIND("graph-ops", "each decode op's cost inside the captured graph: the step timed with each op label left out",
                 run);
