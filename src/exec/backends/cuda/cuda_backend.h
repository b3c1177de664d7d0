// The cuda backend of the execution contract (src/exec/backend.h): memory via cudaMalloc /
// cudaHostAlloc, non-blocking prioritised streams, timing-free events, cudaMemcpyAsync copies,
// host work through cudaLaunchHostFunc, and graphs by stream capture (instantiated once, replayed
// with one cudaGraphLaunch). The front end has validated every argument before a call lands here.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "exec/backend.h"
#include "exec/backends/cuda/host_work.h"

namespace frost::exec::cuda {

// A frost stream on this backend. Fed by one thread at a time (the contract's rule), so
// `capture` needs no lock; `sticky` is also written by CUDA's callback thread.
struct CudaStream {
    cudaStream_t handle = nullptr;
    StickyError sticky;
    std::shared_ptr<CaptureStore> capture;  // non-null between capture_begin and capture_end

    // Where a failure of host work enqueued now must go: the stream itself, or, while
    // capturing, the store that becomes the variant's (forwarded to the replay stream).
    StickyError* sink() { return capture ? &capture->errors : &sticky; }
};

// One captured variant: the graph, its executable (instantiated once) and what it owns.
struct CudaVariant {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::shared_ptr<CaptureStore> store;  // null when the capture recorded no host work
};

// Captures the calling thread has begun and not yet ended on any cuda ctx; CUDA prohibits
// potentially synchronising calls (cudaFreeHost) on such a thread (thread-local capture mode).
extern thread_local int t_captures_on_thread;

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, int least_priority, int greatest_priority);
    ~CudaBackend() override;

    frost_backend kind() const override { return FROST_BACKEND_CUDA; }

    frost_status alloc(frost_space space, size_t bytes, void** out) override;
    void free(frost_space space, void* ptr) override;
    frost_status device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override;

    frost_status stream_create(int priority, void** out) override;
    void stream_destroy(void* stream) override;
    frost_status stream_sync(void* stream) override;
    void* stream_native(void* stream) override;

    frost_status event_create(void** out) override;
    void event_destroy(void* event) override;
    frost_status event_record(void* event, void* stream) override;
    frost_status stream_wait_event(void* stream, void* event) override;
    frost_status event_sync(void* event) override;
    frost_status event_query(void* event, int* done) override;

    frost_status copy(void* stream, void* dst, frost_space dst_space, const void* src,
                      frost_space src_space, size_t bytes) override;
    frost_status fill(void* stream, void* dst, frost_space space, uint8_t value,
                      size_t bytes) override;
    frost_status copy_batch(void* stream, const CopyOp* ops, size_t n) override;
    frost_status launch_host(void* stream, frost_host_fn fn, const void* args,
                             size_t args_bytes) override;

    frost_status capture_begin(void* stream) override;
    frost_status capture_end(void* stream, bool keep, void** variant) override;
    frost_status replay(void* variant, void* stream) override;
    void variant_destroy(void* variant) override;

private:
    // Makes the ctx's device current on the calling thread (a ctx may be used from any thread).
    frost_status use_device() const;
    // Frees deferred pinned staging unless this thread is capturing.
    void drain_if_safe();
    // Enqueues a host-work payload (taking ownership) on `s`, or adds it to the capture.
    frost_status enqueue_host(CudaStream* s, HostCall* call);
    // Device <-> pageable copy inside a capture, staged through pinned memory the variant owns.
    frost_status copy_staged_in_capture(CudaStream* s, void* dst, frost_space dst_space,
                                        const void* src, size_t bytes);

    const int device_;
    const int least_priority_;     // numerically largest allowed value (lowest priority)
    const int greatest_priority_;  // numerically smallest allowed value (highest priority)
    std::shared_ptr<PinnedReaper> reaper_ = std::make_shared<PinnedReaper>();
};

}  // namespace frost::exec::cuda
