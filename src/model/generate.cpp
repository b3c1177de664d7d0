// Host loop of a generation request (see generate.h).
#include "model/generate.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "exec/error.h"

namespace frost::model {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

}  // namespace

std::string logits_fingerprint(const std::vector<float>& logits) {
    uint64_t h = kFnvOffset;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(logits.data());
    for (size_t i = 0; i < logits.size() * sizeof(float); ++i) h = (h ^ p[i]) * kFnvPrime;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

bool parse_id_list(const std::string& csv, std::vector<int32_t>* out) {
    out->clear();
    size_t i = 0;
    while (i < csv.size()) {
        while (i < csv.size() && (csv[i] == ' ' || csv[i] == '\n' || csv[i] == '\t' || csv[i] == '\r')) ++i;
        if (i >= csv.size()) break;
        size_t j = i;
        while (j < csv.size() && csv[j] >= '0' && csv[j] <= '9') ++j;
        if (j == i || j - i > 9) return false;
        out->push_back(static_cast<int32_t>(std::stol(csv.substr(i, j - i))));
        while (j < csv.size() && (csv[j] == ' ' || csv[j] == '\n' || csv[j] == '\t' || csv[j] == '\r')) ++j;
        if (j < csv.size() && csv[j] != ',') return false;
        i = j + 1;
    }
    return !out->empty();
}

frost_status decode_rest(Engine& e, int session, const GenerateRequest& req, int32_t first, GenerateResult* out,
                         int* steps) {
    const auto& eos = e.config().eos_token_ids;
    auto is_eos = [&](int32_t t) {
        for (int32_t x : eos)
            if (x == t) return true;
        return false;
    };
    int32_t next = first;
    out->ids.push_back(next);
    const auto t1 = Clock::now();
    int n = 0;
    while (static_cast<int>(out->ids.size()) < req.max_new_tokens && !(req.stop_at_eos && is_eos(next)) &&
           e.position(session) < e.options().max_seq_len) {
        FROST_TRY(e.decode(session, &next));
        out->ids.push_back(next);
        ++n;
    }
    out->ms_per_token = n ? ms_since(t1) / n : 0.0;
    if (steps) *steps = n;
    return FROST_OK;
}

frost_status generate(Engine& e, int session, const GenerateRequest& req, GenerateResult* out) {
    if (req.prompt.empty()) return fail(FROST_ERR_INVALID_ARG, "generate: empty prompt");
    if (req.max_new_tokens < 1) return fail(FROST_ERR_INVALID_ARG, "generate: max_new_tokens must be >= 1");
    FROST_TRY(e.reset(session, req.sampling));
    out->ids.clear();
    const auto t0 = Clock::now();
    int32_t next = -1;
    FROST_TRY(e.prefill(session, req.prompt.data(), req.prompt.size(), &next));
    out->ttft_ms = ms_since(t0);
    FROST_TRY(decode_rest(e, session, req, next, out, nullptr));
    FROST_TRY(e.last_logits(session, &out->last_logits));
    out->fingerprint = logits_fingerprint(out->last_logits);
    return FROST_OK;
}

}  // namespace frost::model
