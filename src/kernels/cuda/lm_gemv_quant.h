// Decode GEMV over quantized weights (issue 15): y[n] = Σ_k x[k] W[n, k] with W dequantized in
// registers from the stored format, so only the quantized bytes cross DRAM. bf16 activations in,
// fp32 accumulation, bf16 or fp32 out. Formats and layouts are the checkpoints' own
// (model/quant/dequant.h is the CPU reference): FP8 e4m3 with a block-128 or per-row fp32 scale,
// NVFP4 (e2m1 pairs, low nibble first, fp8 scale per 16, divided by a global scale) and INT4
// (8 per int32 from bit 0 stored q + 8, bf16 scale per group, optional packed zero points); the
// 4-bit words may instead hold the paired nibble order the engine writes at load (nibble_pairs),
// and their rows the 8-row block layout (row_blocks).
// Epilogues as the bf16 GEMV's (lm_gemv.cu): residual accumulate and [gate; up] SwiGLU.
// Launchers enqueue on `stream`, never synchronise, and return cudaErrorInvalidValue for params
// outside the supported set. Defined only in builds with FROST_WITH_CUDA.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

enum GemvQuantFormat : int32_t {
    kGemvQuantFp8Block = 0,    // w u8 [N, K] e4m3; scale f32 [ceil(N/block_n), K/block_k]
    kGemvQuantFp8Channel = 1,  // w u8 [N, K] e4m3; scale f32 [N]
    kGemvQuantNvfp4 = 2,       // w u8 [N, K/2]; scale u8 (e4m3) [N, K/16]; global_scale divides
    kGemvQuantInt4 = 3,        // w i32 [N, K/8]; scale bf16 [N, K/group_size]; zero_point optional
};

