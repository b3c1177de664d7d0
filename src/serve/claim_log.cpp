// ClaimLog implementation: in-memory ring plus an append-only JSONL file.
#include "serve/claim_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "util/fs.h"

namespace frost::serve {

std::string claim_event_json(const ClaimEvent& e) {
    nlohmann::json j = {{"seq", e.seq},           {"time", e.time},     {"claim_id", e.claim_id},
                        {"event", e.event},       {"tier", tier_name(e.tier)}, {"bytes", e.bytes},
                        {"pinned", e.pinned}};
    j["request_id"] = e.request_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.request_id);
    if (e.event == claim_event::kRefused) j["blocking_claim_ids"] = e.blocking;
    if (!e.reason.empty()) j["reason"] = e.reason;
    if (e.retained) j["retained"] = true;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ClaimLog::~ClaimLog() {
    if (fd_ >= 0) ::close(fd_);
}

frost_status ClaimLog::open_file(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "claim log %s: injected I/O error", path.c_str());
    bool damaged = false;
    const uint64_t whole = continue_from(path, &damaged);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return fail(FROST_ERR_IO, "claim log %s: cannot open for append: %s", path.c_str(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        return fail(FROST_ERR_IO, "claim log %s: %s", path.c_str(), std::strerror(errno));
    }
    // The next event must start a line after the last valid record: cut what follows it. A torn
    // last record (a crash mid-write) just goes; whole lines that are not records (what a power
    // cut leaves of an unsynced tail) are kept aside first, for inspection.
    if (whole < uint64_t(st.st_size)) {
        const uint64_t cut = uint64_t(st.st_size) - whole;
        std::string kept;
        if (damaged) {
            std::string text, err;
            kept = path + ".damaged." + std::to_string(::time(nullptr));
            if (!util::read_file(path, &text, &err) || !util::write_file(kept, text, &err)) kept = "not kept: " + err;
        }
        if (::ftruncate(fd, off_t(whole)) != 0) {
            ::close(fd);
            return fail(FROST_ERR_IO, "claim log %s: cannot cut after its last valid record: %s", path.c_str(),
                        std::strerror(errno));
        }
        repaired_bytes_ += cut;
        if (damaged)
            std::fprintf(stderr, "frost serve: claim log %s: cut %llu bytes after its last valid record (%s)\n",
                         path.c_str(), (unsigned long long)cut, kept.c_str());
        else
            std::fprintf(stderr, "frost serve: claim log %s: cut a torn last record (%llu bytes)\n", path.c_str(),
                         (unsigned long long)cut);
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    path_ = path;
    good_bytes_ = whole;
    return FROST_OK;
}

bool ClaimLog::write_record_locked(const std::string& line) {
    size_t done = 0;
    // The fault gate stands for a full disk: the write stops part-way, as ENOSPC leaves it.
    if (frost_fault_hit(FROST_FAULT_IO)) {
        const ssize_t n = ::write(fd_, line.data(), line.size() / 2);
        (void)n;
        errno = ENOSPC;
        return false;
    }
    while (done < line.size()) {
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ENOSPC;
            return false;
        }
        done += size_t(n);
    }
    return true;
}

void ClaimLog::write_pending_locked() {
    size_t written = 0;
    while (!unwritten_.empty()) {
        const std::string& line = unwritten_.front();
        if (!write_record_locked(line)) {
            const int err = errno;
            ++write_errors_;
            // Never leave half a record: cut the file back to its last whole one (truncating
            // frees space, so this works on a full disk too).
            if (::ftruncate(fd_, off_t(good_bytes_)) != 0) { /* retried before the next write */ }
            if (!failing_)
                std::fprintf(stderr,
                             "frost serve: claim log %s: write failed (%s); events wait in memory and are "
                             "written in order once it works again\n",
                             path_.c_str(), std::strerror(err));
            failing_ = true;
            return;
        }
        good_bytes_ += line.size();
        unwritten_.pop_front();
        ++written;
    }
    if (failing_) {
        std::fprintf(stderr, "frost serve: claim log %s: writable again (%zu delayed events written, %llu lost)\n",
                     path_.c_str(), written, (unsigned long long)lost_);
        failing_ = false;
    }
}

uint64_t ClaimLog::continue_from(const std::string& path, bool* damaged) {
    // Replays the previous run's events: seq and time go on after its last one, and the claims
    // still live at its end are remembered (a restarted store may only end those), as are the
    // ones it ended. It stops at the first line that is not a record.
    *damaged = false;
    std::ifstream in(path, std::ios::binary);
    if (!in) return 0;
    std::map<std::string, OpenClaim> last_event;  // claim -> its last event
    uint64_t valid = 0;
    std::string line;
    while (std::getline(in, line)) {
        if (in.eof()) break;  // no newline: a torn last record
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("seq") || !j["seq"].is_number_unsigned() || !j.contains("claim_id") ||
            !j["claim_id"].is_string() || !j.contains("event") || !j["event"].is_string()) {
            *damaged = true;
            break;
        }
        valid += line.size() + 1;
        next_seq_ = std::max(next_seq_, j["seq"].get<uint64_t>() + 1);
        if (j.contains("time") && j["time"].is_number()) time_base_ = std::max(time_base_, j["time"].get<double>());
        OpenClaim& c = last_event[j["claim_id"].get<std::string>()];
        c.last_event = j["event"].get<std::string>();
        for (int t = 0; t < kTierCount; ++t)
            if (j.contains("tier") && j["tier"] == tier_name(Tier(t))) c.tier = Tier(t);
        if (j.contains("pinned") && j["pinned"].is_boolean()) c.pinned = j["pinned"].get<bool>();
        c.retained = j.contains("retained") && j["retained"] == true;
    }
    for (const auto& [id, c] : last_event) {
        // A retained refusal (a restore the heap refused) leaves the claim live.
        if (c.last_event != claim_event::kExpired && c.last_event != claim_event::kEvicted &&
            (c.last_event != claim_event::kRefused || c.retained))
            previously_live_[id] = c;
        else
            previously_ended_.insert(id);
    }
    return valid;
}

