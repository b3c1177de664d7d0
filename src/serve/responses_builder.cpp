// ResponsesBuilder (the Responses API's bodies and streaming events) and ResponseStore (stored
// responses for previous_response_id, retrieve, delete, input_items); see responses_api.h.
#include "serve/responses_api.h"

#include <chrono>

#include "serve/ids.h"
#include "serve/sse_text.h"

namespace frost::serve {

using nlohmann::json;

void ResponseStore::put(const std::string& id, Entry e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!map_.count(id)) order_.push_back(id);
    map_[id] = std::move(e);
    while (map_.size() > cap_ && !order_.empty()) {
        map_.erase(order_.front());
        order_.pop_front();
    }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id, const std::string& owner) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end() || it->second.owner != owner) return std::nullopt;
    return it->second;
}

bool ResponseStore::remove(const std::string& id, const std::string& owner) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end() || it->second.owner != owner) return false;
    map_.erase(it);
    for (auto o = order_.begin(); o != order_.end(); ++o)
        if (*o == id) {
            order_.erase(o);
            break;
        }
    return true;
}

json input_items_of(const json& input) {
    json items = json::array();
    auto text_part = [](const json& t) { return json{{"type", "input_text"}, {"text", t}}; };
    if (input.is_string()) {
        items.push_back(json{{"type", "message"}, {"role", "user"}, {"content", json::array({text_part(input)})}});
    } else if (input.is_array()) {
        for (const auto& it : input) {
            json item = it;
            if (!item.contains("type")) item["type"] = "message";
            if (item["type"] == "message") {
                if (item.contains("content") && item["content"].is_string())
                    item["content"] = json::array({text_part(item["content"])});
                if (!item.contains("status")) item["status"] = "completed";
            }
            items.push_back(std::move(item));
        }
    }
    for (auto& item : items)
        if (!item.contains("id") || !item["id"].is_string()) item["id"] = new_id("item", '_');
    return items;
}

std::shared_ptr<ResponseStore> make_response_store(size_t cap) { return std::make_shared<ResponseStore>(cap); }

