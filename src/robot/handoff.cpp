// Planner -> actor hand-off through one shared buffer (see handoff.h).
#include "robot/handoff.h"

#include <cstring>

#include "exec/error.h"

namespace frost::robot {

namespace {
constexpr int kPlannerStreamPriority = 1;  // the actor's stream keeps the higher priority (0)
}

frost_status Handoff::create(frost_ctx* ctx, const HandoffConfig& cfg_in, std::unique_ptr<Handoff>* out) {
    if (!ctx || !out) return fail(FROST_ERR_INVALID_ARG, "handoff: null argument");
    HandoffConfig cfg = cfg_in;
    if (cfg.rate < 1) return fail(FROST_ERR_INVALID_ARG, "handoff: rate must be >= 1, got %d", cfg.rate);
    if (cfg.planner.obs_dim != cfg.actor.obs_dim)
        return fail(FROST_ERR_INVALID_ARG, "handoff: planner obs_dim %d != actor obs_dim %d",
                    cfg.planner.obs_dim, cfg.actor.obs_dim);
    cfg.planner.subtask_dim = 0;
    cfg.actor.subtask_dim = cfg.planner.chunk();
    FROST_TRY(validate(cfg.planner));
    FROST_TRY(validate(cfg.actor));
    std::unique_ptr<Handoff> h(new Handoff());
    h->cfg_ = cfg;
    h->ctx_ = ctx;
    const size_t f = sizeof(float);
    const size_t sub_bytes = size_t(cfg.planner.chunk()) * f;
    const size_t obs_bytes = size_t(cfg.actor.obs_dim) * f;
    FROST_TRY(frost_stream_create(ctx, kPlannerStreamPriority, &h->s_planner_));
    FROST_TRY(frost_stream_create(ctx, 0, &h->s_actor_));
    FROST_TRY(frost_event_create(ctx, &h->ev_obs_));
    FROST_TRY(frost_event_create(ctx, &h->ev_plan_));
    FROST_TRY(frost_buffer_alloc(ctx, "handoff.obs", obs_bytes, FROST_SPACE_DEVICE, &h->obs_));
    FROST_TRY(frost_buffer_alloc(ctx, "handoff.subtask", sub_bytes, FROST_SPACE_DEVICE, &h->subtask_));
    FROST_TRY(frost_buffer_alloc(ctx, "handoff.obs_stage", obs_bytes, FROST_SPACE_HOST_PINNED, &h->obs_stage_));
    FROST_TRY(frost_buffer_alloc(ctx, "handoff.action_stage", size_t(cfg.actor.chunk()) * f,
                                 FROST_SPACE_HOST_PINNED, &h->action_stage_));
    FROST_TRY(frost_buffer_alloc(ctx, "handoff.subtask_stage", sub_bytes, FROST_SPACE_HOST_PINNED,
                                 &h->subtask_stage_));
    FROST_TRY(frost_buffer_fill(h->obs_, 0, 0, obs_bytes, h->s_actor_));
    FROST_TRY(frost_buffer_fill(h->subtask_, 0, 0, sub_bytes, h->s_actor_));
    FROST_TRY(frost_stream_sync(h->s_actor_));
    PolicyExternal pe;
    pe.obs = h->obs_;
    pe.action = h->subtask_;  // the planner's output IS the subtask buffer
    FROST_TRY(Policy::create(ctx, "planner", cfg.planner, pe, h->s_planner_, &h->planner_));
    PolicyExternal ae;
    ae.obs = h->obs_;
    ae.subtask = h->subtask_;  // the actor's subtask port reads the same buffer
    FROST_TRY(Policy::create(ctx, "actor", cfg.actor, ae, h->s_actor_, &h->actor_));
    *out = std::move(h);
    return FROST_OK;
}

Handoff::~Handoff() {
    if (ctx_) frost_ctx_sync(ctx_);
    actor_.reset();  // destroys the graphs first, which unbinds the shared buffers
    planner_.reset();
    for (frost_buffer* b : {obs_, subtask_, obs_stage_, action_stage_, subtask_stage_}) frost_buffer_free(b);
    frost_event_destroy(ev_obs_);
    frost_event_destroy(ev_plan_);
    frost_stream_destroy(s_planner_);
    frost_stream_destroy(s_actor_);
}

frost_status Handoff::warm_up() {
    if (warm_) return fail(FROST_ERR_STATE, "handoff: warm_up called twice");
    FROST_TRY(planner_->capture(s_planner_));
    FROST_TRY(actor_->capture(s_actor_));
    warm_ = true;
    return FROST_OK;
}

uint64_t Handoff::capture_count() const {
    return frost_graph_capture_count(planner_->graph()) + frost_graph_capture_count(actor_->graph());
}

frost_status Handoff::reset(uint64_t planner_seed, uint64_t actor_seed) {
    FROST_TRY(frost_ctx_sync(ctx_));
    FROST_TRY(planner_->reset_state(planner_seed, s_planner_));
    FROST_TRY(actor_->reset_state(actor_seed, s_actor_));
    ticks_ = 0;
    interrupt_pending_ = false;
    return FROST_OK;
}

frost_status Handoff::tick(const float* obs, float* action, bool* planned) {
    if (!obs || !action) return fail(FROST_ERR_INVALID_ARG, "handoff tick: null argument");
    if (!warm_) return fail(FROST_ERR_STATE, "handoff tick: warm_up() has not run");
    const size_t f = sizeof(float);
    const bool plan = ticks_ % cfg_.rate == 0 && !interrupt_pending_;
    std::memcpy(frost_buffer_ptr(obs_stage_), obs, size_t(cfg_.actor.obs_dim) * f);
    FROST_TRY(frost_buffer_copy(obs_, 0, obs_stage_, 0, size_t(cfg_.actor.obs_dim) * f, s_actor_));
    if (plan) {
        // The actor stream has finished the previous actor step (synchronised below), so the
        // planner may overwrite the subtask once the new observation is in place.
        FROST_TRY(frost_event_record(ev_obs_, s_actor_));
        FROST_TRY(frost_stream_wait_event(s_planner_, ev_obs_));
        FROST_TRY(planner_->step(s_planner_));
        FROST_TRY(frost_event_record(ev_plan_, s_planner_));
        FROST_TRY(frost_stream_wait_event(s_actor_, ev_plan_));
    }
    FROST_TRY(actor_->step(s_actor_));
    FROST_TRY(frost_buffer_copy(action_stage_, 0, actor_->action(), 0, size_t(cfg_.actor.chunk()) * f,
                                s_actor_));
    FROST_TRY(frost_stream_sync(s_actor_));
    std::memcpy(action, frost_buffer_ptr(action_stage_), size_t(cfg_.actor.chunk()) * f);
    if (planned) *planned = plan;
    interrupt_pending_ = false;
    ++ticks_;
    return FROST_OK;
}

frost_status Handoff::interrupt(const float* subtask) {
    if (!subtask) return fail(FROST_ERR_INVALID_ARG, "handoff interrupt: null subtask");
    const size_t bytes = size_t(subtask_dim()) * sizeof(float);
    // The staging buffer is free: every tick ends with the actor stream synchronised.
    FROST_TRY(frost_stream_sync(s_actor_));
    std::memcpy(frost_buffer_ptr(subtask_stage_), subtask, bytes);
    FROST_TRY(frost_buffer_copy(subtask_, 0, subtask_stage_, 0, bytes, s_actor_));
    interrupt_pending_ = true;
    return FROST_OK;
}

}  // namespace frost::robot
