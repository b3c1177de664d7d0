// Engine-thread loop (see scheduler.h). Invariants: a slot's journal always equals the token ids
// committed to that slot's live state (updated per prefill step and per decode), so a cancel at
// any step leaves a slot whose journal is exact and reusable by the next request's plan.
#include "serve/scheduler.h"

#include <algorithm>
#include <optional>

#include "exec/error.h"
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

struct Scheduler::Slot {
    std::vector<int32_t> journal;  // ids committed to this slot's state
    std::string owner;
    uint64_t last_use = 0;
    bool busy = false;
};

// A capsule frozen at the history boundary whose acknowledgement (durable files, materialized)
// waits until the request's first token is out.
struct Scheduler::PendingCapsule {
    CapsuleRequest req;
    uint64_t handle = 0;
    uint64_t bytes = 0;
    bool to_file = false;  // placed on disk: written as its file pair before it is materialized
};

struct Scheduler::Active {
    std::shared_ptr<Job> job;
    std::unique_ptr<PendingCapsule> pending_capsule;
    int slot = -1;
    int choice = 0;
    enum class Phase { Start, Prefill, Decode } phase = Phase::Start;
    size_t pos = 0;          // next prompt index to prefill
    int32_t pending = -1;    // sampled, not yet committed
    int64_t generated = 0;
    bool first_token = true;
    std::unique_ptr<Detokenizer> detok;
    std::unique_ptr<StopMatcher> stop;
    std::unique_ptr<StopMatcher> marker;  // tool-call markup: content stops streaming there
    bool tools_on = false;
    std::unique_ptr<ReasoningSplitter> think;  // set when the job splits reasoning
    std::string content_text;  // the content part of the output (tool calls are parsed here only)
    ChoiceUsage usage;
    std::string made_capsule;  // the capsule this request froze (or found already held)
    // n > 1 as one batched fork: choice 0 prefills the prompt up to its last token, its state is
    // copied into fork_slots (claimed at start), and each other choice runs there as its own
    // Active from that point. `batched` marks every member of such a group.
    bool batched = false;
    bool forked = false;
    std::vector<int> fork_slots;
    std::string capsule_refusal;  // why none was frozen, when the store refused
};

Scheduler::Scheduler(EngineIface& engine, const TextIface& text, SchedulerConfig cfg, Metrics* metrics)
    : engine_(engine), text_(text), cfg_(std::move(cfg)), metrics_(metrics) {
    epoch_ = std::chrono::steady_clock::now();
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
    per_key_[job->owner]++;
    job->key_counted = true;
    job->enqueued = std::chrono::steady_clock::now();
    PhaseTimes& t = job->times;
    if (t.received == SteadyTime{}) t.received = job->enqueued;
    t.enqueued = job->enqueued;
    t.ms[size_t(Phase::Parse)] = std::max(0.0, ms_between(t.received, t.enqueued) - t.ms[size_t(Phase::Template)] -
                                                   t.ms[size_t(Phase::Tokenize)]);
    queue_.push_back(std::move(job));
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
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!running_ || exited_) {
            // No engine thread (not started, or gone): this thread is the only one left.
            fn(*store_, log_);
            update_store_metrics();
            return true;
        }
        controls_.push_back([this, &fn, done, finished] {
            fn(*store_, log_);
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
    return true;
}

void Scheduler::update_store_metrics() {
    if (!metrics_) return;
    for (int t = 0; t < kTierCount; ++t) metrics_->capsule_bytes[t] = store_->used(Tier(t));
    metrics_->capsules = store_->size();
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
            if ((*it)->cancelled) {
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
    for (;;) {
        std::deque<std::function<void()>> controls;
        bool stopping;
        {
            std::lock_guard<std::mutex> lock(mu_);
            controls.swap(controls_);
            stopping = stop_requested_;
        }
        for (auto& c : controls) c();
        if (stopping) break;

        const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
        if (now - last_expire >= kExpireEvery) {
            if (store_->expire() > 0) update_store_metrics();
            last_expire = now;
        }
        admit_from_queue();

        bool progressed = false;
        for (size_t i = 0; i < active_.size();) {
            Active& a = *active_[i];
            if (a.job->cancelled) {
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
            if (!step(a)) {
                active_.erase(active_.begin() + long(i));
                continue;
            }
            ++i;
        }
        // Choices forked during this round join the round-robin from the next one.
        for (auto& f : forks_) active_.push_back(std::move(f));
        forks_.clear();
        if (metrics_) metrics_->active_requests = active_.size();
        if (!progressed) {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait_for(lock, active_.empty() ? kIdleWait : kBlockedWait,
                         [this] { return woken_ || stop_requested_; });
            woken_ = false;
        }
    }
    // Shutdown: every job still admitted ends with a final error event.
    ApiError e = make_error(503, "server_error", "shutting_down", "the server is shutting down");
    for (auto& a : active_) fail_job(*a, e, false);
    active_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& j : queue_) {
        uncount_locked(*j);
        StreamEvent ev;
        ev.kind = StreamEvent::Kind::Error;
        ev.error = e;
        j->channel->push_final(std::move(ev));
    }
    queue_.clear();
    exited_ = true;
    std::deque<std::function<void()>> left;
    left.swap(controls_);
    for (auto& c : left) c();  // under mu_: control() callers are blocked until these ran
}

bool Scheduler::step(Active& a) {
    switch (a.phase) {
        case Active::Phase::Start: return start_choice(a);
        case Active::Phase::Prefill: return prefill_step(a);
        case Active::Phase::Decode: {
            const auto t0 = std::chrono::steady_clock::now();
            int32_t next = -1;
            if (engine_.decode(a.slot, &next) != FROST_OK) {
                fail_job(a, make_error(500, "server_error", "engine_error", "decode failed: " + last_error()), true);
                return false;
            }
            if (metrics_)
                metrics_->decode_us_total += uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                                                          std::chrono::steady_clock::now() - t0)
                                                          .count());
            slots_[size_t(a.slot)].journal.push_back(a.pending);
            return handle_token(a, next);
        }
    }
    return false;
}

