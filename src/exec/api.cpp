// Front end of frost/exec.h for contexts, streams, events and host launches: argument checks,
// ownership registries and stats; the backend (cpu or cuda) does the work. Buffers, graphs and
// plans have their own files (buffer.cpp, graph.cpp, plan.cpp).
#include <cstring>
#include <vector>

#include "exec/objects.h"

namespace frost::exec {

constexpr size_t kMaxHostArgsBytes = 4096;  // promised by frost_launch_host

frost_status Backend::device_memory(uint64_t*, uint64_t*) const {
    return fail(FROST_ERR_UNSUPPORTED,
                "frost_ctx_device_memory: this backend has no device memory of its own (its device space is host "
                "memory, counted in frost_ctx_stats.bytes_device)");
}

frost_status check_name(const char* what, const char* name) {
    if (name == nullptr) return fail(FROST_ERR_INVALID_ARG, "%s: name is NULL", what);
    const size_t n = strnlen(name, kMaxNameBytes);
    if (n == 0) return fail(FROST_ERR_INVALID_ARG, "%s: name is empty", what);
    if (n == kMaxNameBytes)
        return fail(FROST_ERR_INVALID_ARG, "%s: name is %zu bytes or longer (limit %zu)", what,
                    kMaxNameBytes, kMaxNameBytes - 1);
    return FROST_OK;
}

frost_status drain_ctx(frost_ctx* ctx) {
    std::vector<frost_stream*> streams;
    {
        std::lock_guard<std::mutex> lock(ctx->mu);
        streams.assign(ctx->streams.begin(), ctx->streams.end());
    }
    if (streams.empty()) return FROST_OK;
    void* ev = nullptr;
    FROST_TRY(ctx->backend->event_create(&ev));
    frost_status st = FROST_OK;
    for (frost_stream* s : streams) {
        if (s->capturing.load()) continue;
        st = ctx->backend->event_record(ev, s->handle);
        if (st == FROST_OK) st = ctx->backend->event_sync(ev);
        if (st != FROST_OK) break;
    }
    ctx->backend->event_destroy(ev);
    return st;
}

}  // namespace frost::exec

using frost::fail;
using frost::exec::guarded;

