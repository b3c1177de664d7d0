// The Qwen3.5 dense hybrid LM engine (architecture.md "The engine"): fp32 weights in frost
// buffers, one static BufferSet per session, prefill in chunk-size-bucket graphs (64..C_p), one
// captured decode graph per session replayed per token, sampling on the device. The host writes
// token ids (and the count of a prefill chunk) into input buffers and reads back one token id.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "kernels/params.h"
#include "model/buffers.h"
#include "model/config.h"
#include "model/engine_cuda.h"
#include "model/weights.h"

namespace frost::model {

constexpr int kGdnChunk = 64;  // gated-delta-rule chunk = alignment unit A this build guarantees

struct EngineOptions {
    frost_backend backend = FROST_BACKEND_CPU;
    int device = 0;
    int max_seq_len = 4096;    // tokens per session (KV capacity)
    int prefill_chunk = 256;   // C_p: multiple of 64; prefill graphs exist for 64, 128, ..., C_p
    int sessions = 1;          // live BufferSets
    bool logits_all = false;   // keep the logits of every prefill row (eval); else last row only
    bool trace = false;        // copy named activations out after each step (debug, habit 7)
    // RoPE inverse frequencies rounded to bf16, as transformers computes them for a model cast to
    // bfloat16 (the fixture goldens were made that way); false = exact fp32 frequencies.
    bool rope_inv_freq_bf16 = true;
};

struct SamplingConfig {
    float temperature = 0.0f;  // <= 0: greedy
    int top_k = 0;             // 0: off
    float top_p = 1.0f;        // 1: off
    uint64_t seed = 0;
};

// One traced activation (options.trace): rows of the last step, [rows, width] fp32.
struct TraceEntry {
    std::string name;  // "embed" (layer -1); per layer "gdn_out" or "attn_out", "mixer_residual", "layer_out",
                       // and "router_probs" ([rows, E]) on MoE layers
    int layer = -1;
    int width = 0;
    frost_buffer* buf = nullptr;  // [C_p, width]
};

struct EngineGraphs;  // per-session graph + record context (engine.cpp)

class Engine {
public:
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Loads MODEL_DIR (config.json + safetensors) and builds the engine. Refuses MoE/MTP-only
    // features the dense forward does not execute (FROST_ERR_UNSUPPORTED, naming them).
    static frost_status create(const std::string& model_dir, const EngineOptions& opts,
                               std::unique_ptr<Engine>* out);
    // Same from already-bound weights (the checkpoint mapping must stay alive during the call).
    static frost_status create_from_weights(const ModelWeights& w, const EngineOptions& opts,
                                            std::unique_ptr<Engine>* out);

    const ModelConfig& config() const { return cfg_; }
    const EngineOptions& options() const { return opts_; }
    frost_ctx* ctx() const { return ctx_; }
    frost_stream* stream() const { return stream_; }
    int sessions() const { return static_cast<int>(sessions_.size()); }

    // Zeroes the session's state and cursor (position 0) and applies `sampling`.
    frost_status reset(int session, const SamplingConfig& sampling = {});
    // Changes sampling of a live session (seed restarts its RNG counter at 0).
    frost_status set_sampling(int session, const SamplingConfig& sampling);

    // Appends ids[0..n) to the session: chunks end at absolute multiples of C_p (so a boundary
    // never depends on where an earlier call ended); each chunk is one graph replay. Samples the
    // next token from the last row's logits into *next (may be null). With logits_all, appends
    // every row's logits ([n, vocab]) to *all_logits when non-null.
    frost_status prefill(int session, const int32_t* ids, size_t n, int32_t* next,
                         std::vector<float>* all_logits = nullptr);
    // One decode step: consumes the cursor's last token (the last sampled one), writes the next
    // sampled token to *next.
    frost_status decode(int session, int32_t* next);
    // Feeds a given token through the decode graph (token-by-token prefill), sampling *next.
    frost_status feed(int session, int32_t token, int32_t* next);

    // The logits the last step sampled from ([vocab]).
    frost_status last_logits(int session, std::vector<float>* out);
    // Copies the session's cursor to the host.
    frost_status read_cursor(int session, kernels::StepCursor* out);
    int64_t position(int session) const;
    // Token journal: the ids folded into the session's state so far, in order ([0, position)).
    const std::vector<int32_t>& journal(int session) const;
    // Capsule hook: after the capsule layer copied a state + cursor into the session's buffers,
    // re-reads the cursor and adopts its position (must equal ids.size(), else FROST_ERR_CORRUPT
    // and nothing changes) and `ids` as the journal.
    frost_status adopt_restored_state(int session, const std::vector<int32_t>& ids);

    // Every buffer of the session (state + cursor + the scratch it uses) and the shared weights.
    std::vector<NamedBuffer> buffers(int session) const;
    // The session's state + cursor buffers only: what a capsule snapshots.
    std::vector<NamedBuffer> state_buffers(int session) const;
    const std::vector<TraceEntry>& trace() const { return trace_; }
    // Copies the rows of the last step of one trace entry to the host ([rows, width]).
    frost_status read_trace(const std::string& name, int layer, std::vector<float>* out, int* rows);

