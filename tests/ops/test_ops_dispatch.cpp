// Op dispatch on the CPU backend: ops run through frost_launch_host with params copied by value,
// record into graphs, tell an attached observer their cost and a replay closure, reject bad
// params at record time naming the op, and a kernel that refuses its data surfaces as the
// stream's error naming the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace frost::ops {
namespace {

using Ctx = test::OpsCtx;

struct GemmData {
    int M = 3, K = 16, N = 5;
    std::vector<float> x, w, y;
    GemmData() {
        std::mt19937 r(std::random_device{}());
        std::normal_distribution<float> d;
        x.resize(size_t(M) * K);
        w.resize(size_t(N) * K);
        y.assign(size_t(M) * N, std::numeric_limits<float>::quiet_NaN());
        for (auto& v : x) v = d(r);
        for (auto& v : w) v = d(r);
    }
    GemmOp op() {
        GemmOp p;
        p.x = mat(x.data(), DType::F32, M, K, K);
        p.w = mat(w.data(), DType::F32, N, K, K);
        p.y = mat(y.data(), DType::F32, M, N, N);
        return p;
    }
    double ref(int m, int n) const {
        double s = 0;
        for (int k = 0; k < K; ++k) s += double(x[m * K + k]) * w[n * K + k];
        return s;
    }
};

// The cost of a quantized prefill GEMM: the exact path writes and reads a bf16 copy of the
// weight; W8A8 (quant_act) none for FP8 and a one-byte e4m3 copy for INT4 in 128-wide groups (W4A8),
// plus x's e4m3 twin (written and read, or only read where its producer wrote it). A batched
// decode step (PDL, <= 8 rows) and INT4 groups of 64 keep the old count. The FLOPs of a W8A8
// GEMM are all FP8 ones (OpCost::flops_fp8); the other forms have none.
TEST(OpsDispatch, CostOfW8a8PrefillGemmCountsItsOperandsNotABf16Tile) {
    std::vector<uint8_t> bytes(1 << 16);
    const double M = 256, K = 1024, N = 448;
    GemmOp p;
    p.x = mat(bytes.data(), DType::BF16, int64_t(M), int64_t(K), int64_t(K));
    p.y = mat(bytes.data(), DType::BF16, int64_t(M), int64_t(N), int64_t(N));
    Tensor w = mat(bytes.data(), DType::FP8_E4M3, int64_t(N), int64_t(K), int64_t(K));
    w.scale = bytes.data();
    w.scale_rows = 1;
    w.scale_block = int32_t(K);  // per-channel
    p.w = w;
    const double base = w.weight_bytes() + M * N * 2.0, twin = M * K * (1.0 + 4.0 / 128.0);
    EXPECT_DOUBLE_EQ(cost_of(p).bytes, base + 4.0 * N * K + M * K * 2.0) << "exact: the bf16 tile";
    EXPECT_EQ(cost_of(p).flops_fp8, 0.0) << "exact: a bf16 GEMM";
    p.quant_act = 1;
    EXPECT_DOUBLE_EQ(cost_of(p).bytes, base + M * K * 2.0 + 2.0 * twin) << "FP8 W8A8, x quantized by the GEMM";
    // Every FLOP of a W8A8 GEMM runs on FP8 tensor cores (the bench's FP8-aware floor).
    EXPECT_DOUBLE_EQ(cost_of(p).flops, 2.0 * M * N * K);
    EXPECT_DOUBLE_EQ(cost_of(p).flops_fp8, cost_of(p).flops);
    std::vector<uint8_t> q(size_t(M * K)), s(size_t(fp8_act_ld(int64_t(M)) * int64_t(K / 128)) * 4);
    p.xq = fp8_act(q.data(), s.data(), int64_t(M), int64_t(K));
    EXPECT_DOUBLE_EQ(cost_of(p).bytes, base + twin) << "FP8 W8A8 on its producer's twin";
    Tensor i4 = mat(bytes.data(), DType::INT4, int64_t(N), int64_t(K), int64_t(K));
    i4.scale = bytes.data();
    i4.scale_block = 128;
    p.w = i4;
    const double base4 = i4.weight_bytes() + M * N * 2.0;
    EXPECT_DOUBLE_EQ(cost_of(p).bytes, base4 + 2.0 * N * K + twin) << "INT4 W4A8: the e4m3 copy";
    EXPECT_DOUBLE_EQ(cost_of(p).flops_fp8, 2.0 * M * N * K) << "INT4 W4A8 on FP8 tensor cores";
    p.w.scale_block = 64;  // not a W8A8 weight: the exact path
    EXPECT_DOUBLE_EQ(cost_of(p).bytes, p.w.weight_bytes() + M * N * 2.0 + 4.0 * N * K + M * K * 2.0);
    EXPECT_EQ(cost_of(p).flops_fp8, 0.0);
    p.w = w;
    p.x.shape[0] = p.y.shape[0] = 4;
    p.pdl = 1;  // a batched decode step: not the W8A8 GEMM
    EXPECT_DOUBLE_EQ(cost_of(p).bytes, w.weight_bytes() + 4 * N * 2.0 + 4.0 * N * K + 4 * K * 2.0);
    EXPECT_EQ(cost_of(p).flops_fp8, 0.0);
    // OpCost::add sums the FP8 part with the rest.
    OpCost sum;
    p.x.shape[0] = p.y.shape[0] = int64_t(M);
    p.pdl = 0;
    sum.add(cost_of(p));
    sum.add(OpCost{10.0, 20.0});
    EXPECT_DOUBLE_EQ(sum.flops_fp8, 2.0 * M * N * K);
    EXPECT_DOUBLE_EQ(sum.flops, 2.0 * M * N * K + 10.0);
}

// Which weights W8A8 prefill reaches: FP8 in any scale layout, INT4 in 128-wide groups (their
// values exact in e4m3); never K off the 128 grid, other INT4 groups, NVFP4 or unquantized ones.
TEST(OpsDispatch, W8a8WeightsAreFp8AndInt4InGroupsOf128) {
    std::vector<uint8_t> bytes(64);
    const auto w = [&](DType t, int64_t K, int32_t block) {
        Tensor v = mat(bytes.data(), t, 256, K, K);
        v.scale = bytes.data();
        v.scale_block = block;
        v.scale_rows = t == DType::FP8_E4M3 ? 128 : 0;
        return v;
    };
    EXPECT_TRUE(w8a8_weight(w(DType::FP8_E4M3, 512, 128)));
    EXPECT_TRUE(w8a8_weight(w(DType::FP8_E4M3, 512, 512)));  // one block along k
    EXPECT_TRUE(w8a8_weight(w(DType::INT4, 512, 128)));
    EXPECT_FALSE(w8a8_weight(w(DType::FP8_E4M3, 192, 192)));  // K off the 128 grid
    EXPECT_FALSE(w8a8_weight(w(DType::INT4, 512, 64)));
    EXPECT_FALSE(w8a8_weight(w(DType::INT4, 512, 256)));
    EXPECT_FALSE(w8a8_weight(w(DType::NVFP4, 512, 16)));
    EXPECT_FALSE(w8a8_weight(w(DType::BF16, 512, 0)));
    EXPECT_FALSE(w8a8_weight(Tensor{}));
}

TEST(OpsDispatch, GemmRunsFromACopyOfItsParamsAndTellsTheObserverItsCost) {
    Ctx c;
    GemmData g;
    GemmOp p = g.op();
    std::vector<OpRecord> seen;
    const OpObserver obs = [&](const OpRecord& r) { seen.push_back(r); };
    ASSERT_EQ(op_gemm(c.exec(&obs), p, "test gemm"), FROST_OK);
    p.y = Tensor{};  // the enqueued launch owns its own copy
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK);
    for (int m = 0; m < g.M; ++m)
        for (int n = 0; n < g.N; ++n) EXPECT_NEAR(g.y[m * g.N + n], g.ref(m, n), 1e-4);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].kind, OpKind::Gemm);
    EXPECT_STREQ(seen[0].label, "test gemm");
    EXPECT_DOUBLE_EQ(seen[0].cost.flops, 2.0 * g.M * g.N * g.K);
    EXPECT_DOUBLE_EQ(seen[0].cost.bytes, 4.0 * (g.N * g.K + g.M * g.K + g.M * g.N));
    // The replay closure enqueues the same launch again.
    std::fill(g.y.begin(), g.y.end(), std::numeric_limits<float>::quiet_NaN());
    ASSERT_EQ(seen[0].replay(c.st), FROST_OK);
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK);
    EXPECT_NEAR(g.y[2 * g.N + 4], g.ref(2, 4), 1e-4);
}

