// The cuda backend's stream work: copies, fills and host functions. Every path is stream-ordered
// and capturable. Work that touches only host memory runs as a host function (CUDA performs
// host-to-host copies and memsets of pinned memory synchronously with respect to the host, so
// they could overtake earlier work on the stream), and device <-> pageable copies in a capture are
// staged through pinned memory the variant owns (see the CUDA runtime API's "API
// synchronization behavior" section for why pageable copies are not plain async nodes).
#include <cstring>
#include <new>
#include <vector>

#include "exec/backends/cuda/cuda_backend.h"
#include "exec/backends/cuda/cuda_check.h"
#include "exec/backends/cuda/cuda_copy_batch.h"

namespace frost::exec::cuda {

namespace {

struct HostCopyArgs {
    void* dst;        // [bytes] host memory
    const void* src;  // [bytes] host memory
    size_t bytes;
};

frost_status host_copy(const void* args) {
    const auto* a = static_cast<const HostCopyArgs*>(args);
    std::memmove(a->dst, a->src, a->bytes);
    return FROST_OK;
}

struct HostFillArgs {
    void* dst;  // [bytes] host memory
    size_t bytes;
    uint8_t value;
};

frost_status host_fill(const void* args) {
    const auto* a = static_cast<const HostFillArgs*>(args);
    std::memset(a->dst, a->value, a->bytes);
    return FROST_OK;
}

bool is_host(frost_space space) { return space != FROST_SPACE_DEVICE; }

}  // namespace

frost_status CudaBackend::enqueue_host(CudaStream* s, HostCall* call) {
    call->sink = s->sink();
    if (!s->capture) {
        const cudaError_t e = cudaLaunchHostFunc(s->handle, run_host_call, call);
        if (e != cudaSuccess) {
            HostCallDeleter{}(call);
            return cuda_fail(e, "cudaLaunchHostFunc(stream, run_host_call, call)", __FILE__,
                             __LINE__);
        }
        return FROST_OK;
    }
    // Captured: the graph node may run any number of times, so the payload belongs to the
    // capture store (then to the variant) instead of being freed after one run.
    call->owned_by_capture = true;
    try {
        s->capture->calls.emplace_back(call);
    } catch (const std::bad_alloc&) {
        HostCallDeleter{}(call);
        return fail(FROST_ERR_OUT_OF_MEMORY,
                    "cuda backend: out of host memory recording a host function");
    }
    const cudaError_t e = cudaLaunchHostFunc(s->handle, run_host_call, call);
    if (e != cudaSuccess) {
        s->capture->calls.pop_back();
        return cuda_fail(e, "cudaLaunchHostFunc(capturing stream, run_host_call, call)", __FILE__,
                         __LINE__);
    }
    return FROST_OK;
}

frost_status CudaBackend::launch_host(void* stream, frost_host_fn fn, const void* args,
                                      size_t args_bytes) {
    FROST_TRY(use_device());
    HostCall* call = host_call_new(args, args_bytes);
    if (call == nullptr)
        return fail(FROST_ERR_OUT_OF_MEMORY,
                    "cuda backend: out of host memory copying %zu bytes of host-function args",
                    args_bytes);
    call->fn = fn;
    return enqueue_host(static_cast<CudaStream*>(stream), call);
}

frost_status CudaBackend::copy(void* stream, void* dst, frost_space dst_space, const void* src,
                               frost_space src_space, size_t bytes) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    if (is_host(dst_space) && is_host(src_space)) {
        const HostCopyArgs a{dst, src, bytes};
        HostCall* call = host_call_new(&a, sizeof a);
        if (call == nullptr)
            return fail(FROST_ERR_OUT_OF_MEMORY,
                        "cuda backend: out of host memory for a host copy");
        call->fn = host_copy;
        return enqueue_host(s, call);
    }
    const bool pageable_src = src_space == FROST_SPACE_HOST;
    const bool pageable_dst = dst_space == FROST_SPACE_HOST;
    if ((pageable_src || pageable_dst) && s->capture)
        return copy_staged_in_capture(s, dst, dst_space, src, bytes);
    if (pageable_src) {
        // A pageable source may be staged by the driver at call time, not in stream order, so
        // host work still queued on the stream (which may write the source) must finish first.
        FROST_CUDA_TRY(cudaStreamSynchronize(s->handle));
    }
    FROST_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->handle));
    return FROST_OK;
}

