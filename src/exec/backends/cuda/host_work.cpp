// Host work on CUDA streams (see host_work.h): payload layout, sticky errors, the trampoline that
// CUDA calls on its callback thread, and deferred freeing of pinned staging memory. Nothing
// reachable from run_host_call calls the CUDA API (CUDA forbids it inside host functions).
#include "exec/backends/cuda/host_work.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "exec/error.h"

namespace frost::exec::cuda {

namespace {

// The argument bytes follow the header at this offset, so they are aligned for any scalar type
// (malloc's guarantee), as a caller casting them back to its struct expects.
constexpr size_t kArgsOffset = (sizeof(HostCall) + alignof(std::max_align_t) - 1) /
                               alignof(std::max_align_t) * alignof(std::max_align_t);

}  // namespace

void StickyError::set(frost_status s, const char* msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.load(std::memory_order_relaxed) != FROST_OK) return;
    try {
        msg_ = msg;
    } catch (...) {
        msg_.clear();  // keep the status even when the message cannot be stored
    }
    status_.store(s, std::memory_order_release);
}

bool StickyError::take(frost_status* s, std::string* msg) {
    if (status_.load(std::memory_order_acquire) == FROST_OK) return false;
    std::lock_guard<std::mutex> lock(mu_);
    *s = static_cast<frost_status>(status_.load(std::memory_order_relaxed));
    msg->swap(msg_);
    msg_.clear();
    status_.store(FROST_OK, std::memory_order_relaxed);
    return true;
}

void StickyError::move_to(StickyError& dst) {
    frost_status s = FROST_OK;
    std::string msg;
    if (take(&s, &msg)) dst.set(s, msg.c_str());
}

PinnedReaper::~PinnedReaper() { drain(); }

void PinnedReaper::defer(void* pinned) {
    std::lock_guard<std::mutex> lock(mu_);
    try {
        pending_.push_back(pinned);
    } catch (...) {
        // Out of host memory for one pointer: leaking one staging block beats freeing pinned
        // memory from a context where CUDA calls are forbidden.
    }
}

void PinnedReaper::drain() {
    std::vector<void*> todo;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (pending_.empty()) return;
        todo.swap(pending_);
    }
    for (void* p : todo) (void)cudaFreeHost(p);
    (void)cudaGetLastError();
}

void* HostCall::args() {
    return args_bytes ? reinterpret_cast<unsigned char*>(this) + kArgsOffset : nullptr;
}

void HostCallDeleter::operator()(HostCall* c) const {
    if (c == nullptr) return;
    c->~HostCall();
    std::free(c);
}

HostCall* host_call_new(const void* args, size_t args_bytes) {
    void* mem = std::malloc(kArgsOffset + args_bytes);
    if (mem == nullptr) return nullptr;
    HostCall* c = new (mem) HostCall();
    c->args_bytes = args_bytes;
    if (args != nullptr && args_bytes > 0) std::memcpy(c->args(), args, args_bytes);
    return c;
}

CaptureStore::~CaptureStore() {
    for (void* p : staging) reaper->defer(p);
}

void CUDART_CB run_host_call(void* payload) {
    HostCall* c = static_cast<HostCall*>(payload);
    if (c->fn != nullptr) {
        // The message of a failure is whatever the fn left on this (CUDA's) thread; start clean
        // so a stale message from an earlier callback is never reported as this one's.
        frost_clear_error();
        const frost_status s = c->fn(c->args());
        if (s != FROST_OK) {
            const char* msg = frost_last_error();
            c->sink->set(s, msg[0] != '\0' ? msg : frost_status_name(s));
        }
    } else if (c->source != nullptr) {
        c->source->errors.move_to(*c->sink);
    }
    if (!c->owned_by_capture) HostCallDeleter{}(c);
}

}  // namespace frost::exec::cuda
