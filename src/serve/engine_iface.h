// The narrow interfaces the serve layer drives, so the HTTP core, planner and store are built and
// tested without a model: EngineIface (slots of live state, prefill/decode with sampling, capsule
// snapshot/restore/move/drop) and TextIface (chat rendering, tokens <-> text, tool-call parsing).
// The engine thread is the only caller of EngineIface; TextIface must be callable from any
// thread (HTTP threads tokenise before queueing, so prompt length errors never wait in the queue).
// model_backend.h adapts the real frost::model::Engine and frost::text::Tokenizer to these.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "model/sampling.h"
#include "serve/claim_log.h"

namespace frost::text::grammar {
class TokenMasker;
}

namespace frost::serve {

#define FROST_TRY_IFACE(expr)                  \
    do {                                       \
        frost_status s_ = (expr);              \
        if (s_ != FROST_OK) return s_;         \
    } while (0)

// The model layer's sampling parameters (model/sampling.h), one type for both layers: all of it
// runs in the engine's device sampler inside the captured step.
using Sampling = model::SamplingConfig;

// What the engine reports beside a sampled token when the request asked for logprobs
// (Sampling::top_logprobs >= 0): raw model logprobs, the chosen token's and the top alternatives.
struct TokenLogprobs {
    int32_t token = -1;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;  // (id, logprob), best first
};

// What an engine holds in memory, for /metrics: its buffers per memory space (weights, state,
// scratch and capsules; frost_space order) and its live buffers and graphs; and, where it runs on a
// GPU, the device's used / total bytes as the driver reports them (every process on the device,
// graph variants and the runtime included).
struct EngineMemory {
    uint64_t buffer_bytes[3] = {0, 0, 0};  // device, host pinned, host
    uint64_t live_buffers = 0;
    uint64_t live_graphs = 0;
    bool has_device = false;
    uint64_t device_used = 0;
    uint64_t device_total = 0;
};

class EngineIface {
public:
    virtual ~EngineIface() = default;

    // Fills `out` and returns true where the engine can say (default: it cannot).
    virtual bool memory(EngineMemory* out) const { return false; }

    virtual int slots() const = 0;          // live buffer sets
    virtual size_t max_seq_len() const = 0; // tokens per slot
    virtual int vocab_size() const = 0;

    // Empties the slot (position 0).
    virtual frost_status reset(int slot) = 0;
    // Applies sampling to the slot; the RNG restarts from `seed`.
    virtual frost_status set_sampling(int slot, const Sampling& s) = 0;
    // Appends ids[0..n) to the slot's state and samples the next token into *next from the last
    // row's logits. The sampled token is NOT yet part of the state.
    virtual frost_status prefill(int slot, const int32_t* ids, size_t n, int32_t* next) = 0;
    // Commits the last sampled token to the state and samples the next one into *next.
    virtual frost_status decode(int slot, int32_t* next) = 0;
    // Constrained decoding: from now on every token the slot samples (prefill and decode) is
    // drawn only from the ids whose bit is set in bits[0..words) (bit i of word i/32; the mask
    // is copied). nullptr = no mask. Stays until replaced; the scheduler sets it per step.
    // Engines that cannot mask return FROST_ERR_UNSUPPORTED (the request then fails).
    virtual frost_status set_token_mask(int slot, const uint32_t* bits, size_t words) {
        return bits ? FROST_ERR_UNSUPPORTED : FROST_OK;
    }
    // The logprobs of the token the last prefill/decode sampled (sampling asked top_logprobs >= 0).
    virtual frost_status last_logprobs(int slot, TokenLogprobs* out) { return FROST_ERR_UNSUPPORTED; }
    // Prompt logprobs (echo): appends ids[0..n) to the slot like prefill() and samples *next, and
    // fills out[i] (i = 0..n-2) with the logprob of ids[i + 1] and its top_n alternatives.
    virtual frost_status prefill_scored(int slot, const int32_t* ids, size_t n, int top_n, int32_t* next,
                                        std::vector<TokenLogprobs>* out) {
        return FROST_ERR_UNSUPPORTED;
    }
    // decode() for each of slots[0..n) (distinct), next[i] for slots[i]: an engine with batched
    // decode advances them in ONE step whose per-slot results equal decode()'s. On failure the
    // state of every listed slot is unknown. Default: one decode() each.
    virtual frost_status decode_batch(const int* slots, int n, int32_t* next) {
        for (int i = 0; i < n; ++i) FROST_TRY_IFACE(decode(slots[i], next + i));
        return FROST_OK;
    }