bool Scheduler::start_choice(Active& a) {
    Job& job = *a.job;
    Slot& slot = slots_[size_t(a.slot)];
    slot.last_use = ++use_clock_;
    if (slot.owner != job.owner) {
        slot.journal.clear();  // another tenant's live state is never planned against
        slot.owner = job.owner;
    }
    std::optional<PhaseTimer> plan_timer(std::in_place, times(a), Phase::Plan);
    PlanInput in;
    in.prompt = &job.prompt;
    in.journal = &slot.journal;
    in.required_capsule = a.choice == 0 ? job.req.capsule_id : "";
    std::vector<const CapsuleRecord*> caps = store_->list(job.owner);
    for (const auto* c : caps) in.capsules.push_back(CapsuleView{c->id, &c->tokens, c->digest, true});
    Plan plan = plan_request(in);
    plan_timer.reset();
    // A capsule-only request must freeze its whole prompt. From a live or restored state the
    // engine can freeze only when its alignment grid point below the end lies at or past that
    // state (an extension of a few tokens past an unaligned capsule cannot): then it starts over
    // from position 0, which always can, so an extension by any length works.
    if (job.capsule_only && !plan.required_missing && plan.action != PlanAction::Rebuild &&
        !engine_.snapshot_possible(plan.cached_tokens, job.prompt.size())) {
        plan.action = PlanAction::Rebuild;
        plan.cached_tokens = 0;
    }
    if (plan.required_missing) {
        fail_job(a, make_error(404, "invalid_request_error", "capsule_not_found",
                               "capsule_id: no capsule '" + job.req.capsule_id + "' matches a prefix of this prompt"),
                 false);
        return false;
    }
    a.usage = ChoiceUsage{};
    a.usage.prompt_tokens = job.prompt.size();
    a.usage.plan_action = plan_action_name(plan.action);
    a.usage.cached_tokens = plan.cached_tokens;
    if (plan.action == PlanAction::Restore) {
        const auto t0 = std::chrono::steady_clock::now();
        CapsuleRecord rec;
        // The store's part (claim events, a promotion to the device tier) counts as store work;
        // Restore is the engine's copy into the slot.
        std::optional<PhaseTimer> store_timer(std::in_place, times(a), Phase::Store);
        const frost_status began = store_->begin_restore(plan.capsule_id, job.owner, job.id, &rec);
        store_timer.reset();
        if (began != FROST_OK) {
            update_store_metrics();
            slot.journal.clear();
            fail_job(a, make_error(503, "server_error", "capsule_restore_failed",
                                   "capsule " + plan.capsule_id + " could not be restored (refused): " + last_error()),
                     true);
            return false;
        }
        frost_status st;
        {
            PhaseTimer t(times(a), Phase::Restore);
            st = engine_.restore(rec.handle, a.slot);
        }
        store_timer.emplace(times(a), Phase::Store);
        store_->end_restore(rec.id, st == FROST_OK, job.id, st == FROST_OK ? "" : last_error());
        update_store_metrics();
        store_timer.reset();
        if (st != FROST_OK) {
            fail_job(a, make_error(503, "server_error", "capsule_restore_failed",
                                   "capsule " + plan.capsule_id + " could not be restored (refused)"),
                     true);
            return false;
        }
        if (metrics_)
            metrics_->restore_latency.observe(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        slot.journal = rec.tokens;
        a.usage.capsule_id = rec.id;
        a.pos = rec.tokens.size();
    } else if (plan.action == PlanAction::Append) {
        a.pos = slot.journal.size();
    } else {
        if (engine_.reset(a.slot) != FROST_OK) {
            fail_job(a, make_error(500, "server_error", "engine_error", "reset failed: " + last_error()), true);
            return false;
        }
        slot.journal.clear();
        a.pos = 0;
    }
    if (metrics_) {
        (plan.action == PlanAction::Rebuild ? metrics_->prefix_misses : metrics_->prefix_hits)++;
        metrics_->prompt_tokens_total += job.prompt.size();
        metrics_->cached_tokens_total += plan.cached_tokens;
    }
    if (!init_choice(a)) return false;
    if (a.choice == 0) job.choices_left = job.req.n;
    if (a.choice == 0 && job.req.n > 1) claim_fork_slots(a);
    return true;
}

Sampling Scheduler::choice_sampling(const Active& a) const {
    const Job& job = *a.job;
    Sampling s;
    s.temperature = float(job.req.temperature);
    s.top_k = job.req.top_k;
    s.top_p = float(job.req.top_p);
    s.seed = job.req.seed + uint64_t(a.choice);
    return s;
}

bool Scheduler::init_choice(Active& a) {
    Job& job = *a.job;
    if (engine_.set_sampling(a.slot, choice_sampling(a)) != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "sampling setup failed: " + last_error()), false);
        return false;
    }
    a.detok = text_.detokenizer();
    a.stop = std::make_unique<StopMatcher>(job.req.stop);
    a.tools_on = job.req.endpoint == Endpoint::Chat && !job.req.tools.empty() &&
                 job.req.tool_choice != ToolChoice::None;
    a.marker = a.tools_on ? std::make_unique<StopMatcher>(std::vector<std::string>{text_.tool_call_marker()}) : nullptr;
    a.think = job.split_reasoning ? std::make_unique<ReasoningSplitter>(job.starts_in_reasoning) : nullptr;
    a.content_text.clear();
    a.generated = 0;
    a.first_token = true;
    a.phase = Active::Phase::Prefill;
    return true;
}

