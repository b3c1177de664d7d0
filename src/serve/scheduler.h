// The engine thread: the only thread that touches the device. HTTP threads submit Jobs to a
// bounded FIFO (full -> the caller answers 503 + Retry-After before any byte is streamed); the
// loop admits jobs into free slots, plans each one (append / restore / rebuild), prefills in
// bounded steps and, per round, advances every decoding job by one token in ONE batched engine
// step (EngineIface::decode_batch: continuous admission, prefill chunks interleaved), and streams
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
#include "serve/slice_budget.h"
#include "serve/timings.h"
#include "text/grammar/token_mask.h"

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
    // Chat with thinking not disabled: <think>...</think> text goes to reasoning_content;
    // starts_in_reasoning when the generation prompt already opened the block (Qwen3.5/3.6).
    bool split_reasoning = false;
    bool starts_in_reasoning = false;
    // tool_choice "required" / named: the call markup already appended to the prompt; every
    // choice's output is parsed as if it began with it.
    std::string forced_prefix;
    // Constrained decoding (constraint.h): the compiled automaton every choice runs its own
    // matcher over, and the vocabulary masker; null when the output is free.
    std::shared_ptr<text::grammar::Machine> constraint;
    std::shared_ptr<const text::grammar::TokenMasker> masker;
    int capsule_priority = 0;
    double capsule_ttl_s = 0;
    // Capsule-only: the request's pinned field; applied (with priority, ttl) to an existing
    // capsule of the same prefix on the engine thread, so the reply needs no control() round.
    std::optional<bool> capsule_pin;
    std::shared_ptr<Channel> channel;
    std::atomic<bool> cancelled{false};
    // A batched completions request is one job per prompt sharing one channel: this job's
    // choices are numbered from index_base, and cancelling the leader (the job the connection
    // holds) cancels them all.
    int index_base = 0;
    std::shared_ptr<Job> leader;
    bool is_cancelled() const { return cancelled || (leader && leader->cancelled); }
    std::chrono::steady_clock::time_point enqueued;
    // Phase timings of choice 0 up to its first token: the I/O thread's part is written before
    // submit(), the engine's after it; a copy travels in the Finish event (timings.h).
    PhaseTimes times;
    bool key_counted = false;
    int choices_left = 0;      // choices not yet finished (engine thread)  // holds one of its owner's max_per_key places (engine thread / mu_)
};

struct SchedulerConfig {
    size_t queue_cap = 16;
    // Requests queued + running per API key (tenant); beyond it submit() answers KeyLimit (429)
    // while the global queue may still have room. 0 = no per-key limit.
    size_t max_per_key = 0;
    // Tokens per prefill step (one engine call), at most the engine's slice_rows() when it has
    // sliced prefill. The split never depends on load (a GEMM's bits depend on its row count), so
    // a request's output does not either. While other streams decode, a step runs sliced
    // (EngineIface::prefill_slices_*): a few of its layers per round, at most prefill_share of
    // the measured decode step (slice_budget.h), so a running stream's inter-token latency stays
    // near (1 + prefill_share)x its unloaded value while a long prompt is admitted. Without
    // slices a running stream waits for a whole step between two tokens (9B-style on the H100,
    // 128-token steps: x2.4), which is why steps were 128 tokens before; with them, 512-token
    // steps pass over the weights a quarter as often (16k cold: 128-token steps cost 2.4x the
    // engine's 2048-token chunks).
    size_t prefill_step = 512;
    double prefill_share = 0.6;
    bool auto_capsules = true;  // snapshot each chat request's history boundary
    StoreBudgets budgets;
    std::string claim_log_path;  // empty: in memory only
    // Persistence (persistence.h): re-indexed at start(), flushed at stop(). Empty: none.
    std::string capsule_dir;
    // Set (the server always sets it): sidecars are authenticated (SidecarAuth) with these
    // owner scopes and their API keys; a sidecar naming another scope is refused at start.
    std::optional<std::map<std::string, std::string>> sidecar_owner_keys;
};

enum class Admit { Ok, QueueFull, KeyLimit, Draining };

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
    // Queues fn for the engine thread between steps and returns at once (runs it inline when no
    // engine thread runs). For the HTTP threads, which must never wait for the engine.
    void post_control(std::function<void(CapsuleStore&, ClaimLog&)> fn);

    size_t queue_depth() const;
    // Requests of `owner` queued or running now (what max_per_key bounds).
    size_t in_flight(const std::string& owner) const;
    size_t busy_slots() const { return busy_slots_.load(); }
    bool capsules_supported() const { return engine_.capsules_supported(); }
    const SchedulerConfig& config() const { return cfg_; }
    // What start() found in the capsule dir, and what stop() wrote there.
    const ReindexReport& reindex_report() const { return reindex_; }
    const FlushReport& flush_report() const { return flush_; }