struct GemvQuantParams {
    const bf16* x;               // [M, ldx]
    const void* w;               // layout per format (above), rows contiguous, 16-byte aligned
    const void* scale;           // per format (above)
    const int32_t* zero_point;   // INT4 only, may be null (symmetric): [ceil(N/8), K/group_size],
                                 // row r of a column at bits 4*(r%8) of word [r/8], stored zp + 8
    float global_scale;          // NVFP4 only: w = e2m1 * fp8(scale) / global_scale
    void* y;                     // [M, ldy] bf16, or fp32 when out_f32
    int32_t N, K;
    int32_t format;              // GemvQuantFormat
    int32_t block_n, block_k;    // FP8 block: the scale block (block_k a multiple of 16)
    int32_t group_size;          // INT4: a multiple of 32
    int32_t out_f32;
    int32_t pdl;                 // programmatic dependent launch
    int32_t accumulate;          // y += x W^T (the residual epilogue) instead of y = x W^T
    const float* row_global_scale;  // NVFP4: per-row divisor [N] replacing global_scale when set
                                    // (row-concatenated projections of different global scales)
    int32_t swiglu;              // W = [gate; up] (N even): y[i] = silu(gate_i) * up_i, bf16 [N/2],
                                 // both rounded to bf16 first (the unfused GEMV + swiglu's bits)
    // Rows of x (a batched decode step: one per member). M > 1 needs the tensor-core kernel; each
    // output row's bits equal that row's solo launch (M = 1).
    int32_t M = 1;               // 1..8
    int32_t ldx = 0;             // elements between x rows (0: K); a multiple of 8 when M > 1
    int32_t ldy = 0;             // elements between y rows (0: N, or N/2 with swiglu)
    // Routed experts (the MoE decode, issue 14 + 15): w, scale, zero_point and row_global_scale
    // hold the experts stacked, N rows each ([E * N, K], scales and zero points by stacked row, as
    // the weight table binds them), and the launch runs `entries` products at once: entry j
    // multiplies expert expert_ids[j] (device memory, written by the router before this launch;
    // each < E) with x row j / x_entry_div (ldx apart) into y row j (ldy apart). M = 1; entries
    // do not depend on each other, so each entry's bits equal a plain launch on its expert's rows.
    const int32_t* expert_ids = nullptr;
    int32_t entries = 0;         // 0: a plain launch
    int32_t x_entry_div = 1;     // entries per x row (k: every routed expert of a row reads its x)
    // A shared expert folded into a routed launch (tensor-core kernel only): entries
    // [routed_entries, entries) multiply the shared_* weights (one expert of N rows in the stack's
    // format, K and scale layout; row_global_scale as for the stack) with x row shared_x_row0 +
    // (entry - routed_entries), into y row `entry`, with the bits of a plain launch on those
    // weights. It saves the shared expert's own launches in a decode step. 0: every entry routed.
    int32_t routed_entries = 0;
    int32_t shared_x_row0 = 0;
    const void* shared_w = nullptr;
    const void* shared_scale = nullptr;
    const int32_t* shared_zero_point = nullptr;
    const float* shared_row_global_scale = nullptr;
    // W8A8 decode (FP8 formats, tensor-core kernel only): each block quantizes its x rows per
    // 128-wide group to e4m3 exactly as GemmOp::quant_act does (s = max|x| / 448, e4m3(x / s),
    // nearest even, saturating; lm_act_quant.cuh) into shared memory, and multiplies them with the
    // stored e4m3 weights on FP8 tensor cores: no weight is converted, and each 128-wide step's
    // fp32 partial sum takes the weight scale times the x group's scale. Row bits still do not
    // depend on M or on the other rows (each x row's quantization is its own).
    int32_t act_fp8 = 0;
    // 4-bit formats (NVFP4, INT4): 1 when every 32-bit word of the packed rows (w and shared_w)
    // holds its 8 elements in the paired order quant4_pair_nibbles_launch writes, 0 in the
    // checkpoint's (element j of a word at bits 4j). Every launcher reads both; the values are
    // the same, only the order of the fp32 sums (hence the last bits) differs.
    int32_t nibble_pairs = 0;
    // 4-bit formats: 1 when the packed rows are stored in 8-row blocks (quant4_row_blocks_launch,
    // quant4_chunk_index): the 64 bytes each of 8 rows hold for one 128-wide step lie together, so
    // a warp's 16-byte loads of a tile's 8 rows in one step read 512 contiguous bytes instead of
    // eight 64-byte pieces one row apart. Needs K a multiple of 128 and the stored rows (all
    // experts stacked) a multiple of 8. Every launcher reads both layouts; only the addresses
    // differ, not the arithmetic or its order, so neither do the bits.
    int32_t row_blocks = 0;
};

constexpr int kGemvQuantMaxK = 20480;  // x is staged in 40 KiB of shared memory (under the 48 KiB default with the static arrays)

