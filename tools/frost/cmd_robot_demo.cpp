// `frost robot-demo`: drives the robot episode host through episodes with capsule resets and one
// interrupt on a toy environment, plus a planner -> actor hand-off run, and prints per-tick
// latency, time to first action after a reset, capture counts and per-episode action digests.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "command.h"
#include "exec/error.h"
#include "robot/episode_host.h"
#include "robot/handoff.h"

namespace {

using frost::robot::EpisodeEnd;
using frost::robot::EpisodeHost;
using frost::robot::EpisodeHostConfig;
using frost::robot::Handoff;
using frost::robot::HandoffConfig;
using frost::robot::TickResult;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: frost robot-demo [--episodes N] [--ticks T] [--seeds K] [--json] [--backend cpu|cuda]\n"
    "  --episodes  episodes to run (default 6); episode e uses seed 1 + e % K, so every seed\n"
    "              after the first K episodes is a capsule reset whose digest must repeat\n"
    "  --ticks     timeout: chunks per episode (default 16)\n"
    "  --seeds     distinct episode seeds (default 2)\n"
    "  --json      print one JSON object instead of the table\n"
    "  --backend   cpu (default) or cuda\n"
    "One extra episode (seed 1, a capsule reset) is interrupted from another thread after\n"
    "min(3, T - 1) ticks; its chunks must equal the first chunks of episode 0. A planner -> actor\n"
    "hand-off run (1:4, one interrupt) follows. Exit code 1 if a digest, the interrupt prefix,\n"
    "the hand-off checks or a capture count disagrees.";

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr int32_t kInterruptAfterTicks = 3;
constexpr int32_t kHandoffTicks = 16;
constexpr int32_t kHandoffInterruptTick = 5;
constexpr float kObsDecay = 0.9f;
constexpr float kObsActionGain = 0.1f;
constexpr float kObsDrive = 0.05f;

// FNV-1a 64 over bytes: the per-episode action fingerprint (same build + backend => same hex).
struct Digest {
    uint64_t h = kFnvOffset;
    void add(const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * kFnvPrime;
    }
    std::string hex() const {
        char s[17];
        std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(h));
        return s;
    }
};

// Toy closed-loop environment: the observation decays, is pushed by the last action chunk and
// driven by a slow sinusoid. Deterministic, so identical actions give identical observations.
struct ToyEnv {
    std::vector<float> obs;
    void reset(uint64_t seed, int32_t dim) {
        obs.assign(dim, 0.0f);
        for (int32_t i = 0; i < dim; ++i) obs[i] = std::sin(float(seed) + 0.5f * float(i));
    }
    void step(const std::vector<float>& action, int32_t tick) {
        for (size_t i = 0; i < obs.size(); ++i)
            obs[i] = kObsDecay * obs[i] + kObsActionGain * std::tanh(action[i % action.size()]) +
                     kObsDrive * std::sin(0.3f * float(tick) + float(i));
    }
};

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    const size_t rank = size_t(std::ceil(q * double(v.size())));
    return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

double us_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct EpisodeRecord {
    int index = 0;
    uint64_t seed = 0;
    bool reset_from_capsule = false;
    bool interrupted_run = false;
    int ticks = 0;
    std::string end;
    std::string digest;
    double first_action_us = 0.0;
    std::vector<std::vector<float>> actions;
};

int fail_out(const char* what) {
    std::fprintf(stderr, "frost robot-demo: %s: %s\n", what, frost::last_error().c_str());
    return 1;
}

// Runs one episode from reset(seed); interrupts from another thread after `interrupt_after`
// ticks when >= 0. Appends tick latencies.
frost_status run_episode(EpisodeHost& host, uint64_t seed, int32_t interrupt_after,
                         std::vector<double>* tick_us, EpisodeRecord* rec) {
    const auto& pc = host.config().policy;
    ToyEnv env;
    env.reset(seed, pc.obs_dim);
    rec->reset_from_capsule = host.capsule(seed) != nullptr;
    const auto t_reset = Clock::now();
    FROST_TRY(host.reset(seed));
    Digest d;
    std::vector<float> action(pc.chunk());
    for (int32_t t = 0;; ++t) {
        if (t == interrupt_after) {
            std::thread other([&host] { host.interrupt(); });
            other.join();
        }
        TickResult r;
        const auto t0 = Clock::now();
        FROST_TRY(host.tick(env.obs.data(), action.data(), &r));
        const double dt = us_since(t0);
        if (r.acted) {
            if (t == 0) rec->first_action_us = us_since(t_reset);
            tick_us->push_back(dt);
            d.add(action.data(), action.size() * sizeof(float));
            rec->actions.push_back(action);
            env.step(action, t);
            ++rec->ticks;
        }
        if (r.end != EpisodeEnd::running) {
            rec->end = frost::robot::episode_end_name(r.end);
            break;
        }
    }
    rec->seed = seed;
    rec->digest = d.hex();
    return FROST_OK;
}

struct HandoffReport {
    int ticks = 0, planner_ticks = 0;
    bool zero_copy = false, interrupt_changed_next_action = false;
    uint64_t captures_before = 0, captures_after = 0;
    std::string digest;
};

