// One generation request on a live engine session: prefill the prompt, decode up to N tokens
// (stopping at an EOS id), time TTFT and per-token latency, fingerprint the last logits (style
// habit 16). Shared by `frost generate`, `frost demo` and the bench.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/engine.h"

namespace frost::model {

struct GenerateRequest {
    std::vector<int32_t> prompt;
    int max_new_tokens = 32;
    SamplingConfig sampling;
    bool stop_at_eos = true;
};

struct GenerateResult {
    std::vector<int32_t> ids;     // generated ids (EOS included when hit)
    double ttft_ms = 0;           // prefill + first sampled token
    double ms_per_token = 0;      // mean decode step after the first token
    std::string fingerprint;      // 16 hex digits: FNV-1a 64 of the last logits' bytes
    std::vector<float> last_logits;
};

// Resets `session`, then runs the request.
frost_status generate(Engine& e, int session, const GenerateRequest& req, GenerateResult* out);

// After the first sampled token `first` (already the result of a prefill or restore): appends it,
// then decodes until max_new_tokens, EOS (if req.stop_at_eos) or max_seq_len; sets ids and
// ms_per_token, returns the number of decode steps in *steps. Shared by every generate path.
frost_status decode_rest(Engine& e, int session, const GenerateRequest& req, int32_t first, GenerateResult* out,
                         int* steps);

// FNV-1a 64 over the float bytes, as 16 lowercase hex digits.
std::string logits_fingerprint(const std::vector<float>& logits);

// Parses "1,2,3" (whitespace allowed) into ids; false on a malformed list.
bool parse_id_list(const std::string& csv, std::vector<int32_t>* out);

}  // namespace frost::model
