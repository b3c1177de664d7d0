// Front end of frost/exec.h for buffers: allocation through the fault gate, wrapping, byte
// accounting per space, and the overflow-safe range checks of copy and fill (an out-of-range or
// overlapping request is refused before anything is enqueued, so it writes nothing).
#include <cstdint>
#include <vector>

#include "exec/objects.h"

using frost::fail;
using frost::exec::guarded;

namespace {

bool valid_space(const frost_space& space) {
    const int s = frost::exec::enum_value(space);
    return s == FROST_SPACE_DEVICE || s == FROST_SPACE_HOST_PINNED || s == FROST_SPACE_HOST;
}

// True when [off, off + bytes) lies inside a buffer of `size` bytes; never overflows.
bool in_range(size_t size, size_t off, size_t bytes) { return off <= size && bytes <= size - off; }

frost_status check_range(const char* what, const char* role, const frost_buffer* b, size_t off,
                         size_t bytes) {
    if (in_range(b->bytes, off, bytes)) return FROST_OK;
    return fail(FROST_ERR_OUT_OF_RANGE,
                "%s: %s range [%zu, +%zu) is outside buffer '%s' of %zu bytes; nothing was written",
                what, role, off, bytes, b->name.c_str(), b->bytes);
}

frost_status make_buffer(frost_ctx* ctx, const char* name, void* ptr, size_t bytes,
                         frost_space space, bool wrapped, frost_buffer** out) {
    auto b = std::make_unique<frost_buffer>();
    b->ctx = ctx;
    b->name = name;
    b->ptr = ptr;
    b->bytes = bytes;
    b->space = space;
    b->wrapped = wrapped;
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->buffers.insert(b.get());
    if (!wrapped) ctx->bytes[space] += bytes;
    *out = b.release();
    return FROST_OK;
}

}  // namespace

