// Snapshot/restore of the robot state buffers (see capsule.h).
#include "robot/capsule.h"

#include <algorithm>

#include "exec/error.h"

namespace frost::robot {

namespace {
constexpr size_t kAlign = 256;  // keeps every slice as aligned as a frost buffer
}

frost_status RobotCapsule::create(frost_ctx* ctx, const std::string& name,
                                  std::vector<frost_buffer*> state, frost_space space,
                                  std::unique_ptr<RobotCapsule>* out) {
    if (!ctx || !out || state.empty())
        return fail(FROST_ERR_INVALID_ARG, "robot capsule %s: no state buffers", name.c_str());
    if (space != FROST_SPACE_DEVICE && space != FROST_SPACE_HOST_PINNED)
        return fail(FROST_ERR_INVALID_ARG, "robot capsule %s: space must be device or host_pinned",
                    name.c_str());
    std::unique_ptr<RobotCapsule> c(new RobotCapsule());
    c->name_ = name;
    for (frost_buffer* b : state) {
        if (!b) return fail(FROST_ERR_INVALID_ARG, "robot capsule %s: null state buffer", name.c_str());
        c->offsets_.push_back(c->total_);
        c->total_ += (frost_buffer_bytes(b) + kAlign - 1) / kAlign * kAlign;
    }
    c->state_ = std::move(state);
    FROST_TRY(frost_buffer_alloc(ctx, (name + ".snapshot").c_str(), c->total_, space, &c->storage_));
    *out = std::move(c);
    return FROST_OK;
}

RobotCapsule::~RobotCapsule() { frost_buffer_free(storage_); }

bool RobotCapsule::contains(const frost_buffer* b) const {
    return std::find(state_.begin(), state_.end(), b) != state_.end();
}

frost_status RobotCapsule::snapshot(frost_stream* s) {
    for (size_t i = 0; i < state_.size(); ++i)
        FROST_TRY(frost_buffer_copy(storage_, offsets_[i], state_[i], 0, frost_buffer_bytes(state_[i]), s));
    taken_ = true;
    return FROST_OK;
}

frost_status RobotCapsule::restore(frost_stream* s) {
    if (!taken_)
        return fail(FROST_ERR_STATE, "robot capsule %s: restore before any snapshot", name_.c_str());
    for (size_t i = 0; i < state_.size(); ++i)
        FROST_TRY(frost_buffer_copy(state_[i], 0, storage_, offsets_[i], frost_buffer_bytes(state_[i]), s));
    return FROST_OK;
}

}  // namespace frost::robot
