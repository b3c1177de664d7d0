// The OpenAI Responses API (POST /v1/responses, GET|DELETE /v1/responses/{id}) on the chat path:
// responses_to_chat (a pure function) turns `input` items, `instructions` and `tools` into a
// chat-completions body for the one chat handler; ResponsesBuilder turns the job's events into
// a response object or the Responses streaming events. store=true keeps the conversation (the
// chat messages without instructions, plus the output) in a bounded ResponseStore, so a request
// naming previous_response_id is that conversation + its new input: a chat history whose prefix
// the previous turn already froze as a capsule (the chat path's automatic capsule at the history
// boundary), so it is restored, not recomputed.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/turn_builder.h"

namespace frost::serve {

class ResponseStore {
public:
    explicit ResponseStore(size_t cap) : cap_(cap) {}
    struct Entry {
        std::string owner;
        nlohmann::json conversation;  // chat messages (no instructions), the output included
        nlohmann::json response;      // the response object as returned
        nlohmann::json input_items = nlohmann::json::array();  // this request's input, as items with ids
    };
    void put(const std::string& id, Entry e);  // drops the oldest beyond cap
    // Another key's id reads like a missing one.
    std::optional<Entry> get(const std::string& id, const std::string& owner) const;
    bool remove(const std::string& id, const std::string& owner);

private:
    size_t cap_;
    mutable std::mutex mu_;
    std::map<std::string, Entry> map_;
    std::deque<std::string> order_;
};

std::shared_ptr<ResponseStore> make_response_store(size_t cap);

// A Responses request body + the previous response's conversation (empty array when none) ->
// a chat-completions body and *conversation (prior + this input as chat messages). False +
// *err naming the Responses field on a bad or unknown one.
// The request's `input` (already validated by responses_to_chat) as the items
// GET /v1/responses/{id}/input_items lists: a string is one user message; every item gets an id.
nlohmann::json input_items_of(const nlohmann::json& input);

bool responses_to_chat(const nlohmann::json& body, const nlohmann::json& prior, nlohmann::json* chat,
                       nlohmann::json* conversation, ApiError* err);

class ResponsesBuilder : public TurnBuilder {
public:
    // `echo`: request fields the response object repeats (instructions, tools, ...). With a
    // store, the finished response and its conversation are kept under `id` for `owner`.
    ResponsesBuilder(std::string id, std::string model, nlohmann::json echo, size_t prompt_tokens,
                     std::shared_ptr<ResponseStore> store, std::string owner, nlohmann::json conversation);
    // GET /v1/responses/{id}/input_items lists these (stored with the response).
    void set_input_items(nlohmann::json items) { input_items_ = std::move(items); }
    std::string sse_open() override;
    std::string sse(const StreamEvent& e) override;
    void add(const StreamEvent& e) override;
    std::string final_json() const override;

private:
    enum class Open { None, Reasoning, Message };
    std::string ev(const char* type, nlohmann::json data);
    std::string open_item(Open kind);
    std::string close_item();
    nlohmann::json response_json(const char* status) const;
    nlohmann::json message_item(const char* status) const;
    nlohmann::json reasoning_item() const;
    void take_calls(const nlohmann::json& calls) override;
    void store();  // after the Finish: keeps the response and its conversation (with a store)

    std::string id_, model_;
    nlohmann::json echo_;
    int64_t created_;
    std::shared_ptr<ResponseStore> store_;
    std::string owner_;
    nlohmann::json conversation_;
    nlohmann::json input_items_ = nlohmann::json::array();
    std::string msg_id_, rs_id_;
    nlohmann::json calls_ = nlohmann::json::array();  // function_call output items
    nlohmann::json output_ = nlohmann::json::array();  // closed items, in order (streaming)
    Open open_ = Open::None;
    int seq_ = 0;
    int opened_ = 0;  // output items opened so far (the next output_index)
};

}  // namespace frost::serve
