// The hybrid forward of one step on CUDA (spec §4), enqueued onto a capturing stream: embed, then
// per layer RMSNorm -> mixer (Gated DeltaNet or gated attention, one explicit is_linear switch)
// -> RMSNorm -> SwiGLU MLP, residual adds fused into the output GEMMs, final norm, lm_head (fp32
// logits), device sampling, cursor advance. Sequencing follows bench/bench_cuda_kernels.cpp.
#if FROST_WITH_CUDA
#include "model/forward_cuda.h"

#include <cmath>
#include <cstdlib>

#include "exec/error.h"
#include "kernels/cuda/lm_kernels.h"

namespace frost::model {

using namespace frost::kernels;

CudaState::~CudaState() {
    for (auto& [shape, plan] : plans) gemm_plan_destroy(plan);
    gemm_lt_destroy(lt);
}

namespace {

constexpr float kL2Eps = 1e-6f;  // GDN q/k l2norm epsilon (spec §4.1 step 4; the CPU path's value)

// Decode graphs launch the GEMVs, norms, conv1d and the GDN recurrence with programmatic dependent
// launch (Hopper; lm_common.cuh). FROST_CUDA_PDL=0 in the environment records them serialised.
bool decode_pdl_enabled() {
    static const bool enabled = [] {
        const char* v = std::getenv("FROST_CUDA_PDL");
        return !(v && v[0] == '0');
    }();
    return enabled;
}

// Whether decode folds the pre-norms into the GEMVs that consume them (CudaRecorder::fold_norm).
// Off: measured slower (H100 2026-11-22, 9B shapes: decode @1k 6.144 ms folded vs 6.121 ms with
// the norm kernels; every GEMV block repeats the norm before streaming, in_proj alone +4.8 us).
constexpr bool kDecodeFoldNorm = false;

struct CudaRecorder {
    const ModelConfig& c;
    bool logits_all;
    int max_seq;
    CudaState& cs;
    const CudaSession& ss;
    int rows;
    bool decode;
    cudaStream_t st;
    bool rope_inv_freq_bf16;  // EngineOptions::rope_inv_freq_bf16

    const int32_t* n_rows() const { return &ss.cursor->n_tokens; }
    int32_t pdl() const { return decode && decode_pdl_enabled() ? 1 : 0; }
    // With kDecodeFoldNorm, decode folds each RMSNorm (no residual delta: the adds are fused into
    // the output GEMVs) into the GEMV that consumes it: that GEMV reads the residual stream h and normalises it while
    // staging, with add_rmsnorm's bits, so the norm launches disappear from the decode graph.
    bool fold_norm() const { return decode && kDecodeFoldNorm; }
    float eps() const { return static_cast<float>(c.rms_norm_eps); }

    // Converts a launcher's refusal into a status naming the kernel and the model's shape.
    frost_status check(cudaError_t e, const char* kernel) const {
        if (e == cudaSuccess) return FROST_OK;
        cudaGetLastError();  // clear the sticky launch error so later captures start clean
        if (e == cudaErrorInvalidValue || e == cudaErrorNotSupported)
            return fail(FROST_ERR_UNSUPPORTED,
                        "cuda engine: kernel %s refuses this model's shape (%s; H %d, head_dim %d, "
                        "Hq %d, Hkv %d, rotary %d, dk %d, dv %d, Hk %d, Hv %d, conv C %d K %d, F %d, rows %d)",
                        kernel, cudaGetErrorString(e), c.hidden_size, c.head_dim, c.num_heads,
                        c.num_kv_heads, c.rotary_dim, c.lin_k_head_dim, c.lin_v_head_dim,
                        c.lin_num_k_heads, c.lin_num_v_heads, c.conv_dim(), c.conv_kernel,
                        c.intermediate_size, rows);
        return fail(FROST_ERR_BACKEND, "cuda engine: kernel %s failed: %s", kernel, cudaGetErrorString(e));
    }

    // y = x Wᵀ over `m` rows (GEMV for one row), planned once per shape.
    // norm_w: the RMSNorm weight that produced x; with fold_norm() the GEMV applies it to h itself.
    frost_status gemm(const char* name, const bf16* x, int64_t ldx, const bf16* w, int N, int K, void* y,
                      int64_t ldy, bool out_f32, bool accumulate, int m, const float* norm_w = nullptr) {
        GemmBf16Params p{x, w, y, ldx, ldy, m, N, K, out_f32 ? 1 : 0, accumulate ? 1 : 0};
        p.pdl = pdl();
        if (m == 1 && norm_w && fold_norm()) fold_norm_into(p, norm_w);
        if (m == 1) return check(gemv_launch(p, st), name);
        const GemmShapeKey key{m, N, K, ldx, ldy, p.out_f32, p.accumulate};
        auto it = cs.plans.find(key);
        if (it == cs.plans.end()) {
            GemmPlan* plan = nullptr;
            FROST_TRY(check(gemm_plan_create(cs.lt, p, &plan), name));
            it = cs.plans.emplace(key, plan).first;
            cs.info.gemm_plans = cs.plans.size();
        }
        return check(gemm_launch(it->second, p, st), name);
    }

