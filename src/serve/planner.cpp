// Planner implementation (see planner.h): digest-indexed capsule lookup with full verification.
#include "serve/planner.h"

#include <algorithm>
#include <map>

namespace frost::serve {

const char* plan_action_name(PlanAction a) {
    switch (a) {
        case PlanAction::Append: return "append";
        case PlanAction::Restore: return "restore";
        case PlanAction::Rebuild: return "rebuild";
    }
    return "?";
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

Plan plan_request(const PlanInput& in) {
    Plan plan;
    const std::vector<int32_t>& prompt = *in.prompt;
    const size_t usable_len = prompt.empty() ? 0 : prompt.size() - 1;

    size_t append_len = 0;
    if (in.journal) {
        plan.journal_lcp = common_prefix(*in.journal, prompt);
        if (!in.journal->empty() && plan.journal_lcp == in.journal->size() && in.journal->size() <= usable_len)
            append_len = in.journal->size();
    }

    // Digest of each distinct prefix length that some capsule could cover, computed once.
    std::map<size_t, Digest> prefix_digest;
    const CapsuleView* best = nullptr;
    for (const auto& c : in.capsules) {
        if (!c.usable || !c.tokens) continue;
        const size_t len = c.tokens->size();
        if (len == 0 || len > usable_len) continue;
        if (!in.required_capsule.empty() && c.id != in.required_capsule) continue;
        auto it = prefix_digest.find(len);
        if (it == prefix_digest.end()) it = prefix_digest.emplace(len, token_digest(prompt.data(), len)).first;
        if (it->second != c.digest) continue;
        // Digest equality is a candidate, never a proof: verify every token.
        if (!std::equal(c.tokens->begin(), c.tokens->end(), prompt.begin())) continue;
        if (!best || len > best->tokens->size()) best = &c;
    }

    if (!in.required_capsule.empty()) {
        if (!best) {
            plan.required_missing = true;
            return plan;
        }
        plan.action = PlanAction::Restore;
        plan.capsule_id = best->id;
        plan.cached_tokens = best->tokens->size();
        return plan;
    }
    // Prefer the live state when it covers at least as much: append moves no bytes.
    if (append_len > 0 && (!best || append_len >= best->tokens->size())) {
        plan.action = PlanAction::Append;
        plan.cached_tokens = append_len;
        return plan;
    }
    if (best) {
        plan.action = PlanAction::Restore;
        plan.capsule_id = best->id;
        plan.cached_tokens = best->tokens->size();
        return plan;
    }
    return plan;
}

}  // namespace frost::serve
