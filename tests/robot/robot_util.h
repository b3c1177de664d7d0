// Helpers shared by the robot tests: the backends to parameterize over, an independent float64
// reference of the policy step (its own noise generator, MLP and Euler loop), and inputs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "frost/exec.h"
#include "robot/mlp.h"
#include "robot/policy.h"

namespace frost::robot::test {

// CPU always; CUDA when this build and machine have it.
std::vector<frost_backend> available_backends();
std::string backend_name(const ::testing::TestParamInfo<frost_backend>& info);

// Independent Irwin-Hall noise (same definition as the kernels' header, written out again).
double ref_noise(uint64_t seed, uint64_t counter, uint32_t index);

// y = mlp(x) in float64 over the host copy of the weights.
std::vector<double> ref_mlp(const MlpShape& shape, const MlpHostWeights& w, const std::vector<double>& x);

// One policy step in float64: returns the action chunk [H*D].
std::vector<double> ref_policy_step(const PolicyConfig& cfg, const MlpHostWeights& w, uint64_t seed,
                                    uint64_t counter, const std::vector<double>& prev_action,
                                    const std::vector<float>& obs, const std::vector<float>& subtask);

// Fresh random floats in [-1, 1) (std::random_device seeded, logged through SCOPED_TRACE by caller).
std::vector<float> random_floats(size_t n, uint64_t seed);
uint64_t fresh_seed();

// Observation of a toy environment at `tick` of episode `seed` (independent of actions).
std::vector<float> env_obs(uint64_t seed, int32_t tick, int32_t obs_dim);

// Small shapes so the suite stays fast on 2 CI cores.
PolicyConfig small_policy_config();

}  // namespace frost::robot::test
