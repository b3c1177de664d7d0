// Shared by the chunked gated-delta-rule kernels (lm_gdn_chunk.cu: fp32 and TF32 paths,
// lm_gdn_bf16.cu: bf16 path): the chunk grid and the bf16 path's entry point.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels::gdn {

constexpr int kC = 64;   // chunk rows (kGdnChunk)
constexpr int kD = 128;  // dk = dv (kGdnHeadDim)

// Chunk slots a launch of max_rows rows can touch: a short first chunk when the launch starts off
// the 64-grid, then whole chunks.
__host__ __device__ inline int max_chunks(int max_rows) { return (max_rows + kC - 1) / kC + 1; }

// Rows [start, start + len) of this launch form chunk c (chunks at absolute multiples of 64).
__device__ inline bool chunk_range(int c, int pos, int rows, int& start, int& len) {
    const int first = min(rows, kC - pos % kC);
    if (c == 0) {
        start = 0;
        len = first;
    } else {
        start = first + (c - 1) * kC;
        len = min(kC, rows - start);
    }
    return len > 0;
}

// bf16 path scratch per (chunk slot, value head), in floats: W and U bf16 [64, 128], P bf16
// [64, 64], γ fp32 [64] (S₀ and V' never leave the chip: the state pass also writes the output).
constexpr int64_t kBf16WOff = 0;
constexpr int64_t kBf16UOff = kBf16WOff + kC * kD / 2;
constexpr int64_t kBf16POff = kBf16UOff + kC * kD / 2;
constexpr int64_t kBf16GammaOff = kBf16POff + kC * kC / 2;
constexpr int64_t kBf16SlotFloats = kBf16GammaOff + kC;

// The two launches of the bf16 path; stages as GdnStage (kGdnStageOut is part of the state pass).
cudaError_t chunk_bf16_launch_stages(const GdnBf16Params& p, cudaStream_t stream, int stages);

// The state + output pass on 16-column dv slices (lm_gdn_bf16_narrow.cu; same bits as the
// 32-column pass, twice the blocks); producer: copies by a dedicated ninth warp.
cudaError_t chunk_bf16_launch_state_narrow(const GdnBf16Params& p, cudaStream_t stream, bool producer);

// The state + output pass on warpgroup MMA (lm_gdn_wgmma.cu; sm_90a, else cudaErrorNotSupported),
// on `slice` (16 or 32) dv columns per block.
cudaError_t chunk_bf16_launch_state_wgmma(const GdnBf16Params& p, cudaStream_t stream, int slice);

}  // namespace frost::kernels::gdn
