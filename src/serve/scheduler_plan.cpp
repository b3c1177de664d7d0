// Planning a choice (append / restore / rebuild against the slot's journal and the caller's
// capsules), its sampling, and the prefill steps up to its first token (see scheduler.h).
#include "serve/scheduler.h"

#include <algorithm>
#include <optional>

#include "exec/error.h"
#include "serve/heap_refusal.h"
#include "serve/planner.h"
#include "serve/scheduler_state.h"

namespace frost::serve {

bool Scheduler::start_choice(Active& a) {
    Job& job = *a.job;
    Slot& slot = slots_[size_t(a.slot)];
    slot.last_use = ++use_clock_;
    if (slot.owner != job.owner) {
        slot.journal.clear();  // another tenant's live state is never planned against
        slot.owner = job.owner;
    }
    std::optional<PhaseTimer> plan_timer(std::in_place, times(a), Phase::Plan);
    PlanInput in;
    in.prompt = &job.prompt;
    in.journal = &slot.journal;
    // Where the engine promises a cold prefill's bits only for cuts on its grid, a live state is
    // continued only when it is one (exact, ending on the grid); else the request restores a
    // capsule or rebuilds, and answers as a cold server would.
    const size_t grid = engine_.exact_cut_grid();
    in.journal_appendable = grid == 0 || (slot.exact && slot.journal.size() % grid == 0);
    in.required_capsule = a.choice == 0 ? job.req.capsule_id : "";
    std::vector<const CapsuleRecord*> caps = store_->list(job.owner);
    for (const auto* c : caps) in.capsules.push_back(CapsuleView{c->id, &c->tokens, c->digest, true});
    Plan plan = plan_request(in);
    plan_timer.reset();
    // Echo with logprobs scores every prompt token: the prompt is run from position 0.
    if (job.req.echo && job.req.logprobs >= 0 && !plan.required_missing) {
        plan.action = PlanAction::Rebuild;
        plan.cached_tokens = 0;
    }
    // A capsule-only request must freeze its whole prompt. From a live or restored state the
    // engine can freeze only when its alignment grid point below the end lies at or past that
    // state (an extension of a few tokens past an unaligned capsule cannot): then it starts over
    // from position 0, which always can, so an extension by any length works.
    if (job.capsule_only && !plan.required_missing && plan.action != PlanAction::Rebuild &&
        !engine_.snapshot_possible(plan.cached_tokens, job.prompt.size())) {
        plan.action = PlanAction::Rebuild;
        plan.cached_tokens = 0;
    }
    if (plan.required_missing) {
        fail_job(a, make_error(404, "invalid_request_error", "capsule_not_found",
                               "capsule_id: no capsule '" + job.req.capsule_id + "' matches a prefix of this prompt"),
                 false);
        return false;
    }
    a.usage = ChoiceUsage{};
    a.usage.prompt_tokens = job.prompt.size();
    a.usage.plan_action = plan_action_name(plan.action);
    a.usage.cached_tokens = plan.cached_tokens;
    if (plan.action == PlanAction::Restore) {
        const auto t0 = std::chrono::steady_clock::now();
        CapsuleRecord rec;
        // The store's part (claim events, a promotion to the device tier) counts as store work;
        // Restore is the engine's copy into the slot.
        std::optional<PhaseTimer> store_timer(std::in_place, times(a), Phase::Store);
        const frost_status began = store_->begin_restore(plan.capsule_id, job.owner, job.id, &rec);
        store_timer.reset();
        if (began != FROST_OK) {
            update_store_metrics();
            slot.journal.clear();
            fail_job(a, make_error(503, "server_error", "capsule_restore_failed",
                                   "capsule " + plan.capsule_id + " could not be restored (refused): " + last_error()),
                     true);
            return false;
        }
        frost_status st;
        std::string why;
        size_t at = 0;
        try {
            {
                PhaseTimer t(times(a), Phase::Restore);
                st = engine_.restore(rec.handle, a.slot, &at);
            }
            if (st != FROST_OK) why = last_error();
        } catch (...) {
            // The restore began (restore_required, the capsule held busy): it must end, or the
            // claim stays "restoring" and the capsule can never leave its tier (T33).
            const bool oom = exception_is_bad_alloc();
            retry_while_heap_refuses([&] {
                store_->end_restore(rec.id, oom ? FROST_ERR_OUT_OF_MEMORY : FROST_ERR_BACKEND, job.id,
                                    oom ? "out of host memory" : "the restore threw");
            });
            throw;
        }
        store_timer.emplace(times(a), Phase::Store);
        store_->end_restore(rec.id, st, job.id, why);
        update_store_metrics();
        store_timer.reset();
        if (st != FROST_OK) {
            fail_job(a, make_error(503, "server_error", "capsule_restore_failed",
                                   "capsule " + plan.capsule_id + " could not be restored (refused" +
                                       (st == FROST_ERR_OUT_OF_MEMORY ? "; out of memory, the capsule is kept): " : "): ") +
                                       why),
                     true);
            return false;
        }
        if (metrics_)
            metrics_->restore_latency.observe(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (at > rec.tokens.size()) {
            fail_job(a, make_error(500, "server_error", "engine_error",
                                   "restore of " + plan.capsule_id + " reported position " + std::to_string(at) +
                                       " past its " + std::to_string(rec.tokens.size()) + " tokens"),
                     true);
            return false;
        }
        // The engine may stop at its grid point below the capsule's end: the tokens after it are
        // prefilled with the rest of the prompt (recomputed, so not cached).
        slot.journal.assign(rec.tokens.begin(), rec.tokens.begin() + long(at));
        slot.exact = true;
        a.usage.capsule_id = rec.id;
        a.usage.cached_tokens = at;
        a.pos = at;
    } else if (plan.action == PlanAction::Append) {
        a.pos = slot.journal.size();
    } else {
        if (engine_.reset(a.slot) != FROST_OK) {
            fail_job(a, make_error(500, "server_error", "engine_error", "reset failed: " + last_error()), true);
            return false;
        }
        slot.journal.clear();
        slot.exact = true;
        a.pos = 0;
    }
    if (metrics_) {
        (plan.action == PlanAction::Rebuild ? metrics_->prefix_misses : metrics_->prefix_hits)++;
        metrics_->prompt_tokens_total += job.prompt.size();
        metrics_->cached_tokens_total += a.usage.cached_tokens;
    }
    if (!init_choice(a)) return false;
    if (a.choice == 0) job.choices_left = job.req.n;
    if (a.choice == 0 && job.req.n > 1) claim_fork_slots(a);
    return true;
}

Sampling Scheduler::choice_sampling(const Active& a) const {
    const Job& job = *a.job;
    Sampling s;
    s.temperature = float(job.req.temperature);
    s.top_k = job.req.top_k;
    s.top_p = float(job.req.top_p);
    s.seed = job.req.seed + uint64_t(a.choice);
    s.presence_penalty = float(job.req.presence_penalty);
    s.frequency_penalty = float(job.req.frequency_penalty);
    s.repetition_penalty = float(job.req.repetition_penalty);
    s.min_p = float(job.req.min_p);
    s.logit_bias = job.req.logit_bias;
    s.top_logprobs = job.req.logprobs;
    return s;
}

bool Scheduler::init_choice(Active& a) {
    Job& job = *a.job;
    if (engine_.set_sampling(a.slot, choice_sampling(a)) != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "sampling setup failed: " + last_error()), false);
        return false;
    }
    a.detok = text_.detokenizer();
    a.pending_logprobs = nlohmann::json::array();
    a.tools_on = job.req.endpoint == Endpoint::Chat && !job.req.tools.empty() &&
                 job.req.tool_choice != ToolChoice::None;
    std::vector<std::string> stops = job.req.stop;
    // parallel_tool_calls: false: the first call's end ends the choice (the parser accepts a call
    // without its closing tag).
    if (a.tools_on && !job.req.parallel_tool_calls) stops.push_back("</tool_call>");
    a.stop = std::make_unique<StopMatcher>(stops);
    a.marker = a.tools_on ? std::make_unique<StopMatcher>(std::vector<std::string>{text_.tool_call_marker()}) : nullptr;
    a.think = job.split_reasoning ? std::make_unique<ReasoningSplitter>(job.starts_in_reasoning) : nullptr;
    a.content_text = job.forced_prefix;
    if (a.marker && !job.forced_prefix.empty()) a.marker->feed(job.forced_prefix);  // held: inside a call
    a.generated = 0;
    a.first_token = true;
    a.phase = Active::Phase::Prefill;
    // Constrained decoding: this choice's own matcher; the slot's mask is the grammar's start
    // (cleared for a free request, so no earlier request's mask stays behind).
    a.matcher = job.constraint ? std::make_unique<text::grammar::Matcher>(job.constraint, job.masker) : nullptr;
    const frost_status ms = a.matcher ? set_mask(a) : engine_.set_token_mask(a.slot, nullptr, 0);
    if (ms != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "token mask setup failed: " + last_error()), false);
        return false;
    }
    return true;
}

