// Contract tests for plans: a dependency orders nodes across streams even when the first node is
// slow, a diamond DAG over two streams matches a naive computation on every execute, a missing
// key enqueues nothing, and bad edges are rejected.
#include "contract_util.h"

namespace frost::test {
namespace {

// One host step per graph: *dst = f(*src...) with an optional delay.
struct Step {
    enum Kind { kStore, kMap, kSum } kind;
    uint32_t* dst;
    const uint32_t* a;
    const uint32_t* b;
    uint32_t mul, add, sleep_ms;
};
frost_status record_step(void* user, frost_stream* s) {
    const auto& st = *static_cast<Step*>(user);
    switch (st.kind) {
        case Step::kStore: {
            const StoreArgs args{st.dst, st.add, st.sleep_ms};
            return frost_launch_host(s, store_fn, &args, sizeof args);
        }
        case Step::kMap: {
            const MapArgs args{st.a, st.dst, st.mul, st.add};
            return frost_launch_host(s, map_fn, &args, sizeof args);
        }
        case Step::kSum: {
            const Sum2Args args{st.a, st.b, st.dst};
            return frost_launch_host(s, sum2_fn, &args, sizeof args);
        }
    }
    return FROST_ERR_INVALID_ARG;
}

class ExecPlan : public ContractTest {
protected:
    void SetUp() override {
        ContractTest::SetUp();
        FROST_ASSERT_OK(frost_stream_create(ctx, 0, &s2));
        cells_buf = alloc("cells", kCells * sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
        ASSERT_NE(cells_buf, nullptr);
        cells = static_cast<uint32_t*>(frost_buffer_ptr(cells_buf));
        for (size_t i = 0; i < kCells; ++i) cells[i] = 0;
        FROST_ASSERT_OK(frost_plan_create(ctx, &plan));
    }
    frost_graph* graph(const char* name, Step* step, frost_shape_key key = 1) {
        frost_graph* g = nullptr;
        EXPECT_EQ(frost_graph_create(ctx, name, 0, &g), FROST_OK);
        EXPECT_EQ(frost_graph_capture(g, key, stream, record_step, step), FROST_OK) << frost_last_error();
        return g;
    }
    static constexpr size_t kCells = 8;
    frost_stream* s2 = nullptr;
    frost_buffer* cells_buf = nullptr;
    uint32_t* cells = nullptr;
    frost_plan* plan = nullptr;
};

TEST_P(ExecPlan, DependencyOrdersASlowProducerBeforeAConsumerOnAnotherStream) {
    constexpr uint32_t kSlowMs = 30;
    Step produce{Step::kStore, &cells[0], nullptr, nullptr, 0, 0, kSlowMs};
    Step consume{Step::kMap, &cells[1], &cells[0], nullptr, 1, 0, 0};
    frost_graph* gp = graph("producer", &produce);
    frost_graph* gc = graph("consumer", &consume);
    size_t n0 = 99, n1 = 99;
    FROST_ASSERT_OK(frost_plan_add(plan, gp, 1, stream, &n0));
    FROST_ASSERT_OK(frost_plan_add(plan, gc, 1, s2, &n1));
    EXPECT_EQ(n0, 0u);
    EXPECT_EQ(n1, 1u);
    FROST_ASSERT_OK(frost_plan_depend(plan, n0, n1));
    for (int round = 0; round < 3; ++round) {
        produce.add = static_cast<uint32_t>(rng() | 1u);  // baked in at capture: recapture
        FROST_ASSERT_OK(frost_graph_capture(gp, 1, stream, record_step, &produce));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        cells[0] = cells[1] = 0;
        FROST_ASSERT_OK(frost_plan_execute(plan));
        FROST_ASSERT_OK(frost_plan_sync(plan));
        EXPECT_EQ(cells[1], produce.add) << "round " << round;
    }
}

// Diamond: a (stream 1) -> b = a*3+1 (stream 2), c = a*2 (stream 1) -> d = b + c (stream 2).
TEST_P(ExecPlan, DiamondOverTwoStreamsMatchesNaiveOnEveryExecute) {
    uint32_t* a = &cells[0];
    Step sb{Step::kMap, &cells[1], a, nullptr, 3, 1, 0};
    Step sc{Step::kMap, &cells[2], a, nullptr, 2, 0, 0};
    Step sd{Step::kSum, &cells[3], &cells[1], &cells[2], 0, 0, 0};
    Step slow_touch{Step::kMap, &cells[4], a, nullptr, 1, 0, 5};  // delays stream 1
    frost_graph* gb = graph("b", &sb);
    frost_graph* gc = graph("c", &sc);
    frost_graph* gd = graph("d", &sd);
    frost_graph* gs = graph("slow", &slow_touch);
    size_t ns = 0, nb = 0, nc = 0, nd = 0;
    FROST_ASSERT_OK(frost_plan_add(plan, gs, 1, stream, &ns));
    FROST_ASSERT_OK(frost_plan_add(plan, gb, 1, s2, &nb));
    FROST_ASSERT_OK(frost_plan_add(plan, gc, 1, stream, &nc));
    FROST_ASSERT_OK(frost_plan_add(plan, gd, 1, s2, &nd));
    FROST_ASSERT_OK(frost_plan_depend(plan, ns, nb));
    FROST_ASSERT_OK(frost_plan_depend(plan, ns, nc));
    FROST_ASSERT_OK(frost_plan_depend(plan, nb, nd));
    FROST_ASSERT_OK(frost_plan_depend(plan, nc, nd));
    FROST_ASSERT_OK(frost_plan_depend(plan, nc, nd));  // duplicate edge is harmless
    for (int round = 0; round < 5; ++round) {
        *a = static_cast<uint32_t>(rng() % 100000);
        cells[1] = cells[2] = cells[3] = 0;
        FROST_ASSERT_OK(frost_plan_execute(plan));
        FROST_ASSERT_OK(frost_plan_sync(plan));
        EXPECT_EQ(cells[3], (*a * 3u + 1u) + (*a * 2u)) << "round " << round;
    }
    for (frost_graph* g : {gb, gc, gd, gs}) EXPECT_EQ(frost_graph_capture_count(g), 1u);
}

TEST_P(ExecPlan, MissingKeyEnqueuesNothing) {
    Step first{Step::kStore, &cells[0], nullptr, nullptr, 0, 7, 0};
    frost_graph* g = graph("g", &first);
    size_t n0 = 0, n1 = 0;
    FROST_ASSERT_OK(frost_plan_add(plan, g, 1, stream, &n0));
    FROST_ASSERT_OK(frost_plan_add(plan, g, 2, s2, &n1));  // key 2 never captured
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_plan_execute(plan));
    const std::string msg = frost_last_error();
    EXPECT_NE(msg.find("node 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nothing"), std::string::npos) << msg;
    FROST_ASSERT_OK(frost_ctx_sync(ctx));
    EXPECT_EQ(cells[0], 0u);
    FROST_EXPECT_OK(frost_plan_sync(plan));
}

TEST_P(ExecPlan, BadEdgesAndForeignObjectsAreRejected) {
    Step st{Step::kStore, &cells[0], nullptr, nullptr, 0, 1, 0};
    frost_graph* g = graph("g", &st);
    size_t n0 = 0, n1 = 0;
    FROST_ASSERT_OK(frost_plan_add(plan, g, 1, stream, &n0));
    FROST_ASSERT_OK(frost_plan_add(plan, g, 1, s2, &n1));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_plan_depend(plan, n1, n0));  // would allow a cycle
    EXPECT_NE(std::string(frost_last_error()).find("smaller"), std::string::npos) << frost_last_error();
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_plan_depend(plan, n0, n0));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_plan_depend(plan, n0, 7));
    frost_ctx* c2 = nullptr;
    FROST_ASSERT_OK(frost_ctx_create(GetParam(), 0, &c2));
    frost_stream* foreign = nullptr;
    FROST_ASSERT_OK(frost_stream_create(c2, 0, &foreign));
    size_t n = 0;
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_plan_add(plan, g, 1, foreign, &n));
    FROST_EXPECT_OK(frost_ctx_destroy(c2));
    EXPECT_EQ(stats().live_plans, 1u);
    FROST_EXPECT_OK(frost_plan_destroy(plan));
    plan = nullptr;
    EXPECT_EQ(stats().live_plans, 0u);
    FROST_EXPECT_OK(frost_plan_destroy(nullptr));
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecPlan, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
