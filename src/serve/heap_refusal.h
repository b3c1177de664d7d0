// What the server does when the host heap refuses an allocation (design/reliability.md T33):
// std::bad_alloc fails the request it happened in, never the process. The error paths allocate
// too (an event, its message, a reply), so they retry for a while: other requests finishing give
// memory back. Only when even that keeps failing does the exception leave, and the process ends
// as it did before this existed.
#pragma once
#include <chrono>
#include <new>
#include <thread>

namespace frost::serve {

constexpr int kHeapRetries = 1000;                         // ~1 s of refusals in a row
constexpr std::chrono::milliseconds kHeapRetryWait{1};

// Runs fn() until it returns without std::bad_alloc, at most kHeapRetries + 1 times.
template <class F>
void retry_while_heap_refuses(F&& fn) {
    for (int attempt = 0;; ++attempt) {
        try {
            fn();
            return;
        } catch (const std::bad_alloc&) {
            if (attempt >= kHeapRetries) throw;
            std::this_thread::sleep_for(kHeapRetryWait);
        }
    }
}

}  // namespace frost::serve