    void fold_norm_into(GemmBf16Params& p, const float* norm_w) const {
        p.x = cs.scratch.h;
        p.ldx = c.hidden_size;
        p.norm_w = norm_w;
        p.norm_eps = eps();
        p.norm_zero_centred = 1;
    }

    frost_status norm(const float* w, bf16* y) {
        AddRmsNormBf16Params p{cs.scratch.h, nullptr, w, y, c.hidden_size, 1, eps(), rows, n_rows(), 0};
        p.pdl = pdl();
        return check(add_rmsnorm_launch(p, st), "add_rmsnorm");
    }

    frost_status linear_mixer(int l) {
        const CudaLayer& L = cs.layers[l];
        const CudaScratch& s = cs.scratch;
        const int H = c.hidden_size, C = c.conv_dim(), V = c.lin_v_dim(), Q = c.lin_q_dim();
        const int Hv = c.lin_num_v_heads, Hk = c.lin_num_k_heads, dk = c.lin_k_head_dim, dv = c.lin_v_head_dim;
        const int W = cs.lin_width;  // [qkv | z | b | a | pad]
        FROST_TRY(gemm("gemm lin in_proj", s.x, H, L.in_proj, W, H, s.proj, W, false, false, rows, L.in_ln));
        Conv1dBf16Params cv{s.proj, L.conv_w, ss.conv_state[l], s.conv_out, W, C, c.conv_kernel,
                            dk, 2 * Hk, Hk, kL2Eps, 1.0f / std::sqrt(static_cast<float>(dk)), rows, n_rows()};
        cv.pdl = pdl();
        FROST_TRY(check(conv1d_launch(cv, st), "conv1d+silu+l2norm"));
        const bf16* gate_b = s.proj + C + V;
        const bf16* gate_a = gate_b + Hv;
        GdnBf16Params dp{s.conv_out, s.conv_out + Q, s.conv_out + 2 * Q, s.beta, s.g, ss.rec_state[l], s.core,
                         s.gdn_work, C, Hk, Hv, dk, dv, kernels::kGdnChunk, rows, ss.cursor};
        if (decode) {  // the recurrence computes β and g itself: one launch fewer
            dp.gate_b = gate_b;
            dp.gate_a = gate_a;
            dp.A_log = L.A_log;
            dp.dt_bias = L.dt_bias;
            dp.gate_row_stride = W;
            dp.pdl = pdl();
            FROST_TRY(check(gdn_recurrent_launch(dp, st), "gdn_recurrent+gate"));
        } else {
            GdnGateBf16Params gp{gate_b, gate_a, L.A_log, L.dt_bias, s.beta, s.g, W, Hv, rows, n_rows()};
            FROST_TRY(check(gdn_gate_launch(gp, st), "gdn_gate"));
            FROST_TRY(check(gdn_chunk_launch(dp, st), "gdn_chunk"));
        }
        GatedRmsNormBf16Params gn{s.core, s.proj + C, L.gdn_norm, s.gated, W, dv, Hv, eps(), rows, n_rows()};
        gn.pdl = pdl();
        FROST_TRY(check(gated_rmsnorm_launch(gn, st), "gated_rmsnorm"));
        return gemm("gemm lin out_proj", s.gated, V, L.out_proj, H, V, s.h, H, false, true, rows);
    }

    frost_status full_mixer(int l) {
        const CudaLayer& L = cs.layers[l];
        const CudaScratch& s = cs.scratch;
        const int H = c.hidden_size, Hq = c.num_heads, Hkv = c.num_kv_heads, d = c.head_dim;
        const int W = cs.full_width;  // [q|gate interleaved per head | k | v]
        bf16* q = s.proj;
        bf16* k = s.proj + 2 * Hq * d;
        bf16* v = k + Hkv * d;
        FROST_TRY(gemm("gemm full qkv_proj", s.x, H, L.in_proj, W, H, s.proj, W, false, false, rows, L.in_ln));
        QkNormRopeBf16Params qp{q, k, L.q_norm, L.k_norm, W, 2 * d, W, d, Hq, Hkv, d, c.rotary_dim, 1, eps(),
                                static_cast<float>(c.rope_theta), rows, ss.cursor, rope_inv_freq_bf16 ? 1 : 0};
        FROST_TRY(check(qk_norm_rope_launch(qp, st), "qk_norm_rope"));
        KvAppendBf16Params kp{k, v, ss.k_cache[l], ss.v_cache[l], W, Hkv * d, max_seq, rows, ss.cursor};
        FROST_TRY(check(kv_append_launch(kp, st), "kv_append"));
        AttentionBf16Params ap{q, c.attn_output_gate ? q + d : nullptr, ss.k_cache[l], ss.v_cache[l], s.core,
                               s.attn_work, W, 2 * d, Hq, Hkv, d, 1.0f / std::sqrt(static_cast<float>(d)),
                               max_seq, rows, ss.cursor};
        if (decode)
            FROST_TRY(check(attn_decode_launch(ap, st), "attn_decode"));
        else
            FROST_TRY(check(attn_prefill_launch(ap, st), "attn_prefill"));
        return gemm("gemm full o_proj", s.core, Hq * d, L.out_proj, H, Hq * d, s.h, H, false, true, rows);
    }

