// The ops layer: the vocabulary the model's forward is written in. Each op takes a params struct
// of tensor views (tensor.h) plus the per-step values it reads from the device (row count,
// StepCursor), and is implemented twice behind one dispatch point (op_<name> below -> the
// Backend's OpTable): cpu/ composes the fp32 reference kernels (bf16 inputs are widened), cuda/
// wraps the bf16 launchers of src/kernels/cuda. Fused ops exist where the CUDA path fuses; the
// forward decides which to call per step, identically on both backends. Every op reports its
// bytes and FLOPs (cost.h: the one cost model) and, when an OpObserver is attached, itself.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "kernels/params.h"
#include "ops/tensor.h"

namespace frost::ops {

using kernels::CursorOp;
using kernels::kCursorAdvance;
using kernels::kCursorDecodeBegin;
using kernels::StepCursor;

// Rows a per-token op touches: *n if non-null (clamped to max), else max.
struct Rows {
    int32_t max = 0;
    const int32_t* n = nullptr;
};

// Batched decode (architecture.md "Batched decode"): row r of a launch is one token of the live
// session slots[r] (< 0: a padding row, skipped by every op that touches state). Which sessions
// take part is DATA read at run time, so one captured graph per batch size serves any
// membership. A session's state buffers come from the engine's session pointer table
// ([sessions, stride] pointers, written once at allocation; layout in qwen35/layout.h
// slot_column): this op's buffer at `column` (the V cache of KvAppendOp / AttentionOp at
// column + 1). cursors[r] is the step's gathered copy of row r's cursor (CursorOpParams gathers
// it at decode_begin and writes it back at advance). Off (slots == nullptr): the op runs on its
// own state view and cursor, one session per launch. The op's state view still gives the shape
// and dtype (every session has the same layout).
struct BatchSlots {
    void* const* table = nullptr;   // [sessions, stride] device pointers
    int32_t stride = 0;
    int32_t column = 0;
    int32_t sessions = 0;
    const int32_t* slots = nullptr;  // [B] device (session index or -1)
    StepCursor* cursors = nullptr;   // [B] device gathered cursors
    int32_t B = 0;
    bool on() const { return slots != nullptr; }
};

// W8A8 prefill activations as the FP8 GEMM reads them (GemmOp::quant_act; on CUDA
// kernels/cuda/lm_gemm_fp8.h act_quant_fp8_launch's layout): e4m3 bytes of M rows of K (K a
// multiple of 128), and per row and 128-wide group an fp32 scale, group g of row m at
// scale[g * ld + m], ld = fp8_act_ld(M). Each group is quantized from the activations' stored
// values (bf16 on CUDA) as GemmOp::quant_act does: s = max|x| / 448 (1 for zeros), e4m3(x / s).
// The ops producing a GEMM input can write this twin beside their output (AddRmsNormOp,
// GatedRmsNormOp, SwigluOp: `yq`), so the GEMM skips its own quantization pass (GemmOp::xq).
// Where every reader of the output is such a GEMM and reads only the twin (Backend::
// gemm_reads_twin), the producer may also skip the bf16 output itself (`yq_only`): then only the
// twin is a result and y's bytes are unspecified after the op (CUDA leaves them as they were where
// its kernel makes the twin in the same pass, else stores y and quantizes that; the CPU uses y as
// its working storage).
struct Fp8Act {
    Tensor q;               // [M, K] U8, contiguous rows
    Tensor scale;           // [K / 128, fp8_act_ld(M)] F32
    bool on() const { return !q.empty(); }
    // Whether the views have fp8_act's layout for [rows, K] (K a multiple of 128): the check both
    // backends make before writing or reading a twin.
    bool fits(int64_t rows, int64_t K) const;
};
inline int64_t fp8_act_ld(int64_t M) { return (M + 3) / 4 * 4; }
// Views of a twin of [M, K] over the bytes at q and the floats at scale.
Fp8Act fp8_act(void* q, void* scale, int64_t M, int64_t K);
// Whether a W8A8 prefill GEMM (GemmOp::quant_act) takes weight w [N, K], K a multiple of 128: FP8
// in any scale layout, or INT4 in 128-wide groups (W4A8: each value q - zp is an integer in
// [-15, 15], exact in e4m3, so only the activations are rounded). The engine sets quant_act and
// sizes the twins by it; a backend may still run a shape exact where it has no FP8 plan.
bool w8a8_weight(const Tensor& w);

enum class OpKind : int {
    Embed, AddRmsNorm, QkNormRope, Conv1dSiluL2, GdnGate, GdnChunk, GdnStep, GatedRmsNorm, KvAppend,
    AttentionPrefill, AttentionDecode, Gemm, Swiglu, Sample, Cursor, Moe, GdnDecode,
    QkRopeKvAppend, TailRow, Count
};
const char* op_name(OpKind k);
constexpr int kOpCount = static_cast<int>(OpKind::Count);

// y[r] = table[ids[r]].
struct EmbedOp {
    Tensor table;           // [vocab, dim]
    const int32_t* ids;     // [max rows] device
    Tensor y;               // [rows, dim]
    Rows rows;
};

// (h += delta when delta is set) then y = h * rsqrt(mean(h^2) + eps) * g, g = 1 + w if zero_centred.
// last_row_only: only row (*n - 1) is normalised, into y row 0 (the final norm before lm_head).
struct AddRmsNormOp {
    Tensor h;               // [rows, dim] residual stream
    Tensor delta;           // [rows, dim] or empty
    Tensor w;               // [dim] f32
    Tensor y;               // [rows, dim]
    float eps = 0;
    int32_t zero_centred = 1;
    int32_t last_row_only = 0;
    Rows rows;
    int32_t pdl = 0;        // launch hint: programmatic dependent launch (decode graphs); 2: and its
                            // reader may start before this op's own wait (AddRmsNormBf16Params::pdl)
    Fp8Act yq{};           // optional: y's FP8 twin [rows, dim] (not with last_row_only)
    int32_t yq_only = 0;   // with yq: y is no result, its bytes unspecified after the op (Fp8Act)
};

// Per-head zero-centred RMSNorm of q and k, then partial NeoX RoPE at position cursor->pos + row.
struct QkNormRopeOp {
    Tensor q;               // [rows, Hq, d] in place
    Tensor k;               // [rows, Hkv, d] in place
    Tensor q_w, k_w;        // [d] f32
    int32_t rotary_dim = 0;
    float eps = 0;
    float theta = 0;
    int32_t inv_freq_bf16 = 0;
    int32_t max_rows = 0;
    const StepCursor* cursor = nullptr;
    BatchSlots batch;       // on: row r's position is batch.cursors[r].pos (no state column)
};

// Causal depthwise conv1d (state = last K-1 inputs) + SiLU, then l2norm of the first l2_heads
// heads of l2_dim channels (q heads then k heads), q heads also scaled by q_scale.
struct Conv1dSiluL2Op {
    Tensor x;               // [rows, C] pre-activation
    Tensor w;               // [C, K] f32
    Tensor state;           // [C, K-1] in place
    Tensor y;               // [rows, C]
    int32_t l2_dim = 0, l2_heads = 0, l2_q_heads = 0;
    float l2_eps = 0, q_scale = 1;
    Rows rows;
    int32_t pdl = 0;
    BatchSlots batch;       // on: row r's state is the conv column of session slots[r]
};

// beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias).
struct GdnGateOp {
    Tensor b, a;            // [rows, Hv] with a row stride
    Tensor A_log, dt_bias;  // [Hv] f32
    Tensor beta, g;         // [rows, Hv] f32
    Rows rows;
};

// Gated delta rule over the rows (chunked at absolute multiples of `chunk`), beta/g given, or
// computed first by gate (optional, gate.b set: its beta / g are this op's; a backend may fold it
// into its chunk kernels and leave beta / g unwritten: CUDA's prep computes them itself with the
// gate kernel's formulas, one launch fewer, the same values; FROST_PREFILL_FUSE=0 runs the gate's
// own launch for A/B runs).
struct GdnChunkOp {
    Tensor q, k;            // [rows, Hk, dk] (q l2-normed and scaled, k l2-normed)
    Tensor v;               // [rows, Hv, dv]
    Tensor beta, g;         // [rows, Hv] f32 (with gate: its output, scratch after the op)
    GdnGateOp gate;
    Tensor state;           // [Hv, dk, dv] f32 in place
    Tensor o;               // [rows, Hv * dv]
    Tensor work;            // backend scratch (gdn_work_floats), may be empty on CPU
    int32_t chunk = 64;
    int32_t max_rows = 0;
    const StepCursor* cursor = nullptr;
};

// One recurrent gated-delta-rule step per row with the gate fused: beta and g come from the raw
// projections b / a (GdnGateOp's formulas); beta / g views are scratch the CPU side fills.
struct GdnStepOp {
    Tensor q, k, v, state, o;   // as GdnChunkOp
    Tensor b, a;                // [rows, Hv] raw gate inputs
    Tensor A_log, dt_bias;      // [Hv] f32
    Tensor beta, g;             // [rows, Hv] f32 scratch
    int32_t max_rows = 0;
    const StepCursor* cursor = nullptr;
    int32_t pdl = 0;
    BatchSlots batch;           // on: row r's state is the recurrent column of session slots[r]
};

// y = w * rmsnorm(x) * silu(z) per value head.
struct GatedRmsNormOp {
    Tensor x;               // [rows, heads * dim] contiguous
    Tensor z;               // [rows, heads * dim] with a row stride
    Tensor w;               // [dim] f32
    Tensor y;               // [rows, heads * dim]
    int32_t heads = 0, dim = 0;
    float eps = 0;
    Rows rows;
    int32_t pdl = 0;
    Fp8Act yq{};           // optional: y's FP8 twin [rows, heads * dim]
    int32_t yq_only = 0;   // with yq: y is no result, its bytes unspecified after the op (Fp8Act)
};

// Copies this launch's K / V rows into the caches at cursor->pos + row.
struct KvAppendOp {
    Tensor k, v;            // [rows, kv_dim] with a row stride
    Tensor k_cache, v_cache;  // [max_seq, Hkv, d]
    int32_t max_rows = 0;
    const StepCursor* cursor = nullptr;
    BatchSlots batch;       // on: row r appends to session slots[r]'s caches at its own position
};

// Attention's inputs, decode and prefill: qk (per-head norm + RoPE of q and k) then kv (the KV
// append of the same rows, k as qk left it), each with its own op's semantics. One op so a backend
// may run it as one launch (CUDA does, same bits; FROST_DECODE_FUSE=0 for launches of at most
// kGemvMaxRows rows, FROST_PREFILL_FUSE=0 for larger ones, run the two launches).
struct QkRopeKvAppendOp {
    QkNormRopeOp qk;
    KvAppendOp kv;
};

// Causal GQA attention over cache [0, pos + row], then o *= sigmoid(gate) when gate is set.
struct AttentionOp {
    Tensor q;               // [rows, Hq, d]
    Tensor gate;            // same geometry as q, or empty
    Tensor k_cache, v_cache;  // [max_seq, Hkv, d]
    Tensor o;               // [rows, Hq * d]
    Tensor work;            // backend scratch (attn_work_floats), may be empty on CPU
    float scale = 0;
    int32_t max_rows = 0;
    const StepCursor* cursor = nullptr;
    BatchSlots batch;       // decode only; on: row r attends session slots[r]'s caches [0, its pos]
};

enum class Epilogue : int32_t {
    None = 0,      // y = x W^T
    Residual = 1,  // y += x W^T (the fused residual add)
    SwiGLU = 2,    // W = [gate; up] ([2F, K]): y = silu(x W_gate^T) * (x W_up^T), y [rows, F]
};

// y = x W^T over M = x.rows rows (a GEMV when M == 1), with an epilogue.
struct GemmOp {
    Tensor x;               // [M, K] with row stride
    Tensor w;               // [N, K] (N = 2F for SwiGLU); on CUDA also a quantized view (tensor.h):
                            // M = 1 quantized GEMV (epilogues fused), M > 1 dequant tile + GEMM
    Tensor y;               // [M, N] (or [M, F]); f32 or the activation dtype
    Tensor tmp;             // SwiGLU on CPU: [M, 2F] for the projection before the epilogue
    Epilogue epilogue = Epilogue::None;
    const int32_t* n_rows = nullptr;  // valid rows (CPU skips the rest; CUDA computes all M)
    int32_t pdl = 0;
    // W8A8 for FP8 weights (the checkpoint's dynamic activation scheme; W4A8 for INT4 weights in
    // 128-wide groups, w8a8_weight): x is quantized per row and 128-wide k group to e4m3
    // (scale = max|x| / 448, round to nearest even, saturating) before the product. CUDA runs it
    // on FP8 tensor cores where the shape allows, else ignores it: prefill rows (M > 1 without
    // PDL) on cuBLASLt's block-scaled GEMM (lm_gemm_fp8.h, 128x128 blocks, or per-row scales:
    // per-128 rows, per-channel, INT4 groups converted to e4m3 in the backend's tile), decode
    // rows in the quantized GEMV (lm_gemv_quant.h act_fp8, any FP8 layout, K a multiple of 128;
    // INT4 decode keeps bf16 x). The CPU quantizes x the same way (bit for bit) and multiplies in
    // fp32, so both agree to accumulation order.
    int32_t quant_act = 0;
    // With quant_act: x already quantized by the op that produced it (Fp8Act over x's M rows and
    // K columns, the very numbers quant_act would make of x), used instead of quantizing x again.
    // x stays given: a shape without the FP8 path multiplies x itself.
    Fp8Act xq{};
    // x's values were never written (its producer ran with yq_only): the GEMM must read xq and
    // fails where it cannot (the caller asked Backend::gemm_reads_twin first). x still gives M, K.
    int32_t xq_only = 0;
};

// The GDN layer's decode step: conv (conv1d + SiLU + q/k l2norm), step (the gated delta rule with
// its gates) and norm (the gated RMSNorm), in that order, each with the semantics of its own op;
// step reads conv.y and norm reads step.o. One op so a backend may run it as one launch (CUDA
// does, with the three ops' bits; FROST_DECODE_FUSE=0 runs the three launches for A/B).
//
// gates (optional, w set): the GDN's gate projections [b | a] = x · wᵀ, run first and written to
// the columns step.b and step.a read (a checkpoint whose in_proj is quantized keeps them a bf16
// tail: weight_table.h split_gdn_in_proj). In the op, the backend may fold them into the same
// launch: CUDA computes them with its own fixed-order dot (lm_gdn_gate_dot.cuh), fused or not, so
// decode's bits do not depend on the fusion. bf16 weight [2 Hv, K], no epilogue, one row per step
// row, y's columns step.b then step.a (the weight in the activation dtype; CUDA folds bf16 only).
struct GdnDecodeOp {
    Conv1dSiluL2Op conv;
    GdnStepOp step;
    GatedRmsNormOp norm;
    GemmOp gates;
};

// y[r, i] = silu(x[r, i]) * x[r, F + i].
struct SwigluOp {
    Tensor x;               // [rows, 2F]
    Tensor y;               // [rows, F]
    Rows rows;
    Fp8Act yq{};           // optional: y's FP8 twin [rows, F]
    int32_t yq_only = 0;   // with yq: y is no result, its bytes unspecified after the op (Fp8Act)
};

// Samples one token with the cursor's sampling settings; writes *out_token and cursor->last_token.
struct SampleOp {
    Tensor logits;          // [rows, vocab] f32; row (*n_rows - 1) if select_last_row else row 0
    int32_t select_last_row = 0;
    const int32_t* n_rows = nullptr;
    Tensor work;            // f32 scratch (sample_work_floats)
    Tensor work_idx;        // i32 scratch (sample_idx_ints; empty on CUDA)
    StepCursor* cursor = nullptr;
    int32_t* out_token = nullptr;
    // Per-session sampler state (kernels/params/sample.h); all null = plain sampling.
    const kernels::SamplerSettings* settings = nullptr;  // [1]
    int32_t* counts = nullptr;       // [vocab] generated-token counts of the request
    uint32_t* seen = nullptr;        // [ceil(vocab/32)] tokens in the state
    const uint32_t* mask = nullptr;  // [ceil(vocab/32)] allowed tokens (settings->mask_on)
    const int32_t* ids = nullptr;    // [rows] this step's input ids
    int32_t count_inputs = 0;        // 1 in the decode graph: its input was generated
    kernels::SampleRecord* record = nullptr;  // [1] the step's token + logprobs, may be null
};

struct CursorOpParams {
    StepCursor* cursor = nullptr;
    int32_t* ids = nullptr;  // decode_begin writes last_token to ids[0]
    int32_t op = kCursorAdvance;
    // Batched decode (column 0 = the cursor): decode_begin first GATHERS each member's cursor
    // into batch.cursors[r] (a padding row gets a zeroed greedy cursor) and writes ids[r];
    // advance advances batch.cursors[r] and SCATTERS it back to the member's cursor buffer.
    BatchSlots batch;
};

// A prefill's tail (model/qwen35/forward.cpp): the last layer, past the ops that write session
// state, runs on the step's last row alone. Row n - 1 (n = cursor->n_tokens clamped to
// [1, max_rows]) of each view moves to the view's row 0, and *tail becomes the cursor of that
// row: pos + n - 1, one token, every other field copied (the attention of that one row reads it).
struct TailRowOp {
    Tensor views[kernels::kTailSegments];  // [>= max_rows, cols] with row stride; empty = unused
    int32_t max_rows = 0;
    const StepCursor* cursor = nullptr;
    StepCursor* tail = nullptr;
};
// Its kernel params (both backends): the used views as byte segments, any dtype.
kernels::TailRowParams tail_row_params(const TailRowOp& p);

// Sparse mixture-of-experts MLP of one layer with the residual add fused (the math of
// kernels/params/moe.h): per row, fp32 softmax router over E experts, top-k (ties: lower id),
// weights renormalised when norm_topk, routed SwiGLU experts + the sigmoid-gated shared expert,
// y += the sum. The selected ids / weights are written to device memory (topk_ids / topk_w), so
// a captured decode graph follows new routing every step without recapture.
struct MoeOp {
    Tensor x;                // [rows, H] post-attention norm output (contiguous)
    Tensor y;                // [rows, H] residual stream (contiguous), accumulated into
    Tensor router;           // [E, H]
    Tensor experts_gate_up;  // [E * 2I, H]: expert e = rows [e*2I, e*2I + I) gate, then I rows up
    Tensor experts_down;     // [E * H, I]: expert e = rows [e*H, (e+1)*H)
    Tensor shared_gate_up;   // [2Is, H]
    Tensor shared_down;      // [H, Is]
    Tensor shared_gate;      // [1, H] (the shared expert's sigmoid gate)
    Tensor probs;            // [rows, E] f32 out: router probabilities (kept for traces)
    Tensor topk_ids;         // [rows, k] i32 out
    Tensor topk_w;           // [rows, k] f32 out
    Tensor work;             // f32 backend scratch (Backend::moe_work_floats)
    int32_t E = 0, k = 0, I = 0, Is = 0;
    int32_t norm_topk = 1;
    // Prefill over FP8 experts (EngineOptions::fp8_w8a8_prefill): the experts' inputs (x, and each
    // expert's SwiGLU activations) quantized per row and 128-wide group to e4m3, GemmOp::quant_act's
    // rounding. CUDA multiplies them on FP8 tensor cores where the layout allows (cuda_ops.cpp
    // moe_w8a8) and runs exact elsewhere; the CPU reference applies the rounding to its fp32 values
    // (kernels/cpu/moe.cpp; H, I, Is multiples of 128, else refused). The CPU engine never sets it:
    // its weights are dequantized fp32.
    int32_t quant_act = 0;
    Rows rows;
};

// Work of one launch at its row capacity (performance.md: bytes and FLOPs are part of a kernel's
// contract). `rows` / `pos` override the capacity / context length where they matter.
struct OpCost {
    double flops = 0;
    double bytes = 0;
    // The part of flops that W8A8 prefill runs on FP8 tensor cores (GemmOp / MoeOp quant_act over
    // FP8 or W4A8 weights), which a floor counts at the FP8 GEMM ceiling rather than the bf16 one.
    // It counts what the op asks for: the CUDA backend still runs a product exact where it has no
    // FP8 plan (K below lm_gemm_fp8.h's kFp8MinK, 512: only test-sized shapes).
    double flops_fp8 = 0;
    void add(const OpCost& o) { flops += o.flops; bytes += o.bytes; flops_fp8 += o.flops_fp8; }
};

class Backend;

// What an attached observer is told of every op the forward enqueues: its kind, a label naming
// its place in the model, its cost, and a closure that enqueues the very same launch again (the
// per-kernel bench times the model's own ops with it).
struct OpRecord {
    OpKind kind;
    const char* label;
    OpCost cost;
    std::function<frost_status(frost_stream*)> replay;
    int32_t pdl = -1;  // the op's launch hint (its struct's pdl) where it has one, else -1
};
using OpObserver = std::function<void(const OpRecord&)>;

// Where ops go: the stream, the engine's backend object (op table + per-engine state such as the
// cuBLASLt plan cache) and an optional observer.
struct Exec {
    frost_stream* stream = nullptr;
    Backend* backend = nullptr;
    const OpObserver* observer = nullptr;
    // Cost queries: dry_run checks and reports every op (observer) without launching it;
    // context > 0 is the number of keys an attention row attends (else the cache capacity).
    bool dry_run = false;
    int64_t context = 0;
    // A timing probe (EngineOptions::leave_out_ops): an op whose label matches one of these parts
    // (label_matches) is checked and reported to the observer but not launched. Outputs are then wrong.
    const std::vector<std::string>* leave_out = nullptr;
};

// A leave-out part against an op label: "=L" matches the label L exactly, any other non-empty part
// every label that contains it ("rmsnorm" matches "rmsnorm input" and "final rmsnorm").
bool label_matches(const char* label, const std::string& part);

frost_status op_embed(const Exec& ex, const EmbedOp& p, const char* label = "embed");
frost_status op_add_rmsnorm(const Exec& ex, const AddRmsNormOp& p, const char* label = "rmsnorm");
frost_status op_qk_norm_rope(const Exec& ex, const QkNormRopeOp& p, const char* label = "qk_norm_rope");
frost_status op_conv1d_silu_l2(const Exec& ex, const Conv1dSiluL2Op& p, const char* label = "conv1d+silu+l2norm");
frost_status op_gdn_gate(const Exec& ex, const GdnGateOp& p, const char* label = "gdn_gate");
frost_status op_gdn_chunk(const Exec& ex, const GdnChunkOp& p, const char* label = "gdn_chunk");
frost_status op_gdn_step(const Exec& ex, const GdnStepOp& p, const char* label = "gdn_step+gate");
frost_status op_gated_rmsnorm(const Exec& ex, const GatedRmsNormOp& p, const char* label = "gated_rmsnorm");
frost_status op_gdn_decode(const Exec& ex, const GdnDecodeOp& p, const char* label = "gdn_decode");
frost_status op_kv_append(const Exec& ex, const KvAppendOp& p, const char* label = "kv_append");
frost_status op_qk_rope_kv_append(const Exec& ex, const QkRopeKvAppendOp& p, const char* label = "qk_norm_rope+kv_append");
frost_status op_attention_prefill(const Exec& ex, const AttentionOp& p, const char* label = "attn_prefill");
frost_status op_attention_decode(const Exec& ex, const AttentionOp& p, const char* label = "attn_decode");
frost_status op_gemm(const Exec& ex, const GemmOp& p, const char* label = "gemm");
frost_status op_swiglu(const Exec& ex, const SwigluOp& p, const char* label = "swiglu");
frost_status op_sample(const Exec& ex, const SampleOp& p, const char* label = "sample");
frost_status op_cursor(const Exec& ex, const CursorOpParams& p, const char* label = "cursor");
frost_status op_moe(const Exec& ex, const MoeOp& p, const char* label = "moe");
frost_status op_tail_row(const Exec& ex, const TailRowOp& p, const char* label = "tail row");

// The one cost model (cost.cpp), at the params' row capacity.
OpCost cost_of(const EmbedOp& p);
OpCost cost_of(const AddRmsNormOp& p);
OpCost cost_of(const QkNormRopeOp& p);
OpCost cost_of(const Conv1dSiluL2Op& p);
OpCost cost_of(const GdnGateOp& p);
OpCost cost_of(const GdnChunkOp& p);
OpCost cost_of(const GdnStepOp& p);
OpCost cost_of(const GatedRmsNormOp& p);
OpCost cost_of(const GdnDecodeOp& p);  // the three ops' sum
OpCost cost_of(const KvAppendOp& p);
OpCost cost_of(const QkRopeKvAppendOp& p);  // the two ops' sum
OpCost cost_of(const AttentionOp& p, int64_t context);  // context: keys attended per row
OpCost cost_of(const GemmOp& p);
OpCost cost_of(const SwigluOp& p);
OpCost cost_of(const SampleOp& p);
OpCost cost_of(const CursorOpParams& p);
// Active work only: the router, the k routed experts of each row (at most min(E, rows * k)
// distinct experts' weights read) and the shared expert; the idle experts cost nothing.
OpCost cost_of(const MoeOp& p);
OpCost cost_of(const TailRowOp& p);

// One function per op, per backend. cpu/cpu_ops.cpp and cuda/cuda_ops.cpp fill one each.
struct OpTable {
    frost_status (*embed)(const Exec&, const EmbedOp&) = nullptr;
    frost_status (*add_rmsnorm)(const Exec&, const AddRmsNormOp&) = nullptr;
    frost_status (*qk_norm_rope)(const Exec&, const QkNormRopeOp&) = nullptr;
    frost_status (*conv1d_silu_l2)(const Exec&, const Conv1dSiluL2Op&) = nullptr;
    frost_status (*gdn_gate)(const Exec&, const GdnGateOp&) = nullptr;
    frost_status (*gdn_chunk)(const Exec&, const GdnChunkOp&) = nullptr;
    frost_status (*gdn_step)(const Exec&, const GdnStepOp&) = nullptr;
    frost_status (*gated_rmsnorm)(const Exec&, const GatedRmsNormOp&) = nullptr;
    frost_status (*kv_append)(const Exec&, const KvAppendOp&) = nullptr;
    frost_status (*attention_prefill)(const Exec&, const AttentionOp&) = nullptr;
    frost_status (*attention_decode)(const Exec&, const AttentionOp&) = nullptr;
    frost_status (*gemm)(const Exec&, const GemmOp&) = nullptr;
    frost_status (*swiglu)(const Exec&, const SwigluOp&) = nullptr;
    frost_status (*sample)(const Exec&, const SampleOp&) = nullptr;
    frost_status (*cursor)(const Exec&, const CursorOpParams&) = nullptr;
    frost_status (*moe)(const Exec&, const MoeOp&) = nullptr;
    frost_status (*gdn_decode)(const Exec&, const GdnDecodeOp&) = nullptr;
    frost_status (*qk_rope_kv_append)(const Exec&, const QkRopeKvAppendOp&) = nullptr;
    frost_status (*tail_row)(const Exec&, const TailRowOp&) = nullptr;
};

// Per-engine backend object: the op table of the context's backend plus that backend's own
// state. Sizes of the scratch the backend's implementations need come from here too.
class Backend {
public:
    virtual ~Backend() = default;
    // The backend of `ctx` (CPU or CUDA); `stream` is where its load-time work runs.
    static frost_status create(frost_ctx* ctx, frost_stream* stream, std::unique_ptr<Backend>* out);

