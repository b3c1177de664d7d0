// Tensor view helpers (tensor.h).
#include "ops/tensor.h"

#include <cstring>
#include <initializer_list>

namespace frost::ops {

const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::BF16: return "bf16";
        case DType::I32: return "i32";
        case DType::U8: return "u8";
        case DType::FP8_E4M3: return "fp8_e4m3";
        case DType::INT4: return "int4";
        case DType::NVFP4: return "nvfp4";
    }
    return "unknown";
}

bool dtype_from_name(const char* name, DType* out) {
    for (DType t : {DType::F32, DType::BF16, DType::I32, DType::U8, DType::FP8_E4M3, DType::INT4, DType::NVFP4})
        if (name && std::strcmp(name, dtype_name(t)) == 0) {
            *out = t;
            return true;
        }
    return false;
}

size_t dtype_bits(DType t) {
    switch (t) {
        case DType::F32: case DType::I32: return 32;
        case DType::BF16: return 16;
        case DType::U8: case DType::FP8_E4M3: return 8;
        case DType::INT4: case DType::NVFP4: return 4;
    }
    return 0;
}

bool dtype_quantized(DType t) { return t == DType::FP8_E4M3 || t == DType::INT4 || t == DType::NVFP4; }

double Tensor::weight_bytes() const {
    if (empty() || rank < 2) return 0;
    const double N = double(shape[0]), K = double(shape[1]);
    const double w = N * K * double(dtype_bits(dtype)) / 8.0;
    if (!quantized() || scale_block <= 0) return w;
    const double groups = double((shape[1] + scale_block - 1) / scale_block);
    switch (dtype) {
        case DType::FP8_E4M3: {
            const int64_t br = scale_rows > 0 ? scale_rows : 1;
            return w + double((shape[0] + br - 1) / br) * groups * 4.0;
        }
        case DType::INT4: return w + N * groups * 2.0 + (zero_point ? double((shape[0] + 7) / 8) * groups * 4.0 : 0.0);
        case DType::NVFP4: return w + N * groups + N * 4.0;
        default: return w;
    }
}

int64_t Tensor::span() const {
    if (rank == 0) return data ? 1 : 0;
    int64_t last = 0;
    for (int i = 0; i < rank; ++i) {
        if (shape[i] <= 0) return 0;
        last += (shape[i] - 1) * stride[i];
    }
    return last + 1;
}

int64_t Tensor::numel() const {
    int64_t n = rank ? 1 : 0;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
}

Tensor Tensor::offset(int64_t elems) const {
    Tensor t = *this;
    if (data) t.data = static_cast<uint8_t*>(data) + elems * int64_t(dtype_bits(dtype)) / 8;
    return t;
}

Tensor vec(void* data, DType t, int64_t n) {
    Tensor v;
    v.data = data;
    v.dtype = t;
    v.rank = 1;
    v.shape[0] = n;
    v.stride[0] = 1;
    return v;
}

Tensor mat(void* data, DType t, int64_t rows, int64_t cols, int64_t ld) {
    Tensor v;
    v.data = data;
    v.dtype = t;
    v.rank = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    v.stride[0] = ld;
    v.stride[1] = 1;
    return v;
}

Tensor heads(void* data, DType t, int64_t rows, int64_t nheads, int64_t dim, int64_t ld, int64_t hs) {
    Tensor v;
    v.data = data;
    v.dtype = t;
    v.rank = 3;
    v.shape[0] = rows;
    v.shape[1] = nheads;
    v.shape[2] = dim;
    v.stride[0] = ld;
    v.stride[1] = hs;
    v.stride[2] = 1;
    return v;
}

Tensor cube(void* data, DType t, int64_t d0, int64_t d1, int64_t d2) {
    return heads(data, t, d0, d1, d2, d1 * d2, d2);
}

}  // namespace frost::ops
