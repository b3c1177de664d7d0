// The request planner: a pure function over what exists (the live token journal of a slot and
// the capsules visible to the caller) that decides how a request's prompt reaches the device:
//   append  - the live state already holds a prefix of the prompt; prefill only the rest;
//   restore - a capsule holds the longest matching prefix; copy it in, then prefill the rest;
//   rebuild - nothing usable; cold prefill from position 0.
// A capsule matches only if its tokens equal the prompt's first tokens: candidates are found by
// SHA-256 digest of the prefix and then verified by a full token compare (T27), so a digest
// collision can never share state. Live state cannot be truncated (recurrent state is a fold over
// the whole prefix), so a journal that diverges from the prompt is unusable even if it shares a
// long common prefix; that is where capsules taken at turn boundaries take over (multi-turn chat
// whose client drops the thinking block still restores the previous turn's boundary).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "serve/sha256.h"

namespace frost::serve {

enum class PlanAction { Append, Restore, Rebuild };
const char* plan_action_name(PlanAction a);

struct CapsuleView {
    std::string id;
    const std::vector<int32_t>* tokens = nullptr;  // the capsule's boundary token ids [0, P)
    Digest digest{};                               // token_digest(tokens)
    bool usable = true;                            // false while deleting / restoring elsewhere
};

struct PlanInput {
    const std::vector<int32_t>* prompt = nullptr;   // the request's full token ids
    const std::vector<int32_t>* journal = nullptr;  // live ids of the candidate slot; null if none
    // False when the live state may not be continued (it would not give a cold prefill's bits
    // where the engine promises them: Scheduler::Slot::exact): no append, only restore or rebuild.
    bool journal_appendable = true;
    std::vector<CapsuleView> capsules;              // only the caller's own capsules
    std::string required_capsule;                   // request named a capsule: restore it or fail
};

struct Plan {
    PlanAction action = PlanAction::Rebuild;
    size_t cached_tokens = 0;   // prompt tokens not prefilled by this request
    std::string capsule_id;     // restore: which capsule
    size_t journal_lcp = 0;     // diagnostic: longest common prefix with the live journal
    bool required_missing = false;  // required_capsule named no usable matching capsule
};

// At least one prompt token is always left to prefill (the engine samples from the logits of the
// last prefilled token), so a journal or capsule covering the whole prompt is used up to P-1
// only when it is strictly shorter; an exact-length match is treated as not matching.
Plan plan_request(const PlanInput& in);

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace frost::serve
