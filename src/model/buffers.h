// The engine's closed set of static buffers. Every buffer is allocated once (for max_seq_len and
// the prefill chunk C_p) and registered with a name and a role; a session's continuation state is
// exactly its `state` + `cursor` buffers, which is what the capsule layer snapshots.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "ops/tensor.h"

namespace frost::model {

enum class BufferRole : uint8_t {
    State = 0,    // continuation state of one session (KV, recurrent state, conv state)
    Cursor = 1,   // the session's StepCursor (position, last token, sampler RNG...)
    Scratch = 2,  // recomputed every step; may be shared by sessions on one stream
    Weights = 3,  // shared, read-only after load
};
const char* buffer_role_name(BufferRole r);

// What a state buffer holds (the state layout declares it; capsules record it per part).
enum class StateKind : uint8_t { None = 0, Cursor = 1, Kv = 2, Recurrent = 3, Conv = 4 };

struct NamedBuffer {
    std::string name;           // e.g. "s0.layer3.k_cache", "s0.cursor", "scratch.proj"
    BufferRole role = BufferRole::Scratch;
    frost_buffer* buf = nullptr;
    int layer = -1;             // model layer, -1 for none
    size_t bytes_per_position = 0;  // > 0 for KV caches: [pos][kv_head][head_dim] rows
    // State and cursor buffers: what the state layout declared (element dtype, kind, shape; a KV
    // shape's first dimension is positions, max_seq_len of them).
    ops::DType dtype = ops::DType::U8;
    StateKind kind = StateKind::None;
    std::vector<int64_t> shape;

    // Bytes of this buffer that hold the state after `position` tokens: the prefix [0, P) for a
    // KV cache (one contiguous run), the whole buffer otherwise.
    size_t valid_bytes(int64_t position) const;
};

// Owns a list of allocated buffers; frees them in reverse order.
class BufferList {
public:
    explicit BufferList(frost_ctx* ctx) : ctx_(ctx) {}
    ~BufferList();
    BufferList(const BufferList&) = delete;
    BufferList& operator=(const BufferList&) = delete;

    // Allocates `bytes` (device space) and registers it; *out receives the buffer.
    frost_status add(const std::string& name, BufferRole role, size_t bytes, frost_buffer** out,
                     int layer = -1, size_t bytes_per_position = 0,
                     frost_space space = FROST_SPACE_DEVICE);
    const std::vector<NamedBuffer>& list() const { return list_; }
    NamedBuffer& back() { return list_.back(); }
    uint64_t total_bytes() const;

private:
    frost_ctx* ctx_;
    std::vector<NamedBuffer> list_;
};

}  // namespace frost::model
