// Contract tests for graph ports: bind / unbind / list, the state rules (no rebinding under
// captured variants, no freeing a bound buffer), and the zero-copy hand-off between two graphs
// bound to one buffer (planner writes, actor reads, same pointer, no recapture).
#include "contract_util.h"

namespace frost::test {
namespace {

using ExecPorts = ContractTest;

frost_status record_nothing(void*, frost_stream*) { return FROST_OK; }

TEST_P(ExecPorts, BindListAndUnbind) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    frost_buffer* a = alloc("a", 64, FROST_SPACE_DEVICE);
    frost_buffer* b = alloc("b", 64, FROST_SPACE_HOST_PINNED);
    EXPECT_EQ(frost_graph_port_count(g), 0u);
    FROST_ASSERT_OK(frost_graph_bind(g, "in", a));
    FROST_ASSERT_OK(frost_graph_bind(g, "out", b));
    EXPECT_EQ(frost_graph_port_count(g), 2u);
    EXPECT_STREQ(frost_graph_port_name(g, 0), "in");
    EXPECT_STREQ(frost_graph_port_name(g, 1), "out");
    EXPECT_EQ(frost_graph_port_name(g, 2), nullptr);
    EXPECT_EQ(frost_graph_port(g, "in"), a);
    EXPECT_EQ(frost_graph_port(g, "out"), b);
    EXPECT_EQ(frost_graph_port(g, "missing"), nullptr);
    FROST_EXPECT_OK(frost_graph_bind(g, "in", a));  // same buffer: no-op
    EXPECT_EQ(frost_graph_port_count(g), 2u);
    FROST_EXPECT_OK(frost_graph_bind(g, "in", b));  // no variants yet: rebinding is allowed
    EXPECT_EQ(frost_graph_port(g, "in"), b);
    FROST_EXPECT_OK(frost_graph_unbind(g, "in"));
    EXPECT_EQ(frost_graph_port_count(g), 1u);
    EXPECT_STREQ(frost_graph_port_name(g, 0), "out");
    FROST_EXPECT_STATUS(FROST_ERR_NOT_FOUND, frost_graph_unbind(g, "in"));
    EXPECT_NE(std::string(frost_last_error()).find("in"), std::string::npos);
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_graph_bind(g, "", a));
    FROST_EXPECT_OK(frost_buffer_free(a));  // only bound before the rebind
}

TEST_P(ExecPorts, RebindOrUnbindUnderVariantsIsStateUntilEvicted) {
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    frost_buffer* a = alloc("a", 64, FROST_SPACE_HOST);
    frost_buffer* b = alloc("b", 64, FROST_SPACE_HOST);
    FROST_ASSERT_OK(frost_graph_bind(g, "io", a));
    FROST_ASSERT_OK(frost_graph_capture(g, 1, stream, record_nothing, nullptr));
    FROST_EXPECT_STATUS(FROST_ERR_STATE, frost_graph_bind(g, "io", b));
    const std::string msg = frost_last_error();
    EXPECT_NE(msg.find("evict"), std::string::npos) << msg;
    EXPECT_NE(msg.find("io"), std::string::npos) << msg;
    FROST_EXPECT_STATUS(FROST_ERR_STATE, frost_graph_unbind(g, "io"));
    EXPECT_EQ(frost_graph_port(g, "io"), a);
    FROST_EXPECT_OK(frost_graph_bind(g, "io", a));           // same buffer is still a no-op
    FROST_EXPECT_OK(frost_graph_bind(g, "extra", b));        // a new port is not a rebind
    FROST_ASSERT_OK(frost_graph_evict(g, 1));
    FROST_EXPECT_OK(frost_graph_bind(g, "io", b));
    EXPECT_EQ(frost_graph_port(g, "io"), b);
}

TEST_P(ExecPorts, FreeingABoundBufferIsStateUntilUnboundOrGraphDestroyed) {
    frost_graph* g1 = nullptr;
    frost_graph* g2 = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g1", 0, &g1));
    FROST_ASSERT_OK(frost_graph_create(ctx, "g2", 0, &g2));
    frost_buffer* shared = alloc("shared", 128, FROST_SPACE_DEVICE);
    FROST_ASSERT_OK(frost_graph_bind(g1, "x", shared));
    FROST_ASSERT_OK(frost_graph_bind(g2, "y", shared));
    const frost_ctx_stats before = stats();
    FROST_EXPECT_STATUS(FROST_ERR_STATE, frost_buffer_free(shared));
    EXPECT_NE(std::string(frost_last_error()).find("shared"), std::string::npos) << frost_last_error();
    EXPECT_TRUE(same_stats(stats(), before));
    FROST_ASSERT_OK(frost_graph_unbind(g1, "x"));
    FROST_EXPECT_STATUS(FROST_ERR_STATE, frost_buffer_free(shared));
    FROST_ASSERT_OK(frost_graph_destroy(g2));  // destroying a graph unbinds its ports
    FROST_EXPECT_OK(frost_buffer_free(shared));
    FROST_EXPECT_OK(frost_graph_destroy(g1));
    EXPECT_TRUE(same_stats(stats(), baseline)) << stats_str(stats());
}