extern "C" {

int frost_backend_available(frost_backend backend) {
    const int b = frost::exec::enum_value(backend);
    if (b == FROST_BACKEND_CPU) return 1;
    if (b == FROST_BACKEND_CUDA) return frost::exec::cuda_backend_available();
    return 0;
}

frost_status frost_ctx_create(frost_backend backend, int device, frost_ctx** out) {
    FROST_CHECK_ARG(out != nullptr);
    const int b = frost::exec::enum_value(backend);
    if (b != FROST_BACKEND_CPU && b != FROST_BACKEND_CUDA)
        return fail(FROST_ERR_INVALID_ARG, "frost_ctx_create: unknown backend %d (cpu=0, cuda=1)", b);
    return guarded("frost_ctx_create", [&] {
        std::unique_ptr<frost::exec::Backend> be;
        if (b == FROST_BACKEND_CPU) {
            if (device != 0)
                return fail(FROST_ERR_UNSUPPORTED,
                            "frost_ctx_create: the cpu backend has only device 0, got %d", device);
            be = frost::exec::make_cpu_backend();
        } else {
            FROST_TRY(frost::exec::make_cuda_backend(device, &be));
        }
        auto ctx = std::make_unique<frost_ctx>();
        ctx->kind = backend;
        ctx->backend = std::move(be);
        *out = ctx.release();
        return FROST_OK;
    });
}

frost_status frost_ctx_destroy(frost_ctx* ctx) {
    if (ctx == nullptr) return FROST_OK;
    // Let all enqueued work finish; its errors have nobody left to report to.
    for (frost_stream* s : ctx->streams) {
        if (!s->capturing.load()) (void)ctx->backend->stream_sync(s->handle);
    }
    // Plans and graphs hold backend events/variants and port bindings: release them first.
    for (frost_plan* p : ctx->plans) {
        frost::exec::plan_release(p);
        delete p;
    }
    for (frost_graph* g : ctx->graphs) {
        frost::exec::graph_release(g);
        delete g;
    }
    for (frost_event* e : ctx->events) {
        ctx->backend->event_destroy(e->handle);
        delete e;
    }
    for (frost_stream* s : ctx->streams) {
        ctx->backend->stream_destroy(s->handle);
        delete s;
    }
    for (frost_buffer* b : ctx->buffers) {
        if (!b->wrapped) ctx->backend->free(b->space, b->ptr);
        delete b;
    }
    delete ctx;
    frost_clear_error();
    return FROST_OK;
}

frost_backend frost_ctx_backend(const frost_ctx* ctx) {
    return ctx ? ctx->kind : FROST_BACKEND_CPU;
}

frost_status frost_ctx_sync(frost_ctx* ctx) {
    FROST_CHECK_ARG(ctx != nullptr);
    return guarded("frost_ctx_sync", [&] {
        std::vector<frost_stream*> streams;
        {
            std::lock_guard<std::mutex> lock(ctx->mu);
            streams.assign(ctx->streams.begin(), ctx->streams.end());
        }
        for (frost_stream* s : streams)
            if (s->capturing.load())
                return fail(FROST_ERR_STATE, "frost_ctx_sync: a stream of the ctx is capturing");
        // Sync every stream (so every sticky error is cleared), report the first failure.
        frost_status first = FROST_OK;
        std::string first_msg;
        for (frost_stream* s : streams) {
            const frost_status st = ctx->backend->stream_sync(s->handle);
            if (st != FROST_OK && first == FROST_OK) {
                first = st;
                first_msg = frost::last_error();
            }
        }
        if (first != FROST_OK) frost::set_last_error("frost_ctx_sync: " + first_msg);
        return first;
    });
}

frost_status frost_ctx_get_stats(const frost_ctx* ctx, frost_ctx_stats* out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    std::lock_guard<std::mutex> lock(ctx->mu);
    frost_ctx_stats s{};
    s.live_buffers = ctx->buffers.size();
    s.bytes_device = ctx->bytes[FROST_SPACE_DEVICE];
    s.bytes_host_pinned = ctx->bytes[FROST_SPACE_HOST_PINNED];
    s.bytes_host = ctx->bytes[FROST_SPACE_HOST];
    s.live_streams = ctx->streams.size();
    s.live_events = ctx->events.size();
    s.live_graphs = ctx->graphs.size();
    s.live_plans = ctx->plans.size();
    *out = s;
    return FROST_OK;
}

frost_status frost_ctx_device_memory(const frost_ctx* ctx, uint64_t* used_bytes, uint64_t* total_bytes) {
    FROST_CHECK_ARG(ctx != nullptr);
    uint64_t free_b = 0, total_b = 0;
    FROST_TRY(ctx->backend->device_memory(&free_b, &total_b));
    if (used_bytes) *used_bytes = total_b > free_b ? total_b - free_b : 0;
    if (total_bytes) *total_bytes = total_b;
    return FROST_OK;
}

frost_status frost_stream_create(frost_ctx* ctx, int priority, frost_stream** out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    return guarded("frost_stream_create", [&] {
        auto s = std::make_unique<frost_stream>();
        s->ctx = ctx;
        s->priority = priority;
        FROST_TRY(ctx->backend->stream_create(priority, &s->handle));
        try {
            std::lock_guard<std::mutex> lock(ctx->mu);
            ctx->streams.insert(s.get());
        } catch (...) {
            ctx->backend->stream_destroy(s->handle);
            throw;
        }
        *out = s.release();
        return FROST_OK;
    });
}

frost_status frost_stream_destroy(frost_stream* stream) {
    if (stream == nullptr) return FROST_OK;
    if (stream->capturing.load())
        return fail(FROST_ERR_STATE, "frost_stream_destroy: the stream is capturing a graph");
    frost_ctx* ctx = stream->ctx;
    // Drain; an unreported sticky error of this stream dies with it.
    (void)ctx->backend->stream_sync(stream->handle);
    {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->streams.erase(stream);
    }
    ctx->backend->stream_destroy(stream->handle);
    delete stream;
    frost_clear_error();
    return FROST_OK;
}

frost_status frost_stream_sync(frost_stream* stream) {
    FROST_CHECK_ARG(stream != nullptr);
    if (stream->capturing.load())
        return fail(FROST_ERR_STATE, "frost_stream_sync: the stream is capturing a graph");
    return stream->ctx->backend->stream_sync(stream->handle);
}

int frost_stream_priority(const frost_stream* stream) { return stream ? stream->priority : 0; }
frost_ctx* frost_stream_ctx(const frost_stream* stream) { return stream ? stream->ctx : nullptr; }

void* frost_stream_native(const frost_stream* stream) {
    return stream ? stream->ctx->backend->stream_native(stream->handle) : nullptr;
}

frost_status frost_event_create(frost_ctx* ctx, frost_event** out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    return guarded("frost_event_create", [&] {
        auto e = std::make_unique<frost_event>();
        e->ctx = ctx;
        FROST_TRY(ctx->backend->event_create(&e->handle));
        try {
            std::lock_guard<std::mutex> lock(ctx->mu);
            ctx->events.insert(e.get());
        } catch (...) {
            ctx->backend->event_destroy(e->handle);
            throw;
        }
        *out = e.release();
        return FROST_OK;
    });
}

frost_status frost_event_destroy(frost_event* event) {
    if (event == nullptr) return FROST_OK;
    frost_ctx* ctx = event->ctx;
    {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->events.erase(event);
    }
    ctx->backend->event_destroy(event->handle);
    delete event;
    return FROST_OK;
}

frost_status frost_event_record(frost_event* event, frost_stream* stream) {
    FROST_CHECK_ARG(event != nullptr);
    FROST_CHECK_ARG(stream != nullptr);
    if (event->ctx != stream->ctx)
        return fail(FROST_ERR_INVALID_ARG, "frost_event_record: event and stream belong to different contexts");
    // A variant holds the work of one stream only, so no point inside it can be marked.
    if (stream->capturing.load())
        return fail(FROST_ERR_STATE, "frost_event_record: the stream is capturing a graph (cross-stream "
                                     "work inside one variant is not supported; use a plan)");
    return event->ctx->backend->event_record(event->handle, stream->handle);
}

frost_status frost_stream_wait_event(frost_stream* stream, frost_event* event) {
    FROST_CHECK_ARG(stream != nullptr);
    FROST_CHECK_ARG(event != nullptr);
    if (event->ctx != stream->ctx)
        return fail(FROST_ERR_INVALID_ARG, "frost_stream_wait_event: event and stream belong to different contexts");
    return guarded("frost_stream_wait_event", [&] {
        return stream->ctx->backend->stream_wait_event(stream->handle, event->handle);
    });
}

frost_status frost_event_sync(frost_event* event) {
    FROST_CHECK_ARG(event != nullptr);
    return event->ctx->backend->event_sync(event->handle);
}

frost_status frost_event_query(frost_event* event, int* done) {
    FROST_CHECK_ARG(event != nullptr);
    FROST_CHECK_ARG(done != nullptr);
    return event->ctx->backend->event_query(event->handle, done);
}

frost_status frost_launch_host(frost_stream* stream, frost_host_fn fn, const void* args,
                               size_t args_bytes) {
    FROST_CHECK_ARG(stream != nullptr);
    FROST_CHECK_ARG(fn != nullptr);
    if (args_bytes > 0 && args == nullptr)
        return fail(FROST_ERR_INVALID_ARG, "frost_launch_host: args is NULL but args_bytes is %zu", args_bytes);
    if (args_bytes > frost::exec::kMaxHostArgsBytes)
        return fail(FROST_ERR_INVALID_ARG, "frost_launch_host: args_bytes %zu exceeds the limit of %zu",
                    args_bytes, frost::exec::kMaxHostArgsBytes);
    return guarded("frost_launch_host", [&] {
        return stream->ctx->backend->launch_host(stream->handle, fn, args_bytes ? args : nullptr,
                                                 args_bytes);
    });
}

}  // extern "C"
