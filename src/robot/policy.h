// A small pi0-style flow-matching action expert. An MLP v = f(x, emb(t), obs, subtask) predicts
// the velocity of an action chunk x ([horizon, action_dim] flattened); one policy step draws
// x_0 ~ N(0, I) (+ a warm-start blend of the previous chunk) and integrates N Euler steps
// x_{k+1} = x_k + v(x_k, t_k) / N, t_k = k / N, from noise at t = 0 to the action chunk at t = 1.
// The WHOLE step (noise draw, N Euler steps, output copies, RNG advance) is one captured graph.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "robot/mlp.h"

namespace frost::robot {

struct PolicyConfig {
    int32_t horizon = 8;      // H: steps per action chunk
    int32_t action_dim = 7;   // D: dims per action
    int32_t obs_dim = 32;     // O: observation embedding width
    int32_t subtask_dim = 0;  // S: subtask embedding port width (0 = no port)
    int32_t time_dim = 16;    // E: sinusoidal flow-time embedding width (even)
    int32_t hidden = 128;     // MLP width
    int32_t euler_steps = 10; // N
    float noise_scale = 1.0f;
    float warm_start = 0.25f; // x_0 += warm_start * previous chunk (state carried between chunks)
    float time_scale = 100.0f;   // flow time t in [0, 1] is scaled before the sinusoid
    float max_period = 10000.0f;
    float out_gain = 1.0f;       // scale of the velocity head's weights
    uint64_t weight_seed = 1;
    // Safetensors file with tensors "<policy name>.mlp.{w1,b1,g1,w2,b2,w3,b3}" (F32); empty =
    // synthetic weights drawn from weight_seed.
    std::string weights_file;
    kernels::PolicyAct act = kernels::PolicyAct::silu;

    int32_t chunk() const { return horizon * action_dim; }
    int32_t mlp_in() const { return chunk() + time_dim + obs_dim + subtask_dim; }
};

// Buffers a caller shares with other graphs; null ones are allocated by the policy.
struct PolicyExternal {
    frost_buffer* obs = nullptr;      // [obs_dim] f32
    frost_buffer* subtask = nullptr;  // [subtask_dim] f32
    frost_buffer* action = nullptr;   // [horizon * action_dim] f32 (written by the step)
};

// Graph port names (the record callback reads its buffers only through these ports).
inline constexpr const char* kPortObs = "obs";
inline constexpr const char* kPortSubtask = "subtask";
inline constexpr const char* kPortAction = "action";
inline constexpr const char* kPortRng = "rng";
inline constexpr const char* kPortPrevAction = "prev_action";
inline constexpr frost_shape_key kPolicyStepKey = 1;

class Policy {
public:
    // Validates `cfg`, allocates weights (synthetic from cfg.weight_seed), state and scratch
    // buffers, binds the ports, and sets the RNG to (seed 0, counter 0). Uses `s` for uploads.
    static frost_status create(frost_ctx* ctx, const std::string& name, const PolicyConfig& cfg,
                               const PolicyExternal& ext, frost_stream* s,
                               std::unique_ptr<Policy>* out);
    ~Policy();
    Policy(const Policy&) = delete;
    Policy& operator=(const Policy&) = delete;

    // Captures the step graph on `s` (key kPolicyStepKey). Done once, at warm-up.
    frost_status capture(frost_stream* s);
    // Enqueues one policy step (one graph replay) on `s`.
    frost_status step(frost_stream* s);
    // Writes the episode-start state: rng = {seed, 0}, prev_action = 0. Blocking on `s`.
    frost_status reset_state(uint64_t seed, frost_stream* s);

    frost_graph* graph() const { return graph_; }
    frost_buffer* obs() const { return frost_graph_port(graph_, kPortObs); }
    frost_buffer* subtask() const { return frost_graph_port(graph_, kPortSubtask); }  // may be null
    frost_buffer* action() const { return frost_graph_port(graph_, kPortAction); }
    frost_buffer* rng() const { return frost_graph_port(graph_, kPortRng); }
    frost_buffer* prev_action() const { return frost_graph_port(graph_, kPortPrevAction); }
    // The state the policy carries between chunks: everything an episode reset must restore.
    std::vector<frost_buffer*> state_buffers() const { return {rng(), prev_action()}; }
    // Buffers recomputed at every step (tests dirty them to prove they are not state).
    std::vector<frost_buffer*> scratch_buffers() const;
    const PolicyConfig& config() const { return cfg_; }
    const Mlp& mlp() const { return *mlp_; }

private:
    Policy() = default;
    static frost_status record(void* user, frost_stream* s);
    frost_status record_step(frost_stream* s);

    PolicyConfig cfg_;
    std::string name_;
    frost_graph* graph_ = nullptr;
    std::unique_ptr<Mlp> mlp_;
    frost_buffer* in_ = nullptr;   // [mlp_in]: x | emb(t) | obs | subtask (x integrated in place)
    frost_buffer* v_ = nullptr;    // [chunk] velocity
    std::vector<frost_buffer*> owned_;  // buffers this policy allocated (ports it did not get)
};

// Validation shared with the CLI: FROST_ERR_INVALID_ARG naming the bad field.
frost_status validate(const PolicyConfig& cfg);

}  // namespace frost::robot
