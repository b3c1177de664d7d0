// The cuda backend's factory, device selection, memory, streams and events (see cuda_backend.h).
// Copies, fills and host work are in cuda_transfer.cpp; capture and replay in cuda_capture.cpp.
#include "exec/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "exec/backends/cuda/cuda_check.h"

namespace frost::exec {

namespace {
// The contract promises at least this alignment in every space; cudaMalloc and cudaHostAlloc
// give more, pageable host memory is asked for it explicitly.
constexpr size_t kHostAlignment = 256;
}  // namespace

int cuda_backend_available() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cuda::clear_cuda_error();  // "no driver / no device" must not poison later calls
        return 0;
    }
    return count > 0 ? 1 : 0;
}

frost_status make_cuda_backend(int device, std::unique_ptr<Backend>* out) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cuda::clear_cuda_error();
        return fail(FROST_ERR_UNSUPPORTED, "cuda backend: no usable CUDA device: %s: %s",
                    cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (device < 0 || device >= count)
        return fail(FROST_ERR_UNSUPPORTED, "cuda backend: device %d does not exist (%d device%s)",
                    device, count, count == 1 ? "" : "s");
    FROST_CUDA_TRY(cudaSetDevice(device));
    // Create the primary context now, so its cost and any failure belong to ctx creation rather
    // than to the first buffer allocation.
    FROST_CUDA_TRY(cudaFree(nullptr));
    int least = 0, greatest = 0;
    FROST_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    try {
        *out = std::make_unique<cuda::CudaBackend>(device, least, greatest);
    } catch (const std::bad_alloc&) {
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory");
    }
    return FROST_OK;
}

}  // namespace frost::exec

namespace frost::exec::cuda {

thread_local int t_captures_on_thread = 0;

CudaBackend::CudaBackend(int device, int least_priority, int greatest_priority)
    : device_(device), least_priority_(least_priority), greatest_priority_(greatest_priority) {}

CudaBackend::~CudaBackend() {
    if (use_device() == FROST_OK) reaper_->drain();
}

void CudaBackend::drain_if_safe() {
    // cudaFreeHost on a thread with an ongoing (thread-local mode) capture is prohibited and
    // would invalidate that capture; such a thread leaves the work to a later safe point.
    if (t_captures_on_thread <= 0) reaper_->drain();
}

frost_status CudaBackend::use_device() const {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device_) return FROST_OK;
    FROST_CUDA_TRY(cudaSetDevice(device_));
    return FROST_OK;
}

frost_status CudaBackend::device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const {
    // Not during this thread's capture: the runtime may refuse the query there, and a refusal
    // would invalidate the capture.
    if (t_captures_on_thread > 0)
        return fail(FROST_ERR_STATE, "frost_ctx_device_memory: this thread is capturing a graph");
    FROST_TRY(use_device());
    size_t f = 0, t = 0;
    FROST_CUDA_TRY(cudaMemGetInfo(&f, &t));
    *free_bytes = f;
    *total_bytes = t;
    return FROST_OK;
}

