// Front end of frost/exec.h for graphs: the ShapeKey -> variant table with its LRU bound and
// monotonic capture counter, capture (record callback on a stream in capture mode), replay, and
// ports (named buffer bindings that make two graphs share memory without a copy).
#include <cinttypes>
#include <limits>

#include "exec/objects.h"

using frost::fail;
using frost::exec::guarded;

namespace frost::exec {

void graph_release(frost_graph* graph) {
    for (auto& [key, v] : graph->variants) graph->ctx->backend->variant_destroy(v.handle);
    graph->variants.clear();
    for (auto& p : graph->ports) p.buf->bind_count.fetch_sub(1);
    graph->ports.clear();
}

}  // namespace frost::exec

namespace {

// Caller holds graph->mu. Returns the key of the least recently used variant (graph non-empty).
frost_shape_key lru_key(const frost_graph* graph) {
    frost_shape_key best = 0;
    uint64_t best_use = std::numeric_limits<uint64_t>::max();
    for (const auto& [key, v] : graph->variants)
        if (v.last_use < best_use) {
            best_use = v.last_use;
            best = key;
        }
    return best;
}

// Caller holds graph->mu.
void drop_variant(frost_graph* graph, frost_shape_key key) {
    auto it = graph->variants.find(key);
    graph->ctx->backend->variant_destroy(it->second.handle);
    graph->variants.erase(it);
}

frost_port* find_port(frost_graph* graph, const char* port) {
    for (auto& p : graph->ports)
        if (p.name == port) return &p;
    return nullptr;
}

}  // namespace

