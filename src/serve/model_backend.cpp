// ModelEngine / ModelText (see model_backend.h).
#include "serve/model_backend.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>

#include "exec/error.h"
#include "text/grammar/vocab.h"
#include "text/tool_calls.h"

namespace frost::serve {

namespace {

bool read_file(const std::string& path, std::string* out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
}

}  // namespace

ModelEngine::ModelEngine(model::Engine& engine, model::CapsuleManager* capsules)
    : engine_(engine), capsules_(capsules), sampling_(size_t(engine.sessions())) {}

bool ModelEngine::memory(EngineMemory* out) const {
    frost_ctx_stats st{};
    if (frost_ctx_get_stats(engine_.ctx(), &st) != FROST_OK) return false;
    *out = EngineMemory{};
    out->buffer_bytes[FROST_SPACE_DEVICE] = st.bytes_device;
    out->buffer_bytes[FROST_SPACE_HOST_PINNED] = st.bytes_host_pinned;
    out->buffer_bytes[FROST_SPACE_HOST] = st.bytes_host;
    out->live_buffers = st.live_buffers;
    out->live_graphs = st.live_graphs;
    // The cpu backend has no device of its own (UNSUPPORTED): its device space is in the buffers.
    out->has_device = frost_ctx_device_memory(engine_.ctx(), &out->device_used, &out->device_total) == FROST_OK;
    if (!out->has_device) frost_clear_error();
    return true;
}

frost_status ModelEngine::reset(int slot) { return engine_.reset(slot, sampling_[size_t(slot)]); }

// Every parameter (penalties, min_p, logit_bias, logprobs too) runs in the engine's device sampler.
frost_status ModelEngine::set_sampling(int slot, const Sampling& s) {
    // Kept only once the engine accepted it: reset() re-applies it, so a refused value must not
    // stay behind for the slot's next request (issue 13 B3).
    FROST_TRY(engine_.set_sampling(slot, s));
    sampling_[size_t(slot)] = s;
    return FROST_OK;
}

frost_status ModelEngine::prefill(int slot, const int32_t* ids, size_t n, int32_t* next) {
    return engine_.prefill(slot, ids, n, next);
}

frost_status ModelEngine::decode(int slot, int32_t* next) { return engine_.decode(slot, next); }

frost_status ModelEngine::last_logprobs(int slot, TokenLogprobs* out) {
    kernels::SampleRecord r{};
    FROST_TRY(engine_.last_sample(slot, &r));
    out->token = r.token;
    out->logprob = r.logprob;
    out->top.clear();
    for (int i = 0; i < r.n_top; ++i) out->top.emplace_back(r.top_ids[i], r.top_logprobs[i]);
    return FROST_OK;
}

frost_status ModelEngine::prefill_scored(int slot, const int32_t* ids, size_t n, int top_n, int32_t* next,
                                         std::vector<TokenLogprobs>* out) {
    std::vector<kernels::SampleRecord> recs;
    FROST_TRY(engine_.prompt_logprobs(slot, ids, n, top_n, &recs));
    out->clear();
    for (const auto& r : recs) {
        TokenLogprobs t;
        t.token = r.token;
        t.logprob = r.logprob;
        for (int i = 0; i < r.n_top; ++i) t.top.emplace_back(r.top_ids[i], r.top_logprobs[i]);
        out->push_back(std::move(t));
    }
    // The engine fed ids[0..n-1); the last one goes through prefill, which samples the continuation.
    return engine_.prefill(slot, ids + n - 1, 1, next);
}

frost_status ModelEngine::decode_batch(const int* slots, int n, int32_t* next) {
    return engine_.decode_batch(slots, n, next);
}

bool ModelEngine::snapshot_possible(size_t from, size_t to) const {
    const size_t aligned = to / size_t(model::kCapsuleAlignment) * size_t(model::kCapsuleAlignment);
    return capsules_ != nullptr && aligned > 0 && aligned >= from;
}

size_t ModelEngine::snapshot_point(size_t to) const {
    return capsules_ ? to / size_t(model::kCapsuleAlignment) * size_t(model::kCapsuleAlignment) : to;
}

uint64_t ModelEngine::capsule_bytes_at(size_t tokens) const {
    // Valid bytes of every state buffer at boundary `tokens`, each padded to the capsule page.
    uint64_t total = 0;
    for (const auto& b : engine_.state_buffers(0)) {
        const uint64_t v = b.valid_bytes(int64_t(tokens));
        total += (v + model::kCapsulePageBytes - 1) / model::kCapsulePageBytes * model::kCapsulePageBytes;
    }
    return total;
}

static uint64_t payload_bytes(model::CapsuleManager& m, model::CapsuleId id) {
    model::CapsuleInfo info;
    return m.info(id, &info) == FROST_OK ? uint64_t(info.meta.payload_bytes) : 0;
}

frost_status ModelEngine::snapshot(int slot, Tier tier, uint64_t* handle, uint64_t* bytes) {
    if (!capsules_) return fail(FROST_ERR_UNSUPPORTED, "capsules are not enabled");
    model::CapsuleId id = 0;
    FROST_TRY(capsules_->snapshot(slot, tier, &id));
    *handle = id;
    *bytes = payload_bytes(*capsules_, id);
    return FROST_OK;
}

frost_status ModelEngine::prefill_snapshot(int slot, const int32_t* ids, size_t n, Tier tier, int32_t* next,
                                           uint64_t* handle, uint64_t* bytes, std::string* refusal) {
    *handle = 0;
    if (!capsules_) return prefill(slot, ids, n, next);
    // The manager freezes at floor(P/A)*A; that point must not lie before the current position.
    const int64_t p0 = engine_.position(slot);
    if (!snapshot_possible(size_t(p0), size_t(p0) + n)) return prefill(slot, ids, n, next);
    model::CapsuleId id = 0;
    const frost_status st = capsules_->prefill_and_snapshot(slot, ids, n, tier, &id, next);
    if (st == FROST_ERR_OUT_OF_MEMORY) {
        // No room to freeze on the tier (design T32): the request goes on without its capsule.
        // The manager stopped at the aligned boundary; the rest of the prompt is prefilled here
        // (when nothing remains, it has set *next already).
        if (refusal) *refusal = frost_last_error();
        const int64_t at = engine_.position(slot);
        if (at < p0 || at > p0 + int64_t(n))
            return fail(FROST_ERR_STATE, "prefill_snapshot: slot %d at %lld after a failed freeze (from %lld, %zu ids)",
                        slot, (long long)at, (long long)p0, n);
        const size_t done = size_t(at - p0);
        return done < n ? prefill(slot, ids + done, n - done, next) : FROST_OK;
    }
    FROST_TRY(st);
    *handle = id;
    *bytes = payload_bytes(*capsules_, id);
    return FROST_OK;
}

// The device sampler applies the mask inside the captured step (Engine::set_token_mask): no
// logits read-back, the sampled token respects it on both backends.
frost_status ModelEngine::set_token_mask(int slot, const uint32_t* bits, size_t words) {
    if (slot < 0 || slot >= engine_.sessions()) return fail(FROST_ERR_INVALID_ARG, "set_token_mask: no slot %d", slot);
    if (bits && words * 32 < size_t(vocab_size()))
        return fail(FROST_ERR_INVALID_ARG, "set_token_mask: %zu words cannot cover a vocabulary of %d", words,
                    vocab_size());
    return engine_.set_token_mask(slot, bits, words);
}

size_t ModelEngine::exact_cut_grid() const {
    const model::EngineOptions& o = engine_.options();
    return o.backend == FROST_BACKEND_CUDA && o.chunk_invariant ? size_t(model::kCapsuleAlignment) : 0;
}

frost_status ModelEngine::restore(uint64_t handle, int slot, size_t* at) {
    if (!capsules_) return fail(FROST_ERR_UNSUPPORTED, "capsules are not enabled");
    int64_t pos = 0;
    FROST_TRY(capsules_->restore_stored(model::CapsuleId(handle), slot, &pos));
    *at = size_t(pos);
    // Restore re-seeds nothing: apply this slot's sampling again so the request's seed holds.
    return engine_.set_sampling(slot, sampling_[size_t(slot)]);
}

frost_status ModelEngine::fork_live(int from, const std::vector<int>& to) {
    // The engine owns every mutation of live state: Engine::fork copies the state-layout buffers,
    // cursor and journal on the device; the request's sampling is applied afterwards.
    for (int t : to) {
        FROST_TRY(engine_.fork(from, t));
        FROST_TRY(engine_.set_sampling(t, sampling_[size_t(t)]));
    }
    return FROST_OK;
}

frost_status ModelEngine::move(uint64_t handle, Tier to) {
    if (!capsules_) return fail(FROST_ERR_UNSUPPORTED, "capsules are not enabled");
    return capsules_->move(model::CapsuleId(handle), to);
}

void ModelEngine::drop(uint64_t handle) {
    if (capsules_) capsules_->release(model::CapsuleId(handle));
}

frost_status ModelEngine::persist(uint64_t handle, const std::string& path) {
    if (!capsules_) return fail(FROST_ERR_UNSUPPORTED, "capsules are not enabled");
    return capsules_->save(model::CapsuleId(handle), path);
}

frost_status ModelEngine::import(const std::string& path, uint64_t* handle, uint64_t* bytes,
                                 std::vector<int32_t>* tokens) {
    if (!capsules_) return fail(FROST_ERR_UNSUPPORTED, "capsules are not enabled");
    model::CapsuleId id = 0;
    FROST_TRY(capsules_->load(path, model::CapsuleTier::Disk, &id));
    model::CapsuleInfo info;
    const frost_status st = capsules_->info(id, &info);
    if (st != FROST_OK) {
        capsules_->release(id);
        return st;
    }
    // The serve layer indexes a capsule by its requested boundary: stored ids, then the
    // remainder that every restore re-prefills.
    tokens->assign(info.meta.ids.begin(), info.meta.ids.end());
    tokens->insert(tokens->end(), info.meta.remainder.begin(), info.meta.remainder.end());
    *handle = id;
    *bytes = uint64_t(info.meta.payload_bytes);
    return FROST_OK;
}

frost_status ModelEngine::move_to_file(uint64_t* handle, const std::string& path) {
    if (!capsules_) return fail(FROST_ERR_UNSUPPORTED, "capsules are not enabled");
    // CapsuleManager::move(Disk, path) would own (and delete at shutdown) the file, so the file
    // is written with save() and indexed with load() instead: load re-reads and checks it, so
    // the capsule is verified on disk before it is acknowledged. The model layer has no
    // "move to a file the caller owns" verb yet; that would save the re-read.
    const model::CapsuleId old = model::CapsuleId(*handle);
    FROST_TRY(capsules_->save(old, path));
    model::CapsuleId id = 0;
    const frost_status st = capsules_->load(path, model::CapsuleTier::Disk, &id);
    if (st != FROST_OK) {
        ::unlink(path.c_str());
        return st;
    }
    capsules_->release(old);
    *handle = id;
    return FROST_OK;
}

frost_status ModelText::load(const std::string& dir, const std::vector<int32_t>& eos_ids,
                             std::unique_ptr<ModelText>* out) {
    auto t = std::unique_ptr<ModelText>(new ModelText());
    FROST_TRY(text::Tokenizer::load(dir, &t->tok_));
    std::string tmpl;
    std::string cfg_text;
    if (read_file(dir + "/tokenizer_config.json", &cfg_text)) {
        auto cfg = nlohmann::json::parse(cfg_text, nullptr, false);
        if (!cfg.is_discarded() && cfg.is_object() && cfg.contains("chat_template") && cfg["chat_template"].is_string())
            tmpl = cfg["chat_template"].get<std::string>();
    }
    if (tmpl.empty()) read_file(dir + "/chat_template.jinja", &tmpl);
    const bool chatml = t->tok_->token_to_id("<|im_start|>") >= 0 && t->tok_->token_to_id("<|im_end|>") >= 0;
    if (tmpl.empty() && chatml) {
        // A tokenizer folder without a template (the demo's .frost/tokenizer, `frost synth
        // --tokenizer` output): the Qwen vocabulary's ChatML tokens are there, so the built-in
        // Qwen3.5 renderer applies (the templates are rendered natively, never from the text).
        t->kind_ = text::ChatTemplateKind::kQwen35;
        t->template_note_ = dir + " has no chat template: using the built-in Qwen3.5 template";
    } else if (tmpl.empty()) {
        return fail(FROST_ERR_NOT_FOUND,
                    "%s: no chat template (tokenizer_config.json \"chat_template\" or chat_template.jinja) and no "
                    "<|im_start|>/<|im_end|> tokens to use the built-in Qwen one; copy the model's chat_template.jinja there",
                    dir.c_str());
    } else if (!text::chat_template_kind_from_text(tmpl, &t->kind_))
        return fail(FROST_ERR_UNSUPPORTED, "%s: the chat template is not a known Qwen template", dir.c_str());
    for (const auto& a : t->tok_->added_tokens())
        t->split_tokens_.push_back(SplitToken{a.content, a.lstrip, a.single_word, a.normalized});
    t->end_ids_ = eos_ids;
    for (const char* name : {"<|im_end|>", "<|endoftext|>"}) {
        const int32_t id = t->tok_->token_to_id(name);
        if (id >= 0) t->end_ids_.push_back(id);
    }
    *out = std::move(t);
    return FROST_OK;
}

frost_status ModelText::render_chat(const ChatRender& r, std::string* out) const {
    text::ChatOptions o;
    o.add_generation_prompt = r.add_generation_prompt;
    o.enable_thinking = r.enable_thinking;
    // ordered_json keeps the client's key order, as the Python templates do.
    const auto msgs = nlohmann::ordered_json::parse(r.messages.dump());
    const auto tools = r.tools.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json::parse(r.tools.dump());
    return text::render_chat(kind_, msgs, tools, o, out);
}

std::vector<int32_t> ModelText::encode(std::string_view s) const { return tok_->encode(s); }

bool ModelText::encode_at_most(std::string_view s, size_t max_ids, std::vector<int32_t>* ids) const {
    return tok_->encode_at_most(s, max_ids, ids);
}

bool ModelText::split_safe(std::string_view left, std::string_view right) const {
    return split_is_safe(left, right, split_tokens_);
}

namespace {
class StreamDetok : public Detokenizer {
public:
    explicit StreamDetok(const text::Tokenizer& t) : ds_(t, true) {}
    std::string push(int32_t id) override { return ds_.push(id); }
    std::string flush() override { return ds_.flush(); }

private:
    text::DecodeStream ds_;
};
}  // namespace

std::unique_ptr<Detokenizer> ModelText::detokenizer() const { return std::make_unique<StreamDetok>(*tok_); }

bool ModelText::is_end_token(int32_t id) const {
    return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

ParsedOutput ModelText::parse_output(const std::string& s, const nlohmann::json& tools) const {
    ParsedOutput p;
    const auto otools = tools.is_array() ? nlohmann::ordered_json::parse(tools.dump()) : nlohmann::ordered_json(nullptr);
    const text::ParsedAssistant a = text::parse_tool_calls(s, otools);
    p.content = a.content;
    if (a.tool_calls.is_array()) p.tool_calls = nlohmann::json::parse(a.tool_calls.dump());
    return p;
}

std::shared_ptr<const text::grammar::TokenMasker> ModelText::token_masker(int vocab_size) const {
    std::lock_guard<std::mutex> lock(masker_mu_);
    if (!masker_ || masker_->vocab_size() != vocab_size) masker_ = text::grammar::make_token_masker(*tok_, end_ids_, vocab_size);
    return masker_;
}

std::string ModelText::tool_call_marker() const { return std::string(text::kToolCallOpen); }

std::string ModelText::tool_call_prefix(const std::string& name) const {
    if (kind_ == text::ChatTemplateKind::kQwen3) return TextIface::tool_call_prefix(name);
    // Qwen3.5/3.6 write the XML form (<function=NAME> then <parameter=...> blocks).
    return std::string(text::kToolCallOpen) + "\n" + (name.empty() ? "" : "<function=" + name + ">\n");
}

}  // namespace frost::serve
