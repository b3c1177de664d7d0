// Per-token elementwise kernels: embedding lookup, SwiGLU, GDN gates (β, g), partial NeoX RoPE,
// the KV-cache append, the cursor bookkeeping nodes of a step graph and a prefill's tail row.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace frost::kernels::cpu {
namespace {

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

// torch.nn.functional.softplus with its default threshold: x above it is returned unchanged.
constexpr float kSoftplusThreshold = 20.0f;
inline float softplus(float v) { return v > kSoftplusThreshold ? v : std::log1p(std::exp(v)); }

}  // namespace

frost_status embed(const EmbedParams& p) {
    if (!p.table || !p.ids || !p.y || p.dim <= 0) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    for (int32_t r = 0; r < rows; ++r)
        if (p.ids[r] < 0 || p.ids[r] >= p.vocab) return FROST_ERR_OUT_OF_RANGE;
    for (int32_t r = 0; r < rows; ++r) {
        float* y = p.y + static_cast<int64_t>(r) * p.dim;
        const int64_t off = static_cast<int64_t>(p.ids[r]) * p.dim;
        if (p.table_type == WeightType::F32) {
            std::memcpy(y, static_cast<const float*>(p.table) + off, sizeof(float) * p.dim);
        } else {
            const uint16_t* t = static_cast<const uint16_t*>(p.table) + off;
            for (int i = 0; i < p.dim; ++i) y[i] = bf16_to_f32(t[i]);
        }
    }
    return FROST_OK;
}

frost_status swiglu(const SwigluParams& p) {
    if (!p.x || !p.y || p.F <= 0) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    parallel_for(rows, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
            const float* g = p.x + r * 2 * p.F;
            const float* u = g + p.F;
            float* y = p.y + r * p.F;
            for (int i = 0; i < p.F; ++i) y[i] = silu(g[i]) * u[i];
        }
    });
    return FROST_OK;
}

frost_status gdn_gates(const GdnGateParams& p) {
    if (!p.a || !p.b || !p.A_log || !p.dt_bias || !p.beta || !p.g) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    for (int64_t r = 0; r < rows; ++r) {
        for (int h = 0; h < p.heads; ++h) {
            const float b = p.b[r * p.in_row_stride + h];
            const float a = p.a[r * p.in_row_stride + h];
            p.beta[r * p.heads + h] = 1.0f / (1.0f + std::exp(-b));
            p.g[r * p.heads + h] = -std::exp(p.A_log[h]) * softplus(a + p.dt_bias[h]);
        }
    }
    return FROST_OK;
}

frost_status rope(const RopeParams& p) {
    if (!p.x || !p.cursor || p.rotary_dim <= 0 || p.rotary_dim % 2 || p.rotary_dim > p.head_dim)
        return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(&p.cursor->n_tokens, p.max_rows);
    const int half = p.rotary_dim / 2;
    const int32_t pos0 = p.cursor->pos;
    for (int64_t r = 0; r < rows; ++r) {
        // fp32 angles exactly as transformers builds them: inv_freq in fp32, then pos * inv_freq.
        const float pos = static_cast<float>(pos0 + r);
        for (int i = 0; i < half; ++i) {
            float inv_freq =
                1.0f / std::pow(p.theta, static_cast<float>(2 * i) / static_cast<float>(p.rotary_dim));
            if (p.inv_freq_bf16) inv_freq = round_to_bf16(inv_freq);
            const float ang = pos * inv_freq;
            const float c = std::cos(ang), s = std::sin(ang);
            for (int h = 0; h < p.heads; ++h) {
                float* x = p.x + r * p.row_stride + h * p.head_stride;
                const float x0 = x[i], x1 = x[i + half];
                x[i] = x0 * c - x1 * s;
                x[i + half] = x1 * c + x0 * s;
            }
        }
    }
    return FROST_OK;
}

frost_status kv_append(const KvAppendParams& p) {
    if (!p.k || !p.v || !p.k_cache || !p.v_cache || !p.cursor) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(&p.cursor->n_tokens, p.max_rows);
    const int64_t pos0 = p.cursor->pos;
    if (pos0 < 0 || pos0 + rows > p.max_seq) return FROST_ERR_OUT_OF_RANGE;
    for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(p.k_cache + (pos0 + r) * p.kv_dim, p.k + r * p.src_row_stride, sizeof(float) * p.kv_dim);
        std::memcpy(p.v_cache + (pos0 + r) * p.kv_dim, p.v + r * p.src_row_stride, sizeof(float) * p.kv_dim);
    }
    return FROST_OK;
}

frost_status cursor_op(const CursorParams& p) {
    if (!p.cursor) return FROST_ERR_INVALID_ARG;
    switch (p.op) {
        case kCursorDecodeBegin:
            if (!p.ids) return FROST_ERR_INVALID_ARG;
            p.ids[0] = p.cursor->last_token;
            p.cursor->n_tokens = 1;
            return FROST_OK;
        case kCursorAdvance:
            p.cursor->pos += p.cursor->n_tokens;
            p.cursor->steps += 1;
            return FROST_OK;
        default:
            return FROST_ERR_INVALID_ARG;
    }
}

frost_status tail_row(const TailRowParams& p) {
    if (!p.cursor || !p.tail || p.max_rows <= 0 || p.segments < 0 || p.segments > kTailSegments)
        return FROST_ERR_INVALID_ARG;
    // An empty step (never recorded by the engine) reads as one row, as the CUDA kernel does.
    const int32_t n = std::max<int32_t>(1, launch_rows(&p.cursor->n_tokens, p.max_rows));
    for (int i = 0; i < p.segments; ++i) {
        if (!p.base[i] || p.row_bytes[i] <= 0 || p.ld_bytes[i] < p.row_bytes[i]) return FROST_ERR_INVALID_ARG;
        char* row0 = static_cast<char*>(p.base[i]);
        if (n > 1) std::memcpy(row0, row0 + (n - 1) * p.ld_bytes[i], size_t(p.row_bytes[i]));
    }
    StepCursor t = *p.cursor;
    t.pos += n - 1;
    t.n_tokens = 1;
    *p.tail = t;
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
