// Logprobs and echo (issue 17): each sampled token's raw logprob and top alternatives come from
// the engine's device sampler (one small record read with the token, never the logits); the
// scheduler turns them into OpenAI's chat entries (token, logprob, bytes, top_logprobs), queued
// until the next text event of the choice carries them (the builder reshapes them for legacy
// completions). Echo sends the prompt text first; with logprobs the prompt is scored by the
// engine (EngineIface::prefill_scored), its first token without a logprob, as OpenAI does.
#include <utility>

#include "exec/error.h"
#include "serve/scheduler.h"
#include "serve/scheduler_state.h"

namespace frost::serve {

using nlohmann::json;

json Scheduler::logprob_entry(int32_t id, std::optional<float> logprob,
                              const std::vector<std::pair<int32_t, float>>* top) const {
    auto text_of = [this](int32_t t) {
        auto d = text_.detokenizer();
        std::string s = d->push(t);
        return s + d->flush();
    };
    auto bytes_of = [](const std::string& s) {
        json b = json::array();
        for (unsigned char ch : s) b.push_back(int(ch));
        return b;
    };
    const std::string s = text_of(id);
    json e = {{"token", s}, {"logprob", logprob ? json(*logprob) : json(nullptr)}, {"bytes", bytes_of(s)}};
    json alts = top ? json::array() : json(nullptr);
    if (top)
        for (const auto& [tid, lp] : *top) {
            const std::string ts = text_of(tid);
            alts.push_back(json{{"token", ts}, {"logprob", lp}, {"bytes", bytes_of(ts)}});
        }
    e["top_logprobs"] = alts;
    return e;
}

bool Scheduler::note_logprobs(Active& a, int32_t tok) {
    TokenLogprobs lp;
    if (engine_.last_logprobs(a.slot, &lp) != FROST_OK || lp.token != tok) {
        fail_job(a, make_error(500, "server_error", "engine_error", "logprobs unavailable: " + last_error()), false);
        return false;
    }
    a.pending_logprobs.push_back(logprob_entry(tok, lp.logprob, &lp.top));
    return true;
}

// The whole prompt in one engine call that also scores it (echo + logprobs; start_choice planned
// a rebuild, so the slot is empty). No capsule is frozen on this path.
bool Scheduler::prefill_scored_step(Active& a) {
    Job& job = *a.job;
    Slot& slot = slots_[size_t(a.slot)];
    int32_t next = -1;
    std::vector<TokenLogprobs> scored;
    frost_status st;
    {
        times(a).prefill_calls++;
        PhaseTimer t(times(a), Phase::Prefill);
        st = engine_.prefill_scored(a.slot, job.prompt.data(), job.prompt.size(), job.req.logprobs, &next, &scored);
    }
    if (st != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "prompt logprobs failed: " + last_error()), true);
        return false;
    }
    slot.journal.assign(job.prompt.begin(), job.prompt.end());
    slot.exact = false;  // the engine scored the prompt and prefilled its last token alone
    a.pos = job.prompt.size();
    echo_prompt(a, &scored);
    return handle_token(a, next);
}

// The prompt's text (and, when scored, one entry per prompt token) as the choice's first event:
// it bypasses stop strings and the reasoning split, which apply to generated text only.
void Scheduler::echo_prompt(Active& a, const std::vector<TokenLogprobs>* scored) {
    Job& job = *a.job;
    StreamEvent e;
    e.kind = StreamEvent::Kind::Delta;
    e.index = job.index_base + a.choice;
    auto d = text_.detokenizer();
    for (int32_t id : job.prompt) e.text += d->push(id);
    e.text += d->flush();
    if (scored) {
        e.logprobs = json::array();
        for (size_t i = 0; i < job.prompt.size(); ++i) {
            if (i == 0) {
                e.logprobs.push_back(logprob_entry(job.prompt[0], std::nullopt, nullptr));
                continue;
            }
            const TokenLogprobs* lp = i - 1 < scored->size() ? &(*scored)[i - 1] : nullptr;
            e.logprobs.push_back(lp ? logprob_entry(job.prompt[i], lp->logprob, &lp->top)
                                    : logprob_entry(job.prompt[i], std::nullopt, nullptr));
        }
    }
    if (e.text.empty() && !scored) return;
    job.channel->push_final(std::move(e));
}

}  // namespace frost::serve
