// Synthetic weights, buffers and the recorded forward pass of the robot MLP (see mlp.h).
#include "robot/mlp.h"

#include <cmath>

#include "exec/error.h"
#include "kernels/cpu/policy_noise.h"
#include "robot/policy_ops.h"

namespace frost::robot {

namespace {

constexpr float kBiasScale = 0.1f;       // biases relative to the weight scale
constexpr float kGainJitter = 0.1f;      // norm gains in [1 - j, 1 + j]
constexpr uint64_t kTensorStride = 0x100000000ull;  // separates tensors in the seed stream
constexpr double kTwoPow53 = 9007199254740992.0;

// Uniform in [-1, 1) from (seed, tensor, index): 53 bits of one SplitMix64 output.
float uniform_pm1(uint64_t seed, uint64_t tensor, uint64_t index) {
    const uint64_t r = kernels::policy_mix64(seed ^ kernels::policy_mix64(tensor * kTensorStride + index));
    return static_cast<float>(2.0 * (static_cast<double>(r >> 11) / kTwoPow53) - 1.0);
}

std::vector<float> uniform_tensor(size_t n, uint64_t seed, uint64_t tensor, float scale,
                                  float offset) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = offset + scale * uniform_pm1(seed, tensor, i);
    return v;
}

frost_status alloc_upload(frost_ctx* ctx, const std::string& name, const std::vector<float>& v,
                          frost_stream* s, frost_buffer** out) {
    FROST_TRY(frost_buffer_alloc(ctx, name.c_str(), v.size() * sizeof(float), FROST_SPACE_DEVICE, out));
    return upload(*out, 0, v.data(), v.size() * sizeof(float), s);
}

}  // namespace

MlpHostWeights mlp_synthetic_weights(const MlpShape& sh, uint64_t seed, float out_gain) {
    const float s1 = 1.0f / std::sqrt(static_cast<float>(sh.in));
    const float s2 = 1.0f / std::sqrt(static_cast<float>(sh.hidden));
    MlpHostWeights w;
    uint64_t t = 0;
    w.w1 = uniform_tensor(size_t(sh.hidden) * sh.in, seed, t++, s1, 0.0f);
    w.b1 = uniform_tensor(size_t(sh.hidden), seed, t++, kBiasScale * s1, 0.0f);
    w.g1 = uniform_tensor(size_t(sh.hidden), seed, t++, kGainJitter, 1.0f);
    w.w2 = uniform_tensor(size_t(sh.hidden) * sh.hidden, seed, t++, s2, 0.0f);
    w.b2 = uniform_tensor(size_t(sh.hidden), seed, t++, kBiasScale * s2, 0.0f);
    w.w3 = uniform_tensor(size_t(sh.out) * sh.hidden, seed, t++, out_gain * s2, 0.0f);
    w.b3 = uniform_tensor(size_t(sh.out), seed, t++, out_gain * kBiasScale * s2, 0.0f);
    return w;
}

frost_status Mlp::create(frost_ctx* ctx, const std::string& prefix, const MlpShape& shape,
                         MlpHostWeights weights, frost_stream* s, std::unique_ptr<Mlp>* out) {
    if (shape.in <= 0 || shape.hidden <= 0 || shape.out <= 0)
        return fail(FROST_ERR_INVALID_ARG, "mlp %s: widths must be positive (in %d, hidden %d, out %d)",
                    prefix.c_str(), shape.in, shape.hidden, shape.out);
    const size_t h = size_t(shape.hidden);
    if (weights.w1.size() != h * shape.in || weights.b1.size() != h || weights.g1.size() != h ||
        weights.w2.size() != h * h || weights.b2.size() != h ||
        weights.w3.size() != size_t(shape.out) * h || weights.b3.size() != size_t(shape.out))
        return fail(FROST_ERR_INVALID_ARG, "mlp %s: weight sizes do not match the shape", prefix.c_str());
    std::unique_ptr<Mlp> m(new Mlp());
    m->shape_ = shape;
    m->host_ = std::move(weights);
    const MlpHostWeights& w = m->host_;
    FROST_TRY(alloc_upload(ctx, prefix + ".w1", w.w1, s, &m->w1_));
    FROST_TRY(alloc_upload(ctx, prefix + ".b1", w.b1, s, &m->b1_));
    FROST_TRY(alloc_upload(ctx, prefix + ".g1", w.g1, s, &m->g1_));
    FROST_TRY(alloc_upload(ctx, prefix + ".w2", w.w2, s, &m->w2_));
    FROST_TRY(alloc_upload(ctx, prefix + ".b2", w.b2, s, &m->b2_));
    FROST_TRY(alloc_upload(ctx, prefix + ".w3", w.w3, s, &m->w3_));
    FROST_TRY(alloc_upload(ctx, prefix + ".b3", w.b3, s, &m->b3_));
    FROST_TRY(frost_buffer_alloc(ctx, (prefix + ".h1").c_str(), h * sizeof(float), FROST_SPACE_DEVICE, &m->h1_));
    FROST_TRY(frost_buffer_alloc(ctx, (prefix + ".h2").c_str(), h * sizeof(float), FROST_SPACE_DEVICE, &m->h2_));
    *out = std::move(m);
    return FROST_OK;
}

Mlp::~Mlp() {
    for (frost_buffer* b : {w1_, b1_, g1_, w2_, b2_, w3_, b3_, h1_, h2_}) frost_buffer_free(b);
}

frost_status Mlp::record(frost_stream* s, const float* x, float* y) const {
    using namespace kernels;
    float* h1 = fptr(h1_);
    float* h2 = fptr(h2_);
    FROST_TRY(enqueue_linear(s, PolicyLinearParams{x, fptr(w1_), fptr(b1_), h1, 1, shape_.in,
                                                   shape_.hidden, PolicyAct::none}));
    FROST_TRY(enqueue_rmsnorm(s, PolicyRmsNormParams{h1, fptr(g1_), h1, 1, shape_.hidden, kMlpNormEps}));
    FROST_TRY(enqueue_act(s, PolicyActParams{h1, shape_.hidden, shape_.act}));
    FROST_TRY(enqueue_linear(s, PolicyLinearParams{h1, fptr(w2_), fptr(b2_), h2, 1, shape_.hidden,
                                                   shape_.hidden, shape_.act}));
    return enqueue_linear(s, PolicyLinearParams{h2, fptr(w3_), fptr(b3_), y, 1, shape_.hidden,
                                                shape_.out, PolicyAct::none});
}

}  // namespace frost::robot
