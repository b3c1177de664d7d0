/* frost/exec.h — the execution contract.
 *
 * A small C ABI (usable from C, C++, Rust, Python ctypes) that fixes MECHANISM only: contexts,
 * streams, events, named buffers in memory spaces, captured graphs keyed by a ShapeKey, plans of
 * graph replays across streams, and fault injection. It knows nothing about models, sessions,
 * tokens or HTTP. Two backends implement it: `cpu` (the reference; capture records host closures)
 * and `cuda` (capture is CUDA stream capture, replay is one cudaGraphLaunch).
 *
 * Conventions for every function below:
 *   - Every call returns a frost_status (or a plain value for pure getters, documented as such).
 *     On any status other than FROST_OK the call had no effect (it wrote nothing, allocated nothing)
 *     unless its comment says otherwise, and frost_last_error() holds a message naming the cause.
 *   - Errors never exit or abort the process.
 *   - Threading: a ctx and everything it owns may be used from several threads, but a single stream
 *     must be fed by one thread at a time (as with CUDA streams). Asynchronous work enqueued on a
 *     stream runs in enqueue order on that stream; work on different streams is unordered unless
 *     ordered by events.
 *   - Ownership: every object created by frost_X_create / frost_buffer_alloc is owned by the caller
 *     and released with the matching destroy/free. Destroying a ctx releases everything it still
 *     owns (after synchronising it).
 */
#ifndef FROST_EXEC_H
#define FROST_EXEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------------- */
typedef enum frost_status {
    FROST_OK = 0,
    FROST_ERR_INVALID_ARG = 1,  /* null pointer, bad enum, bad size, bad name */
    FROST_ERR_OUT_OF_RANGE = 2, /* offset/length outside a buffer; nothing was written */
    FROST_ERR_NOT_FOUND = 3,    /* e.g. replay of a ShapeKey that was never captured */
    FROST_ERR_OUT_OF_MEMORY = 4,/* allocation failed (real or injected) */
    FROST_ERR_BACKEND = 5,      /* the backend (CUDA driver/runtime) reported an error */
    FROST_ERR_UNSUPPORTED = 6,  /* backend not compiled in, or operation not supported there */
    FROST_ERR_STATE = 7,        /* call not valid in the object's current state (e.g. nested capture) */
    FROST_ERR_IO = 8,           /* file or copy I/O failed (real or injected) */
    FROST_ERR_CORRUPT = 9,      /* data failed validation (checksums, formats; used by upper layers) */
    FROST_ERR_INCOMPATIBLE = 10 /* data belongs to another deployment/version (used by upper layers) */
} frost_status;

/* Human-readable name of a status ("FROST_ERR_NOT_FOUND"). Never NULL. Pure getter. */
const char* frost_status_name(frost_status s);

/* Message describing the most recent failure on the calling thread (thread-local). Valid until the
 * next frost call on this thread. Empty string if there was none. Never NULL. */
const char* frost_last_error(void);

/* Clears the calling thread's last error. */
void frost_clear_error(void);

/* Version of this ABI; bumped whenever a signature or promise here changes. */
#define FROST_EXEC_ABI_VERSION 1
uint32_t frost_exec_abi_version(void);

/* ---------------------------------------------------------------------------------------------
 * Context, streams, events
 * ------------------------------------------------------------------------------------------- */
typedef enum frost_backend { FROST_BACKEND_CPU = 0, FROST_BACKEND_CUDA = 1 } frost_backend;

typedef struct frost_ctx frost_ctx;
typedef struct frost_stream frost_stream;
typedef struct frost_event frost_event;

/* Returns 1 if the backend was compiled into this build and a device is usable, else 0. */
int frost_backend_available(frost_backend backend);

/* Creates a context on `backend`; `device` is the CUDA device index (must be 0 for cpu).
 * FROST_ERR_UNSUPPORTED if the backend is not compiled in or no such device exists. */
frost_status frost_ctx_create(frost_backend backend, int device, frost_ctx** out);

/* Synchronises, then releases every stream, event, buffer, graph and plan the ctx still owns.
 * NULL is accepted and ignored. Pointers to released objects become invalid. */
frost_status frost_ctx_destroy(frost_ctx* ctx);

frost_backend frost_ctx_backend(const frost_ctx* ctx); /* pure getter */

/* Blocks until all work enqueued on every stream of the ctx has finished. Reports the first
 * asynchronous error any of that work raised (kernel failure, injected copy failure...). */
frost_status frost_ctx_sync(frost_ctx* ctx);

