// The one dispatch point of the ops layer: record-time checks of each op's params, the observer
// hook (cost + a replay closure), then the Backend's table entry for the op.
#include "ops/ops.h"

#include <cstring>

#include "exec/error.h"

namespace frost::ops {

const char* op_name(OpKind k) {
    switch (k) {
        case OpKind::Embed: return "embed";
        case OpKind::AddRmsNorm: return "add_rmsnorm";
        case OpKind::QkNormRope: return "qk_norm_rope";
        case OpKind::Conv1dSiluL2: return "conv1d_silu_l2";
        case OpKind::GdnGate: return "gdn_gate";
        case OpKind::GdnChunk: return "gdn_chunk";
        case OpKind::GdnStep: return "gdn_step";
        case OpKind::GatedRmsNorm: return "gated_rmsnorm";
        case OpKind::KvAppend: return "kv_append";
        case OpKind::AttentionPrefill: return "attention_prefill";
        case OpKind::AttentionDecode: return "attention_decode";
        case OpKind::Gemm: return "gemm";
        case OpKind::Swiglu: return "swiglu";
        case OpKind::Sample: return "sample";
        case OpKind::Cursor: return "cursor";
        case OpKind::Moe: return "moe";
        case OpKind::GdnDecode: return "gdn_decode";
        case OpKind::QkRopeKvAppend: return "qk_rope_kv_append";
        case OpKind::TailRow: return "tail_row";
        case OpKind::Count: break;
    }
    return "unknown";
}

namespace {

// Fails with a message naming the op and the broken rule.
#define OP_REQUIRE(cond, name)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return ::frost::fail(FROST_ERR_INVALID_ARG, "op_%s: invalid params: %s", name, #cond); \
    } while (0)

bool f32(const Tensor& t) { return !t.empty() && t.dtype == DType::F32; }
bool has(const Tensor& t) { return !t.empty() && t.rank > 0; }

bool left_out(const Exec& ex, const char* label) {
    if (!ex.leave_out) return false;
    for (const std::string& part : *ex.leave_out)
        if (label_matches(label, part)) return true;
    return false;
}

template <class P>
frost_status dispatch(const Exec& ex, OpKind k, const char* label, const P& p, const OpCost& c,
                      frost_status (*fn)(const Exec&, const P&)) {
    if (!fn)
        return fail(FROST_ERR_UNSUPPORTED, "op_%s: no implementation on the %s backend", op_name(k),
                    ex.backend->kind() == FROST_BACKEND_CUDA ? "cuda" : "cpu");
    if (ex.observer && *ex.observer) {
        Backend* b = ex.backend;
        OpRecord r{k, label, c, [b, p, fn](frost_stream* s) { return fn(Exec{s, b, nullptr}, p); }};
        if constexpr (requires { p.pdl; }) r.pdl = p.pdl;
        (*ex.observer)(r);
    }
    if (ex.dry_run || left_out(ex, label)) return FROST_OK;
    return fn(ex, p);
}

#define OP_ENTRY(kind, slot)                                                                  \
    OP_REQUIRE(ex.stream != nullptr && ex.backend != nullptr, op_name(OpKind::kind));          \
    return dispatch(ex, OpKind::kind, label, p, cost_of(p), ex.backend->table().slot)

bool valid_gdn_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& state, const Tensor& o) {
    return q.rank == 3 && k.rank == 3 && v.rank == 3 && has(o) && f32(state) && state.rank == 3 &&
           q.shape[1] > 0 && v.shape[1] % q.shape[1] == 0 && q.stride[0] == k.stride[0] &&
           k.stride[0] == v.stride[0] && state.shape[0] == v.shape[1];
}

// A batched launch names a table column inside the stride and has one row per member
// (`rows` = the launch's row capacity; the KV ops read column + 1 too: `span` columns).
bool valid_batch(const BatchSlots& b, int32_t rows, int32_t span = 1) {
    if (!b.on()) return true;
    return b.table && b.cursors && b.B > 0 && b.B == rows && b.sessions > 0 && b.column >= 0 &&
           b.column + span <= b.stride;
}

}  // namespace

