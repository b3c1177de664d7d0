// Per-kernel benchmark of the CUDA hybrid-LM kernels on the 9B-style shapes (H 4096, 24 linear +
// 8 full layers, Hq16/Hkv4 x256, Hk16/Hv32 x128, F 12288, vocab 248320): the ceilings measured in
// the same run (device copy bandwidth, cuBLASLt bf16 8192^3), then one prefill chunk and one
// decode step, kernel by kernel: median time (CUDA events, warm-up, L2 flushed before every
// timed launch by a read-only pass), GB/s, TFLOP/s and % of the floor max(bytes / bandwidth,
// FLOPs / GEMM rate).
// Usage: bench_cuda_kernels [out.json] [prefill_rows[,rows...]] [decode_pos...]
#if !FROST_WITH_CUDA
#include <cstdio>
int main() {
    std::printf("bench_cuda_kernels: built without CUDA\n");
    return 0;
}
#else
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cuda/lm_gemm.h"
#include "kernels/cuda/lm_kernels.h"

using namespace frost::kernels;

namespace {

// 9B-style shapes (performance.md, "Baseline").
constexpr int kH = 4096, kLin = 24, kFull = 8, kLayers = kLin + kFull;
constexpr int kHq = 16, kHkv = 4, kHd = 256, kRot = 64;
constexpr int kHk = 16, kHv = 32, kDk = 128, kConvK = 4;
constexpr int kF = 12288, kVocab = 248320;
constexpr int kQkvC = 2 * kHk * kDk + kHv * kDk;       // 8192 conv channels
constexpr int kLinN = kQkvC + kHv * kDk + 2 * kHv;     // fused in_proj: qkv | z | b | a
constexpr int kFullN = 2 * kHq * kHd + 2 * kHkv * kHd; // fused q(+gate) | k | v
constexpr int kWarmup = 3, kRepeats = 25;
constexpr size_t kFlushBytes = 256u << 20;  // > 5x the H100's 50 MB L2
constexpr size_t kCopyBytes = 1u << 30;
constexpr int kCeilGemm = 8192;
constexpr int kLongPos = 32768, kLongRows = 64;  // the attn_prefill row of a suffix after a long prefix

#define CK(expr)                                                                              \
    do {                                                                                      \
        const cudaError_t e_ = (expr);                                                        \
        if (e_ != cudaSuccess) {                                                              \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

// The L2 is flushed by READING a buffer 5x its size (a GEMV over it): a memset would leave the L2
// full of dirty lines whose write-back the timed kernel would pay (seen: ~12 us per kernel).
struct Timer {
    cudaStream_t s;
    cudaEvent_t a, b;
    GemmBf16Params flush;
    // Median over repeats of one launch; the flush runs outside the timed region.
    double median_ms(const std::function<cudaError_t()>& launch, bool flush_l2 = true) {
        for (int i = 0; i < kWarmup; ++i) CK(launch());
        std::vector<float> t;
        for (int i = 0; i < kRepeats; ++i) {
            if (flush_l2) CK(gemv_launch(flush, s));
            CK(cudaEventRecord(a, s));
            CK(launch());
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, a, b));
            t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};

template <class T>
T* dalloc(size_t n) {
    void* p = nullptr;
    CK(cudaMalloc(&p, n * sizeof(T) + 256));
    return static_cast<T*>(p);
}

// Random bf16 fill from a host pattern tiled over the buffer (never zeros).
void fill_bf16(bf16* p, size_t n, float scale, std::mt19937& rng, cudaStream_t s) {
    static std::vector<bf16> pattern;
    constexpr size_t kPattern = 1u << 22;
    if (pattern.empty()) {
        std::uniform_real_distribution<float> d(-1, 1);
        pattern.resize(kPattern);
        for (auto& x : pattern) x = __float2bfloat16(d(rng));
    }
    std::vector<bf16> scaled(std::min(n, kPattern));
    for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = __float2bfloat16(__bfloat162float(pattern[i]) * scale);
    CK(cudaMemcpy(p, scaled.data(), scaled.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    for (size_t off = scaled.size(); off < n; off += std::min(off, n - off)) {
        CK(cudaMemcpyAsync(p + off, p, std::min(off, n - off) * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
    }
    CK(cudaStreamSynchronize(s));
}

void fill_f32(float* p, size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> h(n);
    for (auto& x : h) x = d(rng);
    CK(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}

struct Row {
    std::string phase, name;
    int per_forward;  // launches per forward pass
    double ms;
    KernelCost cost;
};

struct Ceilings {
    double copy_gbs;    // bytes copied per second (D2D)
    double rw_gbs;      // bytes read + written per second = 2 x copy
    double gemm_tflops; // cuBLASLt bf16 8192^3
};

double floor_ms(const KernelCost& c, const Ceilings& ce) {
    return std::max(c.bytes / (ce.rw_gbs * 1e9), c.flops / (ce.gemm_tflops * 1e12)) * 1e3;
}

// Everything one forward needs, sized for max_rows rows.
struct Model {
    int max_rows, max_seq;
    bf16 *x, *h, *lin_in, *conv_out, *gdn_o, *gated, *full_in, *attn_o, *mlp_in, *mlp_act, *xnorm_last;
    bf16 *w_embed, *w_lin, *w_out, *w_full, *w_o, *w_gate_up, *w_down, *w_head;
    float *norm_w, *conv_w, *A_log, *dt_bias, *qn_w, *kn_w, *gn_w;
    float *beta, *g, *state, *gdn_work, *attn_work, *logits, *sample_work;
    bf16 *conv_state, *k_cache, *v_cache;
    int32_t *ids, *n_rows, *token;
    StepCursor* cursor;
};

Model make_model(int max_rows, int max_seq, std::mt19937& rng, cudaStream_t s) {
    Model m{};
    m.max_rows = max_rows;
    m.max_seq = max_seq;
    const size_t R = max_rows;
    m.x = dalloc<bf16>(R * kH);
    m.h = dalloc<bf16>(R * kH);
    m.lin_in = dalloc<bf16>(R * kLinN);
    m.conv_out = dalloc<bf16>(R * kQkvC);
    m.gdn_o = dalloc<bf16>(R * kHv * kDk);
    m.gated = dalloc<bf16>(R * kHv * kDk);
    m.full_in = dalloc<bf16>(R * kFullN);
    m.attn_o = dalloc<bf16>(R * kHq * kHd);
    m.mlp_in = dalloc<bf16>(R * 2 * kF);
    m.mlp_act = dalloc<bf16>(R * kF);
    m.xnorm_last = dalloc<bf16>(kH);
    m.w_embed = dalloc<bf16>(static_cast<size_t>(kVocab) * kH);
    m.w_lin = dalloc<bf16>(static_cast<size_t>(kLinN) * kH);
    m.w_out = dalloc<bf16>(static_cast<size_t>(kH) * kHv * kDk);
    m.w_full = dalloc<bf16>(static_cast<size_t>(kFullN) * kH);
    m.w_o = dalloc<bf16>(static_cast<size_t>(kH) * kHq * kHd);
    m.w_gate_up = dalloc<bf16>(static_cast<size_t>(2 * kF) * kH);
    m.w_down = dalloc<bf16>(static_cast<size_t>(kH) * kF);
    m.w_head = m.w_embed;  // tied, as in the smaller checkpoints
    for (auto [p, n, sc] : {std::tuple{m.w_embed, size_t(kVocab) * kH, 0.5f},
                            {m.w_lin, size_t(kLinN) * kH, 0.03f},
                            {m.w_out, size_t(kH) * kHv * kDk, 0.03f},
                            {m.w_full, size_t(kFullN) * kH, 0.03f},
                            {m.w_o, size_t(kH) * kHq * kHd, 0.03f},
                            {m.w_gate_up, size_t(2 * kF) * kH, 0.03f},
                            {m.w_down, size_t(kH) * kF, 0.02f},
                            {m.x, R * kH, 1.0f},
                            {m.h, R * kH, 1.0f}}) {
        fill_bf16(p, n, sc, rng, s);
    }
    m.norm_w = dalloc<float>(kH);
    m.conv_w = dalloc<float>(size_t(kQkvC) * kConvK);
    m.A_log = dalloc<float>(kHv);
    m.dt_bias = dalloc<float>(kHv);
    m.qn_w = dalloc<float>(kHd);
    m.kn_w = dalloc<float>(kHd);
    m.gn_w = dalloc<float>(kDk);
    fill_f32(m.norm_w, kH, -0.1f, 0.1f, rng);
    fill_f32(m.conv_w, size_t(kQkvC) * kConvK, -0.5f, 0.5f, rng);
    fill_f32(m.A_log, kHv, -1.0f, 1.5f, rng);
    fill_f32(m.dt_bias, kHv, -0.5f, 0.5f, rng);
    fill_f32(m.qn_w, kHd, -0.1f, 0.1f, rng);
    fill_f32(m.kn_w, kHd, -0.1f, 0.1f, rng);
    fill_f32(m.gn_w, kDk, 0.8f, 1.2f, rng);
    m.beta = dalloc<float>(R * kHv);
    m.g = dalloc<float>(R * kHv);
    m.state = dalloc<float>(size_t(kHv) * kDk * kDk);
    fill_f32(m.state, size_t(kHv) * kDk * kDk, -0.05f, 0.05f, rng);
    m.conv_state = dalloc<bf16>(size_t(kQkvC) * (kConvK - 1));
    fill_bf16(m.conv_state, size_t(kQkvC) * (kConvK - 1), 1.0f, rng, s);
    m.k_cache = dalloc<bf16>(size_t(max_seq) * kHkv * kHd);
    m.v_cache = dalloc<bf16>(size_t(max_seq) * kHkv * kHd);
    fill_bf16(m.k_cache, size_t(max_seq) * kHkv * kHd, 1.0f, rng, s);
    fill_bf16(m.v_cache, size_t(max_seq) * kHkv * kHd, 1.0f, rng, s);
    m.logits = dalloc<float>(kVocab);
    m.sample_work = dalloc<float>(sample_work_floats(kVocab));
    m.ids = dalloc<int32_t>(R);
    std::vector<int32_t> ids(R);
    for (auto& i : ids) i = static_cast<int32_t>(rng() % kVocab);
    CK(cudaMemcpy(m.ids, ids.data(), R * sizeof(int32_t), cudaMemcpyHostToDevice));
    m.n_rows = dalloc<int32_t>(1);
    m.token = dalloc<int32_t>(1);
    m.cursor = dalloc<StepCursor>(1);
    return m;
}

void set_cursor(const Model& m, int pos, int rows) {
    StepCursor c{};
    c.pos = pos;
    c.n_tokens = rows;
    CK(cudaMemcpy(m.cursor, &c, sizeof(c), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(m.n_rows, &rows, sizeof(rows), cudaMemcpyHostToDevice));
}

// The launches of one step with `rows` rows at position `pos`, in forward order. Each entry is
// timed alone; `per_forward` is how often it runs in one forward.
struct Step {
    std::vector<Row> rows;
};

void run_phase(const char* phase, Model& m, int rows, int pos, Timer& t, GemmLt* lt, const Ceilings& ce,
               std::vector<Row>& out) {
    set_cursor(m, pos, rows);
    const bool decode = rows == 1;
    std::vector<GemmPlan*> plans;
    auto add = [&](const char* name, int per_forward, KernelCost cost, const std::function<cudaError_t()>& launch) {
        CK(launch());  // produce this stage's output for the next stage
        CK(cudaStreamSynchronize(t.s));
        const double ms = t.median_ms(launch);
        set_cursor(m, pos, rows);  // stages that advance nothing still leave the cursor as set
        out.push_back({phase, name, per_forward, ms, cost});
    };
    auto gemm = [&](const char* name, int per_forward, const bf16* x, const bf16* w, void* y, int64_t ldx, int64_t ldy,
                    int N, int K, bool f32, bool acc, bool last_row) {
        GemmBf16Params p{x, w, y, ldx, ldy, last_row ? 1 : rows, N, K, f32, acc};
        GemmPlan* plan = nullptr;
        CK(gemm_plan_create(lt, p, &plan));
        plans.push_back(plan);
        add(name, per_forward, gemm_cost(p), [=] { return gemm_launch(plan, p, t.s); });
        if (p.M == 1) {
            const std::string gv = std::string(name) + " [gemv]";
            out.push_back({phase, gv, 0, t.median_ms([=] { return gemv_launch(p, t.s); }), gemm_cost(p)});
        }
    };

    EmbedBf16Params ep{m.w_embed, m.ids, m.x, kVocab, kH, rows, m.n_rows};
    add("embed", 1, embed_cost(ep, rows), [=] { return embed_launch(ep, t.s); });
    AddRmsNormBf16Params np{m.h, m.x, m.norm_w, m.x, kH, 1, 1e-6f, rows, m.n_rows, 0};
    add("add_rmsnorm", 2 * kLayers, add_rmsnorm_cost(np, rows), [=] { return add_rmsnorm_launch(np, t.s); });
    np.delta = nullptr;

    // Gated DeltaNet layer.
    gemm("lin in_proj (qkv|z|b|a)", kLin, m.x, m.w_lin, m.lin_in, kH, kLinN, kLinN, kH, false, false, false);
    if (decode) {  // the decode graph's form: the pre-norm folded into the GEMV's staging
        GemmBf16Params fp{m.h, m.w_lin, m.lin_in, kH, kLinN, 1, kLinN, kH, 0, 0};
        fp.norm_w = m.norm_w;
        fp.norm_eps = 1e-6f;
        fp.norm_zero_centred = 1;
        out.push_back({phase, "lin in_proj +rmsnorm [gemv]", 0, t.median_ms([=] { return gemv_launch(fp, t.s); }),
                       gemm_cost(fp)});
    }
    Conv1dBf16Params cp{m.lin_in, m.conv_w, m.conv_state, m.conv_out, kLinN, kQkvC, kConvK, kDk, 2 * kHk, kHk,
                        1e-6f, 1.0f / std::sqrt(float(kDk)), rows, m.n_rows};
    add("conv1d+silu+l2norm", kLin, conv1d_cost(cp, rows), [=] { return conv1d_launch(cp, t.s); });
    GdnGateBf16Params gp{m.lin_in + kQkvC + kHv * kDk, m.lin_in + kQkvC + kHv * kDk + kHv, m.A_log, m.dt_bias,
                         m.beta, m.g, kLinN, kHv, rows, m.n_rows};
    add("gdn_gate", kLin, gdn_gate_cost(gp, rows), [=] { return gdn_gate_launch(gp, t.s); });
    GdnBf16Params dp{m.conv_out, m.conv_out + kHk * kDk, m.conv_out + 2 * kHk * kDk, m.beta, m.g, m.state, m.gdn_o,
                     m.gdn_work, kQkvC, kHk, kHv, kDk, kDk, kGdnChunk, rows, m.cursor};
    if (decode) {
        add("gdn_recurrent", kLin, gdn_recurrent_cost(dp, rows), [=] { return gdn_recurrent_launch(dp, t.s); });
        GdnBf16Params fdp = dp;  // the decode graph's fused form: gates computed inside
        fdp.gate_b = gp.b;
        fdp.gate_a = gp.a;
        fdp.A_log = m.A_log;
        fdp.dt_bias = m.dt_bias;
        fdp.gate_row_stride = kLinN;
        out.push_back({phase, "gdn_recurrent+gate (fused)", 0,
                       t.median_ms([=] { return gdn_recurrent_launch(fdp, t.s); }), gdn_recurrent_cost(fdp, rows)});
    } else {
        add("gdn_chunk", kLin, gdn_chunk_cost(dp, rows), [=] { return gdn_chunk_launch(dp, t.s); });
        const std::pair<const char*, int> stages[] = {{"  gdn_chunk 1 prep (A, solve, P)", kGdnStagePrep},
                                                      {"  gdn_chunk 2 state pass", kGdnStageState},
                                                      {"  gdn_chunk 3 output", kGdnStageOut}};
        for (auto [sname, st] : stages) {
            out.push_back({phase, sname, 0, t.median_ms([=] { return gdn_chunk_launch_stages(dp, t.s, st); }), KernelCost{}});
        }
    }
    GatedRmsNormBf16Params gn{m.gdn_o, m.lin_in + kQkvC, m.gn_w, m.gated, kLinN, kDk, kHv, 1e-6f, rows, m.n_rows};
    add("gated_rmsnorm", kLin, gated_rmsnorm_cost(gn, rows), [=] { return gated_rmsnorm_launch(gn, t.s); });
    gemm("lin out_proj (+res)", kLin, m.gated, m.w_out, m.h, kHv * kDk, kH, kH, kHv * kDk, false, true, false);

    // Gated full-attention layer.
    gemm("full qkv_proj (q|gate|k|v)", kFull, m.x, m.w_full, m.full_in, kH, kFullN, kFullN, kH, false, false, false);
    QkNormRopeBf16Params qp{m.full_in, m.full_in + 2 * kHq * kHd, m.qn_w, m.kn_w, kFullN, 2 * kHd, kFullN, kHd,
                            kHq, kHkv, kHd, kRot, 1, 1e-6f, 1e7f, rows, m.cursor};
    add("qk_norm_rope", kFull, qk_norm_rope_cost(qp, rows), [=] { return qk_norm_rope_launch(qp, t.s); });
    KvAppendBf16Params kp{m.full_in + 2 * kHq * kHd, m.full_in + 2 * kHq * kHd + kHkv * kHd, m.k_cache, m.v_cache,
                          kFullN, kHkv * kHd, m.max_seq, rows, m.cursor};
    add("kv_append", kFull, kv_append_cost(kp, rows), [=] { return kv_append_launch(kp, t.s); });
    AttentionBf16Params ap{m.full_in, m.full_in + kHd, m.k_cache, m.v_cache, m.attn_o, m.attn_work, kFullN, 2 * kHd,
                           kHq, kHkv, kHd, 1.0f / 16.0f, m.max_seq, rows, m.cursor};
    if (decode) {
        add("attn_decode", kFull, attn_decode_cost(ap, pos), [=] { return attn_decode_launch(ap, t.s); });
    } else {
        add("attn_prefill", kFull, attn_prefill_cost(ap, rows, pos), [=] { return attn_prefill_launch(ap, t.s); });
        if (m.max_rows >= kLongRows && m.max_seq >= kLongPos + kLongRows) {
            // A short chunk after a long restored prefix: the split-KV launch vs the single kernel.
            AttentionBf16Params lp = ap;
            lp.max_rows = kLongRows;
            const KernelCost lc = attn_prefill_cost(lp, kLongRows, kLongPos);
            const int splits = attn_prefill_splits(lp);
            set_cursor(m, kLongPos, kLongRows);
            const std::string sname = "attn_prefill 64@32768 S" + std::to_string(splits);
            out.push_back({phase, sname, 0, t.median_ms([=] { return attn_prefill_launch(lp, t.s); }), lc});
            out.push_back({phase, "attn_prefill 64@32768 S1", 0,
                           t.median_ms([=] { return attn_prefill_launch_splits(lp, t.s, 1); }), lc});
            set_cursor(m, pos, rows);
        }
    }
    gemm("full o_proj (+res)", kFull, m.attn_o, m.w_o, m.h, kHq * kHd, kH, kH, kHq * kHd, false, true, false);

    // MLP.
    gemm("mlp gate_up", kLayers, m.x, m.w_gate_up, m.mlp_in, kH, 2 * kF, 2 * kF, kH, false, false, false);
    SwigluBf16Params sp{m.mlp_in, m.mlp_act, kF, rows, m.n_rows};
    add("swiglu", kLayers, swiglu_cost(sp, rows), [=] { return swiglu_launch(sp, t.s); });
    if (decode) {
        GemmBf16Params sg{m.x, m.w_gate_up, m.mlp_act, kH, kF, 1, 2 * kF, kH, 0, 0};
        sg.swiglu = 1;
        out.push_back({phase, "mlp gate_up+swiglu [gemv]", 0, t.median_ms([=] { return gemv_launch(sg, t.s); }),
                       gemm_cost(sg)});
    }
    gemm("mlp down (+res)", kLayers, m.mlp_act, m.w_down, m.h, kF, kH, kH, kF, false, true, false);

    // Head: final norm of the last row, lm_head, greedy sample.
    AddRmsNormBf16Params fp{m.h, nullptr, m.norm_w, m.xnorm_last, kH, 1, 1e-6f, rows, m.n_rows, 1};
    add("final_norm (last row)", 1, add_rmsnorm_cost(fp, rows), [=] { return add_rmsnorm_launch(fp, t.s); });
    gemm("lm_head (fp32 logits)", 1, m.xnorm_last, m.w_head, m.logits, kH, kVocab, kVocab, kH, true, false, true);
    SampleArgmaxParams sa{m.logits, kVocab, kVocab, 0, nullptr, m.sample_work, m.cursor, m.token, 0};
    add("sample_argmax", 1, sample_argmax_cost(sa), [=] { return sample_argmax_launch(sa, t.s); });
    if (decode) {  // random mode (T 0.8, top-k 50, top-p 0.9): the same launches serve both modes
        StepCursor c{};
        c.pos = pos;
        c.n_tokens = 1;
        c.sample_mode = kSampleRandom;
        c.temperature = 0.8f;
        c.top_k = 50;
        c.top_p = 0.9f;
        CK(cudaMemcpy(m.cursor, &c, sizeof(c), cudaMemcpyHostToDevice));
        SampleParams rp{m.logits, kVocab, kVocab, 0, nullptr, m.sample_work, nullptr, m.cursor, m.token};
        out.push_back({phase, "sample (top-k 50, top-p 0.9)", 0, t.median_ms([=] { return sample_launch(rp, t.s); }),
                       sample_argmax_cost(sa)});
        set_cursor(m, pos, rows);
    }
    for (auto* p : plans) gemm_plan_destroy(p);
    (void)ce;
}

// ---------------------------------------------------------------------------------------------
// Whole forward as one CUDA graph over distinct per-layer weights (no L2 flush: 16 GB of weights
// stream through it anyway): the in-graph time of a decode step and of a prefill chunk, against
// the floor of the bytes / FLOPs its kernels declare.
struct LayerWeights {
    bf16 *w_in, *w_out, *w_gate_up, *w_down;  // w_in: lin in_proj or full qkv; w_out: out / o proj
    float* state;                             // linear layers
    bf16 *conv_state, *k_cache, *v_cache;     // conv (linear) or KV cache (full)
};

bool is_full(int layer) { return layer % 4 == 3; }  // 3 linear : 1 full, as the 9B config

std::vector<LayerWeights> make_layers(const Model& m, std::mt19937& rng, cudaStream_t s) {
    std::vector<LayerWeights> ls(kLayers);
    for (int l = 0; l < kLayers; ++l) {
        LayerWeights& w = ls[l];
        const size_t n_in = size_t(is_full(l) ? kFullN : kLinN) * kH;
        const size_t n_out = size_t(kH) * (is_full(l) ? kHq * kHd : kHv * kDk);
        w.w_in = dalloc<bf16>(n_in);
        w.w_out = dalloc<bf16>(n_out);
        w.w_gate_up = dalloc<bf16>(size_t(2 * kF) * kH);
        w.w_down = dalloc<bf16>(size_t(kH) * kF);
        fill_bf16(w.w_in, n_in, 0.03f, rng, s);
        fill_bf16(w.w_out, n_out, 0.03f, rng, s);
        fill_bf16(w.w_gate_up, size_t(2 * kF) * kH, 0.03f, rng, s);
        fill_bf16(w.w_down, size_t(kH) * kF, 0.02f, rng, s);
        if (is_full(l)) {
            w.k_cache = dalloc<bf16>(size_t(m.max_seq) * kHkv * kHd);
            w.v_cache = dalloc<bf16>(size_t(m.max_seq) * kHkv * kHd);
            fill_bf16(w.k_cache, size_t(m.max_seq) * kHkv * kHd, 1.0f, rng, s);
            fill_bf16(w.v_cache, size_t(m.max_seq) * kHkv * kHd, 1.0f, rng, s);
        } else {
            w.state = dalloc<float>(size_t(kHv) * kDk * kDk);
            fill_f32(w.state, size_t(kHv) * kDk * kDk, -0.05f, 0.05f, rng);
            w.conv_state = dalloc<bf16>(size_t(kQkvC) * (kConvK - 1));
            fill_bf16(w.conv_state, size_t(kQkvC) * (kConvK - 1), 1.0f, rng, s);
        }
    }
    return ls;
}

struct ForwardGraph {
    double ms = 0;
    KernelCost cost;
    int kernels = 0;
    bool ok = false;
};

// How a decode step is recorded: pdl = programmatic dependent launch of the GEMVs, norms, conv1d
// and GDN recurrence; fused = gdn_gate inside the recurrence and SwiGLU inside the gate_up GEMV;
// fold_norm = each RMSNorm inside the GEMV after it (measured slower, off in the engine). pdl +
// fused = model/forward_cuda.cpp's decode (the unsuffixed graph line); all off = the sequence
// before these changes.
struct DecodeOpts {
    bool pdl = false;
    bool fused = false;
    bool fold_norm = false;  // the RMSNorms folded into the GEMVs that consume them
};

// Records one forward of `rows` rows (1 = decode, GEMVs) at the cursor's position onto stream s.
cudaError_t record_forward(const Model& m, const std::vector<LayerWeights>& ls, int rows, int pos, GemmLt* lt,
                           std::vector<GemmPlan*>& plans, cudaStream_t s, KernelCost& total, int& kernels,
                           DecodeOpts opt) {
    cudaError_t err = cudaSuccess;
    auto note = [&](cudaError_t e, KernelCost c) {
        if (err == cudaSuccess) err = e;
        total.bytes += c.bytes;
        total.flops += c.flops;
        ++kernels;
    };
    const bool decode = rows == 1;
    const bool fold = decode && opt.fold_norm;
    auto fold_into = [&](GemmBf16Params& p) {
        p.x = m.h;
        p.norm_w = m.norm_w;
        p.norm_eps = 1e-6f;
        p.norm_zero_centred = 1;
    };
    auto gemm = [&](const bf16* x, const bf16* w, void* y, int64_t ldx, int64_t ldy, int N, int K, bool f32, bool acc,
                    int M, bool normed = false) {
        GemmBf16Params p{x, w, y, ldx, ldy, M, N, K, f32, acc};
        p.pdl = decode && opt.pdl;
        if (fold && normed) fold_into(p);
        if (M == 1) return note(gemv_launch(p, s), gemm_cost(p));
        GemmPlan* plan = nullptr;
        const cudaError_t e = gemm_plan_create(lt, p, &plan);
        if (e != cudaSuccess) return note(e, {});
        plans.push_back(plan);
        note(gemm_launch(plan, p, s), gemm_cost(p));
    };
    EmbedBf16Params ep{m.w_embed, m.ids, m.h, kVocab, kH, rows, m.n_rows};
    note(embed_launch(ep, s), embed_cost(ep, rows));
    for (int l = 0; l < kLayers; ++l) {
        const LayerWeights& w = ls[l];
        AddRmsNormBf16Params np{m.h, nullptr, m.norm_w, m.x, kH, 1, 1e-6f, rows, m.n_rows, 0};
        np.pdl = decode && opt.pdl;
        if (!fold) note(add_rmsnorm_launch(np, s), add_rmsnorm_cost(np, rows));
        if (!is_full(l)) {
            gemm(m.x, w.w_in, m.lin_in, kH, kLinN, kLinN, kH, false, false, rows, true);
            Conv1dBf16Params cp{m.lin_in, m.conv_w, w.conv_state, m.conv_out, kLinN, kQkvC, kConvK, kDk, 2 * kHk, kHk,
                                1e-6f, 1.0f / std::sqrt(float(kDk)), rows, m.n_rows};
            cp.pdl = decode && opt.pdl;
            note(conv1d_launch(cp, s), conv1d_cost(cp, rows));
            GdnGateBf16Params gp{m.lin_in + kQkvC + kHv * kDk, m.lin_in + kQkvC + kHv * kDk + kHv, m.A_log, m.dt_bias,
                                 m.beta, m.g, kLinN, kHv, rows, m.n_rows};
            GdnBf16Params dp{m.conv_out, m.conv_out + kHk * kDk, m.conv_out + 2 * kHk * kDk, m.beta, m.g, w.state,
                             m.gdn_o, m.gdn_work, kQkvC, kHk, kHv, kDk, kDk, kGdnChunk, rows, m.cursor};
            if (decode && opt.fused) {
                dp.gate_b = gp.b;
                dp.gate_a = gp.a;
                dp.A_log = m.A_log;
                dp.dt_bias = m.dt_bias;
                dp.gate_row_stride = kLinN;
            } else {
                note(gdn_gate_launch(gp, s), gdn_gate_cost(gp, rows));
            }
            dp.pdl = decode && opt.pdl;
            if (decode) {
                note(gdn_recurrent_launch(dp, s), gdn_recurrent_cost(dp, rows));
            } else {
                note(gdn_chunk_launch(dp, s), gdn_chunk_cost(dp, rows));
            }
            GatedRmsNormBf16Params gn{m.gdn_o, m.lin_in + kQkvC, m.gn_w, m.gated, kLinN, kDk, kHv, 1e-6f, rows, m.n_rows};
            gn.pdl = decode && opt.pdl;
            note(gated_rmsnorm_launch(gn, s), gated_rmsnorm_cost(gn, rows));
            gemm(m.gated, w.w_out, m.h, kHv * kDk, kH, kH, kHv * kDk, false, true, rows);
        } else {
            gemm(m.x, w.w_in, m.full_in, kH, kFullN, kFullN, kH, false, false, rows, true);
            QkNormRopeBf16Params qp{m.full_in, m.full_in + 2 * kHq * kHd, m.qn_w, m.kn_w, kFullN, 2 * kHd, kFullN, kHd,
                                    kHq, kHkv, kHd, kRot, 1, 1e-6f, 1e7f, rows, m.cursor};
            note(qk_norm_rope_launch(qp, s), qk_norm_rope_cost(qp, rows));
            KvAppendBf16Params kp{m.full_in + 2 * kHq * kHd, m.full_in + 2 * kHq * kHd + kHkv * kHd, w.k_cache, w.v_cache,
                                  kFullN, kHkv * kHd, m.max_seq, rows, m.cursor};
            note(kv_append_launch(kp, s), kv_append_cost(kp, rows));
            AttentionBf16Params ap{m.full_in, m.full_in + kHd, w.k_cache, w.v_cache, m.attn_o, m.attn_work, kFullN,
                                   2 * kHd, kHq, kHkv, kHd, 1.0f / 16.0f, m.max_seq, rows, m.cursor};
            if (decode) {
                note(attn_decode_launch(ap, s), attn_decode_cost(ap, pos));
            } else {
                note(attn_prefill_launch(ap, s), attn_prefill_cost(ap, rows, pos));
            }
            gemm(m.attn_o, w.w_out, m.h, kHq * kHd, kH, kH, kHq * kHd, false, true, rows);
        }
        if (!fold) note(add_rmsnorm_launch(np, s), add_rmsnorm_cost(np, rows));
        if (decode && opt.fused) {
            GemmBf16Params sg{m.x, w.w_gate_up, m.mlp_act, kH, kF, 1, 2 * kF, kH, 0, 0};
            sg.swiglu = 1;
            sg.pdl = opt.pdl;
            if (fold) fold_into(sg);
            note(gemv_launch(sg, s), gemm_cost(sg));
        } else {
            gemm(m.x, w.w_gate_up, m.mlp_in, kH, 2 * kF, 2 * kF, kH, false, false, rows);
            SwigluBf16Params sp{m.mlp_in, m.mlp_act, kF, rows, m.n_rows};
            note(swiglu_launch(sp, s), swiglu_cost(sp, rows));
        }
        gemm(m.mlp_act, w.w_down, m.h, kF, kH, kH, kF, false, true, rows);
    }
    AddRmsNormBf16Params fp{m.h, nullptr, m.norm_w, m.xnorm_last, kH, 1, 1e-6f, rows, m.n_rows, 1};
    fp.pdl = decode && opt.pdl;
    if (!fold) note(add_rmsnorm_launch(fp, s), add_rmsnorm_cost(fp, rows));
    gemm(m.xnorm_last, m.w_head, m.logits, kH, kVocab, kVocab, kH, true, false, 1, true);
    SampleArgmaxParams sa{m.logits, kVocab, kVocab, 0, nullptr, m.sample_work, m.cursor, m.token, 0};
    note(sample_argmax_launch(sa, s), sample_argmax_cost(sa));
    return err;
}

ForwardGraph time_forward_graph(Model& m, const std::vector<LayerWeights>& ls, int rows, int pos, GemmLt* lt,
                                Timer& t, DecodeOpts opt = {}) {
    ForwardGraph fg;
    set_cursor(m, pos, rows);
    std::vector<GemmPlan*> plans;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t err = cudaStreamBeginCapture(t.s, cudaStreamCaptureModeThreadLocal);
    cudaError_t rec = cudaSuccess;
    if (err == cudaSuccess) rec = record_forward(m, ls, rows, pos, lt, plans, t.s, fg.cost, fg.kernels, opt);
    if (err == cudaSuccess) err = cudaStreamEndCapture(t.s, &graph);
    if (err == cudaSuccess) err = rec;
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
    if (err == cudaSuccess) {
        fg.ms = t.median_ms([&] { return cudaGraphLaunch(exec, t.s); }, false);
        fg.ok = true;
    } else {
        std::printf("forward graph (rows %d): %s\n", rows, cudaGetErrorString(err));
        cudaGetLastError();
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (auto* p : plans) gemm_plan_destroy(p);
    return fg;
}

void print_table(const char* title, const std::vector<Row>& rows, const std::string& phase, const Ceilings& ce) {
    std::printf("\n%s\n", title);
    std::printf("%-30s %5s %10s %9s %9s %8s %11s\n", "kernel", "x/fw", "time us", "GB/s", "TFLOP/s", "%floor",
                "fw total us");
    double total = 0;
    std::vector<std::pair<double, std::string>> costs;
    for (const auto& r : rows) {
        if (r.phase != phase) continue;
        const double us = r.ms * 1e3;
        const double fw = us * r.per_forward;
        total += fw;
        if (r.per_forward > 0) costs.push_back({fw, r.name});
        std::printf("%-30s %5d %10.2f %9.1f %9.2f %7.1f%% %11.1f\n", r.name.c_str(), r.per_forward, us,
                    r.cost.bytes / (r.ms * 1e-3) / 1e9, r.cost.flops / (r.ms * 1e-3) / 1e12,
                    100.0 * floor_ms(r.cost, ce) / r.ms, fw);
    }
    std::sort(costs.rbegin(), costs.rend());
    std::printf("sum over one forward (kernels timed alone, no launch gaps): %.3f ms\n", total / 1e3);
    std::printf("top costs:");
    for (size_t i = 0; i < std::min<size_t>(3, costs.size()); ++i)
        std::printf(" %s %.0f us (%.0f%%);", costs[i].second.c_str(), costs[i].first, 100.0 * costs[i].first / total);
    std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
    const std::string json_path = argc > 1 ? argv[1] : "bench_cuda_kernels.json";
    std::vector<int> prefill_sizes;
    for (const char* c = argc > 2 ? argv[2] : "1024"; *c;) {
        prefill_sizes.push_back(std::atoi(c));
        while (*c && *c != ',') ++c;
        if (*c == ',') ++c;
    }
    const int prefill_rows = *std::max_element(prefill_sizes.begin(), prefill_sizes.end());
    std::vector<int> decode_pos;
    for (int i = 3; i < argc; ++i) decode_pos.push_back(std::atoi(argv[i]));
    if (decode_pos.empty()) decode_pos = {1024, 32768};
    const int max_seq =
        std::max({prefill_rows, *std::max_element(decode_pos.begin(), decode_pos.end()), kLongPos + kLongRows}) + 64;

    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    Timer t{};
    CK(cudaStreamCreate(&t.s));
    CK(cudaEventCreate(&t.a));
    CK(cudaEventCreate(&t.b));
    {
        constexpr int kFlushK = 4096;
        const int rows = static_cast<int>(kFlushBytes / (kFlushK * sizeof(bf16)));
        auto* fw = dalloc<bf16>(kFlushBytes / sizeof(bf16));
        auto* fx = dalloc<bf16>(kFlushK);
        auto* fy = dalloc<bf16>(rows);
        CK(cudaMemset(fw, 0x3C, kFlushBytes));
        CK(cudaMemset(fx, 0x3C, kFlushK * sizeof(bf16)));
        t.flush = GemmBf16Params{fx, fw, fy, kFlushK, rows, 1, rows, kFlushK, 0, 0};
    }
    std::mt19937 rng(std::random_device{}());

    // Ceilings.
    Ceilings ce{};
    {
        uint8_t* a = dalloc<uint8_t>(kCopyBytes);
        uint8_t* b = dalloc<uint8_t>(kCopyBytes);
        CK(cudaMemset(a, 0x5A, kCopyBytes));
        const double ms = t.median_ms([=] { return cudaMemcpyAsync(b, a, kCopyBytes, cudaMemcpyDeviceToDevice, t.s); }, false);
        ce.copy_gbs = kCopyBytes / (ms * 1e-3) / 1e9;
        ce.rw_gbs = 2 * ce.copy_gbs;
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    void* ws = dalloc<uint8_t>(kGemmWorkspaceBytes);
    GemmLt* lt = nullptr;
    CK(gemm_lt_create(ws, kGemmWorkspaceBytes, &lt));
    {
        const size_t n = size_t(kCeilGemm) * kCeilGemm;
        bf16* a = dalloc<bf16>(n);
        bf16* b = dalloc<bf16>(n);
        bf16* c = dalloc<bf16>(n);
        fill_bf16(a, n, 1.0f, rng, t.s);
        fill_bf16(b, n, 1.0f, rng, t.s);
        GemmBf16Params p{a, b, c, kCeilGemm, kCeilGemm, kCeilGemm, kCeilGemm, kCeilGemm, 0, 0};
        GemmPlan* plan = nullptr;
        CK(gemm_plan_create(lt, p, &plan));
        const double ms = t.median_ms([=] { return gemm_launch(plan, p, t.s); }, false);
        ce.gemm_tflops = gemm_cost(p).flops / (ms * 1e-3) / 1e12;
        gemm_plan_destroy(plan);
        CK(cudaFree(a));
        CK(cudaFree(b));
        CK(cudaFree(c));
    }
    std::printf("ceilings: D2D copy %.0f GB/s copied (%.0f GB/s read+write), cuBLASLt bf16 %d^3 %.0f TFLOP/s\n",
                ce.copy_gbs, ce.rw_gbs, kCeilGemm, ce.gemm_tflops);

    std::vector<Row> rows;
    Model m = make_model(prefill_rows, max_seq, rng, t.s);
    {
        GdnBf16Params dp{};
        dp.Hv = kHv;
        dp.max_rows = prefill_rows;
        m.gdn_work = dalloc<float>(gdn_chunk_work_floats(dp));
        AttentionBf16Params ap{};
        ap.Hq = kHq;
        ap.max_seq = max_seq;
        ap.max_rows = prefill_rows;  // prefill buckets up to prefill_rows may split their keys
        m.attn_work = dalloc<float>(std::max(attn_decode_work_floats(ap), attn_prefill_work_floats(ap)));
    }
    std::vector<std::string> phases;
    for (int n : prefill_sizes) {
        const std::string pre = "prefill " + std::to_string(n) + " tokens from position 0";
        run_phase(pre.c_str(), m, n, 0, t, lt, ce, rows);
        phases.push_back(pre);
    }
    for (int pos : decode_pos) {
        const std::string ph = "decode step at position " + std::to_string(pos);
        run_phase(ph.c_str(), m, 1, pos, t, lt, ce, rows);
        phases.push_back(ph);
    }
    CK(cudaDeviceSynchronize());

    // The per-kernel tables first, so they survive a failure in the graph section below.
    std::printf("\n[%s] ceilings: copy %.0f GB/s (rw %.0f), GEMM %.0f TFLOP/s; %%floor = max(bytes/rw, flops/GEMM) / time\n",
                prop.name, ce.copy_gbs, ce.rw_gbs, ce.gemm_tflops);
    for (const auto& ph : phases) print_table(ph.c_str(), rows, ph, ce);
    std::fflush(stdout);

    // Whole-forward graphs over distinct per-layer weights.
    std::vector<std::pair<std::string, ForwardGraph>> graphs;
    {
        const auto layers = make_layers(m, rng, t.s);
        for (int n : prefill_sizes) graphs.push_back({"prefill " + std::to_string(n) + " tokens", time_forward_graph(m, layers, n, 0, lt, t)});
        for (int pos : decode_pos) {
            const std::string d = "decode at position " + std::to_string(pos);
            graphs.push_back({d + " serial", time_forward_graph(m, layers, 1, pos, lt, t, {false, false})});
            graphs.push_back({d + " fused", time_forward_graph(m, layers, 1, pos, lt, t, {false, true})});
            graphs.push_back({d + " pdl", time_forward_graph(m, layers, 1, pos, lt, t, {true, false})});
            graphs.push_back({d, time_forward_graph(m, layers, 1, pos, lt, t, {true, true})});
            graphs.push_back({d + " +norm", time_forward_graph(m, layers, 1, pos, lt, t, {true, true, true})});
        }
    }
    CK(cudaDeviceSynchronize());

    nlohmann::json j;
    j["device"] = prop.name;
    j["ceilings"] = {{"d2d_copy_GBps", ce.copy_gbs}, {"rw_GBps", ce.rw_gbs}, {"gemm_bf16_TFLOPs", ce.gemm_tflops}};
    for (const auto& r : rows) {
        j["kernels"].push_back({{"phase", r.phase}, {"kernel", r.name}, {"per_forward", r.per_forward},
                                {"median_us", r.ms * 1e3}, {"bytes", r.cost.bytes}, {"flops", r.cost.flops},
                                {"floor_us", floor_ms(r.cost, ce) * 1e3}});
    }
    std::printf("\nwhole forward, one CUDA graph, distinct weights per layer (kernels, ms, floor ms, floor/time)\n");
    for (const auto& [name, fg] : graphs) {
        if (!fg.ok) {
            std::printf("%-34s failed\n", name.c_str());
            continue;
        }
        const double fl = floor_ms(fg.cost, ce);
        std::printf("%-34s %4d kernels %9.3f ms  floor %8.3f ms (%.2f GB, %.1f TFLOP)  %5.1f%%\n", name.c_str(),
                    fg.kernels, fg.ms, fl, fg.cost.bytes / 1e9, fg.cost.flops / 1e12, 100.0 * fl / fg.ms);
        j["forward_graphs"].push_back({{"name", name}, {"ms", fg.ms}, {"floor_ms", fl}, {"kernels", fg.kernels},
                                       {"bytes", fg.cost.bytes}, {"flops", fg.cost.flops}});
    }
    if (FILE* f = std::fopen(json_path.c_str(), "w")) {
        std::fputs(j.dump(1).c_str(), f);
        std::fclose(f);
    }
    gemm_lt_destroy(lt);
    return 0;
}
#endif
