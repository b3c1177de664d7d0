// The capsule store POLICY: which capsule lives on which tier, under per-tier byte budgets. It is
// pure bookkeeping over CapsuleRecords; every actual byte move goes through StoreHooks, so the
// policy is unit-tested without an engine and driven by the engine thread in the server.
// Rules (shared/design/capsules.md, "The store and claims"):
//   - pinned capsules are never evicted nor demoted while pinned; a new pin that cannot fit is
//     refused naming the pinned claims in the way (blocking_claim_ids), never satisfied by
//     evicting a pinned one;
//   - unpinned capsules are demoted device -> host -> disk -> gone, lowest priority first, then
//     least recently used; `demoted` is logged before the bytes leave, `offloaded` after they land;
//   - TTL: `expired` at the deadline (expire() is called by the owner's loop);
//   - restore: `restore_required` -> (promotion when room allows) -> `restored`; a failed move or
//     engine restore logs `restoration_failed` then `refused` naming the claim (fail closed) and
//     drops the capsule: it is never silently recomputed and counted as a hit. When the failure
//     was memory refused (FROST_ERR_OUT_OF_MEMORY: the heap or a tier's allocator, T33), the
//     capsule's bytes are intact: both events carry `retained` and the capsule stays.
// Not thread-safe: one thread (the engine thread) owns the store.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "serve/claim_log.h"
#include "serve/sha256.h"

namespace frost::serve {

struct StoreBudgets {
    uint64_t bytes[kTierCount] = {0, 0, 0};  // per tier; 0 disables the tier
};

struct CapsuleRecord {
    std::string id;
    std::string owner;         // API-key scope; lookups with another owner see nothing
    uint64_t bytes = 0;
    Tier tier = Tier::Device;
    bool pinned = false;
    int priority = 0;          // higher survives longer under pressure
    double ttl_s = 0;          // 0 = no TTL
    double expires_at = 0;     // store clock; 0 = never
    uint64_t last_use = 0;     // logical clock, bumped on create/restore
    int64_t created_unix = 0;    // wall clock (s) of its creation (re-index: the adoption)
    int64_t last_used_unix = 0;  // wall clock (s) of its creation or last restore
    std::vector<int32_t> tokens;  // boundary token ids [0, P)
    Digest digest{};           // token_digest(tokens)
    uint64_t handle = 0;       // the engine's capsule handle
    std::string session_id;    // the session it was taken from, may be empty
    bool materialized = false;
    int busy = 0;              // restores in flight: never moved or dropped meanwhile
    bool persisted = false;    // its <capsule-dir> file pair exists (adopted at start or flushed)
};

struct StoreHooks {
    // Moves a materialized capsule's bytes to `to` (demotion or promotion). Non-OK: nothing moved.
    std::function<frost_status(CapsuleRecord& rec, Tier to)> move;
    // Releases the capsule's bytes (eviction, expiry, deletion, failed restore).
    std::function<void(CapsuleRecord& rec)> drop;
    // A materialized capsule's policy (pin, priority, TTL) changed: persistence rewrites its
    // sidecar. May be empty.
    std::function<void(const CapsuleRecord& rec)> changed;
};

struct CapsuleRequest {
    std::string id;
    std::string owner;
    uint64_t bytes = 0;
    Tier tier = Tier::Device;  // preferred tier
    bool pinned = false;
    int priority = 0;
    double ttl_s = 0;
    std::vector<int32_t> tokens;
    std::string session_id;
    std::string request_id;
};

class CapsuleStore {
public:
    CapsuleStore(StoreBudgets budgets, StoreHooks hooks, ClaimLog* log, std::function<double()> clock);

    // Logs `accepted`, then makes room. OK: *placed is the tier the caller must snapshot to (the
    // preferred one, or lower for an unpinned capsule that does not fit); the record is pending
    // until materialize()/abandon(). FROST_ERR_OUT_OF_MEMORY: logged `refused`, *blocking names
    // the pinned (or busy) claims in the way.
    frost_status admit(const CapsuleRequest& req, Tier* placed, std::vector<std::string>* blocking);
    // The bytes exist now (engine snapshot done): logs `materialized`.
    frost_status materialize(const std::string& id, uint64_t handle, uint64_t actual_bytes);
    // The snapshot failed: logs `refused` with the reason and forgets the record.
    void abandon(const std::string& id, const std::string& reason);

