// How far a model's own fp32 logits move when its bf16 weights move by one unit in the last
// place. A bf16 engine rounds every activation to bf16 (relative 2^-9), so where the fp32 model
// answers ulp-level noise in its weights with a large change, the bf16 engine's distance from
// the fp32 reference is large too, whatever its kernels do. Parity tests use this to tell an
// ill-conditioned prompt position from a kernel bug instead of loosening their bounds everywhere.
// Seen on moe-tiny-gpu --decisive-router, seed 45323 (CPU engine, 2026-12-01): one flip draw moved
// prompt positions 0 / 1 / 3 by rel L2 0.39 / 0.36 / 0.20 (median over 300 positions 0.036), the
// positions where the CUDA engine stood 0.34 / 0.35 / 0.22 from the CPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace frost::test {

struct NoiseSensitivity {
    std::vector<double> rel;       // [position] max over the draws of rel L2(perturbed, reference)
    std::vector<bool> top1_kept;   // [position] every draw kept the reference's arg-max
};

// `ref_logits` [prompt.size(), V]: the CPU engine's logits of every prompt position on `dir`
// (a single-file checkpoint). Each of `draws` copies flips the last mantissa bit of every bf16
// element of the checkpoint with probability 1/2 (seeded from `seed` and the draw), runs the
// CPU engine on the prompt and compares with the reference. Adds a gtest failure on any error.
NoiseSensitivity prompt_noise_sensitivity(const std::string& dir, const std::vector<int32_t>& prompt,
                                          const std::vector<float>& ref_logits, int draws, uint64_t seed);

// The CPU engine's logits of every prompt position (the whole prompt in one prefill step).
std::vector<float> cpu_prompt_logits(const std::string& dir, const std::vector<int32_t>& prompt);

}  // namespace frost::test
