// CUDA launchers of the robot policy kernels (fp32), same params structs as the CPU reference
// (params/policy.h). `stream` is a cudaStream_t passed as void* so this header needs no CUDA
// include; each launcher returns the cudaError_t of the launch as an int (0 = success), which
// src/robot maps to a frost_status. Defined only in builds with FROST_WITH_CUDA.
#pragma once
#include "kernels/params/policy.h"

namespace frost::kernels {

int policy_linear_cuda(const PolicyLinearParams& p, void* stream);
int policy_rmsnorm_cuda(const PolicyRmsNormParams& p, void* stream);
int policy_act_cuda(const PolicyActParams& p, void* stream);
int policy_time_embed_cuda(const PolicyTimeEmbedParams& p, void* stream);
int policy_axpy_cuda(const PolicyAxpyParams& p, void* stream);
int policy_noise_cuda(const PolicyNoiseParams& p, void* stream);
int policy_counter_cuda(const PolicyCounterParams& p, void* stream);

// cudaGetErrorString of a launcher's return value.
const char* policy_cuda_error_string(int err);

}  // namespace frost::kernels
