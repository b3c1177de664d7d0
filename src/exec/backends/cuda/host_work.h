// Host work on CUDA streams: the heap payload behind every cudaLaunchHostFunc (frost_launch_host
// and the backend's own host-side copies and fills), the sticky error a failing host fn leaves
// on its stream, and the storage a capture hands to its variant so that the payloads (and pinned
// staging memory) of captured host nodes live exactly as long as the graph that uses them.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "frost/exec.h"

namespace frost::exec::cuda {

// First failure of asynchronous host work. Set from CUDA's callback thread, taken (and cleared)
// by stream_sync on the feeding thread; the atomic makes the common "no error" check lock-free.
class StickyError {
public:
    void set(frost_status s, const char* msg);  // keeps the first failure, drops later ones
    // Moves the failure (if any) into *s / *msg and clears it; false if there was none.
    bool take(frost_status* s, std::string* msg);
    void move_to(StickyError& dst);  // forwards a failure to another sink

private:
    std::atomic<int> status_{FROST_OK};
    std::mutex mu_;
    std::string msg_;
};

// Pinned staging blocks whose owner died where CUDA may not be called (inside a host callback).
// The backend frees them at its next safe point. Shared by the backend and every capture store.
class PinnedReaper {
public:
    ~PinnedReaper();           // frees whatever is still pending
    void defer(void* pinned);  // callable from a host callback: no CUDA call
    void drain();              // cudaFreeHost on everything pending; never during capture

private:
    std::mutex mu_;
    std::vector<void*> pending_;
};

struct CaptureStore;

// One cudaLaunchHostFunc payload, allocated with its argument bytes in one block. Exactly one of
// `fn` (run fn(args), report a failure to `sink`) or `source` (forward the replayed variant's
// failure to `sink`, keeping that variant's storage alive until its host nodes have run) is set.
struct HostCall {
    frost_host_fn fn = nullptr;
    StickyError* sink = nullptr;           // the stream's, or the capture store's while capturing
    std::shared_ptr<CaptureStore> source;  // forward only
    bool owned_by_capture = false;         // true: a graph node may run it many times; never freed
                                           // by the trampoline, but with its store
    size_t args_bytes = 0;

    void* args();  // the copied bytes, max_align_t aligned; nullptr when args_bytes == 0
};

struct HostCallDeleter {
    void operator()(HostCall* c) const;
};
using HostCallPtr = std::unique_ptr<HostCall, HostCallDeleter>;

// Allocates a payload with room for `args_bytes` bytes (copied from `args` when non-null);
// nullptr when the host is out of memory.
HostCall* host_call_new(const void* args, size_t args_bytes);

// Everything a variant must own beyond its cudaGraphExec_t: captured payloads and staging.
struct CaptureStore {
    explicit CaptureStore(std::shared_ptr<PinnedReaper> reaper_) : reaper(std::move(reaper_)) {}
    ~CaptureStore();  // may run on CUDA's callback thread: defers cudaFreeHost to the reaper
    CaptureStore(const CaptureStore&) = delete;
    CaptureStore& operator=(const CaptureStore&) = delete;

    bool empty() const { return calls.empty() && staging.empty(); }

    StickyError errors;              // failures of the variant's host nodes, forwarded on replay
    std::vector<HostCallPtr> calls;  // payloads of captured host nodes
    std::vector<void*> staging;      // pinned blocks used by captured pageable copies
    std::shared_ptr<PinnedReaper> reaper;
};

// cudaHostFn_t trampoline for every HostCall.
void CUDART_CB run_host_call(void* payload);

}  // namespace frost::exec::cuda
