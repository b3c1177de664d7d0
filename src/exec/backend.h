// Internal interface between the contract's front end (api.cpp: argument checks, bookkeeping,
// graph tables, ports, plans, fault gate) and a backend (cpu reference, cuda). A backend only
// moves bytes and runs work; it never validates ranges or names, which the front end did.
// Handles are opaque void* owned by the backend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "frost/exec.h"

namespace frost::exec {

class Backend {
public:
    virtual ~Backend() = default;
    virtual frost_backend kind() const = 0;

    // Memory. alloc returns >= 256-byte aligned memory or FROST_ERR_OUT_OF_MEMORY.
    virtual frost_status alloc(frost_space space, size_t bytes, void** out) = 0;
    virtual void free(frost_space space, void* ptr) = 0;
    // The device's free and total bytes (frost_ctx_device_memory); backends without device
    // memory of their own keep this default.
    virtual frost_status device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const;

    // Streams.
    virtual frost_status stream_create(int priority, void** out) = 0;
    virtual void stream_destroy(void* stream) = 0;  // called after stream_sync
    virtual frost_status stream_sync(void* stream) = 0;  // reports (and clears) a sticky error
    virtual void* stream_native(void* stream) = 0;       // cudaStream_t or nullptr

    // Events.
    virtual frost_status event_create(void** out) = 0;
    virtual void event_destroy(void* event) = 0;
    virtual frost_status event_record(void* event, void* stream) = 0;
    virtual frost_status stream_wait_event(void* stream, void* event) = 0;
    virtual frost_status event_sync(void* event) = 0;
    virtual frost_status event_query(void* event, int* done) = 0;

    // Asynchronous work on a stream (recorded instead when the stream is capturing).
    virtual frost_status copy(void* stream, void* dst, frost_space dst_space, const void* src,
                              frost_space src_space, size_t bytes) = 0;
    virtual frost_status fill(void* stream, void* dst, frost_space space, uint8_t value,
                              size_t bytes) = 0;
    // Checked copies that may run in any order (no op overlaps another); the default enqueues
    // them one by one, a backend may do better (cuda: device-to-device ops in one launch).
    struct CopyOp {
        void* dst;
        frost_space dst_space;
        const void* src;
        frost_space src_space;
        size_t bytes;
    };
    virtual frost_status copy_batch(void* stream, const CopyOp* ops, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            const frost_status s =
                copy(stream, ops[i].dst, ops[i].dst_space, ops[i].src, ops[i].src_space, ops[i].bytes);
            if (s != FROST_OK) return s;
        }
        return FROST_OK;
    }
    virtual frost_status launch_host(void* stream, frost_host_fn fn, const void* args,
                                     size_t args_bytes) = 0;

    // Capture: begin puts the stream in capture mode; end leaves it and, if keep, returns a
    // replayable variant (else discards what was recorded). Replay enqueues a variant.
    virtual frost_status capture_begin(void* stream) = 0;
    virtual frost_status capture_end(void* stream, bool keep, void** variant) = 0;
    virtual frost_status replay(void* variant, void* stream) = 0;
    virtual void variant_destroy(void* variant) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
// Defined by backends/cuda when built with CUDA, else by a stub that returns UNSUPPORTED.
frost_status make_cuda_backend(int device, std::unique_ptr<Backend>* out);
int cuda_backend_available();

}  // namespace frost::exec
