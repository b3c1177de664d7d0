// The CPU backend: the reference that model code runs on. "Device" and "pinned" memory are
// 256-byte-aligned host memory; streams are worker threads (cpu_stream.h); capture appends the
// closures a stream would have run to a list, and replay enqueues that list as one task.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "exec/backend.h"
#include "exec/backends/cpu/cpu_stream.h"
#include "exec/error.h"

namespace frost::exec {

namespace {

using cpu::EventState;
using cpu::Item;
using cpu::StreamState;
using cpu::Task;
using cpu::Variant;

constexpr size_t kAlignment = 256;  // the contract promises at least 256-byte alignment

struct CpuStream {
    std::shared_ptr<StreamState> state;
};
struct CpuEvent {
    std::shared_ptr<EventState> state;
};
struct CpuVariant {
    std::shared_ptr<const Variant> v;
};

StreamState& st(void* stream) { return *static_cast<CpuStream*>(stream)->state; }

class CpuBackend final : public Backend {
public:
    frost_backend kind() const override { return FROST_BACKEND_CPU; }

    frost_status alloc(frost_space, size_t bytes, void** out) override {
        if (bytes > SIZE_MAX - kAlignment)
            return fail(FROST_ERR_OUT_OF_MEMORY, "cpu alloc of %zu bytes: size overflows", bytes);
        const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
        void* p = std::aligned_alloc(kAlignment, rounded);
        if (!p) return fail(FROST_ERR_OUT_OF_MEMORY, "cpu alloc of %zu bytes failed", bytes);
        *out = p;
        return FROST_OK;
    }
    void free(frost_space, void* ptr) override { std::free(ptr); }

    frost_status stream_create(int /*priority: recorded by the API; cpu streams do not schedule by it*/, void** out) override {
        *out = new CpuStream{std::make_shared<StreamState>()};
        return FROST_OK;
    }
    void stream_destroy(void* stream) override { delete static_cast<CpuStream*>(stream); }
    frost_status stream_sync(void* stream) override { return st(stream).sync(); }
    void* stream_native(void*) override { return nullptr; }

    frost_status event_create(void** out) override {
        *out = new CpuEvent{std::make_shared<EventState>()};
        return FROST_OK;
    }
    void event_destroy(void* event) override { delete static_cast<CpuEvent*>(event); }
    frost_status event_record(void* event, void* stream) override {
        EventState& ev = *static_cast<CpuEvent*>(event)->state;
        auto& s = static_cast<CpuStream*>(stream)->state;
        const uint64_t seq = s->enqueued();
        std::lock_guard<std::mutex> lock(ev.mu);
        ev.stream = s;
        ev.seq = seq;
        return FROST_OK;
    }
    frost_status stream_wait_event(void* stream, void* event) override {
        auto& ev = static_cast<CpuEvent*>(event)->state;
        StreamState& s = st(stream);
        if (s.capturing) {
            s.captured.push_back(Item{nullptr, ev});
            return FROST_OK;
        }
        s.enqueue(cpu::make_wait_task(*ev));
        return FROST_OK;
    }
    frost_status event_sync(void* event) override {
        cpu::make_wait_task(*static_cast<CpuEvent*>(event)->state)();
        return FROST_OK;
    }
    frost_status event_query(void* event, int* done) override {
        EventState& ev = *static_cast<CpuEvent*>(event)->state;
        std::shared_ptr<StreamState> s;
        uint64_t seq;
        {
            std::lock_guard<std::mutex> lock(ev.mu);
            s = ev.stream;
            seq = ev.seq;
        }
        *done = (!s || s->reached(seq)) ? 1 : 0;
        return FROST_OK;
    }

    frost_status copy(void* stream, void* dst, frost_space, const void* src, frost_space,
                      size_t bytes) override {
        return submit(stream, [dst, src, bytes] {
            std::memcpy(dst, src, bytes);
            return FROST_OK;
        });
    }
    frost_status fill(void* stream, void* dst, frost_space, uint8_t value, size_t bytes) override {
        return submit(stream, [dst, value, bytes] {
            std::memset(dst, value, bytes);
            return FROST_OK;
        });
    }
    frost_status launch_host(void* stream, frost_host_fn fn, const void* args,
                             size_t args_bytes) override {
        // max_align_t storage so fn may read args as any struct.
        auto copy = std::make_shared<std::vector<std::max_align_t>>(
            (args_bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
        if (args_bytes) std::memcpy(copy->data(), args, args_bytes);
        return submit(stream, [fn, copy] { return fn(copy->empty() ? nullptr : copy->data()); });
    }

    frost_status capture_begin(void* stream) override {
        StreamState& s = st(stream);
        s.capturing = true;
        s.captured.clear();
        return FROST_OK;
    }
    frost_status capture_end(void* stream, bool keep, void** variant) override {
        StreamState& s = st(stream);
        s.capturing = false;
        std::vector<Item> items = std::move(s.captured);
        s.captured.clear();
        *variant = nullptr;
        if (keep) *variant = new CpuVariant{std::make_shared<const Variant>(Variant{std::move(items)})};
        return FROST_OK;
    }
    frost_status replay(void* variant, void* stream) override {
        const std::shared_ptr<const Variant>& v = static_cast<CpuVariant*>(variant)->v;
        StreamState& s = st(stream);
        if (s.capturing) {  // replay inside a capture: the outer variant gets a copy of the steps
            s.captured.insert(s.captured.end(), v->items.begin(), v->items.end());
            return FROST_OK;
        }
        // Waits resolve to their event's point now, exactly as a direct wait enqueued here would.
        // A variant without waits is shared as is (the hot case: no per-replay copies).
        bool has_wait = false;
        for (const Item& it : v->items) has_wait = has_wait || it.wait_on != nullptr;
        if (!has_wait) {
            s.enqueue([v] { return run_steps(v->items, [](const Item& it) -> const Task& { return it.run; }); });
            return FROST_OK;
        }
        std::vector<Task> steps;
        steps.reserve(v->items.size());
        for (const Item& it : v->items) steps.push_back(it.wait_on ? cpu::make_wait_task(*it.wait_on) : it.run);
        s.enqueue([steps = std::move(steps)] {
            return run_steps(steps, [](const Task& t) -> const Task& { return t; });
        });
        return FROST_OK;
    }
    void variant_destroy(void* variant) override { delete static_cast<CpuVariant*>(variant); }

private:
    // Runs every step in order (a failing step does not stop the rest, as on a stream); returns
    // the first failure with its message.
    template <class Steps, class Get>
    static frost_status run_steps(const Steps& steps, Get get) {
        frost_status first = FROST_OK;
        std::string first_msg;
        for (const auto& step : steps) {
            const frost_status r = get(step)();
            if (r != FROST_OK && first == FROST_OK) {
                first = r;
                first_msg = last_error();
            }
        }
        if (first != FROST_OK) set_last_error(first_msg);
        return first;
    }

    static frost_status submit(void* stream, Task t) {
        StreamState& s = st(stream);
        if (s.capturing)
            s.captured.push_back(Item{std::move(t), nullptr});
        else
            s.enqueue(std::move(t));
        return FROST_OK;
    }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace frost::exec
