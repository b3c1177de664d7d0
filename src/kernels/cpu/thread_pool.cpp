// Fixed worker pool behind parallel_for: workers sleep on a condition variable, each parallel
// call publishes one job (function + range count) and waits until every range has finished.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace frost::kernels::cpu {
namespace {

thread_local bool t_inside_pool_job = false;

class Pool {
public:
    explicit Pool(int n) { resize(n); }
    ~Pool() { stop_workers(); }

    int size() const { return n_threads_; }

    void resize(int n) {
        std::lock_guard<std::mutex> call_lock(call_mu_);
        stop_workers();
        n_threads_ = std::max(1, n);
        stop_ = false;
        // New workers start at the current generation, so a job posted before they existed
        // (already finished) is never mistaken for a new one.
        const uint64_t gen = generation_;
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i, gen] { worker(i, gen); });
    }

    void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
        if (n <= 0) return;
        int64_t parts = std::min<int64_t>(n_threads_, (n + grain - 1) / std::max<int64_t>(grain, 1));
        if (parts <= 1 || t_inside_pool_job) {
            fn(0, n);
            return;
        }
        std::lock_guard<std::mutex> call_lock(call_mu_);
        {
            std::lock_guard<std::mutex> lk(mu_);
            job_ = &fn;
            job_n_ = n;
            job_parts_ = parts;
            pending_ = static_cast<int>(parts) - 1;
            ++generation_;
        }
        cv_.notify_all();
        t_inside_pool_job = true;
        run_part(0);
        t_inside_pool_job = false;
        std::unique_lock<std::mutex> lk(mu_);
        done_cv_.wait(lk, [this] { return pending_ == 0; });
        job_ = nullptr;
        if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    }

private:
    // A part that throws (std::bad_alloc from a kernel's scratch when the heap refuses) must not
    // end a worker thread, which terminates the process, nor let the caller return while other
    // parts still run fn: the first exception is kept and rethrown by run() after every part.
    void run_part(int64_t part) {
        int64_t lo = job_n_ * part / job_parts_;
        int64_t hi = job_n_ * (part + 1) / job_parts_;
        if (lo >= hi) return;
        try {
            (*job_)(lo, hi);
        } catch (...) {
            std::lock_guard<std::mutex> lk(mu_);
            if (!failure_) failure_ = std::current_exception();
        }
    }

    void worker(int index, uint64_t seen) {
        t_inside_pool_job = true;
        for (;;) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            if (index >= job_parts_) continue;
            lk.unlock();
            run_part(index);
            lk.lock();
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }

    void stop_workers() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
    }

    std::mutex call_mu_;  // one parallel call at a time
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    std::vector<std::thread> workers_;
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0, job_parts_ = 0;
    int pending_ = 0;
    std::exception_ptr failure_;  // the first exception of the current job's parts (mu_)
    uint64_t generation_ = 0;
    bool stop_ = false;
    int n_threads_ = 1;
};

Pool& pool() {
    static Pool p(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    return p;
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    pool().run(n, grain, fn);
}

int threads() { return pool().size(); }

void set_threads(int n) { pool().resize(n); }

}  // namespace frost::kernels::cpu
