// Per-request phase timings: where a request's time to first token goes, measured on the I/O
// thread (parse, template, tokenise, first-event pickup) and the engine thread (queue, plan,
// restore, prefill, snapshot, store work). The phases are disjoint intervals of one timeline
// from the handler's start to the I/O thread picking up choice 0's Finish, so they sum to at most
// the request's wall time; they are reported as the "timings_ms" object of the "frost" response
// extension and as the frost_phase_seconds histograms in /metrics.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>

namespace frost::serve {

using SteadyTime = std::chrono::steady_clock::time_point;

enum class Phase : int {
    Parse,          // I/O: body parse, validation, context check, admission (not template/tokenise)
    Template,       // I/O: chat template rendering (prompt and resent history)
    Tokenize,       // I/O: tokenising both, finding the history boundary
    Queue,          // enqueue -> dequeued into a slot by the engine thread
    Plan,           // engine: capsule list + planner
    Restore,        // engine: the capsule's copy into the slot (EngineIface::restore)
    Prefill,        // engine: prefill calls without a snapshot
    Snapshot,       // engine: the prefill call that also freezes the history boundary
    Store,          // engine: store work before the first token (restore protocol and promotion,
                    // admit and its demotions, durable writes; digests and lookups)
    EngineOther,    // engine: dequeued -> first token not in the phases above (other jobs' steps, setup)
    Emit,           // first token sampled -> the I/O thread picked up the first event
    AfterFirst,     // first event picked up -> choice 0's Finish picked up (decode, deferred store work)
    kCount
};
constexpr size_t kPhaseCount = size_t(Phase::kCount);

// JSON / Prometheus label of a phase.
inline const char* phase_name(Phase p) {
    switch (p) {
        case Phase::Parse: return "parse";
        case Phase::Template: return "template";
        case Phase::Tokenize: return "tokenize";
        case Phase::Queue: return "queue";
        case Phase::Plan: return "plan";
        case Phase::Restore: return "restore";
        case Phase::Prefill: return "prefill";
        case Phase::Snapshot: return "snapshot";
        case Phase::Store: return "store";
        case Phase::EngineOther: return "engine_other";
        case Phase::Emit: return "emit";
        case Phase::AfterFirst: return "after_first_token";
        case Phase::kCount: break;
    }
    return "?";
}

struct PhaseTimes {
    std::array<double, kPhaseCount> ms{};  // by Phase
    // Engine-thread store work moved after the first token (capsule finalisation, headroom
    // demotions): informative, already inside AfterFirst.
    double deferred_store_ms = 0;
    int prefill_calls = 0;     // engine prefill / prefill_snapshot calls before the first token
    SteadyTime received{};     // the handler started (I/O thread)
    SteadyTime enqueued{};     // Scheduler::submit
    SteadyTime dequeued{};     // admitted into a slot
    SteadyTime first_token{};  // choice 0's first token sampled

    void add(Phase p, double ms_) { ms[size_t(p)] += ms_; }
};

inline double ms_between(SteadyTime a, SteadyTime b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Measures one phase on the calling thread: adds the elapsed time on destruction.
class PhaseTimer {
public:
    PhaseTimer(PhaseTimes& t, Phase p) : t_(t), p_(p), start_(std::chrono::steady_clock::now()) {}
    ~PhaseTimer() { t_.add(p_, ms_between(start_, std::chrono::steady_clock::now())); }
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;

private:
    PhaseTimes& t_;
    Phase p_;
    SteadyTime start_;
};

}  // namespace frost::serve
