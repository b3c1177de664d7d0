// The robot domain's capsule: a named list of live state buffers plus one snapshot buffer (device
// or pinned host) holding their bytes back to back. snapshot() and restore() are contract buffer
// copies on a stream; nothing is recaptured. Deliberately independent of the LLM capsule module.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"

namespace frost::robot {

class RobotCapsule {
public:
    // Allocates the snapshot storage in `space` (FROST_SPACE_DEVICE or FROST_SPACE_HOST_PINNED)
    // for the bytes of `state`. The state buffers must outlive the capsule.
    static frost_status create(frost_ctx* ctx, const std::string& name,
                               std::vector<frost_buffer*> state, frost_space space,
                               std::unique_ptr<RobotCapsule>* out);
    ~RobotCapsule();
    RobotCapsule(const RobotCapsule&) = delete;
    RobotCapsule& operator=(const RobotCapsule&) = delete;

    frost_status snapshot(frost_stream* s);  // live -> snapshot, asynchronous on s
    frost_status restore(frost_stream* s);   // snapshot -> live, asynchronous on s

    const std::vector<frost_buffer*>& buffers() const { return state_; }
    bool contains(const frost_buffer* b) const;
    bool has_snapshot() const { return taken_; }
    size_t bytes() const { return total_; }
    frost_space space() const { return frost_buffer_space(storage_); }

private:
    RobotCapsule() = default;
    std::string name_;
    std::vector<frost_buffer*> state_;
    std::vector<size_t> offsets_;  // byte offset of each state buffer in storage_
    size_t total_ = 0;
    frost_buffer* storage_ = nullptr;
    bool taken_ = false;
};

}  // namespace frost::robot