/* Resource accounting, used by tests to prove "counters back to baseline" after failures. */
typedef struct frost_ctx_stats {
    uint64_t live_buffers;       /* buffers allocated or wrapped and not yet freed */
    uint64_t bytes_device;       /* bytes of owned (not wrapped) buffers per space */
    uint64_t bytes_host_pinned;
    uint64_t bytes_host;
    uint64_t live_streams, live_events, live_graphs, live_plans;
} frost_ctx_stats;
frost_status frost_ctx_get_stats(const frost_ctx* ctx, frost_ctx_stats* out);

/* The ctx's device memory as the driver reports it: total capacity and the bytes in use by every
 * process and context on that device (total - free), not only this ctx's buffers (those are
 * frost_ctx_stats.bytes_device); graph variants, the runtime and other processes count too. For
 * servers' metrics and leak checks. FROST_ERR_UNSUPPORTED on the cpu backend (its "device" space
 * is ordinary host memory, already in frost_ctx_stats); FROST_ERR_STATE on a thread that is
 * capturing a graph with this ctx. Either out-pointer may be NULL. */
frost_status frost_ctx_device_memory(const frost_ctx* ctx, uint64_t* used_bytes, uint64_t* total_bytes);

/* Priority: lower numbers mean higher priority, as in CUDA. 0 is the default. The cpu backend
 * records the value (frost_stream_priority) but does not schedule by it: every cpu stream has its
 * own worker thread. */
frost_status frost_stream_create(frost_ctx* ctx, int priority, frost_stream** out);
frost_status frost_stream_destroy(frost_stream* stream); /* synchronises first; NULL ignored */
frost_status frost_stream_sync(frost_stream* stream);    /* blocks until the stream drains */
int frost_stream_priority(const frost_stream* stream);   /* pure getter */
frost_ctx* frost_stream_ctx(const frost_stream* stream); /* pure getter */

/* The backend's native handle: a cudaStream_t for cuda, NULL for cpu. Kernel launchers of the
 * cuda backend launch on it; model code never needs it directly (see frost_launch_host and the
 * op dispatch layer). */
void* frost_stream_native(const frost_stream* stream);

frost_status frost_event_create(frost_ctx* ctx, frost_event** out);
frost_status frost_event_destroy(frost_event* event); /* NULL ignored */
/* Marks the point in `stream` reached by everything enqueued so far. Re-recording moves it. */
frost_status frost_event_record(frost_event* event, frost_stream* stream);
/* Makes all later work on `stream` wait until `event`'s recorded point has completed. Waiting on
 * an event that was never recorded is a no-op (as in CUDA). Legal during capture. */
frost_status frost_stream_wait_event(frost_stream* stream, frost_event* event);
frost_status frost_event_sync(frost_event* event); /* blocks the host until the point completes */
/* Writes 1 to *done if the recorded point has completed (or was never recorded), else 0. */
frost_status frost_event_query(frost_event* event, int* done);

/* ---------------------------------------------------------------------------------------------
 * Host work on a stream: the CPU backend's kernel launch, and a host callback on CUDA.
 * ------------------------------------------------------------------------------------------- */
/* `args` points to a copy of the bytes passed at enqueue time (so callers may pass a stack
 * struct); the function must not fail silently: it returns a status, and a non-OK status becomes
 * the stream's sticky error, reported by the next sync of that stream or ctx. */
typedef frost_status (*frost_host_fn)(const void* args);

/* Enqueues fn(copy of args) on the stream, or appends it to the graph being captured on it.
 * args_bytes may be 0 (args then ignored). At most 4096 bytes of args. */
frost_status frost_launch_host(frost_stream* stream, frost_host_fn fn, const void* args,
                               size_t args_bytes);

/* ---------------------------------------------------------------------------------------------
 * Buffers: named memory with a fixed address for its lifetime.
 * ------------------------------------------------------------------------------------------- */
typedef enum frost_space {
    FROST_SPACE_DEVICE = 0,      /* GPU memory (cuda); ordinary aligned memory on the cpu backend */
    FROST_SPACE_HOST_PINNED = 1, /* page-locked host memory (cudaHostAlloc); plain on cpu */
    FROST_SPACE_HOST = 2         /* pageable host memory */
} frost_space;

typedef struct frost_buffer frost_buffer;

/* Allocates `bytes` (> 0) in `space`, aligned to at least 256 bytes. Contents are undefined.
 * `name` (non-empty, < 256 bytes, copied) identifies the buffer in errors, dumps and capsules.
 * FROST_ERR_OUT_OF_MEMORY on failure (real or injected); nothing is left allocated. */
