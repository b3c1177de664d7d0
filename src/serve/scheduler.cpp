// Engine-thread loop (see scheduler.h). Invariants: a slot's journal always equals the token ids
// committed to that slot's live state (updated per prefill step and per decode), so a cancel at
// any step leaves a slot whose journal is exact and reusable by the next request's plan.
#include "serve/scheduler.h"
#include "serve/scheduler_state.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "exec/error.h"
#include "serve/heap_refusal.h"
#include "serve/ids.h"
#include "serve/planner.h"
#include "serve/reasoning_split.h"
#include "serve/stop_matcher.h"
#include "util/fs.h"

namespace frost::serve {

namespace {
constexpr auto kIdleWait = std::chrono::milliseconds(200);
constexpr auto kBlockedWait = std::chrono::milliseconds(2);
constexpr double kExpireEvery = 1.0;  // seconds between TTL sweeps
}  // namespace

Scheduler::Scheduler(EngineIface& engine, const TextIface& text, SchedulerConfig cfg, Metrics* metrics)
    : engine_(engine), text_(text), cfg_(std::move(cfg)), metrics_(metrics) {
    epoch_ = std::chrono::steady_clock::now();
    slice_budget_ = SliceBudget(cfg_.prefill_share);
    step_tokens_ = std::max<size_t>(1, engine_.slice_rows() > 0 ? std::min(cfg_.prefill_step, engine_.slice_rows())
                                                                 : cfg_.prefill_step);
    slots_.resize(size_t(std::max(0, engine_.slots())));
    StoreHooks hooks;
    hooks.move = [this](CapsuleRecord& r, Tier to) {
        // Landing on disk makes the capsule durable at once (file + sidecar), not at stop().
        if (to == Tier::Disk && persistence_on())
            return persist_to_disk(cfg_.capsule_dir, engine_, r, store_->ttl_left(r), wall_clock_s(), auth_.get());
        return engine_.move(r.handle, to);
    };
    hooks.drop = [this](CapsuleRecord& r) {
        engine_.drop(r.handle);
        // A dropped capsule must not come back at the next start.
        if (r.persisted) remove_persisted(cfg_.capsule_dir, r.id);
    };
    hooks.changed = [this](const CapsuleRecord& r) {
        // Best effort: on failure the previous sidecar (old policy) stays valid and stop()
        // rewrites it; the capsule itself stays durable.
        if (r.persisted && persistence_on())
            (void)write_sidecar(cfg_.capsule_dir, r, store_->ttl_left(r), wall_clock_s(), auth_.get());
    };
    store_ = std::make_unique<CapsuleStore>(cfg_.budgets, std::move(hooks), &log_, [this] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
    });
}

Scheduler::~Scheduler() { stop(); }

frost_status Scheduler::start() {
    if (slots_.empty()) return fail(FROST_ERR_INVALID_ARG, "engine has no slots");
    std::string err;
    if (persistence_on() && !util::make_dirs(cfg_.capsule_dir, &err))
        return fail(FROST_ERR_IO, "capsule dir %s: %s", cfg_.capsule_dir.c_str(), err.c_str());
    if (persistence_on() && cfg_.sidecar_owner_keys) {
        auth_ = std::make_unique<SidecarAuth>();
        FROST_TRY(load_sidecar_auth(cfg_.capsule_dir, *cfg_.sidecar_owner_keys, auth_.get()));
    }
    if (!cfg_.claim_log_path.empty()) FROST_TRY(log_.open_file(cfg_.claim_log_path));
    if (persistence_on()) {
        reindex_ = reindex_capsule_dir(cfg_.capsule_dir, engine_, *store_, &log_, wall_clock_s(), auth_.get());
        update_store_metrics();
    }
    running_ = true;
    thread_ = std::thread([this] { loop(); });
    return FROST_OK;
}

void Scheduler::begin_drain() { draining_ = true; }

