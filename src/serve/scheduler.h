// The engine thread: the only thread that touches the device. HTTP threads submit Jobs to a
// bounded FIFO (full -> the caller answers 503 + Retry-After before any byte is streamed); the
// loop admits jobs into free slots, plans each one (append / restore / rebuild), prefills in
// bounded steps and decodes one token per step, round-robin across active jobs, and streams
// events into each job's Channel. A cancelled job (client gone) frees its slot at the next step.
// The capsule store and the sessions' journals live here and are touched only on this thread;
// the API reaches them through control() closures run between steps.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/capsule_store.h"
#include "serve/channel.h"
#include "serve/claim_log.h"
#include "serve/engine_iface.h"
#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/persistence.h"

namespace frost::serve {

struct Job {
    std::string id;     // request id, also used in the claim log
    std::string owner;  // API-key scope
    GenRequest req;
    std::vector<int32_t> prompt;
    size_t history_boundary = 0;  // auto-capsule point (chat: end of the resent history); 0 = none
    int64_t max_new = 0;
    // POST /v1/capsules: prefill the whole prompt and freeze it as a capsule (pinned when
    // req.pin_prefix); no token is generated. The Finish event's usage.capsule_id names it.
    bool capsule_only = false;
    int capsule_priority = 0;
    double capsule_ttl_s = 0;
    std::shared_ptr<Channel> channel;
    std::atomic<bool> cancelled{false};
    std::chrono::steady_clock::time_point enqueued;
};

struct SchedulerConfig {
    size_t queue_cap = 16;
    size_t prefill_step = 256;  // tokens per prefill step: bounds cancel latency during prefill
    bool auto_capsules = true;  // snapshot each chat request's history boundary
    StoreBudgets budgets;
    std::string claim_log_path;  // empty: in memory only
    // Persistence (persistence.h): re-indexed at start(), flushed at stop(). Empty: none.
    std::string capsule_dir;
};

enum class Admit { Ok, QueueFull, Draining };

class Scheduler {
public:
    Scheduler(EngineIface& engine, const TextIface& text, SchedulerConfig cfg, Metrics* metrics);
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    frost_status start();
    // Stops admitting; running and queued jobs go on.
    void begin_drain();
    bool draining() const { return draining_.load(); }
    // Ends every job still running with a final error event ("server shutting down"), stops and
    // joins the engine thread. Idempotent.
    void stop();

    Admit submit(std::shared_ptr<Job> job);
    void wake();  // a job was cancelled or a reader drained its channel

    // Runs fn on the engine thread between steps (or inline when no engine thread runs) and
    // waits until it ran.
    bool control(const std::function<void(CapsuleStore&, ClaimLog&)>& fn);

    size_t queue_depth() const;
    size_t busy_slots() const { return busy_slots_.load(); }
    bool capsules_supported() const { return engine_.capsules_supported(); }
    const SchedulerConfig& config() const { return cfg_; }
    // What start() found in the capsule dir, and what stop() wrote there.
    const ReindexReport& reindex_report() const { return reindex_; }
    const FlushReport& flush_report() const { return flush_; }

private:
    struct Slot;
    struct Active;
    void loop();
    void admit_from_queue();
    int pick_slot(const Job& job);
    bool step(Active& a);  // false when the job is finished (slot released)
    bool start_choice(Active& a);
    bool prefill_step(Active& a);
    bool handle_token(Active& a, int32_t tok);
    bool finish_choice(Active& a, const char* reason);
    bool finish_capsule_only(Active& a);
    void emit(Active& a, const std::string& text);
    void fail_job(Active& a, const ApiError& e, bool state_unknown);
    void release(Active& a);
    // Prefills prompt[pos, end) and freezes the state at `end` as a capsule (auto prefix reuse).
    bool prefill_and_snapshot(Active& a, size_t end, int32_t* next);
    void update_store_metrics();

    EngineIface& engine_;
    const TextIface& text_;
    SchedulerConfig cfg_;
    Metrics* metrics_;
    ClaimLog log_;
    std::unique_ptr<CapsuleStore> store_;
    bool persistence_on() const { return !cfg_.capsule_dir.empty() && engine_.capsules_supported(); }
    ReindexReport reindex_;
    FlushReport flush_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::deque<std::function<void()>> controls_;
    bool stop_requested_ = false;
    bool woken_ = false;
    bool exited_ = false;  // the engine thread left its loop
    std::atomic<bool> draining_{false};
    std::atomic<bool> running_{false};
    std::atomic<size_t> busy_slots_{0};
    std::thread thread_;

    std::vector<Slot> slots_;                 // engine thread only
    std::vector<std::unique_ptr<Active>> active_;  // engine thread only
    uint64_t use_clock_ = 0;
    std::chrono::steady_clock::time_point epoch_;
};

}  // namespace frost::serve
