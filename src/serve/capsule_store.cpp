// CapsuleStore implementation (see capsule_store.h for the rules).
#include "serve/capsule_store.h"

#include <algorithm>
#include <chrono>

#include "exec/error.h"
#include "serve/heap_refusal.h"

namespace frost::serve {

namespace {
// Wall-clock seconds for the capsule object (the store's own clock_ is injectable and relative).
int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

CapsuleStore::CapsuleStore(StoreBudgets budgets, StoreHooks hooks, ClaimLog* log, std::function<double()> clock)
    : budgets_(budgets), hooks_(std::move(hooks)), log_(log), clock_(std::move(clock)) {}

void CapsuleStore::log(const CapsuleRecord& r, const char* event, const std::string& request_id,
                       const std::string& reason, std::vector<std::string> blocking, bool retained) {
    if (!log_) return;
    // Events come in sequences that only make sense whole (restoration_failed then refused,
    // refused then evicted): a refusal of the heap between two of them would leave the claim in
    // a state the checker rejects, so each append waits out a short refusal (T33).
    retry_while_heap_refuses([&] {
        ClaimEvent e;
        e.time = clock_();
        e.claim_id = r.id;
        e.event = event;
        e.tier = r.tier;
        e.bytes = r.bytes;
        e.pinned = r.pinned;
        e.request_id = request_id;
        e.reason = reason;
        e.blocking = blocking;
        e.retained = retained;
        e.owner = r.owner;
        log_->append(std::move(e));
    });
}

bool CapsuleStore::make_room(Tier t, uint64_t bytes, const std::string& keep, std::vector<std::string>* blocking) {
    const int ti = int(t);
    const uint64_t budget = budgets_.bytes[ti];
    if (bytes > budget) return false;
    if (used_[ti] + bytes <= budget) return true;
    // Feasibility first, so a refusal moves nothing: only unpinned idle capsules can leave.
    uint64_t movable = 0;
    std::vector<std::string> stuck;
    for (const auto& [id, r] : recs_) {
        if (r.tier != t || !r.materialized || id == keep) continue;
        if (r.pinned || r.busy) stuck.push_back(id);
        else movable += r.bytes;
    }
    if (used_[ti] - movable + bytes > budget) {
        if (blocking) *blocking = stuck;
        return false;
    }
    while (used_[ti] + bytes > budget) {
        CapsuleRecord* victim = nullptr;
        for (auto& [id, r] : recs_) {
            if (r.tier != t || !r.materialized || r.pinned || r.busy || id == keep) continue;
            if (!victim || r.priority < victim->priority ||
                (r.priority == victim->priority && r.last_use < victim->last_use))
                victim = &r;
        }
        if (!victim) return false;
        demote_or_evict(*victim);
    }
    return true;
}

void CapsuleStore::demote_or_evict(CapsuleRecord& r) {
    const std::string id = r.id;
    // Nearest lower tier that has (or can make) room, falling through the others: a capsule
    // leaves the store only when no lower tier can take it (issue 13 B4: a host tier too small
    // for it must not send it away while the disk tier has room).
    for (int t = int(r.tier) + 1; t < kTierCount; ++t) {
        const Tier next = Tier(t);
        // The lower tier makes its own room (recursively demoting its own LRU victims).
        if (budgets_.bytes[t] > 0 && make_room(next, r.bytes, id, nullptr)) {
            log(r, claim_event::kDemoted);
            const Tier from = r.tier;
            if (hooks_.move && hooks_.move(r, next) == FROST_OK) {
                used_[int(from)] -= r.bytes;
                r.tier = next;
                used_[int(next)] += r.bytes;
                log(r, claim_event::kOffloaded);
                return;
            }
            drop(id, claim_event::kEvicted, "demotion failed: " + last_error());
            return;
        }
    }
    drop(id, claim_event::kEvicted, "capacity");
}

void CapsuleStore::drop(const std::string& id, const char* event, const std::string& reason) {
    auto it = recs_.find(id);
    if (it == recs_.end()) return;
    CapsuleRecord& r = it->second;
    log(r, event, "", reason);
    if (r.materialized) {
        if (hooks_.drop) hooks_.drop(r);
        used_[int(r.tier)] -= r.bytes;
    }
    recs_.erase(it);
}

frost_status CapsuleStore::admit(const CapsuleRequest& req, Tier* placed, std::vector<std::string>* blocking) {
    if (recs_.count(req.id)) return fail(FROST_ERR_INVALID_ARG, "capsule id %s already exists", req.id.c_str());
    CapsuleRecord r;
    r.id = req.id;
    r.owner = req.owner;
    r.bytes = req.bytes;
    r.tier = req.tier;
    r.pinned = req.pinned;
    r.priority = req.priority;
    r.ttl_s = req.ttl_s;
    r.tokens = req.tokens;
    r.digest = token_digest(r.tokens.data(), r.tokens.size());
    r.session_id = req.session_id;
    log(r, claim_event::kAccepted, req.request_id);

    std::vector<std::string> in_way;
    int t = int(req.tier);
    // A pin is a promise about its tier: it is placed there or refused. An unpinned capsule may
    // land lower.
    const int last = req.pinned ? t : kTierCount - 1;
    for (; t <= last; ++t) {
        if (budgets_.bytes[t] == 0) continue;
        std::vector<std::string> b;
        if (make_room(Tier(t), r.bytes, "", &b)) break;
        if (in_way.empty()) in_way = b;
    }
    if (t > last) {
        log(r, claim_event::kRefused, req.request_id, "insufficient capacity", in_way);
        if (blocking) *blocking = in_way;
        return fail(FROST_ERR_OUT_OF_MEMORY, "capsule %s (%llu bytes) does not fit", r.id.c_str(),
                    (unsigned long long)r.bytes);
    }
    r.tier = Tier(t);
    r.last_use = ++use_clock_;
    r.created_unix = r.last_used_unix = unix_seconds();
    // Room is reserved now so a concurrent admission cannot take it before materialize().
    used_[t] += r.bytes;
    r.materialized = false;
    *placed = r.tier;
    recs_.emplace(r.id, std::move(r));
    return FROST_OK;
}

frost_status CapsuleStore::materialize(const std::string& id, uint64_t handle, uint64_t actual_bytes) {
    auto it = recs_.find(id);
    if (it == recs_.end() || it->second.materialized)
        return fail(FROST_ERR_NOT_FOUND, "no pending capsule %s", id.c_str());
    CapsuleRecord& r = it->second;
    used_[int(r.tier)] = used_[int(r.tier)] - r.bytes + actual_bytes;
    r.bytes = actual_bytes;
    r.handle = handle;
    r.materialized = true;
    if (r.ttl_s > 0) r.expires_at = clock_() + r.ttl_s;
    log(r, claim_event::kMaterialized);
    return FROST_OK;
}

void CapsuleStore::abandon(const std::string& id, const std::string& reason) {
    auto it = recs_.find(id);
    if (it == recs_.end() || it->second.materialized) return;
    used_[int(it->second.tier)] -= it->second.bytes;
    log(it->second, claim_event::kRefused, "", reason);
    recs_.erase(it);
}

frost_status CapsuleStore::begin_restore(const std::string& id, const std::string& owner,
                                         const std::string& request_id, CapsuleRecord* out) {
    auto it = recs_.find(id);
    if (it == recs_.end() || it->second.owner != owner || !it->second.materialized)
        return fail(FROST_ERR_NOT_FOUND, "no capsule %s", id.c_str());
    CapsuleRecord& r = it->second;
    // The copy first: it allocates (the tokens), and a refusal there (T33) must leave nothing
    // begun: no restore_required without its outcome, no capsule held busy.
    *out = r;
    log(r, claim_event::kRestoreRequired, request_id);
    r.busy++;
    r.last_use = ++use_clock_;
    r.last_used_unix = unix_seconds();
    if (r.tier != Tier::Device && budgets_.bytes[int(Tier::Device)] > 0 &&
        make_room(Tier::Device, r.bytes, r.id, nullptr)) {
        const Tier from = r.tier;
        const frost_status moved = hooks_.move ? hooks_.move(r, Tier::Device) : FROST_ERR_UNSUPPORTED;
        if (moved != FROST_OK) {
            const std::string why = "promotion failed: " + last_error();
            r.busy--;
            fail_restore(id, moved, request_id, why);
            return fail(moved == FROST_ERR_OUT_OF_MEMORY ? moved : FROST_ERR_IO, "capsule %s: %s", id.c_str(),
                        why.c_str());
        }
        used_[int(from)] -= r.bytes;
        r.tier = Tier::Device;
        used_[int(Tier::Device)] += r.bytes;
    }
    out->tier = r.tier;
    out->handle = r.handle;
    out->busy = r.busy;
    out->last_use = r.last_use;
    out->last_used_unix = r.last_used_unix;
    out->persisted = r.persisted;
    return FROST_OK;
}

void CapsuleStore::end_restore(const std::string& id, frost_status st, const std::string& request_id,
                               const std::string& why) {
    auto it = recs_.find(id);
    if (it == recs_.end()) return;
    CapsuleRecord& r = it->second;
    if (r.busy > 0) r.busy--;
    if (st == FROST_OK) {
        log(r, claim_event::kRestored, request_id);
        return;
    }
    fail_restore(id, st, request_id, why);
}

void CapsuleStore::fail_restore(const std::string& id, frost_status st, const std::string& request_id,
                                const std::string& why) {
    CapsuleRecord& r = recs_.at(id);
    // Memory refused while copying out of the capsule: the request fails closed as any failed
    // restore does, but nothing is wrong with the capsule, which stays (a pinned one above all).
    const bool keep = st == FROST_ERR_OUT_OF_MEMORY;
    log(r, claim_event::kRestorationFailed, request_id, why, {}, keep);
    log(r, claim_event::kRefused, request_id, why, {r.id}, keep);
    if (!keep) drop(id, claim_event::kEvicted, "restoration failed");
}

frost_status CapsuleStore::set_policy(const std::string& id, const std::string& owner, const PolicyChange& change) {
    auto it = recs_.find(id);
    if (it == recs_.end() || it->second.owner != owner) return fail(FROST_ERR_NOT_FOUND, "no capsule %s", id.c_str());
    CapsuleRecord& r = it->second;
    bool changed = false;
    if (change.pinned && r.pinned != *change.pinned) {
        r.pinned = *change.pinned;
        log(r, r.pinned ? claim_event::kPinned : claim_event::kUnpinned);
        changed = true;
    }
    if (change.priority && r.priority != *change.priority) {
        r.priority = *change.priority;
        changed = true;
    }
    if (change.ttl_s) {
        r.ttl_s = *change.ttl_s;
        r.expires_at = r.ttl_s > 0 ? clock_() + r.ttl_s : 0;
        changed = true;
    }
    // Once for the whole change: persistence writes one sidecar, so a crash keeps all or none of it.
    if (changed) notify_changed(r);
    return FROST_OK;
}

frost_status CapsuleStore::set_pinned(const std::string& id, const std::string& owner, bool pinned) {
    PolicyChange c;
    c.pinned = pinned;
    return set_policy(id, owner, c);
}

frost_status CapsuleStore::set_priority(const std::string& id, const std::string& owner, int priority) {
    PolicyChange c;
    c.priority = priority;
    return set_policy(id, owner, c);
}

frost_status CapsuleStore::set_ttl(const std::string& id, const std::string& owner, double ttl_s) {
    PolicyChange c;
    c.ttl_s = ttl_s;
    return set_policy(id, owner, c);
}

frost_status CapsuleStore::remove(const std::string& id, const std::string& owner) {
    auto it = recs_.find(id);
    if (it == recs_.end() || it->second.owner != owner) return fail(FROST_ERR_NOT_FOUND, "no capsule %s", id.c_str());
    if (it->second.busy) return fail(FROST_ERR_STATE, "capsule %s is being restored", id.c_str());
    drop(id, claim_event::kEvicted, "deleted");
    return FROST_OK;
}

size_t CapsuleStore::expire() {
    const double now = clock_();
    std::vector<std::string> due;
    for (const auto& [id, r] : recs_)
        if (r.materialized && r.expires_at > 0 && now >= r.expires_at && !r.busy) due.push_back(id);
    for (const auto& id : due) drop(id, claim_event::kExpired, "ttl");
    return due.size();
}

const CapsuleRecord* CapsuleStore::find(const std::string& id, const std::string& owner) const {
    auto it = recs_.find(id);
    if (it == recs_.end() || it->second.owner != owner) return nullptr;
    return &it->second;
}

std::vector<const CapsuleRecord*> CapsuleStore::list(const std::string& owner) const {
    std::vector<const CapsuleRecord*> out;
    for (const auto& [id, r] : recs_)
        if (r.owner == owner && r.materialized) out.push_back(&r);
    return out;
}

std::vector<const CapsuleRecord*> CapsuleStore::all() const {
    std::vector<const CapsuleRecord*> out;
    for (const auto& [id, r] : recs_)
        if (r.materialized) out.push_back(&r);
    return out;
}

double CapsuleStore::ttl_left(const CapsuleRecord& r) const {
    if (r.expires_at <= 0) return 0;
    return std::max(r.expires_at - clock_(), 0.0);
}

frost_status CapsuleStore::adopt(CapsuleRecord rec, double ttl_left_s) {
    if (recs_.count(rec.id)) return fail(FROST_ERR_STATE, "adopt: capsule %s is already indexed", rec.id.c_str());
    if (!make_room(rec.tier, rec.bytes, rec.id, nullptr))
        return fail(FROST_ERR_OUT_OF_MEMORY, "adopt: no room for capsule %s (%llu bytes) on the %s tier",
                    rec.id.c_str(), (unsigned long long)rec.bytes, tier_name(rec.tier));
    rec.materialized = true;
    rec.busy = 0;
    rec.last_use = ++use_clock_;
    if (rec.created_unix == 0) rec.created_unix = unix_seconds();
    if (rec.last_used_unix == 0) rec.last_used_unix = rec.created_unix;
    rec.digest = token_digest(rec.tokens.data(), rec.tokens.size());
    rec.expires_at = (rec.ttl_s > 0 && ttl_left_s > 0) ? clock_() + ttl_left_s : 0;
    used_[int(rec.tier)] += rec.bytes;
    const std::string id = rec.id;
    recs_.emplace(id, std::move(rec));
    return FROST_OK;
}

void CapsuleStore::notify_changed(const CapsuleRecord& r) {
    if (r.materialized && hooks_.changed) hooks_.changed(r);
}

void CapsuleStore::set_persisted(const std::string& id, bool persisted) {
    auto it = recs_.find(id);
    if (it != recs_.end()) it->second.persisted = persisted;
}

nlohmann::json capsule_json(const CapsuleRecord& r, double ttl_left_s) {
    return nlohmann::json{{"id", r.id},
                {"object", "capsule"},
                {"tokens", r.tokens.size()},
                {"bytes", r.bytes},
                {"tier", tier_name(r.tier)},
                {"pinned", r.pinned},
                {"priority", r.priority},
                {"ttl_s", r.ttl_s},
                {"ttl_remaining_s", r.ttl_s > 0 ? nlohmann::json(ttl_left_s) : nlohmann::json(nullptr)},
                {"created", r.created_unix},
                {"last_used_at", r.last_used_unix},
                {"session_id", r.session_id},
                {"digest", digest_hex(r.digest)}};
}

}  // namespace frost::serve