extern "C" {

frost_status frost_buffer_alloc(frost_ctx* ctx, const char* name, size_t bytes, frost_space space,
                                frost_buffer** out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    FROST_TRY(frost::exec::check_name("frost_buffer_alloc", name));
    if (bytes == 0) return fail(FROST_ERR_INVALID_ARG, "frost_buffer_alloc('%s'): bytes must be > 0", name);
    if (!valid_space(space))
        return fail(FROST_ERR_INVALID_ARG, "frost_buffer_alloc('%s'): unknown space %d", name,
                    frost::exec::enum_value(space));
    if (frost_fault_hit(FROST_FAULT_ALLOC))
        return fail(FROST_ERR_OUT_OF_MEMORY, "frost_buffer_alloc('%s', %zu bytes): injected allocation failure",
                    name, bytes);
    void* ptr = nullptr;
    const frost_status st = ctx->backend->alloc(space, bytes, &ptr);
    if (st != FROST_OK) return frost::add_context(st, std::string("frost_buffer_alloc('") + name + "')");
    const frost_status reg = guarded("frost_buffer_alloc", [&] {
        return make_buffer(ctx, name, ptr, bytes, space, false, out);
    });
    if (reg != FROST_OK) ctx->backend->free(space, ptr);
    return reg;
}

frost_status frost_buffer_wrap(frost_ctx* ctx, const char* name, void* ptr, size_t bytes,
                               frost_space space, frost_buffer** out) {
    FROST_CHECK_ARG(ctx != nullptr);
    FROST_CHECK_ARG(out != nullptr);
    FROST_CHECK_ARG(ptr != nullptr);
    FROST_TRY(frost::exec::check_name("frost_buffer_wrap", name));
    if (bytes == 0) return fail(FROST_ERR_INVALID_ARG, "frost_buffer_wrap('%s'): bytes must be > 0", name);
    if (!valid_space(space))
        return fail(FROST_ERR_INVALID_ARG, "frost_buffer_wrap('%s'): unknown space %d", name,
                    frost::exec::enum_value(space));
    return guarded("frost_buffer_wrap", [&] {
        return make_buffer(ctx, name, ptr, bytes, space, true, out);
    });
}

frost_status frost_buffer_free(frost_buffer* buf) {
    if (buf == nullptr) return FROST_OK;
    if (buf->bind_count.load() > 0)
        return fail(FROST_ERR_STATE,
                    "frost_buffer_free('%s'): the buffer is bound to %d graph port(s); unbind or "
                    "destroy those graphs first", buf->name.c_str(), buf->bind_count.load());
    frost_ctx* ctx = buf->ctx;
    // In-flight work may still read or write the memory.
    FROST_TRY(frost::exec::drain_ctx(ctx));
    {
        std::lock_guard<std::mutex> lock(ctx->mu);
        ctx->buffers.erase(buf);
        if (!buf->wrapped) ctx->bytes[buf->space] -= buf->bytes;
    }
    if (!buf->wrapped) ctx->backend->free(buf->space, buf->ptr);
    delete buf;
    return FROST_OK;
}

const char* frost_buffer_name(const frost_buffer* buf) { return buf ? buf->name.c_str() : ""; }
size_t frost_buffer_bytes(const frost_buffer* buf) { return buf ? buf->bytes : 0; }
frost_space frost_buffer_space(const frost_buffer* buf) { return buf ? buf->space : FROST_SPACE_HOST; }
void* frost_buffer_ptr(const frost_buffer* buf) { return buf ? buf->ptr : nullptr; }
frost_ctx* frost_buffer_ctx(const frost_buffer* buf) { return buf ? buf->ctx : nullptr; }
int frost_buffer_is_wrapped(const frost_buffer* buf) { return buf && buf->wrapped ? 1 : 0; }

frost_status frost_buffer_copy(frost_buffer* dst, size_t dst_off, const frost_buffer* src,
                               size_t src_off, size_t bytes, frost_stream* stream) {
    constexpr const char* what = "frost_buffer_copy";
    FROST_CHECK_ARG(dst != nullptr);
    FROST_CHECK_ARG(src != nullptr);
    FROST_CHECK_ARG(stream != nullptr);
    if (dst->ctx != stream->ctx || src->ctx != stream->ctx)
        return fail(FROST_ERR_INVALID_ARG, "%s('%s' <- '%s'): buffers must belong to the stream's ctx",
                    what, dst->name.c_str(), src->name.c_str());
    FROST_TRY(check_range(what, "destination", dst, dst_off, bytes));
    FROST_TRY(check_range(what, "source", src, src_off, bytes));
    if (bytes == 0) return FROST_OK;
    // Compare addresses, not handles: two wrapped buffers may alias the same memory.
    const auto d = reinterpret_cast<uintptr_t>(dst->ptr) + dst_off;
    const auto s = reinterpret_cast<uintptr_t>(src->ptr) + src_off;
    if (d < s + bytes && s < d + bytes)
        return fail(FROST_ERR_INVALID_ARG, "%s('%s'[%zu] <- '%s'[%zu], %zu bytes): ranges overlap",
                    what, dst->name.c_str(), dst_off, src->name.c_str(), src_off, bytes);
    if (frost_fault_hit(FROST_FAULT_COPY))
        return fail(FROST_ERR_IO, "%s('%s' <- '%s', %zu bytes): injected copy failure; nothing was written",
                    what, dst->name.c_str(), src->name.c_str(), bytes);
    return guarded(what, [&] {
        return stream->ctx->backend->copy(stream->handle, static_cast<char*>(dst->ptr) + dst_off,
                                          dst->space, static_cast<const char*>(src->ptr) + src_off,
                                          src->space, bytes);
    });
}

frost_status frost_buffer_copy_batch(const frost_copy_op* ops, size_t n, frost_stream* stream) {
    constexpr const char* what = "frost_buffer_copy_batch";
    FROST_CHECK_ARG(stream != nullptr);
    FROST_CHECK_ARG(ops != nullptr || n == 0);
    struct Range {
        uintptr_t lo, hi;
    };
    std::vector<frost::exec::Backend::CopyOp> todo;
    std::vector<Range> dsts, srcs;
    try {
        todo.reserve(n);
        dsts.reserve(n);
        srcs.reserve(n);
    } catch (const std::bad_alloc&) {
        return fail(FROST_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu ops", what, n);
    }
    for (size_t i = 0; i < n; ++i) {
        const frost_copy_op& op = ops[i];
        if (op.dst == nullptr || op.src == nullptr)
            return fail(FROST_ERR_INVALID_ARG, "%s: op %zu has a null buffer", what, i);
        if (op.dst->ctx != stream->ctx || op.src->ctx != stream->ctx)
            return fail(FROST_ERR_INVALID_ARG, "%s: op %zu ('%s' <- '%s'): buffers must belong to the stream's ctx",
                        what, i, op.dst->name.c_str(), op.src->name.c_str());
        FROST_TRY(check_range(what, "destination", op.dst, op.dst_off, op.bytes));
        FROST_TRY(check_range(what, "source", op.src, op.src_off, op.bytes));
        if (op.bytes == 0) continue;
        const Range d{reinterpret_cast<uintptr_t>(op.dst->ptr) + op.dst_off, 0};
        const Range s{reinterpret_cast<uintptr_t>(op.src->ptr) + op.src_off, 0};
        dsts.push_back({d.lo, d.lo + op.bytes});
        srcs.push_back({s.lo, s.lo + op.bytes});
        todo.push_back({static_cast<char*>(op.dst->ptr) + op.dst_off, op.dst->space,
                        static_cast<const char*>(op.src->ptr) + op.src_off, op.src->space, op.bytes});
    }
    // Ops may run concurrently: a destination may overlap no source and no other destination.
    // (Batches are a few hundred ops at most - capsule parts - so the quadratic check is cheap.)
    auto overlap = [](const Range& a, const Range& b) { return a.lo < b.hi && b.lo < a.hi; };
    for (size_t i = 0; i < dsts.size(); ++i)
        for (size_t j = 0; j < dsts.size(); ++j)
            if (overlap(dsts[i], srcs[j]) || (i != j && overlap(dsts[i], dsts[j])))
                return fail(FROST_ERR_INVALID_ARG, "%s: the destination of one op overlaps %s of another", what,
                            overlap(dsts[i], srcs[j]) ? "the source" : "the destination");
    for (size_t i = 0; i < todo.size(); ++i)
        if (frost_fault_hit(FROST_FAULT_COPY))
            return fail(FROST_ERR_IO, "%s: injected copy failure at op %zu of %zu; nothing was enqueued", what, i,
                        todo.size());
    if (todo.empty()) return FROST_OK;
    return guarded(what, [&] { return stream->ctx->backend->copy_batch(stream->handle, todo.data(), todo.size()); });
}

frost_status frost_buffer_fill(frost_buffer* buf, size_t off, uint8_t value, size_t bytes,
                               frost_stream* stream) {
    constexpr const char* what = "frost_buffer_fill";
    FROST_CHECK_ARG(buf != nullptr);
    FROST_CHECK_ARG(stream != nullptr);
    if (buf->ctx != stream->ctx)
        return fail(FROST_ERR_INVALID_ARG, "%s('%s'): the buffer must belong to the stream's ctx", what,
                    buf->name.c_str());
    FROST_TRY(check_range(what, "fill", buf, off, bytes));
    if (bytes == 0) return FROST_OK;
    if (frost_fault_hit(FROST_FAULT_COPY))
        return fail(FROST_ERR_IO, "%s('%s', %zu bytes): injected copy failure; nothing was written", what,
                    buf->name.c_str(), bytes);
    return guarded(what, [&] {
        return stream->ctx->backend->fill(stream->handle, static_cast<char*>(buf->ptr) + off,
                                          buf->space, value, bytes);
    });
}

}  // extern "C"
