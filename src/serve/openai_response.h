// Builds OpenAI response bodies from the engine's StreamEvents: SSE chunks for stream=true
// (`data: {...}\n\n`, then `data: [DONE]\n\n`) or one JSON body once every choice finished.
// Usage carries prompt_tokens_details.cached_tokens; a `frost` object reports the plan.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/body_builder.h"
#include "serve/channel.h"
#include "serve/metrics.h"
#include "serve/openai_request.h"

namespace frost::serve {

class ResponseBuilder : public BodyBuilder {
public:
    ResponseBuilder(Endpoint endpoint, std::string id, std::string model, int64_t created, int n,
                    bool include_usage);

    // Streaming: the opening chunk (chat: the assistant role delta), then one call per event.
    std::string sse_open() override;
    std::string sse(const StreamEvent& e) override;
    // Non-streaming: feed every event, then final_json().
    void add(const StreamEvent& e) override;
    std::string final_json() const override;

    bool done() const override { return finished_ == n_ || failed_; }
    bool failed() const override { return failed_; }
    const ApiError& error() const override { return error_; }

    static std::string sse_error(const ApiError& e);  // `data: {"error":...}\n\n`

    // Choice 0's phase timings are observed here once complete (may be null).
    void set_metrics(Metrics* m) { metrics_ = m; }
    // The seed a sampled request ran with (given or drawn): reported as frost.seed.
    void set_seed(uint64_t seed) { seed_ = seed; has_seed_ = true; }
    // Batched prompts of n choices each: usage.prompt_tokens sums every prompt's count.
    void set_batch(int n_per_prompt) { per_prompt_ = n_per_prompt; }
    // The complete timings (engine part + this thread's pickups); valid once choice 0 finished.
    const PhaseTimes& timings() const { return timings_; }
    bool has_timings() const { return has_timings_; }

private:
    nlohmann::json frost_json() const;
    nlohmann::json chunk_base() const;
    nlohmann::json usage_json() const;
    void account(const StreamEvent& e);
    // A choice's logprob entries as the endpoint spells them (null when there are none).
    nlohmann::json logprobs_json(const nlohmann::json& entries, size_t* offset) const;

    Endpoint endpoint_;
    std::string id_, model_;
    int64_t created_;
    int n_;
    bool include_usage_;
    int finished_ = 0;
    uint64_t seed_ = 0;
    int per_prompt_ = 0;
    size_t batch_prompt_tokens_ = 0;
    bool has_seed_ = false;
    bool failed_ = false;
    ApiError error_;
    std::vector<std::string> text_;               // per choice (non-stream)
    std::vector<std::string> reasoning_;          // per choice (non-stream)
    std::vector<nlohmann::json> tool_calls_;      // per choice
    std::vector<std::string> finish_;             // per choice
    std::vector<nlohmann::json> logprobs_;        // per choice: chat logprob entries (non-stream)
    std::vector<size_t> offsets_;                 // per choice: completions text_offset (stream)
    ChoiceUsage first_usage_;
    size_t completion_tokens_ = 0;
    Metrics* metrics_ = nullptr;
    SteadyTime first_pickup_{};  // this (I/O) thread first saw an event of choice 0
    bool has_timings_ = false;
    PhaseTimes timings_;
};

}  // namespace frost::serve
