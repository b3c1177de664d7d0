// Helpers for the capsule correctness suite: tiny synthetic models (built once per process), engines
// on every available backend, greedy continuations with their logits, and reads of live state bytes.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/capsule.h"
#include "model/engine.h"

namespace frost::test {

constexpr int kCapsuleVocab = 512;     // small vocabulary keeps the LM head cheap on 2 CPU cores
constexpr int kCapsuleMaxSeq = 512;
constexpr int kCapsuleChunk = 128;     // C_p = 2 * A, so boundaries at odd multiples of 64 are tested

// A synthetic "tiny" Qwen3.5 checkpoint with weights drawn from `seed` (variant 0 and 1 are
// different models with the same shapes). Built once per process in a temp folder.
const std::string& capsule_model_dir(int variant = 0);
std::vector<frost_backend> capsule_backends();  // CPU, plus CUDA when available
std::string backend_label(const ::testing::TestParamInfo<frost_backend>& info);

std::unique_ptr<model::Engine> capsule_engine(frost_backend b, int sessions, int variant = 0);
std::string capsule_temp_dir(const std::string& tag);  // fresh, empty
std::vector<int32_t> random_ids(size_t n, uint64_t seed, int vocab = kCapsuleVocab);

// `steps` decode steps; tokens[i] and logits[i] are the sampled token and the logits it came from.
struct Continuation {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
};
// Records `first` (and, if first_logits, the current last logits) as step 0, then decodes
// steps-1 more. Right after a restore without a remainder no step has run, so the logits scratch
// holds nothing of the session: pass first_logits = false (that step's logits are then skipped).
Continuation continue_session(model::Engine& e, int session, int32_t first, int steps, bool first_logits = true);
// Cold reference: reset(sampling), prefill ids, continue.
Continuation cold_run(model::Engine& e, int session, const std::vector<int32_t>& ids, int steps,
                      const model::SamplingConfig& sc = {});
// Bitwise equality of two continuations (tokens and every logits bit; steps where either side has
// no logits compare tokens only), with a message on failure.
::testing::AssertionResult same_continuation(const Continuation& a, const Continuation& b);

// The session's state + cursor bytes within their valid ranges at its position, by buffer name
// without the session prefix.
std::vector<std::pair<std::string, std::vector<uint8_t>>> live_state(model::Engine& e, int session);
// Fills every state and scratch buffer of the session (weights excluded) with `value`.
void poison_session(model::Engine& e, int session, uint8_t value);

// The ctx's live buffer count and bytes per space, and a comparison that names what differs
// (fault tests: every counter back to its baseline).
frost_ctx_stats stats_of(const model::Engine& e);
::testing::AssertionResult same_stats(const frost_ctx_stats& a, const frost_ctx_stats& b);
// A whole file's bytes ("" if unreadable).
std::string slurp(const std::string& path);
// Replaces a file's bytes.
void spit(const std::string& path, const std::string& bytes);

struct TempFiles {
    static size_t count(const std::string& dir);  // files whose name holds the temp marker
};

}  // namespace frost::test
