// Adapters from the serve layer's narrow interfaces to the real runtime: ModelEngine drives a
// frost::model::Engine (one session per slot) and its CapsuleManager; ModelText renders chats
// with frost::text's Qwen templates, tokenises with the checkpoint's tokenizer and parses tool
// calls. Built by `frost serve`; tests use a fake instead (tests/serve/fake_backend.h).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/capsule.h"
#include "model/engine.h"
#include "serve/engine_iface.h"
#include "serve/token_cache.h"
#include "text/grammar/token_mask.h"
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
    bool memory(EngineMemory* out) const override;
    frost_status reset(int slot) override;
    frost_status set_sampling(int slot, const Sampling& s) override;
    frost_status prefill(int slot, const int32_t* ids, size_t n, int32_t* next) override;
    frost_status decode(int slot, int32_t* next) override;
    frost_status set_token_mask(int slot, const uint32_t* bits, size_t words) override;
    frost_status last_logprobs(int slot, TokenLogprobs* out) override;
    frost_status prefill_scored(int slot, const int32_t* ids, size_t n, int top_n, int32_t* next,
                                std::vector<TokenLogprobs>* out) override;
    // One batched engine step (Engine::decode_batch: members whose sampler processes, masks or
    // records logprobs step alone there).
    frost_status decode_batch(const int* slots, int n, int32_t* next) override;
    size_t slice_rows() const override { return size_t(engine_.slice_rows()); }
    int layers() const override { return engine_.config().num_layers; }
    frost_status prefill_slices_begin(int slot, const int32_t* ids, size_t n) override {
        return engine_.prefill_slices_begin(slot, ids, n);
    }
    frost_status prefill_slices_run(int slot, int layers, bool* done, int32_t* next) override {
        return engine_.prefill_slices_run(slot, layers, done, next);
    }

    bool capsules_supported() const override { return capsules_ != nullptr; }
    bool snapshot_possible(size_t from, size_t to) const override;
    size_t snapshot_point(size_t to) const override;
    uint64_t capsule_bytes_at(size_t tokens) const override;
    frost_status snapshot(int slot, Tier tier, uint64_t* handle, uint64_t* bytes) override;
    frost_status prefill_snapshot(int slot, const int32_t* ids, size_t n, Tier tier, int32_t* next, uint64_t* handle,
                                  uint64_t* bytes, std::string* refusal) override;
    frost_status restore(uint64_t handle, int slot, size_t* at) override;
    size_t exact_cut_grid() const override;
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
};

class ModelText : public TextIface {
public:
    // Loads tokenizer.json from `tokenizer_dir` and the chat template from its
    // tokenizer_config.json ("chat_template") or chat_template.jinja; eos ids come from the model.
    static frost_status load(const std::string& tokenizer_dir, const std::vector<int32_t>& eos_ids,
                             std::unique_ptr<ModelText>* out);

    frost_status render_chat(const ChatRender& r, std::string* out) const override;
    std::vector<int32_t> encode(std::string_view text) const override;
    bool encode_at_most(std::string_view text, size_t max_ids, std::vector<int32_t>* ids) const override;
    bool split_safe(std::string_view left, std::string_view right) const override;
    std::unique_ptr<Detokenizer> detokenizer() const override;
    bool is_end_token(int32_t id) const override;
    ParsedOutput parse_output(const std::string& text, const nlohmann::json& tools) const override;
    std::string tool_call_marker() const override;
    std::string tool_call_prefix(const std::string& name) const override;
    // Built once, on the first constrained request (~0.1-0.3 s for a 150k-250k vocabulary).
    std::shared_ptr<const text::grammar::TokenMasker> token_masker(int vocab_size) const override;
    // Non-empty when no template was found and the built-in one is used (printed at start).
    const std::string& template_note() const { return template_note_; }

    const text::Tokenizer& tokenizer() const { return *tok_; }

private:
    std::unique_ptr<text::Tokenizer> tok_;
    std::vector<SplitToken> split_tokens_;  // the tokenizer's added tokens, for split_safe()
    text::ChatTemplateKind kind_ = text::ChatTemplateKind::kQwen3;
    std::string template_note_;
    std::vector<int32_t> end_ids_;
    mutable std::mutex masker_mu_;
    mutable std::shared_ptr<const text::grammar::TokenMasker> masker_;
};

}  // namespace frost::serve