    // Restore protocol. begin: `restore_required`, promotion if possible; marks busy.
    // NOT_FOUND if the id is not the owner's; the move's status on a failed promotion (already
    // logged as restoration_failed + refused; the capsule dropped unless it was out of memory).
    frost_status begin_restore(const std::string& id, const std::string& owner, const std::string& request_id,
                               CapsuleRecord* out);
    // end: FROST_OK -> `restored`; else `restoration_failed`, `refused`, and the capsule dropped,
    // or kept (both events `retained`) when st is FROST_ERR_OUT_OF_MEMORY.
    void end_restore(const std::string& id, frost_status st, const std::string& request_id, const std::string& why);

    // Pin/unpin (pinning keeps the current tier), priority, TTL (0: none; restarts the deadline).
    // NOT_FOUND for another owner's id. set_policy applies several at once and notifies once,
    // so the sidecar is rewritten once and a crash keeps the whole change or none of it.
    struct PolicyChange {
        std::optional<bool> pinned;
        std::optional<int> priority;
        std::optional<double> ttl_s;
    };
    frost_status set_policy(const std::string& id, const std::string& owner, const PolicyChange& change);
    frost_status set_pinned(const std::string& id, const std::string& owner, bool pinned);
    frost_status set_priority(const std::string& id, const std::string& owner, int priority);
    frost_status set_ttl(const std::string& id, const std::string& owner, double ttl_s);
    // Deletion: FROST_ERR_STATE while a restore is in flight.
    frost_status remove(const std::string& id, const std::string& owner);
    // Expires every capsule past its deadline; returns how many.
    size_t expire();
    // Indexes a capsule whose bytes already exist (re-indexed from disk at start): no claim
    // event, since the claim is still live in the previous run's log. rec.tokens, tier, bytes,
    // handle and owner must be set; ttl_left_s > 0 sets the deadline that far from now.
    // FROST_ERR_STATE for a known id, FROST_ERR_OUT_OF_MEMORY when the tier has no room.
    frost_status adopt(CapsuleRecord rec, double ttl_left_s);
    // Demotes/evicts unpinned idle capsules until `bytes` more fit on tier t (the owner calls it
    // off the critical path, so a later admit() finds room without moving anything). False when
    // the tier is disabled, smaller than `bytes`, or held by pins and restores (nothing moved).
    bool make_headroom(Tier t, uint64_t bytes) { return budgets_.bytes[int(t)] > 0 && make_room(t, bytes, "", nullptr); }
    // Marks a capsule's file pair as written (persistence), so dropping it removes the pair.
    void set_persisted(const std::string& id, bool persisted);

    const CapsuleRecord* find(const std::string& id, const std::string& owner) const;
    std::vector<const CapsuleRecord*> list(const std::string& owner) const;
    std::vector<const CapsuleRecord*> all() const;  // every owner: persistence only
    // Seconds until the capsule's TTL deadline (0 when it has none).
    double ttl_left(const CapsuleRecord& r) const;
    uint64_t used(Tier t) const { return used_[int(t)]; }
    uint64_t budget(Tier t) const { return budgets_.bytes[int(t)]; }
    size_t size() const { return recs_.size(); }

private:
    void log(const CapsuleRecord& r, const char* event, const std::string& request_id = "",
             const std::string& reason = "", std::vector<std::string> blocking = {}, bool retained = false);
    // A restore of r that failed with st: restoration_failed + refused, then the drop or, for
    // FROST_ERR_OUT_OF_MEMORY, the capsule kept (r.busy already released by the caller).
    void fail_restore(const std::string& id, frost_status st, const std::string& request_id, const std::string& why);
    // Frees room for `bytes` on tier t by demoting/evicting unpinned idle capsules (never
    // `keep`). False (nothing moved) with *blocking filled when it cannot.
    bool make_room(Tier t, uint64_t bytes, const std::string& keep, std::vector<std::string>* blocking);
    void demote_or_evict(CapsuleRecord& r);
    void drop(const std::string& id, const char* event, const std::string& reason);
    void notify_changed(const CapsuleRecord& r);

    StoreBudgets budgets_;
    StoreHooks hooks_;
    ClaimLog* log_;
    std::function<double()> clock_;
    std::map<std::string, CapsuleRecord> recs_;
    uint64_t used_[kTierCount] = {0, 0, 0};
    uint64_t use_clock_ = 0;
};

// The JSON object that describes a capsule in the capsule endpoints.
// The capsule object of the API: `ttl_left_s` (CapsuleStore::ttl_left) is reported as
// ttl_remaining_s (null without a TTL), with created / last_used_at in Unix seconds.
nlohmann::json capsule_json(const CapsuleRecord& r, double ttl_left_s);

}  // namespace frost::serve
