// The value critic graph (see critic.h).
#include "robot/critic.h"

#include "exec/error.h"
#include "robot/policy.h"

namespace frost::robot {

frost_status Critic::create(frost_ctx* ctx, const std::string& name, const CriticConfig& cfg,
                            frost_buffer* action, int32_t chunk, frost_buffer* obs,
                            int32_t obs_dim, frost_stream* s, std::unique_ptr<Critic>* out) {
    if (!ctx || !action || !obs || !s || !out || chunk <= 0 || obs_dim <= 0 || cfg.hidden <= 0)
        return fail(FROST_ERR_INVALID_ARG, "critic %s: bad arguments", name.c_str());
    std::unique_ptr<Critic> c(new Critic());
    c->name_ = name;
    c->chunk_ = chunk;
    c->obs_dim_ = obs_dim;
    const MlpShape shape{chunk + obs_dim, cfg.hidden, 1, cfg.act};
    FROST_TRY(Mlp::create(ctx, name + ".mlp", shape,
                          mlp_synthetic_weights(shape, cfg.weight_seed, cfg.out_gain), s, &c->mlp_));
    const size_t f = sizeof(float);
    FROST_TRY(frost_buffer_alloc(ctx, (name + ".in").c_str(), size_t(chunk + obs_dim) * f,
                                 FROST_SPACE_DEVICE, &c->in_));
    FROST_TRY(frost_buffer_alloc(ctx, (name + ".value").c_str(), f, FROST_SPACE_DEVICE, &c->value_));
    FROST_TRY(frost_graph_create(ctx, (name + ".value").c_str(), 1, &c->graph_));
    FROST_TRY(frost_graph_bind(c->graph_, kPortAction, action));
    FROST_TRY(frost_graph_bind(c->graph_, kPortObs, obs));
    FROST_TRY(frost_graph_bind(c->graph_, kPortValue, c->value_));
    *out = std::move(c);
    return FROST_OK;
}

Critic::~Critic() {
    frost_graph_destroy(graph_);
    frost_buffer_free(in_);
    frost_buffer_free(value_);
}

frost_status Critic::capture(frost_stream* s) {
    const frost_status st = frost_graph_capture(graph_, kCriticKey, s, &Critic::record, this);
    return st == FROST_OK ? st : add_context(st, "critic " + name_ + ": capture");
}

frost_status Critic::step(frost_stream* s) { return frost_graph_replay(graph_, kCriticKey, s); }

frost_status Critic::record(void* user, frost_stream* s) {
    auto* c = static_cast<Critic*>(user);
    const size_t f = sizeof(float);
    FROST_TRY(frost_buffer_copy(c->in_, 0, frost_graph_port(c->graph_, kPortAction), 0, c->chunk_ * f, s));
    FROST_TRY(frost_buffer_copy(c->in_, c->chunk_ * f, frost_graph_port(c->graph_, kPortObs), 0,
                                c->obs_dim_ * f, s));
    return c->mlp_->record(s, fptr(c->in_), fptr(frost_graph_port(c->graph_, kPortValue)));
}

}  // namespace frost::robot
