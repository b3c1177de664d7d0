// Op dispatch for every kernel family: record-time checks of the params, the cost estimate, then
// the CPU host launch (kernel runs from a copy of the params) or the CUDA table's launcher.
#include "ops/ops.h"

#include <algorithm>

#include "exec/error.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/moe.h"

namespace frost::ops {
namespace {

bool is_cuda(frost_stream* s) {
    return frost_ctx_backend(frost_stream_ctx(s)) == FROST_BACKEND_CUDA;
}

// Fails with a message naming the op and the broken rule.
#define OP_REQUIRE(cond, name)                                                                 \
    do {                                                                                       \
        if (!(cond))                                                                           \
            return ::frost::fail(FROST_ERR_INVALID_ARG, "op_%s: invalid params: %s", name, #cond); \
    } while (0)

constexpr double kF = sizeof(float);

OpCost cost_of(const EmbedParams& p) { return {0, 2.0 * kF * p.max_rows * p.dim}; }
OpCost cost_of(const RmsNormParams& p) {
    const double n = static_cast<double>(p.last_row_only ? 1 : p.max_rows) * p.heads * p.dim;
    return {4 * n, 2 * kF * n};
}
OpCost cost_of(const GatedRmsNormParams& p) {
    const double n = static_cast<double>(p.max_rows) * p.heads * p.dim;
    return {8 * n, 3 * kF * n};
}
OpCost cost_of(const GemmParams& p) {
    const double m = p.max_rows, k = p.K, n = p.N;
    return {2 * m * n * k, kF * (n * k + m * k + m * n * (p.accumulate ? 2 : 1))};
}
OpCost cost_of(const Conv1dParams& p) {
    const double n = static_cast<double>(p.max_rows) * p.channels;
    return {2.0 * n * p.kernel, 2 * kF * n};
}
OpCost cost_of(const L2NormParams& p) {
    const double n = static_cast<double>(p.max_rows) * p.heads * p.dim;
    return {3 * n, 2 * kF * n};
}
OpCost cost_of(const GdnGateParams& p) {
    const double n = static_cast<double>(p.max_rows) * p.heads;
    return {10 * n, 4 * kF * n};
}
OpCost cost_gdn(const GdnParams& p, bool chunked) {
    const double rows = p.max_rows, kv = static_cast<double>(p.dk) * p.dv;
    const double state = kF * p.Hv * kv;
    const double per_token = chunked ? 8 * kv + 2.0 * p.chunk * (p.dk + p.dv) : 8 * kv;
    return {rows * p.Hv * per_token,
            2 * state * (chunked ? (rows + p.chunk - 1) / p.chunk : rows) +
                kF * rows * (2.0 * p.Hk * p.dk + 2.0 * p.Hv * p.dv)};
}
OpCost cost_of(const RopeParams& p) {
    const double n = static_cast<double>(p.max_rows) * p.heads * p.rotary_dim;
    return {3 * n, 2 * kF * n};
}
OpCost cost_of(const KvAppendParams& p) { return {0, 4 * kF * p.max_rows * p.kv_dim}; }
OpCost cost_of(const AttentionParams& p) {
    // Cost depends on the position; estimated at the row capacity over a context of max_rows.
    const double ctx = p.max_rows, rows = p.max_rows;
    return {4.0 * rows * ctx * p.Hq * p.head_dim, 2 * kF * ctx * p.Hkv * p.head_dim};
}
OpCost cost_of(const SwigluParams& p) { return {5.0 * p.max_rows * p.F, 3 * kF * p.max_rows * p.F}; }
OpCost cost_of(const SampleParams& p) { return {2.0 * p.vocab, kF * p.vocab}; }
OpCost cost_of(const CursorParams&) { return {0, sizeof(StepCursor)}; }
OpCost cost_of(const MoeParams& p) {
    // Per row: router E·H, k routed experts of 3·I·H, the shared expert 3·Is·H (+ its gate H).
    const double rows = p.max_rows, H = p.H;
    const double macs = H * (p.E + 3.0 * p.k * p.I + 3.0 * p.Is + 1);
    // Weights read: router, the shared expert, and at most min(E, rows·k) distinct experts.
    const double experts = std::min<double>(p.E, rows * p.k);
    return {2 * rows * macs, kF * (H * (p.E + 3.0 * experts * p.I + 3.0 * p.Is + 1) + 2 * rows * H)};
}

template <class P>
frost_status launch(frost_stream* s, const char* name, const P& p, frost_host_fn cpu_fn,
                    frost_status (*cuda_fn)(void*, const P&)) {
    if (is_cuda(s)) {
        if (!cuda_fn)
            return fail(FROST_ERR_UNSUPPORTED, "op_%s: no CUDA kernel in this build yet", name);
        return cuda_fn(frost_stream_native(s), p);
    }
    return frost_launch_host(s, cpu_fn, &p, sizeof p);
}

// Host thunks: run the CPU kernel on the copied params and name the op if it refuses its data.
#define OP_THUNK(name, P, fn)                                                             \
    frost_status thunk_##name(const void* args) {                                          \
        frost_status st = kernels::cpu::fn(*static_cast<const P*>(args));                 \
        if (st != FROST_OK) return fail(st, "op_" #name ": kernel rejected its inputs (%s)", \
                                        frost_status_name(st));                            \
        return FROST_OK;                                                                   \
    }
OP_THUNK(embed, EmbedParams, embed)
OP_THUNK(rmsnorm, RmsNormParams, rmsnorm)
OP_THUNK(gated_rmsnorm, GatedRmsNormParams, gated_rmsnorm)
OP_THUNK(gemm, GemmParams, gemm)
OP_THUNK(conv1d, Conv1dParams, conv1d)
OP_THUNK(l2norm, L2NormParams, l2norm)
OP_THUNK(gdn_gates, GdnGateParams, gdn_gates)
OP_THUNK(gdn_chunked, GdnParams, gdn_chunked)
OP_THUNK(gdn_recurrent, GdnParams, gdn_recurrent)
OP_THUNK(rope, RopeParams, rope)
OP_THUNK(kv_append, KvAppendParams, kv_append)
OP_THUNK(attention, AttentionParams, attention)
OP_THUNK(swiglu, SwigluParams, swiglu)
OP_THUNK(sample, SampleParams, sample)
OP_THUNK(cursor, CursorParams, cursor_op)
OP_THUNK(moe, MoeParams, moe)
#undef OP_THUNK

void account(OpCost* cost, const OpCost& c) {
    if (cost) cost->add(c);
}

bool valid_gdn(const GdnParams& p) {
    return p.q && p.k && p.v && p.beta && p.g && p.state && p.o && p.cursor && p.Hk > 0 &&
           p.Hv > 0 && p.Hv % p.Hk == 0 && p.dk > 0 && p.dv > 0 && p.max_rows > 0;
}

}  // namespace

#define OP_CHECK_STREAM(name) OP_REQUIRE(s != nullptr, name)

frost_status op_embed(frost_stream* s, const EmbedParams& p, OpCost* cost) {
    OP_CHECK_STREAM("embed");
    OP_REQUIRE(p.table && p.ids && p.y && p.dim > 0 && p.vocab > 0 && p.max_rows > 0, "embed");
    account(cost, cost_of(p));
    return launch(s, "embed", p, thunk_embed, cuda_op_table().embed);
}
frost_status op_rmsnorm(frost_stream* s, const RmsNormParams& p, OpCost* cost) {
    OP_CHECK_STREAM("rmsnorm");
    OP_REQUIRE(p.x && p.w && p.y && p.dim > 0 && p.heads > 0 && p.max_rows > 0 && p.eps > 0, "rmsnorm");
    account(cost, cost_of(p));
    return launch(s, "rmsnorm", p, thunk_rmsnorm, cuda_op_table().rmsnorm);
}
frost_status op_gated_rmsnorm(frost_stream* s, const GatedRmsNormParams& p, OpCost* cost) {
    OP_CHECK_STREAM("gated_rmsnorm");
    OP_REQUIRE(p.x && p.z && p.w && p.y && p.dim > 0 && p.heads > 0 && p.max_rows > 0, "gated_rmsnorm");
    account(cost, cost_of(p));
    return launch(s, "gated_rmsnorm", p, thunk_gated_rmsnorm, cuda_op_table().gated_rmsnorm);
}
frost_status op_gemm(frost_stream* s, const GemmParams& p, OpCost* cost) {
    OP_CHECK_STREAM("gemm");
    OP_REQUIRE(p.x && p.w && p.y && p.K > 0 && p.N > 0 && p.max_rows > 0, "gemm");
    OP_REQUIRE(p.ldx >= p.K && p.ldy >= p.N, "gemm");
    account(cost, cost_of(p));
    return launch(s, "gemm", p, thunk_gemm, cuda_op_table().gemm);
}
frost_status op_conv1d(frost_stream* s, const Conv1dParams& p, OpCost* cost) {
    OP_CHECK_STREAM("conv1d");
    OP_REQUIRE(p.x && p.w && p.state && p.y && p.channels > 0 && p.max_rows > 0, "conv1d");
    OP_REQUIRE(p.kernel >= 2 && p.kernel <= 8, "conv1d");
    account(cost, cost_of(p));
    return launch(s, "conv1d", p, thunk_conv1d, cuda_op_table().conv1d);
}
frost_status op_l2norm(frost_stream* s, const L2NormParams& p, OpCost* cost) {
    OP_CHECK_STREAM("l2norm");
    OP_REQUIRE(p.x && p.heads > 0 && p.dim > 0 && p.max_rows > 0, "l2norm");
    account(cost, cost_of(p));
    return launch(s, "l2norm", p, thunk_l2norm, cuda_op_table().l2norm);
}
frost_status op_gdn_gates(frost_stream* s, const GdnGateParams& p, OpCost* cost) {
    OP_CHECK_STREAM("gdn_gates");
    OP_REQUIRE(p.a && p.b && p.A_log && p.dt_bias && p.beta && p.g && p.heads > 0, "gdn_gates");
    account(cost, cost_of(p));
    return launch(s, "gdn_gates", p, thunk_gdn_gates, cuda_op_table().gdn_gates);
}
frost_status op_gdn_chunked(frost_stream* s, const GdnParams& p, OpCost* cost) {
    OP_CHECK_STREAM("gdn_chunked");
    OP_REQUIRE(valid_gdn(p) && p.chunk > 0 && p.chunk <= 64, "gdn_chunked");
    account(cost, cost_gdn(p, true));
    return launch(s, "gdn_chunked", p, thunk_gdn_chunked, cuda_op_table().gdn_chunked);
}
frost_status op_gdn_recurrent(frost_stream* s, const GdnParams& p, OpCost* cost) {
    OP_CHECK_STREAM("gdn_recurrent");
    OP_REQUIRE(valid_gdn(p), "gdn_recurrent");
    account(cost, cost_gdn(p, false));
    return launch(s, "gdn_recurrent", p, thunk_gdn_recurrent, cuda_op_table().gdn_recurrent);
}
frost_status op_rope(frost_stream* s, const RopeParams& p, OpCost* cost) {
    OP_CHECK_STREAM("rope");
    OP_REQUIRE(p.x && p.cursor && p.heads > 0 && p.max_rows > 0, "rope");
    OP_REQUIRE(p.rotary_dim > 0 && p.rotary_dim % 2 == 0 && p.rotary_dim <= p.head_dim, "rope");
    account(cost, cost_of(p));
    return launch(s, "rope", p, thunk_rope, cuda_op_table().rope);
}
frost_status op_kv_append(frost_stream* s, const KvAppendParams& p, OpCost* cost) {
    OP_CHECK_STREAM("kv_append");
    OP_REQUIRE(p.k && p.v && p.k_cache && p.v_cache && p.cursor && p.kv_dim > 0 && p.max_seq > 0, "kv_append");
    account(cost, cost_of(p));
    return launch(s, "kv_append", p, thunk_kv_append, cuda_op_table().kv_append);
}
frost_status op_attention(frost_stream* s, const AttentionParams& p, OpCost* cost) {
    OP_CHECK_STREAM("attention");
    OP_REQUIRE(p.q && p.k_cache && p.v_cache && p.o && p.cursor && p.head_dim > 0, "attention");
    OP_REQUIRE(p.Hkv > 0 && p.Hq > 0 && p.Hq % p.Hkv == 0 && p.max_seq > 0, "attention");
    account(cost, cost_of(p));
    return launch(s, "attention", p, thunk_attention, cuda_op_table().attention);
}
frost_status op_swiglu(frost_stream* s, const SwigluParams& p, OpCost* cost) {
    OP_CHECK_STREAM("swiglu");
    OP_REQUIRE(p.x && p.y && p.F > 0 && p.max_rows > 0, "swiglu");
    account(cost, cost_of(p));
    return launch(s, "swiglu", p, thunk_swiglu, cuda_op_table().swiglu);
}
frost_status op_sample(frost_stream* s, const SampleParams& p, OpCost* cost) {
    OP_CHECK_STREAM("sample");
    OP_REQUIRE(p.logits && p.cursor && p.out_token && p.work && p.work_idx && p.vocab > 0, "sample");
    account(cost, cost_of(p));
    return launch(s, "sample", p, thunk_sample, cuda_op_table().sample);
}
frost_status op_cursor(frost_stream* s, const CursorParams& p, OpCost* cost) {
    OP_CHECK_STREAM("cursor");
    OP_REQUIRE(p.cursor && (p.op == kCursorAdvance || (p.op == kCursorDecodeBegin && p.ids)), "cursor");
    account(cost, cost_of(p));
    return launch(s, "cursor", p, thunk_cursor, cuda_op_table().cursor);
}

frost_status op_moe(frost_stream* s, const MoeParams& p, OpCost* cost) {
    OP_CHECK_STREAM("moe");
    OP_REQUIRE(p.x && p.y && p.router && p.experts_gate_up && p.experts_down, "moe");
    OP_REQUIRE(p.shared_gate_up && p.shared_down && p.shared_gate, "moe");
    OP_REQUIRE(p.probs && p.topk_ids && p.topk_w && p.work, "moe");
    OP_REQUIRE(p.H > 0 && p.E > 0 && p.k >= 1 && p.k <= p.E && p.I > 0 && p.Is > 0 && p.max_rows > 0, "moe");
    account(cost, cost_of(p));
    return launch<MoeParams>(s, "moe", p, thunk_moe, nullptr);
}

}  // namespace frost::ops