frost_status CudaBackend::copy_batch(void* stream, const CopyOp* ops, size_t n) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    std::vector<CopyRun> runs;
    try {
        runs.reserve(n);
    } catch (const std::bad_alloc&) {
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory for a copy batch");
    }
    for (size_t i = 0; i < n; ++i) {
        if (ops[i].dst_space == FROST_SPACE_DEVICE && ops[i].src_space == FROST_SPACE_DEVICE)
            runs.push_back({ops[i].dst, ops[i].src, ops[i].bytes});
        else
            FROST_TRY(copy(stream, ops[i].dst, ops[i].dst_space, ops[i].src, ops[i].src_space, ops[i].bytes));
    }
    if (runs.empty()) return FROST_OK;
    FROST_CUDA_TRY(launch_copy_batch(runs.data(), runs.size(), s->handle));
    return FROST_OK;
}

frost_status CudaBackend::copy_staged_in_capture(CudaStream* s, void* dst, frost_space dst_space,
                                                 const void* src, size_t bytes) {
    // Allocating is a "potentially unsafe" call during a thread-local capture; relaxed mode is
    // CUDA's documented way to allow it (the allocation is not part of the graph, only its use).
    void* staging = nullptr;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    FROST_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t e = cudaHostAlloc(&staging, bytes, cudaHostAllocPortable);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaHostAlloc(&staging, bytes) for a captured pageable copy", __FILE__,
                         __LINE__);
    try {
        s->capture->staging.push_back(staging);
    } catch (const std::bad_alloc&) {
        reaper_->defer(staging);  // freed at the next safe point, outside this capture
        return fail(FROST_ERR_OUT_OF_MEMORY,
                    "cuda backend: out of host memory recording a staged copy");
    }
    if (dst_space == FROST_SPACE_HOST) {
        // device -> staging (DMA node), then staging -> pageable (host node).
        FROST_CUDA_TRY(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDefault, s->handle));
        const HostCopyArgs a{dst, staging, bytes};
        HostCall* call = host_call_new(&a, sizeof a);
        if (call == nullptr)
            return fail(FROST_ERR_OUT_OF_MEMORY,
                        "cuda backend: out of host memory for a staged copy");
        call->fn = host_copy;
        return enqueue_host(s, call);
    }
    // pageable -> staging (host node), then staging -> device (DMA node).
    const HostCopyArgs a{staging, src, bytes};
    HostCall* call = host_call_new(&a, sizeof a);
    if (call == nullptr)
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory for a staged copy");
    call->fn = host_copy;
    FROST_TRY(enqueue_host(s, call));
    FROST_CUDA_TRY(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyDefault, s->handle));
    return FROST_OK;
}

frost_status CudaBackend::fill(void* stream, void* dst, frost_space space, uint8_t value,
                               size_t bytes) {
    CudaStream* s = static_cast<CudaStream*>(stream);
    FROST_TRY(use_device());
    if (space == FROST_SPACE_DEVICE) {
        FROST_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, s->handle));
        return FROST_OK;
    }
    const HostFillArgs a{dst, bytes, value};
    HostCall* call = host_call_new(&a, sizeof a);
    if (call == nullptr)
        return fail(FROST_ERR_OUT_OF_MEMORY, "cuda backend: out of host memory for a host fill");
    call->fn = host_fill;
    return enqueue_host(s, call);
}

}  // namespace frost::exec::cuda