ResponsesBuilder::ResponsesBuilder(std::string id, std::string model, json echo, size_t prompt_tokens,
                                   std::shared_ptr<ResponseStore> store, std::string owner, json conversation)
    : TurnBuilder(prompt_tokens), id_(std::move(id)), model_(std::move(model)), echo_(std::move(echo)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      store_(std::move(store)), owner_(std::move(owner)),
      conversation_(std::move(conversation)), msg_id_(new_id("msg", '_')), rs_id_(new_id("rs", '_')) {}

std::string ResponsesBuilder::ev(const char* type, json data) {
    data["type"] = type;
    data["sequence_number"] = seq_++;
    return sse_event(type, data);
}

json ResponsesBuilder::message_item(const char* status) const {
    return json{{"type", "message"},
                {"id", msg_id_},
                {"status", status},
                {"role", "assistant"},
                {"content", json::array({json{{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}}})}};
}

json ResponsesBuilder::reasoning_item() const {
    return json{{"type", "reasoning"},
                {"id", rs_id_},
                {"summary", json::array()},
                {"content", json::array({json{{"type", "reasoning_text"}, {"text", reasoning_}}})}};
}

json ResponsesBuilder::response_json(const char* status) const {
    json r = echo_;
    r["id"] = id_;
    r["object"] = "response";
    r["created_at"] = created_;
    r["status"] = status;
    r["model"] = model_;
    r["error"] = nullptr;
    r["incomplete_details"] = finish_reason_ == "length" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
    json out = json::array();
    if (std::string(status) != "in_progress") {
        if (!reasoning_.empty()) out.push_back(reasoning_item());
        if (!text_.empty() || calls_.empty()) out.push_back(message_item("completed"));
        for (const auto& c : calls_) out.push_back(c);
    }
    r["output"] = out;
    r["usage"] = json{{"input_tokens", prompt_tokens_},
                      {"input_tokens_details", {{"cached_tokens", cached_tokens_}}},
                      {"output_tokens", output_tokens_},
                      {"output_tokens_details", {{"reasoning_tokens", 0}}},
                      {"total_tokens", prompt_tokens_ + output_tokens_}};
    if (std::string(status) == "in_progress") r["usage"] = nullptr;
    return r;
}

void ResponsesBuilder::take_calls(const json& calls) {
    for (const auto& c : calls) {
        const json fn = c.value("function", json::object());
        const std::string call_id = c.contains("id") ? c["id"].get<std::string>() : new_id("call");
        calls_.push_back(json{{"type", "function_call"},
                              {"id", new_id("fc", '_')},
                              {"call_id", call_id},
                              {"name", fn.value("name", "")},
                              {"arguments", fn.value("arguments", "{}")},
                              {"status", "completed"}});
    }
}

std::string ResponsesBuilder::close_item() {
    std::string out;
    const int idx = opened_ - 1;
    if (open_ == Open::Reasoning) {
        out += ev("response.reasoning_text.done",
                  {{"item_id", rs_id_}, {"output_index", idx}, {"content_index", 0}, {"text", reasoning_}});
        out += ev("response.output_item.done", {{"output_index", idx}, {"item", reasoning_item()}});
    } else if (open_ == Open::Message) {
        const json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
        out += ev("response.output_text.done", {{"item_id", msg_id_},
                                                {"output_index", idx},
                                                {"content_index", 0},
                                                {"text", text_},
                                                {"logprobs", json::array()}});
        out += ev("response.content_part.done", {{"item_id", msg_id_}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
        out += ev("response.output_item.done", {{"output_index", idx}, {"item", message_item("completed")}});
    }
    open_ = Open::None;
    return out;
}

std::string ResponsesBuilder::open_item(Open kind) {
    if (open_ == kind) return "";
    std::string out = close_item();
    open_ = kind;
    const int idx = opened_++;
    if (kind == Open::Reasoning) {
        json item = reasoning_item();
        item["content"] = json::array();
        out += ev("response.output_item.added", {{"output_index", idx}, {"item", item}});
    } else {
        json item = message_item("in_progress");
        item["content"] = json::array();
        out += ev("response.output_item.added", {{"output_index", idx}, {"item", item}});
        out += ev("response.content_part.added",
                  {{"item_id", msg_id_},
                   {"output_index", idx},
                   {"content_index", 0},
                   {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
    }
    return out;
}

std::string ResponsesBuilder::sse_open() {
    const json r = response_json("in_progress");
    std::string out = ev("response.created", {{"response", r}});  // two statements: numbered in order
    return out + ev("response.in_progress", {{"response", r}});
}

std::string ResponsesBuilder::sse(const StreamEvent& e) {
    const size_t calls_before = calls_.size();
    if (!record(e)) return "";
    std::string out;
    switch (e.kind) {
        case StreamEvent::Kind::Error:
            return ev("error", {{"code", e.error.code.empty() ? json(nullptr) : json(e.error.code)},
                                {"message", e.error.message},
                                {"param", e.error.param.empty() ? json(nullptr) : json(e.error.param)}});
        case StreamEvent::Kind::Delta:
            if (!e.reasoning.empty()) {
                out += open_item(Open::Reasoning);
                out += ev("response.reasoning_text.delta",
                          {{"item_id", rs_id_}, {"output_index", opened_ - 1}, {"content_index", 0}, {"delta", e.reasoning}});
            }
            if (!e.text.empty()) {
                out += open_item(Open::Message);
                out += ev("response.output_text.delta", {{"item_id", msg_id_},
                                                         {"output_index", opened_ - 1},
                                                         {"content_index", 0},
                                                         {"delta", e.text},
                                                         {"logprobs", json::array()}});
            }
            return out;
        case StreamEvent::Kind::ToolCalls: {
            out += close_item();
            for (size_t k = calls_before; k < calls_.size(); ++k) {
                const json& c = calls_[k];
                const int idx = opened_++;
                json added = c;
                added["arguments"] = "";
                added["status"] = "in_progress";
                out += ev("response.output_item.added", {{"output_index", idx}, {"item", added}});
                out += ev("response.function_call_arguments.delta",
                          {{"item_id", c["id"]}, {"output_index", idx}, {"delta", c["arguments"]}});
                out += ev("response.function_call_arguments.done",
                          {{"item_id", c["id"]}, {"output_index", idx}, {"arguments", c["arguments"]}, {"name", c["name"]}});
                out += ev("response.output_item.done", {{"output_index", idx}, {"item", c}});
            }
            return out;
        }
        case StreamEvent::Kind::Finish:
            // Nothing at all was said: the response still has its (empty) message item.
            if (text_.empty() && calls_.empty()) out += open_item(Open::Message);
            out += close_item();
            store();
            if (finish_reason_ == "length") return out + ev("response.incomplete", {{"response", response_json("incomplete")}});
            return out + ev("response.completed", {{"response", response_json("completed")}});
    }
    return out;
}

void ResponsesBuilder::add(const StreamEvent& e) {
    if (record(e) && e.kind == StreamEvent::Kind::Finish) store();
}

void ResponsesBuilder::store() {
    if (!store_) return;
    // The conversation the next turn continues: this one's messages + the output as the
    // assistant turn (tool calls under their call ids, which function_call_output items name).
    json conv = conversation_;
    json a = {{"role", "assistant"}, {"content", text_}};
    if (!calls_.empty()) {
        json tc = json::array();
        for (const auto& c : calls_)
            tc.push_back(json{{"id", c["call_id"]}, {"type", "function"}, {"function", {{"name", c["name"]}, {"arguments", c["arguments"]}}}});
        a["tool_calls"] = tc;
    }
    conv.push_back(a);
    store_->put(id_, ResponseStore::Entry{owner_, conv, response_json(finish_reason_ == "length" ? "incomplete" : "completed"),
                                          input_items_});
}

std::string ResponsesBuilder::final_json() const {
    return json_text(response_json(finish_reason_ == "length" ? "incomplete" : "completed"));
}

}  // namespace frost::serve
