// `frost bench batch`: batched decode over live sessions (issue 16) through the real Engine. At
// each batch size B, B sessions holding the same context advance together by Engine::decode_batch
// for --steps steps: per-stream ms/token (= the step time), aggregate tokens/s, both as ratios to
// B = 1 measured in the same run, and the bytes floor of a batched step (the cost model's bytes:
// weights once, every member's state and KV; over the copy ceiling measured in the same run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_registry.h"
#include "bench_util.h"
#include "engine_args.h"
#include "model/engine.h"
#include "model/synth.h"
#include "serve/slice_budget.h"

namespace {

namespace fm = frost::model;
using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;

constexpr const char* kUsage =
    "usage: frost bench batch [--model DIR | --preset NAME] [--backend cpu|cuda] [--sizes 1,2,4,8]\n"
    "         [--context N] [--steps N] [--admit N] [--admit-step S] [--admit-share F] [--solo-kernels]\n"
    "         [--max-seq N] [--out-dir DIR] [--json]\n"
    "  B sessions at --context tokens (default 256) each decode --steps steps (default 32) together\n"
    "  (Engine::decode_batch) per size B: per-stream ms/token, aggregate tokens/s, ratios to B=1 and\n"
    "  the bytes floor of one batched step at the copy ceiling. Without --model a synthetic\n"
    "  checkpoint of --preset (default tiny) is written under --out-dir (default ./engine-bench).\n"
    "  --admit N: 3 streams decode together while an N-token prompt is prefilled beside them in\n"
    "  --admit-step chunks (default 512), as the server's rounds do: with --admit-share F > 0 (default\n"
    "  0.6, the server's prefill_share) each chunk runs sliced, a few layers per round within F of the\n"
    "  measured decode step; 0 = one whole chunk between two of their steps. Reports their inter-token\n"
    "  latency p50 / p99 unloaded and while it is admitted, and the prompt's time to its first token.\n"
    "  --solo-kernels: CUDA steps the members one by one (EngineOptions::cuda_batched_decode off).\n"
    "  --max-seq: each session's capacity (default and minimum: what the runs need + 64; `frost serve`\n"
    "  sizes sessions to the model's context).";

constexpr int kCeilingBytesCpu = 16 << 20;
constexpr int kCeilingBytesCuda = 256 << 20;
constexpr int kSeqSlack = 64;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

#define FROST_TRY_CLI(expr)                   \
    do {                                      \
        const frost_status s_ = (expr);       \
        if (s_ != FROST_OK) return s_;        \
    } while (0)

int fail_msg(const char* what) {
    std::fprintf(stderr, "frost bench batch: %s: %s\n", what, frost_last_error());
    return 1;
}

bool parse_ints(const std::string& s, std::vector<int>* out) {
    out->clear();
    size_t at = 0;
    while (at <= s.size()) {
        const size_t comma = std::min(s.find(',', at), s.size());
        try {
            out->push_back(std::stoi(s.substr(at, comma - at)));
        } catch (...) {
            return false;
        }
        at = comma + 1;
    }
    return !out->empty();
}

constexpr int kAdmitStreams = 3;

std::string lat_note(const json& a) {
    if (!a.value("sliced", false)) return " (whole)";
    char buf[64];
    std::snprintf(buf, sizeof buf, " (sliced, share %.2f)", a.value("share", 0.0));
    return buf;
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

struct Latency {
    double p50[2] = {0, 0}, p99[2] = {0, 0};  // [0] unloaded, [1] while the prompt is admitted
    double admit_ms = 0;                       // the prompt's first token, from its first chunk
    int rounds = 0;
    bool sliced = false;
};

// One round's share of the prompt: with a budget (sliced prefill), up to the budget's layers of
// the staged chunk; without, one whole chunk. *done_tokens advances when a chunk is in.
frost_status admit_round(fm::Engine& e, int s, const std::vector<int32_t>& prompt, int chunk,
                         frost::serve::SliceBudget* budget, bool* staged, size_t* done_tokens) {
    const size_t take = std::min(prompt.size() - *done_tokens, size_t(chunk));
    if (!budget) {
        FROST_TRY_CLI(e.prefill(s, prompt.data() + *done_tokens, take, nullptr));
        *done_tokens += take;
        return FROST_OK;
    }
    if (!*staged) FROST_TRY_CLI(e.prefill_slices_begin(s, prompt.data() + *done_tokens, take));
    *staged = true;
    const int layers = budget->layers(e.config().num_layers);
    bool done = false;
    const auto t0 = Clock::now();
    FROST_TRY_CLI(e.prefill_slices_run(s, layers, &done, nullptr));
    if (!done) {
        budget->note_layers(layers, ms_since(t0));
        return FROST_OK;
    }
    *staged = false;
    *done_tokens += take;
    return FROST_OK;
}

// Streams 1..3 (forked from session 0's context) decode together; first `steps` steps alone, then
// the new prompt (session 4) goes in beside them, one round's share (admit_round) before each of
// their steps, as the server's round does. Inter-token latency = the time between two of their
// steps' tokens.
frost_status admission_latency(fm::Engine& e, const std::vector<int32_t>& prompt, int chunk, double share, int steps,
                               Latency* out) {
    const int streams[kAdmitStreams] = {1, 2, 3};
    const int newcomer = kAdmitStreams + 1;
    for (int s : streams) FROST_TRY_CLI(e.fork(0, s));
    FROST_TRY_CLI(e.reset(newcomer));
    int32_t next[kAdmitStreams];
    FROST_TRY_CLI(e.decode_batch(streams, kAdmitStreams, next));  // warm-up
    std::vector<double> alone, admitting;
    for (int i = 0; i < steps; ++i) {
        const auto t0 = Clock::now();
        FROST_TRY_CLI(e.decode_batch(streams, kAdmitStreams, next));
        alone.push_back(ms_since(t0));
    }
    frost::serve::SliceBudget budget(share);
    out->sliced = share > 0 && e.slice_rows() >= chunk;
    const auto t_admit = Clock::now();
    bool staged = false;
    for (size_t done = 0; done < prompt.size();) {
        const auto t0 = Clock::now();
        FROST_TRY_CLI(admit_round(e, newcomer, prompt, chunk, out->sliced ? &budget : nullptr, &staged, &done));
        if (done == prompt.size()) out->admit_ms = ms_since(t_admit);
        const auto t1 = Clock::now();
        FROST_TRY_CLI(e.decode_batch(streams, kAdmitStreams, next));
        budget.note_decode(ms_since(t1));
        admitting.push_back(ms_since(t0));
        ++out->rounds;
    }
    out->p50[0] = percentile(alone, 0.5);
    out->p99[0] = percentile(alone, 0.99);
    out->p50[1] = percentile(admitting, 0.5);
    out->p99[1] = percentile(admitting, 0.99);
    return FROST_OK;
}

int run(const std::vector<std::string>& args) {
    std::string model, preset = "tiny", backend = "cpu", out_dir = "engine-bench";
    std::vector<int> sizes{1, 2, 4, 8};
    int context = 256, steps = 32, admit = 0, admit_step = 512, max_seq = 0;
    double admit_share = 0.6;
    bool as_json = false, cuda_kernels = true;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& k = args[i];
        if (k == "--json" || k == "--cuda-kernels") {
            (k == "--json" ? as_json : cuda_kernels) = true;
            continue;
        }
        if (k == "--solo-kernels") {  // CUDA: members one by one (the comparison point)
            cuda_kernels = false;
            continue;
        }
        if (k == "--help" || k == "-h") {
            std::printf("%s\n", kUsage);
            return 0;
        }
        if (i + 1 >= args.size()) {
            std::fprintf(stderr, "frost bench batch: %s needs a value\n%s\n", k.c_str(), kUsage);
            return 2;
        }
        const std::string& v = args[++i];
        bool ok = true;
        if (k == "--model") model = v;
        else if (k == "--preset") preset = v;
        else if (k == "--backend") backend = v;
        else if (k == "--out-dir") out_dir = v;
        else if (k == "--sizes") ok = parse_ints(v, &sizes);
        else if (k == "--context") ok = (context = std::atoi(v.c_str())) > 0;
        else if (k == "--steps") ok = (steps = std::atoi(v.c_str())) > 0;
        else if (k == "--admit") ok = (admit = std::atoi(v.c_str())) > 0;
        else if (k == "--admit-step") ok = (admit_step = std::atoi(v.c_str())) > 0;
        else if (k == "--admit-share") ok = (admit_share = std::atof(v.c_str())) >= 0;
        else if (k == "--max-seq") ok = (max_seq = std::atoi(v.c_str())) > 0;
        else ok = false;
        if (!ok) {
            std::fprintf(stderr, "frost bench batch: bad option %s %s\n%s\n", k.c_str(), v.c_str(), kUsage);
            return 2;
        }
    }
    for (int B : sizes)
        if (B < 1 || B > 8) {
            std::fprintf(stderr, "frost bench batch: --sizes must lie in [1, 8], got %d\n", B);
            return 2;
        }
    fm::EngineOptions eo;
    eo.cuda_batched_decode = cuda_kernels;
    if (!frost::cli::parse_backend(backend, &eo.backend)) {
        std::fprintf(stderr, "frost bench batch: --backend must be cpu or cuda\n");
        return 2;
    }
    if (frost::cli::model_from_preset(&model, preset, out_dir) != FROST_OK) return fail_msg("synthesising the model");
    const int max_b = *std::max_element(sizes.begin(), sizes.end());
    eo.sessions = std::max(max_b, kAdmitStreams + 1) + 1;  // session 0: the context the members fork from
    eo.max_seq_len = std::max(context + steps, admit) + kSeqSlack;
    // While a prompt is admitted the streams step once per round: at most a round per layer of
    // every chunk (slices of one layer), fewer than `admit` rounds while layers <= admit_step.
    if (admit > 0) eo.max_seq_len = std::max(eo.max_seq_len, context + admit + 2 * steps + kSeqSlack);
    eo.max_seq_len = std::max(eo.max_seq_len, max_seq);
    eo.slice_rows = std::max(eo.slice_rows, (admit_step + 63) / 64 * 64);
    std::unique_ptr<fm::Engine> e;
    if (fm::Engine::create(model, eo, &e) != FROST_OK) return fail_msg("loading the model");
    const bool cuda = eo.backend == FROST_BACKEND_CUDA;
    const double ceiling = frost::cli::copy_ceiling(*e, cuda ? kCeilingBytesCuda : kCeilingBytesCpu);

    // One prefilled context, forked into every member before each size (same positions each time).
    std::mt19937_64 rng(7);
    std::vector<int32_t> prompt(static_cast<size_t>(context));
    for (auto& id : prompt) id = int32_t(rng() % uint64_t(e->config().vocab_size));
    if (e->prefill(0, prompt.data(), prompt.size(), nullptr) != FROST_OK) return fail_msg("prefill");

    json rows = json::array();
    double base_ms = 0;
    for (int B : sizes) {
        std::vector<int> members;
        for (int s = 1; s <= B; ++s) members.push_back(s);
        for (int s : members)
            if (e->fork(0, s) != FROST_OK) return fail_msg("fork");
        std::vector<int32_t> next(static_cast<size_t>(B));
        if (e->decode_batch(members.data(), B, next.data()) != FROST_OK) return fail_msg("warm-up step");
        std::vector<double> ms;
        for (int i = 0; i < steps - 1; ++i) {
            const auto t0 = Clock::now();
            if (e->decode_batch(members.data(), B, next.data()) != FROST_OK) return fail_msg("decode_batch");
            ms.push_back(ms_since(t0));
        }
        std::sort(ms.begin(), ms.end());
        const double step_ms = ms.empty() ? 0 : ms[ms.size() / 2];
        if (B == 1) base_ms = step_ms;  // ratios need B=1 in --sizes (0 otherwise)
        frost::ops::OpCost cost;
        const bool costed = e->batch_step_cost(B, context + steps / 2, &cost) == FROST_OK;
        const double floor_bytes = costed ? cost.bytes : 0.0;
        const double floor_ms = ceiling > 0 ? floor_bytes / 1e9 / ceiling * 1e3 : 0.0;
        json r;
        r["B"] = B;
        r["step_ms"] = step_ms;
        r["per_stream_ms_per_token"] = step_ms;
        r["aggregate_tokens_per_s"] = step_ms > 0 ? 1e3 * B / step_ms : 0.0;
        r["per_stream_vs_b1"] = base_ms > 0 ? step_ms / base_ms : 0.0;
        r["aggregate_vs_b1"] = base_ms > 0 && step_ms > 0 ? (B / step_ms) / (1.0 / base_ms) : 0.0;
        r["floor_bytes"] = floor_bytes;
        r["floor_ms"] = floor_ms;
        r["step_over_floor"] = floor_ms > 0 ? step_ms / floor_ms : 0.0;
        r["batched_graph"] = B == 1 || !e->batch_sizes().empty();
        rows.push_back(r);
    }
    json admission;
    if (admit > 0) {
        std::vector<int32_t> long_prompt(static_cast<size_t>(admit));
        for (auto& id : long_prompt) id = int32_t(rng() % uint64_t(e->config().vocab_size));
        Latency lat;
        if (admission_latency(*e, long_prompt, admit_step, admit_share, steps, &lat) != FROST_OK)
            return fail_msg("admission run");
        admission = {{"prompt_tokens", admit}, {"chunk", admit_step}, {"streams", kAdmitStreams},
                     {"sliced", lat.sliced}, {"share", lat.sliced ? admit_share : 0.0}, {"rounds", lat.rounds},
                     {"admit_ms", lat.admit_ms},
                     {"unloaded_p50_ms", lat.p50[0]}, {"unloaded_p99_ms", lat.p99[0]},
                     {"admitting_p50_ms", lat.p50[1]}, {"admitting_p99_ms", lat.p99[1]},
                     {"p99_ratio", lat.p99[0] > 0 ? lat.p99[1] / lat.p99[0] : 0.0}};
    }
    const json out = {{"bench", "batch"}, {"model", model}, {"backend", backend}, {"context", context},
                      {"steps", steps}, {"max_seq_len", eo.max_seq_len}, {"ceiling_copy_GBps", ceiling}, {"rows", rows},
                      {"admission", admission}};
    FILE* tbl = as_json ? stderr : stdout;
    std::fprintf(tbl, "frost bench batch: %s (%s), context %d, %d steps, copy ceiling %.1f GB/s%s\n", model.c_str(),
                 backend.c_str(), context, steps, ceiling,
                 e->batch_sizes().empty() ? " [no batched graphs: members step one by one]" : "");
    std::fprintf(tbl, "%4s %12s %14s %10s %10s %12s %10s %10s\n", "B", "ms/token", "agg tok/s", "agg/B1",
                 "ms/B1", "floor MB", "floor ms", "step/flr");
    for (const auto& r : rows)
        std::fprintf(tbl, "%4d %12.3f %14.1f %10.2f %10.2f %12.2f %10.3f %10.2f\n", r["B"].get<int>(),
                     r["step_ms"].get<double>(), r["aggregate_tokens_per_s"].get<double>(),
                     r["aggregate_vs_b1"].get<double>(), r["per_stream_vs_b1"].get<double>(),
                     r["floor_bytes"].get<double>() / 1e6, r["floor_ms"].get<double>(),
                     r["step_over_floor"].get<double>());
    if (admit > 0)
        std::fprintf(tbl, "admission of %d tokens in %d-token chunks%s beside %d streams: %d rounds, first token after "
                          "%.1f ms; inter-token p50 %.3f -> %.3f ms, p99 %.3f -> %.3f ms (p99 x%.2f)\n",
                     admit, admit_step, lat_note(admission).c_str(), kAdmitStreams, admission["rounds"].get<int>(),
                     admission["admit_ms"].get<double>(), admission["unloaded_p50_ms"].get<double>(),
                     admission["admitting_p50_ms"].get<double>(), admission["unloaded_p99_ms"].get<double>(),
                     admission["admitting_p99_ms"].get<double>(), admission["p99_ratio"].get<double>());
    if (as_json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
}

}  // namespace

FROST_BENCH_KIND("batch", "batched decode over live sessions: aggregate tok/s and per-stream ms/token at B=1,2,4,8",
                 run);
