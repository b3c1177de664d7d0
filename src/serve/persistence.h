// Persistence of the capsule store across a restart (issue 7, reliability T16/T18/T21/T22).
// A capsule that lands on the disk tier is written at once (persist_to_disk); on a
// graceful stop every other capsule is written to <capsule-dir>/<id>.frostcap (the engine's
// self-validating capsule file) beside a small sidecar <id>.json with what the file does not
// hold: owner scope, pin, priority, TTL deadline, session. On start the directory is re-indexed:
// temp files are removed, every pair is validated against the running deployment (the engine's
// import checks lengths, offsets, checksums and the fingerprint) and adopted on the disk tier;
// anything that fails is moved to <capsule-dir>/quarantine/ with the reason, never served.
// Runs on the engine thread (or before it starts / after it stopped): the store is not shared.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
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

// Authenticates sidecars so the capsule dir cannot be used to hand one key's capsule to another:
// each sidecar carries "mac" = HMAC-SHA256(secret, its other fields + the owner's API key), the
// secret being 32 random bytes kept in <capsule-dir>/.sidecar-secret (0600, made at first
// start). A re-index refuses (quarantines) a sidecar without a valid mac, one naming an owner
// scope that no configured key has, and one whose key changed (keys reordered or replaced).
struct SidecarAuth {
    std::string secret;                              // raw bytes
    std::map<std::string, std::string> owner_keys;   // owner scope ("key0", "local") -> API key
};
constexpr const char* kSidecarSecretFile = ".sidecar-secret";
// Reads the dir's secret, creating it when absent. FROST_ERR_IO when it cannot.
frost_status load_sidecar_auth(const std::string& dir, std::map<std::string, std::string> owner_keys,
                               SidecarAuth* out);

// auth: adds the mac (persist / write) or requires it (from_json); null: unauthenticated (tests
// of the format only; the server always passes its auth).
std::string sidecar_to_json(const SidecarMeta& m, const SidecarAuth* auth = nullptr);
// FROST_ERR_CORRUPT naming the field on any problem (bad JSON, wrong format, invalid id, and
// with auth: no or a wrong mac, an owner no configured key has).
frost_status sidecar_from_json(const std::string& text, SidecarMeta* out, const SidecarAuth* auth = nullptr);

struct ReindexReport {
    size_t adopted = 0;
    size_t temp_removed = 0;
    size_t quarantined = 0;
    size_t expired = 0;
    size_t lost = 0;  // claims the previous run left live that did not come back (ended in the log)
    size_t removed = 0;  // capsules whose claim the log had ended: a removal the crash interrupted
    std::vector<std::string> notes;  // one line per removed / quarantined / expired file, with why
    // (owner scope, session id) of every adopted capsule recorded with a session: the server
    // re-creates those sessions, so a session lives as long as its capsules do.
    std::vector<std::pair<std::string, std::string>> sessions;
};

// Re-indexes `dir` into `store` (disk tier). Claims that were live in the previous run's log
// (ClaimLog::previously_live) and cannot come back are logged `evicted` (quarantined) or `expired`;
// the previous run's other live claims that are not in the dir (a crash lost the memory tiers)
// are ended too (refused / evicted, by their last state), so the log stays one valid history.
// After a crash or power cut the files are the truth: a capsule whose claim the log had ended is
// removed (the removal was in flight), and an adopted capsule's claim is brought to live on disk
// (its materialized / offloaded / restored event, a policy change the sidecar has, or, for a
// claim the log lost, accepted + materialized).
ReindexReport reindex_capsule_dir(const std::string& dir, EngineIface& engine, CapsuleStore& store, ClaimLog* log,
                                  double now_unix, const SidecarAuth* auth = nullptr);

struct FlushReport {
    size_t written = 0;
    size_t failed = 0;
    std::vector<std::string> notes;
};

// Writes every materialized capsule of the store (all owners) and its sidecar into `dir`.
// A capsule whose file is already there (adopted at start) only gets a fresh sidecar.
FlushReport flush_capsule_dir(const std::string& dir, EngineIface& engine, CapsuleStore& store, double now_unix,
                              const SidecarAuth* auth = nullptr);

// Removes a capsule's persisted pair (the store dropped it: deletion, eviction, expiry) and
// fsyncs the directory, so an acknowledged removal survives a power cut.
void remove_persisted(const std::string& dir, const std::string& id);

// Crash durability (T18/T22): the moment a capsule lands on the disk tier (demotion or a direct
// create there) its bytes become <dir>/<id>.frostcap through engine.move_to_file() and its
// sidecar is written right after, both with temp + fsync + rename + directory fsync, so an
// acknowledged disk-tier capsule survives SIGKILL and is re-indexed by the next start.
// rec.handle may change; rec.persisted is set once the capsule file exists (so a later drop
// removes the pair even if the sidecar write failed). ttl_left_s: seconds to the TTL deadline.
frost_status persist_to_disk(const std::string& dir, EngineIface& engine, CapsuleRecord& rec, double ttl_left_s,
                             double now_unix, const SidecarAuth* auth = nullptr);
// (Re)writes the sidecar of a persisted capsule (its pin, priority or TTL changed).
frost_status write_sidecar(const std::string& dir, const CapsuleRecord& rec, double ttl_left_s, double now_unix,
                           const SidecarAuth* auth = nullptr);

double wall_clock_s();

// Temp files of interrupted writes in `dir` now. Counted before the engine's capsule manager
// starts (it sweeps them too), so the start banner reports every one removed.
size_t count_temp_files(const std::string& dir);

}  // namespace frost::serve
