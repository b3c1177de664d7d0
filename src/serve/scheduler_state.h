// The engine thread's private per-slot and per-choice state, shared by the scheduler's files
// (scheduler.cpp: loop and admission; scheduler_plan.cpp: planning, restore and prefill;
// scheduler_fork.cpp: fork groups; scheduler_capsules.cpp: the capsule lifecycle;
// scheduler_output.cpp: output shaping). Engine thread only; not part of the serve API.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/reasoning_split.h"
#include "serve/scheduler.h"
#include "serve/stop_matcher.h"

namespace frost::serve {

struct Scheduler::Slot {
    std::vector<int32_t> journal;  // ids committed to this slot's state
    // The state is what one prefill of the journal from position 0 gives, bit for bit: it was
    // rebuilt or restored, then prefilled in pieces starting on the engine's exact-cut grid, and
    // never decoded (EngineIface::exact_cut_grid; only read where that grid is not 0).
    bool exact = true;
    std::string owner;
    uint64_t last_use = 0;
    bool busy = false;
};

// A capsule frozen at the history boundary whose acknowledgement (durable files, materialized)
// waits until the request's first token is out.
struct Scheduler::PendingCapsule {
    CapsuleRequest req;
    uint64_t handle = 0;
    uint64_t bytes = 0;
    bool to_file = false;  // placed on disk: written as its file pair before it is materialized
};

struct Scheduler::Active {
    std::shared_ptr<Job> job;
    std::unique_ptr<PendingCapsule> pending_capsule;
    int slot = -1;
    int choice = 0;
    enum class Phase { Start, Prefill, Decode } phase = Phase::Start;
    size_t pos = 0;          // next prompt index to prefill
    // A prompt piece [pos, slice_end) staged for sliced prefill, not yet through every layer
    // (the slot's state is half written until it is: a cancel then forgets the slot's journal).
    bool slicing = false;
    size_t slice_end = 0;
    int32_t pending = -1;    // sampled, not yet committed
    int64_t generated = 0;
    bool first_token = true;
    SteadyTime last_token_at{};  // the previous sampled token (inter-token latency)
    std::unique_ptr<Detokenizer> detok;
    std::unique_ptr<StopMatcher> stop;
    std::unique_ptr<StopMatcher> marker;  // tool-call markup: content stops streaming there
    bool tools_on = false;
    std::unique_ptr<ReasoningSplitter> think;  // set when the job splits reasoning
    std::string content_text;  // the content part of the output (tool calls are parsed here only)
    ChoiceUsage usage;
    std::string made_capsule;  // the capsule this request froze (or found already held)
    // n > 1 as one batched fork: choice 0 prefills the prompt up to its last token, its state is
    // copied into fork_slots (claimed at start), and each other choice runs there as its own
    // Active from that point. `batched` marks every member of such a group.
    bool batched = false;
    bool forked = false;
    std::vector<int> fork_slots;
    std::string capsule_refusal;  // why none was frozen, when the store refused
    // The refusal was the disk tier failing to take it (a write, fsync or rename of its file
    // pair): the storage's fault, not the request's, so a capsule request answers 507.
    bool capsule_storage_failed = false;
    // Constrained decoding: this choice's position in the job's grammar (job.constraint).
    std::unique_ptr<text::grammar::Matcher> matcher;
    // Logprob entries (chat format, scheduler_logprobs.cpp) not yet attached to an event.
    nlohmann::json pending_logprobs = nlohmann::json::array();
};

}  // namespace frost::serve
