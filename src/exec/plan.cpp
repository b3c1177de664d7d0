// Front end of frost/exec.h for plans: a DAG of (graph, key, stream) replays. Nodes are added in
// topological order by construction (a dependency must point from a smaller index to a larger
// one), so execute walks them by index, making a node's stream wait on the done-event of each
// predecessor that ran on another stream.
#include <algorithm>
#include <cinttypes>

#include "exec/objects.h"

using frost::fail;
using frost::exec::guarded;

namespace frost::exec {

void plan_release(frost_plan* plan) {
    for (auto& n : plan->nodes)
        if (n.done_event) plan->ctx->backend->event_destroy(n.done_event);
    plan->nodes.clear();
}

}  // namespace frost::exec

extern "C" {

frost_status frost_plan_create(frost_ctx* ctx, frost_plan** out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    return guarded("frost_plan_create", [&] {
        auto p = std::make_unique<frost_plan>();
        p->ctx = ctx;
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->plans.insert(p.get());
        *out = p.release();
        return FROST_OK;
    });
}

frost_status frost_plan_destroy(frost_plan* plan) {
    if (plan == nullptr) return FROST_OK;
    frost_ctx* ctx = plan->ctx;
    {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->plans.erase(plan);
    }
    frost::exec::plan_release(plan);
    delete plan;
    return FROST_OK;
}

frost_status frost_plan_add(frost_plan* plan, frost_graph* graph, frost_shape_key key,
                            frost_stream* stream, size_t* node) {
    FROST_CHECK_ARG(plan != nullptr);
    FROST_CHECK_ARG(graph != nullptr);
    FROST_CHECK_ARG(stream != nullptr);
    FROST_CHECK_ARG(node != nullptr);
    if (graph->ctx != plan->ctx || stream->ctx != plan->ctx)
        return fail(FROST_ERR_INVALID_ARG, "frost_plan_add('%s'): graph and stream must belong to the plan's ctx",
                    graph->name.c_str());
    return guarded("frost_plan_add", [&] {
        frost_plan_node n;
        n.graph = graph;
        n.key = key;
        n.stream = stream;
        // Created now so execute never allocates.
        FROST_TRY(plan->ctx->backend->event_create(&n.done_event));
        try {
            plan->nodes.push_back(n);
        } catch (...) {
            plan->ctx->backend->event_destroy(n.done_event);
            throw;
        }
        *node = plan->nodes.size() - 1;
        return FROST_OK;
    });
}

frost_status frost_plan_depend(frost_plan* plan, size_t before, size_t after) {
    FROST_CHECK_ARG(plan != nullptr);
    const size_t n = plan->nodes.size();
    if (before >= n || after >= n)
        return fail(FROST_ERR_INVALID_ARG, "frost_plan_depend(%zu -> %zu): the plan has %zu nodes", before,
                    after, n);
    if (before >= after)
        return fail(FROST_ERR_INVALID_ARG,
                    "frost_plan_depend(%zu -> %zu): 'before' must have a smaller index than 'after' "
                    "(this is what rules out cycles)", before, after);
    return guarded("frost_plan_depend", [&] {
        auto& w = plan->nodes[after].waits_on;
        if (std::find(w.begin(), w.end(), before) == w.end()) w.push_back(before);
        return FROST_OK;
    });
}

frost_status frost_plan_execute(frost_plan* plan) {
    FROST_CHECK_ARG(plan != nullptr);
    return guarded("frost_plan_execute", [&] {
        // Validate everything first: a missing key or a capturing stream enqueues nothing.
        for (size_t i = 0; i < plan->nodes.size(); ++i) {
            const frost_plan_node& n = plan->nodes[i];
            if (!frost_graph_has_variant(n.graph, n.key))
                return fail(FROST_ERR_NOT_FOUND,
                            "frost_plan_execute: node %zu: graph '%s' has no variant for key %" PRIu64
                            "; nothing was enqueued", i, n.graph->name.c_str(), n.key);
            if (n.stream->capturing.load())
                return fail(FROST_ERR_STATE, "frost_plan_execute: node %zu: its stream is capturing", i);
        }
        std::vector<frost_stream*> streams;
        frost::exec::Backend& be = *plan->ctx->backend;
        for (size_t i = 0; i < plan->nodes.size(); ++i) {
            const frost_plan_node& n = plan->nodes[i];
            for (size_t b : n.waits_on) {
                const frost_plan_node& pred = plan->nodes[b];
                // Same stream: already ordered by enqueue order.
                if (pred.stream != n.stream) FROST_TRY(be.stream_wait_event(n.stream->handle, pred.done_event));
            }
            FROST_TRY(frost_graph_replay(n.graph, n.key, n.stream));
            FROST_TRY(be.event_record(n.done_event, n.stream->handle));
            if (std::find(streams.begin(), streams.end(), n.stream) == streams.end()) streams.push_back(n.stream);
        }
        plan->last_streams = std::move(streams);
        return FROST_OK;
    });
}

frost_status frost_plan_sync(frost_plan* plan) {
    FROST_CHECK_ARG(plan != nullptr);
    // Each node's done-event marks the end of its replay; syncing them waits for exactly what
    // the last execute enqueued. Streams are then synced to surface a sticky error raised by it.
    for (const auto& n : plan->nodes) FROST_TRY(plan->ctx->backend->event_sync(n.done_event));
    for (frost_stream* s : plan->last_streams) FROST_TRY(frost_stream_sync(s));
    return FROST_OK;
}

}  // extern "C"