extern "C" {

frost_status frost_graph_create(frost_ctx* ctx, const char* name, size_t max_variants,
                                frost_graph** out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    FROST_TRY(frost::exec::check_name("frost_graph_create", name));
    return guarded("frost_graph_create", [&] {
        auto g = std::make_unique<frost_graph>();
        g->ctx = ctx;
        g->name = name;
        g->max_variants = max_variants;
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->graphs.insert(g.get());
        *out = g.release();
        return FROST_OK;
    });
}

frost_status frost_graph_destroy(frost_graph* graph) {
    if (graph == nullptr) return FROST_OK;
    frost_ctx* ctx = graph->ctx;
    {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->graphs.erase(graph);
    }
    {
        std::lock_guard<std::mutex> lock(graph->mu);
        frost::exec::graph_release(graph);
    }
    delete graph;
    return FROST_OK;
}

const char* frost_graph_name(const frost_graph* graph) { return graph ? graph->name.c_str() : ""; }

frost_status frost_graph_capture(frost_graph* graph, frost_shape_key key, frost_stream* stream,
                                 frost_record_fn record, void* user) {
    FROST_CHECK_ARG(graph != nullptr);
    FROST_CHECK_ARG(stream != nullptr);
    FROST_CHECK_ARG(record != nullptr);
    if (graph->ctx != stream->ctx)
        return fail(FROST_ERR_INVALID_ARG, "frost_graph_capture('%s'): stream belongs to another ctx",
                    graph->name.c_str());
    bool expected = false;
    if (!stream->capturing.compare_exchange_strong(expected, true))
        return fail(FROST_ERR_STATE, "frost_graph_capture('%s', key %" PRIu64 "): the stream is already capturing",
                    graph->name.c_str(), key);
    frost::exec::Backend& be = *graph->ctx->backend;
    frost_status st = be.capture_begin(stream->handle);
    if (st != FROST_OK) {
        stream->capturing = false;
        return frost::add_context(st, "frost_graph_capture('" + graph->name + "')");
    }
    // The record callback is user code: it may fail (then nothing is kept) but must not throw.
    st = record(user, stream);
    std::string record_msg = frost::last_error();
    void* variant = nullptr;
    const frost_status end = be.capture_end(stream->handle, st == FROST_OK, &variant);
    stream->capturing = false;
    if (st != FROST_OK) {
        if (variant) be.variant_destroy(variant);
        return fail(st, "frost_graph_capture('%s', key %" PRIu64 "): record callback failed: %s",
                    graph->name.c_str(), key, record_msg.c_str());
    }
    if (end != FROST_OK)
        return frost::add_context(end, "frost_graph_capture('" + graph->name + "')");
    return guarded("frost_graph_capture", [&] {
        std::lock_guard<std::mutex> lock(graph->mu);
        auto it = graph->variants.find(key);
        if (it != graph->variants.end()) {
            be.variant_destroy(it->second.handle);
            it->second.handle = variant;
        } else {
            if (graph->max_variants > 0 && graph->variants.size() >= graph->max_variants)
                drop_variant(graph, lru_key(graph));
            try {
                it = graph->variants.emplace(key, frost_variant{}).first;
            } catch (...) {
                be.variant_destroy(variant);
                throw;
            }
            it->second.handle = variant;
        }
        it->second.last_use = ++graph->use_clock;
        graph->capture_count.fetch_add(1);
        return FROST_OK;
    });
}

frost_status frost_graph_replay(frost_graph* graph, frost_shape_key key, frost_stream* stream) {
    FROST_CHECK_ARG(graph != nullptr);
    FROST_CHECK_ARG(stream != nullptr);
    if (graph->ctx != stream->ctx)
        return fail(FROST_ERR_INVALID_ARG, "frost_graph_replay('%s'): stream belongs to another ctx",
                    graph->name.c_str());
    return guarded("frost_graph_replay", [&] {
        // Held while enqueueing so a concurrent evict cannot free the variant under us.
        std::lock_guard<std::mutex> lock(graph->mu);
        auto it = graph->variants.find(key);
        if (it == graph->variants.end())
            return fail(FROST_ERR_NOT_FOUND, "frost_graph_replay('%s'): no variant captured for key %" PRIu64
                        " (%zu variants held)", graph->name.c_str(), key, graph->variants.size());
        it->second.last_use = ++graph->use_clock;
        return graph->ctx->backend->replay(it->second.handle, stream->handle);
    });
}

int frost_graph_has_variant(const frost_graph* graph, frost_shape_key key) {
    if (graph == nullptr) return 0;
    std::lock_guard<std::mutex> lock(graph->mu);
    return graph->variants.count(key) ? 1 : 0;
}

frost_status frost_graph_evict(frost_graph* graph, frost_shape_key key) {
    FROST_CHECK_ARG(graph != nullptr);
    std::lock_guard<std::mutex> lock(graph->mu);
    if (!graph->variants.count(key))
        return fail(FROST_ERR_NOT_FOUND, "frost_graph_evict('%s'): no variant for key %" PRIu64,
                    graph->name.c_str(), key);
    drop_variant(graph, key);
    return FROST_OK;
}

frost_status frost_graph_evict_lru(frost_graph* graph, frost_shape_key* evicted_key) {
    FROST_CHECK_ARG(graph != nullptr);
    std::lock_guard<std::mutex> lock(graph->mu);
    if (graph->variants.empty())
        return fail(FROST_ERR_NOT_FOUND, "frost_graph_evict_lru('%s'): the graph holds no variant",
                    graph->name.c_str());
    const frost_shape_key key = lru_key(graph);
    drop_variant(graph, key);
    if (evicted_key) *evicted_key = key;
    return FROST_OK;
}

size_t frost_graph_variant_count(const frost_graph* graph) {
    if (graph == nullptr) return 0;
    std::lock_guard<std::mutex> lock(graph->mu);
    return graph->variants.size();
}

uint64_t frost_graph_capture_count(const frost_graph* graph) {
    return graph ? graph->capture_count.load() : 0;
}

frost_status frost_graph_bind(frost_graph* graph, const char* port, frost_buffer* buf) {
    FROST_CHECK_ARG(graph != nullptr);
    FROST_CHECK_ARG(buf != nullptr);
    FROST_TRY(frost::exec::check_name("frost_graph_bind", port));
    if (buf->ctx != graph->ctx)
        return fail(FROST_ERR_INVALID_ARG, "frost_graph_bind('%s'.'%s'): buffer '%s' belongs to another ctx",
                    graph->name.c_str(), port, buf->name.c_str());
    return guarded("frost_graph_bind", [&] {
        std::lock_guard<std::mutex> lock(graph->mu);
        frost_port* p = find_port(graph, port);
        if (p && p->buf == buf) return FROST_OK;
        if (p && !graph->variants.empty())
            return fail(FROST_ERR_STATE,
                        "frost_graph_bind('%s'.'%s'): port is bound to '%s' and %zu captured variant(s) "
                        "baked its pointer in; evict them before rebinding to '%s'",
                        graph->name.c_str(), port, p->buf->name.c_str(), graph->variants.size(),
                        buf->name.c_str());
        if (p) {
            p->buf->bind_count.fetch_sub(1);
            p->buf = buf;
        } else {
            graph->ports.push_back(frost_port{port, buf});
        }
        buf->bind_count.fetch_add(1);
        return FROST_OK;
    });
}

frost_status frost_graph_unbind(frost_graph* graph, const char* port) {
    FROST_CHECK_ARG(graph != nullptr);
    FROST_TRY(frost::exec::check_name("frost_graph_unbind", port));
    std::lock_guard<std::mutex> lock(graph->mu);
    frost_port* p = find_port(graph, port);
    if (!p)
        return fail(FROST_ERR_NOT_FOUND, "frost_graph_unbind('%s'): no port named '%s'", graph->name.c_str(), port);
    if (!graph->variants.empty())
        return fail(FROST_ERR_STATE, "frost_graph_unbind('%s'.'%s'): %zu captured variant(s) use the port; evict "
                    "them first", graph->name.c_str(), port, graph->variants.size());
    p->buf->bind_count.fetch_sub(1);
    graph->ports.erase(graph->ports.begin() + (p - graph->ports.data()));
    return FROST_OK;
}

frost_buffer* frost_graph_port(const frost_graph* graph, const char* port) {
    if (graph == nullptr || port == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(graph->mu);
    for (const auto& p : graph->ports)
        if (p.name == port) return p.buf;
    return nullptr;
}

size_t frost_graph_port_count(const frost_graph* graph) {
    if (graph == nullptr) return 0;
    std::lock_guard<std::mutex> lock(graph->mu);
    return graph->ports.size();
}

const char* frost_graph_port_name(const frost_graph* graph, size_t i) {
    if (graph == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(graph->mu);
    return i < graph->ports.size() ? graph->ports[i].name.c_str() : nullptr;
}

}  // extern "C"
