// The Qwen3.5 hybrid forward of one step, written once against the ops layer (ops/ops.h) and
// recorded on either backend: the dtypes come from the views (state layout, weight table,
// scratch), so the text has no backend branch. Rows = the bucket's capacity (1 = decode); the
// true count of a prefill chunk is read from the cursor at run time.
#pragma once
#include <functional>
#include <vector>

#include "model/config.h"
#include "model/qwen35/weight_table.h"
#include "ops/ops.h"

namespace frost::model::qwen35 {

// Batched decode inputs shared by every session (architecture.md "Batched decode"): the session
// pointer table (layout.h slot_stride / slot_column) and, per row of a batched step, the member
// session (-1: padding), its gathered cursor and its sampled token. Capacity kMaxBatch rows.
constexpr int kMaxBatch = 8;
struct BatchViews {
    void* const* table = nullptr;            // [sessions, slot_stride] device pointers
    int32_t sessions = 0;
    int32_t* slots = nullptr;                // [kMaxBatch] device, written by the host per step
    kernels::StepCursor* cursors = nullptr;  // [kMaxBatch] device
    int32_t* out_tokens = nullptr;           // [kMaxBatch] device
};

// Activations shared by every session (one stream runs one step at a time). R = C_p rows; each
// view is [R, width] contiguous in the backend's activation dtype unless noted.
struct ScratchViews {
    int32_t* ids = nullptr;   // [R] token inputs
    ops::Tensor h;            // residual stream [R, H]
    ops::Tensor x;            // normed mixer / MLP input [R, H]
    ops::Tensor proj;         // projection outputs [R, proj_width]
    ops::Tensor conv_out;     // conv + SiLU + l2norm (q | k | v) [R, C]
    ops::Tensor beta, g;      // [R, Hv] f32
    ops::Tensor core;         // GDN / attention output [R, core_width]
    ops::Tensor gated;        // gated RMSNorm output [R, V]
    ops::Tensor act;          // SwiGLU output [R, F]
    ops::Tensor fin;          // final norm [logit_rows, H]
    ops::Tensor logits;       // [logit_rows, vocab] f32
    ops::Tensor gdn_work, attn_work, sample_work;  // f32 backend scratch
    ops::Tensor sample_idx;   // i32 backend scratch (may be empty)
    // MoE models only (one set, reused by every MoE layer): router outputs and expert scratch.
    ops::Tensor moe_probs;    // [R, E] f32 router probabilities of the MoE layer just run
    ops::Tensor moe_ids;      // [R, k] i32 selected experts
    ops::Tensor moe_w;        // [R, k] f32 their mixing weights
    ops::Tensor moe_work;     // f32 backend scratch (Backend::moe_work_floats)
    // W8A8 prefill (StepSpec::fp8_w8a8_prefill) with the GEMM inputs quantized by their producers
    // (ops.h Fp8Act): the one twin in flight (each is read by the GEMM right after its producer),
    // e4m3 bytes [R, K] and scales [K/128, fp8_act_ld(R)] for the widest K of an FP8 GEMM. Empty
    // when the engine does not fuse (then each FP8 GEMM quantizes its own input).
    ops::Tensor fp8_q;        // u8
    ops::Tensor fp8_scale;    // f32
    int32_t* out_token = nullptr;  // [1]
    kernels::StepCursor* tail_cursor = nullptr;  // [1] the cursor of a prefill's tail row (StepSpec::tail)
    kernels::SampleRecord* sample_record = nullptr;  // [1] the step's token + logprobs
    BatchViews batch;              // batched decode (empty when the engine has none)
};

// One session's state, as views of the buffers the state layout declared.
struct SessionViews {
    kernels::StepCursor* cursor = nullptr;
    std::vector<ops::Tensor> conv, rec, k_cache, v_cache;  // per layer (empty where the kind is absent)
    // The sampler's per-request buffers (not state: no capsule holds them; engine.h says why).
    kernels::SamplerSettings* sampler = nullptr;  // [1]
    int32_t* counts = nullptr;                    // [vocab]
    uint32_t* seen = nullptr;                     // [ceil(vocab/32)]
    uint32_t* mask = nullptr;                     // [ceil(vocab/32)]
};

// Debug copy-out of a named activation (EngineOptions::trace): called after the op producing it.
using TraceHook = std::function<frost_status(frost_stream*, const char* name, int layer, const ops::Tensor& src)>;

struct StepSpec {
    int rows = 1;             // bucket capacity
    bool decode = false;      // input from cursor.last_token, recurrent GDN, GEMV forms, PDL
    bool logits_all = false;  // lm_head over every row (eval), else the last row only
    bool rope_inv_freq_bf16 = true;
    bool fp8_w8a8_prefill = false;  // EngineOptions::fp8_w8a8_prefill
    bool fp8_w8a8_decode = false;   // EngineOptions::fp8_w8a8_decode
    // With the twins (ScratchViews::fp8_q): a producer whose every reader is an FP8 GEMM that reads
    // only the twin (Backend::gemm_reads_twin) skips its bf16 output (EngineOptions::fp8_twin_only).
    bool fp8_twin_only = false;
    // > 0: a batched decode step of `batch` rows (= rows), row r one token of session
    // scratch.batch.slots[r]; the SessionViews passed are only the shape template (any session).
    int batch = 0;
    // A layer slice of a prefill step (sliced prefill, architecture.md "Prefill beside decode"):
    // layers [layer_begin, layer_end) only; the embedding runs with layer 0, the final norm,
    // lm_head, sample and cursor advance with the last layer. layer_end -1 = every layer. The
    // residual rows then live in ScratchViews::h across the slices (the caller points it at a
    // per-session buffer no other step writes).
    int layer_begin = 0;
    int layer_end = -1;
    // A prefill whose logits are its last row's (no logits_all, no trace hook) runs the last
    // layer past its state-writing ops on that row alone (forward.cpp "the tail"; needs
    // ScratchViews::tail_cursor). Session state is the same; the last row's logits come from the
    // decode forms of those ops. Off: every row, as eval does (EngineOptions::prefill_tail).
    bool tail = true;
};

// Enqueues one whole step on ex.stream (normally while it is being captured into a graph).
frost_status record_step(const ops::Exec& ex, const ModelConfig& c, const WeightViews& w, const ScratchViews& s,
                         const SessionViews& ss, const StepSpec& step, const TraceHook* trace);

}  // namespace frost::model::qwen35
