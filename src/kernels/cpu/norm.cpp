// Normalisations: zero-centred / plain RMSNorm, the gated RMSNorm of the GDN output and the
// per-head l2norm of GDN q/k. Sums of squares run in double in a fixed order per row/head.
#include <cmath>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace frost::kernels::cpu {
namespace {

inline double sum_squares(const float* x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
}

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace

frost_status rmsnorm(const RmsNormParams& p) {
    if (!p.x || !p.w || !p.y || p.dim <= 0 || p.heads <= 0) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    if (rows == 0) return FROST_OK;
    const int64_t first = p.last_row_only ? rows - 1 : 0;
    const int64_t count = p.last_row_only ? 1 : rows;
    parallel_for(count * p.heads, 8, [&](int64_t lo, int64_t hi) {
        for (int64_t it = lo; it < hi; ++it) {
            const int64_t r = it / p.heads, h = it % p.heads;
            const float* x = p.x + (first + r) * p.x_row_stride + h * p.x_head_stride;
            float* y = p.y + r * p.y_row_stride + h * p.y_head_stride;
            const float inv = static_cast<float>(1.0 / std::sqrt(sum_squares(x, p.dim) / p.dim + p.eps));
            for (int i = 0; i < p.dim; ++i) {
                const float g = p.zero_centred ? 1.0f + p.w[i] : p.w[i];
                y[i] = (x[i] * inv) * g;
            }
        }
    });
    return FROST_OK;
}

frost_status gated_rmsnorm(const GatedRmsNormParams& p) {
    if (!p.x || !p.z || !p.w || !p.y || p.dim <= 0 || p.heads <= 0) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    parallel_for(static_cast<int64_t>(rows) * p.heads, 8, [&](int64_t lo, int64_t hi) {
        for (int64_t it = lo; it < hi; ++it) {
            const int64_t r = it / p.heads, h = it % p.heads;
            const float* x = p.x + (r * p.heads + h) * p.dim;
            const float* z = p.z + r * p.z_row_stride + h * p.dim;
            float* y = p.y + (r * p.heads + h) * p.dim;
            const float inv = static_cast<float>(1.0 / std::sqrt(sum_squares(x, p.dim) / p.dim + p.eps));
            for (int i = 0; i < p.dim; ++i) y[i] = p.w[i] * (x[i] * inv) * silu(z[i]);
        }
    });
    return FROST_OK;
}

frost_status l2norm(const L2NormParams& p) {
    if (!p.x || p.dim <= 0 || p.heads <= 0) return FROST_ERR_INVALID_ARG;
    const int32_t rows = launch_rows(p.n_rows, p.max_rows);
    parallel_for(static_cast<int64_t>(rows) * p.heads, 16, [&](int64_t lo, int64_t hi) {
        for (int64_t it = lo; it < hi; ++it) {
            const int64_t r = it / p.heads, h = it % p.heads;
            float* x = p.x + r * p.row_stride + h * p.dim;
            const float inv = static_cast<float>(1.0 / std::sqrt(sum_squares(x, p.dim) + p.eps));
            for (int i = 0; i < p.dim; ++i) x[i] = x[i] * inv * p.scale;
        }
    });
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
