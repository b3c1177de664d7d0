// The capsule lifecycle on the engine thread: freezing a prefix during prefill (admission to the
// store), acknowledging it (durable files for the disk tier, materialized) and answering a
// capsule-only request (POST /v1/capsules).
#include "serve/scheduler.h"

#include <optional>

#include "exec/error.h"
#include "serve/heap_refusal.h"
#include "serve/ids.h"
#include "serve/scheduler_state.h"

namespace frost::serve {

frost_status Scheduler::prefill_and_snapshot(Active& a, size_t end, int32_t* next) {
    Job& job = *a.job;
    PhaseTimes& tm = times(a);
    auto plain_prefill = [&] {
        tm.prefill_calls++;
        PhaseTimer t(tm, Phase::Prefill);
        return engine_.prefill(a.slot, job.prompt.data() + a.pos, end - a.pos, next);
    };
    PendingCapsule p;
    Tier placed = Tier::Device;
    bool admitted = false;
    {
        // The store's part: is this prefix held already, else admission (which may demote).
        PhaseTimer store_timer(tm, Phase::Store);
        std::vector<int32_t> ids(job.prompt.begin(), job.prompt.begin() + long(end));
        const Digest d = token_digest(ids.data(), ids.size());
        bool held = !engine_.snapshot_possible(a.pos, end);
        for (const auto* c : store_->list(job.owner))
            if (c->digest == d && c->tokens == ids) {
                held = true;
                a.made_capsule = c->id;
            }
        if (!held) {
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
            std::vector<std::string> blocking;
            admitted = store_->admit(p.req, &placed, &blocking) == FROST_OK;
            if (!admitted) {
                a.capsule_refusal = last_error();
                for (const auto& b : blocking)
                    a.capsule_refusal += (b == blocking.front() ? " (blocking: " : ", ") + b;
                if (!blocking.empty()) a.capsule_refusal += ")";
                update_store_metrics();  // refused (logged with blocking ids); the request itself goes on
            }
        }
    }
    if (!admitted) return plain_prefill();  // held already, or refused
    // Admitted: the pending record holds its bytes on the tier until materialize() or abandon().
    // An exception before the capsule is handed to the Active (the heap refusing, T33) must
    // abandon it, or those bytes would stay counted (and the engine's capsule kept) forever.
    std::unique_ptr<PendingCapsule> handed;
    try {
        // A capsule placed on disk is frozen on the host first and then written as its durable
        // file pair (persist_to_disk), so it is acknowledged (materialized) only once it would
        // survive a crash.
        p.to_file = placed == Tier::Disk && persistence_on();
        frost_status st;
        std::string refusal;
        {
            tm.prefill_calls++;
            PhaseTimer t(tm, Phase::Snapshot);
            st = engine_.prefill_snapshot(a.slot, job.prompt.data() + a.pos, end - a.pos,
                                          p.to_file ? Tier::Host : placed, next, &p.handle, &p.bytes, &refusal);
        }
        if (st != FROST_OK || p.handle == 0) {
            PhaseTimer t(tm, Phase::Store);
            if (st == FROST_OK && !refusal.empty()) {
                // The memory of its tier could not hold it (design T32): the request goes on, and a
                // capsule-only request answers 507 (insufficient storage), as for a failed disk write.
                a.capsule_refusal = "no room to freeze it: " + refusal;
                a.capsule_storage_failed = true;
            }
            store_->abandon(p.req.id, st != FROST_OK        ? "prefill failed"
                                      : !refusal.empty() ? a.capsule_refusal
                                                         : "no capsule at this boundary");
            update_store_metrics();
            return st;
        }
        // The state at the boundary is frozen; acknowledging it (durable files, materialized) is
        // bookkeeping that the first token need not wait for. A capsule-only request has no first
        // token and answers with the capsule, so it finishes here.
        handed = std::make_unique<PendingCapsule>(std::move(p));
    } catch (...) {
        if (p.handle != 0) engine_.drop(p.handle);
        retry_while_heap_refuses([&] { store_->abandon(p.req.id, "out of host memory"); });
        update_store_metrics();
        throw;
    }
    a.pending_capsule = std::move(handed);
    if (job.capsule_only) {
        PhaseTimer t(tm, Phase::Store);
        finalize_capsule(a);
    }
    return FROST_OK;
}

void Scheduler::finalize_capsule(Active& a) {
    if (!a.pending_capsule) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<PendingCapsule> p = std::move(a.pending_capsule);
    bool materialized = false;
    try {
        finalize_pending(a, *p, &materialized);
    } catch (...) {
        // Not acknowledged when the heap refused (T33): nothing of it may stay, neither the
        // engine's capsule, its files nor the bytes its pending record holds on the tier.
        if (!materialized)
            retry_while_heap_refuses([&] {
                engine_.drop(p->handle);
                if (p->to_file) remove_persisted(cfg_.capsule_dir, p->req.id);
                store_->abandon(p->req.id, "out of host memory");
            });
        update_store_metrics();
        throw;
    }
    update_store_metrics();
    if (!a.job->capsule_only)
        a.job->times.deferred_store_ms += ms_between(t0, std::chrono::steady_clock::now());
}

void Scheduler::finalize_pending(Active& a, PendingCapsule& pc, bool* materialized) {
    PendingCapsule* p = &pc;
    std::string disk_error;
    if (p->to_file && !persist_new_capsule(p->req, &p->handle, &disk_error)) {
        store_->abandon(p->req.id, "disk write failed: " + disk_error);
        a.capsule_refusal = "disk write failed: " + disk_error;
        a.capsule_storage_failed = true;
    } else if (store_->materialize(p->req.id, p->handle, p->bytes) == FROST_OK) {
        *materialized = true;
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

bool Scheduler::finish_capsule_only(Active& a) {
    if (a.made_capsule.empty()) {
        const std::string why = !a.capsule_refusal.empty() ? a.capsule_refusal
                                : engine_.capsules_supported()
                                    ? "the prefix is too short to freeze (below the engine's alignment unit)"
                                    : "capsules are not enabled on this server";
        // A disk tier that could not write the capsule's files (I/O error, full disk) is the
        // server's storage failing: 507, as WebDAV's "insufficient storage", so a client retries
        // later or elsewhere instead of treating its request as wrong. What was stored before
        // is untouched and no half-written pair is left (persist_new_capsule removes it).
        if (a.capsule_storage_failed)
            fail_job(a, make_error(507, "server_error", "capsule_storage_failed", "no capsule was made: " + why), false);
        else
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
        CapsuleStore::PolicyChange change;
        change.pinned = job.capsule_pin;
        change.priority = job.capsule_priority;
        if (job.capsule_ttl_s > 0) change.ttl_s = job.capsule_ttl_s;
        (void)store_->set_policy(r->id, job.owner, change);  // found just above: cannot fail
        const CapsuleRecord* made = store_->find(a.made_capsule, job.owner);
        fin.capsule = capsule_json(*made, store_->ttl_left(*made));
        update_store_metrics();
    }
    uncount(*a.job);
    a.job->channel->push_final(std::move(fin));
    release(a);
    return false;
}

}  // namespace frost::serve
