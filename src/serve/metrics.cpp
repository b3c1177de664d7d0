// Prometheus text exposition (format 0.0.4) of Metrics.
#include "serve/metrics.h"

#include <cstdio>

namespace frost::serve {

void Histogram::observe(double seconds) {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(uint64_t(seconds * 1e6), std::memory_order_relaxed);
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
    return "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n" + render_series(name, "");
}

std::string Histogram::render_series(const std::string& name, const std::string& labels) const {
    std::string out;
    const std::string pre = labels.empty() ? "" : labels + ",";
    const std::string sel = labels.empty() ? "" : "{" + labels + "}";
    uint64_t cum = 0;
    char buf[320];
    for (size_t i = 0; i < kBounds.size(); ++i) {
        cum += buckets_[i].load(std::memory_order_relaxed);
        std::snprintf(buf, sizeof(buf), "%s_bucket{%sle=\"%g\"} %llu\n", name.c_str(), pre.c_str(), kBounds[i],
                      (unsigned long long)cum);
        out += buf;
    }
    cum += buckets_[kBounds.size()].load(std::memory_order_relaxed);
    std::snprintf(buf, sizeof(buf), "%s_bucket{%sle=\"+Inf\"} %llu\n%s_sum%s %.6f\n%s_count%s %llu\n",
                  name.c_str(), pre.c_str(), (unsigned long long)cum, name.c_str(), sel.c_str(),
                  double(sum_us_.load()) / 1e6, name.c_str(), sel.c_str(), (unsigned long long)count_.load());
    out += buf;
    return out;
}

void Metrics::observe_phases(const PhaseTimes& t) {
    constexpr double kMsPerSecond = 1000.0;
    for (size_t i = 0; i < kPhaseCount; ++i) phase[i].observe(t.ms[i] / kMsPerSecond);
    deferred_store.observe(t.deferred_store_ms / kMsPerSecond);
}

namespace {
void counter(std::string& out, const char* name, const char* type, const char* help, double v) {
    char buf[320];
    std::snprintf(buf, sizeof(buf), "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
    out += buf;
}
}  // namespace

std::string Metrics::render() const {
    std::string out;
    counter(out, "frost_requests_total", "counter", "Generation requests received", double(requests_total.load()));
    counter(out, "frost_rejected_queue_full_total", "counter", "Requests refused with 503 because the queue was full",
            double(rejected_queue_full.load()));
    counter(out, "frost_rejected_draining_total", "counter", "Requests refused during shutdown",
            double(rejected_draining.load()));
    counter(out, "frost_rejected_key_limit_total", "counter", "Requests refused with 429 by the per-key limit",
            double(rejected_key_limit.load()));
    counter(out, "frost_errors_total", "counter", "Requests that ended with an error", double(errors_total.load()));
    counter(out, "frost_out_of_memory_total", "counter",
            "Requests failed because the host heap refused an allocation (the server went on)",
            double(out_of_memory_total.load()));
    counter(out, "frost_exceptions_total", "counter", "Other exceptions caught while handling a request",
            double(exceptions_total.load()));
    counter(out, "frost_cancelled_total", "counter", "Requests cancelled by client disconnect",
            double(cancelled_total.load()));
    counter(out, "frost_connections_open", "gauge", "HTTP connections open", double(connections_open.load()));
    counter(out, "frost_connections_evicted_total", "counter",
            "Connections closed at the connection cap to make room: the one waiting longest for a request",
            double(connections_evicted.load()));
    counter(out, "frost_connections_refused_total", "counter",
            "Connections answered 503 too_many_connections: at the cap with every connection busy",
            double(connections_refused.load()));
    counter(out, "frost_accept_pauses_total", "counter",
            "Times accepting paused because the process had no file descriptor left",
            double(accept_pauses.load()));
    counter(out, "frost_queue_depth", "gauge", "Requests waiting for a slot", double(queue_depth.load()));
    counter(out, "frost_active_requests", "gauge", "Requests holding a slot", double(active_requests.load()));
    counter(out, "frost_prompt_tokens_total", "counter", "Prompt tokens", double(prompt_tokens_total.load()));
    counter(out, "frost_cached_tokens_total", "counter", "Prompt tokens served from live state or capsules",
            double(cached_tokens_total.load()));
    counter(out, "frost_generated_tokens_total", "counter", "Completion tokens", double(generated_tokens_total.load()));
    counter(out, "frost_decode_steps_total", "counter", "Batched decode steps (all decoding streams advance together)",
            double(decode_steps_total.load()));
    counter(out, "frost_decode_rows_total", "counter", "Stream tokens decoded by those steps (rows / steps = mean batch)",
            double(decode_rows_total.load()));
    const double decode_s = double(decode_us_total.load()) / 1e6;
    counter(out, "frost_decode_tokens_per_second", "gauge", "Generated tokens per second of decode time",
            decode_s > 0 ? double(generated_tokens_total.load()) / decode_s : 0.0);
    counter(out, "frost_prefix_hits_total", "counter", "Requests planned as append or restore", double(prefix_hits.load()));
    counter(out, "frost_prefix_misses_total", "counter", "Requests planned as rebuild", double(prefix_misses.load()));
    counter(out, "frost_capsules", "gauge", "Capsules in the store", double(capsules.load()));
    static const char* kTiers[3] = {"device", "host", "disk"};
    out += "# HELP frost_capsule_bytes Capsule bytes per tier\n# TYPE frost_capsule_bytes gauge\n";
    for (int t = 0; t < 3; ++t)
        out += std::string("frost_capsule_bytes{tier=\"") + kTiers[t] + "\"} " + std::to_string(capsule_bytes[t].load()) + "\n";
    if (has_memory.load()) {
        static const char* kSpaces[3] = {"device", "host_pinned", "host"};
        out += "# HELP frost_buffer_bytes Bytes of the engine's buffers per memory space (weights, state, scratch, "
               "capsules); the cpu backend's device space is host memory\n# TYPE frost_buffer_bytes gauge\n";
        for (int s = 0; s < 3; ++s)
            out += std::string("frost_buffer_bytes{space=\"") + kSpaces[s] + "\"} " + std::to_string(buffer_bytes[s].load()) +
                   "\n";
        counter(out, "frost_live_buffers", "gauge", "The engine's live buffers", double(live_buffers.load()));
        counter(out, "frost_live_graphs", "gauge", "The engine's live graphs (each holds its captured variants)",
                double(live_graphs.load()));
    }
    if (has_device.load()) {
        counter(out, "frost_device_memory_used_bytes", "gauge",
                "Device memory in use as the driver reports it (every process on the device, graph variants included)",
                double(device_used.load()));
        counter(out, "frost_device_memory_total_bytes", "gauge", "Device memory capacity", double(device_total.load()));
    }
    out += ttft.render("frost_ttft_seconds", "Time to first token, from the request's arrival to its first sampled token");
    out += itl.render("frost_inter_token_latency_seconds", "Time between consecutive sampled tokens of one choice");
    out += e2e.render("frost_e2e_request_latency_seconds",
                      "End-to-end request latency, from arrival to the last event picked up for the client");
    out += restore_latency.render("frost_restore_seconds", "Capsule restore latency");
    out += "# HELP frost_phase_seconds Per-request time by phase up to the first token (and after it), "
           "as in the timings_ms response object\n# TYPE frost_phase_seconds histogram\n";
    for (size_t i = 0; i < kPhaseCount; ++i)
        out += phase[i].render_series("frost_phase_seconds", std::string("phase=\"") + phase_name(Phase(i)) + "\"");
    out += deferred_store.render("frost_deferred_store_seconds",
                                 "Capsule store work moved after the first token (durable writes, demotions)");
    return out;
}

}  // namespace frost::serve
