// y = x W^T for W [out, in] row-major fp32: the CPU GEMM behind every projection.
// Chunk invariance (capsules.md "Chunk alignment"): each y[m, n] is one 8-lane FMA chain over k
// in steps of 8 (lane l sums k = l, l+8, ...), then a fixed horizontal reduction, then the tail.
// Register tiles (up to 4 rows x 2 columns) only decide which chains run side by side, never the
// order inside a chain, so a row's result does not depend on M, the tiling or the thread count.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "util/fp8.h"

namespace frost::kernels::cpu {
namespace {

constexpr int kLanes = 8;      // fp32 lanes of one AVX2 register
constexpr int kTileRows = 4;   // register tile: rows of x ...
constexpr int kTileCols = 2;   // ... times rows of W
constexpr int kColBlock = 64;  // W rows kept hot in L2 while every x row passes over them

#if defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);                 // lanes (0+4, 1+5, 2+6, 3+7)
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));        // (0+2, 1+3)
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x1));  // 0+1
    return _mm_cvtss_f32(s);
}
#else
struct Vec {
    float v[kLanes];
};
inline Vec vzero() { return Vec{}; }
inline Vec vload(const float* p) {
    Vec r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
}
inline Vec vfma(Vec a, Vec b, Vec c) {
    for (int l = 0; l < kLanes; ++l) c.v[l] = __builtin_fmaf(a.v[l], b.v[l], c.v[l]);
    return c;
}
inline float vsum(Vec v) {
    float s[4];
    for (int l = 0; l < 4; ++l) s[l] = v.v[l] + v.v[l + 4];
    float a = s[0] + s[2], b = s[1] + s[3];
    return a + b;
}
#endif

// Computes the MR x NR tile y[m0.., n0..]; identical per-element arithmetic for every MR, NR.
template <int MR, int NR>
void tile(const GemmParams& p, int64_t m0, int64_t n0) {
    const int K = p.K;
    const int k_vec = K - K % kLanes;
    const float* xr[MR];
    const float* wr[NR];
    for (int i = 0; i < MR; ++i) xr[i] = p.x + (m0 + i) * p.ldx;
    for (int j = 0; j < NR; ++j) wr[j] = p.w + (n0 + j) * static_cast<int64_t>(K);
    Vec acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] = vzero();
    for (int k = 0; k < k_vec; k += kLanes) {
        Vec xv[MR];
        for (int i = 0; i < MR; ++i) xv[i] = vload(xr[i] + k);
        for (int j = 0; j < NR; ++j) {
            Vec wv = vload(wr[j] + k);
            for (int i = 0; i < MR; ++i) acc[i][j] = vfma(xv[i], wv, acc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i) {
        float* yr = p.y + (m0 + i) * p.ldy + n0;
        for (int j = 0; j < NR; ++j) {
            float s = vsum(acc[i][j]);
            for (int k = k_vec; k < K; ++k) s = __builtin_fmaf(xr[i][k], wr[j][k], s);
            yr[j] = p.accumulate ? yr[j] + s : s;
        }
    }
}

template <int NR>
void row_tiles(const GemmParams& p, int64_t M, int64_t n0) {
    int64_t m = 0;
    for (; m + kTileRows <= M; m += kTileRows) tile<kTileRows, NR>(p, m, n0);
    switch (M - m) {
        case 3: tile<3, NR>(p, m, n0); break;
        case 2: tile<2, NR>(p, m, n0); break;
        case 1: tile<1, NR>(p, m, n0); break;
        default: break;
    }
}

}  // namespace

frost_status gemm(const GemmParams& p) {
    if (!p.x || !p.w || !p.y || p.K <= 0 || p.N <= 0) return FROST_ERR_INVALID_ARG;
    const int64_t M = launch_rows(p.n_rows, p.max_rows);
    if (M == 0) return FROST_OK;
    const int64_t col_pairs = (p.N + kTileCols - 1) / kTileCols;
    // Enough pairs per task that each thread streams a useful slice of W.
    const int64_t grain = std::max<int64_t>(1, 16 / std::max<int64_t>(1, M));
    parallel_for(col_pairs, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t b0 = lo; b0 < hi; b0 += kColBlock / kTileCols) {
            const int64_t b1 = std::min<int64_t>(hi, b0 + kColBlock / kTileCols);
            for (int64_t m = 0; m < M; m += kTileRows) {
                const int64_t rows = std::min<int64_t>(kTileRows, M - m);
                GemmParams sub = p;
                sub.x = p.x + m * p.ldx;
                sub.y = p.y + m * p.ldy;
                for (int64_t b = b0; b < b1; ++b) {
                    const int64_t n0 = b * kTileCols;
                    if (n0 + kTileCols <= p.N)
                        row_tiles<kTileCols>(sub, rows, n0);
                    else
                        row_tiles<1>(sub, rows, n0);
                }
            }
        }
    });
    return FROST_OK;
}

float round_e4m3_satfinite(float v) {
    if (std::isnan(v)) return v;
    const float a = std::fabs(v);
    if (a >= 448.0f) return std::copysign(448.0f, v);
    int e = 0;
    std::frexp(a, &e);                       // a in [2^(e-1), 2^e)
    const int exp = std::max(e - 1, -6);     // below 2^-6 the subnormal step 2^-9
    const float step = std::ldexp(1.0f, exp - 3);  // three mantissa bits
    const float q = std::min(std::nearbyint(a / step) * step, 448.0f);  // 464 and up saturate
    return std::copysign(q, v);
}

frost_status quantize_act_e4m3(float* x, int32_t rows, int32_t K, int64_t ld) {
    if (!x || rows < 0 || K <= 0 || K % 128 != 0 || ld < K) return FROST_ERR_INVALID_ARG;
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t g = 0; g < K; g += 128) {
            float* v = x + r * ld + g;
            float amax = 0.0f;
            for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(v[i]));
            const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
            for (int i = 0; i < 128; ++i) v[i] = round_e4m3_satfinite(v[i] / s) * s;
        }
    return FROST_OK;
}

frost_status quantize_act_e4m3_bytes(const float* x, int32_t rows, int32_t K, int64_t ld, uint8_t* q, float* scale,
                                     int64_t scale_ld) {
    if (!x || !q || !scale || rows < 0 || K <= 0 || K % 128 != 0 || ld < K || scale_ld < rows)
        return FROST_ERR_INVALID_ARG;
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t g = 0; g < K; g += 128) {
            const float* v = x + r * ld + g;
            float amax = 0.0f;
            for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(v[i]));
            const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
            for (int i = 0; i < 128; ++i) q[int64_t(r) * K + g + i] = util::f32_to_e4m3(v[i] / s);
            scale[int64_t(g / 128) * scale_ld + r] = s;
        }
    return FROST_OK;
}

}  // namespace frost::kernels::cpu
