// Incremental stop-string matching over streamed text. Text arrives in arbitrary pieces (one
// detokenized token at a time), so a stop string may straddle pieces: the matcher holds back the
// longest tail that is still a prefix of some stop string and releases it once it cannot match.
// The emitted text never contains any part of a matched stop string (OpenAI semantics).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace frost::serve {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);

    // Feeds a piece; returns the text that is safe to emit now. After a match, stopped() is true
    // and the returned text ends right before the stop string; later feeds return "".
    std::string feed(std::string_view piece);
    // End of generation: releases any held-back text (empty after a stop).
    std::string flush();
    bool stopped() const { return stopped_; }
    // The stop string that matched ("" before a match): Anthropic's `stop_sequence` names it.
    // When several appear, the earliest in the text wins (then the first in the list).
    const std::string& matched() const { return matched_; }

private:
    std::vector<std::string> stops_;
    std::string pending_;  // held-back text that might begin a stop string
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace frost::serve