bool label_matches(const char* label, const std::string& part) {
    if (!label || part.empty()) return false;
    if (part[0] == '=') return part.compare(1, std::string::npos, label) == 0;
    return std::strstr(label, part.c_str()) != nullptr;
}

frost_status op_embed(const Exec& ex, const EmbedOp& p, const char* label) {
    OP_REQUIRE(has(p.table) && p.ids && has(p.y) && p.rows.max > 0, "embed");
    OP_REQUIRE(p.table.rank == 2 && p.y.shape[1] == p.table.shape[1], "embed");
    OP_ENTRY(Embed, embed);
}

frost_status op_add_rmsnorm(const Exec& ex, const AddRmsNormOp& p, const char* label) {
    OP_REQUIRE(has(p.h) && f32(p.w) && has(p.y) && p.rows.max > 0 && p.eps > 0, "add_rmsnorm");
    OP_REQUIRE(p.h.rank == 2 && p.w.shape[0] == p.h.shape[1], "add_rmsnorm");
    OP_ENTRY(AddRmsNorm, add_rmsnorm);
}

// Each op's own checks, `name` the op reported (a fused op checks its parts with these).
static frost_status check_qk_norm_rope(const QkNormRopeOp& p, const char* name) {
    OP_REQUIRE(p.q.rank == 3 && p.k.rank == 3 && f32(p.q_w) && f32(p.k_w) && p.cursor, name);
    OP_REQUIRE(p.q.shape[2] == p.k.shape[2] && p.rotary_dim > 0 && p.rotary_dim % 2 == 0 &&
                   p.rotary_dim <= p.q.shape[2] && p.max_rows > 0 && p.eps > 0,
               name);
    OP_REQUIRE(valid_batch(p.batch, p.max_rows), name);
    return FROST_OK;
}
static frost_status check_conv1d_silu_l2(const Conv1dSiluL2Op& p, const char* name) {
    OP_REQUIRE(has(p.x) && f32(p.w) && has(p.state) && has(p.y) && p.rows.max > 0, name);
    OP_REQUIRE(p.w.rank == 2 && p.w.shape[1] >= 2 && p.w.shape[1] <= 8 && p.x.shape[1] == p.w.shape[0], name);
    OP_REQUIRE(p.l2_dim >= 0 && int64_t(p.l2_dim) * p.l2_heads <= p.w.shape[0], name);
    OP_REQUIRE(valid_batch(p.batch, p.rows.max) && (!p.batch.on() || !p.rows.n), name);
    return FROST_OK;
}
static frost_status check_gdn_step(const GdnStepOp& p, const char* name) {
    OP_REQUIRE(valid_gdn_qkv(p.q, p.k, p.v, p.state, p.o) && p.cursor && p.max_rows > 0, name);
    OP_REQUIRE(has(p.a) && has(p.b) && f32(p.A_log) && f32(p.dt_bias) && f32(p.beta) && f32(p.g), name);
    OP_REQUIRE(valid_batch(p.batch, p.max_rows), name);
    return FROST_OK;
}
static frost_status check_gated_rmsnorm(const GatedRmsNormOp& p, const char* name) {
    OP_REQUIRE(has(p.x) && has(p.z) && f32(p.w) && has(p.y) && p.heads > 0 && p.dim > 0 && p.rows.max > 0, name);
    return FROST_OK;
}
static frost_status check_kv_append(const KvAppendOp& p, const char* name) {
    OP_REQUIRE(has(p.k) && has(p.v) && p.k_cache.rank == 3 && p.v_cache.rank == 3 && p.cursor && p.max_rows > 0, name);
    OP_REQUIRE(p.k.shape[1] == p.k_cache.shape[1] * p.k_cache.shape[2], name);
    OP_REQUIRE(valid_batch(p.batch, p.max_rows, 2), name);
    return FROST_OK;
}

