// `frost contract-demo`: a short tour of the execution contract on the CPU backend. A planner
// graph (stream 1: host->device->pinned copies, then a host kernel) hands a buffer to an actor
// graph (stream 2) through a shared port; a plan orders them across streams; N replays check the
// result against a naive computation and show that nothing was recaptured.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "command.h"
#include "frost/exec.h"

namespace {

constexpr size_t kElems = 1024;
constexpr int kDefaultIters = 100;
constexpr frost_shape_key kKey = 1;  // one shape: a single variant per graph
constexpr float kScale = 2.0f, kShift = 1.0f;
constexpr double kTolerance = 1e-5;  // float rounding (and FMA contraction) vs the double reference

struct Affine {
    float* y;        // [kElems] host memory
    const float* x;  // [kElems] host memory
    float a, b;
};
frost_status affine_fn(const void* p) {
    const auto& f = *static_cast<const Affine*>(p);
    for (size_t i = 0; i < kElems; ++i) f.y[i] = f.a * f.x[i] + f.b;
    return FROST_OK;
}

// Both graphs find their buffers through their own ports.
frost_status record_planner(void* user, frost_stream* s) {
    auto* g = static_cast<frost_graph*>(user);
    frost_buffer* in = frost_graph_port(g, "observation");
    frost_buffer* dev = frost_graph_port(g, "scratch");
    frost_buffer* out = frost_graph_port(g, "subtask");
    const size_t bytes = kElems * sizeof(float);
    frost_status st = frost_buffer_copy(dev, 0, in, 0, bytes, s);  // host -> device
    if (st == FROST_OK) st = frost_buffer_copy(out, 0, dev, 0, bytes, s);  // device -> pinned
    if (st != FROST_OK) return st;
    auto* y = static_cast<float*>(frost_buffer_ptr(out));
    const Affine f{y, y, kScale, kShift};  // in place: subtask = 2 * observation + 1
    return frost_launch_host(s, affine_fn, &f, sizeof f);
}
frost_status record_actor(void* user, frost_stream* s) {
    auto* g = static_cast<frost_graph*>(user);
    const Affine f{static_cast<float*>(frost_buffer_ptr(frost_graph_port(g, "action"))),
                   static_cast<const float*>(frost_buffer_ptr(frost_graph_port(g, "subtask"))), -1.0f, 0.5f};
    return frost_launch_host(s, affine_fn, &f, sizeof f);  // action = 0.5 - subtask
}

#define DEMO_CHECK(expr)                                                                        \
    do {                                                                                        \
        const frost_status demo_s_ = (expr);                                                    \
        if (demo_s_ != FROST_OK) {                                                              \
            std::fprintf(stderr, "contract-demo: %s failed: %s: %s\n", #expr,                   \
                         frost_status_name(demo_s_), frost_last_error());                       \
            frost_ctx_destroy(ctx);                                                             \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

int run_demo(const std::vector<std::string>& args) {
    int iters = kDefaultIters;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--iters" && i + 1 < args.size()) {
            iters = std::atoi(args[++i].c_str());
        } else {
            std::fprintf(stderr, "contract-demo: unknown argument '%s' (see `frost help contract-demo`)\n",
                         args[i].c_str());
            return 2;
        }
    }
    if (iters < 1) {
        std::fprintf(stderr, "contract-demo: --iters must be >= 1\n");
        return 2;
    }
    frost_ctx* ctx = nullptr;
    DEMO_CHECK(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx));
    frost_stream *s1 = nullptr, *s2 = nullptr;
    DEMO_CHECK(frost_stream_create(ctx, 0, &s1));
    DEMO_CHECK(frost_stream_create(ctx, -1, &s2));
    const size_t bytes = kElems * sizeof(float);
    frost_buffer *obs = nullptr, *scratch = nullptr, *subtask = nullptr, *action = nullptr;
    DEMO_CHECK(frost_buffer_alloc(ctx, "observation", bytes, FROST_SPACE_HOST, &obs));
    DEMO_CHECK(frost_buffer_alloc(ctx, "scratch", bytes, FROST_SPACE_DEVICE, &scratch));
    DEMO_CHECK(frost_buffer_alloc(ctx, "subtask", bytes, FROST_SPACE_HOST_PINNED, &subtask));
    DEMO_CHECK(frost_buffer_alloc(ctx, "action", bytes, FROST_SPACE_HOST, &action));

