// Worker-thread streams of the CPU backend (see cpu_stream.h). A task returning non-OK sets the
// stream's sticky error (first one wins, with the message the task left on the worker thread);
// later tasks still run, as later kernels do on CUDA after a host-node failure is recorded.
#include "exec/backends/cpu/cpu_stream.h"

#include <new>

#include "exec/error.h"

namespace frost::exec::cpu {

StreamState::StreamState() {
    worker_ = std::thread([this] { worker_loop(); });
}

StreamState::~StreamState() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
}

uint64_t StreamState::enqueue(Task t) {
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(t));
        seq = ++enqueued_;
    }
    work_cv_.notify_one();
    return seq;
}

uint64_t StreamState::enqueued() {
    std::lock_guard<std::mutex> lock(mu_);
    return enqueued_;
}

bool StreamState::reached(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    return completed_ >= seq;
}

void StreamState::wait_until(uint64_t seq) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return completed_ >= seq; });
}

frost_status StreamState::sync() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = enqueued_;
    done_cv_.wait(lock, [&] { return completed_ >= target; });
    const frost_status st = sticky_;
    const std::string msg = std::move(sticky_msg_);
    sticky_ = FROST_OK;
    sticky_msg_.clear();
    lock.unlock();
    if (st == FROST_OK) return FROST_OK;
    return fail(st, "asynchronous error on a cpu stream: %s", msg.c_str());
}

void StreamState::worker_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop requested and drained
        Task t = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        frost_clear_error();
        frost_status st;
        try {
            st = t();
        } catch (const std::bad_alloc&) {
            st = fail(FROST_ERR_OUT_OF_MEMORY, "a task on a cpu stream ran out of host memory");
        } catch (...) {
            st = fail(FROST_ERR_BACKEND, "a task on a cpu stream threw an exception");
        }
        std::string msg = st == FROST_OK ? std::string() : last_error();
        t = nullptr;  // release captured state before reporting completion
        lock.lock();
        if (st != FROST_OK && sticky_ == FROST_OK) {
            sticky_ = st;
            sticky_msg_ = msg.empty() ? std::string(frost_status_name(st)) + " (no message)" : msg;
        }
        ++completed_;
        done_cv_.notify_all();
    }
}

Task make_wait_task(EventState& ev) {
    std::shared_ptr<StreamState> target;
    uint64_t seq = 0;
    {
        std::lock_guard<std::mutex> lock(ev.mu);
        target = ev.stream;
        seq = ev.seq;
    }
    if (!target) return [] { return FROST_OK; };  // never recorded: a no-op, as in CUDA
    return [target, seq] {
        target->wait_until(seq);
        return FROST_OK;
    };
}

}  // namespace frost::exec::cpu
