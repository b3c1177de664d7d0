// Helpers for the CUDA kernel tests: device presence, RAII device arrays with NaN poisoning,
// host bf16 rounding, fresh random inputs and relative L2 error. Only in CUDA builds.
#pragma once
#if FROST_WITH_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/lm_params.h"

namespace frost::test {

bool cuda_device_present();

#define FROST_SKIP_WITHOUT_CUDA() \
    if (!::frost::test::cuda_device_present()) GTEST_SKIP() << "no CUDA device"
#define CUDA_OK(expr)                                                             \
    do {                                                                          \
        const cudaError_t err_ = (expr);                                          \
        ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
    } while (0)

uint16_t f2bf(float f);    // round to nearest even
float bf2f(uint16_t b);
inline float round_bf(float f) { return bf2f(f2bf(f)); }

// A generator seeded from std::random_device; the seed is printed so a failure can be replayed.
std::mt19937 fresh_rng(const char* what);
std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi, bool bf16_round = true);
std::vector<uint16_t> to_bf(const std::vector<float>& v);
std::vector<float> from_bf(const std::vector<uint16_t>& v);

// ||got - ref|| / ||ref||; infinite when got holds a NaN or Inf.
double rel_l2(const std::vector<double>& ref, const std::vector<float>& got);

template <class T>
class Dev {
public:
    explicit Dev(size_t n) : n_(n) {
        if (cudaMalloc(&p_, n * sizeof(T)) != cudaSuccess) p_ = nullptr;
        poison();
    }
    Dev(const std::vector<T>& host) : Dev(host.size()) { upload(host); }
    ~Dev() { cudaFree(p_); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;
    T* get() const { return p_; }
    size_t size() const { return n_; }
    // Both complete before they return: cudaMemset, and the DMA of a pageable cudaMemcpy, run on
    // the legacy default stream, which a kernel on a cudaStreamNonBlocking stream does not wait
    // for (a poison landing after such a kernel's writes failed a bitwise test once, H100).
    void poison() {  // NaN as f32 and as bf16
        cudaMemset(p_, 0xFF, n_ * sizeof(T));
        cudaDeviceSynchronize();
    }
    void upload(const std::vector<T>& h) {
        cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
        cudaDeviceSynchronize();
    }
    std::vector<T> download() const {
        std::vector<T> h(n_);
        cudaDeviceSynchronize();
        cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
        return h;
    }

private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

inline kernels::bf16* bf(const Dev<uint16_t>& d) { return reinterpret_cast<kernels::bf16*>(d.get()); }

}  // namespace frost::test
#endif
