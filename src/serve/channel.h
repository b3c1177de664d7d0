// The per-request stream between the engine thread (producer) and one HTTP connection
// (consumer). Bounded: the engine never blocks on a slow reader; it checks full() and skips that
// request's step until the reader catches up or the connection's send timeout cancels it (T31).
// Final events (finish, error) bypass the bound so a request can always be ended.
#pragma once
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/timings.h"

namespace frost::serve {

struct ChoiceUsage {
    size_t prompt_tokens = 0;
    size_t completion_tokens = 0;
    size_t cached_tokens = 0;
    std::string plan_action;  // append | restore | rebuild
    std::string capsule_id;   // restore: which capsule
    // Choice 0's Finish: the engine-side phase timings (the I/O thread adds its own pickups).
    bool has_timings = false;
    PhaseTimes timings;
};

struct StreamEvent {
    enum class Kind { Delta, ToolCalls, Finish, Error };
    Kind kind = Kind::Delta;
    int index = 0;                 // choice index
    std::string text;              // Delta: content text
    std::string reasoning;         // Delta: reasoning text
    nlohmann::json tool_calls;     // ToolCalls: OpenAI tool_call objects
    std::string finish_reason;     // Finish: stop | length | tool_calls
    std::string stop_sequence;     // Finish: the request's stop string that ended the choice, "" if none
    ChoiceUsage usage;             // Finish
    ApiError error;                // Error: ends the whole request
    nlohmann::json capsule;        // Finish of a capsule-only job: the capsule (capsule_json)
    // Delta / Finish: logprob entries of the tokens behind this event (chat format: token,
    // logprob, bytes, top_logprobs); null or empty when the request asked for none.
    nlohmann::json logprobs;
};

class Channel {
public:
    explicit Channel(size_t capacity) : capacity_(capacity) {}

    // Producer side. try_push fails when full (the caller retries on a later step).
    bool try_push(StreamEvent e);
    void push_final(StreamEvent e);
    bool full() const;

    // Consumer side.
    std::optional<StreamEvent> try_pop();
    // Called (on the producer's thread) after every push; the consumer posts itself a wake-up.
    void set_notify(std::function<void()> fn);

private:
    void notify_locked_out(std::unique_lock<std::mutex>& lock);
    mutable std::mutex mu_;
    std::deque<StreamEvent> q_;
    size_t capacity_;
    std::function<void()> notify_;
};

}  // namespace frost::serve
