// The contract's objects as the front end keeps them (the C handles of frost/exec.h point at
// these). The front end owns bookkeeping (names, sizes, ports, variant tables, plans, stats);
// each object holds an opaque backend handle for the part a backend must do.
#pragma once
#include <atomic>
#include <cstring>
#include <type_traits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "exec/backend.h"
#include "exec/error.h"
#include "frost/exec.h"

struct frost_ctx {
    frost_backend kind = FROST_BACKEND_CPU;
    std::unique_ptr<frost::exec::Backend> backend;
    mutable std::mutex mu;  // guards the registries and byte counters below
    std::unordered_set<frost_stream*> streams;
    std::unordered_set<frost_event*> events;
    std::unordered_set<frost_buffer*> buffers;
    std::unordered_set<frost_graph*> graphs;
    std::unordered_set<frost_plan*> plans;
    uint64_t bytes[3] = {0, 0, 0};  // owned bytes per frost_space
};

struct frost_stream {
    frost_ctx* ctx = nullptr;
    void* handle = nullptr;  // backend stream
    int priority = 0;
    std::atomic<bool> capturing{false};  // true while frost_graph_capture runs on this stream
};

struct frost_event {
    frost_ctx* ctx = nullptr;
    void* handle = nullptr;  // backend event
};

struct frost_buffer {
    frost_ctx* ctx = nullptr;
    std::string name;
    void* ptr = nullptr;
    size_t bytes = 0;
    frost_space space = FROST_SPACE_HOST;
    bool wrapped = false;
    std::atomic<int> bind_count{0};  // graph ports bound to this buffer; free is refused while > 0
};

// One captured variant of a graph: the backend's replayable object plus its LRU stamp.
struct frost_variant {
    void* handle = nullptr;
    uint64_t last_use = 0;  // value of the graph's use clock at the last capture/replay
};

struct frost_port {
    std::string name;
    frost_buffer* buf = nullptr;
};

struct frost_graph {
    frost_ctx* ctx = nullptr;
    std::string name;
    size_t max_variants = 0;  // 0 = unbounded
    mutable std::mutex mu;    // guards variants, use_clock and ports
    std::map<frost_shape_key, frost_variant> variants;
    uint64_t use_clock = 0;
    std::atomic<uint64_t> capture_count{0};
    std::vector<frost_port> ports;  // in bind order
};

struct frost_plan_node {
    frost_graph* graph = nullptr;
    frost_shape_key key = 0;
    frost_stream* stream = nullptr;
    void* done_event = nullptr;      // backend event recorded after this node's replay
    std::vector<size_t> waits_on;    // nodes that must complete before this one starts
};

struct frost_plan {
    frost_ctx* ctx = nullptr;
    std::vector<frost_plan_node> nodes;
    std::vector<frost_stream*> last_streams;  // streams the last execute enqueued on
};

namespace frost::exec {

// Runs f() and turns an escaping C++ exception (allocation of bookkeeping) into a status, so no
// exception ever crosses the C ABI.
template <class F>
frost_status guarded(const char* what, F&& f) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        return fail(FROST_ERR_OUT_OF_MEMORY, "%s: out of host memory for bookkeeping", what);
    } catch (const std::exception& e) {
        return fail(FROST_ERR_BACKEND, "%s: unexpected exception: %s", what, e.what());
    }
}

// The integer a C caller passed for an enum parameter. Read as bytes because a value outside
// the enumerators is undefined behaviour to load as the C++ enum type, and validating such
// values is exactly the point.
template <class E>
int enum_value(const E& e) {
    std::underlying_type_t<E> v;
    static_assert(sizeof v == sizeof e);
    std::memcpy(&v, &e, sizeof v);
    return static_cast<int>(v);
}

// Validates an object name: non-NULL, non-empty, shorter than kMaxNameBytes.
constexpr size_t kMaxNameBytes = 256;
frost_status check_name(const char* what, const char* name);

// Waits until every stream of ctx has finished its enqueued work WITHOUT clearing sticky errors
// (so frees and destroys do not swallow an error the caller has yet to sync). Capturing streams
// are skipped (their recorded work does not run).
frost_status drain_ctx(frost_ctx* ctx);

// Releases a graph's variants and ports; the caller removes it from the ctx registry.
void graph_release(frost_graph* graph);
void plan_release(frost_plan* plan);

}  // namespace frost::exec
