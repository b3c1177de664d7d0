// Sampling on the host over one step's logits, for requests that use what the device sampler
// does not do: presence/frequency penalties (OpenAI: over the tokens generated so far),
// repetition_penalty (HF/vLLM: over prompt + generated, positive logits divided, negative
// multiplied), logit_bias, min_p. Then greedy (temperature <= 0) or temperature / top_k / top_p /
// min_p sampling with a counter-based RNG seeded per choice. Pure: the caller supplies logits and
// history; model_backend.cpp reads the logits (Engine::last_logits) and writes the chosen token
// back (Engine::set_next_token). Plain requests never come here: they stay on the device path.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serve/engine_iface.h"

namespace frost::serve {

class HostSampler {
public:
    // Restarts for a choice: counts cleared, the RNG restarted from s.seed.
    void reset(const Sampling& s);
    const Sampling& sampling() const { return s_; }
    // Chooses the next token from `logits` ([vocab], modified in place). `context` is every id
    // the state holds (prompt and generated, for repetition_penalty); the tokens generated since
    // reset() are tracked here (commit() each chosen one).
    int32_t choose(std::vector<float>* logits, const std::vector<int32_t>& context);
    void commit(int32_t token) { ++counts_[token]; }

private:
    Sampling s_;
    uint64_t draws_ = 0;
    std::unordered_map<int32_t, int> counts_;  // generated token -> times
};

}  // namespace frost::serve
