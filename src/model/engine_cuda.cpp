// Load of a CUDA engine: shape checks against the kernels' supported set, bf16 weight upload (GEMM
// operands fused and row-padded like the CPU path's, norms and small weights fp32), the static
// bf16 buffer set (state / cursor / scratch, registered under the CPU path's names so capsules
// work unchanged), the cuBLASLt handle, and the capture of every step graph at load.
#include "model/engine_cuda.h"

#include "exec/error.h"
#include "model/engine.h"

#if FROST_WITH_CUDA
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/lm_kernels.h"
#include "model/forward_cuda.h"
#include "model/weight_stager.h"
#include "util/bf16.h"
#endif

namespace frost::model {

#if !FROST_WITH_CUDA

struct CudaState {};
void CudaStateDeleter::operator()(CudaState* s) const { delete s; }

frost_status CudaBuild::init(Engine&, const ModelWeights&) {
    return fail(FROST_ERR_UNSUPPORTED, "cuda engine: this build has no CUDA (configure with -DFROST_CUDA=ON)");
}

CudaEngineInfo CudaBuild::info(const Engine&) { return {}; }

#else

void CudaStateDeleter::operator()(CudaState* s) const { delete s; }

namespace {

using kernels::StepCursor;
using Clock = std::chrono::steady_clock;

constexpr int kMaxGemvK = 16384;  // lm_gemv.cu stages x in 32 KiB of shared memory
constexpr int kRopeRotaryAlign = 64;
constexpr int kMaxGqaGroup = 4;   // attention group sizes 1, 2, 4

int round_up(int v, int m) { return (v + m - 1) / m * m; }

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Every rule of the kernels' supported set the config breaks, in one message.
frost_status check_shapes(const ModelConfig& c) {
    std::string bad;
    auto rule = [&](bool ok, const std::string& what) {
        if (!ok) bad += (bad.empty() ? "" : "; ") + what;
    };
    const auto n = [](int v) { return std::to_string(v); };
    rule(c.hidden_size % kCudaRowAlign == 0 && c.hidden_size <= kMaxGemvK,
         "hidden_size must be a multiple of 8 and <= 16384, got " + n(c.hidden_size));
    rule(c.intermediate_size % kCudaRowAlign == 0 && c.intermediate_size <= kMaxGemvK,
         "intermediate_size must be a multiple of 8 and <= 16384, got " + n(c.intermediate_size));
    if (c.num_full_layers() > 0) {
        rule(c.head_dim == kernels::kAttnHeadDim, "head_dim must be 256, got " + n(c.head_dim));
        const int group = c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0 ? c.num_heads / c.num_kv_heads : 0;
        rule(group == 1 || group == 2 || group == kMaxGqaGroup,
             "num_heads / num_kv_heads must be 1, 2 or 4, got " + n(c.num_heads) + "/" + n(c.num_kv_heads));
        rule(c.rotary_dim % kRopeRotaryAlign == 0 && c.rotary_dim <= c.head_dim,
             "rotary_dim must be a multiple of 64, got " + n(c.rotary_dim));
        rule(c.num_heads * c.head_dim <= kMaxGemvK, "num_heads * head_dim must be <= 16384");
    }
    if (c.num_linear_layers() > 0) {
        rule(c.lin_k_head_dim == kernels::kGdnHeadDim && c.lin_v_head_dim == kernels::kGdnHeadDim,
             "linear_key_head_dim and linear_value_head_dim must be 128, got " + n(c.lin_k_head_dim) + " and " +
                 n(c.lin_v_head_dim));
        rule(c.conv_dim() % kernels::kConvChannelsPerBlock == 0,
             "conv channels (2 Hk dk + Hv dv) must be a multiple of 128, got " + n(c.conv_dim()));
        rule(c.conv_kernel >= 2 && c.conv_kernel <= kernels::kConvMaxTaps,
             "linear_conv_kernel_dim must be 2..4, got " + n(c.conv_kernel));
        rule(c.lin_num_k_heads > 0 && c.lin_num_v_heads % c.lin_num_k_heads == 0,
             "linear value heads must be a multiple of key heads");
        rule(c.lin_v_dim() <= kMaxGemvK, "linear value width Hv*dv must be <= 16384");
    }
    if (bad.empty()) return FROST_OK;
    return fail(FROST_ERR_UNSUPPORTED, "cuda engine: the CUDA kernels do not support this model: %s", bad.c_str());
}

// Converts a checkpoint tensor's elements to bf16 bits / fp32 values into `out` (numel entries).
frost_status convert_bf16(const TensorView& v, uint16_t* out) {
    const int64_t n = v.numel();
    if (v.dtype == DType::F32) {
        const float* s = static_cast<const float*>(v.data);
        for (int64_t i = 0; i < n; ++i) out[i] = util::f32_to_bf16(s[i]);
        return FROST_OK;
    }
    return fail(FROST_ERR_UNSUPPORTED, "tensor %s: dtype %s not supported by the cuda engine", v.name.c_str(),
                dtype_name(v.dtype));
}

frost_status convert_f32(const TensorView& v, float* out) {
    const int64_t n = v.numel();
    if (v.dtype == DType::BF16) {
        const uint16_t* s = static_cast<const uint16_t*>(v.data);
        for (int64_t i = 0; i < n; ++i) out[i] = util::bf16_to_f32(s[i]);
        return FROST_OK;
    }
    return fail(FROST_ERR_UNSUPPORTED, "tensor %s: dtype %s not supported by the cuda engine", v.name.c_str(),
                dtype_name(v.dtype));
}

// Lays every weight out in its own device buffer and queues the bytes on a WeightStager: tensors
// already in the target dtype go straight from the mmap'd checkpoint, others are converted on the
// host first. Nothing is copied until run() (one pipelined pass over the whole model).
struct Uploader {
    frost_stream* stream;
    BufferList* list;
    WeightStager stager;