void Scheduler::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!running_) return;
        draining_ = true;
        stop_requested_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    running_ = false;
    // The engine thread is gone: this thread alone owns the store now.
    if (persistence_on()) flush_ = flush_capsule_dir(cfg_.capsule_dir, engine_, *store_, wall_clock_s(), auth_.get());
}

Admit Scheduler::submit(std::shared_ptr<Job> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return Admit::Draining;
    if (queue_.size() >= cfg_.queue_cap) return Admit::QueueFull;
    auto it = per_key_.find(job->owner);
    if (cfg_.max_per_key > 0 && it != per_key_.end() && it->second >= cfg_.max_per_key) return Admit::KeyLimit;
    // Both allocating steps before anything is counted, the queue's first: a refusal (T33)
    // leaves the scheduler as it was.
    queue_.push_back(job);
    try {
        per_key_[job->owner]++;
    } catch (...) {
        queue_.pop_back();
        throw;
    }
    job->key_counted = true;
    job->enqueued = std::chrono::steady_clock::now();
    PhaseTimes& t = job->times;
    if (t.received == SteadyTime{}) t.received = job->enqueued;
    t.enqueued = job->enqueued;
    t.ms[size_t(Phase::Parse)] = std::max(0.0, ms_between(t.received, t.enqueued) - t.ms[size_t(Phase::Template)] -
                                                   t.ms[size_t(Phase::Tokenize)]);
    if (metrics_) metrics_->queue_depth = queue_.size();
    woken_ = true;
    cv_.notify_all();
    return Admit::Ok;
}

void Scheduler::wake() {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
    cv_.notify_all();
}

size_t Scheduler::in_flight(const std::string& owner) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = per_key_.find(owner);
    return it == per_key_.end() ? 0 : it->second;
}

void Scheduler::uncount(Job& job) {
    std::lock_guard<std::mutex> lock(mu_);
    uncount_locked(job);
}

void Scheduler::uncount_locked(Job& job) {
    if (!job.key_counted) return;
    job.key_counted = false;
    auto it = per_key_.find(job.owner);
    if (it == per_key_.end()) return;
    if (--it->second == 0) per_key_.erase(it);
}

size_t Scheduler::queue_depth() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
}

bool Scheduler::control(const std::function<void(CapsuleStore&, ClaimLog&)>& fn) {
    auto done = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
    auto finished = std::make_shared<bool>(false);
    auto failure = std::make_shared<std::exception_ptr>();
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!running_ || exited_) {
            // No engine thread (not started, or gone): this thread is the only one left.
            fn(*store_, log_);
            update_store_metrics();
            return true;
        }
        controls_.push_back([this, &fn, done, finished, failure] {
            // An exception goes back to the caller's thread (rethrown there), never out of the
            // engine thread's loop, which would lose the controls queued behind this one.
            try {
                fn(*store_, log_);
            } catch (...) {
                *failure = std::current_exception();
            }
            update_store_metrics();
            std::lock_guard<std::mutex> l(done->first);
            *finished = true;
            done->second.notify_all();
        });
        woken_ = true;
    }
    cv_.notify_all();
    // Unbounded wait on purpose: the closure refers to the caller's stack, so the caller must not
    // leave before it ran. The engine thread runs controls between steps (each step is bounded by
    // prefill_step tokens) and drains them when it exits.
    std::unique_lock<std::mutex> l(done->first);
    done->second.wait(l, [&] { return *finished; });
    if (*failure) std::rethrow_exception(*failure);
    return true;
}

void Scheduler::post_control(std::function<void(CapsuleStore&, ClaimLog&)> fn) {
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (running_ && !exited_) {
            controls_.push_back([this, fn = std::move(fn)] {
                // fn answers its own caller (an HTTP reply) and catches what it can; what still
                // escapes is counted here, never thrown out of the engine thread's loop.
                try {
                    fn(*store_, log_);
                } catch (const std::exception&) {
                    note_exception(exception_is_bad_alloc());
                }
                update_store_metrics();
            });
            woken_ = true;
            lock.unlock();
            cv_.notify_all();
            return;
        }
    }
    // No engine thread (not started, or gone): this thread is the only one left.
    fn(*store_, log_);
    update_store_metrics();
}

