// bf16 sibling params structs of the hybrid-LM kernel families (kernels/params.h holds the fp32
// CPU-reference structs). A sibling exists only where bf16 activations change a pointer's type;
// field names and meanings follow the fp32 struct of the same family. Activations and large
// weights are bf16, accumulation / recurrent state / small per-channel weights are fp32.
// Values that change per step (rows in this launch, position) are read from device memory.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/params.h"

namespace frost::kernels {

using bf16 = __nv_bfloat16;

// y[r] = table[ids[r]], r < rows (family EmbedParams; bf16 output).
struct EmbedBf16Params {
    const bf16* table;       // [vocab, dim]
    const int32_t* ids;      // [max_rows] device
    bf16* y;                 // [max_rows, dim]
    int32_t vocab;
    int32_t dim;
    int32_t max_rows;
    const int32_t* n_rows;   // [1] device, may be null (= max_rows)
    int32_t pdl = 0;         // 1: programmatic dependent launch (decode graphs; see lm_common.cuh)
};

// Residual add + RMSNorm (family RmsNormParams): if delta != null, h = bf16(h + delta) in place;
// then y = bf16(h * rsqrt(mean(h^2) + eps) * g), g = 1 + w when zero_centred else w, in fp32.
// last_row_only: only row (*n_rows - 1) is touched and written to y row 0 (final norm before lm_head).
struct AddRmsNormBf16Params {
    bf16* h;                 // [max_rows, dim] residual stream, row stride dim
    const bf16* delta;       // [max_rows, dim] or null
    const float* w;          // [dim]
    bf16* y;                 // [max_rows, dim] (or [1, dim] with last_row_only)
    int32_t dim;             // multiple of 8
    int32_t zero_centred;
    float eps;
    int32_t max_rows;
    const int32_t* n_rows;   // may be null
    int32_t last_row_only;
    // 1: programmatic dependent launch (decode graphs; see lm_common.cuh); 2: the same, and the
    // kernel lets its dependent start before its own wait (pdl_wait_and_trigger). Only for a
    // dependent that loads nothing but weights before its wait; decode launches only.
    int32_t pdl = 0;
    // Optional FP8 twin of y for a W8A8 prefill GEMM (lm_gemm_fp8.h), written in the same pass:
    // e4m3 [max_rows, dim] (row stride dim) and group scales [dim/128][yq_scale_ld]
    // (yq_scale_ld = act_scale_ld(max_rows)): the bytes act_quant_fp8_launch makes of the bf16 y.
    uint8_t* yq = nullptr;
    float* yq_scale = nullptr;
    int64_t yq_scale_ld = 0;
    int32_t yq_only = 0;     // with yq: y is not stored (every reader reads the twin; ops.h Fp8Act)
};

// Batched decode (ops.h BatchSlots): row r of a launch is one token of session slots[r] (< 0:
// padding, skipped by the state kernels); its state buffer is table[slots[r] * stride + column]
// (+ 1: the V cache) and its cursor cursors[r] (gathered by batch_cursor_launch). slots == null:
// off, the launch is one session's as before. Kernels resolve a row's pointers after their
// programmatic wait (slots / cursors are written by earlier nodes of the graph).
struct BatchRef {
    void* const* table = nullptr;    // [sessions, stride] device pointers
    const int32_t* slots = nullptr;  // [B] device
    StepCursor* cursors = nullptr;   // [B] device
    int32_t stride = 0, column = 0, sessions = 0, B = 0;
};

// decode_begin: gathers each member's cursor (column 0) into cursors[r] (padding: zeroed) and
// writes ids[r] = its last token, n_tokens = 1; advance: advances cursors[r] and writes it back.
struct BatchCursorParams {
    BatchRef batch;
    int32_t* ids;            // [B] token inputs (decode_begin)
    int32_t op;              // CursorOp
};

// Per-head zero-centred RMSNorm of q and k over head_dim, then partial NeoX RoPE on the first
// rotary_dim dims (pairs i, i + rotary_dim/2) at position cursor->pos + row (spec §4.2 steps 2-3).
// In place on bf16, math in fp32 (families RmsNormParams + RopeParams fused).
struct QkNormRopeBf16Params {
    bf16* q;                 // [rows, Hq, head_dim] with q_row_stride / q_head_stride (elements)
    bf16* k;                 // [rows, Hkv, head_dim] with k_row_stride / k_head_stride
    const float* q_w;        // [head_dim]
    const float* k_w;        // [head_dim]
    int64_t q_row_stride, q_head_stride;
    int64_t k_row_stride, k_head_stride;
    int32_t Hq, Hkv;
    int32_t head_dim;        // 256 (multiple of 32, <= 256)
    int32_t rotary_dim;      // 64 (even, <= head_dim)
    int32_t zero_centred;
    float eps;
    float theta;
    int32_t max_rows;
    const StepCursor* cursor;  // pos, n_tokens (rows)
    int32_t inv_freq_bf16 = 0;  // 1: inv_freq rounded to bf16 (RopeParams::inv_freq_bf16, the CPU rule)
    BatchRef batch = {};             // on: max_rows = B rows, row r at position batch.cursors[r].pos
    int32_t pdl = 0;                 // 1: programmatic dependent launch (decode graphs; see lm_common.cuh)
};

// Gated RMSNorm per value head (family GatedRmsNormParams): y = w ⊙ norm(o) ⊙ silu(z).
struct GatedRmsNormBf16Params {
    const bf16* x;           // [rows, heads, dim] contiguous (GDN output o)
    const bf16* z;           // [rows, heads*dim] with row stride z_row_stride
    const float* w;          // [dim] plain weight
    bf16* y;                 // [rows, heads*dim] contiguous
    int64_t z_row_stride;
    int32_t dim;             // 128 (multiple of 32, <= 1024)
    int32_t heads;
    float eps;
    int32_t max_rows;
    const int32_t* n_rows;
    int32_t pdl = 0;         // 1: programmatic dependent launch (decode graphs; see lm_common.cuh)
    // Optional FP8 twin of y for a W8A8 prefill GEMM (lm_gemm_fp8.h), written in the same pass:
    // e4m3 [max_rows, heads*dim] (row stride heads*dim) and group scales [heads*dim/128][yq_scale_ld]
    // (yq_scale_ld = act_scale_ld(max_rows)): the bytes act_quant_fp8_launch makes of the bf16 y.
    uint8_t* yq = nullptr;
    float* yq_scale = nullptr;
    int64_t yq_scale_ld = 0;
    int32_t yq_only = 0;     // with yq: y is not stored (every reader reads the twin; ops.h Fp8Act)
};

// Causal depthwise conv1d (K taps, tap K-1 = current token) + SiLU over this launch's rows, with
// the K-1 pre-activation inputs of previous launches in `state` (family Conv1dParams). Optionally
// fused with the GDN l2norm (spec §4.1 step 4): when l2_dim > 0 the first l2_heads groups of
// l2_dim channels (q heads then k heads) are scaled by rsqrt(sum(c^2) + l2_eps), and the first
// l2_q_heads of them additionally by q_scale.
struct Conv1dBf16Params {
    const bf16* x;           // [rows, C] pre-activation, row stride x_row_stride
    const float* w;          // [C, K]
    bf16* state;             // [C, K-1] last K-1 inputs before this launch; updated in place
    bf16* y;                 // [rows, C] contiguous
    int64_t x_row_stride;
    int32_t channels;        // C, multiple of kConvChannelsPerBlock (128)
    int32_t kernel;          // K, 2..kConvMaxTaps
    int32_t l2_dim;          // 0 = no l2norm, else 128 (channels per head)
    int32_t l2_heads;        // q heads + k heads normalised
    int32_t l2_q_heads;      // of which the first l2_q_heads are q (scaled by q_scale)
    float l2_eps;
    float q_scale;
    int32_t max_rows;
    const int32_t* n_rows;
    int32_t pdl = 0;         // 1: programmatic dependent launch (decode graphs; see lm_common.cuh)
    BatchRef batch = {};          // on: one row per member (grid z), state from the table
    // Prefill launches of more than 16 rows (never batched decode): 0 (default) runs the 4-channel
    // vector kernel where it applies (K = 4, 8-byte aligned x rows and y), same bits as the
    // per-channel kernel; 1 always runs the per-channel loop kernel (the decode step's, for A/B).
    int32_t prefill_loop = 0;
    // Which prefill kernel where the vector kernel applies (all compute the same bits): 0 the default
    // (4; FROST_GDN_PREFILL=conv_v1 makes it 1); 1 the round-1 vector kernel (state by a second
    // launch); 2 the vector kernel writing the state itself (one launch); 3 that with the
    // reduce-scatter l2norm; 4 that with rows in pairs.
    int32_t prefill_kernel = 0;
    // Rows per warp. Kernel 1: 0 = 16, else 32 or 64; -32 / -16 capped at 80 registers (bench).
    // 2-4: 0 = 16, or 32; 3 also -16 (80 registers, 6 blocks per SM; bench).
    int32_t tile_rows = 0;
};

// β = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias) in fp32 (family GdnGateParams).
struct GdnGateBf16Params {
    const bf16* b;           // [rows, Hv] row stride in_row_stride
    const bf16* a;           // [rows, Hv] row stride in_row_stride
    const float* A_log;      // [Hv]
    const float* dt_bias;    // [Hv]
    float* beta;             // [rows, Hv]
    float* g;                // [rows, Hv]
    int64_t in_row_stride;
    int32_t heads;
    int32_t max_rows;
    const int32_t* n_rows;
};

// Gated delta rule (family GdnParams; spec §4.1 step 7, §5). bf16 q/k/v (q l2-normed and scaled,
// k l2-normed), fp32 β, g and state, bf16 output. Value head h reads q/k head h / (Hv/Hk).
// The chunked kernel splits at absolute multiples of `chunk` counted from position 0
// (cursor->pos), so a state never depends on where a previous launch ended. `work` is fp32
// scratch of gdn_chunk_work_floats() floats (unused by the recurrent kernel).
struct GdnBf16Params {
    const bf16* q;           // [rows, Hk, dk] row stride qkv_row_stride
    const bf16* k;           // [rows, Hk, dk] row stride qkv_row_stride
    const bf16* v;           // [rows, Hv, dv] row stride qkv_row_stride
    const float* beta;       // [rows, Hv]
    const float* g;          // [rows, Hv] log decay (<= 0)
    float* state;            // [Hv, dk, dv] fp32, updated in place
    bf16* o;                 // [rows, Hv, dv]
    float* work;             // chunked kernel scratch, may be null for the recurrent kernel
    int64_t qkv_row_stride;
    int32_t Hk, Hv;
    int32_t dk, dv;          // 128, 128
    int32_t chunk;           // 64
    int32_t max_rows;
    const StepCursor* cursor;  // pos, n_tokens
    // When gate_b is set, β and g come from the raw projections (GdnGateBf16Params formulas, same
    // bits) and beta/g are neither read nor written: the recurrent kernel (decode) and the chunked
    // kernels' prep (prefill), each one gate launch fewer.
    const bf16* gate_b = nullptr;    // [rows, Hv] row stride gate_row_stride
    const bf16* gate_a = nullptr;    // [rows, Hv] row stride gate_row_stride
    const float* A_log = nullptr;    // [Hv]
    const float* dt_bias = nullptr;  // [Hv]
    int64_t gate_row_stride = 0;
    int32_t pdl = 0;                 // recurrent kernel: programmatic dependent launch
    // Chunked kernel: 1 runs every product on fp32 CUDA cores (the reference path tests compare
    // with); 0 runs the state-pass and output products on TF32 tensor cores (fp32 accumulate).
    int32_t chunk_fp32 = 0;
    // Chunked kernel with chunk_fp32 == 0: 0 (default) runs the bf16 path (lm_gdn_bf16.cu: bf16
    // mma.sync operands, fp32 accumulators and state, two launches with the output fused into the
    // state pass); 1 runs the previous TF32 mma.sync path (three launches, fp32 scratch).
    int32_t chunk_tf32 = 0;
    // bf16 path, how the state pass loads each chunk's W, K, Q, P rows: 0 (default, fastest on the
    // H100) by 16-byte cp.async per block; 1 by one bulk copy per row per block; 2 or 4 as clusters
    // of that many dv-slice blocks of a head sharing them through multicast bulk copies (the
    // largest size whose clusters all fit is taken, down to 1; 0 without cluster launch).
    int32_t chunk_cluster = 0;
    BatchRef batch = {};                  // recurrent kernel: one row per member (grid z), state from the table
    // bf16 path: 1 runs the prep and the cp.async state pass as before round 2 of issue 18 (32-bit
    // fragment loads, looped copy indexing; same bits), for A/B. FROST_GDN_PREFILL=old does too.
    int32_t chunk_v1 = 0;
    // bf16 path, cp.async mode: dv columns per state-pass block. 0 (default) picks 16 when every
    // block of the 16-column grid (Hv x 8) is resident at once (one per SM: Hv <= 16 on the H100),
    // else 32; 16 or 32 force it. Every width gives the same bits. FROST_GDN_PREFILL=wide keeps 32.
    int32_t chunk_slice = 0;
    // bf16 path, 16-column state pass: 0 (default) issues every copy from a ninth (producer) warp
    // with an mbarrier handoff per stage; -1 from the 8 compute warps between their products (the
    // first form of round 3, for A/B). Same bits.
    int32_t chunk_producer = 0;
    // bf16 path, state pass on warpgroup MMA (lm_gdn_wgmma.cu, sm_90a only): 0 (default) runs it
    // where the copy mode, slice width, producer and load form above are all their defaults and the
    // device is sm_90a (FROST_GDN_PREFILL=mma keeps the mma.sync passes); 1 forces it (with
    // chunk_slice 16 or 32 as the width, else the default width; cudaErrorNotSupported off sm_90a);
    // -1 never. The same bits as the mma.sync passes (the same products summed in the same order
    // per accumulator; the tests compare bytes).
    int32_t chunk_wgmma = 0;
};

// Copies this launch's K and V rows into the contiguous cache at cursor->pos + row
// (family KvAppendParams).
struct KvAppendBf16Params {
    const bf16* k;           // [rows, kv_dim] row stride src_row_stride
    const bf16* v;           // [rows, kv_dim] row stride src_row_stride
    bf16* k_cache;           // [max_seq, Hkv, d]
    bf16* v_cache;           // [max_seq, Hkv, d]
    int64_t src_row_stride;
    int32_t kv_dim;          // Hkv*d, multiple of 8
    int32_t max_seq;
    int32_t max_rows;
    const StepCursor* cursor;
    BatchRef batch = {};          // on: row r appends at batch.cursors[r].pos to member r's caches
    int32_t pdl = 0;              // 1: programmatic dependent launch (decode graphs; see lm_common.cuh)
};

// Causal GQA attention of this launch's rows (absolute position pos + row) over cache
// [0, pos + row], fp32 softmax, then o *= sigmoid(gate) when gate != null (family AttentionParams).
// Decode (rows == 1) splits the KV length into pieces of 32 to kAttnDecodeSplit keys (a function
// of the length alone) whose partial results (work) are merged in split order, so the result does
// not depend on timing. Prefill
// splits each 64-row tile's keys into attn_prefill_splits() pieces when the launch is small (a
// count fixed at launch, so a captured graph serves every position) and merges them the same way.
struct AttentionBf16Params {
    const bf16* q;           // [rows, Hq, d] with q_row_stride / q_head_stride
    const bf16* gate;        // [rows, Hq, d] same strides as q, may be null
    const bf16* k_cache;     // [max_seq, Hkv, d]
    const bf16* v_cache;     // [max_seq, Hkv, d]
    bf16* o;                 // [rows, Hq*d] contiguous
    float* work;             // scratch: attn_decode_work_floats() floats (decode), attn_prefill_work_floats()
                             // (prefill; may be null when that is 0)
    int64_t q_row_stride, q_head_stride;
    int32_t Hq, Hkv;
    int32_t head_dim;        // 256
    float scale;
    int32_t max_seq;
    int32_t max_rows;
    const StepCursor* cursor;
    BatchRef batch = {};          // decode: row r (grid z) over member r's caches, its own work slice
    int32_t pdl = 0;              // decode: programmatic dependent launch of both launches (lm_common.cuh)
};

// y[r, i] = silu(x[r, i]) * x[r, F + i] for the fused [gate | up] projection (family SwigluParams).
struct SwigluBf16Params {
    const bf16* x;           // [rows, 2F]
    bf16* y;                 // [rows, F]
    int32_t F;               // multiple of 8
    int32_t max_rows;
    const int32_t* n_rows;
    // Optional FP8 twin of y for a W8A8 prefill GEMM (lm_gemm_fp8.h), written in the same pass:
    // e4m3 [max_rows, F] (row stride F) and group scales [F/128][yq_scale_ld]
    // (yq_scale_ld = act_scale_ld(max_rows)): the bytes act_quant_fp8_launch makes of the bf16 y.
    uint8_t* yq = nullptr;
    float* yq_scale = nullptr;
    int64_t yq_scale_ld = 0;
    int32_t yq_only = 0;     // with yq: y is not stored (every reader reads the twin; ops.h Fp8Act)
};

// y = x W^T (+ y when accumulate: the fused residual add), bf16 operands, fp32 accumulation.
// M is the bucket's row count; rows beyond the valid count are computed and ignored.
struct GemmBf16Params {
    const bf16* x;           // [M, K] row stride ldx
    const bf16* w;           // [N, K] row stride K
    void* y;                 // [M, N] row stride ldy; bf16, or fp32 when out_f32
    int64_t ldx, ldy;
    int32_t M, N, K;
    int32_t out_f32;
    int32_t accumulate;
    // GEMV only. swiglu: w is [gate | up] ([2F, K], N = 2F) and y receives the bf16 [F] vector
    // silu(bf16(x·w_gate)) * bf16(x·w_up), rounded exactly as the swiglu kernel (bf16 out, no
    // accumulate). pdl: programmatic dependent launch (weights prefetched before the wait).
    int32_t swiglu = 0;
    int32_t pdl = 0;
};

// Greedy sampling on the device (family SampleParams): the lowest index of the largest logit
// of the selected row (row *n_rows - 1, or cursor->n_tokens - 1 when n_rows is null, if
// select_last_row); writes *out_token and cursor->last_token. work holds per-block partials.
struct SampleArgmaxParams {
    const float* logits;     // [rows, vocab]; row (*n_rows - 1) if select_last_row else row 0
    int64_t row_stride;
    int32_t vocab;
    int32_t select_last_row;
    const int32_t* n_rows;
    float* work;             // [2 * sample_argmax_blocks(vocab)] scratch
    StepCursor* cursor;      // may be null (then select_last_row needs n_rows)
    int32_t* out_token;      // [1]
    int32_t only_when_greedy;  // 1: write nothing unless the cursor's mode is greedy (sample_launch)
};

// The GDN gate projections of a decode step, [b | a] = x · wᵀ per row, by one fixed-order dot
// (lm_gdn_gate_dot.cuh: each of 256 threads sums its 8-wide vectors of k in order, then the warp
// butterfly, then the 8 warps in order; rounded to bf16), the same whether gdn_gate_dot_launch or
// the fused GDN decode kernel runs it. Written to y: row r's b at y + r * y_row_stride, a at + Hv.
struct GdnGateDotParams {
    const bf16* w = nullptr;   // [2 Hv, K]: the b rows, then the a rows
    const bf16* x = nullptr;   // [rows, K], row stride x_row_stride (16-byte aligned rows)
    bf16* y = nullptr;         // [rows, 2 Hv] at row stride y_row_stride
    int64_t x_row_stride = 0;
    int64_t y_row_stride = 0;
    int32_t K = 0;             // a multiple of 8, <= kGdnGateDotMaxK
    int32_t Hv = 0;
    int32_t rows = 0;          // rows of x / y (solo 1; batched B, one per member)
};
constexpr int kGdnGateDotMaxK = 8192;

// The GDN layer's decode step in one launch (lm_gdn_decode_fused.cu): conv1d + SiLU + q/k l2norm,
// the gated delta-rule step with its gates, and the gated RMSNorm, with the same bits as the three
// launches these params describe (conv1d_launch, gdn_recurrent_launch with gate_b set,
// gated_rmsnorm_launch). gdn.q / k / v must be conv.y's q / k / v parts and norm.x must be gdn.o;
// batched: conv.batch and gdn.batch name the members' conv and recurrent columns.
struct GdnDecodeBf16Params {
    Conv1dBf16Params conv;
    GdnBf16Params gdn;
    GatedRmsNormBf16Params norm;
    int32_t pdl = 0;  // 1: programmatic dependent launch (decode graphs; see lm_common.cuh)
    GdnGateDotParams gates{};  // optional (w set): [b | a] computed in the launch (gdn_gate_dot_launch's bits)
};

// Decode's per-head q / k RMSNorm + RoPE with the KV append of the same rows in one launch
// (qk_norm_rope_kv_launch): the k rows go into the cache as normed and rotated (the bits
// kv_append would copy), the v rows are copied. kv.k must be qk.k's rows (head stride head_dim),
// kv.cursor qk.cursor; batched: kv.batch the members' KV columns, cursors shared.
struct QkRopeKvBf16Params {
    QkNormRopeBf16Params qk;
    KvAppendBf16Params kv;
};

// Bytes a kernel must move (each input read once, each output written once) and the FLOPs it
// performs, for a given number of valid rows: what the benches divide by.
struct KernelCost {
    double bytes = 0;
    double flops = 0;
};

}  // namespace frost::kernels