// Params with gemv_quant_tc_eligible(p) run the tensor-core kernel, the rest (M = 1 only) the
// SIMT one.
cudaError_t gemv_quant_launch(const GemvQuantParams& p, cudaStream_t stream);
// The two kernels behind it (tests and the bench run each): SIMT (lm_gemv_quant.cu: M = 1, any
// supported params, weights widened to fp32 in registers) and tensor core (lm_gemv_quant_tc.cu:
// K a multiple of 128, fp8 block_k / int4 group a multiple of 128, M <= 8; weights dequantized
// into bf16 mma fragments, fp32 accumulation).
cudaError_t gemv_quant_simt_launch(const GemvQuantParams& p, cudaStream_t stream);
// Whether the routed-expert fields are consistent (none set, or expert_ids with entries > 0,
// M = 1, ldx >= K a multiple of 8, ldy >= the output width); both launchers refuse them otherwise.
bool gemv_quant_entries_valid(const GemvQuantParams& p);
// The tensor-core kernel takes p (act_fp8 included: an FP8 format and x's staged rows within
// kGemvAct8MaxSmem bytes, gemv_act8_smem_bytes).
bool gemv_quant_tc_eligible(const GemvQuantParams& p);
constexpr int kGemvAct8MaxSmem = 40 * 1024;
// Shared memory an act_fp8 launch stages: `rows` x rows of K e4m3 bytes (16 bytes of padding each,
// so the rows of a batched step fall in different banks) and their K/128 f32 group scales.
constexpr int64_t gemv_act8_smem_bytes(int64_t rows, int64_t K) { return rows * (K + 16) + rows * (K / 128) * 4; }
cudaError_t gemv_quant_tc_launch(const GemvQuantParams& p, cudaStream_t stream);
// The tensor-core kernel with `unroll` steps per load group, at least `min_blocks` blocks per SM
// and `pipe` (the next group's weights loaded before the current one is computed: two groups in
// registers). Instantiated {unroll, blocks, pipe}: {2,2,0}, {2,3,0}, {2,4,0}, {4,2,0}, {1,2,1},
// {1,3,1}, {2,2,1}, {2,3,1} (act_fp8: {1,3,1} only); others return cudaErrorInvalidValue. For the
// bench's tuning and the tests (every variant of one tile_warps gives the same bits);
// gemv_quant_tc_launch picks {1,3,1} and its tile_warps by shape (M and the routed entries do not
// enter, so a batched member keeps its solo bits).
// tile_warps: warps per 16-row tile (8: a block is one tile; 4 / 2: two / four tiles, {1,3,1}
// only; 12: a 12-warp block of one tile, {1,2,1} only); each one's bits differ from the others'
// (another order of the fp32 partial sums), the same for every M.
cudaError_t gemv_quant_tc_launch_tuned(const GemvQuantParams& p, int unroll, int min_blocks, int pipe, cudaStream_t stream,
                                       int tile_warps = 8);
// The MoE decode's routed down projection and the mix in one launch (issue 14): p is the routed
// down GEMV with the shared expert folded in (GemvQuantParams::routed_entries: entries
// rows * (k + 1), routed_entries rows * k, x_entry_div 1, M 1, neither swiglu, accumulate nor
// act_fp8; y unused), and per row r and output unit h
//   out[r, h] = bf16(out[r, h] + Σ_j topk_w[r, j] · d_j[h] + shared_w[r] · d_s[h])
// in fp32, slot order, then the shared expert, one rounding: d_j is entry r·k + j's down output
// with the bits of the 8-warp tensor-core GEMV (gemv_quant_tc_launch_tuned(p, 1, 3, 1, s, 8)),
// so the launch equals that GEMV (out_f32) followed by moe_combine_launch, bit for bit. A block
// owns one 16-row tile of one row and walks all k + 1 entries (lm_gemv_quant_moe.cu): no f32
// round trip, no combine launch, and a row's bits do not depend on the other rows.
struct GemvQuantMoeMix {
    const float* topk_w;    // [rows, k] the router's mixing weights
    const float* shared_w;  // [rows] the shared expert's sigmoid gate
    bf16* out;              // [rows, ldo] the residual stream, added into
    int32_t rows, k, ldo;
    // The expert ids were written at least two launches back (the router, before the gate/up
    // launch that precedes this one): read (through L2) and their weights loaded before the PDL
    // wait. Only x (gate/up's output) is waited for then.
    int32_t ids_ready = 0;
};
constexpr int kGemvQuantMoeMaxK = 32;  // k (routed experts per row) the mix launch takes
bool gemv_quant_moe_down_eligible(const GemvQuantParams& p, const GemvQuantMoeMix& mix);
cudaError_t gemv_quant_moe_down_launch(const GemvQuantParams& p, const GemvQuantMoeMix& mix, cudaStream_t stream);
// Dequantizes the whole weight of `p` (x, y, out_f32 unused) into bf16 out [N, K]: each value the
// fp32 one the CPU reference computes, rounded to nearest even (bitwise equal to it). The operand
// a prefill GEMM on 4-bit weights feeds cuBLASLt, and a device-side alternative to host dequant.
// At most max_blocks blocks (each thread one 16-byte unit per row or 8-row group, the blocks then
// walking them grid-stride; the result does not depend on it). Why a bound: one block per 8-row
// group of the 35B-A3B's stacked 4-bit experts (262144 blocks of one unit per thread) made its 1k
// prefill 30.8 -> 42.0 ms (H200, 2026-12-02, fiftieth session); under the bound the blocks loop,
// as the row-major kernel's 65535-row grid already did.
constexpr int kDequantMaxBlocks = 65535;
cudaError_t dequant_bf16_launch(const GemvQuantParams& p, bf16* out, cudaStream_t stream, int max_blocks = kDequantMaxBlocks);
// Bytes every launch must move: the quantized weights, their scales / zero points, x and y.
KernelCost gemv_quant_cost(const GemvQuantParams& p);

