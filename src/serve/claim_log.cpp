// ClaimLog implementation: in-memory ring plus an append-only JSONL file.
#include "serve/claim_log.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "exec/error.h"

namespace frost::serve {

const char* tier_name(Tier t) {
    switch (t) {
        case Tier::Device: return "device";
        case Tier::Host: return "host";
        case Tier::Disk: return "disk";
    }
    return "?";
}

bool parse_tier(const std::string& s, Tier* out) {
    if (s == "device") *out = Tier::Device;
    else if (s == "host") *out = Tier::Host;
    else if (s == "disk") *out = Tier::Disk;
    else return false;
    return true;
}

std::string claim_event_json(const ClaimEvent& e) {
    nlohmann::json j = {{"seq", e.seq},           {"time", e.time},     {"claim_id", e.claim_id},
                        {"event", e.event},       {"tier", tier_name(e.tier)}, {"bytes", e.bytes},
                        {"pinned", e.pinned}};
    j["request_id"] = e.request_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.request_id);
    if (e.event == claim_event::kRefused) j["blocking_claim_ids"] = e.blocking;
    if (!e.reason.empty()) j["reason"] = e.reason;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ClaimLog::~ClaimLog() {
    if (file_) std::fclose(file_);
}

frost_status ClaimLog::open_file(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "claim log %s: injected I/O error", path.c_str());
    continue_from(path);
    std::FILE* f = std::fopen(path.c_str(), "a");
    if (!f) return fail(FROST_ERR_IO, "claim log %s: cannot open for append", path.c_str());
    if (file_) std::fclose(file_);
    file_ = f;
    return FROST_OK;
}

void ClaimLog::continue_from(const std::string& path) {
    // Replays the previous run's events: seq and time go on after its last one, and the claims
    // still live at its end are remembered (a restarted store may only end those).
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return;
    std::map<std::string, OpenClaim> last_event;  // claim -> its last event
    std::string line;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, f)) {
        line += buf;
        if (line.empty() || line.back() != '\n') continue;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        line.clear();
        if (!j.is_object()) continue;
        if (j.contains("seq") && j["seq"].is_number_unsigned())
            next_seq_ = std::max(next_seq_, j["seq"].get<uint64_t>() + 1);
        if (j.contains("time") && j["time"].is_number()) time_base_ = std::max(time_base_, j["time"].get<double>());
        if (j.contains("claim_id") && j["claim_id"].is_string() && j.contains("event") && j["event"].is_string()) {
            OpenClaim& c = last_event[j["claim_id"].get<std::string>()];
            c.last_event = j["event"].get<std::string>();
            for (int t = 0; t < kTierCount; ++t)
                if (j.contains("tier") && j["tier"] == tier_name(Tier(t))) c.tier = Tier(t);
            if (j.contains("pinned") && j["pinned"].is_boolean()) c.pinned = j["pinned"].get<bool>();
        }
    }
    std::fclose(f);
    for (const auto& [id, c] : last_event)
        if (c.last_event != claim_event::kExpired && c.last_event != claim_event::kEvicted &&
            c.last_event != claim_event::kRefused)
            previously_live_[id] = c;
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
    e.seq = next_seq_++;
    e.time += time_base_;
    if (e.event == claim_event::kExpired || e.event == claim_event::kEvicted ||
        (e.event == claim_event::kRefused && previously_live_.count(e.claim_id) &&
         previously_live_[e.claim_id].last_event == claim_event::kAccepted))
        previously_live_.erase(e.claim_id);
    else if (previously_live_.count(e.claim_id))
        previously_live_[e.claim_id].last_event = e.event;
    if (file_) {
        const std::string line = claim_event_json(e) + "\n";
        if (frost_fault_hit(FROST_FAULT_IO) || std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
            std::fflush(file_) != 0)
            ++write_errors_;
    }
    events_.push_back(std::move(e));
    if (events_.size() > kMemoryEvents) events_.pop_front();
    return next_seq_ - 1;
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

}  // namespace frost::serve
