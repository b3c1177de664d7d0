// The Qwen3.5 dense hybrid LM engine (architecture.md "The engine"), one engine for every
// backend: the op table comes from the context's backend (ops::Backend), dtypes from the state
// layout and weight table (qwen35/layout.h, qwen35/weight_table.h), and the one forward
// (qwen35/forward.cpp) is captured per session into chunk-size-bucket prefill graphs (64..C_p)
// and one decode graph replayed per token, sampling on the device. The host writes token ids
// (and the count of a prefill chunk) into input buffers and reads back one token id. The engine
// owns every mutation of live state (reset, restore adoption, fork).
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
#include "model/sampling.h"
#include "model/qwen35/forward.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace frost::model {

constexpr int kGdnChunk = qwen35::kGdnChunk;  // gated-delta-rule chunk = alignment unit A this build guarantees

struct EngineOptions;
struct ModelConfig;
// EngineOptions::prefill_chunk when it is 0 (see there); `opts` otherwise unchanged. quantized: the
// engine runs linears as stored quantized (the CUDA engine on a quantized checkpoint).
int auto_prefill_chunk(const EngineOptions& opts, const ModelConfig& cfg, bool quantized = false);
struct ModelWeights;
// Whether an engine with `opts` runs w's linears as stored quantized: the CUDA engine keeping the
// quantized views (keep_quantized) of a checkpoint whose quant plan has modules.
bool runs_quantized(const EngineOptions& opts, const ModelWeights& w);