    frost_status alloc(const std::string& name, size_t bytes, frost_buffer** out) {
        return list->add(name, BufferRole::Weights, bytes, out);
    }

    static frost_status present(const TensorView& v) {
        if (!v.present()) return fail(FROST_ERR_INVALID_ARG, "tensor %s is absent", v.name.c_str());
        return FROST_OK;
    }

    // Row-concatenation of `parts` ([rows_i, cols] each) as bf16, zero rows up to `padded_rows`.
    frost_status bf16w(const std::string& name, const std::vector<const TensorView*>& parts, int64_t padded_rows,
                       int64_t cols, const bf16** out) {
        size_t used = 0;
        for (const auto* p : parts) {
            FROST_TRY(present(*p));
            used += size_t(p->numel()) * sizeof(uint16_t);
        }
        const size_t bytes = std::max(used, size_t(std::max<int64_t>(padded_rows, 0)) * size_t(cols) * sizeof(uint16_t));
        frost_buffer* b = nullptr;
        FROST_TRY(alloc(name, bytes, &b));
        size_t off = 0;
        for (const auto* p : parts) {
            const size_t pb = size_t(p->numel()) * sizeof(uint16_t);
            if (p->dtype == DType::BF16)
                stager.add(p->data, pb, b, off);
            else
                FROST_TRY(convert_bf16(*p, static_cast<uint16_t*>(stager.add_owned(pb, b, off))));
            off += pb;
        }
        if (bytes > used) FROST_TRY(frost_buffer_fill(b, used, 0, bytes - used, stream));
        *out = static_cast<const bf16*>(frost_buffer_ptr(b));
        return FROST_OK;
    }

