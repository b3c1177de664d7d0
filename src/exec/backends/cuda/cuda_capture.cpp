// The cuda backend's graphs: stream capture (thread-local mode, so other threads may keep
// allocating and synchronising their own streams), one instantiation per variant, replay with a
// single cudaGraphLaunch. A capture that CUDA invalidated (an illegal call inside the record
// callback) comes back as an error and leaves the stream out of capture mode and usable.
#include <new>

#include "exec/backends/cuda/cuda_backend.h"
#include "exec/backends/cuda/cuda_check.h"

namespace frost::exec::cuda {

frost_status CudaBackend::capture_begin(void* stream) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    if (s->capture) return fail(FROST_ERR_STATE, "cuda backend: the stream is already capturing");
    std::shared_ptr<CaptureStore> store;
    try {
        store = std::make_shared<CaptureStore>(reaper_);
    } catch (const std::bad_alloc&) {
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory starting a capture");
    }
    FROST_CUDA_TRY(cudaStreamBeginCapture(s->handle, cudaStreamCaptureModeThreadLocal));
    s->capture = std::move(store);
    ++t_captures_on_thread;
    return FROST_OK;
}

frost_status CudaBackend::capture_end(void* stream, bool keep, void** variant) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    if (!s->capture) return fail(FROST_ERR_STATE, "cuda backend: the stream is not capturing");
    std::shared_ptr<CaptureStore> store = std::move(s->capture);
    s->capture.reset();
    --t_captures_on_thread;

    cudaGraph_t graph = nullptr;
    // EndCapture takes the stream out of capture mode even when the capture was invalidated;
    // it then returns an error and no graph.
    const cudaError_t end = cudaStreamEndCapture(s->handle, &graph);
    if (!keep) {
        if (graph != nullptr) (void)cudaGraphDestroy(graph);
        clear_cuda_error();  // the record callback's failure is the error the caller reports
        return FROST_OK;
    }
    if (end != cudaSuccess || graph == nullptr) {
        if (graph != nullptr) (void)cudaGraphDestroy(graph);
        const cudaError_t e = end != cudaSuccess ? end : cudaErrorStreamCaptureInvalidated;
        return cuda_fail(e,
                         "cudaStreamEndCapture(stream, &graph) (an operation inside the record "
                         "callback is not permitted during stream capture)",
                         __FILE__, __LINE__);
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    if (e != cudaSuccess) {
        (void)cudaGraphDestroy(graph);
        return cuda_fail(e, "cudaGraphInstantiateWithFlags(&exec, graph, 0)", __FILE__, __LINE__);
    }
    // Upload now so the first replay does not pay for moving the graph to the device.
    e = cudaGraphUpload(exec, s->handle);
    CudaVariant* v = e == cudaSuccess ? new (std::nothrow) CudaVariant() : nullptr;
    if (v == nullptr) {
        (void)cudaGraphExecDestroy(exec);
        (void)cudaGraphDestroy(graph);
        if (e != cudaSuccess)
            return cuda_fail(e, "cudaGraphUpload(exec, stream)", __FILE__, __LINE__);
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory storing a variant");
    }
    v->graph = graph;
    v->exec = exec;
    if (!store->empty()) v->store = std::move(store);
    *variant = v;
    return FROST_OK;
}

frost_status CudaBackend::replay(void* variant, void* stream) {
    CudaVariant* v = static_cast<CudaVariant*>(variant);
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    FROST_CUDA_TRY(cudaGraphLaunch(v->exec, s->handle));
    if (!v->store || v->store->calls.empty()) return FROST_OK;
    // The variant's host nodes report failures to its store. A host function after the launch
    // forwards them to this stream (where the caller's sync looks) and holds a reference to the
    // store, so evicting the variant while this replay is in flight cannot free the payloads
    // its host nodes are about to read.
    HostCall* forward = host_call_new(nullptr, 0);
    frost_status st = FROST_OK;
    if (forward == nullptr) {
        st = fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory after a replay");
    } else {
        forward->source = v->store;
        st = enqueue_host(s, forward);  // frees `forward` itself on failure
    }
    if (st == FROST_OK) return FROST_OK;
    // The graph is already launched; wait for it rather than leave its payloads unprotected.
    if (!s->capture) (void)cudaStreamSynchronize(s->handle);
    clear_cuda_error();
    return st;
}

void CudaBackend::variant_destroy(void* variant) {
    CudaVariant* v = static_cast<CudaVariant*>(variant);
    if (v == nullptr) return;
    if (use_device() == FROST_OK) {
        // An executable graph destroyed while in flight is freed by CUDA when it completes;
        // the store lives on through the forwarding host call of each in-flight replay.
        (void)cudaGraphExecDestroy(v->exec);
        (void)cudaGraphDestroy(v->graph);
        clear_cuda_error();
    }
    delete v;
}

}  // namespace frost::exec::cuda
