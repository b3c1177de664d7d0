// libFuzzer target for the OpenAI request validator (issue 13 C, reliability T10/T11): any byte
// string is a request body for /v1/chat/completions or /v1/completions (the first byte picks).
// Validation must return a status; an accepted body must hold only values the engine accepts
// (finite sampling values that stay positive as float, n within its cap, ids in the vocabulary),
// and the context check must then give a finite budget.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "serve/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    using namespace frost::serve;
    const Endpoint ep = (data[0] & 1) ? Endpoint::Chat : Endpoint::Completion;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    RequestLimits lim;
    lim.vocab_size = 1000;
    GenRequest r;
    ApiError err;
    if (!parse_gen_request(ep, body, lim, &r, &err)) {
        if (err.status < 400 || err.status > 499) std::abort();
        return 0;
    }
    const float top_p = float(r.top_p), temp = float(r.temperature);
    if (!(top_p > 0.0f && top_p <= 1.0f) || !std::isfinite(temp) || temp < 0.0f || temp > 2.0f) std::abort();
    if (r.n < 1 || r.n > lim.n_cap || r.top_k < 0) std::abort();
    for (int32_t id : r.prompt_ids)
        if (id < 0 || id >= lim.vocab_size) std::abort();
    if (r.stop.size() > lim.max_stop) std::abort();
    int64_t max_new = -1;
    if (check_context(r, 1 + size % 100, 128, lim, &max_new, &err) && (max_new < 1 || max_new > 128)) std::abort();
    return 0;
}
