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
        if (in.journal_appendable && !in.journal->empty() && plan.journal_lcp == in.journal->size() &&
            in.journal->size() <= usable_len)
            append_len = in.journal->size();
    }

    auto candidate = [&](const CapsuleView& c) {
        if (!c.usable || !c.tokens) return false;
        const size_t len = c.tokens->size();
        if (len == 0 || len > usable_len) return false;
        return in.required_capsule.empty() || c.id == in.required_capsule;
    };
    // Digest of each distinct prefix length that some capsule could cover, all from one pass
    // over the prompt (O(prompt) hashing however many capsules and lengths there are).
    std::map<size_t, Digest> prefix_digest;
    for (const auto& c : in.capsules)
        if (candidate(c)) prefix_digest.emplace(c.tokens->size(), Digest{});
    TokenDigester dig;
    for (auto& [len, d] : prefix_digest) {  // ascending lengths
        dig.update(prompt.data() + dig.size(), len - dig.size());
        d = dig.digest();
    }
    // Longest first, so the first verified match is the answer and shorter prefixes of the same
    // conversation (every earlier turn's capsule) are never compared token by token.
    std::vector<const CapsuleView*> order;
    for (const auto& c : in.capsules)
        if (candidate(c)) order.push_back(&c);
    std::stable_sort(order.begin(), order.end(), [](const CapsuleView* x, const CapsuleView* y) {
        return x->tokens->size() > y->tokens->size();
    });
    const CapsuleView* best = nullptr;
    for (const CapsuleView* c : order) {
        if (prefix_digest.at(c->tokens->size()) != c->digest) continue;
        // Digest equality is a candidate, never a proof: verify every token.
        if (!std::equal(c->tokens->begin(), c->tokens->end(), prompt.begin())) continue;
        best = c;
        break;
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
