// Shared robot test helpers (see robot_util.h).
#include "robot_util.h"

#include <cmath>
#include <random>

namespace frost::robot::test {

std::vector<frost_backend> available_backends() {
    std::vector<frost_backend> v{FROST_BACKEND_CPU};
    if (frost_backend_available(FROST_BACKEND_CUDA)) v.push_back(FROST_BACKEND_CUDA);
    return v;
}

std::string backend_name(const ::testing::TestParamInfo<frost_backend>& info) {
    return info.param == FROST_BACKEND_CUDA ? "cuda" : "cpu";
}

namespace {
uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
double act(double x, kernels::PolicyAct a) {
    switch (a) {
        case kernels::PolicyAct::silu: return x / (1.0 + std::exp(-x));
        case kernels::PolicyAct::gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        case kernels::PolicyAct::none: break;
    }
    return x;
}
}  // namespace

double ref_noise(uint64_t seed, uint64_t counter, uint32_t index) {
    const uint64_t key = mix(seed ^ mix(counter * 0xD1B54A32D192ED03ull + index));
    double sum = 0.0;
    for (uint64_t j = 0; j < 6; ++j) {
        const uint64_t r = mix(key + j);
        sum += double(r >> 40) + double(r & 0xFFFFFF);
    }
    const double mean = 12.0 * (double(1 << 24) - 1.0) / 2.0;
    return (sum - mean) / double(1 << 24);
}

std::vector<double> ref_mlp(const MlpShape& sh, const MlpHostWeights& w, const std::vector<double>& x) {
    std::vector<double> h1(sh.hidden), h2(sh.hidden), y(sh.out);
    for (int o = 0; o < sh.hidden; ++o) {
        double a = w.b1[o];
        for (int i = 0; i < sh.in; ++i) a += double(w.w1[size_t(o) * sh.in + i]) * x[i];
        h1[o] = a;
    }
    double ss = 0.0;
    for (double v : h1) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / sh.hidden + double(kMlpNormEps));
    for (int o = 0; o < sh.hidden; ++o) h1[o] = act(h1[o] * inv * w.g1[o], sh.act);
    for (int o = 0; o < sh.hidden; ++o) {
        double a = w.b2[o];
        for (int i = 0; i < sh.hidden; ++i) a += double(w.w2[size_t(o) * sh.hidden + i]) * h1[i];
        h2[o] = act(a, sh.act);
    }
    for (int o = 0; o < sh.out; ++o) {
        double a = w.b3[o];
        for (int i = 0; i < sh.hidden; ++i) a += double(w.w3[size_t(o) * sh.hidden + i]) * h2[i];
        y[o] = a;
    }
    return y;
}

std::vector<double> ref_policy_step(const PolicyConfig& c, const MlpHostWeights& w, uint64_t seed,
                                    uint64_t counter, const std::vector<double>& prev,
                                    const std::vector<float>& obs, const std::vector<float>& sub) {
    const int C = c.chunk();
    std::vector<double> x(C);
    for (int i = 0; i < C; ++i)
        x[i] = double(c.noise_scale) * ref_noise(seed, counter, uint32_t(i)) + double(c.warm_start) * prev[i];
    const MlpShape sh{c.mlp_in(), c.hidden, C, c.act};
    const int half = c.time_dim / 2;
    for (int k = 0; k < c.euler_steps; ++k) {
        const double t = double(k) / c.euler_steps;
        std::vector<double> in(x);
        for (int i = 0; i < half; ++i) {
            const double freq = std::exp(-std::log(double(c.max_period)) * i / half);
            in.push_back(std::sin(t * c.time_scale * freq));
        }
        for (int i = 0; i < half; ++i) {
            const double freq = std::exp(-std::log(double(c.max_period)) * i / half);
            in.push_back(std::cos(t * c.time_scale * freq));
        }
        for (float o : obs) in.push_back(o);
        for (float s : sub) in.push_back(s);
        const std::vector<double> v = ref_mlp(sh, w, in);
        for (int i = 0; i < C; ++i) x[i] += v[i] / c.euler_steps;
    }
    return x;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& f : v) f = d(g);
    return v;
}

uint64_t fresh_seed() {
    std::random_device rd;
    return (uint64_t(rd()) << 32) | rd();
}

std::vector<float> env_obs(uint64_t seed, int32_t tick, int32_t obs_dim) {
    std::vector<float> o(obs_dim);
    for (int i = 0; i < obs_dim; ++i)
        o[i] = std::sin(0.37f * float(tick) + 0.11f * float(i) + float(seed % 97));
    return o;
}

PolicyConfig small_policy_config() {
    PolicyConfig c;
    c.horizon = 4;
    c.action_dim = 3;
    c.obs_dim = 10;
    c.time_dim = 8;
    c.hidden = 32;
    c.euler_steps = 5;
    return c;
}

}  // namespace frost::robot::test