bool ClaimLog::previously_ended(const std::string& claim_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return previously_ended_.count(claim_id) > 0;
}

std::map<std::string, ClaimLog::OpenClaim> ClaimLog::previously_live_claims() const {
    std::lock_guard<std::mutex> lock(mu_);
    return previously_live_;
}

bool ClaimLog::previously_live(const std::string& claim_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return previously_live_.count(claim_id) > 0;
}

uint64_t ClaimLog::append(ClaimEvent e) {
    std::lock_guard<std::mutex> lock(mu_);
    // Everything that allocates comes before anything changes, the file write last: a refusal
    // of the heap (T33) leaves the event out entirely, never written but reported as failed.
    e.seq = next_seq_;
    e.time += time_base_;
    std::string line = fd_ >= 0 ? claim_event_json(e) + "\n" : std::string();
    std::string last = e.event;  // for previously_live_, swapped in below without allocating
    events_.push_back(e);
    if (fd_ >= 0) {
        try {
            unwritten_.push_back(std::move(line));
        } catch (...) {
            events_.pop_back();
            throw;
        }
    }
    ++next_seq_;
    if (events_.size() > kMemoryEvents) events_.pop_front();
    if (e.event == claim_event::kExpired || e.event == claim_event::kEvicted ||
        (e.event == claim_event::kRefused && previously_live_.count(e.claim_id) &&
         previously_live_[e.claim_id].last_event == claim_event::kAccepted))
        previously_live_.erase(e.claim_id);
    else if (auto it = previously_live_.find(e.claim_id); it != previously_live_.end()) {
        it->second.last_event.swap(last);
        it->second.retained = e.retained;
    }
    if (fd_ >= 0) {
        if (unwritten_.size() > kMemoryEvents) {  // bounded: the oldest waiting event is given up
            unwritten_.pop_front();
            ++lost_;
        }
        write_pending_locked();
    }
    return e.seq;
}

std::vector<ClaimEvent> ClaimLog::recent(const std::string& claim_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ClaimEvent> out;
    for (const auto& e : events_)
        if (claim_id.empty() || e.claim_id == claim_id) out.push_back(e);
    return out;
}

uint64_t ClaimLog::write_errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return write_errors_;
}

size_t ClaimLog::unwritten() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unwritten_.size();
}

uint64_t ClaimLog::lost() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
}

uint64_t ClaimLog::repaired_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return repaired_bytes_;
}

}  // namespace frost::serve
