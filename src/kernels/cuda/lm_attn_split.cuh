// The split-KV layout shared by the prefill attention kernels that split a row tile's keys (the
// mma.sync kernel, lm_attn_prefill.cu, and the Hopper TMA kernel, lm_attn_hopper_tma.cu) and the
// combine kernel that merges their partials (lm_attn_prefill.cu): which keys a split holds, where
// its unnormalised fp32 partial and its statistics go in p.work.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels::attn_split {

constexpr int kKeysPerTile = 64;  // splits cut at whole 64-key tiles
constexpr int kStats = 2;         // per partial row: max (log2 units), sum

// Key tiles per split of a row tile with `tiles` key tiles: split s holds tiles
// [s * span, min((s + 1) * span, tiles)); splits past the tiles are empty.
__host__ __device__ inline int split_tiles(int tiles, int splits) { return (tiles + splits - 1) / splits; }

// The same in keys for a row tile whose keys are [0, kv_len).
__host__ __device__ inline int split_span(int kv_len, int splits) {
    return split_tiles((kv_len + kKeysPerTile - 1) / kKeysPerTile, splits) * kKeysPerTile;
}

// Work layout (fp32; R = the launch's rows rounded up to 64): o partials [S][Hq][R][d], then
// statistics [S][Hq][R][kStats].
__host__ __device__ inline int64_t partial_row(int split, int qh, int row, int Hq, int R) {
    return (static_cast<int64_t>(split) * Hq + qh) * R + row;
}
__host__ __device__ inline int partial_rows(int max_rows) { return (max_rows + 63) / 64 * 64; }

// Merges the `splits` partials of a launch whose row tiles are `tile_rows` rows (64: the mma.sync
// kernel, 128: the Hopper one) into the normalised, gated bf16 output p.o.
cudaError_t combine_launch(const AttentionBf16Params& p, cudaStream_t stream, int splits, int tile_rows);

}  // namespace frost::kernels::attn_split