frost_status op_qk_norm_rope(const Exec& ex, const QkNormRopeOp& p, const char* label) {
    FROST_TRY(check_qk_norm_rope(p, "qk_norm_rope"));
    OP_ENTRY(QkNormRope, qk_norm_rope);
}

frost_status op_conv1d_silu_l2(const Exec& ex, const Conv1dSiluL2Op& p, const char* label) {
    FROST_TRY(check_conv1d_silu_l2(p, "conv1d_silu_l2"));
    OP_ENTRY(Conv1dSiluL2, conv1d_silu_l2);
}

static frost_status check_gdn_gate(const GdnGateOp& p, const char* name) {
    OP_REQUIRE(has(p.a) && has(p.b) && f32(p.A_log) && f32(p.dt_bias) && f32(p.beta) && f32(p.g), name);
    OP_REQUIRE(p.rows.max > 0 && p.a.shape[1] == p.A_log.shape[0], name);
    return FROST_OK;
}

frost_status op_gdn_gate(const Exec& ex, const GdnGateOp& p, const char* label) {
    FROST_TRY(check_gdn_gate(p, "gdn_gate"));
    OP_ENTRY(GdnGate, gdn_gate);
}

// With a gate: its own checks, and the link: it writes the beta / g the rule reads, one row per
// rule row, one column per value head.
frost_status op_gdn_chunk(const Exec& ex, const GdnChunkOp& p, const char* label) {
    OP_REQUIRE(valid_gdn_qkv(p.q, p.k, p.v, p.state, p.o) && f32(p.beta) && f32(p.g) && p.cursor, "gdn_chunk");
    OP_REQUIRE(p.chunk > 0 && p.chunk <= 64 && p.max_rows > 0, "gdn_chunk");
    if (has(p.gate.b)) {
        const GdnGateOp& g = p.gate;
        FROST_TRY(check_gdn_gate(g, "gdn_chunk"));
        OP_REQUIRE(g.beta.data == p.beta.data && g.g.data == p.g.data && g.rows.max == p.max_rows &&
                       g.a.shape[1] == p.v.shape[1] && g.b.shape[1] == p.v.shape[1] && g.b.stride[0] == g.a.stride[0],
                   "gdn_chunk");
    }
    OP_ENTRY(GdnChunk, gdn_chunk);
}

frost_status op_gdn_step(const Exec& ex, const GdnStepOp& p, const char* label) {
    FROST_TRY(check_gdn_step(p, "gdn_step"));
    OP_ENTRY(GdnStep, gdn_step);
}

frost_status op_gated_rmsnorm(const Exec& ex, const GatedRmsNormOp& p, const char* label) {
    FROST_TRY(check_gated_rmsnorm(p, "gated_rmsnorm"));
    OP_ENTRY(GatedRmsNorm, gated_rmsnorm);
}

// Each part's own checks, and the links between them: the step reads the conv's output and the
// norm the step's, one row per session.
frost_status op_gdn_decode(const Exec& ex, const GdnDecodeOp& p, const char* label) {
    const Conv1dSiluL2Op& c = p.conv;
    const GdnStepOp& s = p.step;
    const GatedRmsNormOp& n = p.norm;
    FROST_TRY(check_conv1d_silu_l2(c, "gdn_decode"));
    FROST_TRY(check_gdn_step(s, "gdn_decode"));
    FROST_TRY(check_gated_rmsnorm(n, "gdn_decode"));
    OP_REQUIRE(s.q.data == c.y.data && n.x.data == s.o.data, "gdn_decode");
    OP_REQUIRE(c.rows.max == s.max_rows && n.rows.max == s.max_rows && c.batch.on() == s.batch.on(), "gdn_decode");
    if (has(p.gates.w)) {  // [b | a] into the columns the step reads, one row per step row
        const GemmOp& g = p.gates;
        const int64_t Hv = s.b.rank == 2 ? s.b.shape[1] : 0;
        OP_REQUIRE(g.w.rank == 2 && g.w.shape[0] >= 2 * Hv && has(g.x) &&
                       g.x.rank == 2 && g.x.shape[1] == g.w.shape[1] && g.x.shape[0] == s.max_rows,
                   "gdn_decode");
        OP_REQUIRE(g.epilogue == Epilogue::None && !g.quant_act && !g.xq_only && g.y.rank == 2 &&
                       g.y.shape[0] == s.max_rows && g.y.shape[1] == g.w.shape[0] && g.y.data == s.b.data &&
                       s.a.data == static_cast<const char*>(s.b.data) + Hv * int64_t(dtype_bits(s.b.dtype) / 8) &&
                       g.y.stride[0] == s.b.stride[0] && s.a.stride[0] == s.b.stride[0],
                   "gdn_decode");
    }
    OP_ENTRY(GdnDecode, gdn_decode);
}

