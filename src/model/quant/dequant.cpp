// Element decoders and per-format dequantization loops (reference speed: a few GB/s, once at load).
#include "model/quant/dequant.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "exec/error.h"
#include "model/safetensors.h"
#include "util/bf16.h"
#include "util/fp8.h"

namespace frost::model::quant {
namespace {

constexpr int kInt4Offset = 8;  // int4 values are stored unsigned as q + 8
constexpr int kInt4PerWord = 8;
constexpr int kNvfp4Group = 16;

// Any float-like scale tensor -> fp32 values.

}  // namespace

float fp4_e2m1_to_f32(uint8_t nibble) {
    static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float v = kMag[nibble & 0x7];
    return (nibble & 0x8) ? -v : v;
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float v;
    if (e == 0) v = std::ldexp(float(m), -24);
    else if (e == 0x1F) v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else v = std::ldexp(float(m | 0x400), e - 25);
    uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    u |= sign;
    std::memcpy(&v, &u, sizeof(v));
    return v;
}

void dequant_fp8_block(const uint8_t* w, const float* scale, int64_t out, int64_t in, int64_t br, int64_t bc,
                       float* dst) {
    const int64_t scale_cols = (in + bc - 1) / bc;
    for (int64_t r = 0; r < out; ++r) {
        const float* srow = scale + (r / br) * scale_cols;
        for (int64_t c = 0; c < in; ++c) dst[r * in + c] = util::e4m3_to_f32(w[r * in + c]) * srow[c / bc];
    }
}

void dequant_nvfp4(const uint8_t* packed, const uint8_t* scale_fp8, float global_scale, int64_t out, int64_t in,
                   float* dst) {
    const int64_t groups = (in + kNvfp4Group - 1) / kNvfp4Group, row_bytes = in / 2;
    for (int64_t r = 0; r < out; ++r) {
        for (int64_t c = 0; c < in; ++c) {
            // compressed-tensors: scale / global_scale first (fp32), then times the e2m1 value.
            const float s = util::e4m3_to_f32(scale_fp8[r * groups + c / kNvfp4Group]) / global_scale;
            const uint8_t byte = packed[r * row_bytes + c / 2];
            dst[r * in + c] = fp4_e2m1_to_f32((c & 1) ? uint8_t(byte >> 4) : byte) * s;
        }
    }
}

void dequant_int4(const int32_t* packed, const float* scale, const int32_t* zp_packed, const int32_t* g_idx,
                  int64_t out, int64_t in, int64_t group_size, float* dst) {
    const int64_t words = (in + kInt4PerWord - 1) / kInt4PerWord, groups = (in + group_size - 1) / group_size;
    for (int64_t r = 0; r < out; ++r) {
        for (int64_t c = 0; c < in; ++c) {
            const uint32_t word = uint32_t(packed[r * words + c / kInt4PerWord]);
            const int q = int((word >> (4 * (c % kInt4PerWord))) & 0xF);
            const int64_t g = g_idx ? g_idx[c] : c / group_size;
            int zp = kInt4Offset;
            if (zp_packed) {
                const uint32_t zw = uint32_t(zp_packed[(r / kInt4PerWord) * groups + g]);
                zp = int((zw >> (4 * (r % kInt4PerWord))) & 0xF);
            }
            dst[r * in + c] = float(q - zp) * scale[r * groups + g];
        }
    }
}

frost_status scales_f32(const CheckpointTensor& t, std::vector<float>* out) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    out->resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        switch (t.dtype) {
            case DType::F32: (*out)[i] = static_cast<const float*>(t.data)[i]; break;
            case DType::BF16: (*out)[i] = util::bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]); break;
            case DType::F16: (*out)[i] = f16_to_f32(static_cast<const uint16_t*>(t.data)[i]); break;
            case DType::F8_E4M3: (*out)[i] = util::e4m3_to_f32(static_cast<const uint8_t*>(t.data)[i]); break;
            default:
                return fail(FROST_ERR_UNSUPPORTED, "%s: scale dtype %s cannot be decoded", t.name.c_str(),
                            dtype_name(t.dtype));
        }
    }
    return FROST_OK;
}