// The paired nibble order of packed 4-bit weights (GemvQuantParams::nibble_pairs), in place over
// `bytes` (a multiple of 4) at w (4-byte aligned): in each 32-bit word, element 2j (of the word's
// 8, element j at bits 4j as the checkpoints store them) moves to bits 4j and element 2j + 1 to
// bits 16 + 4j. The decode GEMV takes a weight pair as (word >> 4j) & 0x000F000F, one shift and
// one mask into the two halves of a bf16x2; in the checkpoint's order those halves hold elements
// j and j + 4, and x had to be permuted to match (a byte_perm per pair and step); in this order
// they are adjacent, as x's bf16 pairs are. Measured before it was built, through a timing probe
// (H200, 2026-12-02, 9B decode @1k, two rounds): INT4 2.494 / 2.496 -> 2.369 / 2.380 ms/token.
// Not an involution: run once per weight (ops::Backend::prepare_quant_weight tracks it).
cudaError_t quant4_pair_nibbles_launch(void* w, size_t bytes, cudaStream_t stream);
// The same order on the host, for one word (tests, the bench).
constexpr uint32_t quant4_pair_nibbles(uint32_t word) {
    uint32_t out = 0;
    for (int e = 0; e < 8; ++e) out |= ((word >> (4 * e)) & 0xFu) << (4 * ((e & 1) * 4 + (e >> 1)));
    return out;
}

// The 8-row block layout of packed 4-bit weights (GemvQuantParams::row_blocks): where 16-byte
// chunk c (weights 32c .. 32c + 31) of row n lies, in 16-byte units from the start of the rows.
// Row-major it is n * K / 32 + c; in blocks, rows 8b .. 8b + 7 keep the bytes they span row-major
// (a row range starting at a multiple of 8 stays a valid weight), ordered by 128-wide step, then
// row, then chunk: a block of 8 rows x 128 columns is 512 contiguous bytes.
constexpr int64_t quant4_chunk_index(int64_t n, int64_t c, int64_t K, bool row_blocks) {
    return row_blocks ? ((n / 8) * (K / 128) + c / 4) * 32 + (n % 8) * 4 + c % 4 : n * (K / 32) + c;
}
// Rewrites `rows` packed 4-bit rows of K columns at w (16-byte aligned) in place into that layout,
// one 8-row group (4 K bytes, staged in shared memory) per block; the nibble order inside each
// word is kept. Not an involution: run once per weight. cudaErrorInvalidValue unless
// quant4_row_blocks_eligible(rows, K).
constexpr int64_t kQuant4RowBlocksMaxK = 24576;  // 96 KiB of shared memory per 8-row group
constexpr bool quant4_row_blocks_eligible(int64_t rows, int64_t K) {
    return rows > 0 && rows % 8 == 0 && K > 0 && K % 128 == 0 && K <= kQuant4RowBlocksMaxK;
}
cudaError_t quant4_row_blocks_launch(void* w, int64_t rows, int64_t K, cudaStream_t stream);

}  // namespace frost::kernels