void Scheduler::update_store_metrics() {
    if (!metrics_) return;
    for (int t = 0; t < kTierCount; ++t) metrics_->capsule_bytes[t] = store_->used(Tier(t));
    metrics_->capsules = store_->size();
    update_memory_metrics();
}

void Scheduler::update_memory_metrics() {
    EngineMemory m;
    if (!metrics_ || !engine_.memory(&m)) return;
    for (int s = 0; s < 3; ++s) metrics_->buffer_bytes[s] = m.buffer_bytes[s];
    metrics_->live_buffers = m.live_buffers;
    metrics_->live_graphs = m.live_graphs;
    metrics_->device_used = m.device_used;
    metrics_->device_total = m.device_total;
    metrics_->has_device = m.has_device;
    metrics_->has_memory = true;
}

int Scheduler::pick_slot(const Job& job) {
    int best = -1;
    size_t best_score = 0;
    for (size_t s = 0; s < slots_.size(); ++s) {
        const Slot& sl = slots_[s];
        if (sl.busy) continue;
        size_t score = 0;
        // Live state is reused only within one API key's scope.
        if (sl.owner == job.owner && !sl.journal.empty() && sl.journal.size() < job.prompt.size() &&
            std::equal(sl.journal.begin(), sl.journal.end(), job.prompt.begin()))
            score = sl.journal.size() + 1;
        if (best < 0 || score > best_score || (score == best_score && sl.last_use < slots_[size_t(best)].last_use)) {
            best = int(s);
            best_score = score;
        }
    }
    return best;
}

void Scheduler::admit_from_queue() {
    std::vector<std::shared_ptr<Job>> cancelled;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = queue_.begin(); it != queue_.end();) {
            if ((*it)->is_cancelled()) {
                uncount_locked(**it);
                cancelled.push_back(*it);
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
        while (!queue_.empty()) {
            const int slot = pick_slot(*queue_.front());
            if (slot < 0) break;
            // Allocated and placed before the job leaves the queue: a refusal leaves it queued.
            active_.reserve(active_.size() + 1);
            auto a = std::make_unique<Active>();
            a->job = queue_.front();
            queue_.pop_front();
            a->job->times.dequeued = std::chrono::steady_clock::now();
            a->job->times.ms[size_t(Phase::Queue)] = ms_between(a->job->times.enqueued, a->job->times.dequeued);
            a->slot = slot;
            slots_[size_t(slot)].busy = true;
            busy_slots_++;
            active_.push_back(std::move(a));
        }
        if (metrics_) {
            metrics_->queue_depth = queue_.size();
            metrics_->active_requests = active_.size();
        }
    }
    if (metrics_) metrics_->cancelled_total += cancelled.size();
}

void Scheduler::loop() {
    double last_expire = 0;
    update_memory_metrics();
    for (;;) {
        bool stopping = false;
        try {
            stopping = round(last_expire);
        } catch (const std::exception&) {
            // Not caught nearer its job (T33): every admitted job ends with an error; the queue,
            // the store and the slots (their state now unknown) serve the next ones.
            fail_all_active();
        }
        if (stopping) break;
    }
    // Shutdown: every job still admitted ends with a final error event.
    retry_while_heap_refuses([&] {
        ApiError e = make_error(503, "server_error", "shutting_down", "the server is shutting down");
        for (auto& a : active_) fail_job(*a, e, false);
        active_.clear();
        std::lock_guard<std::mutex> lock(mu_);
        while (!queue_.empty()) {
            uncount_locked(*queue_.front());
            StreamEvent ev;
            ev.kind = StreamEvent::Kind::Error;
            ev.error = e;
            queue_.front()->channel->push_final(std::move(ev));
            queue_.pop_front();
        }
    });
    std::lock_guard<std::mutex> lock(mu_);
    exited_ = true;
    std::deque<std::function<void()>> left;
    left.swap(controls_);
    for (auto& c : left) c();  // under mu_: control() callers are blocked until these ran
}