struct EngineOptions {
    frost_backend backend = FROST_BACKEND_CPU;
    int device = 0;
    int max_seq_len = 4096;    // tokens per session (KV capacity)
    // C_p: a multiple of 64; prefill graphs exist for 64, 128, ..., C_p. 0 = by backend and model
    // (auto_prefill_chunk): 256 on the CPU; on CUDA 8192 for MoE models, bf16 or quantized (the
    // grouped expert GEMMs want rows per expert) and bf16 dense hidden sizes above 2048 (fewer
    // passes over the GDN state and the KV), 4096 for quantized dense weights (a chunk dequantizes
    // or quantizes once per weight) and dense hidden sizes 1024-2048 (small GEMMs want rows); below
    // hidden 1024 (test sizes) 4096 for MoE and 2048 for dense; never above max_seq_len rounded up to 64.
    int prefill_chunk = 0;
    int sessions = 1;          // live BufferSets
    bool logits_all = false;   // keep the logits of every prefill row (eval); else last row only
    bool trace = false;        // copy named activations out after each step (debug, habit 7)
    // RoPE inverse frequencies rounded to bf16, as transformers computes them for a model cast to
    // bfloat16 (the fixture goldens were made that way); false = exact fp32 frequencies.
    bool rope_inv_freq_bf16 = true;
    // A quantized checkpoint on CUDA: linears stay quantized on the device (quantized GEMV for
    // decode, dequantized tile + bf16 GEMM for prefill); false dequantizes them to bf16 at load.
    // The CPU engine (the fp32 oracle) always dequantizes.
    bool keep_quantized = true;
    // FP8 checkpoints (128x128 weight blocks; other layouts below) on CUDA: prefill GEMMs quantize their activations
    // per 128-wide group to e4m3 and run on FP8 tensor cores (W8A8, the checkpoint's declared
    // dynamic activation scheme, as vLLM / transformers run it). Off: the weight is dequantized
    // to a bf16 tile and multiplied with bf16 activations (exact W8A16; the default, matching the
    // CPU oracle). Decode GEMVs keep bf16 activations either way. MoE experts in 128x128 blocks
    // too: the grouped GEMMs read them as stored and quantize x and the expert activations the
    // same way (ops MoeOp::quant_act; 35B-A3B FP8 cold TTFT 2.6x / 1.6x faster at 1k / 16k than
    // the exact path, which dequantizes every expert per chunk). Per-channel FP8 (FP8-dynamic)
    // dense and expert weights too, and dense INT4 weights in 128-wide groups (W4A8: their values
    // converted to e4m3 exactly per chunk, half the bytes of the bf16 tile; ops::w8a8_weight).
    // No effect on the CPU engine (its weights are dequantized fp32).
    bool fp8_w8a8_prefill = false;
    // FP8 checkpoints on CUDA: decode GEMVs quantize x per 128-wide group to e4m3 in the kernel
    // and run on FP8 tensor cores (W8A8 decode, any FP8 weight layout; the same arithmetic as
    // fp8_w8a8_prefill's quantizer, so a batched member keeps its solo bits). Off: each weight is
    // converted to bf16 in registers and multiplied with bf16 x (W8A16, the default). Weights of
    // K not a multiple of 128, and MoE experts, keep bf16 activations. No effect on the CPU engine.
    bool fp8_w8a8_decode = false;
    // With fp8_w8a8_prefill: the ops producing an FP8 GEMM's input (the RMSNorms, the gated
    // RMSNorm, SwiGLU) write its e4m3 twin in the same pass, so the GEMM runs no quantizer of its
    // own (the same bytes either way). FROST_FP8_ACT_FUSE=0 in the environment turns it off (A/B).
    // H100, 9B-style FP8, two alternating rounds (2026-11-25): cold TTFT 4k 73.6 / 73.1 ms against
    // 75.3 / 75.1 without; 16k 335.7 / 339.6 against 338.1 / 340.1.
    bool fp8_act_fuse = true;
    // With fp8_act_fuse: such a producer skips its bf16 output where its only reader is an FP8
    // GEMM that reads just the twin (the same logits bit for bit; ops.h Fp8Act yq_only).
    // FROST_FP8_TWIN_ONLY=0 in the environment turns it off (A/B). H100, 9B-style FP8, M 4096
    // (2026-11-25, two alternating rounds): the producers 1.9 / 1.6 / 1.4 / 5.1 ms -> 1.7 / 1.45 /
    // 1.35 / 4.9 ms (input norm, post norm, gated norm, swiglu; summed over the layers); cold TTFT
    // 4k 70.5 ms mean of 4 against 72.7, 16k 333.1 against 333.9 (within the noise there).
    bool fp8_twin_only = true;
    // Chunk-invariant numerics (CUDA): a row's bits stop depending on how the prompt was cut into
    // prefill chunks, so a capsule's restore + append equals a cold prefill of the whole prompt bit
    // for bit at any length and on any model (the capsule contract; without it, the CUDA kernels
    // chosen by a chunk's row count make long cold prompts and short appends differ in the last
    // bits). Attention prefill runs one kernel unsplit for every chunk, each GEMM shape keeps one
    // cuBLASLt algorithm with no split of K for every row count, the MoE GEMMs one tile shape.
    // Costs short appends at long positions most (few attention blocks walk all the keys). The
    // CPU engine is chunk-invariant either way. Refused with fp8_w8a8_prefill (its FP8 GEMM plans
    // are per row count). numerics() names it, so capsules bind to it.
    bool chunk_invariant = false;
    // A prefill whose logits are its last row's runs the last layer, past its state-writing ops
    // (the GDN conv and chunked rule, the KV append), on that row alone (qwen35 StepSpec::tail):
    // the same session state, and that row's logits from the decode forms of the layer's other
    // ops (the GEMVs, decode attention, the MoE decode). FROST_PREFILL_TAIL=0 in the environment
    // turns it off (A/B). numerics() names it when off: on CUDA the sampled token's bits differ.
    bool prefill_tail = true;
    // How the GDN in_proj is bound (qwen35::Precision::gdn_in_proj_split): Auto keeps [qkv; z]
    // quantized with a bf16 [b; a] tail where a checkpoint leaves b and a unquantized (CUDA, kept
    // quantized weights), one fused matrix elsewhere; FROST_GDN_IN_PROJ_SPLIT=0 in the environment
    // forces one matrix (A/B: as before, dequantized when its parts mix forms). Tests force Always.
    qwen35::Precision::InProjSplit gdn_in_proj_split = qwen35::Precision::InProjSplit::Auto;
    // CUDA batched decode kernels (engine_batch.cpp): captured per batch size when set, for dense
    // bf16 models (MoE and kept-quantized weights step their members one by one). On since the
    // GPU parity test (tests/model/test_cuda_engine_batch.cpp) passed on the H100 (2026-11-24).
    bool cuda_batched_decode = true;
    // Sliced prefill (engine_slices.cpp): one graph per layer for the prefill buckets 64 ..
    // slice_rows, so a prompt piece of up to slice_rows tokens can run a few layers at a time
    // between other sessions' decode steps. 0 = none. Clamped to prefill_chunk. The server's
    // prefill step (SchedulerConfig::prefill_step, 512) is what it serves.
    int slice_rows = 512;
    // A timing probe, not a mode to serve: ops whose label (the forward's op names, e.g. "rmsnorm",
    // "gemm lm_head", "attn_decode") contains one of these strings ("=L": is exactly L; see
    // ops::label_matches) are recorded but not launched, so a step's time without them is
    // measurable inside its captured graph, where timing an op alone misses how launches overlap.
    // Outputs are wrong. Each string must match some op of a decode or a prefill step and no
    // cursor op (create fails otherwise: the step's position and token count live in the cursor,
    // and every later op addresses memory by them; on the GPU a step without them read past the
    // KV cache). numerics() names them, so the deployment fingerprint differs.
    // `frost bench engine --leave-out`, `frost bench graph-ops`.
    std::vector<std::string> leave_out_ops;
};