frost_status dequantize_tensor(const ops::Tensor& w, float* dst) {
    if (w.rank != 2 || !w.data || !w.scale || w.scale_block <= 0 || w.stride[0] != w.shape[1])
        return fail(FROST_ERR_INVALID_ARG, "dequantize_tensor: not a contiguous quantized [rows, cols] view with scales");
    const int64_t N = w.shape[0], K = w.shape[1];
    switch (w.dtype) {
        case ops::DType::FP8_E4M3:
            dequant_fp8_block(static_cast<const uint8_t*>(w.data), static_cast<const float*>(w.scale), N, K,
                              w.scale_rows > 0 ? w.scale_rows : 1, w.scale_block, dst);
            return FROST_OK;
        case ops::DType::NVFP4: {
            if (!w.global_scale || w.scale_block != kNvfp4Group)
                return fail(FROST_ERR_INVALID_ARG, "dequantize_tensor: nvfp4 needs per-row global scales, group 16");
            const int64_t groups = K / kNvfp4Group;
            for (int64_t r = 0; r < N; ++r)
                dequant_nvfp4(static_cast<const uint8_t*>(w.data) + r * (K / 2),
                              static_cast<const uint8_t*>(w.scale) + r * groups, w.global_scale[r], 1, K, dst + r * K);
            return FROST_OK;
        }
        case ops::DType::INT4: {
            const int64_t groups = (K + w.scale_block - 1) / w.scale_block;
            std::vector<float> s(size_t(N * groups));
            for (size_t i = 0; i < s.size(); ++i) s[i] = util::bf16_to_f32(static_cast<const uint16_t*>(w.scale)[i]);
            dequant_int4(static_cast<const int32_t*>(w.data), s.data(), w.zero_point, nullptr, N, K, w.scale_block, dst);
            return FROST_OK;
        }
        default:
            return fail(FROST_ERR_INVALID_ARG, "dequantize_tensor: %s is not a quantized dtype", ops::dtype_name(w.dtype));
    }
}

frost_status dequantize_module(const QuantModule& m, float* dst) {
    if (!m.q || !m.scale) return fail(FROST_ERR_INVALID_ARG, "dequantize %s: module is not fully planned", m.module.c_str());
    const WeightArgs& a = m.args;
    switch (a.scheme) {
        case Scheme::Fp8Block:
        case Scheme::Fp8Channel:
        case Scheme::Fp8Tensor: {
            std::vector<float> s;
            FROST_TRY(scales_f32(*m.scale, &s));
            const int64_t br = a.scheme == Scheme::Fp8Block ? a.block_rows : a.scheme == Scheme::Fp8Channel ? 1 : m.out;
            const int64_t bc = a.scheme == Scheme::Fp8Block ? a.block_cols : m.in;
            dequant_fp8_block(static_cast<const uint8_t*>(m.q->data), s.data(), m.out, m.in, br, bc, dst);
            return FROST_OK;
        }
        case Scheme::Nvfp4: {
            if (!m.global_scale) return fail(FROST_ERR_INVALID_ARG, "dequantize %s: no global scale", m.module.c_str());
            const float gs = *static_cast<const float*>(m.global_scale->data);
            dequant_nvfp4(static_cast<const uint8_t*>(m.q->data), static_cast<const uint8_t*>(m.scale->data), gs, m.out,
                          m.in, dst);
            return FROST_OK;
        }
        case Scheme::Int4: {
            std::vector<float> s;
            FROST_TRY(scales_f32(*m.scale, &s));
            dequant_int4(static_cast<const int32_t*>(m.q->data), s.data(),
                         m.zero_point ? static_cast<const int32_t*>(m.zero_point->data) : nullptr,
                         m.g_idx ? static_cast<const int32_t*>(m.g_idx->data) : nullptr, m.out, m.in, a.group_size, dst);
            return FROST_OK;
        }
    }
    return fail(FROST_ERR_UNSUPPORTED, "dequantize %s: unknown scheme", m.module.c_str());
}

}  // namespace frost::model::quant