    frost_status mlp(int l) {
        const CudaLayer& L = cs.layers[l];
        const CudaScratch& s = cs.scratch;
        const int H = c.hidden_size, F = c.intermediate_size;
        if (decode) {  // gate_up GEMV with SwiGLU in its epilogue (same bits as the two kernels)
            GemmBf16Params p{s.x, L.gate_up, s.act, H, F, 1, 2 * F, H, 0, 0};
            p.swiglu = 1;
            p.pdl = pdl();
            if (fold_norm()) fold_norm_into(p, L.post_ln);
            FROST_TRY(check(gemv_launch(p, st), "gemv mlp gate_up+swiglu"));
            return gemm("gemm mlp down", s.act, F, L.down, H, F, s.h, H, false, true, rows);
        }
        FROST_TRY(gemm("gemm mlp gate_up", s.x, H, L.gate_up, 2 * F, H, s.proj, 2 * F, false, false, rows));
        SwigluBf16Params sw{s.proj, s.act, F, rows, n_rows()};
        FROST_TRY(check(swiglu_launch(sw, st), "swiglu"));
        return gemm("gemm mlp down", s.act, F, L.down, H, F, s.h, H, false, true, rows);
    }

    frost_status record() {
        const CudaScratch& s = cs.scratch;
        const int H = c.hidden_size, V = c.vocab_size;
        if (decode) {
            CursorParams cp{ss.cursor, s.ids, kCursorDecodeBegin};
            FROST_TRY(check(cursor_launch(cp, st), "cursor decode_begin"));
        }
        EmbedBf16Params ep{cs.embed, s.ids, s.h, V, H, rows, n_rows()};
        FROST_TRY(check(embed_launch(ep, st), "embed"));
        for (int l = 0; l < c.num_layers; ++l) {
            if (!fold_norm()) FROST_TRY(norm(cs.layers[l].in_ln, s.x));
            if (c.is_linear(l))
                FROST_TRY(linear_mixer(l));
            else
                FROST_TRY(full_mixer(l));
            if (!fold_norm()) FROST_TRY(norm(cs.layers[l].post_ln, s.x));
            FROST_TRY(mlp(l));
        }
        // Final norm + lm_head: every row for eval (logits_all), else only the last valid row.
        const int lm_rows = logits_all ? rows : 1;
        AddRmsNormBf16Params fp{s.h, nullptr, cs.final_norm, s.fin, H, 1, eps(), rows, n_rows(), lm_rows == 1 ? 1 : 0};
        fp.pdl = pdl();
        if (!fold_norm()) FROST_TRY(check(add_rmsnorm_launch(fp, st), "final rmsnorm"));
        FROST_TRY(gemm("gemm lm_head", s.fin, H, cs.lm_head, V, H, s.logits, V, true, false, lm_rows, cs.final_norm));
        SampleParams sm{};
        sm.logits = s.logits; sm.row_stride = V; sm.vocab = V; sm.select_last_row = lm_rows == 1 ? 0 : 1;
        sm.n_rows = n_rows(); sm.work = s.sample_work; sm.work_idx = nullptr;
        sm.cursor = ss.cursor; sm.out_token = s.out_token;
        FROST_TRY(check(sample_launch(sm, st), "sample"));
        CursorParams adv{ss.cursor, nullptr, kCursorAdvance};
        return check(cursor_launch(adv, st), "cursor advance");
    }
};

}  // namespace

frost_status record_cuda_forward(const ModelConfig& cfg, bool logits_all, int max_seq, CudaState& cs,
                                 int session, int rows, bool decode, cudaStream_t stream, bool rope_inv_freq_bf16) {
    CudaRecorder r{cfg, logits_all, max_seq, cs, cs.sessions[session], rows, decode, stream, rope_inv_freq_bf16};
    return r.record();
}

}  // namespace frost::model
#endif  // FROST_WITH_CUDA
