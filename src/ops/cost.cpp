// The one cost model of the ops (ops.h cost_of): bytes each op must move (inputs read once,
// outputs written once, in the views' dtypes) and its FLOPs, at the params' row capacity. The CLI
// and the per-kernel bench both read these numbers; nothing else estimates an op's work.
#include "ops/ops.h"

#include <algorithm>

namespace frost::ops {
namespace {

double B(const Tensor& t) { return t.empty() ? 0.0 : double(dtype_bits(t.dtype)) / 8.0; }
// An FP8 twin (Fp8Act) written beside an output: its e4m3 bytes and one fp32 scale per 128.
double twin_bytes(const Fp8Act& t) { return t.on() ? double(t.q.numel()) * (1.0 + 4.0 / 128.0) : 0.0; }

// Bytes per element of a producer's output y: none when only its FP8 twin is written (yq_only).
template <class Op>
double y_bytes(const Tensor& y, const Op& p) {
    return p.yq.on() && p.yq_only ? 0.0 : B(y);
}

}  // namespace

OpCost cost_of(const EmbedOp& p) {
    const double n = double(p.rows.max) * p.y.shape[1];
    return {0, n * (B(p.table) + B(p.y)) + 4.0 * p.rows.max};
}

OpCost cost_of(const AddRmsNormOp& p) {
    const double rows = p.last_row_only ? 1 : p.rows.max, n = rows * p.h.shape[1];
    return {4 * n, n * (B(p.h) * (p.delta.empty() ? 1 : 3) + B(p.delta) + y_bytes(p.y, p)) + 4.0 * p.h.shape[1] +
                       twin_bytes(p.yq)};
}

OpCost cost_of(const QkNormRopeOp& p) {
    const double d = p.q.shape[2], n = double(p.max_rows) * (p.q.shape[1] + p.k.shape[1]) * d;
    return {4 * n + 3.0 * n * p.rotary_dim / d, 2 * B(p.q) * n + 8 * d};
}

OpCost cost_of(const Conv1dSiluL2Op& p) {
    const double C = p.x.shape[1], K = p.w.shape[1], n = double(p.rows.max) * C;
    const double states = p.batch.on() ? p.batch.B : 1;  // batched: one state per member
    return {n * (2 * K + 4) + 3.0 * p.rows.max * p.l2_dim * p.l2_heads,
            n * (B(p.x) + B(p.y)) + C * K * 4 + states * 2 * C * (K - 1) * B(p.state)};
}

OpCost cost_of(const GdnGateOp& p) {
    const double n = double(p.rows.max) * p.a.shape[1];
    return {10 * n, n * (2 * B(p.a) + 8)};
}

// State read + written once per launch, q/k/v/o once per row, beta/g (fp32) once per row.
static OpCost gdn_cost(const Tensor& q, const Tensor& v, const Tensor& state, int rows, int chunk,
                       int states = 1) {
    const double Hk = q.shape[1], dk = q.shape[2], Hv = v.shape[1], dv = v.shape[2];
    const double kv = dk * dv;
    const double per_token = chunk > 0 ? 8 * kv + 2.0 * chunk * (dk + dv) : 8 * kv;
    return {double(rows) * Hv * per_token,
            2 * B(state) * states * Hv * kv + double(rows) * B(q) * (2 * Hk * dk + 2 * Hv * dv) + double(rows) * Hv * 8};
}

OpCost cost_of(const GdnChunkOp& p) {
    const OpCost r = gdn_cost(p.q, p.v, p.state, p.max_rows, p.chunk);
    if (p.gate.b.empty()) return r;
    const OpCost g = cost_of(p.gate);
    return {r.flops + g.flops, r.bytes + g.bytes};
}
OpCost cost_of(const GdnStepOp& p) {
    return gdn_cost(p.q, p.v, p.state, p.max_rows, 0, p.batch.on() ? p.batch.B : 1);
}

OpCost cost_of(const GatedRmsNormOp& p) {
    const double n = double(p.rows.max) * p.heads * p.dim;
    return {8 * n, n * (B(p.x) + B(p.z) + y_bytes(p.y, p)) + 4.0 * p.dim + twin_bytes(p.yq)};
}

OpCost cost_of(const GdnDecodeOp& p) {
    const OpCost c = cost_of(p.conv), s = cost_of(p.step), n = cost_of(p.norm);
    const OpCost g = p.gates.w.data ? cost_of(p.gates) : OpCost{};
    return {c.flops + s.flops + n.flops + g.flops, c.bytes + s.bytes + n.bytes + g.bytes};
}

OpCost cost_of(const KvAppendOp& p) {
    const double n = double(p.max_rows) * p.k.shape[1];
    return {0, 2 * n * (B(p.k) + B(p.k_cache))};
}

OpCost cost_of(const QkRopeKvAppendOp& p) {
    const OpCost a = cost_of(p.qk), b = cost_of(p.kv);
    return {a.flops + b.flops, a.bytes + b.bytes};
}

OpCost cost_of(const AttentionOp& p, int64_t context) {
    const double rows = p.max_rows, ctx = double(context), Hq = p.q.shape[1], d = p.q.shape[2];
    const double Hkv = p.k_cache.shape[1];
    const double caches = p.batch.on() ? p.batch.B : 1;  // batched: each member reads its own cache
    return {4.0 * rows * ctx * Hq * d,
            2 * B(p.k_cache) * caches * ctx * Hkv * d + rows * Hq * d * (2 * B(p.q) + B(p.o))};
}

OpCost cost_of(const GemmOp& p) {
    const double m = p.x.shape[0], k = p.x.shape[1], n = p.w.shape[0];
    const double out = double(p.y.shape[1]) * m * B(p.y) * (p.epilogue == Epilogue::Residual ? 2 : 1);
    // A quantized weight moves its packed bytes + scales (the decode GEMV's floor); for M > 1 the
    // CUDA path also writes and reads back a bf16 dequantized copy (the prefill tile). A W8A8
    // prefill GEMM (quant_act on w8a8_weight; prefill rows as CUDA counts them: not a batched
    // decode step of <= 8 PDL rows) writes no bf16 copy: FP8 is read as stored, INT4 (W4A8)
    // converted into an e4m3 one (a byte a weight, written and read). It reads x's e4m3 twin
    // where x's producer wrote one (xq), else reads x and writes that twin first.
    const bool w8a8 = p.quant_act && p.w.quantized() && w8a8_weight(p.w) && m > 1 && !(p.pdl && m <= 8);
    double tile = p.w.quantized() && m > 1 ? 2.0 * n * k * 2.0 : 0.0;
    double in = m * k * B(p.x);
    if (w8a8) {
        tile = p.w.dtype == DType::INT4 ? 2.0 * n * k : 0.0;
        const double twin = m * k * (1.0 + 4.0 / 128.0);
        in = p.xq.on() ? twin : in + 2.0 * twin;
    }
    return {2 * m * n * k, p.w.weight_bytes() + tile + in + out, w8a8 ? 2 * m * n * k : 0.0};
}

OpCost cost_of(const SwigluOp& p) {
    const double n = double(p.rows.max) * p.y.shape[1];
    return {5 * n, n * (2 * B(p.x) + y_bytes(p.y, p)) + twin_bytes(p.yq)};
}

OpCost cost_of(const SampleOp& p) {
    const double v = p.logits.shape[1];
    // With sampler settings the row is also processed (counts read, processed row written and read).
    return {2 * v, p.settings ? 16 * v : 4 * v};
}

OpCost cost_of(const CursorOpParams& p) {
    return {0, double(sizeof(StepCursor)) * (p.batch.on() ? 2 * p.batch.B : 1)};
}

OpCost cost_of(const MoeOp& p) {
    // Per row: router E.H MACs, k routed experts of 3.I.H, the shared expert 3.Is.H and its gate H.
    const double rows = p.rows.max, H = double(p.x.shape[1]);
    const double macs = H * (p.E + 3.0 * p.k * p.I + 3.0 * p.Is + 1);
    // Weights read: router, shared expert + gate, and the distinct experts the rows can select
    // (at most min(E, rows.k)): ACTIVE weights, never all E experts.
    // Quantized experts count their packed bytes + scales (weight_bytes() / E per expert).
    const double experts = std::min<double>(p.E, rows * p.k);
    const double per_expert = (p.experts_gate_up.weight_bytes() + p.experts_down.weight_bytes()) / double(p.E);
    const double wbytes = B(p.router) * p.E * H + experts * per_expert + p.shared_gate_up.weight_bytes() +
                          p.shared_down.weight_bytes() + B(p.shared_gate) * H;
    const double io = rows * H * (B(p.x) + 2 * B(p.y)) + rows * (4.0 * p.E + 8.0 * p.k);
    // Prefill over quantized experts (CUDA): every expert dequantized to a bf16 tile, written and
    // read back by the grouped GEMMs (as GemmOp's tile). With quant_act over FP8 experts in
    // 128 x 128 blocks or per-channel (cuda_ops.cpp moe_w8a8) the GEMMs read the stacks as stored; instead x and
    // the bf16 expert activations [rows * (k + 1), I] are read once more and written as e4m3 +
    // one fp32 scale per 128.
    const Tensor* mats[] = {&p.experts_gate_up, &p.experts_down, &p.shared_gate_up, &p.shared_down};
    bool w8a8 = p.quant_act && rows > 8 && p.I == p.Is;
    for (const Tensor* t : mats)
        w8a8 = w8a8 && t->dtype == DType::FP8_E4M3 &&
               ((t->scale_block == 128 && t->scale_rows == 128) || (t->scale_rows == 1 && t->scale_block == t->shape[1]));
    double tile = 0;
    if (w8a8) {
        const double act = rows * (p.k + 1) * double(p.I);
        tile = rows * H * B(p.x) + act * 2.0 + (rows * H + act) * (1.0 + 4.0 / 128.0);
    } else if (rows > 8) {
        for (const Tensor* t : mats)
            if (t->quantized()) tile += 2.0 * 2.0 * double(t->shape[0]) * double(t->shape[1]);
    }
    // W8A8: the routed and shared experts on FP8 tensor cores; the router and the shared-expert
    // gate stay bf16.
    const double fp8 = w8a8 ? 2 * rows * H * (3.0 * p.k * p.I + 3.0 * p.Is) : 0.0;
    return {2 * rows * macs, wbytes + io + tile, fp8};
}

OpCost cost_of(const TailRowOp& p) {
    double bytes = 2.0 * double(sizeof(StepCursor));
    for (const Tensor& v : p.views)
        if (!v.empty()) bytes += 2.0 * double(v.shape[1]) * B(v);  // one row read, one written
    return {0, bytes};
}

}  // namespace frost::ops