    frost_backend kind() const { return kind_; }
    const OpTable& table() const { return *table_; }
    // Activation dtype of this backend's forward (weights and KV follow the model's tables).
    virtual DType act_dtype() const = 0;
    virtual size_t sample_work_floats(int vocab) const = 0;
    virtual size_t sample_idx_ints(int vocab) const = 0;
    virtual size_t gdn_work_floats(int Hv, int max_rows) const = 0;
    virtual size_t attn_work_floats(int Hq, int max_seq, int max_rows) const = 0;
    // f32 elements of MoeOp::work for max_rows rows (experts of width I, shared of width Is).
    virtual size_t moe_work_floats(int H, int E, int k, int I, int Is, int max_rows) const = 0;
    // Distinct GEMM shapes planned so far (CUDA: cuBLASLt plans; CPU: 0).
    virtual size_t gemm_plans() const { return 0; }
    // Whether op_gemm(p) (quant_act with xq given) reads only the twin, never x's values, so x's
    // producer may skip x (yq_only; GemmOp::xq_only). The CPU always does (it decodes the twin);
    // CUDA where p takes its FP8 block-scaled GEMM (the cuBLASLt plan is built here, once).
    virtual bool gemm_reads_twin(const GemmOp& p) { return p.quant_act && p.xq.on(); }
    // Whether op_gemm(p) with Epilogue::SwiGLU runs at p's rows as one fused GEMM where the
    // forward would otherwise run the [M, 2F] projection and op_swiglu (prefill's dense MLP):
    // CUDA on sm_90a for bf16 weights (lm_gemm_swiglu.h); the CPU keeps the two ops.
    virtual bool gemm_fuses_swiglu(const GemmOp& p) { (void)p; return false; }
    // Device bytes the backend holds itself (CUDA: the cuBLASLt workspace, the dequant tile).
    virtual uint64_t owned_bytes() const { return 0; }
    // EngineOptions::chunk_invariant, set once before the first op: every op's arithmetic for a
    // row stops depending on how many rows share its launch, so a prompt cut into other chunks
    // (a capsule's restore + append against a cold prefill) gives the same bits. The CPU's ops
    // are so already; CUDA runs attention prefill on one kernel unsplit, plans each GEMM with one
    // algorithm for every M, and gives the MoE GEMMs one tile shape. Refused once ops have run.
    virtual frost_status set_chunk_invariant(bool on) {
        chunk_invariant_ = on;
        return FROST_OK;
    }
    bool chunk_invariant() const { return chunk_invariant_; }
    // Called once at load, before capture, with the element count of the largest quantized GEMM
    // weight: CUDA allocates the bf16 tile a prefill GEMM dequantizes such a weight into (shared by
    // every quantized GEMM of the stream, which runs them one after another). CPU: nothing.
    virtual frost_status reserve_dequant_scratch(frost_ctx*, size_t elems) {
        (void)elems;
        return FROST_OK;
    }
    // Called once at load for every weight bound in a quantized dtype, after its bytes are in place
    // and before an op reads it, on the load stream: the backend may rewrite the bytes in place
    // into the layout its kernels read fastest and say so in the view (CUDA: the 4-bit formats'
    // paired nibble order, Tensor::nibble_pairs, and where the shape allows their 8-row blocks,
    // Tensor::row_blocks). A view already in that layout is left as it is, so a second call
    // changes nothing. CPU: nothing (it never keeps a weight quantized).
    virtual frost_status prepare_quant_weight(frost_stream* stream, Tensor* w) {
        (void)stream;
        (void)w;
        return FROST_OK;
    }

protected:
    Backend(frost_backend k, const OpTable* t) : kind_(k), table_(t) {}

private:
    frost_backend kind_;
    const OpTable* table_;
    bool chunk_invariant_ = false;
};

// Backend factories (cpu/cpu_ops.cpp, cuda/cuda_ops.cpp; the CUDA one fails without CUDA).
frost_status make_cpu_backend(std::unique_ptr<Backend>* out);
frost_status make_cuda_backend(frost_ctx* ctx, frost_stream* stream, std::unique_ptr<Backend>* out);

// The table of each backend, for coverage checks (every slot must be filled).
const OpTable& cpu_op_table();
bool op_table_complete(const OpTable& t, OpKind* missing);

}  // namespace frost::ops
