// A value critic for the episode host's termination predicate: a small MLP over
// [action chunk, observation] -> one scalar, captured as its own graph. The episode host replays
// it on a second stream of the same ctx, ordered after the policy step with events.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "frost/exec.h"
#include "robot/mlp.h"

namespace frost::robot {

struct CriticConfig {
    int32_t hidden = 64;
    uint64_t weight_seed = 2;
    float out_gain = 1.0f;
    kernels::PolicyAct act = kernels::PolicyAct::gelu;
};

inline constexpr const char* kPortValue = "value";
inline constexpr frost_shape_key kCriticKey = 1;

class Critic {
public:
    // Binds ports "action" and "obs" to the given buffers (shared with the policy: zero copy)
    // and allocates "value" ([1] f32). chunk/obs_dim are the widths of those buffers in floats.
    static frost_status create(frost_ctx* ctx, const std::string& name, const CriticConfig& cfg,
                               frost_buffer* action, int32_t chunk, frost_buffer* obs,
                               int32_t obs_dim, frost_stream* s, std::unique_ptr<Critic>* out);
    ~Critic();
    Critic(const Critic&) = delete;
    Critic& operator=(const Critic&) = delete;

    frost_status capture(frost_stream* s);
    frost_status step(frost_stream* s);  // one replay: value = mlp([action, obs])

    frost_graph* graph() const { return graph_; }
    frost_buffer* value() const { return value_; }
    const Mlp& mlp() const { return *mlp_; }

private:
    Critic() = default;
    static frost_status record(void* user, frost_stream* s);

    std::string name_;
    int32_t chunk_ = 0, obs_dim_ = 0;
    frost_graph* graph_ = nullptr;
    std::unique_ptr<Mlp> mlp_;
    frost_buffer* in_ = nullptr;     // [chunk + obs_dim] scratch
    frost_buffer* value_ = nullptr;  // [1]
};

}  // namespace frost::robot
