// The batched-decode harness shared by the CPU and CUDA engine tests: random per-session plans
// (prompt, token count, join step, sampling), a solo run of a plan on a one-session engine, and
// the same plans run together through Engine::decode_batch with members joining after their
// prefill and leaving when done. States are read back through the contract (any backend).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/engine.h"

namespace frost::model::batch_test {

struct Plan {
    std::vector<int32_t> prompt;
    int tokens = 0;  // generated tokens (the prefill's first one included)
    int join = 0;    // batched step before which the session is prefilled
    SamplingConfig sampling;
};

struct Result {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> state;
};

// The session's state: every state buffer's valid bytes, and the cursor without n_tokens and
// steps (a prefill writes the chunk's count, a batched step leaves 1; neither is state).
std::vector<uint8_t> state_bytes(const Engine& e, int s);
Result solo(Engine& e, const Plan& p);
// Before step t the sessions joining at t are prefilled (their first token), then one
// decode_batch advances every session that has joined and still owes tokens, rows shuffled.
// *sizes (may be null) collects the B of each step.
std::vector<Result> batched(Engine& e, const std::vector<Plan>& plans, std::vector<int>* sizes);
std::vector<Plan> random_plans(std::mt19937& rng, int S, int vocab, bool sampled, bool staggered);

}  // namespace frost::model::batch_test