    frost_status f32w(const std::string& name, const std::vector<const TensorView*>& parts, const float** out) {
        size_t bytes = 0;
        for (const auto* p : parts) {
            FROST_TRY(present(*p));
            bytes += size_t(p->numel()) * sizeof(float);
        }
        frost_buffer* b = nullptr;
        FROST_TRY(alloc(name, bytes, &b));
        size_t off = 0;
        for (const auto* p : parts) {
            const size_t pb = size_t(p->numel()) * sizeof(float);
            if (p->dtype == DType::F32)
                stager.add(p->data, pb, b, off);
            else
                FROST_TRY(convert_f32(*p, static_cast<float*>(stager.add_owned(pb, b, off))));
            off += pb;
        }
        *out = static_cast<const float*>(frost_buffer_ptr(b));
        return FROST_OK;
    }
};

// The capture callback: one step of the bucket for one session.
struct CaptureJob {
    const Engine* e;
    CudaState* cs;
    int session;
    int rows;
    bool decode;
};

// Every weight of the model, fused and converted like the CPU path's (engine_weights.cpp).
frost_status upload_all(const ModelConfig& c, const ModelWeights& w, Uploader& up, CudaState& cs) {
    const int H = c.hidden_size;
    FROST_TRY(up.bf16w("w.embed_tokens", {&w.embed_tokens}, 0, H, &cs.embed));
    FROST_TRY(up.f32w("w.final_norm", {&w.final_norm}, &cs.final_norm));
    if (w.tied)
        cs.lm_head = cs.embed;
    else
        FROST_TRY(up.bf16w("w.lm_head", {&w.lm_head}, 0, H, &cs.lm_head));
    cs.layers.assign(c.num_layers, CudaLayer{});
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerWeights& lw = w.layers[l];
        CudaLayer& p = cs.layers[l];
        const std::string pre = "w.layer" + std::to_string(l) + ".";
        FROST_TRY(up.f32w(pre + "input_layernorm", {&lw.input_layernorm}, &p.in_ln));
        FROST_TRY(up.f32w(pre + "post_attention_layernorm", {&lw.post_attention_layernorm}, &p.post_ln));
        if (c.is_linear(l)) {
            const auto& a = lw.lin;
            FROST_TRY(up.bf16w(pre + "in_proj_qkvzba", {&a.in_proj_qkv, &a.in_proj_z, &a.in_proj_b, &a.in_proj_a},
                               cs.lin_width, H, &p.in_proj));
            FROST_TRY(up.f32w(pre + "conv1d", {&a.conv1d}, &p.conv_w));
            FROST_TRY(up.f32w(pre + "A_log", {&a.A_log}, &p.A_log));
            FROST_TRY(up.f32w(pre + "dt_bias", {&a.dt_bias}, &p.dt_bias));
            FROST_TRY(up.f32w(pre + "gdn_norm", {&a.norm}, &p.gdn_norm));
            FROST_TRY(up.bf16w(pre + "out_proj", {&a.out_proj}, 0, c.lin_v_dim(), &p.out_proj));
        } else {
            const auto& a = lw.full;
            FROST_TRY(up.bf16w(pre + "qkv_proj", {&a.q_proj, &a.k_proj, &a.v_proj}, cs.full_width, H, &p.in_proj));
            FROST_TRY(up.f32w(pre + "q_norm", {&a.q_norm}, &p.q_norm));
            FROST_TRY(up.f32w(pre + "k_norm", {&a.k_norm}, &p.k_norm));
            FROST_TRY(up.bf16w(pre + "o_proj", {&a.o_proj}, 0, c.num_heads * c.head_dim, &p.out_proj));
        }
        FROST_TRY(up.bf16w(pre + "mlp_gate_up", {&lw.mlp_gate, &lw.mlp_up}, 0, H, &p.gate_up));
        FROST_TRY(up.bf16w(pre + "mlp_down", {&lw.mlp_down}, 0, c.intermediate_size, &p.down));
    }
    return FROST_OK;
}

// Keeps the status of a failed call and prefixes its message; FROST_OK passes untouched.
frost_status with_context(frost_status s, const std::string& context) {
    return s == FROST_OK ? s : add_context(s, context);
}

}  // namespace