frost_status run_handoff(frost_ctx* ctx, HandoffReport* rep) {
    HandoffConfig cfg;
    cfg.planner.horizon = 1;
    cfg.planner.action_dim = 16;
    cfg.planner.weight_seed = 11;
    cfg.actor.weight_seed = 12;
    std::unique_ptr<Handoff> h;
    FROST_TRY(Handoff::create(ctx, cfg, &h));
    FROST_TRY(h->warm_up());
    rep->captures_before = h->capture_count();
    rep->zero_copy = frost_graph_port(h->planner().graph(), frost::robot::kPortAction) ==
                         frost_graph_port(h->actor().graph(), frost::robot::kPortSubtask) &&
                     frost_buffer_ptr(h->subtask()) ==
                         frost_buffer_ptr(frost_graph_port(h->actor().graph(), frost::robot::kPortSubtask));
    // Two runs of the same seeds; the second is interrupted before tick kHandoffInterruptTick.
    std::vector<float> obs(cfg.actor.obs_dim), plain, action(cfg.actor.chunk());
    const std::vector<float> urgent(h->subtask_dim(), 1.0f);
    for (int run = 0; run < 2; ++run) {
        FROST_TRY(h->reset(21, 22));
        Digest d;
        for (int32_t t = 0; t < kHandoffTicks; ++t) {
            for (size_t i = 0; i < obs.size(); ++i) obs[i] = std::cos(0.2f * float(t) + float(i));
            if (run == 1 && t == kHandoffInterruptTick) FROST_TRY(h->interrupt(urgent.data()));
            bool planned = false;
            FROST_TRY(h->tick(obs.data(), action.data(), &planned));
            if (run == 0 && t == kHandoffInterruptTick) plain = action;
            if (run == 1 && t == kHandoffInterruptTick) rep->interrupt_changed_next_action = action != plain;
            if (run == 0) rep->planner_ticks += planned;
            d.add(action.data(), action.size() * sizeof(float));
        }
        if (run == 0) rep->digest = d.hex();
    }
    rep->ticks = kHandoffTicks;
    rep->captures_after = h->capture_count();
    return FROST_OK;
}

