// Tensor views: what every op reads and writes. A view is a pointer, a dtype, a shape and
// element strides (row-major by convention: dim 0 is the row / token dimension); it owns nothing.
// The dtype is carried in the view so one forward text serves fp32 (CPU) and bf16 (CUDA) buffers:
// the backend's op implementation checks it. Quantized weight views (FP8_E4M3, NVFP4, INT4) are
// [N, K] in logical elements over packed rows (K * bits / 8 bytes each) and carry their scales.
#pragma once
#include <cstddef>
#include <cstdint>

namespace frost::ops {

enum class DType : uint8_t {
    F32 = 0,
    BF16 = 1,
    I32 = 2,
    U8 = 3,        // raw bytes (the cursor record)
    FP8_E4M3 = 4,  // w = e4m3 * scale (f32 [ceil(N/scale_rows), ceil(K/scale_block)])
    INT4 = 5,      // 8 per int32 from bit 0, stored q + 8; w = (q - zp) * scale (bf16 [N, K/scale_block]),
                   // zp from zero_point (packed 8 rows per int32, stored zp + 8) or 0 when null
    NVFP4 = 6,     // e2m1 pairs, low nibble first; w = e2m1 * e4m3(scale) / global_scale[row];
                   // scale u8 [N, K/16], global_scale f32 [N]
};
const char* dtype_name(DType t);       // "f32", "bf16", "i32", "u8", "fp8_e4m3", "int4", "nvfp4"
bool dtype_from_name(const char* name, DType* out);
size_t dtype_bits(DType t);            // 32, 16, 32, 8, 8, 4, 4
bool dtype_quantized(DType t);         // FP8_E4M3, INT4, NVFP4

constexpr int kMaxRank = 4;

struct Tensor {
    void* data = nullptr;
    DType dtype = DType::F32;
    int32_t rank = 0;
    int64_t shape[kMaxRank] = {};
    int64_t stride[kMaxRank] = {};  // in elements
    // Quantized dtypes only (see DType): scales, columns per scale, rows per scale (FP8: 1 = per
    // row), INT4 zero points (may be null), NVFP4 per-row global scales.
    const void* scale = nullptr;
    int32_t scale_block = 0;
    int32_t scale_rows = 0;
    const int32_t* zero_point = nullptr;
    const float* global_scale = nullptr;
    // FP8 with per-row scales (scale_rows 1) only: rows [0, grid_rows) (whole 128-row blocks of a
    // fused matrix, the GDN in_proj's qkv | z) also carry their scales as the 128x128 grid
    // grid_scale ([grid_rows / 128][ceil(K / 128)] f32, the same values as `scale`), for the CUDA
    // prefill GEMM's block-scaled path; 0 / null: none. Every other reader uses `scale`.
    const float* grid_scale = nullptr;
    int32_t grid_rows = 0;
    // INT4 / NVFP4 only: 1 when each 32-bit word of the packed rows holds its 8 elements in the
    // CUDA kernels' paired order (elements 2j and 2j + 1 at bits 4j and 16 + 4j; written in place
    // by Backend::prepare_quant_weight), 0 in the checkpoint's (element j at bits 4j).
    int32_t nibble_pairs = 0;
    // INT4 / NVFP4 only: 1 when the packed rows are stored in 8-row blocks (the CUDA kernels'
    // kernels::quant4_chunk_index: per 128-wide step, the 8 rows' 64 bytes each together; written
    // by Backend::prepare_quant_weight), 0 row-major. A row range starting at a multiple of 8 of
    // such a view is again one.
    int32_t row_blocks = 0;

    bool quantized() const { return dtype_quantized(dtype); }
    // Bytes of the packed rows plus scales / zero points / global scales (quantized), else the
    // rows x cols elements; what a GEMM must read of this weight.
    double weight_bytes() const;

    bool empty() const { return data == nullptr; }
    template <class T>
    T* as() const { return static_cast<T*>(data); }
    // Elements from data[0] to the last addressed element + 1 (the span a copy must cover).
    int64_t span() const;
    int64_t numel() const;
    int64_t rows() const { return rank > 0 ? shape[0] : 0; }
    int64_t row_stride() const { return rank > 1 ? stride[0] : 1; }
    // The same view `elems` elements further on (e.g. a column block of a fused projection).
    Tensor offset(int64_t elems) const;
};

// [n] contiguous.
Tensor vec(void* data, DType t, int64_t n);
// [rows, cols] with row stride ld (elements).
Tensor mat(void* data, DType t, int64_t rows, int64_t cols, int64_t ld);
// [rows, heads, dim] with row stride ld and head stride hs (dim contiguous).
Tensor heads(void* data, DType t, int64_t rows, int64_t nheads, int64_t dim, int64_t ld, int64_t hs);
// Reshape view of `t` (same data / dtype): [d0, d1, d2] contiguous.
Tensor cube(void* data, DType t, int64_t d0, int64_t d1, int64_t d2);

}  // namespace frost::ops