frost_status op_kv_append(const Exec& ex, const KvAppendOp& p, const char* label) {
    FROST_TRY(check_kv_append(p, "kv_append"));
    OP_ENTRY(KvAppend, kv_append);
}

// Each part's own checks, and the link: the append copies the k rows qk normalises, same cursor.
frost_status op_qk_rope_kv_append(const Exec& ex, const QkRopeKvAppendOp& p, const char* label) {
    const QkNormRopeOp& q = p.qk;
    const KvAppendOp& kv = p.kv;
    FROST_TRY(check_qk_norm_rope(q, "qk_rope_kv_append"));
    FROST_TRY(check_kv_append(kv, "qk_rope_kv_append"));
    OP_REQUIRE(kv.k.data == q.k.data && kv.cursor == q.cursor && kv.max_rows == q.max_rows &&
                   kv.batch.on() == q.batch.on(),
               "qk_rope_kv_append");
    OP_ENTRY(QkRopeKvAppend, qk_rope_kv_append);
}

static frost_status check_attention(const AttentionOp& p, const char* name) {
    OP_REQUIRE(p.q.rank == 3 && p.k_cache.rank == 3 && p.v_cache.rank == 3 && has(p.o) && p.cursor, name);
    OP_REQUIRE(p.k_cache.shape[1] > 0 && p.q.shape[1] % p.k_cache.shape[1] == 0 &&
                   p.q.shape[2] == p.k_cache.shape[2] && p.max_rows > 0,
               name);
    return FROST_OK;
}

frost_status op_attention_prefill(const Exec& ex, const AttentionOp& p, const char* label) {
    FROST_TRY(check_attention(p, "attention_prefill"));
    OP_REQUIRE(!p.batch.on(), "attention_prefill");
    OP_REQUIRE(ex.stream != nullptr && ex.backend != nullptr, "attention_prefill");
    return dispatch(ex, OpKind::AttentionPrefill, label, p, cost_of(p, ex.context > 0 ? ex.context : p.k_cache.shape[0]),
                    ex.backend->table().attention_prefill);
}

frost_status op_attention_decode(const Exec& ex, const AttentionOp& p, const char* label) {
    FROST_TRY(check_attention(p, "attention_decode"));
    OP_REQUIRE(p.batch.on() ? valid_batch(p.batch, p.max_rows, 2) : p.max_rows == 1, "attention_decode");
    OP_REQUIRE(ex.stream != nullptr && ex.backend != nullptr, "attention_decode");
    return dispatch(ex, OpKind::AttentionDecode, label, p, cost_of(p, ex.context > 0 ? ex.context : p.k_cache.shape[0]),
                    ex.backend->table().attention_decode);
}

frost_status op_gemm(const Exec& ex, const GemmOp& p, const char* label) {
    OP_REQUIRE(p.x.rank == 2 && p.w.rank == 2 && p.y.rank == 2 && has(p.x) && has(p.w) && has(p.y), "gemm");
    OP_REQUIRE(p.x.shape[1] == p.w.shape[1] && p.x.shape[0] == p.y.shape[0] && p.x.shape[0] > 0, "gemm");
    OP_REQUIRE(p.x.stride[0] >= p.x.shape[1] && p.y.stride[0] >= p.y.shape[1], "gemm");
    OP_REQUIRE(p.epilogue == Epilogue::SwiGLU ? p.w.shape[0] == 2 * p.y.shape[1] : p.w.shape[0] == p.y.shape[1],
               "gemm");
    OP_ENTRY(Gemm, gemm);
}

