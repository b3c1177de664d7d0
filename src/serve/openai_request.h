// OpenAI-compatible request validation as pure functions: a body in, a GenRequest or an ApiError
// naming the field out (T10/T11). Nothing here touches the engine; the prompt-length check that
// needs token counts is the separate check_context() (T09).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/constraint.h"

namespace frost::serve {

enum class Endpoint { Chat, Completion };

struct RequestLimits {
    int n_cap = 4;                  // max choices per request (served by fork)
    int vocab_size = 0;             // 0 = unknown (then token-id checks only test >= 0)
    size_t max_depth = 32;          // JSON nesting bound
    size_t max_arguments_depth = 64;  // inside a tool call's arguments string (the template's bound)
    size_t max_messages = 4096;
    size_t max_stop = 4;            // stop strings per request (OpenAI's limit)
    size_t max_stop_bytes = 256;    // per stop string
    size_t max_tools = 128;
    size_t max_batch_prompts = 16;  // completions: prompts in one batched request
    int64_t max_tokens_cap = 1 << 20;  // any larger max_tokens is nonsense before the ctx check
};

// One prompt of a batched completions request.
struct BatchPrompt {
    std::string text;
    std::vector<int32_t> ids;
    bool is_ids = false;
};

enum class ToolChoice { Auto, None, Required, Named };

struct GenRequest {
    Endpoint endpoint = Endpoint::Chat;
    std::string model;
    nlohmann::json messages = nlohmann::json::array();  // chat: validated OpenAI messages
    std::string prompt_text;                            // completions: text prompt
    std::vector<int32_t> prompt_ids;                    // completions: token-id prompt
    bool prompt_is_ids = false;
    // Completions with an array of prompts (> 1): each is served with its n choices, choice
    // index = prompt * n + i (as OpenAI numbers them). prompt_* hold batch[0].
    std::vector<BatchPrompt> batch;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    std::optional<int64_t> max_tokens;
    double temperature = 1.0;
    double top_p = 1.0;
    int top_k = 0;  // 0 = disabled (-1 accepted as disabled too, as vLLM does)
    uint64_t seed = 0;
    bool seed_set = false;
    // The device sampler's processing (model/sampling.h): penalties, min_p, logit_bias.
    double presence_penalty = 0;
    double frequency_penalty = 0;
    double repetition_penalty = 1;
    double min_p = 0;
    std::vector<std::pair<int32_t, float>> logit_bias;
    // Logprobs: -1 none; else the top alternatives per token (chat top_logprobs 0..20 with
    // logprobs true, completions logprobs 0..5), raw model logprobs (kernels/params/sample.h).
    int logprobs = -1;
    bool echo = false;  // completions: the prompt comes back before the output (with its logprobs)
    int n = 1;
    std::vector<std::string> stop;
    nlohmann::json tools = nlohmann::json::array();
    ToolChoice tool_choice = ToolChoice::Auto;
    std::string tool_choice_name;
    bool parallel_tool_calls = true;  // false: at most one call (generation stops after it)
    std::optional<bool> enable_thinking;  // top-level or chat_template_kwargs.enable_thinking
    // Assistant prefill (vLLM's fields): add_generation_prompt false renders no new assistant
    // turn; continue_final_message leaves the final assistant message open, so the output
    // continues its text.
    bool add_generation_prompt = true;
    bool continue_final_message = false;
    // Frost extensions.
    std::string session_id;
    std::string capsule_id;
    bool pin_prefix = false;
    // Constrained decoding (constraint.h): what the output must match, its source text and the
    // request field it came from (named in a 400 when it does not compile).
    ConstraintKind constraint_kind = ConstraintKind::None;
    std::string constraint_source;
    std::string constraint_field;
};

// Validates and parses a body for `endpoint`. False + *err (status 400/413...) on the first bad
// field found.
bool parse_gen_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits,
                       GenRequest* out, ApiError* err);

// After tokenisation: the prompt must leave room for at least one token, and max_tokens must fit.
// Writes the resolved max new tokens: max_tokens, or when unset all the room the context leaves
// (as OpenAI and vLLM do; generation still ends at the model's end token or a stop). 400 context_length_exceeded names both counts.
bool check_context(const GenRequest& req, size_t prompt_tokens, size_t context_len,
                   const RequestLimits& limits, int64_t* max_new, ApiError* err);

}  // namespace frost::serve