void Scheduler::claim_fork_slots(Active& a) {
    Job& job = *a.job;
    const size_t P = job.prompt.size();
    if (!engine_.fork_live_supported() || job.capsule_only || P < 2 || a.pos > P - 1) return;
    std::vector<int> free;
    for (size_t s = 0; s < slots_.size(); ++s)
        if (!slots_[s].busy) free.push_back(int(s));
    if (free.size() < size_t(job.req.n - 1)) return;  // not enough slots now: one after another
    // Least recently used first: their live state is the least likely to be planned against.
    std::sort(free.begin(), free.end(), [&](int x, int y) { return slots_[size_t(x)].last_use < slots_[size_t(y)].last_use; });
    free.resize(size_t(job.req.n - 1));
    for (int s : free) {
        slots_[size_t(s)].busy = true;
        slots_[size_t(s)].journal.clear();
        slots_[size_t(s)].owner = job.owner;
        busy_slots_++;
    }
    a.batched = true;
    a.fork_slots = std::move(free);
}

void Scheduler::free_fork_slots(Active& a) {
    for (int s : a.fork_slots) {
        slots_[size_t(s)].busy = false;
        slots_[size_t(s)].last_use = ++use_clock_;
        busy_slots_--;
    }
    a.fork_slots.clear();
}