frost_status frost_buffer_alloc(frost_ctx* ctx, const char* name, size_t bytes, frost_space space,
                                frost_buffer** out);
/* Wraps memory the caller owns (must stay valid until the buffer is freed; never freed by frost). */
frost_status frost_buffer_wrap(frost_ctx* ctx, const char* name, void* ptr, size_t bytes,
                               frost_space space, frost_buffer** out);
/* Frees an allocated buffer (after synchronising the ctx) or forgets a wrapped one. NULL ignored.
 * FROST_ERR_STATE if the buffer is bound to a graph port (unbind or destroy the graph first). */
frost_status frost_buffer_free(frost_buffer* buf);

const char* frost_buffer_name(const frost_buffer* buf); /* pure getters */
size_t frost_buffer_bytes(const frost_buffer* buf);
frost_space frost_buffer_space(const frost_buffer* buf);
void* frost_buffer_ptr(const frost_buffer* buf); /* stable for the buffer's lifetime */
frost_ctx* frost_buffer_ctx(const frost_buffer* buf);
int frost_buffer_is_wrapped(const frost_buffer* buf);

/* Copies `bytes` from src[src_off..) to dst[dst_off..) asynchronously on `stream`, across any pair
 * of spaces (D2D, D2H, H2D, H2H). Both buffers must belong to the stream's ctx. If either range is
 * outside its buffer (checked with overflow-safe arithmetic) the call returns
 * FROST_ERR_OUT_OF_RANGE and writes nothing. bytes == 0 is a no-op. Overlapping ranges in the same
 * buffer are FROST_ERR_INVALID_ARG. Legal during capture (becomes a node of the graph).
 * The caller must keep host memory unchanged until the copy completes (stream/event sync). */
frost_status frost_buffer_copy(frost_buffer* dst, size_t dst_off, const frost_buffer* src,
                               size_t src_off, size_t bytes, frost_stream* stream);

/* One copy of a batch: `bytes` from src[src_off..) to dst[dst_off..). */
typedef struct frost_copy_op {
    frost_buffer* dst;
    size_t dst_off;
    const frost_buffer* src;
    size_t src_off;
    size_t bytes;
} frost_copy_op;

/* Enqueues `n` copies on `stream` as one unit: every op is checked first (rules of
 * frost_buffer_copy, plus: no op's destination may overlap another op's source or destination,
 * because the copies of a batch may run in any order or concurrently), and either all are enqueued
 * or none is and nothing is written. The fault gate is passed once per op before anything is
 * enqueued. Device-to-device ops run as one launch on the cuda backend (restoring a capsule's many
 * small state buffers costs one launch, not one per buffer). Legal during capture. */
frost_status frost_buffer_copy_batch(const frost_copy_op* ops, size_t n, frost_stream* stream);

/* Sets `bytes` bytes of buf[off..) to `value` asynchronously on `stream`. Range rules as copy. */
frost_status frost_buffer_fill(frost_buffer* buf, size_t off, uint8_t value, size_t bytes,
                               frost_stream* stream);

/* ---------------------------------------------------------------------------------------------
 * Graphs: ShapeKey -> captured variant, with named ports.
 * ------------------------------------------------------------------------------------------- */
typedef uint64_t frost_shape_key; /* opaque to frost; compared for equality only */
typedef struct frost_graph frost_graph;

/* Enqueues the work of one variant onto `stream` (and only onto it): kernel launches
 * (frost_launch_host on cpu, CUDA kernels on the native stream for cuda), buffer copies and fills.
 * Pointers captured here are baked into the variant, so they must stay valid while it exists.
 * Cross-stream work inside one variant is not supported; use a plan of several graphs instead. */
typedef frost_status (*frost_record_fn)(void* user, frost_stream* stream);

/* max_variants: 0 = unbounded; otherwise capturing a new key when full first evicts the least
 * recently used variant (capture and replay both count as use). */
frost_status frost_graph_create(frost_ctx* ctx, const char* name, size_t max_variants,
                                frost_graph** out);
frost_status frost_graph_destroy(frost_graph* graph); /* releases all variants; unbinds ports */
const char* frost_graph_name(const frost_graph* graph);

/* Runs record(user, stream) with `stream` in capture mode and stores the result as the variant for
 * `key`, replacing an existing one. Nothing recorded executes during capture. If record returns
 * non-OK, or the backend fails, no variant is stored (any old variant for key is kept) and the
 * status is returned. Capturing while `stream` is already capturing is FROST_ERR_STATE.
 * The stream should be idle (synchronised) when capture begins on the cuda backend. */
