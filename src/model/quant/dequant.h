// CPU dequantization: the reference every quantized kernel is tested against. Each format turns
// into fp32 [out, in] with one rounding at most (the fp32 product / quotient the published
// decoders compute), so a bf16 rounding of it equals what transformers + compressed-tensors
// produce in bf16, and the fp32 value itself equals a numpy float32 decoder bit for bit.
#pragma once
#include <cstdint>
#include <vector>

#include "frost/exec.h"
#include "model/quant/quant_plan.h"
#include "ops/tensor.h"

namespace frost::model::quant {

float fp4_e2m1_to_f32(uint8_t nibble);  // low 4 bits: sign, 2 exponent, 1 mantissa
float f16_to_f32(uint16_t bits);

// Raw-array decoders (tests and the kernel parity checks call these directly).
// w = fp8 x scale[r / block_rows][c / block_cols]; scale [ceil(out/br), ceil(in/bc)] fp32.
// Per-channel is block (1, in); per-tensor is block (out, in).
void dequant_fp8_block(const uint8_t* w, const float* scale, int64_t out, int64_t in, int64_t block_rows,
                       int64_t block_cols, float* dst);
// w = e2m1 x (fp8 scale / global_scale); packed [out, in/2] low nibble first; scale [out, ceil(in/16)].
void dequant_nvfp4(const uint8_t* packed, const uint8_t* scale_fp8, float global_scale, int64_t out, int64_t in,
                   float* dst);
// w = (q - zp) x scale; packed [out, ceil(in/8)] with value j of a word at bits 4j and +8 offset;
// scale [out, groups] fp32; zp_packed [ceil(out/8), groups] (rows packed 8 per word, +8 offset) or
// null for symmetric; g_idx [in] (group of each column) or null for column / group_size.
void dequant_int4(const int32_t* packed, const float* scale, const int32_t* zp_packed, const int32_t* g_idx,
                  int64_t out, int64_t in, int64_t group_size, float* dst);

// A scale tensor (F32, BF16, F16 or F8_E4M3) widened to fp32, element order kept.
frost_status scales_f32(const CheckpointTensor& t, std::vector<float>* out);

// Dequantizes a quantized ops view in host memory (ops/tensor.h layouts: FP8_E4M3, NVFP4 with
// per-row global scales, INT4 with bf16 scales) into dst ([rows, cols] fp32): the reference the
// device-side quantized GEMM and the weight table's merged layouts are tested against.
frost_status dequantize_tensor(const ops::Tensor& w, float* dst);

// Dequantizes a planned module into dst (out * in floats, row-major [out, in]).
frost_status dequantize_module(const QuantModule& m, float* dst);

}  // namespace frost::model::quant