void Scheduler::fork_choices(Active& a) {
    a.forked = true;
    if (engine_.fork_live(a.slot, a.fork_slots) != FROST_OK) {
        // Nothing is lost: the other choices run one after another as without the fork.
        for (int s : a.fork_slots) slots_[size_t(s)].journal.clear();
        free_fork_slots(a);
        a.batched = false;
        return;
    }
    // Each child owns its slot from here; the ones not handed out yet stay in a.fork_slots.
    std::vector<int> slots;
    slots.swap(a.fork_slots);
    for (size_t i = 0; i < slots.size(); ++i) {
        auto c = std::make_unique<Active>();
        c->job = a.job;
        c->slot = slots[i];
        c->choice = int(i) + 1;
        c->batched = c->forked = true;
        c->pos = a.pos;
        c->usage = a.usage;
        slots_[size_t(c->slot)].journal = slots_[size_t(a.slot)].journal;
        slots_[size_t(c->slot)].last_use = ++use_clock_;
        if (!init_choice(*c)) {  // failed (and cancelled) the whole job; c released its slot
            a.fork_slots.assign(slots.begin() + long(i) + 1, slots.end());
            return;
        }
        forks_.push_back(std::move(c));
    }
}

bool Scheduler::prefill_and_snapshot(Active& a, size_t end, int32_t* next) {
    Job& job = *a.job;
    PhaseTimes& tm = times(a);
    auto plain_prefill = [&] {
        tm.prefill_calls++;
        PhaseTimer t(tm, Phase::Prefill);
        return engine_.prefill(a.slot, job.prompt.data() + a.pos, end - a.pos, next) == FROST_OK;
    };
    std::optional<PhaseTimer> store_timer(std::in_place, tm, Phase::Store);
    std::vector<int32_t> ids(job.prompt.begin(), job.prompt.begin() + long(end));
    const Digest d = token_digest(ids.data(), ids.size());
    bool held = !engine_.snapshot_possible(a.pos, end);
    for (const auto* c : store_->list(job.owner))
        if (c->digest == d && c->tokens == ids) {
            held = true;
            a.made_capsule = c->id;
        }
    if (held) {
        store_timer.reset();
        return plain_prefill();
    }
    PendingCapsule p;
    p.req.id = new_id("cap");
    p.req.owner = job.owner;
    p.req.bytes = engine_.capsule_bytes_at(end);
    p.req.tier = Tier::Device;
    p.req.pinned = job.req.pin_prefix;
    p.req.priority = job.capsule_priority;
    p.req.ttl_s = job.capsule_ttl_s;
    p.req.tokens = std::move(ids);
    p.req.session_id = job.req.session_id;
    p.req.request_id = job.id;
    Tier placed;
    std::vector<std::string> blocking;
    if (store_->admit(p.req, &placed, &blocking) != FROST_OK) {
        a.capsule_refusal = last_error();
        for (const auto& b : blocking) a.capsule_refusal += (b == blocking.front() ? " (blocking: " : ", ") + b;
        if (!blocking.empty()) a.capsule_refusal += ")";
        update_store_metrics();  // refused (logged with blocking ids); the request itself goes on
        store_timer.reset();
        return plain_prefill();
    }
    store_timer.reset();
    // A capsule placed on disk is frozen on the host first and then written as its durable
    // file pair (persist_to_disk), so it is acknowledged (materialized) only once it would
    // survive a crash.
    p.to_file = placed == Tier::Disk && persistence_on();
    frost_status st;
    {
        tm.prefill_calls++;
        PhaseTimer t(tm, Phase::Snapshot);
        st = engine_.prefill_snapshot(a.slot, job.prompt.data() + a.pos, end - a.pos,
                                      p.to_file ? Tier::Host : placed, next, &p.handle, &p.bytes);
    }
    if (st != FROST_OK || p.handle == 0) {
        PhaseTimer t(tm, Phase::Store);
        store_->abandon(p.req.id, st == FROST_OK ? "no capsule at this boundary" : "prefill failed");
        update_store_metrics();
        return st == FROST_OK;
    }
    // The state at the boundary is frozen; acknowledging it (durable files, materialized) is
    // bookkeeping that the first token need not wait for. A capsule-only request has no first
    // token and answers with the capsule, so it finishes here.
    a.pending_capsule = std::make_unique<PendingCapsule>(std::move(p));
    if (job.capsule_only) {
        PhaseTimer t(tm, Phase::Store);
        finalize_capsule(a);
    }
    return true;
}

