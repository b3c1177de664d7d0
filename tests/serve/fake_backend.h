// A small deterministic engine and byte-level text layer, for serve tests ONLY (never shipped):
// the next token is a hash of the slot's whole committed state, so any state mix-up (wrong
// restore, stale journal) changes the output, and the fake counts every prefilled token so tests
// can prove cached tokens were not recomputed.
#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "serve/engine_iface.h"
#include "serve/token_cache.h"

namespace frost::serve::testing {

constexpr int32_t kEndId = 256;     // "<|im_end|>"
constexpr int32_t kStartId = 257;   // "<|im_start|>"
constexpr int kFakeVocab = 300;

class FakeEngine : public EngineIface {
public:
    FakeEngine(int slots, size_t max_seq) : slots_(size_t(slots)), max_seq_(max_seq) {}

    int slots() const override { return int(slots_.size()); }
    size_t max_seq_len() const override { return max_seq_; }
    int vocab_size() const override { return kFakeVocab; }
    frost_status reset(int slot) override;
    frost_status set_sampling(int slot, const Sampling& s) override;
    frost_status prefill(int slot, const int32_t* ids, size_t n, int32_t* next) override;
    frost_status decode(int slot, int32_t* next) override;
    // Logprobs of the fake: the sampled token at -0.25, then alternatives 'a', 'b', ... at
    // -1, -2, ... (as many as the sampling asked); prompt tokens score -0.5 each.
    frost_status last_logprobs(int slot, TokenLogprobs* out) override;
    frost_status prefill_scored(int slot, const int32_t* ids, size_t n, int top_n, int32_t* next,
                                std::vector<TokenLogprobs>* out) override;
    // Logs the step (calls()) and decodes each slot (the default loop).
    frost_status decode_batch(const int* slots, int n, int32_t* next) override;
    // Sliced prefill (knob `slices` > 0): a staged piece runs `fake_layers` layers, each sleeping
    // layer_delay_us, and commits like prefill() after the last; a staged slot refuses prefill
    // and decode (a scheduler bug shows as an engine error); reset, restore and fork drop it.
    size_t slice_rows() const override { return slices; }
    int layers() const override { return fake_layers; }
    frost_status prefill_slices_begin(int slot, const int32_t* ids, size_t n) override;
    frost_status prefill_slices_run(int slot, int layers, bool* done, int32_t* next) override;

    // memory_view 0: no view (the base's answer); 1: buffers only, as the cpu backend; 2: with a
    // device. The figures are fake_memory()'s.
    bool memory(EngineMemory* out) const override;
    EngineMemory fake_memory() const;

    bool capsules_supported() const override { return capsules; }
    uint64_t capsule_bytes_at(size_t tokens) const override { return 1000 + 4 * tokens; }
    // align > 0: capsules are stored on an align-token grid, as the real engine's are.
    size_t snapshot_point(size_t to) const override { return align > 0 ? to / align * align : to; }
    // As the real engine: with an alignment unit, a capsule is frozen at the grid point below
    // `to`, which must lie at or past the current position `from`.
    bool snapshot_possible(size_t from, size_t to) const override {
        if (!capsules || to <= from) return false;
        if (align == 0) return true;
        const size_t at = to / align * align;
        return at > 0 && at >= from;
    }
    frost_status snapshot(int slot, Tier tier, uint64_t* handle, uint64_t* bytes) override;
    // With `align`, as the real engine: the slot stops at the capsule's grid point.
    frost_status restore(uint64_t handle, int slot, size_t* at) override;
    size_t exact_cut_grid() const override { return cut_grid; }
    bool fork_live_supported() const override { return fork_live_on; }
    frost_status fork_live(int from, const std::vector<int>& to) override;
    frost_status move(uint64_t handle, Tier to) override;
    void drop(uint64_t handle) override;
    // The disk tier (knob `files`): the capsule's committed ids as text, written to a temp file
    // and renamed into place (as the real engine's crash-safe file), then held under a new handle.
    frost_status move_to_file(uint64_t* handle, const std::string& path) override;