frost_status CudaBuild::init(Engine& e, const ModelWeights& w) {
    const ModelConfig& c = e.cfg_;
    if (e.opts_.trace)
        return fail(FROST_ERR_UNSUPPORTED, "cuda engine: activation tracing (EngineOptions::trace) is CPU-only");
    FROST_TRY(check_shapes(c));
    e.cuda_.reset(new CudaState());
    CudaState& cs = *e.cuda_;
    cs.lin_width = round_up(c.conv_dim() + c.lin_v_dim() + 2 * c.lin_num_v_heads, kCudaRowAlign);
    cs.full_width = 2 * c.num_heads * c.head_dim + 2 * c.num_kv_heads * c.head_dim;

    const auto t_weights = Clock::now();
    e.weight_bufs_ = std::make_unique<BufferList>(e.ctx_);
    Uploader up{e.stream_, e.weight_bufs_.get(), WeightStager()};
    FROST_TRY(upload_all(c, w, up, cs));
    FROST_TRY(up.stager.run(e.ctx_, e.stream_));
    cs.info.weights_ms = ms_since(t_weights);
    cs.info.weight_bytes = e.weight_bufs_->total_bytes();

    FROST_TRY(alloc_scratch(e));
    for (int i = 0; i < e.opts_.sessions; ++i) FROST_TRY(alloc_session(e, i));
    FROST_TRY(capture_all(e));
    cs.info.active = true;
    for (int i = 0; i < e.opts_.sessions; ++i) FROST_TRY(e.reset(i));
    return FROST_OK;
}

// Shared scratch: bf16 activations for C_p rows, fp32 logits and kernel work areas, the GEMM
// workspace, and the host staging area in the Engine's layout.
frost_status CudaBuild::alloc_scratch(Engine& e) {
    const ModelConfig& c = e.cfg_;
    CudaState& cs = *e.cuda_;
    CudaScratch& s = cs.scratch;
    const size_t R = e.opts_.prefill_chunk, H = c.hidden_size, V = c.vocab_size;
    const size_t Hv = std::max(1, c.lin_num_v_heads);
    size_t proj = 2 * size_t(c.intermediate_size), core = 1;
    if (c.num_linear_layers() > 0) {
        proj = std::max<size_t>(proj, cs.lin_width);
        core = std::max<size_t>(core, c.lin_v_dim());
    }
    if (c.num_full_layers() > 0) {
        proj = std::max<size_t>(proj, cs.full_width);
        core = std::max<size_t>(core, size_t(c.num_heads) * c.head_dim);
    }
    s.proj_width = static_cast<int>(proj);
    s.logit_rows = e.opts_.logits_all ? static_cast<int>(R) : 1;
    e.scratch_bufs_ = std::make_unique<BufferList>(e.ctx_);
    BufferList& S = *e.scratch_bufs_;
    frost_buffer* last = nullptr;
    auto add = [&](const char* name, size_t count, auto** p) -> frost_status {
        using T = std::remove_pointer_t<std::remove_pointer_t<decltype(p)>>;  // p is T**
        FROST_TRY(S.add(std::string("scratch.") + name, BufferRole::Scratch, std::max<size_t>(1, count) * sizeof(T), &last));
        *p = static_cast<T*>(frost_buffer_ptr(last));
        return FROST_OK;
    };
    FROST_TRY(add("ids", R, &s.ids));
    e.scratch_ids_buf_ = last;
    FROST_TRY(add("h", R * H, &s.h));
    FROST_TRY(add("x", R * H, &s.x));
    FROST_TRY(add("proj", R * proj, &s.proj));
    FROST_TRY(add("conv_out", R * c.conv_dim(), &s.conv_out));
    FROST_TRY(add("beta", R * Hv, &s.beta));
    FROST_TRY(add("g", R * Hv, &s.g));
    FROST_TRY(add("core", R * core, &s.core));
    FROST_TRY(add("gated", R * c.lin_v_dim(), &s.gated));
    FROST_TRY(add("act", R * c.intermediate_size, &s.act));
    FROST_TRY(add("fin", s.logit_rows * H, &s.fin));
    FROST_TRY(add("logits", s.logit_rows * V, &s.logits));
    e.logits_buf_ = last;
    kernels::GdnBf16Params gdn_shape{};
    gdn_shape.Hv = static_cast<int32_t>(Hv);
    gdn_shape.max_rows = static_cast<int32_t>(R);
    FROST_TRY(add("gdn_work", kernels::gdn_chunk_work_floats(gdn_shape), &s.gdn_work));
    kernels::AttentionBf16Params attn_shape{};
    attn_shape.Hq = std::max(1, c.num_heads);
    attn_shape.max_seq = e.opts_.max_seq_len;
    attn_shape.max_rows = static_cast<int32_t>(R);  // prefill buckets 64..C_p may split their keys
    const size_t attn_work = std::max(kernels::attn_decode_work_floats(attn_shape),
                                      kernels::attn_prefill_work_floats(attn_shape));
    FROST_TRY(add("attn_work", attn_work, &s.attn_work));
    FROST_TRY(add("sample_work", kernels::sample_work_floats(static_cast<int>(V)), &s.sample_work));
    FROST_TRY(add("out_token", 1, &s.out_token));
    e.out_token_buf_ = last;
    uint8_t* ws = nullptr;
    FROST_TRY(add("gemm_workspace", kernels::kGemmWorkspaceBytes, &ws));
    int lt_status = 0;
    const cudaError_t lt_err = kernels::gemm_lt_create(ws, kernels::kGemmWorkspaceBytes, &cs.lt, &lt_status);
    if (lt_err != cudaSuccess)
        return fail(FROST_ERR_BACKEND, "cuda engine: cuBLASLt handle: %s (status %d)", cudaGetErrorString(lt_err),
                    lt_status);
    // [ids (R int32) | cursor fields | token read-back (4 B)], as Engine::run_chunk expects.
    FROST_TRY(S.add("staging", BufferRole::Scratch, sizeof(int32_t) * R + sizeof(StepCursor) + sizeof(int32_t),
                    &e.staging_, -1, 0, FROST_SPACE_HOST_PINNED));
    e.scratch_.ids = s.ids;
    e.scratch_.out_token = s.out_token;
    e.scratch_.logits = s.logits;
    e.scratch_.logit_rows = s.logit_rows;
    cs.info.scratch_bytes = S.total_bytes();
    return FROST_OK;
}

