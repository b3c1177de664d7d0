// Server metrics, updated lock-free by the engine and HTTP threads and rendered as Prometheus
// text on GET /metrics: queue depth, TTFT histogram, tokens/s, capsule bytes per tier,
// prefix hits/misses, restore latency.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "serve/timings.h"

namespace frost::serve {

class Histogram {
public:
    // Sub-millisecond buckets too: server-side phases (plan, store, emit) live there.
    static constexpr std::array<double, 15> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                       0.25,   0.5,   1.0,    2.5,   5.0,  10.0,  30.0};
    void observe(double seconds);
    std::string render(const std::string& name, const std::string& help) const;
    // Only the sample lines (`name_bucket{labels,le=..}`, `_sum`, `_count`): one series of a
    // labelled family whose HELP/TYPE the caller writes once. `labels` like `phase="plan"`.
    std::string render_series(const std::string& name, const std::string& labels) const;

private:
    std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // last = +Inf
    std::atomic<uint64_t> count_{0};
    std::atomic<uint64_t> sum_us_{0};
};

struct Metrics {
    std::atomic<uint64_t> requests_total{0};
    std::atomic<uint64_t> rejected_queue_full{0};
    std::atomic<uint64_t> rejected_draining{0};
    std::atomic<uint64_t> rejected_key_limit{0};
    std::atomic<uint64_t> errors_total{0};
    // Exceptions caught where a request is handled (T33): the heap refused an allocation
    // (std::bad_alloc), or anything else escaped. Each failed one request, not the server.
    std::atomic<uint64_t> out_of_memory_total{0};
    std::atomic<uint64_t> exceptions_total{0};
    std::atomic<uint64_t> cancelled_total{0};
    // The HTTP layer's connections (T12): open now; closed to make room for a new one at the
    // cap (the longest waiting for a request); refused with 503 at the cap; accept(2) paused
    // because no descriptor was left.
    std::atomic<uint64_t> connections_open{0};
    std::atomic<uint64_t> connections_evicted{0};
    std::atomic<uint64_t> connections_refused{0};
    std::atomic<uint64_t> accept_pauses{0};
    std::atomic<uint64_t> queue_depth{0};
    std::atomic<uint64_t> active_requests{0};
    std::atomic<uint64_t> prompt_tokens_total{0};
    std::atomic<uint64_t> cached_tokens_total{0};
    std::atomic<uint64_t> generated_tokens_total{0};
    std::atomic<uint64_t> decode_us_total{0};   // engine time spent in decode steps
    std::atomic<uint64_t> decode_steps_total{0};  // batched decode steps (one per scheduler round)
    std::atomic<uint64_t> decode_rows_total{0};   // streams advanced by them (rows / steps = mean batch)
    std::atomic<uint64_t> prefix_hits{0};       // append or restore
    std::atomic<uint64_t> prefix_misses{0};     // rebuild
    std::atomic<uint64_t> capsule_bytes[3] = {0, 0, 0};  // device, host, disk
    std::atomic<uint64_t> capsules{0};
    // The engine's memory (EngineIface::memory; has_memory once it answered): its buffers per
    // frost_space (device, host pinned, host), live buffers and graphs; on a GPU (has_device) the
    // device's used / total bytes as the driver reports them.
    std::atomic<bool> has_memory{false};
    std::atomic<uint64_t> buffer_bytes[3] = {0, 0, 0};
    std::atomic<uint64_t> live_buffers{0};
    std::atomic<uint64_t> live_graphs{0};
    std::atomic<bool> has_device{false};
    std::atomic<uint64_t> device_used{0};
    std::atomic<uint64_t> device_total{0};
    Histogram ttft;  // the request's arrival (its body read) -> choice 0's first sampled token
    Histogram itl;   // between consecutive sampled tokens of one choice (engine thread)
    Histogram e2e;   // arrival -> the connection picked up the request's last event
    Histogram restore_latency;
    // Per-request phase timings (timings.h), observed when choice 0's Finish is picked up.
    std::array<Histogram, kPhaseCount> phase;
    Histogram deferred_store;
    void observe_phases(const PhaseTimes& t);

    std::string render() const;
};

}  // namespace frost::serve