    // Knobs.
    std::atomic<int> step_delay_ms{0};   // sleep per prefill/decode call
    std::atomic<int> end_after{1 << 30}; // emit the end token after this many decoded tokens
    bool capsules = true;
    bool files = false;        // move_to_file writes capsule files (else unsupported, as the base)
    size_t align = 0;
    // > 0: the fake's bits follow the CUDA engine's chunk-invariant numerics: a prefill starting
    // off this grid and every decode step leave a mark in the state, which changes every later
    // token, so a path that cuts elsewhere than a cold prefill answers differently (as on CUDA).
    size_t cut_grid = 0;
    bool fork_live_on = true;  // n > 1 as a batched fork (else one choice after another)
    size_t slices = 0;         // sliced prefill: rows of a piece (0 = none)
    int fake_layers = 8;
    std::atomic<int> layer_delay_us{0};
    std::atomic<uint64_t> forks{0};
    std::atomic<bool> fail_restore{false};
    std::atomic<bool> fail_snapshot{false};  // a freeze finds no memory on its tier (T32)
    std::atomic<int> memory_view{0};
    // When not empty: the output is exactly these ids, then the end token (set before use).
    std::vector<int32_t> script;
    // Observations.
    std::atomic<uint64_t> prefilled_tokens{0};
    std::atomic<uint64_t> restores{0};
    size_t live_capsules() const;
    // Every prefill call and batched decode step, in order (the scheduler's interleaving).
    struct Call {
        bool decode = false;
        std::vector<int> slots;  // prefill: its slot; decode: the batch's members
        size_t tokens = 0;       // prefill: ids in the call (a sliced piece: in its last call)
        int layers = 0;          // a sliced prefill call: the layers it ran (0: a whole prefill)
    };
    std::vector<Call> calls() const;

private:
    struct SlotState {
        std::vector<int32_t> committed;
        int32_t pending = -1;
        int decoded = 0;
        uint64_t seed = 0;
        float temperature = 0;
        // As the real engine's sampler: every prefill call and decode step draws once from the
        // RNG; set_sampling restarts the count (so a sampled token depends on the draw index).
        uint64_t draws = 0;
        int top_logprobs = -1;
        std::vector<int32_t> staged;  // a sliced piece not yet through every layer
        // cut_grid marks: 2p for a prefill starting at position p off the grid, 2p + 1 for the
        // decode step that committed position p.
        std::vector<uint64_t> marks;
        int layer = 0;
    };
    int32_t sample(const SlotState& s) const;
    std::vector<SlotState> slots_;
    size_t max_seq_;
    mutable std::mutex mu_;
    std::map<uint64_t, std::vector<int32_t>> capsules_;
    std::map<uint64_t, std::vector<uint64_t>> capsule_marks_;  // the state's marks at the freeze
    void mark_cut(SlotState& s) const;
    uint64_t next_handle_ = 1;
    std::vector<Call> calls_;
};

class FakeText : public TextIface {
public:
    frost_status render_chat(const ChatRender& r, std::string* out) const override;
    std::vector<int32_t> encode(std::string_view text) const override;
    bool split_safe(std::string_view left, std::string_view right) const override;
    mutable std::atomic<uint64_t> encoded_bytes{0};  // observation: bytes passed to encode()
    std::unique_ptr<Detokenizer> detokenizer() const override;
    // The detokenizer holds each token's text until the next one (or the flush), as the real one
    // holds an unfinished UTF-8 character: a choice's last text then arrives only at its end.
    bool lagging_detok = false;
    bool is_end_token(int32_t id) const override { return id == kEndId; }
    ParsedOutput parse_output(const std::string& text, const nlohmann::json& tools) const override;
    std::string tool_call_marker() const override { return "<tool_call>"; }
};

}  // namespace frost::serve::testing
