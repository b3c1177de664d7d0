// CUDA launchers of the hybrid-LM kernels (bf16 activations, fp32 accumulation and state).
// Every launcher enqueues on `stream`, never synchronises, never exits, and returns the
// cudaError_t of its launch (cudaErrorInvalidValue for a params struct outside the supported
// set). Per-step values are read from device memory, so every launch is graph-capturable and a
// captured graph serves every position. Every *_cost() gives bytes moved / FLOPs for `rows`.
// Defined only in builds with FROST_WITH_CUDA.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/lm_params.h"

namespace frost::kernels {

// Named shape limits of the kernels below.
constexpr int kConvChannelsPerBlock = 128;
constexpr int kConvMaxTaps = 4;
constexpr int kGdnChunk = 64;
constexpr int kGdnHeadDim = 128;
constexpr int kAttnHeadDim = 256;
constexpr int kAttnDecodeSplit = 128;  // keys per decode split past 8192 keys (shorter: 32 / 64)
constexpr int kAttnDecodeMaxBatch = 8;  // members of a batched decode step (work slices)
constexpr int kGemvMaxRows = 8;         // rows of a multi-row GEMV (batched decode)
constexpr int kAttnPrefillMaxSplits = 16;  // KV splits of one prefill row tile
constexpr int kAttnPrefillHopperMinRows = 128;  // smallest bucket the Hopper prefill kernel takes
constexpr int kAttnPrefillHopperMinBlocks = 64;  // Hopper blocks (q heads x 128-row tiles) that beat a split
constexpr int kAttnPrefillHopperVariant = 5;    // the launcher's: TMA producer, ping-pong (see attn_prefill_hopper_launch)
constexpr int kSampleMaxTopK = 256;    // candidates the device sampler orders exactly

cudaError_t embed_launch(const EmbedBf16Params& p, cudaStream_t stream);
KernelCost embed_cost(const EmbedBf16Params& p, int rows);

cudaError_t add_rmsnorm_launch(const AddRmsNormBf16Params& p, cudaStream_t stream);
KernelCost add_rmsnorm_cost(const AddRmsNormBf16Params& p, int rows);

cudaError_t qk_norm_rope_launch(const QkNormRopeBf16Params& p, cudaStream_t stream);
// The same with the rows' KV append in one launch (QkRopeKvBf16Params); the _applies check says
// whether these params take it (else the caller runs qk_norm_rope_launch then kv_append_launch).
bool qk_norm_rope_kv_applies(const QkRopeKvBf16Params& p);
cudaError_t qk_norm_rope_kv_launch(const QkRopeKvBf16Params& p, cudaStream_t stream);
KernelCost qk_norm_rope_cost(const QkNormRopeBf16Params& p, int rows);

cudaError_t gated_rmsnorm_launch(const GatedRmsNormBf16Params& p, cudaStream_t stream);
KernelCost gated_rmsnorm_cost(const GatedRmsNormBf16Params& p, int rows);

cudaError_t swiglu_launch(const SwigluBf16Params& p, cudaStream_t stream);
KernelCost swiglu_cost(const SwigluBf16Params& p, int rows);

cudaError_t gdn_gate_launch(const GdnGateBf16Params& p, cudaStream_t stream);
KernelCost gdn_gate_cost(const GdnGateBf16Params& p, int rows);

cudaError_t kv_append_launch(const KvAppendBf16Params& p, cudaStream_t stream);
KernelCost kv_append_cost(const KvAppendBf16Params& p, int rows);

// Conv1d + SiLU (+ l2norm); the same launcher serves prefill (many rows) and decode (one row).
cudaError_t conv1d_launch(const Conv1dBf16Params& p, cudaStream_t stream);
KernelCost conv1d_cost(const Conv1dBf16Params& p, int rows);

// Chunked gated-delta-rule prefill (spec §5). Scratch size in floats for max_rows rows:
size_t gdn_chunk_work_floats(const GdnBf16Params& p);
cudaError_t gdn_chunk_launch(const GdnBf16Params& p, cudaStream_t stream);
// Measurement hook for the bench: only the named stages (each reads what the previous left in
// p.work, so time them after one full launch). gdn_chunk_launch runs kGdnStageAll.
enum GdnStage : int { kGdnStagePrep = 1, kGdnStageState = 2, kGdnStageOut = 4, kGdnStageAll = 7 };
cudaError_t gdn_chunk_launch_stages(const GdnBf16Params& p, cudaStream_t stream, int stages);
// Clusters of `size` (2 or 4) blocks of the bf16 path's state pass this device runs at once: a
// cluster size (GdnBf16Params::chunk_cluster) is used only when all the launch's clusters fit.
int gdn_chunk_bf16_max_clusters(int size);
KernelCost gdn_chunk_cost(const GdnBf16Params& p, int rows);

// Recurrent gated-delta-rule (decode): token by token over the launch's rows, state in registers.
cudaError_t gdn_recurrent_launch(const GdnBf16Params& p, cudaStream_t stream);
// The GDN decode step in one launch (GdnDecodeBf16Params); gdn_decode_fused_applies says whether
// the fused kernel takes these params (else the caller runs the three launches).
// With p.gates.w set the launch also computes the gate projections (GdnGateDotParams) first.
bool gdn_decode_fused_applies(const GdnDecodeBf16Params& p);
cudaError_t gdn_decode_fused_launch(const GdnDecodeBf16Params& p, cudaStream_t stream);
// The gate projections alone (GdnGateDotParams), where the fused kernel does not run: one block per
// (head, row). pdl: programmatic dependent launch (decode graphs).
bool gdn_gate_dot_valid(const GdnGateDotParams& p);
cudaError_t gdn_gate_dot_launch(const GdnGateDotParams& p, int pdl, cudaStream_t stream);
KernelCost gdn_recurrent_cost(const GdnBf16Params& p, int rows);

// Flash-style causal prefill attention (tensor cores, d = 256), sigmoid gate fused. When the
// launch's row tiles x q heads fill few SMs it splits the keys of each row tile over
// attn_prefill_splits(p) blocks and merges them with a second (combine) kernel; the split count
// depends only on p.max_rows, p.Hq and the device's SM count, never on the position.
// p.work needs attn_prefill_work_floats(p) floats: the most any bucket 64, 128, ..., p.max_rows needs.
// On Hopper (sm_90), attn_prefill_takes_hopper(p) says when the launch runs the wgmma kernel
// (lm_attn_hopper.cu) instead: at least kAttnPrefillHopperMinRows rows, and either no split
// needed or a Hopper grid of at least kAttnPrefillHopperMinBlocks blocks. Like the split count,
// the choice depends on p.max_rows and p.Hq only.
size_t attn_prefill_work_floats(const AttentionBf16Params& p);
int attn_prefill_splits(const AttentionBf16Params& p);
bool attn_prefill_takes_hopper(const AttentionBf16Params& p);
cudaError_t attn_prefill_launch(const AttentionBf16Params& p, cudaStream_t stream);
// The launch whose per-row arithmetic does not depend on p.max_rows (EngineOptions::chunk_invariant,
// so restore + append equals a cold prefill bit for bit): one kernel for every bucket, never split
// (the Hopper kernel's default variant on sm_90a, else the mma.sync kernel). Each row walks its keys
// from position 0 in the kernel's key-tile order; key tiles past the row's position (more of them
// in a larger chunk) add exact zeros and leave its running max as it was. Needs no p.work. Slower
// than attn_prefill_launch for short chunks at long positions (few blocks walk all the keys).
cudaError_t attn_prefill_invariant_launch(const AttentionBf16Params& p, cudaStream_t stream);
// The Hopper kernel alone (test / bench hook): FlashAttention-3 style, 128 query rows per block,
// wgmma from a cp.async shared-memory ring, no split; needs no p.work. cudaErrorNotSupported on a
// device other than compute capability 9.0. variant: 0 the default, 1 block-synchronous (every
// thread loads and computes), 4 warp-specialised (a TMA producer thread, mbarriers; lm_attn_hopper_
// tma.cu), 5 the same with ping-pong (the two consumer warpgroups take turns to issue their MMAs),
// 6 / 7 those with three K stages, 8 / 9 with clusters of two CTAs (q heads 2c, 2c + 1) that share
// each K/V tile by TMA multicast (the plain TMA launch where Hq / Hkv is odd). 2 and 3 (a cp.async
// producer warpgroup, slower than 1) were removed: cudaErrorInvalidValue.
bool attn_prefill_hopper_supported(const AttentionBf16Params& p);
// splits > 1: the key splits of each row tile as that many blocks (TMA variants 4-7; p.work needs
// attn_prefill_split_work_floats(p, splits) floats), merged by the split path's combine kernel.
cudaError_t attn_prefill_hopper_launch(const AttentionBf16Params& p, cudaStream_t stream, int variant = 0,
                                       int splits = 1);
// The key splits the launcher gives the Hopper kernel (attn_prefill_takes_hopper): 1, or 2+ when
// its q heads x 128-row tiles fill at most half of the SMs (a short prompt of a model with few
// heads), so the heaviest row tile's keys do not run on one SM alone. Depends on max_rows and Hq.
int attn_prefill_hopper_splits(const AttentionBf16Params& p);
// Test / bench hook: a given split count in [1, kAttnPrefillMaxSplits] (1 = the single-kernel
// path); p.work then needs attn_prefill_split_work_floats(p, splits) floats.
size_t attn_prefill_split_work_floats(const AttentionBf16Params& p, int splits);
cudaError_t attn_prefill_launch_splits(const AttentionBf16Params& p, cudaStream_t stream, int splits);
KernelCost attn_prefill_cost(const AttentionBf16Params& p, int rows, int pos);

// Decode attention (one row) split over the KV length; lengths from the cursor. Scratch floats:
size_t attn_decode_work_floats(const AttentionBf16Params& p);
cudaError_t attn_decode_launch(const AttentionBf16Params& p, cudaStream_t stream);
KernelCost attn_decode_cost(const AttentionBf16Params& p, int pos);

// Greedy argmax sampling (deterministic: the lowest index wins ties).
int sample_argmax_blocks(int vocab);
cudaError_t sample_argmax_launch(const SampleArgmaxParams& p, cudaStream_t stream);
KernelCost sample_argmax_cost(const SampleArgmaxParams& p);

// Sampling with the cursor's mode, the CPU sampler's algorithm (cpu/sample.cpp) on the family's
// own params: greedy argmax, or temperature / top-k / top-p with the same counter-based draw.
// Exact for 0 < top_k <= kSampleMaxTopK; top_k = 0 is served as kSampleMaxTopK (lm_sample_topk.cu).
// p.work needs sample_work_floats(vocab) floats; p.work_idx is unused. With p.settings the row is
// processed first (sample_process_launch, into the work area) and min_p applies to the candidates;
// with p.record the step's raw logprobs are written there (sample_logprobs_launch).
size_t sample_work_floats(int vocab);
cudaError_t sample_launch(const SampleParams& p, cudaStream_t stream);
// The pieces sample_launch runs (lm_sample_process.cu, lm_sample_logprobs.cu), exposed for tests:
// marks / counts the step's inputs and writes the processed row processed[vocab];
cudaError_t sample_process_launch(const SampleParams& p, float* processed, cudaStream_t stream);
// writes *p.record from the raw row and *p.out_token (work: sample_logprob_work_floats).
size_t sample_logprob_work_floats(int vocab);
cudaError_t sample_logprobs_launch(const SampleParams& p, float* work, cudaStream_t stream);

// Cursor bookkeeping nodes of a step graph (family CursorParams).
cudaError_t cursor_launch(const CursorParams& p, cudaStream_t stream);
// Batched decode: gathers (decode_begin) / advances and writes back (advance) each member's cursor.
cudaError_t batch_cursor_launch(const BatchCursorParams& p, cudaStream_t stream);
// A prefill's tail row (family TailRowParams): one block per segment, block 0 writes the tail
// cursor. A plain launch that never triggers early, so its readers see every byte it moves.
cudaError_t tail_row_launch(const TailRowParams& p, cudaStream_t stream);

// Decode GEMV (M = 1 row of x, bf16 weights streamed once with 16-byte loads); same params as
// the GEMM (M must be 1, K a multiple of 8). Deterministic: fixed per-row reduction order.
// Decode forms (GemmBf16Params tail fields): swiglu (gate_up with SwiGLU in the epilogue), pdl
// (programmatic dependent launch).
cudaError_t gemv_launch(const GemmBf16Params& p, cudaStream_t stream);
// The tensor-core decode GEMV (lm_gemv_tc.cu) that gemv_launch picks where it supports the shape
// (K % 64 == 0, M <= 8).
bool gemv_tc_supports(const GemmBf16Params& p);
cudaError_t gemv_tc_launch(const GemmBf16Params& p, cudaStream_t stream);
KernelCost gemm_cost(const GemmBf16Params& p);

}  // namespace frost::kernels
