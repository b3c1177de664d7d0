// One-launch device-to-device copy batches (cuda_copy_batch.cu), used by CudaBackend::copy_batch.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace frost::exec::cuda {

constexpr int kCopyBatchOpsPerLaunch = 128;

struct CopyRun {
    void* dst;        // [bytes] device memory
    const void* src;  // [bytes] device memory, overlapping no other op's dst
    size_t bytes;
};

// Enqueues ceil(n / 128) launches on `stream`; returns the first launch error.
cudaError_t launch_copy_batch(const CopyRun* ops, size_t n, cudaStream_t stream);

}  // namespace frost::exec::cuda