frost_status CudaBackend::alloc(frost_space space, size_t bytes, void** out) {
    FROST_TRY(use_device());
    drain_if_safe();
    void* p = nullptr;
    switch (space) {
        case FROST_SPACE_DEVICE: FROST_CUDA_TRY(cudaMalloc(&p, bytes)); break;
        case FROST_SPACE_HOST_PINNED:
            FROST_CUDA_TRY(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
            break;
        case FROST_SPACE_HOST: {
            // aligned_alloc wants a size that is a multiple of the alignment.
            const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
            if (rounded < bytes)
                return fail(FROST_ERR_OUT_OF_MEMORY,
                            "cuda backend: %zu bytes of host memory is too large", bytes);
            p = std::aligned_alloc(kHostAlignment, rounded);
            if (p == nullptr)
                return fail(FROST_ERR_OUT_OF_MEMORY,
                            "cuda backend: out of host memory allocating %zu bytes", bytes);
            break;
        }
        default:
            return fail(FROST_ERR_INVALID_ARG, "cuda backend: unknown memory space %d",
                        static_cast<int>(space));
    }
    *out = p;
    return FROST_OK;
}

void CudaBackend::free(frost_space space, void* ptr) {
    if (ptr == nullptr) return;
    if (space == FROST_SPACE_HOST) {
        std::free(ptr);
        return;
    }
    if (use_device() != FROST_OK) return;
    if (space == FROST_SPACE_DEVICE)
        (void)cudaFree(ptr);
    else
        (void)cudaFreeHost(ptr);
    clear_cuda_error();
    drain_if_safe();
}

frost_status CudaBackend::stream_create(int priority, void** out) {
    FROST_TRY(use_device());
    // CUDA's range is [greatest, least] with greatest <= least (e.g. [-5, 0]); out-of-range
    // requests get the nearest priority the device has.
    const int clamped = std::clamp(priority, greatest_priority_, least_priority_);
    CudaStream* s = new (std::nothrow) CudaStream();
    if (s == nullptr)
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory for a stream");
    const cudaError_t e = cudaStreamCreateWithPriority(&s->handle, cudaStreamNonBlocking, clamped);
    if (e != cudaSuccess) {
        delete s;
        return cuda_fail(e, "cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, clamped)",
                         __FILE__, __LINE__);
    }
    *out = s;
    return FROST_OK;
}

void CudaBackend::stream_destroy(void* stream) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    if (s == nullptr) return;
    if (use_device() == FROST_OK) {
        if (s->capture) {
            // Never left capturing by the front end; end it anyway so the handle can go.
            cudaGraph_t g = nullptr;
            if (cudaStreamEndCapture(s->handle, &g) == cudaSuccess && g != nullptr)
                (void)cudaGraphDestroy(g);
            s->capture.reset();
        }
        (void)cudaStreamDestroy(s->handle);
        clear_cuda_error();
    }
    delete s;
}

frost_status CudaBackend::stream_sync(void* stream) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    const cudaError_t e = cudaStreamSynchronize(s->handle);
    // Take the sticky error in every case: the contract reports it once and clears it.
    frost_status host_status = FROST_OK;
    std::string host_msg;
    const bool host_failed = s->sticky.take(&host_status, &host_msg);
    if (e != cudaSuccess) {
        const frost_status st = cuda_fail(e, "cudaStreamSynchronize(stream)", __FILE__, __LINE__);
        if (host_failed) add_context(st, "(also a host function failed: " + host_msg + ")");
        return st;
    }
    drain_if_safe();
    if (host_failed)
        return fail(host_status, "a host function on the stream failed: %s", host_msg.c_str());
    return FROST_OK;
}

void* CudaBackend::stream_native(void* stream) { return static_cast<CudaStream*>(stream)->handle; }

frost_status CudaBackend::event_create(void** out) {
    FROST_TRY(use_device());
    cudaEvent_t ev = nullptr;
    // Timing-free events are the cheap kind: record and wait without a timestamp write.
    FROST_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    *out = ev;
    return FROST_OK;
}

void CudaBackend::event_destroy(void* event) {
    if (event == nullptr || use_device() != FROST_OK) return;
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
    clear_cuda_error();
}

frost_status CudaBackend::event_record(void* event, void* stream) {
    FROST_TRY(use_device());
    FROST_CUDA_TRY(
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<CudaStream*>(stream)->handle));
    return FROST_OK;
}

frost_status CudaBackend::stream_wait_event(void* stream, void* event) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    // Inside a capture the event was recorded outside it (the front end forbids records during
    // capture), so the wait must become an event-wait node that waits, at each replay, for the
    // event's record as it stands then. The default flag would instead try to join the capture
    // to work that is not part of it.
    const unsigned flags = s->capture ? cudaEventWaitExternal : cudaEventWaitDefault;
    FROST_CUDA_TRY(cudaStreamWaitEvent(s->handle, static_cast<cudaEvent_t>(event), flags));
    return FROST_OK;
}

frost_status CudaBackend::event_sync(void* event) {
    FROST_TRY(use_device());
    FROST_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
    return FROST_OK;
}

frost_status CudaBackend::event_query(void* event, int* done) {
    FROST_TRY(use_device());
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) {
        *done = 1;
        return FROST_OK;
    }
    if (e == cudaErrorNotReady) {
        clear_cuda_error();  // "not yet" is an answer, not an error
        *done = 0;
        return FROST_OK;
    }
    return cuda_fail(e, "cudaEventQuery(event)", __FILE__, __LINE__);
}

}  // namespace frost::exec::cuda
