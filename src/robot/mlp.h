// The small MLP shared by the robot policy (velocity field) and the value critic:
//   h1 = act(rmsnorm(W1 x + b1) * g1);  h2 = act(W2 h1 + b2);  y = W3 h2 + b3
// Owns its weight and scratch buffers; records its forward pass onto a capturing stream.
// Weights are deterministic synthetic values drawn from a seed (kept on the host as well, so
// tests can run an independent float64 reference over the very same numbers).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "kernels/params/policy.h"

namespace frost::robot {

struct MlpShape {
    int32_t in = 0;      // input width
    int32_t hidden = 0;  // width of both hidden layers
    int32_t out = 0;     // output width
    kernels::PolicyAct act = kernels::PolicyAct::silu;
};

constexpr float kMlpNormEps = 1e-5f;

// Host copy of the weights, row-major, y = x W^T + b.
struct MlpHostWeights {
    std::vector<float> w1, b1, g1;  // [hidden, in], [hidden], [hidden]
    std::vector<float> w2, b2;      // [hidden, hidden], [hidden]
    std::vector<float> w3, b3;      // [out, hidden], [out]
};

// Uniform(-gain/sqrt(fan_in), gain/sqrt(fan_in)) weights from (seed, tensor index, element);
// biases at a tenth of that scale; norm gains 1 + small jitter. `out_gain` scales W3 and b3.
MlpHostWeights mlp_synthetic_weights(const MlpShape& shape, uint64_t seed, float out_gain);

class Mlp {
public:
    // Allocates device buffers named "<prefix>.w1" ... and uploads `weights` on `s` (blocking).
    static frost_status create(frost_ctx* ctx, const std::string& prefix, const MlpShape& shape,
                               MlpHostWeights weights, frost_stream* s, std::unique_ptr<Mlp>* out);
    ~Mlp();
    Mlp(const Mlp&) = delete;
    Mlp& operator=(const Mlp&) = delete;

    // Enqueues y = mlp(x) on `s`. x: [in] floats, y: [out] floats (device pointers of the ctx).
    frost_status record(frost_stream* s, const float* x, float* y) const;

    const MlpShape& shape() const { return shape_; }
    const MlpHostWeights& host_weights() const { return host_; }
    std::vector<frost_buffer*> scratch_buffers() const { return {h1_, h2_}; }

private:
    Mlp() = default;
    MlpShape shape_;
    MlpHostWeights host_;
    frost_buffer *w1_ = nullptr, *b1_ = nullptr, *g1_ = nullptr;
    frost_buffer *w2_ = nullptr, *b2_ = nullptr, *w3_ = nullptr, *b3_ = nullptr;
    frost_buffer *h1_ = nullptr, *h2_ = nullptr;  // scratch [hidden] each
};

// Returns the float pointer of a buffer (device memory on cuda).
inline float* fptr(frost_buffer* b) { return static_cast<float*>(frost_buffer_ptr(b)); }

}  // namespace frost::robot