std::string utc_now() {
    char buf[32];
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int run_robot_demo(const std::vector<std::string>& args) {
    int episodes = 6, ticks = 16, seeds = 2;
    bool as_json = false;
    std::string backend_name = "cpu";
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json") { as_json = true; continue; }
        if (i + 1 >= args.size()) { std::fprintf(stderr, "frost robot-demo: %s needs a value\n%s\n", a.c_str(), kUsage); return 2; }
        const std::string v = args[++i];
        try {
            if (a == "--episodes") episodes = std::stoi(v);
            else if (a == "--ticks") ticks = std::stoi(v);
            else if (a == "--seeds") seeds = std::stoi(v);
            else if (a == "--backend") backend_name = v;
            else { std::fprintf(stderr, "frost robot-demo: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
        } catch (const std::exception&) {
            std::fprintf(stderr, "frost robot-demo: %s expects an integer, got '%s'\n", a.c_str(), v.c_str());
            return 2;
        }
    }
    if (episodes < 1 || ticks < 1 || seeds < 1 || (backend_name != "cpu" && backend_name != "cuda")) {
        std::fprintf(stderr, "frost robot-demo: --episodes, --ticks, --seeds must be >= 1 and "
                             "--backend cpu or cuda\n%s\n", kUsage);
        return 2;
    }
    const frost_backend backend = backend_name == "cuda" ? FROST_BACKEND_CUDA : FROST_BACKEND_CPU;
    frost_ctx* ctx = nullptr;
    if (frost_ctx_create(backend, 0, &ctx) != FROST_OK) return fail_out("creating the context");
    std::unique_ptr<frost_ctx, decltype(&frost_ctx_destroy)> ctx_guard(ctx, &frost_ctx_destroy);

    EpisodeHostConfig cfg;  // defaults: H 8 x D 7, obs 32, hidden 128, 10 Euler steps, critic on
    cfg.max_ticks = ticks;
    std::unique_ptr<EpisodeHost> host;
    if (EpisodeHost::create(ctx, cfg, &host) != FROST_OK) return fail_out("creating the episode host");
    if (host->warm_up() != FROST_OK) return fail_out("warm-up");
    const uint64_t captures_warm = host->capture_count();
    // The interrupt must land before the timeout would end the episode.
    const int32_t interrupt_after = std::min(kInterruptAfterTicks, ticks - 1);

    std::vector<double> tick_us, reset_first_us;
    std::vector<EpisodeRecord> recs;
    std::map<uint64_t, std::string> digest_of_seed;
    bool consistent = true;
    for (int e = 0; e <= episodes; ++e) {
        const bool interrupted = e == episodes;  // the extra, interrupted episode
        EpisodeRecord rec;
        rec.index = e;
        rec.interrupted_run = interrupted;
        // The interrupted run replays episode 0's seed, so its chunks have a reference.
        const uint64_t seed = interrupted ? 1 : 1 + uint64_t(e % seeds);
        if (run_episode(*host, seed, interrupted ? interrupt_after : -1,
                        &tick_us, &rec) != FROST_OK)
            return fail_out("episode");
        if (rec.reset_from_capsule) reset_first_us.push_back(rec.first_action_us);
        if (interrupted) {
            // Its chunks must be the first chunks of the same seed's full episode.
            const EpisodeRecord& full = recs.front();
            consistent = consistent && rec.end == "interrupt" && rec.ticks == interrupt_after &&
                         std::equal(rec.actions.begin(), rec.actions.end(), full.actions.begin());
        } else {
            auto [it, fresh] = digest_of_seed.emplace(rec.seed, rec.digest);
            consistent = consistent && (fresh || it->second == rec.digest);
        }
        rec.actions.shrink_to_fit();
        recs.push_back(std::move(rec));
    }
    const uint64_t captures_end = host->capture_count();
    host.reset();

    HandoffReport ho;
    if (run_handoff(ctx, &ho) != FROST_OK) return fail_out("hand-off");
    const bool ok = consistent && captures_end == captures_warm && ho.zero_copy &&
                    ho.interrupt_changed_next_action && ho.captures_after == ho.captures_before;

    const double p50 = percentile(tick_us, 0.5), p99 = percentile(tick_us, 0.99);
    const double r50 = percentile(reset_first_us, 0.5), rmax = percentile(reset_first_us, 1.0);
    const auto& pc = cfg.policy;
    if (as_json) {
        nlohmann::json j;
        j["device"] = backend_name + ":0";
        j["date"] = utc_now();
        j["policy"] = {{"horizon", pc.horizon}, {"action_dim", pc.action_dim}, {"obs_dim", pc.obs_dim},
                       {"hidden", pc.hidden}, {"euler_steps", pc.euler_steps}};
        j["ticks"] = tick_us.size();
        j["tick_latency_us"] = {{"p50", p50}, {"p99", p99}};
        j["first_action_after_reset_us"] = {{"p50", r50}, {"max", rmax}, {"resets", reset_first_us.size()}};
        j["capture_count"] = {{"after_warmup", captures_warm}, {"at_end", captures_end}};
        j["episodes"] = nlohmann::json::array();
        for (const auto& r : recs)
            j["episodes"].push_back({{"index", r.index}, {"seed", r.seed}, {"reset_from_capsule", r.reset_from_capsule},
                                     {"interrupted_run", r.interrupted_run}, {"ticks", r.ticks},
                                     {"end", r.end}, {"digest", r.digest},
                                     {"first_action_us", r.first_action_us}});
        j["digests_consistent"] = consistent;
        j["handoff"] = {{"ticks", ho.ticks}, {"planner_ticks", ho.planner_ticks}, {"zero_copy", ho.zero_copy},
                        {"interrupt_changed_next_action", ho.interrupt_changed_next_action},
                        {"capture_count", ho.captures_after}, {"digest", ho.digest}};
        j["ok"] = ok;
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("robot-demo on %s:0, %s; policy H %d x D %d, obs %d, hidden %d, %d Euler steps\n",
                    backend_name.c_str(), utc_now().c_str(), pc.horizon, pc.action_dim, pc.obs_dim,
                    pc.hidden, pc.euler_steps);
        std::printf("%-4s %-6s %-7s %-6s %-10s %-16s %s\n", "ep", "seed", "reset", "ticks", "end",
                    "digest", "first action (us)");
        for (const auto& r : recs)
            std::printf("%-4d %-6llu %-7s %-6d %-10s %-16s %.1f%s\n", r.index, (unsigned long long)r.seed,
                        r.reset_from_capsule ? "capsule" : "fresh", r.ticks, r.end.c_str(), r.digest.c_str(),
                        r.first_action_us, r.interrupted_run ? "  (interrupted run)" : "");
        std::printf("tick latency: p50 %.1f us, p99 %.1f us over %zu ticks\n", p50, p99, tick_us.size());
        std::printf("first action after a capsule reset: p50 %.1f us, max %.1f us over %zu resets\n", r50,
                    rmax, reset_first_us.size());
        std::printf("capture count: %llu after warm-up, %llu at end\n", (unsigned long long)captures_warm,
                    (unsigned long long)captures_end);
        std::printf("hand-off: %d ticks, planner ran %d times, zero-copy %s, interrupt changed the next "
                    "action %s, capture count %llu, digest %s\n",
                    ho.ticks, ho.planner_ticks, ho.zero_copy ? "yes" : "NO",
                    ho.interrupt_changed_next_action ? "yes" : "NO", (unsigned long long)ho.captures_after,
                    ho.digest.c_str());
        std::printf("%s\n", ok ? "OK: digests repeat across resets, no recapture" : "FAILED: see above");
    }
    return ok ? 0 : 1;
}

}  // namespace

FROST_COMMAND("robot-demo", "robot policy episodes with capsule resets, interrupt and hand-off",
              kUsage, run_robot_demo);
