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
    // The prompt's prefill calls (sizes summing to its length); empty: one call. A sliced run
    // stages each piece with prefill_slices_begin, so pieces must fit the engine's slice_rows.
    std::vector<int> pieces;
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
// With `slices` (sliced prefill): a joining session's pieces run a random number of layers
// (drawn from *slices) per call, and one decode_batch of the joined sessions runs between two of
// its calls, so decode steps interleave with half-done prefill chunks; it joins the batch in the
// step after its last piece's last layer.
std::vector<Result> batched(Engine& e, const std::vector<Plan>& plans, std::vector<int>* sizes,
                            std::mt19937* slices = nullptr);
std::vector<Plan> random_plans(std::mt19937& rng, int S, int vocab, bool sampled, bool staggered);
// Random prefill pieces of 1 .. max_piece tokens for every plan (pieces cross C_p boundaries).
void random_pieces(std::mt19937& rng, int max_piece, std::vector<Plan>* plans);

}  // namespace frost::model::batch_test
