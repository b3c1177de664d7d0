// Planner -> actor hand-off: two flow-matching policies in one ctx at rates 1:rate. The planner's
// output ("action" port, [subtask_dim]) and the actor's "subtask" port are bound to ONE
// frost_buffer: the planner graph writes it, the actor graph reads it, no copy in between. Both
// also share one observation buffer. An interrupt overwrites the subtask buffer on the actor's
// stream, so the very next actor replay consumes it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "frost/exec.h"
#include "robot/policy.h"

namespace frost::robot {

struct HandoffConfig {
    PolicyConfig planner;  // its chunk (horizon * action_dim) is the subtask width
    PolicyConfig actor;    // subtask_dim is set to the planner's chunk; obs_dim must match
    int32_t rate = 4;      // actor ticks per planner tick
};

class Handoff {
public:
    static frost_status create(frost_ctx* ctx, const HandoffConfig& cfg, std::unique_ptr<Handoff>* out);
    ~Handoff();
    Handoff(const Handoff&) = delete;
    Handoff& operator=(const Handoff&) = delete;

    frost_status warm_up();  // captures both graphs, each on its own stream
    // Seeds both policies' RNG state and restarts the tick counter. Blocking.
    frost_status reset(uint64_t planner_seed, uint64_t actor_seed);
    // One actor tick; the planner replays first on ticks 0, rate, 2*rate, ... unless an interrupt
    // arrived since the previous tick (the interrupt then owns that planner period).
    // obs: [obs_dim] host; action: [actor chunk] host output; planned (optional): whether the
    // planner ran on this tick.
    frost_status tick(const float* obs, float* action, bool* planned);
    // Overwrites the shared subtask buffer ([subtask_dim] host floats) on the actor's stream.
    frost_status interrupt(const float* subtask);

    Policy& planner() const { return *planner_; }
    Policy& actor() const { return *actor_; }
    frost_buffer* subtask() const { return subtask_; }
    frost_stream* planner_stream() const { return s_planner_; }
    frost_stream* actor_stream() const { return s_actor_; }
    uint64_t capture_count() const;
    int32_t subtask_dim() const { return cfg_.planner.chunk(); }

private:
    Handoff() = default;

    HandoffConfig cfg_;
    frost_ctx* ctx_ = nullptr;
    frost_stream* s_planner_ = nullptr;
    frost_stream* s_actor_ = nullptr;
    frost_event* ev_obs_ = nullptr;        // obs written on the actor stream
    frost_event* ev_plan_ = nullptr;       // planner wrote the subtask
    frost_buffer* obs_ = nullptr;          // [obs_dim] shared by both graphs
    frost_buffer* subtask_ = nullptr;      // [subtask_dim] planner output = actor input
    frost_buffer* obs_stage_ = nullptr;    // [obs_dim] pinned
    frost_buffer* action_stage_ = nullptr; // [actor chunk] pinned
    frost_buffer* subtask_stage_ = nullptr;// [subtask_dim] pinned
    std::unique_ptr<Policy> planner_;
    std::unique_ptr<Policy> actor_;
    int64_t ticks_ = 0;
    bool interrupt_pending_ = false;
    bool warm_ = false;
};

}  // namespace frost::robot
