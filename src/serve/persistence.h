// Persistence of the capsule store across a restart (issue 7, reliability T16/T21/T22). On a
// graceful stop every capsule is written to <capsule-dir>/<id>.frostcap (the engine's
// self-validating capsule file) beside a small sidecar <id>.json with what the file does not
// hold: owner scope, pin, priority, TTL deadline, session. On start the directory is re-indexed:
// temp files are removed, every pair is validated against the running deployment (the engine's
// import checks lengths, offsets, checksums and the fingerprint) and adopted on the disk tier;
// anything that fails is moved to <capsule-dir>/quarantine/ with the reason, never served.
// Runs on the engine thread (or before it starts / after it stopped): the store is not shared.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "serve/capsule_store.h"
#include "serve/claim_log.h"
#include "serve/engine_iface.h"

namespace frost::serve {

constexpr const char* kCapsuleFileExt = ".frostcap";
constexpr const char* kSidecarExt = ".json";
constexpr const char* kQuarantineDir = "quarantine";
constexpr const char* kSidecarFormat = "frost-serve-capsule-v1";

// What the sidecar holds. expires_unix: wall-clock deadline (seconds), 0 = no TTL; the store's
// own clock restarts with the process, so deadlines travel as wall-clock time.
struct SidecarMeta {
    std::string id;
    std::string owner;
    bool pinned = false;
    int priority = 0;
    double ttl_s = 0;
    double expires_unix = 0;
    std::string session_id;
    std::string token_digest;  // digest_hex(token_digest(tokens)): cross-checks the capsule file
};

std::string sidecar_to_json(const SidecarMeta& m);
// FROST_ERR_CORRUPT naming the field on any problem (bad JSON, wrong format, invalid id).
frost_status sidecar_from_json(const std::string& text, SidecarMeta* out);

struct ReindexReport {
    size_t adopted = 0;
    size_t temp_removed = 0;
    size_t quarantined = 0;
    size_t expired = 0;
    std::vector<std::string> notes;  // one line per removed / quarantined / expired file, with why
};

// Re-indexes `dir` into `store` (disk tier). Claims that were live in the previous run's log
// (ClaimLog::previously_live) and cannot come back are logged `evicted` (quarantined) or `expired`.
ReindexReport reindex_capsule_dir(const std::string& dir, EngineIface& engine, CapsuleStore& store, ClaimLog* log,
                                  double now_unix);

struct FlushReport {
    size_t written = 0;
    size_t failed = 0;
    std::vector<std::string> notes;
};

// Writes every materialized capsule of the store (all owners) and its sidecar into `dir`.
// A capsule whose file is already there (adopted at start) only gets a fresh sidecar.
FlushReport flush_capsule_dir(const std::string& dir, EngineIface& engine, CapsuleStore& store, double now_unix);

// Removes a capsule's persisted pair (the store dropped it: deletion, eviction, expiry).
void remove_persisted(const std::string& dir, const std::string& id);

double wall_clock_s();

}  // namespace frost::serve
