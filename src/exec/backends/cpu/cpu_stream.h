// CPU backend streams and events. A stream is one worker thread draining a FIFO of tasks, so it
// behaves like a CUDA stream: in order on one stream, unordered across streams. Progress is a
// pair of counters (tasks enqueued / completed); an event is a (stream, enqueued-count) point,
// complete once that stream's completed-count reaches it, which is all a cross-stream wait needs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "frost/exec.h"

namespace frost::exec::cpu {

using Task = std::function<frost_status()>;

struct EventState;

// One recorded step of a captured variant: either work, or a wait on an event that is resolved
// to the event's recorded point when the variant is replayed.
struct Item {
    Task run;
    std::shared_ptr<EventState> wait_on;
};

struct Variant {
    std::vector<Item> items;
};

class StreamState {
public:
    StreamState();  // one worker thread, whatever the stream's priority (exec.h: the API holds the value)
    ~StreamState();  // drains the queue, then joins the worker
    StreamState(const StreamState&) = delete;
    StreamState& operator=(const StreamState&) = delete;

    // Enqueues t and returns its sequence number (1-based).
    uint64_t enqueue(Task t);
    uint64_t enqueued();
    bool reached(uint64_t seq);
    void wait_until(uint64_t seq);
    // Waits for everything enqueued so far, then returns and clears the sticky error.
    frost_status sync();

    // Capture mode: work is appended to `captured` instead of the queue.
    bool capturing = false;  // touched only by the (single) thread feeding this stream
    std::vector<Item> captured;

private:
    void worker_loop();

    std::mutex mu_;
    std::condition_variable work_cv_;  // worker waits for tasks
    std::condition_variable done_cv_;  // waiters for completion of a sequence number
    std::deque<Task> queue_;
    uint64_t enqueued_ = 0;
    uint64_t completed_ = 0;
    bool stop_ = false;
    frost_status sticky_ = FROST_OK;
    std::string sticky_msg_;
    std::thread worker_;
};

// The point an event marks: `seq` tasks of `stream` (null when never recorded).
struct EventState {
    std::mutex mu;
    std::shared_ptr<StreamState> stream;
    uint64_t seq = 0;
};

// Returns a task that blocks until `ev`'s current recorded point has completed (resolved now).
Task make_wait_task(EventState& ev);

}  // namespace frost::exec::cpu
