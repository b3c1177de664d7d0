// The claim lifecycle log: every capsule is a claim whose events are appended in order, each with
// a process-wide monotonic sequence number, to memory (bounded, for the API) and optionally to a
// JSONL file that scripts/claimlog_check.py replays to verify the ordering rules of
// shared/design/capsules.md ("The store and claims").
#pragma once
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/capsule.h"

namespace frost::serve {

// The one tier enum: serve's store, claim log and API speak the model layer's capsule tiers.
using Tier = model::CapsuleTier;
constexpr int kTierCount = 3;
inline const char* tier_name(Tier t) { return model::capsule_tier_name(t); }
inline bool parse_tier(const std::string& s, Tier* out) { return model::parse_capsule_tier(s, out); }

// Event names, exactly as written to the log.
namespace claim_event {
inline constexpr const char* kAccepted = "accepted";
inline constexpr const char* kMaterialized = "materialized";
inline constexpr const char* kDemoted = "demoted";
inline constexpr const char* kOffloaded = "offloaded";
inline constexpr const char* kRestoreRequired = "restore_required";
inline constexpr const char* kRestored = "restored";
inline constexpr const char* kRestorationFailed = "restoration_failed";
inline constexpr const char* kRefused = "refused";
inline constexpr const char* kExpired = "expired";
inline constexpr const char* kEvicted = "evicted";
inline constexpr const char* kPinned = "pinned";
inline constexpr const char* kUnpinned = "unpinned";
}  // namespace claim_event

struct ClaimEvent {
    uint64_t seq = 0;
    double time = 0;  // seconds on the store's monotonic clock
    std::string claim_id;
    std::string event;
    Tier tier = Tier::Device;
    uint64_t bytes = 0;
    bool pinned = false;
    std::string request_id;               // may be empty
    std::vector<std::string> blocking;    // refused: the claims in the way
    std::string reason;                   // refused/evicted/restoration_failed: why
    // restoration_failed + refused of a restore the heap refused (T33): the capsule's bytes are
    // intact, so the claim stays live after the refusal instead of being evicted.
    bool retained = false;
    // The claim's API-key scope (memory only, not in the file): GET /v1/claims shows a caller
    // the events of its claims, the one that ended them included, after the capsule is gone.
    std::string owner;
};

std::string claim_event_json(const ClaimEvent& e);  // one line, no newline

class ClaimLog {
public:
    static constexpr size_t kMemoryEvents = 4096;

    ClaimLog() = default;
    ~ClaimLog();
    ClaimLog(const ClaimLog&) = delete;
    ClaimLog& operator=(const ClaimLog&) = delete;

    // Appends to `path` from now on (created if absent). FROST_ERR_IO if it cannot be opened.
    // An existing log (a previous run's) is continued: seq goes on after its last event and
    // times are offset by its last time, so one file replays as one ordered history. Whatever
    // follows the last valid record is cut off first (repaired_bytes()): a torn last record (a
    // crash or a full disk mid-write), or lines a power cut damaged (the file is not fsynced per
    // event), which are first copied to <path>.damaged.<unix time>.
    frost_status open_file(const std::string& path);
    // Assigns seq, stores and writes the event; returns the seq. Records are whole lines or
    // nothing: a failed or short write (ENOSPC) is truncated back to the last whole record,
    // counted (write_errors()), reported once on stderr, and the event waits in memory
    // (unwritten()) to be written, in order, by the next append that succeeds. The in-memory
    // log records the event either way: the store's decision has already happened.
    uint64_t append(ClaimEvent e);
    std::vector<ClaimEvent> recent(const std::string& claim_id = "") const;
    uint64_t write_errors() const;
    size_t unwritten() const;       // events waiting for the file (bounded by kMemoryEvents)
    uint64_t lost() const;          // events dropped from that wait (the file then has a seq gap)
    uint64_t repaired_bytes() const;  // bytes after the last valid record that open_file() cut off
    // Whether the file continued by open_file() left this claim live (re-indexing after a
    // restart may end only such claims, so the file stays one valid history).
    bool previously_live(const std::string& claim_id) const;
    // The previous run's claims that are still live now (an ending event appended since removes
    // one), with their last event: after a crash these are the capsules that did not come back.
    struct OpenClaim {
        std::string last_event;
        Tier tier = Tier::Device;
        bool pinned = false;
        bool retained = false;  // the last event carried "retained": true
    };
    std::map<std::string, OpenClaim> previously_live_claims() const;
    // Whether the continued file ended this claim (expired, evicted or refused): a capsule file of
    // such a claim found at start is a removal the crash interrupted.
    bool previously_ended(const std::string& claim_id) const;

private:
    mutable std::mutex mu_;
    std::deque<ClaimEvent> events_;
    // Returns the length of the file's valid prefix (whole lines that are records); *damaged:
    // a whole line after it is not a record.
    uint64_t continue_from(const std::string& path, bool* damaged);
    std::map<std::string, OpenClaim> previously_live_;
    std::set<std::string> previously_ended_;
    uint64_t next_seq_ = 1;
    double time_base_ = 0;  // the previous run's last event time
    uint64_t write_errors_ = 0;
    // Writes unwritten_ in order; stops at the first failure (the file is cut back to good_bytes_).
    void write_pending_locked();
    bool write_record_locked(const std::string& line);
    int fd_ = -1;
    std::string path_;
    uint64_t good_bytes_ = 0;  // file size up to the last whole record
    std::deque<std::string> unwritten_;
    uint64_t lost_ = 0;
    uint64_t repaired_bytes_ = 0;
    bool failing_ = false;
};

}  // namespace frost::serve