struct Rec {
    Exec ex;
    GemmOp p;
    static frost_status record(void* u, frost_stream* s) {
        Rec* r = static_cast<Rec*>(u);
        Exec e = r->ex;
        e.stream = s;
        return op_gemm(e, r->p);
    }
};

TEST(OpsDispatch, RecordsIntoAGraphAndReplaysWithRowsFromTheCursor) {
    Ctx c;
    GemmData g;
    int32_t rows = 1;  // the "cursor": read at run time, not at capture
    Rec r{c.exec(), g.op()};
    r.p.n_rows = &rows;
    frost_graph* graph = nullptr;
    ASSERT_EQ(frost_graph_create(c.ctx, "gemm", 0, &graph), FROST_OK);
    ASSERT_EQ(frost_graph_capture(graph, 1, c.st, Rec::record, &r), FROST_OK);
    EXPECT_TRUE(std::isnan(g.y[0]));  // nothing ran during capture
    ASSERT_EQ(frost_graph_replay(graph, 1, c.st), FROST_OK);
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK);
    EXPECT_NEAR(g.y[0], g.ref(0, 0), 1e-4);
    EXPECT_TRUE(std::isnan(g.y[size_t(g.N)]));  // row 1 untouched with rows = 1
    rows = 3;
    ASSERT_EQ(frost_graph_replay(graph, 1, c.st), FROST_OK);
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK);
    EXPECT_NEAR(g.y[2 * g.N + 4], g.ref(2, 4), 1e-4);
    frost_graph_destroy(graph);
}