void Scheduler::fail_all_active() {
    const bool oom = exception_is_bad_alloc();
    note_exception(oom);
    retry_while_heap_refuses([&] {
        const ApiError e = oom ? out_of_memory_error() : internal_error("the engine thread's round failed");
        for (auto& a : active_) fail_job(*a, e, true);
        for (auto& f : forks_) fail_job(*f, e, true);
        active_.clear();
        forks_.clear();
        if (metrics_) metrics_->active_requests = 0;
    });
}

// Inside a catch block: whether the exception in flight is std::bad_alloc.
bool Scheduler::exception_is_bad_alloc() {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return true;
    } catch (...) {
        return false;
    }
}

void Scheduler::note_exception(bool oom) {
    if (!metrics_) return;
    if (oom) metrics_->out_of_memory_total++;
    else metrics_->exceptions_total++;
}

// Inside a catch block: ends `a` with the error for the exception in flight; its slot's state is
// unknown (the step may have stopped half way).
void Scheduler::fail_after_exception(Active& a) {
    const bool oom = exception_is_bad_alloc();
    note_exception(oom);
    retry_while_heap_refuses([&] {
        fail_job(a, oom ? out_of_memory_error() : internal_error("a scheduler step failed"), true);
    });
}

bool Scheduler::round(double& last_expire) {
    std::deque<std::function<void()>> controls;
    bool stopping;
    {
        std::lock_guard<std::mutex> lock(mu_);
        controls.swap(controls_);
        stopping = stop_requested_;
    }
    for (auto& c : controls) c();
    if (stopping) return true;

    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
    if (now - last_expire >= kExpireEvery) {
        if (store_->expire() > 0) update_store_metrics();
        last_expire = now;
    }
    admit_from_queue();

    // One round: every job still prefilling runs one bounded chunk (prefill_step tokens, sliced
    // beside decoding streams), then
    // every decoding job advances by one token in ONE batched engine step. A new long prompt
    // therefore costs the running streams at most one chunk per token, and a job joins the
    // batch in the round after its prefill ends; a cancelled one leaves it at the next round.
    bool progressed = false;
    std::vector<Active*> decoding;
    streams_decoding_ = std::any_of(active_.begin(), active_.end(), [](const std::unique_ptr<Active>& a) {
        return a->phase == Active::Phase::Decode && !a->job->is_cancelled() && !a->job->channel->full();
    });
    for (size_t i = 0; i < active_.size();) {
        Active& a = *active_[i];
        if (a.job->is_cancelled()) {
            if (metrics_) metrics_->cancelled_total++;
            release(a);
            active_.erase(active_.begin() + long(i));
            progressed = true;
            continue;
        }
        if (a.job->channel->full()) {  // slow reader: wait for it, never block the others
            ++i;
            continue;
        }
        progressed = true;
        if (a.phase == Active::Phase::Decode) {
            decoding.push_back(&a);
            ++i;
            continue;
        }
        bool going = false;
        try {
            going = step(a);
        } catch (const std::exception&) {
            fail_after_exception(a);  // this job alone: the others go on
        }
        if (!going) {
            active_.erase(active_.begin() + long(i));
            continue;
        }
        ++i;
    }
    if (!decoding.empty()) {
        std::vector<Active*> done;
        try {
            done = decode_round(decoding);
        } catch (const std::exception&) {
            // Some of the round's jobs may have taken their token already: all of them end.
            for (Active* a : decoding) fail_after_exception(*a);
            done.swap(decoding);
        }
        active_.erase(std::remove_if(active_.begin(), active_.end(),
                                     [&](const std::unique_ptr<Active>& a) {
                                         return std::find(done.begin(), done.end(), a.get()) != done.end();
                                     }),
                      active_.end());
    }
    // Choices forked during this round join the round-robin from the next one (room first, so
    // that no fork is left behind moved-from when the heap refuses).
    active_.reserve(active_.size() + forks_.size());
    for (auto& f : forks_) active_.push_back(std::move(f));
    forks_.clear();
    if (metrics_) metrics_->active_requests = active_.size();
    if (!progressed) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, active_.empty() ? kIdleWait : kBlockedWait,
                     [this] { return woken_ || stop_requested_; });
        woken_ = false;
    }
    return false;
}

