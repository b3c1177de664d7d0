// CPU (fp32 reference) kernels of the robot flow-matching policy: linear with activation
// epilogue, RMSNorm, activations, sinusoidal time embedding, axpy (Euler step), counter-based
// noise and its counter advance. Pure functions over the params structs of params/policy.h.
#pragma once
#include "kernels/params/policy.h"

namespace frost::kernels {

void policy_linear_cpu(const PolicyLinearParams& p);
void policy_rmsnorm_cpu(const PolicyRmsNormParams& p);
void policy_act_cpu(const PolicyActParams& p);
void policy_time_embed_cpu(const PolicyTimeEmbedParams& p);
void policy_axpy_cpu(const PolicyAxpyParams& p);
void policy_noise_cpu(const PolicyNoiseParams& p);
void policy_counter_cpu(const PolicyCounterParams& p);

// Scalar activation, shared by the linear epilogue and policy_act_cpu.
float policy_act_scalar(float x, PolicyAct act);

}  // namespace frost::kernels
