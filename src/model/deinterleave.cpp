// Row regrouping for Qwen3-Next fused projections: walk the key-head groups of the source and send
// each part's block of rows to its place in the destination tensors.
#include "model/deinterleave.h"

#include <cstring>

namespace frost::model {
namespace {

// For group g, part j has rows[j] consecutive rows in the source; in the destination they land
// at row g*rows[j] of dst[j] (which may point into a larger tensor).
void regroup(const uint8_t* src, size_t row_bytes, int groups, int parts, const size_t* rows, uint8_t* const* dst) {
    for (int g = 0; g < groups; ++g)
        for (int j = 0; j < parts; ++j) {
            size_t n = rows[j] * row_bytes;
            std::memcpy(dst[j] + size_t(g) * n, src, n);
            src += n;
        }
}

}  // namespace

bool qkvz_units_ok(const QkvzSplit& p) {
    const int r = p.num_k_heads > 0 ? p.num_v_heads / p.num_k_heads : 0;
    return p.unit > 0 && r > 0 && p.k_head_dim % p.unit == 0 && (r * p.v_head_dim) % p.unit == 0;
}

void deinterleave_qkvz(const QkvzSplit& p, const void* src, void* qkv_out, void* z_out) {
    const size_t r = size_t(p.num_v_heads / p.num_k_heads), u = size_t(p.unit);
    const size_t q_rows = size_t(p.num_k_heads) * p.k_head_dim / u;
    uint8_t* qkv = static_cast<uint8_t*>(qkv_out);
    const size_t rows[4] = {p.k_head_dim / u, p.k_head_dim / u, r * p.v_head_dim / u, r * p.v_head_dim / u};
    uint8_t* dst[4] = {qkv, qkv + q_rows * p.row_bytes, qkv + 2 * q_rows * p.row_bytes, static_cast<uint8_t*>(z_out)};
    regroup(static_cast<const uint8_t*>(src), p.row_bytes, p.num_k_heads, 4, rows, dst);
}

void deinterleave_ba(const QkvzSplit& p, const void* src, void* b_out, void* a_out) {
    const size_t r = size_t(p.num_v_heads / p.num_k_heads);
    const size_t rows[2] = {r, r};
    uint8_t* dst[2] = {static_cast<uint8_t*>(b_out), static_cast<uint8_t*>(a_out)};
    regroup(static_cast<const uint8_t*>(src), p.row_bytes, p.num_k_heads, 2, rows, dst);
}

}  // namespace frost::model