    // Sliced prefill (Engine::prefill_slices_*): a prompt piece of at most slice_rows() tokens is
    // staged, then run a few layers per call (of layers() in all per chunk), so the decode steps
    // of other slots go on between calls; the result equals prefill() of the same piece. Until
    // *done the slot takes no other step; reset or restore drops the piece. 0 = not supported.
    virtual size_t slice_rows() const { return 0; }
    virtual int layers() const { return 0; }
    virtual frost_status prefill_slices_begin(int slot, const int32_t* ids, size_t n) { return FROST_ERR_UNSUPPORTED; }
    virtual frost_status prefill_slices_run(int slot, int layers, bool* done, int32_t* next) {
        return FROST_ERR_UNSUPPORTED;
    }

    // The grid on which a prompt must be cut for the slot's state to keep the bits of one cold
    // prefill, where the engine promises them: the CUDA engine with chunk-invariant numerics (its
    // chunked delta rule folds the state on the capsule grid, and a decode step's bits are not a
    // prefill's). 0: cuts never change the bits (the CPU engine), or nothing is promised (CUDA
    // default numerics). With a grid the scheduler continues a live state only where it is exact.
    virtual size_t exact_cut_grid() const { return 0; }

    // Capsules. Engines without capsule support return FROST_ERR_UNSUPPORTED from snapshot and
    // the server then plans with live state only.
    virtual bool capsules_supported() const { return false; }
    // Whether prefill_snapshot() from position `from` to `to` can freeze a capsule (engines with
    // an alignment unit A can only when floor(to/A)*A is past `from`).
    virtual bool snapshot_possible(size_t from, size_t to) const { return capsules_supported() && to > from; }
    // Where a capsule requested at boundary `to` is stored (engines with an alignment unit A:
    // floor(to/A)*A). A snapshot requested exactly there carries no remainder, so its restore is
    // a pure copy and the next request prefills from that point in one run.
    virtual size_t snapshot_point(size_t to) const { return to; }
    // Bytes a capsule at boundary `tokens` would take (the store reserves this much first).
    virtual uint64_t capsule_bytes_at(size_t tokens) const { return 0; }
    // Freezes the slot's committed state onto `tier`; *handle names it for the other calls.
    virtual frost_status snapshot(int slot, Tier tier, uint64_t* handle, uint64_t* bytes) {
        return FROST_ERR_UNSUPPORTED;
    }
    // prefill() that also freezes a capsule of the state after ids (engines with an alignment
    // unit store it at the aligned boundary and re-prefill the rest on restore). *handle = 0
    // when no capsule could be taken here; the prefill happened either way when OK is returned.
    // When the freeze was tried and failed (no memory on the tier), *refusal (if given) says why:
    // the request goes on, only its capsule is not made.
    virtual frost_status prefill_snapshot(int slot, const int32_t* ids, size_t n, Tier tier, int32_t* next,
                                          uint64_t* handle, uint64_t* bytes, std::string* refusal) {
        *handle = 0;
        FROST_TRY_IFACE(prefill(slot, ids, n, next));
        if (snapshot(slot, tier, handle, bytes) != FROST_OK) {
            *handle = 0;
            if (refusal) *refusal = frost_last_error();
        }
        return FROST_OK;
    }
    // Copies the capsule into the slot's live buffers. *at: the slot's position afterwards, at
    // most the capsule's boundary. An engine whose capsules sit on an alignment grid stops at the
    // grid point and leaves the capsule's last tokens (its remainder) to the caller, who prefills
    // them with the rest of the prompt: a prompt cut only on the grid keeps a cold prefill's bits.
    virtual frost_status restore(uint64_t handle, int slot, size_t* at) { return FROST_ERR_UNSUPPORTED; }
    // n > 1 as one batched fork: copies slot `from`'s committed state (any position, journal
    // included) into each slot of `to` by memory copy, so a prompt is prefilled once for all
    // choices. The targets keep their own sampling (re-seeded). On failure a target may be
    // half-written: the caller resets it.
    virtual bool fork_live_supported() const { return false; }
    virtual frost_status fork_live(int from, const std::vector<int>& to) { return FROST_ERR_UNSUPPORTED; }
    virtual frost_status move(uint64_t handle, Tier to) { return FROST_ERR_UNSUPPORTED; }
    virtual void drop(uint64_t handle) {}
    // Persistence across restarts. persist: writes the capsule (any tier; it stays there) as a
    // crash-safe, self-validating file at `path`. import: validates the file at `path` against
    // the running deployment (every length, offset, checksum) and indexes it on the disk tier
    // (the file stays the caller's); *tokens = its boundary ids.
    virtual frost_status persist(uint64_t handle, const std::string& path) { return FROST_ERR_UNSUPPORTED; }
    virtual frost_status import(const std::string& path, uint64_t* handle, uint64_t* bytes,
                                std::vector<int32_t>* tokens) {
        return FROST_ERR_UNSUPPORTED;
    }
    // Crash durability: moves the capsule (any tier) onto the disk tier as the crash-safe file
    // `path` (temp, fsync, rename, directory fsync), then indexes that file, so it is durable
    // and verified when OK is returned. The file stays the CALLER's: drop() never deletes it.
    // *handle may change (the old one is released). On failure the capsule stays where it was
    // under the old handle and no file is left at `path`.
    virtual frost_status move_to_file(uint64_t* handle, const std::string& path) { return FROST_ERR_UNSUPPORTED; }
};

// Streaming detokenizer: complete UTF-8 only.
class Detokenizer {
public:
    virtual ~Detokenizer() = default;
    virtual std::string push(int32_t id) = 0;
    virtual std::string flush() = 0;
};

struct ChatRender {
    nlohmann::json messages;   // validated OpenAI messages
    nlohmann::json tools;      // array (may be empty)
    std::optional<bool> enable_thinking;  // unset: the template's default
    bool add_generation_prompt = true;
};

struct ParsedOutput {
    std::string content;
    std::string reasoning;                              // thinking text, if split out
    nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI tool_call objects
};

class TextIface {
public:
    virtual ~TextIface() = default;
    virtual frost_status render_chat(const ChatRender& r, std::string* out) const = 0;
    virtual std::vector<int32_t> encode(std::string_view text) const = 0;
    // encode() that may stop early once the text has more than max_ids tokens: true with
    // *ids = encode(text) when it has at most max_ids, false when it has more (*ids is then
    // unspecified). A prompt far past the context is refused without its whole encoding.
    virtual bool encode_at_most(std::string_view text, size_t max_ids, std::vector<int32_t>* ids) const {
        *ids = encode(text);
        return ids->size() <= max_ids;
    }
    // True when encode(left + right) == encode(left) + encode(right) is guaranteed (the cut lies
    // before an added token that cannot interact with its left): lets the server encode only the
    // new part of a resent history. false (the default) always encodes the whole text.
    virtual bool split_safe(std::string_view left, std::string_view right) const { return false; }
    virtual std::unique_ptr<Detokenizer> detokenizer() const = 0;
    // Ids that end generation (EOS, <|im_end|>); never emitted as text.
    virtual bool is_end_token(int32_t id) const = 0;
    // Splits generated text into content and tool calls (Qwen formats). `tools` is the request's
    // OpenAI tools array: argument values are typed by each function's parameter schema. The
    // calls' ids are the caller's to assign (unique per response).
    virtual ParsedOutput parse_output(const std::string& text, const nlohmann::json& tools) const = 0;
    // Markup that opens a tool call in the generated text ("<tool_call>"): streaming holds text
    // back from here on so partial markup is never sent as content.
    virtual std::string tool_call_marker() const = 0;
    // The assistant text that forces a tool call (tool_choice "required": name empty) or a call
    // of `name` (tool_choice naming a function): appended to the generation prompt, so the model
    // continues inside the call. Default: Qwen3's JSON form.
    virtual std::string tool_call_prefix(const std::string& name) const {
        return std::string("<tool_call>\n") + (name.empty() ? "" : "{\"name\": \"" + name + "\", \"arguments\": ");
    }
    // Constrained decoding: the vocabulary as a byte trie for token masks, `vocab_size` wide
    // (the model's). nullptr (the default): this backend cannot constrain output.
    virtual std::shared_ptr<const text::grammar::TokenMasker> token_masker(int vocab_size) const { return nullptr; }
};

}  // namespace frost::serve
