// Device-to-device copies of a batch in ONE kernel launch: the op table travels as a kernel
// parameter (no upload, no extra stream work), every block strides over every op's 16-byte
// vectors. A capsule restore moves ~50 small state buffers plus a few large KV runs; as separate
// cudaMemcpyAsync calls each small one costs a launch and a gap on the GPU.
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/backends/cuda/cuda_copy_batch.h"

namespace frost::exec::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;
constexpr int kUnroll = 4;  // 16-byte loads in flight per thread per step

struct BatchArgs {  // 128 ops x 24 B + 4 B: inside the classic 4 KiB kernel-parameter limit
    const uint8_t* src[kCopyBatchOpsPerLaunch];
    uint8_t* dst[kCopyBatchOpsPerLaunch];
    uint64_t bytes[kCopyBatchOpsPerLaunch];
    int n;
};

__global__ void __launch_bounds__(kThreads) copy_batch_kernel(BatchArgs a) {
    const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
    for (int op = 0; op < a.n; ++op) {
        const uint8_t* src = a.src[op];
        uint8_t* dst = a.dst[op];
        const uint64_t bytes = a.bytes[op];
        const bool aligned = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0;
        const uint64_t vecs = aligned ? bytes / 16 : 0;
        const uint4* s4 = reinterpret_cast<const uint4*>(src);
        uint4* d4 = reinterpret_cast<uint4*>(dst);
        uint64_t v = tid;
        for (; v + (kUnroll - 1) * stride < vecs; v += kUnroll * stride) {
            uint4 r[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) r[u] = s4[v + u * stride];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) d4[v + u * stride] = r[u];
        }
        for (; v < vecs; v += stride) d4[v] = s4[v];
        for (uint64_t b = vecs * 16 + tid; b < bytes; b += stride) dst[b] = src[b];
    }
}

}  // namespace

cudaError_t launch_copy_batch(const CopyRun* ops, size_t n, cudaStream_t stream) {
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return e;
    for (size_t first = 0; first < n; first += kCopyBatchOpsPerLaunch) {
        BatchArgs a{};
        a.n = static_cast<int>(n - first < size_t(kCopyBatchOpsPerLaunch) ? n - first : kCopyBatchOpsPerLaunch);
        for (int i = 0; i < a.n; ++i) {
            a.src[i] = static_cast<const uint8_t*>(ops[first + i].src);
            a.dst[i] = static_cast<uint8_t*>(ops[first + i].dst);
            a.bytes[i] = ops[first + i].bytes;
        }
        copy_batch_kernel<<<sms * kBlocksPerSm, kThreads, 0, stream>>>(a);
        e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

}  // namespace frost::exec::cuda