TEST(OpsDispatch, BadParamsAreRefusedAtRecordTimeNamingTheOp) {
    Ctx c;
    GemmData g;
    GemmOp p = g.op();
    p.x.stride[0] = 1;  // smaller than K
    EXPECT_EQ(op_gemm(c.exec(), p), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_gemm"), std::string::npos) << frost_last_error();
    QkNormRopeOp qk;
    EXPECT_EQ(op_qk_norm_rope(c.exec(), qk), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_qk_norm_rope"), std::string::npos);
    EXPECT_EQ(op_gemm(Exec{}, g.op()), FROST_ERR_INVALID_ARG);
}

// The gated delta rule with its gate (prefill's form): the CPU runs the gate first into the op's
// beta / g, and a gate that writes other beta / g than the rule reads is refused at record time.
TEST(OpsDispatch, GdnChunkRunsItsGateFirstAndRefusesAGateWritingElsewhere) {
    Ctx c;
    constexpr int rows = 5, Hk = 1, Hv = 2, D = 128, W = 2 * Hk * D + Hv * D, G = 2 * Hv;
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> nd;
    std::vector<float> qkv(size_t(rows) * W), ba(size_t(rows) * G), A_log(Hv), dt(Hv);
    for (auto& v : qkv) v = 0.05f * nd(rng);
    for (auto& v : ba) v = nd(rng);
    for (auto& v : A_log) v = 0.5f * nd(rng);
    for (auto& v : dt) v = 0.5f * nd(rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> beta(size_t(rows) * Hv, nan), g(size_t(rows) * Hv, nan), other(size_t(rows) * Hv, nan);
    std::vector<float> state(size_t(Hv) * D * D, 0.0f), o(size_t(rows) * Hv * D, nan);
    kernels::StepCursor cur{};
    cur.n_tokens = rows;
    GdnChunkOp p;
    p.q = heads(qkv.data(), DType::F32, rows, Hk, D, W, D);
    p.k = heads(qkv.data() + Hk * D, DType::F32, rows, Hk, D, W, D);
    p.v = heads(qkv.data() + 2 * Hk * D, DType::F32, rows, Hv, D, W, D);
    p.beta = mat(beta.data(), DType::F32, rows, Hv, Hv);
    p.g = mat(g.data(), DType::F32, rows, Hv, Hv);
    p.state = heads(state.data(), DType::F32, Hv, D, D, D * D, D);
    p.o = mat(o.data(), DType::F32, rows, Hv * D, Hv * D);
    p.max_rows = rows;
    p.cursor = &cur;
    GdnGateOp& gate = p.gate;
    gate.b = mat(ba.data(), DType::F32, rows, Hv, G);
    gate.a = mat(ba.data() + Hv, DType::F32, rows, Hv, G);
    gate.A_log = vec(A_log.data(), DType::F32, Hv);
    gate.dt_bias = vec(dt.data(), DType::F32, Hv);
    gate.beta = p.beta;
    gate.g = p.g;
    gate.rows = {rows, nullptr};
    GdnChunkOp bad = p;
    bad.gate.beta = mat(other.data(), DType::F32, rows, Hv, Hv);
    EXPECT_EQ(op_gdn_chunk(c.exec(), bad), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_gdn_chunk"), std::string::npos) << frost_last_error();
    ASSERT_EQ(op_gdn_chunk(c.exec(), p), FROST_OK) << frost_last_error();
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK) << frost_last_error();
    for (int r = 0; r < rows; ++r)
        for (int h = 0; h < Hv; ++h) {  // the gate's formulas (GdnGateParams), in double
            const double b = ba[r * G + h], a = ba[r * G + Hv + h] + double(dt[h]);
            const double sp = a > 20.0 ? a : std::log1p(std::exp(a));
            EXPECT_NEAR(beta[r * Hv + h], 1.0 / (1.0 + std::exp(-b)), 1e-6) << "row " << r << " head " << h;
            EXPECT_NEAR(g[r * Hv + h], -std::exp(double(A_log[h])) * sp, 1e-5 * (1.0 + sp)) << "row " << r;
        }
    for (float v : o) ASSERT_TRUE(std::isfinite(v));
}

TEST(OpsDispatch, KernelRefusalBecomesTheStreamErrorNamingTheOp) {
    Ctx c;
    std::vector<float> table(4 * 8, 1.0f), y(2 * 8);
    int32_t ids[2] = {1, 7};  // 7 is outside a 4-row table
    EmbedOp p;
    p.table = mat(table.data(), DType::F32, 4, 8, 8);
    p.ids = ids;
    p.y = mat(y.data(), DType::F32, 2, 8, 8);
    p.rows.max = 2;
    ASSERT_EQ(op_embed(c.exec(), p), FROST_OK);
    EXPECT_EQ(frost_stream_sync(c.st), FROST_ERR_OUT_OF_RANGE);
    EXPECT_NE(std::string(frost_last_error()).find("op_embed"), std::string::npos) << frost_last_error();
}

TEST(OpsDispatch, EveryOpHasACpuImplementation) {
    OpKind missing = OpKind::Count;
    EXPECT_TRUE(op_table_complete(cpu_op_table(), &missing)) << op_name(missing);
}

// A prefill's tail row: row n - 1 of each view (a column range of a wider row, a bf16 view, a
// dense one) lands in row 0 bit for bit, no other row is touched, and the tail cursor is the
// cursor of that row alone (every other field copied). n = 1 moves nothing; n beyond the rows
// clamps to the last row; an empty view slot is skipped.
TEST(OpsDispatch, TailRowMovesTheLastValidRowToRowZeroAndWritesItsCursor) {
    Ctx c;
    std::mt19937 r(std::random_device{}());
    std::uniform_int_distribution<int> pos_d(0, 5000), n_d(2, 63);
    const int rows = 64, wide = 40, cols = 24, off = 10, narrow = 8;
    for (int n : {n_d(r), 1, 64, 90}) {
        SCOPED_TRACE(n);
        std::vector<float> a(size_t(rows) * wide), b(size_t(rows) * narrow);
        std::vector<uint16_t> h(size_t(rows) * narrow);
        std::normal_distribution<float> d;
        for (auto& v : a) v = d(r);
        for (auto& v : b) v = d(r);
        for (auto& v : h) v = uint16_t(r());
        const auto a0 = a, b0 = b;
        const auto h0 = h;
        StepCursor cur{};
        cur.pos = pos_d(r); cur.n_tokens = n; cur.last_token = 1234; cur.rng_seed = 99; cur.steps = 7;
        cur.reserved[2] = 55;
        StepCursor tail;
        std::memset(&tail, 0xa5, sizeof tail);
        TailRowOp p;
        p.views[0] = mat(a.data() + off, DType::F32, rows, cols, wide);
        p.views[2] = mat(h.data(), DType::BF16, rows, narrow, narrow);  // slot 1 left empty
        p.views[3] = mat(b.data(), DType::F32, rows, narrow, narrow);
        p.max_rows = rows; p.cursor = &cur; p.tail = &tail;
        ASSERT_EQ(op_tail_row(c.exec(), p, "tail row"), FROST_OK) << frost_last_error();
        ASSERT_EQ(frost_stream_sync(c.st), FROST_OK) << frost_last_error();
        const int last = std::min(n, rows) - 1;
        for (int row = 0; row < rows; ++row)
            for (int j = 0; j < wide; ++j) {
                const bool moved = row == 0 && j >= off && j < off + cols;
                ASSERT_EQ(a[size_t(row) * wide + j], a0[size_t(moved ? last : row) * wide + j]) << row << " " << j;
            }
        for (int row = 0; row < rows; ++row)
            for (int j = 0; j < narrow; ++j) {
                const size_t from = size_t(row == 0 ? last : row) * narrow + j;
                ASSERT_EQ(b[size_t(row) * narrow + j], b0[from]);
                ASSERT_EQ(h[size_t(row) * narrow + j], h0[from]);
            }
        StepCursor want = cur;
        want.pos = cur.pos + last;
        want.n_tokens = 1;
        EXPECT_EQ(std::memcmp(&tail, &want, sizeof want), 0);
        EXPECT_EQ(cur.n_tokens, n);  // the step's own cursor is read only
    }
    // Refused at record time: no tail cursor, a view shorter than the rows.
    StepCursor cur{}, tail{};
    std::vector<float> a(16);
    TailRowOp bad;
    bad.views[0] = mat(a.data(), DType::F32, 4, 4, 4);
    bad.max_rows = 4; bad.cursor = &cur;
    EXPECT_EQ(op_tail_row(c.exec(), bad), FROST_ERR_INVALID_ARG);
    bad.tail = &tail; bad.max_rows = 8;
    EXPECT_EQ(op_tail_row(c.exec(), bad), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("tail_row"), std::string::npos);
}

}  // namespace
}  // namespace frost::ops
