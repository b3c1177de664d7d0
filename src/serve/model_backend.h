// Adapters from the serve layer's narrow interfaces to the real runtime: ModelEngine drives a
// frost::model::Engine (one session per slot) and its CapsuleManager; ModelText renders chats
// with frost::text's Qwen templates, tokenises with the checkpoint's tokenizer and parses tool
// calls. Built by `frost serve`; tests use a fake instead (tests/serve/fake_backend.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/capsule.h"
#include "model/engine.h"
#include "serve/engine_iface.h"
#include "serve/host_sampler.h"
#include "serve/token_cache.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace frost::serve {

class ModelEngine : public EngineIface {
public:
    // `capsules` may be null (then the server plans with live state only).
    ModelEngine(model::Engine& engine, model::CapsuleManager* capsules);

    int slots() const override { return engine_.sessions(); }
    size_t max_seq_len() const override { return size_t(engine_.options().max_seq_len); }
    int vocab_size() const override { return engine_.config().vocab_size; }
    frost_status reset(int slot) override;
    frost_status set_sampling(int slot, const Sampling& s) override;
    frost_status prefill(int slot, const int32_t* ids, size_t n, int32_t* next) override;
    frost_status decode(int slot, int32_t* next) override;
    // One batched engine step for the slots sampled on the device; slots with host-side
    // sampling (penalties, min_p, logit_bias: they read their step's logits row) decode alone.
    frost_status decode_batch(const int* slots, int n, int32_t* next) override;

    bool capsules_supported() const override { return capsules_ != nullptr; }
    bool snapshot_possible(size_t from, size_t to) const override;
    size_t snapshot_point(size_t to) const override;
    uint64_t capsule_bytes_at(size_t tokens) const override;
    frost_status snapshot(int slot, Tier tier, uint64_t* handle, uint64_t* bytes) override;
    frost_status prefill_snapshot(int slot, const int32_t* ids, size_t n, Tier tier, int32_t* next, uint64_t* handle,
                                  uint64_t* bytes) override;
    frost_status restore(uint64_t handle, int slot) override;
    bool fork_live_supported() const override { return true; }
    frost_status fork_live(int from, const std::vector<int>& to) override;
    frost_status move(uint64_t handle, Tier to) override;
    void drop(uint64_t handle) override;
    frost_status persist(uint64_t handle, const std::string& path) override;
    frost_status import(const std::string& path, uint64_t* handle, uint64_t* bytes,
                        std::vector<int32_t>* tokens) override;
    frost_status move_to_file(uint64_t* handle, const std::string& path) override;

private:
    model::Engine& engine_;
    model::CapsuleManager* capsules_;
    std::vector<model::SamplingConfig> sampling_;  // per slot, re-applied after reset
    // Requests with penalties / min_p / logit_bias sample on the host over the step's logits
    // (host_sampler.h): per slot, whether on, the sampler, and the token the last step chose
    // (committed to the sampler's counts when a decode step consumes it, so tokens chosen by
    // intermediate prefill calls never count).
    frost_status choose_on_host(int slot, int32_t* next);
    std::vector<char> host_on_;
    std::vector<HostSampler> host_;
    std::vector<int32_t> pending_;
};

class ModelText : public TextIface {
public:
    // Loads tokenizer.json from `tokenizer_dir` and the chat template from its
    // tokenizer_config.json ("chat_template") or chat_template.jinja; eos ids come from the model.
    static frost_status load(const std::string& tokenizer_dir, const std::vector<int32_t>& eos_ids,
                             std::unique_ptr<ModelText>* out);

    frost_status render_chat(const ChatRender& r, std::string* out) const override;
    std::vector<int32_t> encode(std::string_view text) const override;
    bool split_safe(std::string_view left, std::string_view right) const override;
    std::unique_ptr<Detokenizer> detokenizer() const override;
    bool is_end_token(int32_t id) const override;
    ParsedOutput parse_output(const std::string& text, const nlohmann::json& tools) const override;
    std::string tool_call_marker() const override;
    std::string tool_call_prefix(const std::string& name) const override;
    // Non-empty when no template was found and the built-in one is used (printed at start).
    const std::string& template_note() const { return template_note_; }

    const text::Tokenizer& tokenizer() const { return *tok_; }

private:
    std::unique_ptr<text::Tokenizer> tok_;
    std::vector<SplitToken> split_tokens_;  // the tokenizer's added tokens, for split_safe()
    text::ChatTemplateKind kind_ = text::ChatTemplateKind::kQwen3;
    std::string template_note_;
    std::vector<int32_t> end_ids_;
};

}  // namespace frost::serve