// One session: cursor + per-layer state under the CPU path's names, roles and KV row geometry
// (bf16 KV [pos][kv_head][d] and conv state, fp32 recurrent state), its graph, host mirrors.
frost_status CudaBuild::alloc_session(Engine& e, int index) {
    const ModelConfig& c = e.cfg_;
    const int L = c.num_layers;
    auto list = std::make_unique<BufferList>(e.ctx_);
    Engine::SessionPtrs sp{};
    CudaSession ss;
    // (built with append: GCC 12 warns falsely (-Wrestrict) on "s" + std::to_string(...))
    std::string pre = "s";
    pre.append(std::to_string(index)).append(".");
    FROST_TRY(list->add(pre + "cursor", BufferRole::Cursor, sizeof(StepCursor), &sp.cursor_buf));
    sp.cursor = static_cast<StepCursor*>(frost_buffer_ptr(sp.cursor_buf));
    ss.cursor = sp.cursor;
    sp.conv_state.assign(L, nullptr);  // the fp32 pointers stay null: the CUDA forward uses ss
    sp.rec_state.assign(L, nullptr);
    sp.k_cache.assign(L, nullptr);
    sp.v_cache.assign(L, nullptr);
    ss.conv_state.assign(L, nullptr);
    ss.rec_state.assign(L, nullptr);
    ss.k_cache.assign(L, nullptr);
    ss.v_cache.assign(L, nullptr);
    frost_buffer* b = nullptr;
    for (int l = 0; l < L; ++l) {
        const std::string lp = pre + "layer" + std::to_string(l) + ".";
        if (c.is_linear(l)) {
            const size_t conv = sizeof(bf16) * c.conv_dim() * (c.conv_kernel - 1);
            FROST_TRY(list->add(lp + "conv_state", BufferRole::State, conv, &b, l));
            ss.conv_state[l] = static_cast<bf16*>(frost_buffer_ptr(b));
            const size_t rec = sizeof(float) * c.lin_num_v_heads * c.lin_k_head_dim * c.lin_v_head_dim;
            FROST_TRY(list->add(lp + "recurrent_state", BufferRole::State, rec, &b, l));
            ss.rec_state[l] = static_cast<float*>(frost_buffer_ptr(b));
        } else {
            const size_t per_pos = sizeof(bf16) * c.num_kv_heads * c.head_dim;
            const size_t bytes = per_pos * e.opts_.max_seq_len;
            FROST_TRY(list->add(lp + "k_cache", BufferRole::State, bytes, &b, l, per_pos));
            ss.k_cache[l] = static_cast<bf16*>(frost_buffer_ptr(b));
            FROST_TRY(list->add(lp + "v_cache", BufferRole::State, bytes, &b, l, per_pos));
            ss.v_cache[l] = static_cast<bf16*>(frost_buffer_ptr(b));
        }
    }
    frost_graph* g = nullptr;
    FROST_TRY(frost_graph_create(e.ctx_, (pre + "steps").c_str(), 0, &g));
    e.graphs_.push_back(g);
    e.cuda_->info.session_bytes = list->total_bytes();
    e.sessions_.push_back(std::move(sp));
    e.session_bufs_.push_back(std::move(list));
    e.host_pos_.push_back(0);
    e.journal_.emplace_back();
    e.last_token_.push_back(0);
    e.cuda_->sessions.push_back(std::move(ss));
    return FROST_OK;
}

