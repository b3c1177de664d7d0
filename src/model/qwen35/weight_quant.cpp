// Quantized matrices of the weight table (weight_quant.h).
#include "model/qwen35/weight_quant.h"

#include <cstring>
#include <memory>

#include "exec/error.h"
#include "model/quant/dequant.h"
#include "model/quant/quant_plan.h"
#include "model/safetensors.h"
#include "util/bf16.h"

namespace frost::model::qwen35 {
namespace {

using quant::QuantModule;
using quant::Scheme;

// The CUDA quantized GEMV stages x in shared memory (kernels::kGemvQuantMaxK) and reads rows in
// 16-byte chunks of 16 (fp8) or 32 (4-bit) weights that never straddle a scale group.
constexpr int64_t kMaxK = 20480;  // kernels::kGemvQuantMaxK (lm_gemv_quant.h)
constexpr int64_t kNvfp4Group = 16;
constexpr int kInt4PerWord = 8;

bool is_fp8(Scheme s) { return s == Scheme::Fp8Block || s == Scheme::Fp8Channel || s == Scheme::Fp8Tensor; }

// Rows x columns one fp8 scale covers in module m.
void fp8_block(const QuantModule& m, int64_t* br, int64_t* bc) {
    *br = m.args.scheme == Scheme::Fp8Block ? m.args.block_rows : m.args.scheme == Scheme::Fp8Channel ? 1 : m.out;
    *bc = m.args.scheme == Scheme::Fp8Block ? m.args.block_cols : m.in;
}

ops::DType dtype_of(Scheme s) {
    return is_fp8(s) ? ops::DType::FP8_E4M3 : s == Scheme::Nvfp4 ? ops::DType::NVFP4 : ops::DType::INT4;
}

// The merged fp8 row block: the parts' common one when it tiles every part but the last, else 1.
int64_t fp8_merged_rows(const std::vector<const TensorView*>& parts) {
    int64_t br0 = 0, bc0 = 0;
    fp8_block(*parts[0]->quant, &br0, &bc0);
    for (size_t i = 0; i < parts.size(); ++i) {
        int64_t br = 0, bc = 0;
        fp8_block(*parts[i]->quant, &br, &bc);
        if (br != br0 || (i + 1 < parts.size() && parts[i]->quant->out % br != 0)) return 1;
    }
    return br0;
}

// The 128x128 grid of the FP8 block-scaled prefill GEMM (kernels::kFp8Group).
constexpr int64_t kFp8GridRows = 128;

// Rows of the leading parts that are whole 128x128-block modules (the GDN in_proj's qkv and z,
// before b and a), when they leave rows after them; else 0.
int64_t fp8_grid_rows(const std::vector<const TensorView*>& parts) {
    int64_t rows = 0, total = 0;
    bool open = true;
    for (const TensorView* t : parts) {
        int64_t br = 0, bc = 0;
        fp8_block(*t->quant, &br, &bc);
        open = open && br == kFp8GridRows && bc == kFp8GridRows && t->quant->out % kFp8GridRows == 0;
        if (open) rows += t->quant->out;
        total += t->quant->out;
    }
    return rows < total ? rows : 0;
}

}  // namespace

std::string quant_matrix_refusal(const std::vector<const TensorView*>& parts, int64_t K) {
    if (parts.empty()) return "no parts";
    for (const TensorView* t : parts)
        if (!t->quant) return t->name + " is not quantized";
    const QuantModule& m0 = *parts[0]->quant;
    if (K > kMaxK) return "K = " + std::to_string(K) + " exceeds the quantized GEMV's " + std::to_string(kMaxK);
    for (const TensorView* t : parts) {
        const QuantModule& m = *t->quant;
        if (dtype_of(m.args.scheme) != dtype_of(m0.args.scheme)) return "parts of different formats";
        if (m.in != K) return t->name + " has " + std::to_string(m.in) + " columns, expected " + std::to_string(K);
        if (is_fp8(m.args.scheme)) {
            int64_t br = 0, bc = 0, br0 = 0, bc0 = 0;
            fp8_block(m, &br, &bc);
            fp8_block(m0, &br0, &bc0);
            if (bc != bc0) return "fp8 parts of different column blocks";
            if (bc % 16 != 0 || K % 16 != 0) return "fp8 column block / K not a multiple of 16";
        } else if (m.args.scheme == Scheme::Nvfp4) {
            if (K % 32 != 0) return "nvfp4 K not a multiple of 32";
            if (!m.global_scale || m.global_scale->dtype != DType::F32) return t->name + ": no f32 global scale";
            if (dtype_size(m.scale->dtype) != 1) return t->name + ": nvfp4 scales are not 1 byte";
        } else {
            if (m.g_idx) return t->name + ": int4 act-order (g_idx) is not supported quantized";
            if (m.args.group_size != m0.args.group_size) return "int4 parts of different group sizes";
            if (m.args.group_size % 32 != 0 || K % m.args.group_size != 0)
                return "int4 group size " + std::to_string(m.args.group_size) + " does not tile K in 32s";
        }
    }
    return "";
}

frost_status upload_quant_matrix(const std::string& name, const std::vector<const TensorView*>& parts, int64_t K,
                                 int64_t rows, BufferList* list, WeightStager* stager, frost_stream* stream,
                                 ops::Tensor* view) {
    const QuantModule& m0 = *parts[0]->quant;
    const ops::DType dt = dtype_of(m0.args.scheme);
    const size_t row_bytes = size_t(K) * ops::dtype_bits(dt) / 8;
    int64_t used_rows = 0;
    for (const TensorView* t : parts) used_rows += t->quant->out;
    if (rows < used_rows) return fail(FROST_ERR_INVALID_ARG, "weight %s: %lld rows < %lld", name.c_str(),
                                      (long long)rows, (long long)used_rows);
    frost_buffer* wb = nullptr;
    FROST_TRY(list->add(name, BufferRole::Weights, size_t(rows) * row_bytes, &wb));
    size_t off = 0;
    for (const TensorView* t : parts) {
        stager->add(t->quant->q->data, size_t(t->quant->out) * row_bytes, wb, off);
        off += size_t(t->quant->out) * row_bytes;
    }
    if (rows > used_rows) FROST_TRY(frost_buffer_fill(wb, off, 0, size_t(rows - used_rows) * row_bytes, stream));
    ops::Tensor v = ops::mat(frost_buffer_ptr(wb), dt, rows, K, K);

    auto alloc = [&](const char* suffix, size_t bytes, void** host, void** dev) -> frost_status {
        frost_buffer* b = nullptr;
        FROST_TRY(list->add(name + suffix, BufferRole::Weights, bytes, &b));
        *host = stager->add_owned(bytes, b, 0);
        std::memset(*host, 0, bytes);  // padded rows: scale 0 -> weight 0
        *dev = frost_buffer_ptr(b);
        return FROST_OK;
    };
    void *hs = nullptr, *ds = nullptr;
    if (dt == ops::DType::FP8_E4M3) {
        int64_t br0 = 0, bc = 0;
        fp8_block(m0, &br0, &bc);
        const int64_t br = fp8_merged_rows(parts), cols = (K + bc - 1) / bc, srows = (rows + br - 1) / br;
        FROST_TRY(alloc(".scale", size_t(srows * cols) * sizeof(float), &hs, &ds));
        float* s = static_cast<float*>(hs);
        int64_t r0 = 0;
        for (const TensorView* t : parts) {
            const QuantModule& m = *t->quant;
            std::vector<float> ms;
            FROST_TRY(quant::scales_f32(*m.scale, &ms));
            int64_t mbr = 0, mbc = 0;
            fp8_block(m, &mbr, &mbc);
            const int64_t mcols = (m.in + mbc - 1) / mbc;
            for (int64_t r = 0; r < m.out; r += br)  // one merged scale row per br rows of the part
                for (int64_t c = 0; c < cols; ++c) s[((r0 + r) / br) * cols + c] = ms[size_t((r / mbr) * mcols + c)];
            r0 += m.out;
        }
        v.scale_rows = int32_t(br);
        v.scale_block = int32_t(bc);
        // Per-row scales because a later part does not fill whole blocks (the GDN in_proj's b and
        // a): the leading parts that do (qkv, z) also get their 128x128 grid, which the CUDA
        // prefill GEMM reads to run those rows block-scaled (ops::Tensor::grid_rows).
        const int64_t grid = br == 1 && br0 == kFp8GridRows && bc == kFp8GridRows ? fp8_grid_rows(parts) : 0;
        if (grid > 0) {
            void *hg = nullptr, *dg = nullptr;
            FROST_TRY(alloc(".grid_scale", size_t(grid / kFp8GridRows * cols) * sizeof(float), &hg, &dg));
            float* gs = static_cast<float*>(hg);
            for (int64_t r = 0; r < grid; r += kFp8GridRows)  // the per-row array's value, one row per block
                for (int64_t c = 0; c < cols; ++c) gs[(r / kFp8GridRows) * cols + c] = s[r * cols + c];
            v.grid_scale = static_cast<const float*>(dg);
            v.grid_rows = int32_t(grid);
        }
    } else if (dt == ops::DType::NVFP4) {
        const int64_t groups = K / kNvfp4Group;
        FROST_TRY(alloc(".scale", size_t(rows * groups), &hs, &ds));
        void *hg = nullptr, *dg = nullptr;
        FROST_TRY(alloc(".global_scale", size_t(rows) * sizeof(float), &hg, &dg));
        float* g = static_cast<float*>(hg);
        int64_t r0 = 0;
        for (const TensorView* t : parts) {
            const QuantModule& m = *t->quant;
            std::memcpy(static_cast<uint8_t*>(hs) + r0 * groups, m.scale->data, size_t(m.out * groups));
            const float gs = *static_cast<const float*>(m.global_scale->data);
            for (int64_t r = 0; r < m.out; ++r) g[r0 + r] = gs;
            r0 += m.out;
        }
        for (int64_t r = r0; r < rows; ++r) g[r] = 1.0f;  // 0 / 1: padded rows stay 0, never NaN
        v.scale_block = int32_t(kNvfp4Group);
        v.global_scale = static_cast<const float*>(dg);
    } else {
        const int64_t gsz = m0.args.group_size, groups = K / gsz;
        FROST_TRY(alloc(".scale", size_t(rows * groups) * sizeof(uint16_t), &hs, &ds));
        uint16_t* s = static_cast<uint16_t*>(hs);
        bool asym = false;
        for (const TensorView* t : parts) asym = asym || t->quant->zero_point;
        uint32_t* zp = nullptr;
        void* dz = nullptr;
        const int64_t zrows = (rows + kInt4PerWord - 1) / kInt4PerWord;
        if (asym) {
            void* hz = nullptr;
            FROST_TRY(alloc(".zero_point", size_t(zrows * groups) * sizeof(int32_t), &hz, &dz));
            zp = static_cast<uint32_t*>(hz);
            for (int64_t i = 0; i < zrows * groups; ++i) zp[i] = 0x88888888u;  // stored 8 = zero point 0 (symmetric rows)
        }
        int64_t r0 = 0;
        for (const TensorView* t : parts) {
            const QuantModule& m = *t->quant;
            std::vector<float> ms;
            FROST_TRY(quant::scales_f32(*m.scale, &ms));  // bf16 on disk: exact; f32: rounded once
            for (int64_t i = 0; i < m.out * groups; ++i) s[r0 * groups + i] = util::f32_to_bf16(ms[size_t(i)]);
            if (zp && m.zero_point) {
                const uint32_t* mz = static_cast<const uint32_t*>(m.zero_point->data);
                for (int64_t r = 0; r < m.out; ++r)
                    for (int64_t g = 0; g < groups; ++g) {
                        const uint32_t nib = (mz[(r / kInt4PerWord) * groups + g] >> (4 * (r % kInt4PerWord))) & 0xFu;
                        const int64_t R = r0 + r;
                        uint32_t& word = zp[(R / kInt4PerWord) * groups + g];
                        const int sh = int(4 * (R % kInt4PerWord));
                        word = (word & ~(0xFu << sh)) | (nib << sh);
                    }
            }
            r0 += m.out;
        }
        v.scale_block = int32_t(gsz);
        v.zero_point = static_cast<const int32_t*>(dz);
    }
    v.scale = ds;
    *view = v;
    return FROST_OK;
}

frost_status dequantize_view(const TensorView& v, ops::DType to, void* out) {
    const int64_t n = v.numel();
    std::unique_ptr<float[]> tmp(to == ops::DType::F32 ? nullptr : new (std::nothrow) float[size_t(n)]);
    if (to != ops::DType::F32 && !tmp) return fail(FROST_ERR_OUT_OF_MEMORY, "dequantize %s: out of memory", v.name.c_str());
    float* f = to == ops::DType::F32 ? static_cast<float*>(out) : tmp.get();
    if (v.quant) {
        FROST_TRY(quant::dequantize_module(*v.quant, f));
    } else if (v.dtype == DType::BF16) {
        for (int64_t i = 0; i < n; ++i) f[i] = util::bf16_to_f32(static_cast<const uint16_t*>(v.data)[i]);
    } else if (v.dtype == DType::F32) {
        std::memcpy(f, v.data, size_t(n) * sizeof(float));
    } else {
        return fail(FROST_ERR_UNSUPPORTED, "tensor %s: dtype %s cannot be bound as %s", v.name.c_str(), dtype_name(v.dtype),
                    ops::dtype_name(to));
    }
    if (to == ops::DType::BF16)
        for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(out)[i] = util::f32_to_bf16(f[i]);
    else if (to != ops::DType::F32)
        return fail(FROST_ERR_UNSUPPORTED, "tensor %s cannot be bound as %s", v.name.c_str(), ops::dtype_name(to));
    return FROST_OK;
}

}  // namespace frost::model::qwen35
