// The PDL probes (lm_pdl_probe.h).
#include "kernels/cuda/lm_pdl_probe.h"

#include "kernels/cuda/lm_common.cuh"

namespace frost::kernels {
namespace {
using namespace lm;

__device__ inline uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// The trigger comes first, so the dependents may start while this grid still spins; the copies
// come last, so only a dependent's pdl_wait orders its reads after them.
__global__ void late_copy_kernel(const __grid_constant__ LateCopyProbe p) {
    pdl_launch_dependents();
    const uint64_t t0 = global_ns(), wait_ns = static_cast<uint64_t>(p.delay_us) * 1000;
    while (global_ns() - t0 < wait_ns) __nanosleep(1000);
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (const LateCopyProbe::Region& r : p.regions) {
        const int64_t n = static_cast<int64_t>(r.bytes / 16);
        const uint4* src = static_cast<const uint4*>(r.src);
        uint4* dst = static_cast<uint4*>(r.dst);
        for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
    }
}

__global__ void early_read_kernel(const uint32_t* src, uint32_t* out) {
    const uint32_t before = *static_cast<const volatile uint32_t*>(src);
    pdl_wait();
    const uint32_t after = *static_cast<const volatile uint32_t*>(src);
    if (threadIdx.x == 0) {
        out[0] = before;
        out[1] = after;
    }
}

}  // namespace

cudaError_t late_copy_probe_launch(const LateCopyProbe& p, cudaStream_t stream) {
    if (p.delay_us < 0) return cudaErrorInvalidValue;
    for (const LateCopyProbe::Region& r : p.regions)
        if (r.bytes && (!r.dst || !r.src || r.bytes % 16 || !lm::aligned16(r.dst) || !lm::aligned16(r.src)))
            return cudaErrorInvalidValue;
    // A few blocks per SM's worth of copying threads at most; the dependents need room beside them.
    late_copy_kernel<<<64, 256, 0, stream>>>(p);
    return cudaGetLastError();
}

cudaError_t early_read_probe_launch(const uint32_t* src, uint32_t* out, cudaStream_t stream) {
    if (!src || !out) return cudaErrorInvalidValue;
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return cudaGetLastError();
    return launch_kernel(early_read_kernel, dim3(1), dim3(32), 0, stream, major >= 9, src, out);
}

}  // namespace frost::kernels
