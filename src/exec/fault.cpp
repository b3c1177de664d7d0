// The single fault-injection gate. Every allocation, copy and I/O call site in frost asks
// frost_fault_hit(kind) first; tests arm "fail the N-th call, once or from then on" to drive
// out-of-memory and I/O-error loops (SQLite-style) without touching the code under test.
#include <atomic>
#include <mutex>

#include "exec/objects.h"

#include "frost/exec.h"

namespace {

struct Gate {
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> nth{0};  // 0 = disarmed
    std::atomic<int> persistent{0};
};

Gate g_gates[FROST_FAULT_KIND_COUNT];
std::mutex g_arm_mutex;  // arming is rare; hits are lock-free

// A C caller may pass any int; only 0 .. FROST_FAULT_KIND_COUNT-1 name a gate.
bool valid_kind(const frost_fault_kind& kind) {
    const int k = frost::exec::enum_value(kind);
    return k >= 0 && k < FROST_FAULT_KIND_COUNT;
}

}  // namespace

extern "C" {

void frost_fault_arm(frost_fault_kind kind, uint64_t nth, int persistent) {
    if (!valid_kind(kind)) return;
    std::lock_guard<std::mutex> lock(g_arm_mutex);
    g_gates[kind].calls = 0;
    g_gates[kind].persistent = persistent ? 1 : 0;
    g_gates[kind].nth = nth;
}

void frost_fault_clear(void) {
    std::lock_guard<std::mutex> lock(g_arm_mutex);
    for (auto& g : g_gates) {
        g.nth = 0;
        g.persistent = 0;
        g.calls = 0;
    }
}

uint64_t frost_fault_calls(frost_fault_kind kind) {
    if (!valid_kind(kind)) return 0;
    return g_gates[kind].calls.load();
}

int frost_fault_hit(frost_fault_kind kind) {
    if (!valid_kind(kind)) return 0;
    Gate& g = g_gates[kind];
    const uint64_t n = ++g.calls;
    const uint64_t nth = g.nth.load();
    if (nth == 0) return 0;
    if (n == nth) return 1;
    return (g.persistent.load() && n > nth) ? 1 : 0;
}

}  // extern "C"
