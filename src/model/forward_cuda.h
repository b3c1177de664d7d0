// Device pointers of a CUDA engine and the recorder of one whole-forward step onto a capturing
// stream (forward_cuda.cpp). Everything here is fixed at load: weights, the session's state
// buffers, the shared bf16 activations and the cuBLASLt plans; a step reads its row count and
// position from the session's StepCursor in device memory. CUDA builds only.
#pragma once
#if FROST_WITH_CUDA
#include <cuda_runtime.h>

#include <array>
#include <map>
#include <vector>

#include "frost/exec.h"
#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_params.h"
#include "model/config.h"
#include "model/engine_cuda.h"

namespace frost::model {

using kernels::bf16;

constexpr int kCudaRowAlign = 8;  // bf16 per 16-byte access: activation row strides are padded to it

// Per-layer weights: GEMM operands bf16 [N, K]; norms and small per-channel weights fp32.
struct CudaLayer {
    const float* in_ln = nullptr;     // [H] zero-centred
    const float* post_ln = nullptr;   // [H] zero-centred
    const bf16* in_proj = nullptr;    // linear [Wl, H] = [qkv; z; b; a; 0-pad]; full [Wf, H] = [q|gate; k; v]
    const float* conv_w = nullptr;    // [C, K] (linear)
    const float* A_log = nullptr;     // [Hv]
    const float* dt_bias = nullptr;   // [Hv]
    const float* gdn_norm = nullptr;  // [dv] plain
    const bf16* out_proj = nullptr;   // linear [H, V]; full o_proj [H, Hq d]
    const float* q_norm = nullptr;    // [d] zero-centred (full)
    const float* k_norm = nullptr;    // [d] zero-centred (full)
    const bf16* gate_up = nullptr;    // [2F, H]
    const bf16* down = nullptr;       // [H, F]
};

// One session's continuation state (registered as `state` / `cursor` buffers by engine_cuda.cpp).
struct CudaSession {
    kernels::StepCursor* cursor = nullptr;  // [1] device
    std::vector<bf16*> conv_state;          // per layer [C, K-1] (linear layers; null otherwise)
    std::vector<float*> rec_state;          // per layer [Hv, dk, dv] fp32
    std::vector<bf16*> k_cache;             // per layer [max_seq, Hkv, d] (full layers)
    std::vector<bf16*> v_cache;
};

// Activations shared by every session (one stream runs one step at a time). R = C_p rows.
struct CudaScratch {
    int32_t* ids = nullptr;       // [R] token inputs (the Engine's scratch.ids)
    bf16* h = nullptr;            // [R, H] residual stream
    bf16* x = nullptr;            // [R, H] normed input of the mixer / MLP
    bf16* proj = nullptr;         // [R, proj_width] in_proj / qkv_proj / gate_up output
    bf16* conv_out = nullptr;     // [R, C] conv + SiLU + l2norm (q | k | v)
    float* beta = nullptr;        // [R, Hv]
    float* g = nullptr;           // [R, Hv]
    bf16* core = nullptr;         // [R, max(V, Hq d)] GDN or attention output
    bf16* gated = nullptr;        // [R, V] gated RMSNorm output
    bf16* act = nullptr;          // [R, F] SwiGLU output
    bf16* fin = nullptr;          // [logit_rows, H] final norm
    float* logits = nullptr;      // [logit_rows, vocab] fp32 (what the host reads)
    float* gdn_work = nullptr;    // gdn_chunk_work_floats(R) floats
    float* attn_work = nullptr;   // max(attn_decode_work_floats, attn_prefill_work_floats) floats
    float* sample_work = nullptr; // sample_work_floats(vocab) floats
    int32_t* out_token = nullptr; // [1]
    int proj_width = 0;
    int logit_rows = 0;
};

// Shape of one cuBLASLt plan: M, N, K, ldx, ldy, out_f32, accumulate.
using GemmShapeKey = std::array<int64_t, 7>;

struct CudaState {
    kernels::GemmLt* lt = nullptr;
    std::map<GemmShapeKey, kernels::GemmPlan*> plans;  // created once per shape at load
    std::vector<CudaLayer> layers;
    std::vector<CudaSession> sessions;
    CudaScratch scratch;
    const bf16* embed = nullptr;       // [vocab, H]
    const float* final_norm = nullptr; // [H] zero-centred
    const bf16* lm_head = nullptr;     // [vocab, H] (== embed when tied)
    int lin_width = 0;                 // padded [qkv | z | b | a] width Wl
    int full_width = 0;                // [q|gate | k | v] width Wf
    CudaEngineInfo info;
    ~CudaState();
};

// Enqueues one step of `rows` rows (the bucket's capacity; 1 = decode: input from the cursor's
// last token, recurrent GDN, GEMV projections) for `session` on `stream`, which is capturing.
// A kernel that refuses its shape fails with FROST_ERR_UNSUPPORTED naming the kernel and shape.
// rope_inv_freq_bf16: EngineOptions::rope_inv_freq_bf16 (RoPE inv_freq rounded to bf16).
frost_status record_cuda_forward(const ModelConfig& cfg, bool logits_all, int max_seq, CudaState& cs,
                                 int session, int rows, bool decode, cudaStream_t stream, bool rope_inv_freq_bf16);

}  // namespace frost::model
#endif  // FROST_WITH_CUDA
