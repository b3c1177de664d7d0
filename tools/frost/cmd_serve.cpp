// `frost serve`: the OpenAI-compatible server over the real engine. Builds the engine and its
// capsule manager, wires them to the serve layer (scheduler on the engine thread, HTTP threads),
// and handles SIGTERM/SIGINT: stop admitting (503 + Retry-After), let streams finish for up to
// --drain-timeout seconds, end the rest with a final SSE error event, then exit 0.
#include <algorithm>
#include <map>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include "command.h"
#include "engine_args.h"
#include "exec/error.h"
#include "model/capsule.h"
#include "model/config.h"
#include "model/engine.h"
#include "serve/api.h"
#include "serve/http_server.h"
#include "serve/model_backend.h"
#include "serve/persistence.h"
#include "serve/scheduler.h"

namespace {

constexpr const char* kUsage =
    "usage: frost serve --model DIR [--host H] [--port P] [--capsule-dir DIR] [--api-key K]...\n"
    "                   [--sessions N] [--device-budget B] [--host-budget B] [--disk-budget B]\n"
    "                   [--queue N] [--max-per-key N] [--max-body B] [--max-seq-len N] [--prefill-chunk N]\n"
    "                   [--backend cpu|cuda] [--fp8-prefill w8a8|exact] [--fp8-decode w8a8|exact]\n"
    "                   [--tokenizer DIR] [--model-name NAME] [--chunk-invariant]\n"
    "                   [--n-cap N] [--prefill-share F]\n"
    "                   [--claim-log FILE] [--header-timeout-ms MS] [--send-timeout-ms MS] [--max-connections N]\n"
    "                   [--drain-timeout S] [--no-capsules] [--public-metrics]\n"
    "                   [--sessions-per-key N] [--session-idle-s S] [--cors-origin ORIGIN|*]\n"
    "Serves POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (+ GET|DELETE\n"
    "/v1/responses/{id}[/input_items]), POST /v1/messages[/count_tokens] (Anthropic),\n"
    "POST /tokenize, POST /detokenize,\n"
    "GET /v1/models[/{id}], /v1/capsules\n"
    "(create, list, pin, POST /v1/capsules/{id}/fork and /v1/capsules/{id}/rollback),\n"
    "/v1/sessions (named conversations), /v1/claims, /metrics and /health (the only route\n"
    "without a key). Without --api-key the\n"
    "server binds loopback only and refuses another --host. Sizes (B) take K, M, G suffixes.\n"
    "Defaults: 127.0.0.1:8000, 2 sessions, queue 16, body 8M, device 1G, host 4G, disk 16G with\n"
    "--capsule-dir (else 0), drain 20 s. --max-per-key (requests queued + running per API key,\n"
    "excess gets 429 + Retry-After) defaults to sessions + queue/2: one key can fill every slot\n"
    "and half the queue, so the other half always stays open to the other keys; 0 = no limit.\n"
    "--sessions-per-key (named sessions one key may hold, default 256; 0 = no limit) and\n"
    "--session-idle-s (a session unused this long is gone, default 3600; 0 = never).\n"
    "--max-seq-len (tokens per session) defaults to the model's context (config.json\n"
    "max_position_embeddings), lowered when the sessions' KV would not fit in memory (printed).\n"
    "--prefill-share F (default 0.6): while streams decode, a new prompt's prefill runs a few layers\n"
    "per step, at most F x the measured decode step (0 = whole 512-token steps between their steps).\n"
    "--max-connections N (default: the descriptor limit less 64, at most 4096; the soft limit is\n"
    "raised to the hard one at start): at the cap a new connection replaces the one that has waited\n"
    "longest for a request (a trickled header, an idle keep-alive); with every connection busy it\n"
    "gets 503 too_many_connections + Retry-After.\n"
    "--cors-origin (default off: no CORS headers) answers OPTIONS preflights and puts\n"
    "Access-Control-Allow-Origin: ORIGIN (e.g. http://localhost:3000, or *) on every reply.\n"
    "--chunk-invariant (CUDA): numerics under which a capsule's restore + append gives exactly the\n"
    "bits of a cold prefill of the whole prompt, however it was cut into chunks (slower appends at\n"
    "long positions; capsules bind to the mode).";

bool parse_size(const std::string& s, uint64_t* out) {
    if (s.empty()) return false;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || v < 0) return false;
    double mul = 1;
    const std::string suf(end);
    if (suf == "K" || suf == "k") mul = 1024.0;
    else if (suf == "M" || suf == "m") mul = 1024.0 * 1024;
    else if (suf == "G" || suf == "g") mul = 1024.0 * 1024 * 1024;
    else if (!suf.empty()) return false;
    *out = uint64_t(v * mul);
    return true;
}