TEST_P(ExecPorts, RejectsBufferOfAnotherCtx) {
    frost_ctx* c2 = nullptr;
    FROST_ASSERT_OK(frost_ctx_create(GetParam(), 0, &c2));
    frost_buffer* foreign = nullptr;
    FROST_ASSERT_OK(frost_buffer_alloc(c2, "foreign", 8, FROST_SPACE_HOST, &foreign));
    frost_graph* g = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "g", 0, &g));
    FROST_EXPECT_STATUS(FROST_ERR_INVALID_ARG, frost_graph_bind(g, "p", foreign));
    FROST_EXPECT_OK(frost_ctx_destroy(c2));
}

// Planner: handoff = input * 3 + 1. Actor: output = handoff * 5 + 2. Both read their buffers
// through their own ports; the hand-off buffer is bound to both.
struct Stage {
    frost_graph* g;
    const char* in_port;
    const char* out_port;
    uint32_t mul, add;
};
frost_status record_stage(void* user, frost_stream* s) {
    const auto& st = *static_cast<Stage*>(user);
    frost_buffer* in = frost_graph_port(st.g, st.in_port);
    frost_buffer* out = frost_graph_port(st.g, st.out_port);
    if (!in || !out) return FROST_ERR_STATE;
    const MapArgs a{static_cast<const uint32_t*>(frost_buffer_ptr(in)), static_cast<uint32_t*>(frost_buffer_ptr(out)),
                    st.mul, st.add};
    return frost_launch_host(s, map_fn, &a, sizeof a);
}

TEST_P(ExecPorts, ZeroCopyHandOffBetweenTwoGraphs) {
    frost_graph* planner = nullptr;
    frost_graph* actor = nullptr;
    FROST_ASSERT_OK(frost_graph_create(ctx, "planner", 0, &planner));
    FROST_ASSERT_OK(frost_graph_create(ctx, "actor", 0, &actor));
    frost_buffer* input = alloc("input", sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    frost_buffer* handoff = alloc("handoff", sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    frost_buffer* output = alloc("output", sizeof(uint32_t), FROST_SPACE_HOST_PINNED);
    FROST_ASSERT_OK(frost_graph_bind(planner, "obs", input));
    FROST_ASSERT_OK(frost_graph_bind(planner, "subtask", handoff));
    FROST_ASSERT_OK(frost_graph_bind(actor, "subtask", handoff));
    FROST_ASSERT_OK(frost_graph_bind(actor, "action", output));
    EXPECT_EQ(frost_buffer_ptr(frost_graph_port(planner, "subtask")),
              frost_buffer_ptr(frost_graph_port(actor, "subtask")));
    Stage ps{planner, "obs", "subtask", 3u, 1u};
    Stage as{actor, "subtask", "action", 5u, 2u};
    FROST_ASSERT_OK(frost_graph_capture(planner, 1, stream, record_stage, &ps));
    FROST_ASSERT_OK(frost_graph_capture(actor, 1, stream, record_stage, &as));
    auto* in = static_cast<uint32_t*>(frost_buffer_ptr(input));
    auto* out = static_cast<uint32_t*>(frost_buffer_ptr(output));
    for (int round = 0; round < 4; ++round) {
        *in = static_cast<uint32_t>(rng());
        *out = 0xDEADBEEFu;
        FROST_ASSERT_OK(frost_graph_replay(planner, 1, stream));
        FROST_ASSERT_OK(frost_graph_replay(actor, 1, stream));
        FROST_ASSERT_OK(frost_stream_sync(stream));
        EXPECT_EQ(*out, (*in * 3u + 1u) * 5u + 2u) << "round " << round;
    }
    // An interrupt overwrites the hand-off buffer directly; the actor's next replay uses it.
    const auto override_value = static_cast<uint32_t>(rng());
    *static_cast<uint32_t*>(frost_buffer_ptr(handoff)) = override_value;
    FROST_ASSERT_OK(frost_graph_replay(actor, 1, stream));
    FROST_ASSERT_OK(frost_stream_sync(stream));
    EXPECT_EQ(*out, override_value * 5u + 2u);
    EXPECT_EQ(frost_graph_capture_count(planner), 1u);
    EXPECT_EQ(frost_graph_capture_count(actor), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecPorts, testing::ValuesIn(available_backends()), backend_param_name);

}  // namespace
}  // namespace frost::test