void Scheduler::finalize_capsule(Active& a) {
    if (!a.pending_capsule) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<PendingCapsule> p = std::move(a.pending_capsule);
    std::string disk_error;
    if (p->to_file && !persist_new_capsule(p->req, &p->handle, &disk_error)) {
        store_->abandon(p->req.id, "disk write failed: " + disk_error);
        a.capsule_refusal = "disk write failed: " + disk_error;
    } else if (store_->materialize(p->req.id, p->handle, p->bytes) == FROST_OK) {
        a.made_capsule = p->req.id;
        if (p->to_file) store_->set_persisted(p->req.id, true);
        // Room for the next capsule of this size on the device tier is made now, off the
        // critical path, so the next admission need not demote (or write files) before its
        // first token. Best effort: a tier held by pins or restores just stays as it is.
        if (!a.job->capsule_only) store_->make_headroom(Tier::Device, p->bytes);
    } else {
        a.capsule_refusal = last_error();
        engine_.drop(p->handle);  // its record went away meanwhile: nothing may keep the bytes
        if (p->to_file) remove_persisted(cfg_.capsule_dir, p->req.id);
    }
    update_store_metrics();
    if (!a.job->capsule_only)
        a.job->times.deferred_store_ms += ms_between(t0, std::chrono::steady_clock::now());
}

bool Scheduler::persist_new_capsule(const CapsuleRequest& req, uint64_t* handle, std::string* why) {
    // The record as materialize() will make it (what the sidecar needs), before it exists.
    CapsuleRecord rec;
    rec.id = req.id;
    rec.owner = req.owner;
    rec.pinned = req.pinned;
    rec.priority = req.priority;
    rec.ttl_s = req.ttl_s;
    rec.expires_at = req.ttl_s > 0 ? 1 : 0;  // only "has a deadline" matters here
    rec.tokens = req.tokens;
    rec.digest = token_digest(req.tokens.data(), req.tokens.size());
    rec.session_id = req.session_id;
    rec.handle = *handle;
    const frost_status st = persist_to_disk(cfg_.capsule_dir, engine_, rec, req.ttl_s, wall_clock_s(), auth_.get());
    *handle = rec.handle;
    if (st == FROST_OK) return true;
    *why = last_error();
    engine_.drop(rec.handle);
    if (rec.persisted) remove_persisted(cfg_.capsule_dir, rec.id);
    return false;
}