bool parse_int(const std::string& s, long lo, long hi, long* out) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str() || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

constexpr int kDefaultPort = 8000;
constexpr int kFallbackSeqLen = 4096;  // a config without max_position_embeddings

// Bytes of attention KV one token costs in one session (fp32, the widest the engine keeps):
// the part of the state that grows with --max-seq-len (the Gated DeltaNet state is fixed).
uint64_t kv_bytes_per_token(const frost::model::ModelConfig& c) {
    return 2ull * uint64_t(c.num_full_layers()) * uint64_t(c.num_kv_heads) * uint64_t(c.head_dim) * 4ull;
}

// Without --max-seq-len: the model's context (config.json max_position_embeddings), bounded so
// that every session's KV fits in half of physical memory, on the 64-token grid. *why says
// which bound decided (printed at start).
int default_seq_len(const frost::model::ModelConfig& c, int sessions, std::string* why) {
    int ctx = c.max_position_embeddings > 0 ? c.max_position_embeddings : kFallbackSeqLen;
    *why = c.max_position_embeddings > 0 ? "the model's context" : "no max_position_embeddings in config.json";
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const uint64_t per_token = kv_bytes_per_token(c) * uint64_t(std::max(1, sessions));
    if (pages > 0 && page > 0 && per_token > 0) {
        const uint64_t fit = uint64_t(pages) * uint64_t(page) / 2 / per_token;
        if (fit < uint64_t(ctx)) {
            ctx = int(fit);
            *why = "bounded by memory: " + std::to_string(c.max_position_embeddings) + " would not fit";
        }
    }
    return std::max(64, ctx / 64 * 64);
}
constexpr uint64_t kGiB = 1ull << 30;

// Every connection holds a descriptor, and distributions start processes with a soft limit of
// 1024 under a hard one of 2^19 or more: the soft limit goes up to the hard one, as web servers
// do, so the connection cap is not set by an accident of the shell. Failure only leaves it.
void raise_descriptor_limit() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
}