// How to load weights for an engine of these options (Engine::create uses it; callers that load
// themselves and call create_from_weights should too): CUDA binds quantized linears as stored.
WeightLoadOptions weight_load_options(const EngineOptions& o);


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
    // The options that change the state's bits for the same weights, as one canonical string
    // (capsule Deployment::numerics): "rope_inv_freq=bf16|f32", ";chunk_invariant" on CUDA with
    // EngineOptions::chunk_invariant, and on CUDA with a quantized
    // checkpoint ";weights=kept|dequantized;gdn_in_proj=auto|always|never;fp8_prefill=
    // w8a8|exact;fp8_decode=w8a8|exact"; on CUDA ";prefill_tail=off" without the prefill tail.
    // Options that keep the bits (the FP8 twins, chunk sizes, batching) are not in it.
    std::string numerics() const;
    frost_ctx* ctx() const { return ctx_; }
    frost_stream* stream() const { return stream_; }
    int sessions() const { return static_cast<int>(sessions_.size()); }

    // Zeroes the session's state, cursor and sampler buffers (position 0, no token mask) and
    // applies `sampling`.
    frost_status reset(int session, const SamplingConfig& sampling = {});
    // Changes sampling of a live session: the seed restarts its RNG counter at 0, and the
    // generated-token counts (presence / frequency penalties) restart at zero: call it once per
    // request, before its prefill. Refuses bad values naming the field (nothing changes then).
    frost_status set_sampling(int session, const SamplingConfig& sampling);
    // The token mask of the session's next steps (constrained decoding): bit i of bits[i / 32] set
    // = token i allowed; words must be ceil(vocab / 32). It stays until replaced; nullptr clears
    // it (as reset() does). A mask allowing no token yields token 0. Written between steps.
    frost_status set_token_mask(int session, const uint32_t* bits, size_t words);
    // The last step's sampler record: its token and, when the sampling asked for top_logprobs >= 0,
    // the token's logprob and the top alternatives (kernels/params/sample.h).
    frost_status last_sample(int session, kernels::SampleRecord* out) const;

    // Appends ids[0..n) to the session: chunks end at absolute multiples of C_p (so a boundary
    // never depends on where an earlier call ended); each chunk is one graph replay. Samples the
    // next token from the last row's logits into *next (may be null). With logits_all, appends
    // every row's logits ([n, vocab]) to *all_logits when non-null.
    frost_status prefill(int session, const int32_t* ids, size_t n, int32_t* next,
                         std::vector<float>* all_logits = nullptr);
    // One decode step: consumes the cursor's last token (the last sampled one), writes the next
    // sampled token to *next.
    frost_status decode(int session, int32_t* next);
    // Batched decode (engine_batch.cpp, architecture.md "Batched decode"): advances the B live
    // sessions sessions[0..B) (distinct) by one token each, as decode() does for each alone, in
    // ONE step of the forward: next[i] is sessions[i]'s sampled token. Each member's tokens, state
    // and cursor are bit-identical to its solo decode. CPU: one captured graph per batch size in
    // batch_sizes() (membership is data: a slot vector in an input buffer, no recapture); a B
    // between sizes runs at the next size up with padding rows; B > kMaxBatch runs in groups.
    // CUDA (no batched kernels yet) and B == 1: the members step one by one through decode().
    // After a batched step last_logits() does not name a member's row (host-side sampling must
    // decode alone).
    frost_status decode_batch(const int* sessions, int B, int32_t* next);
    // Batch sizes with a captured batched decode graph (empty: members step one by one).
    const std::vector<int>& batch_sizes() const { return batch_sizes_; }
    // Sliced prefill (engine_slices.cpp, architecture.md "Prefill beside decode"): stages a prompt
    // piece of n <= slice_rows() tokens for the session; prefill_slices_run then runs up to `layers`
    // layers of it per call (the graphs of prefill(), cut per layer, the residual rows kept in a
    // per-session buffer), so decode steps of other sessions can run between two calls. When the
    // last layer of the last chunk ran, *done is true and *next holds the sampled token: state,
    // cursor, journal and token are bit-identical to prefill(session, ids, n). Until then the
    // session refuses decode, prefill, feed, fork from it and capsule snapshots; reset(), a
    // restore into it or a fork onto it drops the staged piece (its partial writes are overwritten).
    frost_status prefill_slices_begin(int session, const int32_t* ids, size_t n);
    frost_status prefill_slices_run(int session, int layers, bool* done, int32_t* next);
    bool prefill_slices_pending(int session) const;
    int slice_rows() const { return slice_rows_; }
    // Bytes and FLOPs of one batched step of B rows (a captured size), every member at `pos`.
    frost_status batch_step_cost(int B, int64_t pos, ops::OpCost* out);
    // Feeds a given token through the decode graph (token-by-token prefill), sampling *next.
    frost_status feed(int session, int32_t token, int32_t* next);

    // The logits the last step sampled from ([vocab]).
    frost_status last_logits(int session, std::vector<float>* out);
    // Prompt logprobs (echo): the raw logprob of every ids[i] (i >= 1) given the state and
    // ids[0..i), and the top `top_n` (<= 20) alternatives there: out[i - 1] describes ids[i]
    // (n - 1 records). ids[0..n-1) are fed one at a time through the decode graph; afterwards
    // the session holds them and the cursor's last token is ids[n - 2]: prefill ids[n - 1] next
    // to sample the continuation. Its sampling settings and mask are as before (counts restart).
    frost_status prompt_logprobs(int session, const int32_t* ids, size_t n, int top_n,
                                 std::vector<kernels::SampleRecord>* out);
    // Copies the session's cursor to the host.
    frost_status read_cursor(int session, kernels::StepCursor* out);
    int64_t position(int session) const;
    // Token journal: the ids folded into the session's state so far, in order ([0, position)).
    const std::vector<int32_t>& journal(int session) const;
    // Capsule hook: after the capsule layer copied a state + cursor into the session's buffers,
    // re-reads the cursor and adopts its position (must equal ids.size(), else FROST_ERR_CORRUPT
    // and nothing changes) and `ids` as the journal.
    frost_status adopt_restored_state(int session, const std::vector<int32_t>& ids);

    // Live fork: copies session `src`'s state + cursor (the valid bytes of every state-layout
    // buffer) into session `dst` on the device, with its position, last token and journal. The
    // sampling settings travel with the cursor (set_sampling afterwards to change them).
    frost_status fork(int src, int dst);

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
    // Load figures of this engine (any backend; `active` is true on CUDA).
    CudaEngineInfo info() const;
    // The backend object the ops dispatch to (op table, per-engine backend state).
    ops::Backend& backend() const { return *backend_; }

    // Enqueues one step of the session's forward directly on the engine's stream (no graph),
    // telling `observer` every op it launches (costs at the session's position) with a replay
    // closure: the per-op bench times the model's own recorded ops with it. A prefill step covers
    // the whole bucket of distinct token ids. The step RUNS: its state writes stay (reset the session
    // before reuse); the cursor's position is put back, so replays run at the step's position, and
    // after a prefill record its n_tokens is the bucket, so replays process every row.
    frost_status record_ops(int session, int rows, bool decode, const ops::OpObserver& observer);
    // The same for a batched decode step of `B` members (the captured sizes: 2, 4, 8): call
    // decode_batch() on those members first, so the slot vector and gathered cursors the replays
    // read are the step's. Each replay of the cursor advance moves the members on by one token.
    frost_status record_batch_ops(int B, const ops::OpObserver& observer);
    // Bytes and FLOPs of one step (the ops' cost model) with the step's rows at position `pos`,
    // without running anything; prefill_cost sums the chunks of an n-token prefill from 0.
    frost_status step_cost(int rows, bool decode, int64_t pos, ops::OpCost* out);
    frost_status prefill_cost(int64_t n, ops::OpCost* out);
    // The same step by op label, in first-recorded order: how many of the step's ops carry each
    // label and their summed cost (what EngineOptions::leave_out_ops "=label" leaves out).
    struct LabelCost {
        std::string label;
        int ops = 0;
        ops::OpCost cost;
        ops::OpKind kind = ops::OpKind::Count;  // the first op's kind under the label
    };
    frost_status step_label_costs(int rows, bool decode, int64_t pos, std::vector<LabelCost>* out);