frost_status frost_graph_capture(frost_graph* graph, frost_shape_key key, frost_stream* stream,
                                 frost_record_fn record, void* user);
/* Enqueues the captured variant for `key` on `stream`. FROST_ERR_NOT_FOUND if there is none:
 * never a silent no-op. Replays of one variant on one stream run in order. */
frost_status frost_graph_replay(frost_graph* graph, frost_shape_key key, frost_stream* stream);
int frost_graph_has_variant(const frost_graph* graph, frost_shape_key key); /* 1 or 0 */
frost_status frost_graph_evict(frost_graph* graph, frost_shape_key key);   /* NOT_FOUND if absent */
/* Evicts the least recently used variant; writes its key to *evicted_key if non-NULL.
 * FROST_ERR_NOT_FOUND when the graph holds no variant. */
frost_status frost_graph_evict_lru(frost_graph* graph, frost_shape_key* evicted_key);
size_t frost_graph_variant_count(const frost_graph* graph);
/* Number of successful captures over the graph's lifetime (never decreases). Callers compare it
 * before and after a region to prove "no recapture happened". */
uint64_t frost_graph_capture_count(const frost_graph* graph);

/* Ports: named slots bound to buffers. A record callback reads its buffers through
 * frost_graph_port(); binding the same buffer to ports of two graphs is the zero-copy hand-off.
 * Binding a port to a different buffer while variants exist is FROST_ERR_STATE (their pointers
 * are baked in): evict them first. Rebinding to the same buffer is a no-op. */
frost_status frost_graph_bind(frost_graph* graph, const char* port, frost_buffer* buf);
frost_status frost_graph_unbind(frost_graph* graph, const char* port); /* STATE if variants exist */
frost_buffer* frost_graph_port(const frost_graph* graph, const char* port); /* NULL if unbound */
size_t frost_graph_port_count(const frost_graph* graph);
/* Name of port i (0 <= i < port_count) in bind order; NULL if out of range. */
const char* frost_graph_port_name(const frost_graph* graph, size_t i);

/* ---------------------------------------------------------------------------------------------
 * Plans: a DAG of (graph, key, stream) replays with cross-stream dependencies.
 * ------------------------------------------------------------------------------------------- */
typedef struct frost_plan frost_plan;

frost_status frost_plan_create(frost_ctx* ctx, frost_plan** out);
frost_status frost_plan_destroy(frost_plan* plan);
/* Adds a node; its index (0, 1, 2, ...) is written to *node. */
frost_status frost_plan_add(frost_plan* plan, frost_graph* graph, frost_shape_key key,
                            frost_stream* stream, size_t* node);
/* Node `after` starts only when node `before` has completed. A cycle is rejected at add time
 * (FROST_ERR_INVALID_ARG) since before must have a smaller index than after. */
frost_status frost_plan_depend(frost_plan* plan, size_t before, size_t after);
/* Enqueues every node in dependency order, inserting event waits across streams. Asynchronous.
 * Every node's key is checked before anything is enqueued (NOT_FOUND enqueues nothing). */
frost_status frost_plan_execute(frost_plan* plan);
/* Blocks until everything the last execute enqueued has completed. */
frost_status frost_plan_sync(frost_plan* plan);

/* ---------------------------------------------------------------------------------------------
 * Fault injection: every allocation, copy and I/O call of frost passes through one gate.
 * Test-only switch; off by default; process-wide (not per ctx) and thread-safe.
 * ------------------------------------------------------------------------------------------- */
typedef enum frost_fault_kind {
    FROST_FAULT_ALLOC = 0, /* buffer allocations (every space), pinned staging, host arenas */
    FROST_FAULT_COPY = 1,  /* buffer copies and fills */
    FROST_FAULT_IO = 2,    /* file reads/writes/fsync/rename by upper layers */
    FROST_FAULT_KIND_COUNT = 3
} frost_fault_kind;

/* Fails the nth call (1-based, counted from this call) of `kind`; if `persistent`, every call from
 * the nth on fails until cleared. nth == 0 disarms the kind. */
void frost_fault_arm(frost_fault_kind kind, uint64_t nth, int persistent);
void frost_fault_clear(void); /* disarms every kind and resets the counters */
/* Calls of `kind` that passed through the gate since the last arm/clear (failed ones included). */
uint64_t frost_fault_calls(frost_fault_kind kind);
/* Used by frost's own layers at each gated call site: returns 1 if this call must fail. */
int frost_fault_hit(frost_fault_kind kind);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FROST_EXEC_H */
