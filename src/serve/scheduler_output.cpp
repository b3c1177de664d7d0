// Output shaping: sampled tokens become text events (detokenise, stop strings, the <think>
// split, the tool-call hold) and a finished choice its final events.
#include "serve/scheduler.h"
#include "exec/error.h"
#include "serve/ids.h"

#include "serve/scheduler_state.h"

namespace frost::serve {

void Scheduler::emit(Active& a, const std::string& text) {
    if (text.empty()) return;
    if (!a.think) return emit_split(a, "", text);
    const SplitText s = a.think->feed(text);
    emit_split(a, s.reasoning, s.content);
}

void Scheduler::emit_split(Active& a, const std::string& reasoning, const std::string& content) {
    a.content_text += content;
    std::string out = content;
    if (a.marker && !content.empty()) out = a.marker->feed(content);
    if (out.empty() && reasoning.empty()) return;
    StreamEvent e;
    e.kind = StreamEvent::Kind::Delta;
    e.index = a.job->index_base + a.choice;
    e.text = std::move(out);
    e.reasoning = reasoning;
    if (!a.pending_logprobs.empty()) e.logprobs = std::exchange(a.pending_logprobs, nlohmann::json::array());
    a.job->channel->push_final(std::move(e));
}

bool Scheduler::handle_token(Active& a, int32_t tok) {
    const bool first = a.first_token && a.choice == 0;
    if (first) {
        PhaseTimes& t = a.job->times;
        t.first_token = std::chrono::steady_clock::now();
        double engine_ms = ms_between(t.dequeued, t.first_token);
        for (Phase p : {Phase::Plan, Phase::Restore, Phase::Prefill, Phase::Snapshot, Phase::Store})
            engine_ms -= t.ms[size_t(p)];
        t.ms[size_t(Phase::EngineOther)] = std::max(0.0, engine_ms);
    }
    const bool going = handle_token_events(a, tok);
    // The first token's event is out (or the choice ended): now the deferred store work.
    if (a.pending_capsule) finalize_capsule(a);
    return going;
}

bool Scheduler::handle_token_events(Active& a, int32_t tok) {
    Job& job = *a.job;
    const SteadyTime now = std::chrono::steady_clock::now();
    if (a.first_token) {
        a.first_token = false;
        // From the request's arrival (the I/O thread's clock), not from its admission here.
        const SteadyTime from = job.times.received != SteadyTime{} ? job.times.received : job.enqueued;
        if (metrics_ && a.choice == 0) metrics_->ttft.observe(std::chrono::duration<double>(now - from).count());
    } else if (metrics_ && a.last_token_at != SteadyTime{}) {
        metrics_->itl.observe(std::chrono::duration<double>(now - a.last_token_at).count());
    }
    a.last_token_at = now;
    a.generated++;
    if (metrics_) metrics_->generated_tokens_total++;
    // Constrained decoding: the token must be one the mask allowed (the engine sampled under it).
    if (a.matcher && !a.matcher->accept(tok)) {
        fail_job(a, make_error(500, "server_error", "engine_error",
                               "constrained decoding: the engine sampled token " + std::to_string(tok) +
                                   ", which the grammar does not allow here"), false);
        return false;
    }
    if (text_.is_end_token(tok)) return finish_choice(a, "stop");
    if (job.req.logprobs >= 0 && !note_logprobs(a, tok)) return false;
    const std::string piece = a.detok->push(tok);
    emit(a, a.stop->feed(piece));
    if (a.stop->stopped()) return finish_choice(a, "stop");
    if (a.generated >= job.max_new) return finish_choice(a, "length");
    if (a.matcher && set_mask(a) != FROST_OK) {
        fail_job(a, make_error(500, "server_error", "engine_error", "token mask failed: " + frost::last_error()), true);
        return false;
    }
    a.pending = tok;
    a.phase = Active::Phase::Decode;
    return true;
}

bool Scheduler::finish_choice(Active& a, const char* reason) {
    Job& job = *a.job;
    if (!a.stop->stopped()) {
        const std::string tail = a.detok->flush();
        emit(a, a.stop->feed(tail));
        if (!a.stop->stopped()) emit(a, a.stop->flush());
    }
    if (a.think) {
        const SplitText s = a.think->flush();
        emit_split(a, s.reasoning, s.content);
    }
    std::string finish = reason;
    // A stop string found in the flushed tail ended the text too: it is the reason.
    if (a.stop->stopped()) finish = "stop";
    if (a.tools_on) {
        ParsedOutput parsed = text_.parse_output(a.content_text, job.req.tools);
        // Ids unique across responses (clients key tool results by them; "call_0" every turn
        // would make a conversation's results ambiguous).
        for (auto& call : parsed.tool_calls) call["id"] = "call_" + new_id("x").substr(2);
        if (!job.req.parallel_tool_calls && parsed.tool_calls.size() > 1) parsed.tool_calls = nlohmann::json::array({parsed.tool_calls[0]});
        if (!parsed.tool_calls.empty()) {
            StreamEvent e;
            e.kind = StreamEvent::Kind::ToolCalls;
            e.index = a.job->index_base + a.choice;
            e.tool_calls = parsed.tool_calls;
            job.channel->push_final(std::move(e));
            finish = "tool_calls";
        } else if (a.marker && a.marker->stopped()) {
            // Markup began but did not parse as a call: send it as content rather than lose it.
            const size_t at = a.content_text.find(text_.tool_call_marker());
            if (at != std::string::npos) {
                StreamEvent e;
                e.kind = StreamEvent::Kind::Delta;
                e.index = a.job->index_base + a.choice;
                e.text = a.content_text.substr(at);
                job.channel->push_final(std::move(e));
            }
        } else if (a.marker) {
            emit(a, "");
            StreamEvent e;
            e.kind = StreamEvent::Kind::Delta;
            e.index = a.job->index_base + a.choice;
            e.text = a.marker->flush();
            if (!e.text.empty()) job.channel->push_final(std::move(e));
        }
    }
    StreamEvent fin;
    fin.kind = StreamEvent::Kind::Finish;
    fin.index = job.index_base + a.choice;
    fin.finish_reason = finish;
    if (finish == "stop" && a.stop->stopped()) fin.stop_sequence = a.stop->matched();
    a.usage.completion_tokens = size_t(a.generated);
    fin.usage = a.usage;
    if (!a.pending_logprobs.empty()) fin.logprobs = std::exchange(a.pending_logprobs, nlohmann::json::array());
    if (a.choice == 0) {
        fin.usage.has_timings = true;
        fin.usage.timings = job.times;
    }
    // The per-key place is free before the client can see the end (it may send again at once).
    if (--job.choices_left <= 0) uncount(job);
    job.channel->push_final(std::move(fin));
    if (!a.batched && ++a.choice < job.req.n) {
        a.phase = Active::Phase::Start;
        return true;
    }
    release(a);
    return false;
}

}  // namespace frost::serve