bool Scheduler::prefill_step(Active& a) {
    Job& job = *a.job;
    Slot& slot = slots_[size_t(a.slot)];
    if (a.batched && !a.forked && a.pos + 1 == job.prompt.size()) fork_choices(a);
    if (job.cancelled) return true;  // a fork failed the job: the loop releases every member
    size_t end = std::min(job.prompt.size(), a.pos + cfg_.prefill_step);
    if (a.batched && !a.forked) end = std::min(end, job.prompt.size() - 1);  // the fork point
    // Seeded sampling must not depend on how the prompt was cut: the engine draws from its RNG
    // once per prefill chunk, so the number of draws before the first token would follow the
    // prefill steps, the snapshot point and the fork point (load). A sampled choice prefills its
    // last prompt token alone, right after its RNG restarts from seed + choice: its first token
    // is always draw 0 (issue 13 B6).
    const bool sampled = job.req.temperature > 0 && !job.capsule_only;
    if (sampled && a.pos + 1 < job.prompt.size()) end = std::min(end, job.prompt.size() - 1);
    if (sampled && a.pos + 1 == job.prompt.size() && engine_.set_sampling(a.slot, choice_sampling(a)) != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "sampling setup failed: " + last_error()), false);
        return false;
    }
    // A chat turn freezes its resent history, at the point the engine stores it (the alignment
    // grid below): no remainder to re-prefill on restore, and one engine call fewer per turn.
    // A capsule-only request freezes exactly its whole prompt (its remainder is stored).
    const size_t snap_at = job.capsule_only ? job.prompt.size() : engine_.snapshot_point(job.history_boundary);
    const bool snap = (cfg_.auto_capsules || job.capsule_only) && a.choice == 0 && snap_at > a.pos &&
                      (job.capsule_only || snap_at < job.prompt.size());
    if (snap) end = std::min(end, snap_at);
    int32_t next = -1;
    bool ok;
    if (snap && end == snap_at) {
        ok = prefill_and_snapshot(a, end, &next);
    } else {
        times(a).prefill_calls++;
        PhaseTimer t(times(a), Phase::Prefill);
        ok = engine_.prefill(a.slot, job.prompt.data() + a.pos, end - a.pos, &next) == FROST_OK;
    }
    if (!ok) {
        fail_job(a, make_error(500, "server_error", "engine_error", "prefill failed: " + last_error()), true);
        return false;
    }
    slot.journal.insert(slot.journal.end(), job.prompt.begin() + long(a.pos), job.prompt.begin() + long(end));
    a.pos = end;
    if (a.pos < job.prompt.size()) return true;
    if (job.capsule_only) return finish_capsule_only(a);
    return handle_token(a, next);
}

bool Scheduler::finish_capsule_only(Active& a) {
    if (a.made_capsule.empty()) {
        const std::string why = !a.capsule_refusal.empty() ? a.capsule_refusal
                                : engine_.capsules_supported()
                                    ? "the prefix is too short to freeze (below the engine's alignment unit)"
                                    : "capsules are not enabled on this server";
        fail_job(a, make_error(409, "invalid_request_error", "capsule_refused", "no capsule was made: " + why), false);
        return false;
    }
    StreamEvent fin;
    fin.kind = StreamEvent::Kind::Finish;
    fin.finish_reason = "capsule";
    a.usage.capsule_id = a.made_capsule;
    fin.usage = a.usage;
    Job& job = *a.job;
    if (const CapsuleRecord* r = store_->find(a.made_capsule, job.owner)) {
        // An existing capsule of exactly this prefix is returned as is: apply the request's policy.
        if (job.capsule_pin && r->pinned != *job.capsule_pin) store_->set_pinned(r->id, job.owner, *job.capsule_pin);
        if (r->priority != job.capsule_priority) store_->set_priority(r->id, job.owner, job.capsule_priority);
        if (job.capsule_ttl_s > 0) store_->set_ttl(r->id, job.owner, job.capsule_ttl_s);
        fin.capsule = capsule_json(*store_->find(a.made_capsule, job.owner));
        update_store_metrics();
    }
    uncount(*a.job);
    a.job->channel->push_final(std::move(fin));
    release(a);
    return false;
}

void Scheduler::emit(Active& a, const std::string& text) {
    if (text.empty()) return;
    if (!a.think) return emit_split(a, "", text);
    const SplitText s = a.think->feed(text);
    emit_split(a, s.reasoning, s.content);
}

void Scheduler::emit_split(Active& a, const std::string& reasoning, const std::string& content) {
    a.content_text += content;
    std::string out = content;
    if (a.marker && !content.empty()) out = a.marker->feed(content);
    if (out.empty() && reasoning.empty()) return;
    StreamEvent e;
    e.kind = StreamEvent::Kind::Delta;
    e.index = a.choice;
    e.text = std::move(out);
    e.reasoning = reasoning;
    a.job->channel->push_final(std::move(e));
}

PhaseTimes& Scheduler::times(Active& a) {
    // Only choice 0 up to its first token is the request's time to first token.
    return (a.choice == 0 && a.first_token) ? a.job->times : scratch_times_;
}

