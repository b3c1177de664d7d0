// Plain parameter structs, one per kernel family, shared by the CPU reference kernels (cpu/) and
// the CUDA kernels (cuda/). Only pointers (shape/dtype beside each), strides and ints. Values that
// change per step (position, tokens in this chunk, RNG counter) are READ FROM THE CURSOR at run
// time, never baked in, so one captured graph serves every position (architecture.md "The engine").
#pragma once
#include <cstdint>

#include "kernels/params/sample.h"

namespace frost::kernels {

// The per-session step cursor: lives in a device buffer (role `cursor`), read and advanced by
// kernels inside captured graphs. 64 bytes, plain data, byte layout is part of the capsule format.
struct StepCursor {
    int32_t pos;          // tokens already folded into the state = absolute position of row 0
    int32_t n_tokens;     // tokens in the current step (1..bucket); written by host for prefill
    int32_t last_token;   // last sampled (or fed) token id; decode reads its input from here
    int32_t sample_mode;  // SampleMode
    uint64_t rng_seed;    // sampler seed
    uint64_t rng_counter; // draws made so far; advanced by the sampler kernel
    float temperature;    // > 0 unless greedy
    int32_t top_k;        // 0 = off
    float top_p;          // 1 = off
    int32_t steps;        // completed graph steps (prefill chunks + decode tokens), for checks
    int32_t reserved[4];
};
static_assert(sizeof(StepCursor) == 64, "StepCursor is a 64-byte on-device record");

enum SampleMode : int32_t { kSampleGreedy = 0, kSampleRandom = 1 };

enum class WeightType : int32_t { F32 = 0, BF16 = 1 };

// Rows processed by a per-token launch: *n_rows if non-null (clamped to max_rows), else max_rows.
// Kernels never touch rows >= that count, so a bucket graph serves any shorter last chunk.

// y[r] = table[ids[r]] (bf16 or f32 table), r < rows.
struct EmbedParams {
    const void* table;      // [vocab, dim] bf16 (uint16) or f32
    WeightType table_type;
    const int32_t* ids;     // [max_rows]
    float* y;               // [max_rows, dim]
    int32_t vocab;
    int32_t dim;
    int32_t max_rows;
    const int32_t* n_rows;  // [1] device, may be null
};

// RMSNorm over `dim` contiguous values of each (row, head): y = x * rsqrt(mean(x^2)+eps) * g,
// g = 1 + w when zero_centred (Qwen3.5 norms, spec §4) else w. In place allowed (x == y).
struct RmsNormParams {
    const float* x;         // [rows, heads, dim] with row stride x_row_stride, head stride x_head_stride
    const float* w;         // [dim]
    float* y;               // same geometry with y strides
    int64_t x_row_stride, x_head_stride;
    int64_t y_row_stride, y_head_stride;
    int32_t dim;
    int32_t heads;
    int32_t zero_centred;   // 1: scale by (1 + w)
    float eps;
    int32_t max_rows;
    const int32_t* n_rows;  // may be null
    int32_t last_row_only;  // 1: only row (*n_rows - 1) is normalised, written to y row 0
};

// Gated RMSNorm per value head (spec §4.1 step 8): y = w ⊙ (o·rsqrt(mean(o²)+eps)) ⊙ silu(z).
struct GatedRmsNormParams {
    const float* x;         // [rows, heads, dim] contiguous
    const float* z;         // [rows, heads*dim] with row stride z_row_stride
    const float* w;         // [dim] plain weight
    float* y;               // [rows, heads, dim] contiguous
    int64_t z_row_stride;
    int32_t dim;
    int32_t heads;
    float eps;
    int32_t max_rows;
    const int32_t* n_rows;
};

// y[m, n] (+)= sum_k x[m, k] * w[n, k]   (y = x W^T, W [out, in] row-major fp32).
// Every y[m, n] is summed in one fixed order that does not depend on M or on the tiling, so a
// token's result is the same whether it shares a launch with 0 or 255 others.
struct GemmParams {
    const float* x;         // [M, K], row stride ldx
    const float* w;         // [N, K], row stride K
    float* y;               // [M, N], row stride ldy
    int64_t ldx, ldy;
    int32_t K, N;
    int32_t max_rows;       // M capacity
    const int32_t* n_rows;  // may be null
    int32_t accumulate;     // 1: y += x W^T (fused residual add), 0: y = x W^T
};

// Causal depthwise conv1d over time with a K-1 state of pre-activation inputs, then SiLU
// (spec §4.1 step 2). Tap K-1 multiplies the current token.
struct Conv1dParams {
    const float* x;         // [rows, C] pre-activation, row stride x_row_stride
    const float* w;         // [C, K]
    float* state;           // [C, K-1] last K-1 inputs before this launch; updated in place
    float* y;               // [rows, C] contiguous, silu(conv)
    int64_t x_row_stride;
    int32_t channels;       // C
    int32_t kernel;         // K (2..8)
    int32_t max_rows;
    const int32_t* n_rows;
};

// Per head: x <- x * rsqrt(sum(x^2) + eps) * scale (spec §4.1 step 4, FLA l2norm).
struct L2NormParams {
    float* x;               // [rows, heads, dim] with row stride row_stride, heads contiguous
    int64_t row_stride;
    int32_t heads;
    int32_t dim;
    float eps;
    float scale;
    int32_t max_rows;
    const int32_t* n_rows;
};

// β = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias) (spec §4.1 step 5, fp32).
struct GdnGateParams {
    const float* b;         // [rows, Hv] row stride in_row_stride
    const float* a;         // [rows, Hv] row stride in_row_stride
    const float* A_log;     // [Hv]
    const float* dt_bias;   // [Hv]
    float* beta;            // [rows, Hv]
    float* g;               // [rows, Hv]
    int64_t in_row_stride;
    int32_t heads;          // Hv
    int32_t max_rows;
    const int32_t* n_rows;
};

// Gated delta rule over the rows of this launch (spec §4.1 step 7, §5). Value head h reads q/k
// head h / (Hv/Hk). The chunked form splits at ABSOLUTE multiples of chunk (64) counted from
// position 0 (cursor->pos), so a state never depends on where a previous launch ended.
struct GdnParams {
    const float* q;         // [rows, Hk, dk] row stride qk_row_stride (l2-normed, scaled)
    const float* k;         // [rows, Hk, dk] row stride qk_row_stride (l2-normed)
    const float* v;         // [rows, Hv, dv] row stride qk_row_stride
    const float* beta;      // [rows, Hv]
    const float* g;         // [rows, Hv] log decay (<= 0)
    float* state;           // [Hv, dk, dv] fp32, updated in place
    float* o;               // [rows, Hv, dv]
    int64_t qk_row_stride;
    int32_t Hk, Hv, dk, dv;
    int32_t chunk;          // 64
    int32_t max_rows;
    const StepCursor* cursor;  // pos, n_tokens
};

// Partial NeoX RoPE on the first rotary_dim dims of each head, pairs (i, i + rotary_dim/2),
// position = cursor->pos + row (spec §4.2 step 3). In place.
struct RopeParams {
    float* x;               // [rows, heads, head_dim] with row/head strides
    int64_t row_stride, head_stride;
    int32_t heads;
    int32_t head_dim;
    int32_t rotary_dim;
    float theta;
    // 1: round each fp32 inv_freq to bf16 (round-to-nearest-even) before use. transformers does
    // this implicitly when a model is cast with .to(bfloat16) (its inv_freq buffer is cast too),
    // which is how the fixture goldens were made; 0: exact fp32 inv_freq.
    int32_t inv_freq_bf16;
    int32_t max_rows;
    const StepCursor* cursor;
};

// Copies this launch's K and V rows into the contiguous cache at positions cursor->pos + row.
struct KvAppendParams {
    const float* k;         // [rows, Hkv*d] row stride src_row_stride
    const float* v;         // [rows, Hkv*d] row stride src_row_stride
    float* k_cache;         // [max_seq, Hkv, d]
    float* v_cache;         // [max_seq, Hkv, d]
    int64_t src_row_stride;
    int32_t kv_dim;         // Hkv*d
    int32_t max_seq;
    int32_t max_rows;
    const StepCursor* cursor;
};

// Causal GQA softmax attention of this launch's queries over cache positions [0, pos + row],
// fp32 softmax, scale; then o *= sigmoid(gate) when gate is non-null (spec §4.2 steps 5-6).
struct AttentionParams {
    const float* q;         // [rows, Hq, d] with row/head strides
    const float* gate;      // [rows, Hq, d] same strides as q, may be null
    const float* k_cache;   // [max_seq, Hkv, d]
    const float* v_cache;   // [max_seq, Hkv, d]
    float* o;               // [rows, Hq, d] contiguous
    int64_t q_row_stride, q_head_stride;
    int32_t Hq, Hkv, head_dim;
    float scale;
    int32_t max_seq;
    int32_t max_rows;
    const StepCursor* cursor;
};

// y[r, i] = silu(x[r, i]) * x[r, F + i] for the fused [gate | up] projection output.
struct SwigluParams {
    const float* x;         // [rows, 2F]
    float* y;               // [rows, F]
    int32_t F;
    int32_t max_rows;
    const int32_t* n_rows;
};

// Samples one token from a logits row with the cursor's mode/temperature/top-k/top-p and its
// counter-based RNG (SplitMix64 of (seed, counter)); writes cursor->last_token, *out_token,
// advances cursor->rng_counter. With `settings` (params/sample.h): logit_bias, penalties, the token
// mask and min_p first, and the step's logprobs into *record. The fields after out_token may be
// null / 0 (plain sampling, as before they existed).
struct SampleParams {
    const float* logits;    // [rows, vocab]; row (*n_rows - 1) if select_last_row else row 0
    int64_t row_stride;
    int32_t vocab;
    int32_t select_last_row;
    const int32_t* n_rows;
    float* work;            // scratch: CPU [3 * vocab] (weights / processed row), CUDA sample_work_floats
    int32_t* work_idx;      // [vocab] scratch
    StepCursor* cursor;
    int32_t* out_token;     // [1]
    const SamplerSettings* settings;  // [1] per session, may be null
    int32_t* counts;        // [vocab] tokens generated for the request (settings non-null)
    uint32_t* seen;         // [mask_words(vocab)] tokens in the state (prompt + generated)
    const uint32_t* mask;   // [mask_words(vocab)] allowed tokens when settings->mask_on
    const int32_t* ids;     // [rows] this step's input ids (rows < *n_rows, else cursor->n_tokens)
    int32_t count_inputs;   // 1 (decode graph): ids[0] is a generated token -> counts[ids[0]] += 1
    SampleRecord* record;   // [1] logprobs of the step (settings->logprobs > 0), may be null
};

// Cursor bookkeeping nodes of a step graph.
struct CursorParams {
    StepCursor* cursor;
    int32_t* ids;           // [>=1] token input buffer (decode_begin writes last_token to ids[0])
    int32_t op;             // CursorOp
};
enum CursorOp : int32_t {
    kCursorDecodeBegin = 0, // ids[0] = last_token; n_tokens = 1
    kCursorAdvance = 1,     // pos += n_tokens; steps += 1
};

// A prefill's last layer past its state-producing ops runs on the step's last row only, the one
// whose logits are read (model/qwen35/forward.cpp "the tail"). This node moves that row (n - 1,
// n = cursor->n_tokens clamped to [1, max_rows]) of each segment to the segment's row 0, and writes
// *tail: the cursor of that row alone (pos + n - 1, n_tokens 1, every other field copied).
// Segments are byte views: row r at base + r * ld_bytes, row_bytes long (2-byte multiples).
constexpr int kTailSegments = 4;
struct TailRowParams {
    void* base[kTailSegments];
    int64_t row_bytes[kTailSegments];
    int64_t ld_bytes[kTailSegments];
    int32_t segments;       // used entries of the arrays above
    int32_t max_rows;
    const StepCursor* cursor;
    StepCursor* tail;
};

}  // namespace frost::kernels