frost_status op_swiglu(const Exec& ex, const SwigluOp& p, const char* label) {
    OP_REQUIRE(has(p.x) && has(p.y) && p.x.shape[1] == 2 * p.y.shape[1] && p.rows.max > 0, "swiglu");
    OP_ENTRY(Swiglu, swiglu);
}

frost_status op_sample(const Exec& ex, const SampleOp& p, const char* label) {
    OP_REQUIRE(f32(p.logits) && p.logits.rank == 2 && p.cursor && p.out_token && f32(p.work) &&
                   (!p.settings || (p.counts && p.seen && p.mask && p.ids)),
               "sample");
    OP_ENTRY(Sample, sample);
}

frost_status op_cursor(const Exec& ex, const CursorOpParams& p, const char* label) {
    OP_REQUIRE(p.cursor && (p.op == kCursorAdvance || (p.op == kCursorDecodeBegin && p.ids)), "cursor");
    OP_REQUIRE(valid_batch(p.batch, p.batch.B) && (!p.batch.on() || p.batch.column == 0), "cursor");
    OP_ENTRY(Cursor, cursor);
}

frost_status op_moe(const Exec& ex, const MoeOp& p, const char* label) {
    OP_REQUIRE(p.E > 0 && p.k >= 1 && p.k <= p.E && p.I > 0 && p.Is > 0 && p.rows.max > 0, "moe");
    OP_REQUIRE(p.x.rank == 2 && p.y.rank == 2 && has(p.x) && has(p.y) && p.x.shape[1] == p.y.shape[1], "moe");
    OP_REQUIRE(p.x.shape[0] >= p.rows.max && p.y.shape[0] >= p.rows.max, "moe");
    OP_REQUIRE(p.x.stride[0] == p.x.shape[1] && p.y.stride[0] == p.y.shape[1], "moe");
    const int64_t H = p.x.shape[1];
    OP_REQUIRE(has(p.router) && p.router.rank == 2 && p.router.shape[0] == p.E && p.router.shape[1] == H, "moe");
    OP_REQUIRE(has(p.experts_gate_up) && p.experts_gate_up.shape[0] == int64_t(p.E) * 2 * p.I &&
                   p.experts_gate_up.shape[1] == H,
               "moe");
    OP_REQUIRE(has(p.experts_down) && p.experts_down.shape[0] == int64_t(p.E) * H && p.experts_down.shape[1] == p.I,
               "moe");
    OP_REQUIRE(has(p.shared_gate_up) && p.shared_gate_up.shape[0] == 2 * int64_t(p.Is) &&
                   p.shared_gate_up.shape[1] == H,
               "moe");
    OP_REQUIRE(has(p.shared_down) && p.shared_down.shape[0] == H && p.shared_down.shape[1] == p.Is, "moe");
    OP_REQUIRE(has(p.shared_gate) && p.shared_gate.numel() == H, "moe");
    OP_REQUIRE(f32(p.probs) && p.probs.numel() >= int64_t(p.rows.max) * p.E, "moe");
    OP_REQUIRE(!p.topk_ids.empty() && p.topk_ids.dtype == DType::I32 && p.topk_ids.numel() >= int64_t(p.rows.max) * p.k,
               "moe");
    OP_REQUIRE(f32(p.topk_w) && p.topk_w.numel() >= int64_t(p.rows.max) * p.k, "moe");
    OP_REQUIRE(ex.stream != nullptr && ex.backend != nullptr, "moe");
    OP_REQUIRE(p.work.numel() >= int64_t(ex.backend->moe_work_floats(int(H), p.E, p.k, p.I, p.Is, p.rows.max)) &&
                   (p.work.empty() || p.work.dtype == DType::F32),
               "moe");
    return dispatch(ex, OpKind::Moe, label, p, cost_of(p), ex.backend->table().moe);
}