// Every step graph is captured here, at load, never on a request's path: per session one graph
// per prefill bucket (64, 128, ..., C_p) and ONE decode graph that serves every position.
frost_status CudaBuild::capture_all(Engine& e) {
    CudaState& cs = *e.cuda_;
    auto record = [](void* user, frost_stream* st) -> frost_status {
        const auto* j = static_cast<const CaptureJob*>(user);
        return record_cuda_forward(j->e->cfg_, j->e->opts_.logits_all, j->e->opts_.max_seq_len, *j->cs, j->session,
                                   j->rows, j->decode, static_cast<cudaStream_t>(frost_stream_native(st)),
                                   j->e->opts_.rope_inv_freq_bf16);
    };
    FROST_TRY(frost_stream_sync(e.stream_));
    const auto t0 = Clock::now();
    for (int i = 0; i < e.opts_.sessions; ++i) {
        for (int rows = kGdnChunk; rows <= e.opts_.prefill_chunk; rows += kGdnChunk) {
            CaptureJob job{&e, &cs, i, rows, false};
            FROST_TRY(with_context(frost_graph_capture(e.graphs_[i], step_key(false, rows), e.stream_, record, &job),
                                   "cuda engine: capture of prefill bucket " + std::to_string(rows)));
        }
        CaptureJob job{&e, &cs, i, 1, true};
        FROST_TRY(with_context(frost_graph_capture(e.graphs_[i], step_key(true, 1), e.stream_, record, &job),
                               "cuda engine: capture of the decode graph"));
    }
    cs.info.capture_ms = ms_since(t0);
    return FROST_OK;
}

CudaEngineInfo CudaBuild::info(const Engine& e) {
    if (!e.cuda_) return {};
    CudaEngineInfo i = e.cuda_->info;
    i.graphs = 0;
    for (frost_graph* g : e.graphs_) i.graphs += frost_graph_variant_count(g);
    i.captures = e.capture_count();
    return i;
}

#endif  // FROST_WITH_CUDA

CudaEngineInfo cuda_engine_info(const Engine& e) { return CudaBuild::info(e); }

}  // namespace frost::model
