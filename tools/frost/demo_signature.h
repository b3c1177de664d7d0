// The capsule half of `frost demo`: a long shared prefix frozen once, then cold TTFT against capsule
// TTFT per tier (device, host, disk), token-exactness of every restore against its own cold run
// (greedy continuation and logits fingerprints), a fork into three sessions with different suffixes,
// a rollback, and the graph-capture count across all of it. Prints one small table.
#pragma once
#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdio>
#include <string>
#include <vector>

#include "exec/error.h"
#include "model/capsule.h"
#include "model/engine.h"
#include "model/generate.h"
#include "text/tokenizer.h"

namespace frost::cli::demo {

namespace fm = frost::model;

constexpr int kSignatureSessions = 4;  // session 0: cold runs; 1..3: capsule targets (fork)
constexpr int kForkWays = 3;
constexpr int kContinuation = 16;      // greedy tokens compared after every restore
constexpr int kTimingReps = 3;         // capsule TTFT: median of this many restores
constexpr int kSystemRules = 160;      // rule lines in the synthetic system prompt (~20 tokens each)
constexpr uint64_t kLcgMul = 6364136223846793005ull;  // fallback ids without a tokenizer
constexpr uint64_t kLcgAdd = 1442695040888963407ull;
constexpr int kLcgShift = 33;

// One greedy run from a given state: the sampled ids, the time to the first one, and fingerprints
// of the logits behind the first and the last token.
struct Run {
    std::vector<int32_t> ids;  // [kContinuation]
    double ttft_ms = 0;
    std::string fp_first, fp_last;
};

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Fills r->ids with `first` and kContinuation-1 greedy decode steps after it.
inline frost_status continue_greedy(fm::Engine& e, int s, int32_t first, Run* r) {
    std::vector<float> logits;
    FROST_TRY(e.last_logits(s, &logits));
    r->fp_first = fm::logits_fingerprint(logits);
    r->ids.assign(1, first);
    int32_t next = first;
    while (static_cast<int>(r->ids.size()) < kContinuation) {
        FROST_TRY(e.decode(s, &next));
        r->ids.push_back(next);
    }
    FROST_TRY(e.last_logits(s, &logits));
    r->fp_last = fm::logits_fingerprint(logits);
    return FROST_OK;
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Cold path: empty session, prefill all of `ids` (TTFT: median of `reps`), continue greedily.
inline frost_status cold_run(fm::Engine& e, int s, const std::vector<int32_t>& ids, int reps, Run* r) {
    std::vector<double> ms;
    int32_t first = -1;
    for (int rep = 0; rep < reps; ++rep) {
        FROST_TRY(e.reset(s));
        const auto t0 = Clock::now();
        FROST_TRY(e.prefill(s, ids.data(), ids.size(), &first));
        ms.push_back(ms_since(t0));
    }
    r->ttft_ms = median(ms);
    return continue_greedy(e, s, first, r);
}

// "identical" or where the continuation first departs from the cold one.
inline std::string compare_tokens(const Run& cold, const Run& got) {
    for (size_t i = 0; i < cold.ids.size(); ++i)
        if (i >= got.ids.size() || got.ids[i] != cold.ids[i]) return "differs at token " + std::to_string(i);
    return "identical";
}
inline bool same_logits(const Run& cold, const Run& got) {
    return cold.fp_first == got.fp_first && cold.fp_last == got.fp_last;
}

// The shared prefix: a long ChatML system turn through the tokenizer (ids from a fixed generator
// without one), cut to `tokens`, a multiple of the capsule alignment unit, so that restore + any
// suffix folds the recurrent state on the same chunk grid as the cold prefill.
// *from_text: how many of the ids came from the text (the rest are generated).
inline std::vector<int32_t> shared_prefix(const text::Tokenizer* tok, int tokens, int vocab, int* from_text) {
    std::vector<int32_t> ids;
    if (tok) {
        static const char* kTopics[] = {"answer in short sentences", "cite the file and line you read",
                                        "never invent an API that the repository does not have",
                                        "prefer the CPU reference when two results disagree",
                                        "keep every buffer static and named", "report measured numbers with units",
                                        "ask before deleting anything", "state what is unfinished"};
        std::string sys = "<|im_start|>system\nYou are the Frost coding agent. Follow these rules.\n";
        for (int i = 0; i < kSystemRules; ++i)
            sys += "Rule " + std::to_string(i + 1) + ": " + kTopics[i % std::size(kTopics)] + ", as agreed in turn " +
                   std::to_string(i / std::size(kTopics) + 1) + ".\n";
        ids = tok->encode(sys);
    }
    *from_text = std::min(tokens, static_cast<int>(ids.size()));
    uint64_t x = 1;
    while (static_cast<int>(ids.size()) < tokens) {
        x = x * kLcgMul + kLcgAdd;
        ids.push_back(static_cast<int32_t>(x >> kLcgShift));
    }
    ids.resize(static_cast<size_t>(tokens));
    for (int32_t& t : ids) t %= vocab;
    return ids;
}

// Three different user turns that close the system prompt.
inline std::vector<std::vector<int32_t>> suffixes(const text::Tokenizer* tok, int vocab) {
    static const char* kQuestions[kForkWays] = {"Summarise the rules.", "Which rule is about numbers?",
                                                "Write a haiku about capsules."};
    std::vector<std::vector<int32_t>> out;
    for (int k = 0; k < kForkWays; ++k) {
        std::vector<int32_t> ids;
        if (tok)
            ids = tok->encode(std::string("<|im_end|>\n<|im_start|>user\n") + kQuestions[k] +
                              "<|im_end|>\n<|im_start|>assistant\n");
        else
            for (int i = 0; i < 8 + 2 * k; ++i) ids.push_back(100 * (k + 1) + 7 * i);
        for (int32_t& t : ids) t %= vocab;
        out.push_back(std::move(ids));
    }
    return out;
}

inline std::vector<int32_t> concat(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::vector<int32_t> v = a;
    v.insert(v.end(), b.begin(), b.end());
    return v;
}

// Tokens the signature needs per session: prefix + the longest suffix + the continuation.
inline int signature_seq_len(int prefix_tokens, const text::Tokenizer* tok, int vocab) {
    size_t longest = 0;
    for (const auto& s : suffixes(tok, vocab)) longest = std::max(longest, s.size());
    return prefix_tokens + static_cast<int>(longest) + kContinuation + 1;
}

inline void print_row(const char* path, double ms, double cold_ms, const Run& cold, const Run& got) {
    const bool same = same_logits(cold, got);
    std::printf("  %-36s %10.2f %8.1fx   %-20s %s\n", path, ms, ms > 0 ? cold_ms / ms : 0.0,
                compare_tokens(cold, got).c_str(), same ? "match" : ("DIFFER " + got.fp_last).c_str());
}

inline int report_failure(const char* what) {
    std::fprintf(stderr, "frost demo: %s: %s\n", what, frost_last_error());
    return 1;
}

// Runs the whole signature on an engine with kSignatureSessions sessions whose max_seq_len is at
// least signature_seq_len(). Returns the process exit code (1 when a verb fails or any restore is
// not exact).
inline int show_signature(fm::Engine& e, fm::CapsuleManager& mgr, const text::Tokenizer* tok, int prefix_tokens) {
    const int vocab = e.config().vocab_size;
    int from_text = 0;
    const auto prefix = shared_prefix(tok, prefix_tokens, vocab, &from_text);
    const auto suf = suffixes(tok, vocab);
    const uint64_t captures0 = e.capture_count();
    bool exact = true;

    // Cold runs: each suffix on top of the prefix from an empty session (only A's TTFT is the
    // headline, so only A pays for repeated timing: the demo stays short on 2 cores).
    std::vector<Run> cold(kForkWays);
    for (int k = 0; k < kForkWays; ++k)
        if (cold_run(e, 0, concat(prefix, suf[k]), k == 0 ? kTimingReps : 1, &cold[k]) != FROST_OK)
            return report_failure("cold prefill");

    // Freeze the prefix once.
    fm::CapsuleId id = 0;
    const auto t_snap = Clock::now();
    if (e.reset(1) != FROST_OK || mgr.prefill_and_snapshot(1, prefix.data(), prefix.size(), fm::CapsuleTier::Device,
                                                           &id, nullptr) != FROST_OK)
        return report_failure("prefill + snapshot");
    const double snap_ms = ms_since(t_snap);
    fm::CapsuleInfo info;
    if (mgr.info(id, &info) != FROST_OK) return report_failure("capsule info");
    const fm::CapsuleBytes b = info.meta.bytes();

    std::printf("\ncapsule signature (cpu backend, greedy)\n");
    const std::string what = !tok ? "built-in ids: no tokenizer"
                             : from_text == prefix_tokens
                                 ? "a ChatML system prompt through the Qwen tokenizer, cut to the 64-token grid"
                                 : std::to_string(from_text) + " from a system prompt, the rest built-in ids";
    std::printf("shared prefix  %d tokens (%s)\n", prefix_tokens, what.c_str());
    std::printf("capsule        frozen once in %.1f ms (prefill + snapshot): %.2f MB "
                "(KV %.2f, recurrent %.2f, conv %.3f, cursor %.4f)\n",
                snap_ms, b.total() / 1e6, b.kv / 1e6, b.recurrent / 1e6, b.conv / 1e6, b.cursor / 1e6);
    std::printf("suffixes       A / B / C: %zu / %zu / %zu tokens (%s); every row continues %d greedy tokens and is\n"
                "               compared with its own cold run (tokens, and fingerprints of the first and last logits)\n\n",
                suf[0].size(), suf[1].size(), suf[2].size(), tok ? "user turns" : "built-in ids", kContinuation);
    std::printf("  %-36s %10s %9s   %-20s %s\n", "path", "TTFT ms", "speed-up", "continuation", "logits");
    std::printf("  %-36s %10.2f %8.1fx   %-20s %s\n", "cold prefill (prefix + suffix A)", cold[0].ttft_ms, 1.0,
                "(reference)", cold[0].fp_last.c_str());

    // Dirty every restore target first (another turn on top of whatever it holds): a restore must
    // overwrite every state byte that matters.
    for (int s = 1; s < kSignatureSessions; ++s) {
        const auto& other = suf[static_cast<size_t>(s + 1) % suf.size()];
        if (e.prefill(s, other.data(), other.size(), nullptr) != FROST_OK) return report_failure("dirtying a session");
    }

    // Capsule TTFT per tier: restore + suffix A, median of kTimingReps, then the continuation.
    const fm::CapsuleTier tiers[] = {fm::CapsuleTier::Device, fm::CapsuleTier::Host, fm::CapsuleTier::Disk};
    for (fm::CapsuleTier t : tiers) {
        if (mgr.move(id, t) != FROST_OK) return report_failure("moving the capsule between tiers");
        std::vector<double> ms;
        int32_t first = -1;  // the token after prefix + suffix A
        for (int r = 0; r < kTimingReps; ++r) {
            const auto t0 = Clock::now();
            if (mgr.restore_append(id, 1, suf[0].data(), suf[0].size(), &first) != FROST_OK)
                return report_failure("restore");
            ms.push_back(ms_since(t0));
        }
        Run got;
        if (continue_greedy(e, 1, first, &got) != FROST_OK) return report_failure("decode after restore");
        const std::string label = std::string("capsule restore (") + fm::capsule_tier_name(t) + ") + suffix A";
        print_row(label.c_str(), median(ms), cold[0].ttft_ms, cold[0], got);
        exact = exact && compare_tokens(cold[0], got) == "identical" && same_logits(cold[0], got);
    }
    if (mgr.move(id, fm::CapsuleTier::Device) != FROST_OK) return report_failure("promoting the capsule");

    // Fork: one capsule into sessions 1..3, each then takes its own suffix.
    const std::vector<int> targets = {1, 2, 3};
    std::vector<int32_t> unused;
    const auto t_fork = Clock::now();
    if (mgr.fork(id, targets, &unused) != FROST_OK) return report_failure("fork");
    const double fork_ms = ms_since(t_fork);
    for (int k = 0; k < kForkWays; ++k) {
        const auto t0 = Clock::now();
        int32_t first = -1;
        if (e.prefill(targets[k], suf[k].data(), suf[k].size(), &first) != FROST_OK)
            return report_failure("suffix after fork");
        const double ms = ms_since(t0) + fork_ms / kForkWays;
        Run got;
        if (continue_greedy(e, targets[k], first, &got) != FROST_OK) return report_failure("decode after fork");
        const std::string label = "fork -> session " + std::to_string(targets[k]) + " + suffix " +
                                  std::string(1, static_cast<char>('A' + k));
        print_row(label.c_str(), ms, cold[k].ttft_ms, cold[k], got);
        exact = exact && compare_tokens(cold[k], got) == "identical" && same_logits(cold[k], got);
    }

    // Rollback: session 1 has answered suffix A; undo that turn and take suffix B instead.
    const auto t_rb = Clock::now();
    int32_t first = -1;
    if (mgr.rollback(1, id, nullptr) != FROST_OK || e.prefill(1, suf[1].data(), suf[1].size(), &first) != FROST_OK)
        return report_failure("rollback");
    const double rb_ms = ms_since(t_rb);
    Run got;
    if (continue_greedy(e, 1, first, &got) != FROST_OK) return report_failure("decode after rollback");
    print_row("rollback session 1 (A) -> suffix B", rb_ms, cold[1].ttft_ms, cold[1], got);
    exact = exact && compare_tokens(cold[1], got) == "identical" && same_logits(cold[1], got);

    const uint64_t captures1 = e.capture_count();
    std::printf("\nTTFT: the cold row and the restore rows are medians of %d runs (cold B, C: one run each); a fork\n"
                "row is a third of the fork (%.2f ms for all %d sessions) plus that session's suffix; the rollback\n"
                "row is rollback + suffix B. Restores land on sessions holding other state (never a clean slate).\n",
                kTimingReps, fork_ms, kForkWays);
    std::printf("graph captures %llu before, %llu after: %s\n", static_cast<unsigned long long>(captures0),
                static_cast<unsigned long long>(captures1), captures0 == captures1 ? "no recapture" : "RECAPTURED");
    if (mgr.release(id) != FROST_OK) return report_failure("release");
    if (!exact || captures0 != captures1) {
        std::fprintf(stderr, "frost demo: a capsule path was not exact (see the table)\n");
        return 1;
    }
    return 0;
}

}  // namespace frost::cli::demo
