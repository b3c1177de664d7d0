// Episode host: tick loop, termination predicate and capsule reset (see episode_host.h).
#include "robot/episode_host.h"

#include <cstring>
#include <string>

#include "exec/error.h"

namespace frost::robot {

namespace {
constexpr int kCriticStreamPriority = 1;  // lower priority than the policy stream (0)
}

const char* episode_end_name(EpisodeEnd e) {
    switch (e) {
        case EpisodeEnd::running: return "running";
        case EpisodeEnd::timeout: return "timeout";
        case EpisodeEnd::critic: return "critic";
        case EpisodeEnd::interrupt: return "interrupt";
    }
    return "unknown";
}

frost_status EpisodeHost::create(frost_ctx* ctx, const EpisodeHostConfig& cfg,
                                 std::unique_ptr<EpisodeHost>* out) {
    if (!ctx || !out) return fail(FROST_ERR_INVALID_ARG, "episode host: null argument");
    if (cfg.max_ticks < 1)
        return fail(FROST_ERR_INVALID_ARG, "episode host: max_ticks must be >= 1, got %d", cfg.max_ticks);
    FROST_TRY(validate(cfg.policy));
    std::unique_ptr<EpisodeHost> h(new EpisodeHost());
    h->cfg_ = cfg;
    h->ctx_ = ctx;
    FROST_TRY(frost_stream_create(ctx, 0, &h->s_policy_));
    FROST_TRY(frost_stream_create(ctx, kCriticStreamPriority, &h->s_critic_));
    FROST_TRY(frost_event_create(ctx, &h->ev_action_));
    FROST_TRY(frost_event_create(ctx, &h->ev_critic_done_));
    const size_t f = sizeof(float);
    FROST_TRY(frost_buffer_alloc(ctx, "episode.obs_stage", cfg.policy.obs_dim * f,
                                 FROST_SPACE_HOST_PINNED, &h->obs_stage_));
    FROST_TRY(frost_buffer_alloc(ctx, "episode.action_stage", cfg.policy.chunk() * f,
                                 FROST_SPACE_HOST_PINNED, &h->action_stage_));
    FROST_TRY(frost_buffer_alloc(ctx, "episode.value_stage", f, FROST_SPACE_HOST_PINNED, &h->value_stage_));
    FROST_TRY(Policy::create(ctx, "policy", cfg.policy, PolicyExternal{}, h->s_policy_, &h->policy_));
    if (cfg.use_critic)
        FROST_TRY(Critic::create(ctx, "critic", cfg.critic, h->policy_->action(), cfg.policy.chunk(),
                                 h->policy_->obs(), cfg.policy.obs_dim, h->s_critic_, &h->critic_));
    *out = std::move(h);
    return FROST_OK;
}

EpisodeHost::~EpisodeHost() {
    if (ctx_) frost_ctx_sync(ctx_);
    capsules_.clear();
    critic_.reset();
    policy_.reset();
    for (frost_buffer* b : {obs_stage_, action_stage_, value_stage_}) frost_buffer_free(b);
    frost_event_destroy(ev_action_);
    frost_event_destroy(ev_critic_done_);
    frost_stream_destroy(s_critic_);
    frost_stream_destroy(s_policy_);
}

frost_status EpisodeHost::warm_up() {
    if (warm_) return fail(FROST_ERR_STATE, "episode host: warm_up called twice");
    FROST_TRY(frost_stream_sync(s_policy_));
    FROST_TRY(policy_->capture(s_policy_));
    if (critic_) {
        FROST_TRY(frost_stream_sync(s_critic_));
        FROST_TRY(critic_->capture(s_critic_));
    }
    warm_ = true;
    return FROST_OK;
}

uint64_t EpisodeHost::capture_count() const {
    uint64_t n = frost_graph_capture_count(policy_->graph());
    if (critic_) n += frost_graph_capture_count(critic_->graph());
    return n;
}

RobotCapsule* EpisodeHost::capsule(uint64_t seed) const {
    auto it = capsules_.find(seed);
    return it == capsules_.end() ? nullptr : it->second.get();
}

frost_status EpisodeHost::reset(uint64_t seed) {
    // A failed reset leaves no runnable episode (the state may be half restored).
    started_ = false;
    // Nothing of the previous episode may still be reading or writing the state buffers.
    FROST_TRY(frost_stream_sync(s_critic_));
    FROST_TRY(frost_stream_sync(s_policy_));
    auto it = capsules_.find(seed);
    if (it != capsules_.end()) {
        FROST_TRY(it->second->restore(s_policy_));
    } else {
        std::unique_ptr<RobotCapsule> c;
        FROST_TRY(RobotCapsule::create(ctx_, "episode." + std::to_string(seed),
                                       policy_->state_buffers(), cfg_.capsule_space, &c));
        FROST_TRY(policy_->reset_state(seed, s_policy_));
        FROST_TRY(c->snapshot(s_policy_));
        capsules_.emplace(seed, std::move(c));
    }
    FROST_TRY(frost_stream_sync(s_policy_));
    interrupt_.store(false);
    ticks_ = 0;
    end_ = EpisodeEnd::running;
    started_ = true;
    return FROST_OK;
}

frost_status EpisodeHost::tick(const float* obs, float* action, TickResult* out) {
    if (!obs || !action || !out) return fail(FROST_ERR_INVALID_ARG, "episode tick: null argument");
    if (!warm_) return fail(FROST_ERR_STATE, "episode tick: warm_up() has not run");
    if (!started_ || end_ != EpisodeEnd::running)
        return fail(FROST_ERR_STATE, "episode tick: no running episode (ended: %s); call reset()",
                    episode_end_name(end_));
    *out = TickResult{};
    out->tick = ticks_;
    if (interrupt_.load()) {  // a chunk boundary: the interrupt wins before the next chunk
        end_ = out->end = EpisodeEnd::interrupt;
        return FROST_OK;
    }
    const PolicyConfig& pc = cfg_.policy;
    const size_t f = sizeof(float);
    std::memcpy(frost_buffer_ptr(obs_stage_), obs, pc.obs_dim * f);
    // The critic of the previous tick must be done reading action/obs before they are rewritten.
    FROST_TRY(frost_stream_wait_event(s_policy_, ev_critic_done_));
    FROST_TRY(frost_buffer_copy(policy_->obs(), 0, obs_stage_, 0, pc.obs_dim * f, s_policy_));
    FROST_TRY(policy_->step(s_policy_));
    FROST_TRY(frost_buffer_copy(action_stage_, 0, policy_->action(), 0, pc.chunk() * f, s_policy_));
    if (critic_) {
        FROST_TRY(frost_event_record(ev_action_, s_policy_));
        FROST_TRY(frost_stream_wait_event(s_critic_, ev_action_));
        FROST_TRY(critic_->step(s_critic_));
        FROST_TRY(frost_buffer_copy(value_stage_, 0, critic_->value(), 0, f, s_critic_));
        FROST_TRY(frost_event_record(ev_critic_done_, s_critic_));
    }
    FROST_TRY(frost_stream_sync(s_policy_));
    if (critic_) FROST_TRY(frost_event_sync(ev_critic_done_));
    std::memcpy(action, frost_buffer_ptr(action_stage_), pc.chunk() * f);
    out->acted = true;
    ++ticks_;
    if (critic_) out->value = *static_cast<const float*>(frost_buffer_ptr(value_stage_));
    if (interrupt_.load())
        end_ = EpisodeEnd::interrupt;
    else if (critic_ && out->value >= cfg_.critic_threshold)
        end_ = EpisodeEnd::critic;
    else if (ticks_ >= cfg_.max_ticks)
        end_ = EpisodeEnd::timeout;
    out->end = end_;
    return FROST_OK;
}

}  // namespace frost::robot