    // Graph captures so far (all sessions): unchanged by prefill/decode once warmed up.
    uint64_t capture_count() const;
    uint64_t weight_bytes() const;

private:
    Engine() = default;
    frost_status init(const ModelWeights& w, const EngineOptions& opts);
    frost_status alloc_weights(const ModelWeights& w);
    frost_status alloc_moe_weights(const ModelWeights& w, int layer);  // engine_weights.cpp
    frost_status alloc_moe_scratch();                                  // engine.cpp
    frost_status alloc_scratch();
    frost_status alloc_session(int index);
    frost_status capture_session(int index);
    frost_status run_chunk(int session, const int32_t* ids, int n, bool decode_graph);
    frost_status prefill_pipelined(int session, const int32_t* ids, size_t n);
    frost_status alloc_prompt_staging();
    frost_status check_session(int session) const;
    frost_status write_cursor_field(int session, size_t offset, const void* src, size_t bytes);
    friend struct ForwardRecorder;
    friend struct CudaBuild;  // engine_cuda.cpp: the CUDA path fills the same registry

public:
    // Device pointers of the converted weights and the static buffers (forward.cpp reads them).
    struct LayerPtrs {
        const float* in_ln;       // [H]
        const float* post_ln;     // [H]
        const float* in_proj;     // linear: [C + V + 2Hv, H] = [qkv; z; b; a]; full: [2Hq d + 2Hkv d, H]
        const float* conv_w;      // [C, K] (linear)
        const float* A_log;       // [Hv]
        const float* dt_bias;     // [Hv]
        const float* gdn_norm;    // [dv]
        const float* out_proj;    // linear [H, V]; full o_proj [H, Hq d]
        const float* q_norm;      // [d] (full)
        const float* k_norm;      // [d] (full)
        const float* gate_up;     // [2F, H] (dense MLP layers)
        const float* down;        // [H, F]
        // MoE layers (config.is_moe_layer; null otherwise), layouts of kernels/params/moe.h.
        const float* moe_router;      // [E, H]
        const float* moe_gate_up;     // [E, 2I, H] per expert [gate; up]
        const float* moe_down;        // [E, H, I]
        const float* shared_gate_up;  // [2Is, H]
        const float* shared_down;     // [H, Is]
        const float* shared_gate;     // [H]
    };
    struct SessionPtrs {
        kernels::StepCursor* cursor;
        std::vector<float*> conv_state;  // per layer [C, K-1] (linear layers; null otherwise)
        std::vector<float*> rec_state;   // per layer [Hv, dk, dv]
        std::vector<float*> k_cache;     // per layer [max_seq, Hkv, d] (full layers)
        std::vector<float*> v_cache;
        frost_buffer* cursor_buf = nullptr;
    };
    struct ScratchPtrs {
        int32_t* ids;        // [C_p]
        float* x;            // [C_p, H] residual stream
        float* xn;           // [C_p, H]
        float* proj;         // [C_p, proj_width]
        float* conv_out;     // [C_p, C]
        float* beta;         // [C_p, Hv]
        float* g;            // [C_p, Hv]
        float* core;         // [C_p, max(V, Hq d)]
        float* core2;        // [C_p, V]
        float* act;          // [C_p, F]
        float* fin;          // [logit_rows, H]
        float* logits;       // [logit_rows, vocab]
        float* sample_work;  // [2 vocab]
        int32_t* sample_idx; // [vocab]
        int32_t* out_token;  // [1]
        float* moe_probs;    // [C_p, E] router probabilities of the MoE layer just run (MoE models)
        int32_t* moe_ids;    // [C_p, k] selected experts
        float* moe_w;        // [C_p, k] their weights
        float* moe_work;     // [C_p, moe_work_floats]
        int proj_width = 0;
        int core_width = 0;
        int logit_rows = 0;
    };

private:
    ModelConfig cfg_;
    EngineOptions opts_;
    frost_ctx* ctx_ = nullptr;
    frost_stream* stream_ = nullptr;
    std::unique_ptr<BufferList> weight_bufs_, scratch_bufs_;
    std::vector<std::unique_ptr<BufferList>> session_bufs_;
    const float* embed_ = nullptr;       // [vocab, H]
    const float* final_norm_ = nullptr;  // [H]
    const float* lm_head_ = nullptr;     // [vocab, H]
    std::vector<LayerPtrs> layers_;
    ScratchPtrs scratch_{};
    std::vector<SessionPtrs> sessions_;
    std::vector<int64_t> host_pos_;      // host mirror of each cursor's position
    std::vector<std::vector<int32_t>> journal_;  // per session: ids folded into the state
    std::vector<int32_t> last_token_;    // host mirror of each cursor's last_token
    std::vector<frost_graph*> graphs_;   // per session: prefill buckets + decode
    std::vector<TraceEntry> trace_;
    frost_buffer* staging_ = nullptr;    // host-pinned: ids / cursor fields / token read-back
    frost_buffer* scratch_ids_buf_ = nullptr;
    // host-pinned: a whole prompt's ids [max_seq] then one row count per chunk [max_seq / 64 + 2], so
    // every chunk's uploads are enqueued before the first runs (no slot is reused mid-prefill)
    frost_buffer* prompt_staging_ = nullptr;
    frost_buffer* out_token_buf_ = nullptr;
    frost_buffer* logits_buf_ = nullptr;
    int last_rows_ = 0;                  // rows of the last step (trace read-back)
    std::unique_ptr<CudaState, CudaStateDeleter> cuda_;  // CUDA backend only (engine_cuda.h)
};

// ShapeKey of a step graph: phase (prefill/decode) and rows of the bucket.
frost_shape_key step_key(bool decode, int rows);

}  // namespace frost::model