frost_status Scheduler::set_mask(Active& a) {
    const std::vector<uint32_t>& bits = a.matcher->mask();
    return engine_.set_token_mask(a.slot, bits.data(), bits.size());
}

bool Scheduler::prefill_step(Active& a) {
    Job& job = *a.job;
    if (a.slicing) return sliced_prefill_step(a);
    if (job.req.echo && job.req.logprobs >= 0 && a.pos == 0 && !job.capsule_only) return prefill_scored_step(a);
    if (a.batched && !a.forked && a.pos + 1 == job.prompt.size()) fork_choices(a);
    if (job.cancelled) return true;  // a fork failed the job: the loop releases every member
    size_t end = std::min(job.prompt.size(), a.pos + step_tokens_);
    if (a.batched && !a.forked) end = std::min(end, job.prompt.size() - 1);  // the fork point
    // Seeded sampling must not depend on how the prompt was cut: the engine draws from its RNG
    // once per prefill chunk, so the number of draws before the first token would follow the
    // prefill steps, the snapshot point and the fork point (load). A sampled choice prefills its
    // last prompt token alone, right after its RNG restarts from seed + choice: its first token
    // is always draw 0 (issue 13 B6).
    const bool sampled = job.req.temperature > 0 && !job.capsule_only;
    if (sampled && a.pos + 1 < job.prompt.size()) end = std::min(end, job.prompt.size() - 1);
    if (sampled && a.pos + 1 == job.prompt.size() && engine_.set_sampling(a.slot, choice_sampling(a)) != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "sampling setup failed: " + last_error()), false);
        return false;
    }
    // A chat turn freezes its resent history, at the point the engine stores it (the alignment
    // grid below): no remainder to re-prefill on restore, and one engine call fewer per turn.
    // A capsule-only request freezes exactly its whole prompt (its remainder is stored).
    // An engine without capsules gets no cut there: a cut off the alignment grid changes the CUDA
    // engine's bits (its chunked delta rule runs on that grid), so such a server's answer would
    // differ from one whose turn was restored from a capsule (CUDA serve suites, 2026-12-05).
    const size_t snap_at = job.capsule_only ? job.prompt.size() : engine_.snapshot_point(job.history_boundary);
    const bool snap = (cfg_.auto_capsules || job.capsule_only) && engine_.capsules_supported() && a.choice == 0 &&
                      snap_at > a.pos && (job.capsule_only || snap_at < job.prompt.size());
    if (snap) end = std::min(end, snap_at);
    int32_t next = -1;
    frost_status st = FROST_OK;
    if (snap && end == snap_at) {
        st = prefill_and_snapshot(a, end, &next);
    } else if (streams_decoding_ && cfg_.prefill_share > 0 && end - a.pos <= engine_.slice_rows()) {
        // Other streams decode: this chunk runs a few layers per round beside their steps.
        if (const frost_status bs = engine_.prefill_slices_begin(a.slot, job.prompt.data() + a.pos, end - a.pos);
            bs != FROST_OK) {
            fail_job(a, engine_failure(bs, "prefill failed: " + last_error()), false);
            return false;
        }
        a.slicing = true;
        a.slice_end = end;
        times(a).prefill_calls++;
        return sliced_prefill_step(a);
    } else {
        times(a).prefill_calls++;
        PhaseTimer t(times(a), Phase::Prefill);
        st = engine_.prefill(a.slot, job.prompt.data() + a.pos, end - a.pos, &next);
    }
    if (st != FROST_OK) {
        fail_job(a, engine_failure(st, "prefill failed: " + last_error()), true);
        return false;
    }
    return prefilled(a, end, next);
}