    frost_graph *planner = nullptr, *actor = nullptr;
    DEMO_CHECK(frost_graph_create(ctx, "planner", 0, &planner));
    DEMO_CHECK(frost_graph_create(ctx, "actor", 0, &actor));
    DEMO_CHECK(frost_graph_bind(planner, "observation", obs));
    DEMO_CHECK(frost_graph_bind(planner, "scratch", scratch));
    DEMO_CHECK(frost_graph_bind(planner, "subtask", subtask));
    DEMO_CHECK(frost_graph_bind(actor, "subtask", subtask));  // the zero-copy hand-off
    DEMO_CHECK(frost_graph_bind(actor, "action", action));
    DEMO_CHECK(frost_graph_capture(planner, kKey, s1, record_planner, planner));
    DEMO_CHECK(frost_graph_capture(actor, kKey, s2, record_actor, actor));
    std::printf("captured 'planner' on stream 1 (host->device->pinned copies + kernel) and 'actor' on stream 2\n");
    std::printf("port hand-off: planner.subtask = %p, actor.subtask = %p (%s)\n",
                frost_buffer_ptr(frost_graph_port(planner, "subtask")),
                frost_buffer_ptr(frost_graph_port(actor, "subtask")),
                frost_graph_port(planner, "subtask") == frost_graph_port(actor, "subtask") ? "same buffer" : "DIFFERENT");

    frost_plan* plan = nullptr;
    size_t n_plan = 0, n_act = 0;
    DEMO_CHECK(frost_plan_create(ctx, &plan));
    DEMO_CHECK(frost_plan_add(plan, planner, kKey, s1, &n_plan));
    DEMO_CHECK(frost_plan_add(plan, actor, kKey, s2, &n_act));
    DEMO_CHECK(frost_plan_depend(plan, n_plan, n_act));

    auto* x = static_cast<float*>(frost_buffer_ptr(obs));
    auto* y = static_cast<float*>(frost_buffer_ptr(action));
    double max_err = 0.0;
    for (int it = 0; it < iters; ++it) {
        for (size_t i = 0; i < kElems; ++i) x[i] = static_cast<float>((i * 7 + it * 13) % 101) * 0.01f;
        DEMO_CHECK(frost_plan_execute(plan));
        DEMO_CHECK(frost_plan_sync(plan));
        for (size_t i = 0; i < kElems; ++i) {
            const double want = 0.5 - (kScale * x[i] + kShift);
            max_err = std::fmax(max_err, std::fabs(want - y[i]));
        }
    }
    std::printf("executed the two-stream plan %d times; max |action - reference| = %g\n", iters, max_err);
    std::printf("capture_count: planner %llu, actor %llu (replays never recapture)\n",
                static_cast<unsigned long long>(frost_graph_capture_count(planner)),
                static_cast<unsigned long long>(frost_graph_capture_count(actor)));

    // A cross-space copy outside any graph, and the error for a range that does not fit.
    frost_buffer* readback = nullptr;
    DEMO_CHECK(frost_buffer_alloc(ctx, "readback", bytes, FROST_SPACE_HOST, &readback));
    DEMO_CHECK(frost_buffer_copy(readback, 0, scratch, 0, bytes, s1));  // device -> host
    DEMO_CHECK(frost_stream_sync(s1));
    std::printf("device->host copy of 'scratch': first value %g (last observation %g)\n",
                static_cast<const float*>(frost_buffer_ptr(readback))[0], x[0]);
    const frost_status bad = frost_buffer_copy(readback, 8, scratch, 0, bytes, s1);
    std::printf("out-of-range copy -> %s: %s\n", frost_status_name(bad), frost_last_error());
    const frost_status missing = frost_graph_replay(actor, kKey + 1, s2);
    std::printf("replay of an uncaptured key -> %s: %s\n", frost_status_name(missing), frost_last_error());

    frost_ctx_stats st{};
    DEMO_CHECK(frost_ctx_get_stats(ctx, &st));
    std::printf("ctx: %llu buffers (%llu B device, %llu B pinned, %llu B host), %llu streams, %llu graphs\n",
                static_cast<unsigned long long>(st.live_buffers), static_cast<unsigned long long>(st.bytes_device),
                static_cast<unsigned long long>(st.bytes_host_pinned), static_cast<unsigned long long>(st.bytes_host),
                static_cast<unsigned long long>(st.live_streams), static_cast<unsigned long long>(st.live_graphs));
    const bool ok = max_err <= kTolerance && frost_graph_capture_count(planner) == 1 &&
                    frost_graph_capture_count(actor) == 1 && bad == FROST_ERR_OUT_OF_RANGE &&
                    missing == FROST_ERR_NOT_FOUND;
    frost_ctx_destroy(ctx);
    std::printf("%s\n", ok ? "contract-demo: OK" : "contract-demo: FAILED");
    return ok ? 0 : 1;
}

}  // namespace

FROST_COMMAND("contract-demo", "a short demo of the execution contract on the CPU backend",
              "usage: frost contract-demo [--iters N]\n"
              "  Captures a planner graph (stream 1) and an actor graph (stream 2) that share a\n"
              "  buffer through ports, runs them as a two-stream plan N times (default 100), and\n"
              "  shows that capture_count stays 1, plus a cross-space copy and two rejected calls.",
              run_demo);
