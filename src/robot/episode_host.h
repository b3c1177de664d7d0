// The episode host: each tick re-binds the current observation, replays one policy step (one
// action chunk) and, between chunks, evaluates the termination predicate: an external interrupt,
// a value critic (a second graph on a second stream, ordered with events), or a timeout.
// reset(seed) starts an episode by restoring its episode-initial capsule (the policy's RNG seed/
// counter and previous chunk) with buffer copies: graphs are captured once, at warm_up().
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>

#include "frost/exec.h"
#include "robot/capsule.h"
#include "robot/critic.h"
#include "robot/policy.h"

namespace frost::robot {

enum class EpisodeEnd : int32_t { running = 0, timeout = 1, critic = 2, interrupt = 3 };
const char* episode_end_name(EpisodeEnd e);

struct EpisodeHostConfig {
    PolicyConfig policy;
    CriticConfig critic;
    bool use_critic = true;
    float critic_threshold = INFINITY;  // the episode ends after a chunk whose value >= this
    int32_t max_ticks = 16;             // timeout: the episode ends after this many chunks
    frost_space capsule_space = FROST_SPACE_DEVICE;  // or FROST_SPACE_HOST_PINNED
};

struct TickResult {
    int32_t tick = 0;   // index of this tick within the episode (0-based)
    bool acted = false; // false when an interrupt was pending before the chunk (no action written)
    EpisodeEnd end = EpisodeEnd::running;
    float value = NAN;  // critic value of this chunk (NaN without a critic)
};

class EpisodeHost {
public:
    static frost_status create(frost_ctx* ctx, const EpisodeHostConfig& cfg,
                               std::unique_ptr<EpisodeHost>* out);
    ~EpisodeHost();
    EpisodeHost(const EpisodeHost&) = delete;
    EpisodeHost& operator=(const EpisodeHost&) = delete;

    // Captures the policy graph (stream 0) and the critic graph (stream 1). Call once.
    frost_status warm_up();
    // Starts episode `seed`. The first time for a seed it writes the initial state and snapshots
    // it into that seed's episode-initial capsule; afterwards it restores that capsule (a reset).
    // Blocking. Clears the interrupt flag and the tick counter. On failure (e.g. an injected copy
    // fault) no episode runs until a later reset succeeds.
    frost_status reset(uint64_t seed);
    // One tick. obs: [obs_dim] f32 host (always copied into the obs port: never from a capsule);
    // action: [horizon * action_dim] f32 host output. FROST_ERR_STATE if the episode has ended.
    frost_status tick(const float* obs, float* action, TickResult* out);
    // Thread-safe: the episode ends at the next chunk boundary.
    void interrupt() { interrupt_.store(true); }
    // Changes the critic threshold (policy between episodes; the graphs are unaffected).
    void set_critic_threshold(float threshold) { cfg_.critic_threshold = threshold; }

    // Successful captures over the lifetime of both graphs (constant after warm_up()).
    uint64_t capture_count() const;
    Policy& policy() const { return *policy_; }
    Critic* critic() const { return critic_.get(); }
    RobotCapsule* capsule(uint64_t seed) const;
    frost_stream* policy_stream() const { return s_policy_; }
    frost_stream* critic_stream() const { return s_critic_; }
    const EpisodeHostConfig& config() const { return cfg_; }
    EpisodeEnd end() const { return end_; }

private:
    EpisodeHost() = default;

    EpisodeHostConfig cfg_;
    frost_ctx* ctx_ = nullptr;
    frost_stream* s_policy_ = nullptr;
    frost_stream* s_critic_ = nullptr;
    frost_event* ev_action_ = nullptr;       // policy chunk written (critic may read)
    frost_event* ev_critic_done_ = nullptr;  // critic finished reading action/obs
    frost_buffer* obs_stage_ = nullptr;      // [obs_dim] pinned host staging
    frost_buffer* action_stage_ = nullptr;   // [chunk] pinned host readback
    frost_buffer* value_stage_ = nullptr;    // [1] pinned host readback
    std::unique_ptr<Policy> policy_;
    std::unique_ptr<Critic> critic_;
    std::map<uint64_t, std::unique_ptr<RobotCapsule>> capsules_;
    std::atomic<bool> interrupt_{false};
    bool warm_ = false;
    bool started_ = false;
    int32_t ticks_ = 0;
    EpisodeEnd end_ = EpisodeEnd::running;
};

}  // namespace frost::robot