bool Scheduler::step(Active& a) {
    switch (a.phase) {
        case Active::Phase::Start: return start_choice(a);
        case Active::Phase::Prefill: return prefill_step(a);
        case Active::Phase::Decode: {
            std::vector<Active*> one{&a};
            return decode_round(one).empty();
        }
    }
    return false;
}

// One engine step for every decoding job (EngineIface::decode_batch); each job then handles
// its token as a solo decode would have it. Returns the jobs that finished (slot released).
std::vector<Scheduler::Active*> Scheduler::decode_round(const std::vector<Active*>& jobs) {
    std::vector<int> slots;
    for (const Active* a : jobs) slots.push_back(a->slot);
    std::vector<int32_t> next(jobs.size(), -1);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Active*> done;
    if (const frost_status st = engine_.decode_batch(slots.data(), int(slots.size()), next.data()); st != FROST_OK) {
        const ApiError e = engine_failure(st, "decode failed: " + last_error());
        for (Active* a : jobs) {
            fail_job(*a, e, true);
            done.push_back(a);
        }
        return done;
    }
    slice_budget_.note_decode(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (metrics_) {
        metrics_->decode_us_total += uint64_t(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
        metrics_->decode_steps_total++;
        metrics_->decode_rows_total += jobs.size();
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
        Active& a = *jobs[i];
        slots_[size_t(a.slot)].journal.push_back(a.pending);
        slots_[size_t(a.slot)].exact = false;  // a decode step's bits are not a prefill's
        if (!handle_token(a, next[i])) done.push_back(&a);
    }
    return done;
}

void Scheduler::fail_job(Active& a, const ApiError& e, bool state_unknown) {
    if (metrics_) metrics_->errors_total++;
    StreamEvent ev;
    ev.kind = StreamEvent::Kind::Error;
    ev.error = e;
    uncount(*a.job);
    if (a.batched) a.job->cancelled = true;
    if (a.job->leader) a.job->leader->cancelled = true;  // a batched request's other prompts stop too  // an error ends the whole request: its other forks stop too
    a.job->channel->push_final(std::move(ev));
    if (state_unknown && a.slot >= 0) slots_[size_t(a.slot)].journal.clear();
    release(a);
}

void Scheduler::release(Active& a) {
    // A request that ends before its first token (error, cancel, shutdown) still acknowledges
    // the capsule it froze: the state at the boundary is valid.
    if (a.pending_capsule) finalize_capsule(a);
    // A fork group holds its place until its last choice ends (or the request is cancelled).
    if (!a.batched || a.job->choices_left <= 0 || a.job->cancelled) uncount(*a.job);
    free_fork_slots(a);
    if (a.slot < 0) return;
    // A piece left half way through its layers: the slot's state matches no journal (the next
    // request rebuilds or restores it, which drops the piece).
    if (a.slicing) slots_[size_t(a.slot)].journal.clear();
    a.slicing = false;
    if (a.matcher) engine_.set_token_mask(a.slot, nullptr, 0);  // the next request starts free
    slots_[size_t(a.slot)].busy = false;
    slots_[size_t(a.slot)].last_use = ++use_clock_;
    a.slot = -1;
    busy_slots_--;
    update_memory_metrics();
}

}  // namespace frost::serve
