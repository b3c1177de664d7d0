// A small fixed thread pool for the CPU reference kernels. Work is split into static contiguous
// ranges, so which thread computes an output never changes its value: every kernel keeps one
// fixed summation order per output element, whatever the thread count.
#pragma once
#include <cstdint>
#include <functional>

namespace frost::kernels::cpu {

// Runs fn(lo, hi) over [0, n) split into at most `threads()` contiguous ranges of at least
// `grain` items; the caller's thread takes part. Calls from several threads are serialised;
// a call made from inside a running fn runs inline.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Number of threads parallel_for uses (hardware concurrency unless set).
int threads();
// Sets the thread count for later calls (>= 1); used by benches and tests.
void set_threads(int n);

}  // namespace frost::kernels::cpu
