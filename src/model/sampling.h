// The sampling parameters of a session (one type for the model layer, the C API and serve):
// temperature / top_k / top_p / seed run in the cursor; penalties, min_p, logit_bias, the token mask
// and logprobs in the per-session sampler settings (kernels/params/sample.h), all inside the
// captured step. Engine::set_sampling validates and applies them.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace frost::model {

struct SamplingConfig {
    float temperature = 0.0f;  // <= 0: greedy
    int top_k = 0;             // 0: off
    float top_p = 1.0f;        // 1: off
    uint64_t seed = 0;
    float presence_penalty = 0.0f;    // OpenAI: minus this once a token was generated
    float frequency_penalty = 0.0f;   // OpenAI: minus this per time a token was generated
    float repetition_penalty = 1.0f;  // HF: over prompt + generated (p > 0 divided, else multiplied); 1 = off
    float min_p = 0.0f;               // keep tokens with p >= min_p * p_max; 0 = off
    std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits (<= kMaxLogitBias ids)
    // -1: no logprobs; 0..20: the chosen token's logprob plus this many top alternatives, from the
    // raw model distribution (kernels/params/sample.h step 4), read with Engine::last_sample().
    int top_logprobs = -1;
    bool processing() const {
        return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
               min_p > 0.0f || !logit_bias.empty();
    }
};

}  // namespace frost::model
