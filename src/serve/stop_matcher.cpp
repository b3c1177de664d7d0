// StopMatcher implementation (see stop_matcher.h).
#include "serve/stop_matcher.h"

#include <algorithm>

namespace frost::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    stops_.erase(std::remove_if(stops_.begin(), stops_.end(), [](const std::string& s) { return s.empty(); }),
                 stops_.end());
}

std::string StopMatcher::feed(std::string_view piece) {
    if (stopped_) return "";
    pending_.append(piece);
    if (stops_.empty()) {
        std::string out;
        out.swap(pending_);
        return out;
    }
    // Earliest complete match wins (the first stop string to appear in the text).
    size_t cut = std::string::npos;
    const std::string* which = nullptr;
    for (const auto& s : stops_) {
        const size_t at = pending_.find(s);
        if (at != std::string::npos && at < cut) {
            cut = at;
            which = &s;
        }
    }
    if (cut != std::string::npos) {
        stopped_ = true;
        matched_ = *which;
        std::string out = pending_.substr(0, cut);
        pending_.clear();
        return out;
    }
    // Hold back the longest suffix of pending_ that is a proper prefix of a stop string.
    size_t hold = 0;
    for (const auto& s : stops_) {
        const size_t max_k = std::min(s.size() - 1, pending_.size());
        for (size_t k = max_k; k > hold; --k) {
            if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
                hold = k;
                break;
            }
        }
    }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopMatcher::flush() {
    std::string out;
    if (!stopped_) out.swap(pending_);
    pending_.clear();
    return out;
}

}  // namespace frost::serve
