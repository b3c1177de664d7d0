// Named, role-tagged buffer registry of the engine (see buffers.h).
#include "model/buffers.h"

#include "exec/error.h"

namespace frost::model {

const char* buffer_role_name(BufferRole r) {
    switch (r) {
        case BufferRole::State: return "state";
        case BufferRole::Cursor: return "cursor";
        case BufferRole::Scratch: return "scratch";
        case BufferRole::Weights: return "weights";
    }
    return "unknown";
}

size_t NamedBuffer::valid_bytes(int64_t position) const {
    const size_t total = buf ? frost_buffer_bytes(buf) : 0;
    if (bytes_per_position == 0) return total;
    if (position <= 0) return 0;
    const size_t want = static_cast<size_t>(position) * bytes_per_position;
    return want < total ? want : total;
}

BufferList::~BufferList() {
    for (auto it = list_.rbegin(); it != list_.rend(); ++it) frost_buffer_free(it->buf);
}

frost_status BufferList::add(const std::string& name, BufferRole role, size_t bytes,
                             frost_buffer** out, int layer, size_t bytes_per_position,
                             frost_space space) {
    frost_buffer* b = nullptr;
    frost_status s = frost_buffer_alloc(ctx_, name.c_str(), bytes, space, &b);
    if (s != FROST_OK) return add_context(s, "engine buffer " + name);
    NamedBuffer nb;
    nb.name = name;
    nb.role = role;
    nb.buf = b;
    nb.layer = layer;
    nb.bytes_per_position = bytes_per_position;
    list_.push_back(std::move(nb));
    *out = b;
    return FROST_OK;
}

uint64_t BufferList::total_bytes() const {
    uint64_t t = 0;
    for (const auto& b : list_) t += frost_buffer_bytes(b.buf);
    return t;
}

}  // namespace frost::model
