// Op dispatch on the CPU backend: ops run through frost_launch_host with params copied by value,
// record into graphs, report their cost, reject bad params at record time naming the op, and a
// kernel that refuses its data surfaces as the stream's error naming the op.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ops/ops.h"

namespace frost::ops {
namespace {

struct Ctx {
    frost_ctx* ctx = nullptr;
    frost_stream* st = nullptr;
    Ctx() {
        EXPECT_EQ(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx), FROST_OK);
        EXPECT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK);
    }
    ~Ctx() { frost_ctx_destroy(ctx); }
};

struct GemmData {
    int M = 3, K = 16, N = 5;
    std::vector<float> x, w, y;
    GemmData() {
        std::mt19937 r(std::random_device{}());
        std::normal_distribution<float> d;
        x.resize(size_t(M) * K); w.resize(size_t(N) * K);
        y.assign(size_t(M) * N, std::numeric_limits<float>::quiet_NaN());
        for (auto& v : x) v = d(r);
        for (auto& v : w) v = d(r);
    }
    GemmParams params() {
        GemmParams p{};
        p.x = x.data(); p.w = w.data(); p.y = y.data(); p.ldx = K; p.ldy = N; p.K = K; p.N = N; p.max_rows = M;
        return p;
    }
    double ref(int m, int n) const {
        double s = 0;
        for (int k = 0; k < K; ++k) s += double(x[m * K + k]) * w[n * K + k];
        return s;
    }
};

TEST(OpsDispatch, GemmRunsFromACopyOfItsParamsAndReportsCost) {
    Ctx c;
    GemmData g;
    GemmParams p = g.params();
    OpCost cost;
    ASSERT_EQ(op_gemm(c.st, p, &cost), FROST_OK);
    p.y = nullptr;  // the enqueued launch owns its own copy
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK);
    for (int m = 0; m < g.M; ++m)
        for (int n = 0; n < g.N; ++n) EXPECT_NEAR(g.y[m * g.N + n], g.ref(m, n), 1e-4);
    EXPECT_DOUBLE_EQ(cost.flops, 2.0 * g.M * g.N * g.K);
    EXPECT_GT(cost.bytes, 0);
}

struct Rec {
    GemmParams p;
    static frost_status record(void* u, frost_stream* s) { return op_gemm(s, static_cast<Rec*>(u)->p); }
};

TEST(OpsDispatch, RecordsIntoAGraphAndReplaysWithRowsFromTheCursor) {
    Ctx c;
    GemmData g;
    int32_t rows = 1;  // the "cursor": read at run time, not at capture
    Rec r{g.params()};
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
    GemmParams p = g.params();
    p.ldx = 1;  // smaller than K
    EXPECT_EQ(op_gemm(c.st, p), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_gemm"), std::string::npos) << frost_last_error();
    RopeParams rp{};
    EXPECT_EQ(op_rope(c.st, rp), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_rope"), std::string::npos);
    EXPECT_EQ(op_gemm(nullptr, g.params()), FROST_ERR_INVALID_ARG);
}

TEST(OpsDispatch, KernelRefusalBecomesTheStreamErrorNamingTheOp) {
    Ctx c;
    std::vector<float> table(4 * 8, 1.0f), y(2 * 8);
    int32_t ids[2] = {1, 7};  // 7 is outside a 4-row table
    EmbedParams p{};
    p.table = table.data(); p.table_type = WeightType::F32; p.ids = ids; p.y = y.data();
    p.vocab = 4; p.dim = 8; p.max_rows = 2;
    ASSERT_EQ(op_embed(c.st, p), FROST_OK);
    EXPECT_EQ(frost_stream_sync(c.st), FROST_ERR_OUT_OF_RANGE);
    EXPECT_NE(std::string(frost_last_error()).find("op_embed"), std::string::npos) << frost_last_error();
}

TEST(OpsDispatch, CudaStreamsWithoutKernelsAreUnsupportedNamingTheOp) {
    if (!frost_backend_available(FROST_BACKEND_CUDA)) GTEST_SKIP() << "no CUDA backend in this build";
    frost_ctx* ctx = nullptr;
    frost_stream* st = nullptr;
    ASSERT_EQ(frost_ctx_create(FROST_BACKEND_CUDA, 0, &ctx), FROST_OK);
    ASSERT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK);
    if (cuda_op_table().gemm == nullptr) {
        GemmData g;
        EXPECT_EQ(op_gemm(st, g.params()), FROST_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(frost_last_error()).find("op_gemm"), std::string::npos);
    }
    frost_ctx_destroy(ctx);
}

}  // namespace
}  // namespace frost::ops