private:
    Engine() = default;
    frost_status init(const ModelWeights& w, const EngineOptions& opts);
    frost_status alloc_scratch();
    // StepSpec::fp8_twin_only: EngineOptions::fp8_twin_only unless FROST_FP8_TWIN_ONLY=0.
    bool fp8_twin_only() const;
    // StepSpec::tail: EngineOptions::prefill_tail unless FROST_PREFILL_TAIL=0.
    bool prefill_tail() const;
    // Elements of the largest quantized GEMM weight (the prefill dequant tile; 0 when none).
    size_t largest_quantized_matrix() const;
    frost_status alloc_session(int index);
    // EngineOptions::leave_out_ops: each string matches an op label of a decode or prefill step.
    frost_status check_leave_out();
    // The Exec every recorded step runs with.
    ops::Exec exec(frost_stream* st, const ops::OpObserver* observer, bool dry_run, int64_t context) const {
        return ops::Exec{st, backend_.get(), observer, dry_run, context,
                         opts_.leave_out_ops.empty() ? nullptr : &opts_.leave_out_ops};
    }
    frost_status capture_session(int index);
    frost_status record(int session, int rows, bool decode, const ops::OpObserver* observer, frost_stream* st,
                        bool dry_run = false, int64_t context = 0);
    frost_status trace_copy(frost_stream* st, const char* name, int layer, const ops::Tensor& src);
    frost_status run_chunk(int session, const int32_t* ids, int n, bool decode_graph);
    frost_status prefill_pipelined(int session, const int32_t* ids, size_t n);
    frost_status collect_token(int session);  // the step's token (+ record) back, synced
    frost_status alloc_prompt_staging();
    frost_status check_session(int session) const;
    frost_status write_cursor_field(int session, size_t offset, const void* src, size_t bytes);
    // Batched decode (engine_batch.cpp): the session pointer table and batch inputs, the graph of
    // every batch size, and one step of `B` rows.
    frost_status alloc_batch();
    frost_status capture_batch();
    frost_status record_batch(int B, const ops::OpObserver* observer, frost_stream* st, bool dry_run,
                              int64_t context);
    frost_status run_batch(const int* sessions, int n, int32_t* next);
    // Sliced prefill (engine_slices.cpp): the per-session residual buffers and layer graphs, the
    // staged piece of each session, and the refusal of other steps while one is staged.
    frost_status alloc_slices();
    frost_status capture_slices(int session);
    frost_status check_no_slices(int session, const char* what) const;
    void drop_slices(int session);
    struct SlicedPiece {
        std::vector<int32_t> ids;  // the staged tokens
        std::vector<int> takes;    // its chunks on the absolute C_p grid
        size_t chunk = 0;          // the chunk running now
        size_t done = 0;           // tokens of the finished chunks
        int layer = 0;             // its next layer
        bool active = false;
    };
    std::vector<SlicedPiece> slices_;          // per session
    std::vector<ops::Tensor> slice_h_;         // per session: [slice_rows, H] residual rows
    int slice_rows_ = 0;

    ModelConfig cfg_;
    EngineOptions opts_;
    frost_ctx* ctx_ = nullptr;
    frost_stream* stream_ = nullptr;
    std::unique_ptr<ops::Backend> backend_;
    qwen35::Precision prec_;
    std::unique_ptr<BufferList> weight_bufs_, scratch_bufs_;
    std::vector<std::unique_ptr<BufferList>> session_bufs_;
    qwen35::WeightViews weights_;
    qwen35::ScratchViews scratch_;
    std::vector<qwen35::SessionViews> sessions_;
    std::vector<frost_buffer*> cursor_bufs_;   // per session: its cursor buffer
    qwen35::TraceHook trace_hook_;
    std::vector<int64_t> host_pos_;      // host mirror of each cursor's position
    std::vector<std::vector<int32_t>> journal_;  // per session: ids folded into the state
    std::vector<int32_t> last_token_;    // host mirror of each cursor's last_token
    // The sampler's per-request device buffers (settings, counts, seen, mask), one list per
    // session. NOT state: counts belong to a request, not to a prefix, so a capsule holds none of
    // them; `seen` is a function of the journal (rebuilt on restore); the mask is the caller's.
    std::vector<std::unique_ptr<BufferList>> sampler_bufs_;
    std::vector<SamplingConfig> sampling_;       // per session, as last applied
    std::vector<kernels::SampleRecord> last_record_;  // per session: the last step's record
    std::vector<int32_t> mask_on_;               // per session: a token mask applies
    frost_buffer* record_buf_ = nullptr;         // device scratch: the step's SampleRecord
    frost_buffer* record_staging_ = nullptr;     // host-pinned: its read-back
    frost_status alloc_sampler(int index);
    frost_status sampler_settings(const SamplingConfig& sc, kernels::SamplerSettings* out) const;
    frost_status write_sampler(int session, const kernels::SamplerSettings& s);
    frost_status write_seen(int session);  // seen bits from the journal
    frost_status read_record(int session);
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
    CudaEngineInfo info_;                // load figures (weights_ms, capture_ms, bytes)
    bool quantized_checkpoint_ = false;  // the checkpoint declares quantized modules (numerics())
    std::unique_ptr<BufferList> batch_bufs_;  // batched decode: table + step inputs (not per session)
    frost_graph* batch_graph_ = nullptr;  // batched decode: one variant per size in batch_sizes_
    std::vector<int> batch_sizes_;
    frost_buffer* batch_table_buf_ = nullptr;  // [sessions, slot_stride] pointers
    frost_buffer* batch_slots_buf_ = nullptr;  // [kMaxBatch] i32 member sessions of the step
    frost_buffer* batch_out_buf_ = nullptr;    // [kMaxBatch] i32 sampled tokens
    frost_buffer* batch_staging_ = nullptr;    // host-pinned [slots | tokens], 2 * kMaxBatch i32
};

// ShapeKey of a step graph: phase (prefill/decode) and rows of the bucket.
frost_shape_key step_key(bool decode, int rows);
// ShapeKey of a batched decode graph of B rows.
frost_shape_key batch_key(int B);
// ShapeKey of a sliced-prefill graph: one layer of a prefill bucket of `rows`.
frost_shape_key slice_key(int layer, int rows);

}  // namespace frost::model