kernels::TailRowParams tail_row_params(const TailRowOp& p) {
    kernels::TailRowParams t{};
    for (const Tensor& v : p.views) {
        if (v.empty()) continue;
        const int64_t elem = dtype_bits(v.dtype) / 8;
        t.base[t.segments] = v.data;
        t.row_bytes[t.segments] = v.shape[1] * elem;
        t.ld_bytes[t.segments] = v.stride[0] * elem;
        ++t.segments;
    }
    t.max_rows = p.max_rows; t.cursor = p.cursor; t.tail = p.tail;
    return t;
}

frost_status op_tail_row(const Exec& ex, const TailRowOp& p, const char* label) {
    OP_REQUIRE(p.cursor && p.tail && p.max_rows > 0, "tail_row");
    for (const Tensor& v : p.views)
        OP_REQUIRE(v.empty() || (v.rank == 2 && v.shape[0] >= p.max_rows && v.stride[0] >= v.shape[1]), "tail_row");
    OP_ENTRY(TailRow, tail_row);
}

bool op_table_complete(const OpTable& t, OpKind* missing) {
    const void* slots[kOpCount] = {
        reinterpret_cast<const void*>(t.embed),          reinterpret_cast<const void*>(t.add_rmsnorm),
        reinterpret_cast<const void*>(t.qk_norm_rope),   reinterpret_cast<const void*>(t.conv1d_silu_l2),
        reinterpret_cast<const void*>(t.gdn_gate),       reinterpret_cast<const void*>(t.gdn_chunk),
        reinterpret_cast<const void*>(t.gdn_step),       reinterpret_cast<const void*>(t.gated_rmsnorm),
        reinterpret_cast<const void*>(t.kv_append),      reinterpret_cast<const void*>(t.attention_prefill),
        reinterpret_cast<const void*>(t.attention_decode), reinterpret_cast<const void*>(t.gemm),
        reinterpret_cast<const void*>(t.swiglu),         reinterpret_cast<const void*>(t.sample),
        reinterpret_cast<const void*>(t.cursor),         reinterpret_cast<const void*>(t.moe),
        reinterpret_cast<const void*>(t.gdn_decode),     reinterpret_cast<const void*>(t.qk_rope_kv_append),
        reinterpret_cast<const void*>(t.tail_row)};
    for (int i = 0; i < kOpCount; ++i)
        if (!slots[i]) {
            if (missing) *missing = static_cast<OpKind>(i);
            return false;
        }
    return true;
}

bool Fp8Act::fits(int64_t rows, int64_t K) const {
    return K > 0 && K % 128 == 0 && q.dtype == DType::U8 && q.rank == 2 && q.shape[0] == rows && q.shape[1] == K &&
           q.stride[0] == K && !scale.empty() && scale.dtype == DType::F32 && scale.rank == 2 &&
           scale.shape[0] == K / 128 && scale.stride[0] == fp8_act_ld(rows);
}

bool w8a8_weight(const Tensor& w) {
    if (w.rank != 2 || w.shape[1] % 128 != 0) return false;
    return w.dtype == DType::FP8_E4M3 || (w.dtype == DType::INT4 && w.scale_block == 128);
}

Fp8Act fp8_act(void* q, void* scale, int64_t M, int64_t K) {
    Fp8Act a;
    a.q = mat(q, DType::U8, M, K, K);
    a.scale = mat(scale, DType::F32, K / 128, fp8_act_ld(M), fp8_act_ld(M));
    return a;
}

frost_status Backend::create(frost_ctx* ctx, frost_stream* stream, std::unique_ptr<Backend>* out) {
    if (!ctx || !out) return fail(FROST_ERR_INVALID_ARG, "ops::Backend::create: null argument");
    if (frost_ctx_backend(ctx) == FROST_BACKEND_CUDA) return make_cuda_backend(ctx, stream, out);
    return make_cpu_backend(out);
}

}  // namespace frost::ops
