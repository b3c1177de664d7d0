// The sampler's per-session device state beside the cursor (kernels/params.h SampleParams):
// settings the host writes between steps, and the record one step writes for the host to read.
// Plain data shared by the CPU reference (cpu/sample.cpp) and the CUDA kernels (cuda/lm_sample*.cu).
//
// Processing order of one step (both backends), over the selected logits row l[vocab]:
//   1. the step's input ids are marked in `seen` (the tokens the state holds: prompt + generated);
//      a decode step (count_inputs) also counts its input, the token sampled by the step before,
//      in `counts` (the tokens generated for this request);
//   2. processed p = l + logit_bias; repetition (HF): p = p > 0 ? p / r : p * r where seen;
//      OpenAI penalties: p -= frequency * counts + presence * (counts > 0); masked-out ids -> -inf;
//   3. the token is sampled from p (greedy, or temperature / top_k / min_p / top_p as before);
//   4. logprobs (when settings.logprobs >= 0) come from the RAW row l: log_softmax(l) of the chosen
//      token and the top N of log_softmax(l) (OpenAI and vLLM's default report the model's own
//      distribution, before temperature, penalties, bias and masks).
#pragma once
#include <cstdint>

namespace frost::kernels {

constexpr int kMaxLogitBias = 300;    // OpenAI's limit on logit_bias entries
constexpr int kMaxTopLogprobs = 20;   // OpenAI's limit on top_logprobs

// All-zero bytes = every feature off (a freshly reset session samples as before).
struct SamplerSettings {
    float presence_penalty;    // 0 = off
    float frequency_penalty;   // 0 = off
    float repetition_penalty;  // <= 0 or 1 = off
    float min_p;               // keep p >= min_p * p_max (random sampling only); 0 = off
    int32_t n_bias;            // used entries of bias_ids / bias_values (distinct ids)
    int32_t mask_on;           // 1: token_mask applies (bit i of word i/32 set = token i allowed)
    int32_t logprobs;          // 0 = off; else 1 + N: the chosen token's logprob and the top N
    int32_t reserved;
    int32_t bias_ids[kMaxLogitBias];
    float bias_values[kMaxLogitBias];
};

// What one step's sampler wrote (device), read back with the token.
struct SampleRecord {
    int32_t token;
    float logprob;             // raw log_softmax of `token` (when logprobs were on)
    int32_t n_top;             // entries of top_* (N)
    int32_t reserved;
    int32_t top_ids[kMaxTopLogprobs];     // by (logprob desc, id asc)
    float top_logprobs[kMaxTopLogprobs];
};

inline int32_t mask_words(int32_t vocab) { return (vocab + 31) / 32; }

}  // namespace frost::kernels
