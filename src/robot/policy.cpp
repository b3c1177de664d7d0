// The flow-matching policy step: buffers, port bindings and the recorded graph (see policy.h).
#include "robot/policy.h"

#include "exec/error.h"
#include "robot/policy_ops.h"
#include "robot/weights_file.h"

namespace frost::robot {

namespace {

constexpr int32_t kMaxWidth = 1 << 16;  // guards int32 products in the kernels
constexpr size_t kRngWords = 2;         // seed, counter

frost_status alloc_or_use(frost_ctx* ctx, const std::string& name, size_t bytes,
                          frost_buffer* given, std::vector<frost_buffer*>* owned, frost_buffer** out) {
    if (given) {
        if (frost_buffer_bytes(given) < bytes)
            return fail(FROST_ERR_INVALID_ARG, "%s: shared buffer '%s' has %zu bytes, needs %zu",
                        name.c_str(), frost_buffer_name(given), frost_buffer_bytes(given), bytes);
        *out = given;
        return FROST_OK;
    }
    FROST_TRY(frost_buffer_alloc(ctx, name.c_str(), bytes, FROST_SPACE_DEVICE, out));
    owned->push_back(*out);
    return FROST_OK;
}

}  // namespace

frost_status validate(const PolicyConfig& c) {
    auto bad = [](const char* f, int32_t v) {
        return fail(FROST_ERR_INVALID_ARG, "policy config: %s must be in [1, %d], got %d", f,
                    kMaxWidth, v);
    };
    if (c.horizon < 1 || c.horizon > kMaxWidth) return bad("horizon", c.horizon);
    if (c.action_dim < 1 || c.action_dim > kMaxWidth) return bad("action_dim", c.action_dim);
    if (c.obs_dim < 1 || c.obs_dim > kMaxWidth) return bad("obs_dim", c.obs_dim);
    if (c.hidden < 1 || c.hidden > kMaxWidth) return bad("hidden", c.hidden);
    if (c.euler_steps < 1 || c.euler_steps > kMaxWidth) return bad("euler_steps", c.euler_steps);
    if (c.subtask_dim < 0 || c.subtask_dim > kMaxWidth)
        return fail(FROST_ERR_INVALID_ARG, "policy config: subtask_dim must be in [0, %d], got %d",
                    kMaxWidth, c.subtask_dim);
    if (c.time_dim < 2 || c.time_dim > kMaxWidth || c.time_dim % 2 != 0)
        return fail(FROST_ERR_INVALID_ARG, "policy config: time_dim must be even and >= 2, got %d",
                    c.time_dim);
    if (int64_t(c.horizon) * c.action_dim > kMaxWidth)
        return fail(FROST_ERR_INVALID_ARG, "policy config: horizon * action_dim must be <= %d",
                    kMaxWidth);
    if (!(c.max_period > 1.0f))
        return fail(FROST_ERR_INVALID_ARG, "policy config: max_period must be > 1");
    return FROST_OK;
}

frost_status Policy::create(frost_ctx* ctx, const std::string& name, const PolicyConfig& cfg,
                            const PolicyExternal& ext, frost_stream* s,
                            std::unique_ptr<Policy>* out) {
    FROST_TRY(validate(cfg));
    if (!ctx || !s || !out) return fail(FROST_ERR_INVALID_ARG, "policy %s: null argument", name.c_str());
    if (ext.subtask && cfg.subtask_dim == 0)
        return fail(FROST_ERR_INVALID_ARG, "policy %s: subtask buffer given but subtask_dim is 0",
                    name.c_str());
    std::unique_ptr<Policy> p(new Policy());
    p->cfg_ = cfg;
    p->name_ = name;
    const MlpShape shape{cfg.mlp_in(), cfg.hidden, cfg.chunk(), cfg.act};
    MlpHostWeights weights;
    if (cfg.weights_file.empty())
        weights = mlp_synthetic_weights(shape, cfg.weight_seed, cfg.out_gain);
    else
        FROST_TRY(load_mlp_weights(cfg.weights_file, name + ".mlp", shape, &weights));
    FROST_TRY(Mlp::create(ctx, name + ".mlp", shape, std::move(weights), s, &p->mlp_));
    FROST_TRY(frost_graph_create(ctx, (name + ".step").c_str(), 1, &p->graph_));

    const size_t f = sizeof(float);
    frost_buffer* b = nullptr;
    FROST_TRY(alloc_or_use(ctx, name + ".obs", cfg.obs_dim * f, ext.obs, &p->owned_, &b));
    FROST_TRY(frost_graph_bind(p->graph_, kPortObs, b));
    if (cfg.subtask_dim > 0) {
        FROST_TRY(alloc_or_use(ctx, name + ".subtask", cfg.subtask_dim * f, ext.subtask, &p->owned_, &b));
        FROST_TRY(frost_graph_bind(p->graph_, kPortSubtask, b));
    }
    FROST_TRY(alloc_or_use(ctx, name + ".action", cfg.chunk() * f, ext.action, &p->owned_, &b));
    FROST_TRY(frost_graph_bind(p->graph_, kPortAction, b));
    FROST_TRY(alloc_or_use(ctx, name + ".rng", kRngWords * sizeof(uint64_t), nullptr, &p->owned_, &b));
    FROST_TRY(frost_graph_bind(p->graph_, kPortRng, b));
    FROST_TRY(alloc_or_use(ctx, name + ".prev_action", cfg.chunk() * f, nullptr, &p->owned_, &b));
    FROST_TRY(frost_graph_bind(p->graph_, kPortPrevAction, b));
    FROST_TRY(alloc_or_use(ctx, name + ".in", cfg.mlp_in() * f, nullptr, &p->owned_, &p->in_));
    FROST_TRY(alloc_or_use(ctx, name + ".v", cfg.chunk() * f, nullptr, &p->owned_, &p->v_));
    FROST_TRY(p->reset_state(0, s));
    if (cfg.subtask_dim > 0 && !ext.subtask)
        FROST_TRY(frost_buffer_fill(p->subtask(), 0, 0, cfg.subtask_dim * f, s));
    if (!ext.obs) FROST_TRY(frost_buffer_fill(p->obs(), 0, 0, cfg.obs_dim * f, s));
    FROST_TRY(frost_stream_sync(s));
    *out = std::move(p);
    return FROST_OK;
}

Policy::~Policy() {
    frost_graph_destroy(graph_);  // unbinds the ports, so the buffers below can be freed
    for (frost_buffer* b : owned_) frost_buffer_free(b);
}

std::vector<frost_buffer*> Policy::scratch_buffers() const {
    std::vector<frost_buffer*> v = mlp_->scratch_buffers();
    v.push_back(in_);
    v.push_back(v_);
    return v;
}

frost_status Policy::reset_state(uint64_t seed, frost_stream* s) {
    const uint64_t words[kRngWords] = {seed, 0};
    FROST_TRY(upload(rng(), 0, words, sizeof words, s));
    FROST_TRY(frost_buffer_fill(prev_action(), 0, 0, cfg_.chunk() * sizeof(float), s));
    return frost_stream_sync(s);
}

frost_status Policy::capture(frost_stream* s) {
    const frost_status st = frost_graph_capture(graph_, kPolicyStepKey, s, &Policy::record, this);
    return st == FROST_OK ? st : add_context(st, "policy " + name_ + ": capture");
}

frost_status Policy::step(frost_stream* s) { return frost_graph_replay(graph_, kPolicyStepKey, s); }

frost_status Policy::record(void* user, frost_stream* s) {
    return static_cast<Policy*>(user)->record_step(s);
}

// Layout of `in`: [0, C) the noisy chunk x, [C, C+E) emb(t), [C+E, C+E+O) obs, then subtask.
frost_status Policy::record_step(frost_stream* s) {
    using namespace kernels;
    const PolicyConfig& c = cfg_;
    const size_t f = sizeof(float);
    const size_t off_t = size_t(c.chunk());
    const size_t off_obs = off_t + size_t(c.time_dim);
    const size_t off_sub = off_obs + size_t(c.obs_dim);
    float* in = fptr(in_);
    float* x = in;
    float* v = fptr(v_);
    auto* rng_words = static_cast<uint64_t*>(frost_buffer_ptr(rng()));

    FROST_TRY(enqueue_noise(s, PolicyNoiseParams{x, rng_words, c.chunk(), c.noise_scale}));
    if (c.warm_start != 0.0f)
        FROST_TRY(enqueue_axpy(s, PolicyAxpyParams{x, fptr(prev_action()), c.chunk(), c.warm_start}));
    // Observation and subtask are read from their ports at every replay (re-bound inputs).
    FROST_TRY(frost_buffer_copy(in_, off_obs * f, obs(), 0, c.obs_dim * f, s));
    if (c.subtask_dim > 0)
        FROST_TRY(frost_buffer_copy(in_, off_sub * f, subtask(), 0, c.subtask_dim * f, s));
    const float dt = 1.0f / static_cast<float>(c.euler_steps);
    for (int32_t k = 0; k < c.euler_steps; ++k) {
        const float t = static_cast<float>(k) * dt;
        FROST_TRY(enqueue_time_embed(
            s, PolicyTimeEmbedParams{in + off_t, c.time_dim, t, c.time_scale, c.max_period}));
        FROST_TRY(mlp_->record(s, in, v));
        FROST_TRY(enqueue_axpy(s, PolicyAxpyParams{x, v, c.chunk(), dt}));
    }
    FROST_TRY(frost_buffer_copy(action(), 0, in_, 0, c.chunk() * f, s));
    FROST_TRY(frost_buffer_copy(prev_action(), 0, in_, 0, c.chunk() * f, s));
    return enqueue_counter(s, PolicyCounterParams{rng_words});
}

}  // namespace frost::robot
