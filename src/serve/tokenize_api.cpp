// POST /tokenize and POST /detokenize in vLLM's shapes (see api.h). A messages body is rendered
// by the same chat template call as a chat request, so its ids are what generation would see.
#include <cmath>

#include "exec/error.h"
#include "serve/api.h"
#include "serve/json_guard.h"
#include "serve/request_fields.h"
#include "serve/sse_text.h"

namespace frost::serve {

using nlohmann::json;

namespace {
HttpOut json_ok(const json& j) {
    HttpOut out;
    out.body = json_text(j);
    return out;
}

bool optional_bool(const json& body, const char* key, bool dflt, bool* out, ApiError* err) {
    *out = dflt;
    if (!body.contains(key) || body[key].is_null()) return true;
    if (!body[key].is_boolean()) {
        *err = invalid_field(key, "must be a boolean");
        return false;
    }
    *out = body[key].get<bool>();
    return true;
}
}  // namespace

HttpOut Api::tokenize(const HttpIn& in) {
    json body;
    ApiError err;
    if (!parse_json_body(in.body, cfg_.limits.max_depth, &body, &err)) return error_reply(err);
    if (!body.is_object()) return error_reply(invalid_field("", "the body must be a JSON object"));
    if (!only_known_fields(body, {"model", "prompt", "messages", "tools", "add_special_tokens", "add_generation_prompt",
                           "continue_final_message", "chat_template_kwargs", "enable_thinking"},
                    &err))
        return error_reply(err);
    if (body.contains("model") && !body["model"].is_null() &&
        (!body["model"].is_string() || body["model"].get<std::string>() != cfg_.model_name))
        return error_reply(make_error(404, "invalid_request_error", "model_not_found",
                                      "model: not served here (serving '" + cfg_.model_name + "')"));
    const bool has_prompt = body.contains("prompt"), has_messages = body.contains("messages");
    if (has_prompt == has_messages)
        return error_reply(invalid_field(has_prompt ? "messages" : "prompt", "give exactly one of prompt or messages"));
    // Qwen tokenizers add no BOS/EOS: add_special_tokens is validated and changes nothing.
    bool add_special = true;
    if (!optional_bool(body, "add_special_tokens", has_prompt, &add_special, &err)) return error_reply(err);
    std::string text;
    if (has_prompt) {
        for (const char* k : {"tools", "add_generation_prompt", "continue_final_message", "chat_template_kwargs",
                              "enable_thinking"})
            if (body.contains(k)) return error_reply(invalid_field(k, "only with messages"));
        if (!body["prompt"].is_string()) return error_reply(invalid_field("prompt", "must be a string"));
        text = body["prompt"].get<std::string>();
    } else {
        // The chat validator checks messages / tools / the template switches exactly as a chat
        // request would (errors name the same fields).
        json chat = {{"messages", body["messages"]}, {"max_tokens", 1}};
        for (const char* k : {"tools", "add_generation_prompt", "continue_final_message", "chat_template_kwargs",
                              "enable_thinking"})
            if (body.contains(k)) chat[k] = body[k];
        GenRequest req;
        if (!parse_gen_request(Endpoint::Chat, chat.dump(), cfg_.limits, &req, &err)) return error_reply(err);
        ChatRender r;
        r.messages = req.messages;
        r.tools = req.tools;
        r.enable_thinking = req.enable_thinking;
        r.add_generation_prompt = req.add_generation_prompt && !req.continue_final_message;
        if (text_.render_chat(r, &text) != FROST_OK)
            return error_reply(invalid_field("messages", "cannot render the chat template: " + last_error()));
    }
    const std::vector<int32_t> ids = text_.encode(text);
    return json_ok(json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.max_seq_len()}});
}

HttpOut Api::detokenize(const HttpIn& in) {
    json body;
    ApiError err;
    if (!parse_json_body(in.body, cfg_.limits.max_depth, &body, &err)) return error_reply(err);
    if (!body.is_object()) return error_reply(invalid_field("", "the body must be a JSON object"));
    if (!only_known_fields(body, {"model", "tokens"}, &err)) return error_reply(err);
    if (!body.contains("tokens") || !body["tokens"].is_array())
        return error_reply(invalid_field("tokens", "required, an array of token ids"));
    const int vocab = engine_.vocab_size();
    auto detok = text_.detokenizer();
    std::string text;
    const json& toks = body["tokens"];
    for (size_t i = 0; i < toks.size(); ++i) {
        const json& t = toks[i];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || (vocab > 0 && t.get<int64_t>() >= vocab))
            return error_reply(invalid_field("tokens[" + std::to_string(i) + "]",
                                             "not a token id in [0, " + std::to_string(vocab) + ")"));
        text += detok->push(int32_t(t.get<int64_t>()));
    }
    text += detok->flush();
    return json_ok(json{{"prompt", text}});
}

}  // namespace frost::serve