int run_serve(const std::vector<std::string>& args) {
    using namespace frost;
    std::string model_dir, tokenizer_dir, capsule_dir, claim_log, model_name;
    serve::ServerConfig http_cfg;
    http_cfg.port = kDefaultPort;
    serve::ApiConfig api_cfg;
    serve::SchedulerConfig sched_cfg;
    model::EngineOptions eopts;
    eopts.sessions = 2;
    uint64_t budgets[3] = {kGiB, 4 * kGiB, 0};
    bool disk_set = false, capsules = true;
    long drain_s = 20;
    long max_per_key = -1;  // -1: the default below
    bool seq_set = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto need = [&](std::string* v) {
            if (i + 1 >= args.size()) return false;
            *v = args[++i];
            return true;
        };
        std::string v;
        long n = 0;
        bool ok = true;
        if (a == "--no-capsules") capsules = false;
        else if (a == "--public-metrics") api_cfg.public_metrics = true;
        else if (a == "--chunk-invariant") eopts.chunk_invariant = true;
        else if (!need(&v)) ok = false;
        else if (a == "--model") model_dir = v;
        else if (a == "--tokenizer") tokenizer_dir = v;
        else if (a == "--host") http_cfg.host = v;
        else if (a == "--port") { ok = parse_int(v, 0, 65535, &n); http_cfg.port = uint16_t(n); }
        else if (a == "--capsule-dir") capsule_dir = v;
        else if (a == "--api-key") { ok = !v.empty(); api_cfg.api_keys.push_back(v); }
        else if (a == "--sessions") { ok = parse_int(v, 1, 64, &n); eopts.sessions = int(n); }
        else if (a == "--device-budget") ok = parse_size(v, &budgets[0]);
        else if (a == "--host-budget") ok = parse_size(v, &budgets[1]);
        else if (a == "--disk-budget") { ok = parse_size(v, &budgets[2]); disk_set = true; }
        else if (a == "--queue") { ok = parse_int(v, 1, 100000, &n); sched_cfg.queue_cap = size_t(n); }
        else if (a == "--max-per-key") { ok = parse_int(v, 0, 1000000, &n); max_per_key = n; }
        else if (a == "--max-body") { uint64_t b = 0; ok = parse_size(v, &b) && b > 0; http_cfg.max_body_bytes = b; }
        else if (a == "--max-seq-len") { ok = parse_int(v, 64, 1 << 22, &n); eopts.max_seq_len = int(n); seq_set = true; }
        else if (a == "--prefill-chunk") { ok = parse_int(v, 64, 1 << 16, &n) && n % 64 == 0; eopts.prefill_chunk = int(n); }
        else if (a == "--backend") ok = cli::parse_backend(v, &eopts.backend);
        else if (a == "--fp8-prefill") ok = cli::parse_fp8_mode(v, &eopts.fp8_w8a8_prefill);
        else if (a == "--fp8-decode") ok = cli::parse_fp8_mode(v, &eopts.fp8_w8a8_decode);
        else if (a == "--model-name") model_name = v;
        else if (a == "--n-cap") { ok = parse_int(v, 1, 16, &n); api_cfg.limits.n_cap = int(n); }
        else if (a == "--prefill-share") {
            char* end = nullptr;
            sched_cfg.prefill_share = std::strtod(v.c_str(), &end);
            ok = end && *end == '\0' && sched_cfg.prefill_share >= 0 && sched_cfg.prefill_share <= 100;
        }
        else if (a == "--claim-log") claim_log = v;
        else if (a == "--header-timeout-ms") { ok = parse_int(v, 100, 600000, &n); http_cfg.header_timeout_ms = int(n); }
        else if (a == "--send-timeout-ms") { ok = parse_int(v, 100, 600000, &n); http_cfg.send_timeout_ms = int(n); }
        else if (a == "--max-connections") { ok = parse_int(v, 1, 1 << 20, &n); http_cfg.max_connections = size_t(n); }
        else if (a == "--drain-timeout") ok = parse_int(v, 0, 25, &drain_s);
        else if (a == "--sessions-per-key") { ok = parse_int(v, 0, 1000000, &n); api_cfg.max_sessions_per_key = size_t(n); }
        else if (a == "--cors-origin") {
            // "*" or one scheme://host[:port] origin; nothing that could break the header line.
            ok = v == "*" || ((v.rfind("http://", 0) == 0 || v.rfind("https://", 0) == 0) &&
                              v.find_first_of(" \t\r\n,;\"") == std::string::npos);
            api_cfg.cors_origin = v;
        }
        else if (a == "--session-idle-s") { ok = parse_int(v, 0, 30 * 24 * 3600, &n); api_cfg.session_idle_s = double(n); }
        else {
            std::fprintf(stderr, "frost serve: unknown option %s\n%s\n", a.c_str(), kUsage);
            return 2;
        }
        if (!ok) {
            std::fprintf(stderr, "frost serve: bad value for %s\n%s\n", a.c_str(), kUsage);
            return 2;
        }
    }
    if (model_dir.empty()) {
        std::fprintf(stderr, "frost serve: --model is required\n%s\n", kUsage);
        return 2;
    }
    http_cfg.have_api_key = !api_cfg.api_keys.empty();
    if (!http_cfg.have_api_key && !serve::is_loopback_host(http_cfg.host)) {
        std::fprintf(stderr, "frost serve: refusing to listen on %s without --api-key (loopback only)\n",
                     http_cfg.host.c_str());
        return 2;
    }
    if (!disk_set) budgets[2] = capsule_dir.empty() ? 0 : 16 * kGiB;
    if (capsule_dir.empty()) budgets[2] = 0;
    sched_cfg.max_per_key = max_per_key >= 0 ? size_t(max_per_key)
                                             : size_t(eopts.sessions) + std::max<size_t>(1, sched_cfg.queue_cap / 2);

    // Signals are taken synchronously by this thread; every thread started below (the
    // kernels' thread pool included) inherits the mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    std::string seq_why = "--max-seq-len";
    if (!seq_set) {
        model::ModelConfig mc;
        if (model::load_config(model_dir, &mc) != FROST_OK) {
            std::fprintf(stderr, "frost serve: cannot load %s: %s\n", model_dir.c_str(), frost_last_error());
            return 1;
        }
        eopts.max_seq_len = default_seq_len(mc, eopts.sessions, &seq_why);
    }
    std::unique_ptr<model::Engine> engine;
    frost_status st = model::Engine::create(model_dir, eopts, &engine);
    // The default context is also bounded by what the device can allocate: halve until it fits.
    while (st == FROST_ERR_OUT_OF_MEMORY && !seq_set && eopts.max_seq_len > kFallbackSeqLen) {
        eopts.max_seq_len = std::max(kFallbackSeqLen, eopts.max_seq_len / 2 / 64 * 64);
        seq_why = "bounded by device memory";
        st = model::Engine::create(model_dir, eopts, &engine);
    }
    if (st != FROST_OK) {
        std::fprintf(stderr, "frost serve: cannot load %s: %s\n", model_dir.c_str(), frost_last_error());
        return 1;
    }
    // Before the capsule manager starts: it removes temp files of interrupted writes as well.
    const size_t temp_at_start = capsule_dir.empty() ? 0 : serve::count_temp_files(capsule_dir);
    std::unique_ptr<model::CapsuleManager> manager;
    if (capsules) {
        model::CapsuleManagerOptions mo;
        mo.disk_dir = capsule_dir;
        if (model::CapsuleManager::for_model_dir(*engine, model_dir, mo, &manager) != FROST_OK) {
            std::fprintf(stderr, "frost serve: capsules disabled: %s\n", frost_last_error());
            manager.reset();
        }
    }
    if (tokenizer_dir.empty()) tokenizer_dir = model_dir;
    std::unique_ptr<serve::ModelText> text;
    if (serve::ModelText::load(tokenizer_dir, engine->config().eos_token_ids, &text) != FROST_OK) {
        std::fprintf(stderr, "frost serve: tokenizer/chat template: %s\n", frost_last_error());
        return 1;
    }
    if (!text->template_note().empty()) std::printf("frost serve: %s\n", text->template_note().c_str());
    serve::ModelEngine eng(*engine, manager.get());
    for (int t = 0; t < 3; ++t) sched_cfg.budgets.bytes[t] = budgets[t];
    sched_cfg.claim_log_path = !claim_log.empty() ? claim_log : capsule_dir.empty() ? "" : capsule_dir + "/claims.jsonl";
    api_cfg.model_name = model_name.empty() ? "frost" : model_name;
    if (manager) sched_cfg.capsule_dir = capsule_dir;
    // Sidecars are bound to the API key that owns them (HMAC with the capsule dir's secret).
    std::map<std::string, std::string> owner_keys;
    if (api_cfg.api_keys.empty()) owner_keys["local"] = "";
    for (size_t i = 0; i < api_cfg.api_keys.size(); ++i) owner_keys["key" + std::to_string(i)] = api_cfg.api_keys[i];
    sched_cfg.sidecar_owner_keys = std::move(owner_keys);

    serve::Metrics metrics;
    serve::Scheduler sched(eng, *text, sched_cfg, &metrics);
    if (sched.start() != FROST_OK) {
        std::fprintf(stderr, "frost serve: %s\n", frost_last_error());
        return 1;
    }
    if (!sched_cfg.capsule_dir.empty()) {
        const serve::ReindexReport& r = sched.reindex_report();
        for (const auto& note : r.notes) std::fprintf(stderr, "frost serve: capsule dir: %s\n", note.c_str());
        std::printf("frost serve: capsule dir %s: %zu re-indexed, %zu quarantined, %zu temp removed, %zu expired, "
                    "%zu claims lost, %zu removals finished\n",
                    capsule_dir.c_str(), r.adopted, r.quarantined, std::max(temp_at_start, r.temp_removed), r.expired, r.lost,
                    r.removed);
    }
    serve::Api api(sched, *text, eng, metrics, api_cfg);
    raise_descriptor_limit();
    http_cfg.metrics = &metrics;
    serve::HttpServer http(api, sched, http_cfg);
    if (http.start() != FROST_OK) {
        std::fprintf(stderr, "frost serve: %s\n", frost_last_error());
        sched.stop();
        return 1;
    }
    std::printf("frost serve: model %s (%d sessions, max_seq_len %d [%s], prefill chunk %d, capsules %s, "
                "max %zu connections) on http://%s:%u\n",
                api_cfg.model_name.c_str(), eopts.sessions, eopts.max_seq_len, seq_why.c_str(),
                engine->options().prefill_chunk, manager ? "on" : "off", http.max_connections(),
                http_cfg.host.c_str(), unsigned(http.port()));
    std::fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    std::printf("frost serve: signal %d: draining (up to %ld s)\n", sig, drain_s);
    std::fflush(stdout);
    sched.begin_drain();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(drain_s);
    while (std::chrono::steady_clock::now() < deadline && (sched.queue_depth() > 0 || sched.busy_slots() > 0))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    sched.stop();  // ends what is left with a final error event, then flushes the capsules
    if (!sched_cfg.capsule_dir.empty()) {
        const serve::FlushReport& f = sched.flush_report();
        for (const auto& note : f.notes) std::fprintf(stderr, "frost serve: capsule dir: %s\n", note.c_str());
        std::printf("frost serve: %zu capsules persisted to %s (%zu failed)\n", f.written, capsule_dir.c_str(), f.failed);
    }
    // Let the connections flush their last events before the I/O threads stop.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    http.stop();
    std::printf("frost serve: stopped\n");
    return 0;
}

}  // namespace

FROST_COMMAND("serve", "OpenAI-compatible HTTP server with capsules", kUsage, run_serve);