// The prompt is in the slot's state up to `end`: the journal follows; after the last piece the
// first token goes out.
bool Scheduler::prefilled(Active& a, size_t end, int32_t next) {
    Job& job = *a.job;
    Slot& slot = slots_[size_t(a.slot)];
    const size_t grid = engine_.exact_cut_grid();
    if (grid > 0 && a.pos % grid != 0) slot.exact = false;  // a piece starting off the grid
    slot.journal.insert(slot.journal.end(), job.prompt.begin() + long(a.pos), job.prompt.begin() + long(end));
    a.pos = end;
    if (a.pos < job.prompt.size()) return true;
    if (job.capsule_only) return finish_capsule_only(a);
    if (job.req.echo) echo_prompt(a, nullptr);
    return handle_token(a, next);
}

// One round's share of a staged piece: as many layers as the budget allows beside the decoding
// streams (all that is left once none decode). The call's time teaches the budget.
bool Scheduler::sliced_prefill_step(Active& a) {
    const int most = streams_decoding_ ? slice_budget_.layers(engine_.layers()) : 1 << 20;
    bool done = false;
    int32_t next = -1;
    const auto t0 = std::chrono::steady_clock::now();
    frost_status st;
    {
        PhaseTimer t(times(a), Phase::Prefill);
        st = engine_.prefill_slices_run(a.slot, most, &done, &next);
    }
    if (st != FROST_OK) {
        fail_job(a, engine_failure(st, "prefill failed: " + last_error()), true);
        return false;
    }
    if (streams_decoding_ && !done)
        slice_budget_.note_layers(most, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                                            .count());
    if (!done) return true;
    a.slicing = false;
    return prefilled(a, a.slice_end, next);
}

PhaseTimes& Scheduler::times(Active& a) {
    // Only choice 0 up to its first token is the request's time to first token.
    return (a.choice == 0 && a.first_token) ? a.job->times : scratch_times_;
}

}  // namespace frost::serve