private:
    struct Slot;
    struct Active;
    struct PendingCapsule;
    void loop();
    // One pass of the engine thread: controls, expiry, admission, a prefill chunk per prefilling
    // job and one batched decode step. True when a stop was requested.
    bool round(double& last_expire);
    // After an exception (T33): the job it happened in ends with 503 insufficient_memory
    // (std::bad_alloc) or 500 internal_error, its slot's state unknown; fail_all_active ends
    // every admitted job so when the exception escaped the round itself.
    void fail_after_exception(Active& a);
    void fail_all_active();
    void note_exception(bool oom);
    static bool exception_is_bad_alloc();
    void admit_from_queue();
    int pick_slot(const Job& job);
    bool step(Active& a);  // false when the job is finished (slot released)
    // Advances every decoding job of this round by one token in one batched engine step;
    // returns the ones that finished (their slots released).
    std::vector<Active*> decode_round(const std::vector<Active*>& jobs);
    bool start_choice(Active& a);
    // Per-choice setup: sampling (seed + choice), detokenizer, stop / tool / reasoning matchers.
    bool init_choice(Active& a);
    frost_status set_mask(Active& a);  // constrained decoding: the matcher's mask onto the slot
    Sampling choice_sampling(const Active& a) const;  // the request's sampling, seed + choice
    // n > 1: claims n-1 free slots for a batched fork (else the choices run one after another).
    void claim_fork_slots(Active& a);
    void free_fork_slots(Active& a);
    // At the prompt's last token: copies choice 0's state into the claimed slots, one Active each.
    void fork_choices(Active& a);
    bool prefill_step(Active& a);
    // Sliced prefill (slice_budget.h): the staged piece's layers of this round; and what follows
    // a piece or chunk that is in the state (journal, position, first token).
    bool sliced_prefill_step(Active& a);
    bool prefilled(Active& a, size_t end, int32_t next);
    // Records the first token's time, runs handle_token_events, then any deferred capsule work.
    bool handle_token(Active& a, int32_t tok);
    bool handle_token_events(Active& a, int32_t tok);
    // Logprobs (scheduler_logprobs.cpp): the sampled token's entry from the engine, queued until
    // the next text event carries it; echo of the prompt (with its logprobs when asked).
    bool note_logprobs(Active& a, int32_t tok);
    nlohmann::json logprob_entry(int32_t id, std::optional<float> logprob,
                                 const std::vector<std::pair<int32_t, float>>* top) const;
    bool prefill_scored_step(Active& a);
    void echo_prompt(Active& a, const std::vector<TokenLogprobs>* scored);
    // Where this Active's phase times go: the job's until choice 0's first token, else nowhere.
    PhaseTimes& times(Active& a);
    // Acknowledges the capsule prefill_and_snapshot froze: durable files (disk tier), then
    // materialized, then headroom on the device tier for the next one. Idempotent.
    void finalize_capsule(Active& a);
    // finalize_capsule's work; *materialized once the store acknowledged the capsule.
    void finalize_pending(Active& a, PendingCapsule& p, bool* materialized);
    bool finish_choice(Active& a, const char* reason);
    bool finish_capsule_only(Active& a);
    void emit(Active& a, const std::string& text);
    // Sends already split text: reasoning as is, content through the tool-call marker hold.
    void emit_split(Active& a, const std::string& reasoning, const std::string& content);
    void fail_job(Active& a, const ApiError& e, bool state_unknown);
    void release(Active& a);
    // Gives the job's per-key place back (idempotent); every way a job ends passes here.
    void uncount(Job& job);
    void uncount_locked(Job& job);
    // Prefills prompt[pos, end) and freezes the state at `end` as a capsule (auto prefix reuse).
    // The failing engine call's status (FROST_OK also when no capsule could be made: the prefill
    // went on without one).
    frost_status prefill_and_snapshot(Active& a, size_t end, int32_t* next);
    // Writes a capsule that the store placed on disk as its durable file pair before it is
    // materialized. False: nothing is left (engine capsule dropped, files removed), *why says why.
    bool persist_new_capsule(const CapsuleRequest& req, uint64_t* handle, std::string* why);
    void update_store_metrics();
    // The engine's memory (EngineIface::memory) into the metrics: at the loop's start, after a
    // request ends and after store changes, never per step. Engine thread (or none left).
    void update_memory_metrics();

    EngineIface& engine_;
    const TextIface& text_;
    SchedulerConfig cfg_;
    Metrics* metrics_;
    ClaimLog log_;
    std::unique_ptr<CapsuleStore> store_;
    bool persistence_on() const { return !cfg_.capsule_dir.empty() && engine_.capsules_supported(); }
    std::unique_ptr<SidecarAuth> auth_;  // null: sidecars unauthenticated (tests of the format)
    ReindexReport reindex_;
    FlushReport flush_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::deque<std::function<void()>> controls_;
    std::map<std::string, size_t> per_key_;  // owner -> queued + running requests (under mu_)
    bool stop_requested_ = false;
    bool woken_ = false;
    bool exited_ = false;  // the engine thread left its loop
    std::atomic<bool> draining_{false};
    std::atomic<bool> running_{false};
    std::atomic<size_t> busy_slots_{0};
    std::thread thread_;

    std::vector<Slot> slots_;                 // engine thread only
    std::vector<std::unique_ptr<Active>> active_;  // engine thread only
    std::vector<std::unique_ptr<Active>> forks_;   // forked this round, join active_ after it
    uint64_t use_clock_ = 0;
    std::chrono::steady_clock::time_point epoch_;
    PhaseTimes scratch_times_;  // phases after the first token land here, unreported
    // Sliced prefill beside decoding streams: the per-round budget and whether this round has
    // decoding streams (set at the start of each round).
    SliceBudget slice_budget_{0.6};
    bool streams_decoding_ = false;
    size_t step_tokens_ = 0;  // prefill_step, capped at the engine's slice_rows() (ctor)
};

}  // namespace frost::serve