bool Scheduler::handle_token(Active& a, int32_t tok) {
    const bool first = a.first_token && a.choice == 0;
    if (first) {
        PhaseTimes& t = a.job->times;
        t.first_token = std::chrono::steady_clock::now();
        double engine_ms = ms_between(t.dequeued, t.first_token);
        for (Phase p : {Phase::Plan, Phase::Restore, Phase::Prefill, Phase::Snapshot, Phase::Store})
            engine_ms -= t.ms[size_t(p)];
        t.ms[size_t(Phase::EngineOther)] = std::max(0.0, engine_ms);
    }
    const bool going = handle_token_events(a, tok);
    // The first token's event is out (or the choice ended): now the deferred store work.
    if (a.pending_capsule) finalize_capsule(a);
    return going;
}

bool Scheduler::handle_token_events(Active& a, int32_t tok) {
    Job& job = *a.job;
    if (a.first_token) {
        a.first_token = false;
        if (metrics_ && a.choice == 0)
            metrics_->ttft.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - job.enqueued).count());
    }
    a.generated++;
    if (metrics_) metrics_->generated_tokens_total++;
    if (text_.is_end_token(tok)) return finish_choice(a, "stop");
    const std::string piece = a.detok->push(tok);
    emit(a, a.stop->feed(piece));
    if (a.stop->stopped()) return finish_choice(a, "stop");
    if (a.generated >= job.max_new) return finish_choice(a, "length");
    a.pending = tok;
    a.phase = Active::Phase::Decode;
    return true;
}

bool Scheduler::finish_choice(Active& a, const char* reason) {
    Job& job = *a.job;
    if (!a.stop->stopped()) {
        const std::string tail = a.detok->flush();
        emit(a, a.stop->feed(tail));
        if (!a.stop->stopped()) emit(a, a.stop->flush());
    }
    if (a.think) {
        const SplitText s = a.think->flush();
        emit_split(a, s.reasoning, s.content);
    }
    std::string finish = reason;
    if (a.tools_on) {
        ParsedOutput parsed = text_.parse_output(a.content_text, true);
        if (!parsed.tool_calls.empty()) {
            StreamEvent e;
            e.kind = StreamEvent::Kind::ToolCalls;
            e.index = a.choice;
            e.tool_calls = parsed.tool_calls;
            job.channel->push_final(std::move(e));
            finish = "tool_calls";
        } else if (a.marker && a.marker->stopped()) {
            // Markup began but did not parse as a call: send it as content rather than lose it.
            const size_t at = a.content_text.find(text_.tool_call_marker());
            if (at != std::string::npos) {
                StreamEvent e;
                e.kind = StreamEvent::Kind::Delta;
                e.index = a.choice;
                e.text = a.content_text.substr(at);
                job.channel->push_final(std::move(e));
            }
        } else if (a.marker) {
            emit(a, "");
            StreamEvent e;
            e.kind = StreamEvent::Kind::Delta;
            e.index = a.choice;
            e.text = a.marker->flush();
            if (!e.text.empty()) job.channel->push_final(std::move(e));
        }
    }
    StreamEvent fin;
    fin.kind = StreamEvent::Kind::Finish;
    fin.index = a.choice;
    fin.finish_reason = finish;
    a.usage.completion_tokens = size_t(a.generated);
    fin.usage = a.usage;
    if (a.choice == 0) {
        fin.usage.has_timings = true;
        fin.usage.timings = job.times;
    }
    // The per-key place is free before the client can see the end (it may send again at once).
    if (--job.choices_left <= 0) uncount(job);
    job.channel->push_final(std::move(fin));
    if (!a.batched && ++a.choice < job.req.n) {
        a.phase = Active::Phase::Start;
        return true;
    }
    release(a);
    return false;
}

void Scheduler::fail_job(Active& a, const ApiError& e, bool state_unknown) {
    if (metrics_) metrics_->errors_total++;
    StreamEvent ev;
    ev.kind = StreamEvent::Kind::Error;
    ev.error = e;
    uncount(*a.job);
    if (a.batched) a.job->cancelled = true;  // an error ends the whole request: its other forks stop too
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
    slots_[size_t(a.slot)].busy = false;
    slots_[size_t(a.slot)].last_use = ++use_clock_;
    a.slot = -1;
    busy_slots_--;
}

}  // namespace frost::serve
