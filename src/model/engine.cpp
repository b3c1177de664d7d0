// Engine lifetime and the host side of a step: static buffer allocation per role, graph capture
// at load, and prefill / decode as "write ids (and the chunk count) -> replay -> read one id".
#include "model/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "exec/error.h"
#include "model/quant/quant_plan.h"
#include "model/qwen35/shape_check.h"
#include "util/env.h"

namespace frost::model {
namespace {

using kernels::StepCursor;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A state buffer's view from its declared shape: [d0, d1] or [d0, d1, d2] contiguous.
ops::Tensor view_of(void* p, const qwen35::StateSpec& s) {
    if (s.shape.size() == 2) return ops::mat(p, s.dtype, s.shape[0], s.shape[1], s.shape[1]);
    return ops::cube(p, s.dtype, s.shape[0], s.shape[1], s.shape[2]);
}

// Keeps the status of a failed call and prefixes its message; FROST_OK passes untouched.
frost_status with_context(frost_status s, const std::string& context) {
    return s == FROST_OK ? s : add_context(s, context);
}

constexpr size_t kCursorBytes = sizeof(StepCursor);
constexpr size_t kSamplingOffset = offsetof(StepCursor, sample_mode);
constexpr size_t kSamplingBytes = offsetof(StepCursor, steps) - kSamplingOffset;

// Copies `bytes` from a device buffer region to host memory (synchronous).
frost_status read_back(frost_ctx* ctx, frost_stream* st, const frost_buffer* src, size_t off,
                       void* dst, size_t bytes) {
    frost_buffer* h = nullptr;
    FROST_TRY(frost_buffer_wrap(ctx, "readback", dst, bytes, FROST_SPACE_HOST, &h));
    frost_status s = frost_buffer_copy(h, 0, src, off, bytes, st);
    if (s == FROST_OK) s = frost_stream_sync(st);
    frost_buffer_free(h);
    return s;
}

// Copies host memory into a device buffer region (synchronous).
frost_status upload(frost_ctx* ctx, frost_stream* st, frost_buffer* dst, size_t off, const void* src, size_t bytes) {
    frost_buffer* h = nullptr;
    FROST_TRY(frost_buffer_wrap(ctx, "upload", const_cast<void*>(src), bytes, FROST_SPACE_HOST, &h));
    frost_status s = frost_buffer_copy(dst, off, h, 0, bytes, st);
    if (s == FROST_OK) s = frost_stream_sync(st);
    frost_buffer_free(h);
    return s;
}

// The sampler list's order (alloc_sampler).
enum SamplerBuf : size_t { kSettingsBuf = 0, kCountsBuf = 1, kSeenBuf = 2, kMaskBuf = 3 };

}  // namespace

Engine::~Engine() {
    if (stream_) frost_stream_sync(stream_);
    for (frost_graph* g : graphs_) frost_graph_destroy(g);
    graphs_.clear();
    if (batch_graph_) frost_graph_destroy(batch_graph_);
    batch_graph_ = nullptr;
    batch_bufs_.reset();
    session_bufs_.clear();
    sampler_bufs_.clear();
    scratch_bufs_.reset();
    weight_bufs_.reset();
    backend_.reset();
    if (stream_) frost_stream_destroy(stream_);
    if (ctx_) frost_ctx_destroy(ctx_);
}

WeightLoadOptions weight_load_options(const EngineOptions& o) {
    WeightLoadOptions lo;  // CUDA: the weight table dequantizes (to bf16) what it does not keep
    lo.keep_quantized = o.backend == FROST_BACKEND_CUDA;
    return lo;
}

frost_status Engine::create(const std::string& model_dir, const EngineOptions& opts,
                            std::unique_ptr<Engine>* out) {
    ModelWeights w;
    FROST_TRY(load_weights(model_dir, &w, weight_load_options(opts)));
    return create_from_weights(w, opts, out);
}

frost_status Engine::create_from_weights(const ModelWeights& w, const EngineOptions& opts,
                                         std::unique_ptr<Engine>* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "Engine::create: out is null");
    std::unique_ptr<Engine> e(new Engine());
    const frost_status s = e->init(w, opts);
    if (s != FROST_OK) {
        const std::string cause = last_error();  // the destructor's frost calls reset the message
        e.reset();
        set_last_error(cause);
        return s;
    }
    *out = std::move(e);
    return FROST_OK;
}

int auto_prefill_chunk(const EngineOptions& opts, const ModelConfig& cfg, bool quantized) {
    if (opts.prefill_chunk != 0) return opts.prefill_chunk;
    // First measured on the H100 (2026-11-24), when 9B-style models ran 2048-row chunks (4096 was
    // within the noise there); 35B-A3B 16k TTFT 471 ms at 2048 against 352 at 4096 (the expert
    // GEMMs' rows per expert double). Small hidden sizes keep their GEMMs efficient only with more
    // rows: 0.8B-style TTFT at 4k / 16k / 32k 16.1 / 72.0 / 164.1 ms at 2048 against 14.7 / 68.0 /
    // 158.8 at 4096, for 0.23 GB more peak memory and 0.17 s more graph capture (8192 and 16384
    // gained 1-4 % more at 16k-32k for 0.7-1.6 GB and 0.4-1.2 s). The CPU reference keeps 256 (its
    // tests and memory use were sized for it), and so do the test-sized shapes below hidden 1024
    // (their GPU tests capture one graph per 64-row bucket). Quantized weights (H100 2026-11-25,
    // 9B-style TTFT 4k / 16k, two runs each, 2048 -> 4096): INT4 111-113 -> 107 ms and 496-497 ->
    // 469-472 ms (each chunk dequantizes every weight into the bf16 tile once); FP8 W8A8 72.2-73.0
    // -> 70.0-70.6 ms and 329.6-331.2 -> 325.4-327.8 ms.
    // Dense bf16 weights with hidden > 2048 (the 4B / 9B / 27B shapes): 8192 since 2026-11-30 (H200,
    // 9B-style, `frost bench engine --ttft 1024,4096,16384,32768 --chunk N`, two rounds alternating):
    // 16k 442.9 / 446.7 ms at 2048, 439.6 at 4096, 435.7 / 433.5 at 8192, 436.4 at 16384; 32k
    // 916.1 / 921.2, 909.0, 897.8 / 901.7, 900.9; 1k and 4k within noise. Each chunk is one pass of
    // every GDN layer's state and one more launch of every op, and the per-chunk attention reads the
    // whole KV so far. Cost: peak memory +1.42 GB (19.71 -> 21.13 GB; 16384: 23.03) and graph
    // capture 0.58-0.62 -> 1.18-1.20 s per session (64 more buckets; the scratch is the engine's,
    // the graphs are each session's). bf16 MoE models too (35B-A3B shape, first
    // 20 layers, same day): 16k 151.2 -> 137.7 ms at 4096 -> 8192 (the grouped expert GEMMs see
    // twice the rows per expert), peak 37.01 -> 37.97 GB; the scratch is per step, not per layer,
    // so all 40 layers pay the same ~1 GB (71 GB measured on the H100 at 4096).
    // FP8 W8A8 re-measured at 8192 (H200, 2026-11-30, 9B-style, 1k / 4k / 16k / 32k, two rounds
    // alternating): 15.48-15.59 / 64.80-65.50 / 295.64-298.23 / 639.06-639.87 ms against 15.55-15.74
    // / 64.41-65.33 / 298.61-302.12 / 645.56-645.64 at 4096, for +1.0 GB (13.50 -> 14.50 GB): ~1 %
    // at 16k-32k, so quantized dense weights keep 4096 (the 27B NVFP4's 26 GB budget at 32k).
    // Quantized MoE models take 8192 like bf16 ones since 2026-12-04 (H200, `frost bench engine
    // --ttft 1024,4096,16384 --reps 2 --chunk N`, two rounds alternating, INT4 one). 35B-A3B shape,
    // first 20 layers: FP8 with --fp8-prefill w8a8 16k 100.93 / 100.99 ms at 4096, 93.85 / 93.54
    // at 8192, 89.68 / 90.05 at 16384; INT4 (experts dequantized per chunk) 163.38 -> 128.28 at
    // 8192; 1k and 4k unchanged; peak memory +1.0 GB at 8192 (+3.0 at 16384, which also has twice
    // 8192's graph buckets to capture). Qwen3-Next-80B-A3B shape, first 24 layers, FP8 W8A8: 16k
    // 148.01-148.87 -> 130.60-130.89 ms (+1.1 GB). Why: at 4096 rows an expert of the 35B-A3B sees
    // ~144 routed rows, so its two 128-row tiles are nearly half padding, and each chunk reads (or
    // dequantizes) every expert once; twice the rows halve both per token.
    const bool small = cfg.hidden_size >= 1024 && cfg.hidden_size <= 2048;  // the released 0.8B / 2B shapes
    // (Test-sized shapes, hidden < 1024, keep their chunks: 4096 for MoE, 2048 dense; their GPU
    // tests capture every bucket.)
    const bool large = cfg.hidden_size >= 1024 && (cfg.is_moe() || (!quantized && cfg.hidden_size > 2048));
    const bool wide = cfg.is_moe() || small || (quantized && cfg.hidden_size >= 1024);
    const int want = opts.backend != FROST_BACKEND_CUDA ? 256 : large ? 8192 : wide ? 4096 : 2048;
    const int cap = std::max(kGdnChunk, (opts.max_seq_len + kGdnChunk - 1) / kGdnChunk * kGdnChunk);
    return std::min(want, cap);
}

bool runs_quantized(const EngineOptions& opts, const ModelWeights& w) {
    return opts.backend == FROST_BACKEND_CUDA && opts.keep_quantized && w.quant && !w.quant->modules.empty();
}

frost_status Engine::init(const ModelWeights& w, const EngineOptions& opts) {
    cfg_ = w.config;
    opts_ = opts;
    quantized_checkpoint_ = w.quant && !w.quant->modules.empty();
    opts_.prefill_chunk = auto_prefill_chunk(opts, cfg_, runs_quantized(opts, w));
    const auto unsupported = cfg_.unsupported_features();
    for (const auto& f : unsupported)
        if (f.find("MTP") == std::string::npos)  // an unused MTP head does not change the LM
            return fail(FROST_ERR_UNSUPPORTED, "engine: the dense engine does not execute %s", f.c_str());
    if (opts_.prefill_chunk <= 0 || opts_.prefill_chunk % kGdnChunk)
        return fail(FROST_ERR_INVALID_ARG, "engine: prefill_chunk must be a positive multiple of %d (or 0: auto), got %d",
                    kGdnChunk, opts_.prefill_chunk);
    if (opts.max_seq_len <= 0 || opts.sessions <= 0)
        return fail(FROST_ERR_INVALID_ARG, "engine: max_seq_len (%d) and sessions (%d) must be > 0",
                    opts.max_seq_len, opts.sessions);
    const bool any_dense_mlp = cfg_.num_moe_layers() < cfg_.num_layers;
    if ((any_dense_mlp && cfg_.intermediate_size <= 0) || cfg_.rotary_dim <= 0 || cfg_.num_layers <= 0 ||
        static_cast<int>(w.layers.size()) != cfg_.num_layers)
        return fail(FROST_ERR_INVALID_ARG, "engine: config lacks a dense MLP width, rotary dim or layers");
    if (opts.backend == FROST_BACKEND_CUDA) {
        if (opts.trace)
            return fail(FROST_ERR_UNSUPPORTED, "cuda engine: activation tracing (EngineOptions::trace) is CPU-only");
        FROST_TRY(qwen35::check_cuda_shapes(cfg_));
        if (opts.chunk_invariant && opts.fp8_w8a8_prefill)
            return fail(FROST_ERR_UNSUPPORTED, "cuda engine: chunk_invariant with fp8_w8a8_prefill is not supported (the "
                        "FP8 GEMM plans are chosen per row count); use the exact FP8 prefill (the default)");
    }
    FROST_TRY(frost_ctx_create(opts.backend, opts.device, &ctx_));
    FROST_TRY(frost_stream_create(ctx_, 0, &stream_));
    FROST_TRY(ops::Backend::create(ctx_, stream_, &backend_));
    FROST_TRY(backend_->set_chunk_invariant(opts.chunk_invariant));
    prec_ = qwen35::precision_for(backend_->act_dtype());
    prec_.keep_quantized = opts.backend == FROST_BACKEND_CUDA && opts.keep_quantized;
    prec_.gdn_in_proj_split = util::env_is("FROST_GDN_IN_PROJ_SPLIT", "0") ? qwen35::Precision::InProjSplit::Never
                                                                            : opts.gdn_in_proj_split;
    info_.active = opts.backend == FROST_BACKEND_CUDA;

    const auto t_weights = Clock::now();
    weight_bufs_ = std::make_unique<BufferList>(ctx_);
    FROST_TRY(qwen35::bind_weights(ctx_, stream_, cfg_, w, prec_, weight_bufs_.get(), &weights_));
    // Kept-quantized weights into the backend's layout (CUDA: 4-bit nibble pairs, 8-row blocks), before any op.
    for (ops::Tensor* t : qwen35::matrix_views(&weights_)) {
        if (!t->quantized()) continue;
        FROST_TRY(backend_->prepare_quant_weight(stream_, t));
        if (t->nibble_pairs) ++info_.relaid_matrices;
        if (t->row_blocks) ++info_.row_blocked_matrices;
    }
    info_.weights_ms = ms_since(t_weights);
    info_.weight_bytes = weight_bufs_->total_bytes();
    info_.quantized_matrices = weights_.quantized_matrices;
    info_.dequantized_matrices = int(weights_.dequantized.size());
    FROST_TRY(backend_->reserve_dequant_scratch(ctx_, largest_quantized_matrix()));

    FROST_TRY(alloc_scratch());
    for (int i = 0; i < opts.sessions; ++i) FROST_TRY(alloc_session(i));
    for (int i = 0; i < opts.sessions; ++i) FROST_TRY(alloc_sampler(i));
    FROST_TRY(alloc_slices());
    FROST_TRY(frost_stream_sync(stream_));
    FROST_TRY(check_leave_out());
    const auto t_capture = Clock::now();
    for (int i = 0; i < opts.sessions; ++i) {
        FROST_TRY(capture_session(i));
        FROST_TRY(capture_slices(i));
    }
    FROST_TRY(alloc_batch());
    FROST_TRY(capture_batch());
    info_.capture_ms = ms_since(t_capture);
    for (int i = 0; i < opts.sessions; ++i) FROST_TRY(reset(i));
    FROST_TRY(alloc_prompt_staging());
    info_.scratch_bytes = scratch_bufs_->total_bytes() + backend_->owned_bytes();
    return FROST_OK;
}

frost_status Engine::alloc_prompt_staging() {
    const size_t chunks = size_t(opts_.max_seq_len) / kGdnChunk + 2;  // a partial first chunk adds one
    return scratch_bufs_->add("staging.prompt", BufferRole::Scratch,
                              sizeof(int32_t) * (size_t(opts_.max_seq_len) + chunks), &prompt_staging_, -1, 0,
                              FROST_SPACE_HOST_PINNED);
}

// Shared scratch for C_p rows in the backend's activation dtype (fp32 logits, beta / g and work
// areas), the backend's own work areas, and the host staging area.
size_t Engine::largest_quantized_matrix() const {
    size_t m = 0;
    auto see = [&](const ops::Tensor& t) {
        if (t.quantized()) m = std::max(m, size_t(t.shape[0]) * size_t(t.shape[1]));
    };
    see(weights_.lm_head);
    for (const auto& L : weights_.layers) {
        see(L.in_proj); see(L.out_proj); see(L.gate_up); see(L.down);
        // A MoE layer's prefill dequantizes all its quantized expert matrices at once (the grouped
        // GEMMs read every expert): their sum (35B-A3B: 1.6 GB of bf16).
        size_t moe = 0;
        for (const ops::Tensor* t : {&L.moe_gate_up, &L.moe_down, &L.shared_gate_up, &L.shared_down})
            if (t->quantized()) moe += size_t(t->shape[0]) * size_t(t->shape[1]);
        m = std::max(m, moe);
    }
    return m;
}

frost_status Engine::alloc_scratch() {
    scratch_bufs_ = std::make_unique<BufferList>(ctx_);
    BufferList& L = *scratch_bufs_;
    const qwen35::Dims d = qwen35::dims_of(cfg_, prec_);
    const size_t R = opts_.prefill_chunk, H = cfg_.hidden_size, V = cfg_.vocab_size;
    const size_t Hv = std::max(1, cfg_.lin_num_v_heads);
    // One logits row per member of a batched decode step (qwen35::kMaxBatch <= 64 <= R).
    const size_t logit_rows = opts_.logits_all ? R : size_t(qwen35::kMaxBatch);
    const ops::DType act = prec_.act, f32 = ops::DType::F32, i32 = ops::DType::I32;
    frost_buffer* last = nullptr;
    // A view of `count` elements (none when count is 0 and `optional`).
    auto add = [&](const char* name, ops::DType t, size_t count, ops::Tensor* out, bool optional = false) {
        if (count == 0 && optional) return FROST_OK;
        const size_t bytes = std::max<size_t>(1, count) * ops::dtype_bits(t) / 8;
        FROST_TRY(L.add(std::string("scratch.") + name, BufferRole::Scratch, bytes, &last));
        *out = ops::vec(frost_buffer_ptr(last), t, int64_t(std::max<size_t>(1, count)));
        return FROST_OK;
    };
    qwen35::ScratchViews& s = scratch_;
    ops::Tensor ids, out_token;
    FROST_TRY(add("ids", i32, R, &ids));
    scratch_ids_buf_ = last;
    s.ids = ids.as<int32_t>();
    FROST_TRY(add("h", act, R * H, &s.h));
    FROST_TRY(add("x", act, R * H, &s.x));
    FROST_TRY(add("proj", act, R * d.proj_width, &s.proj));
    FROST_TRY(add("conv_out", act, R * std::max(1, cfg_.conv_dim()), &s.conv_out));
    FROST_TRY(add("beta", f32, R * Hv, &s.beta));
    FROST_TRY(add("g", f32, R * Hv, &s.g));
    FROST_TRY(add("core", act, R * d.core_width, &s.core));
    FROST_TRY(add("gated", act, R * std::max(1, cfg_.lin_v_dim()), &s.gated));
    FROST_TRY(add("act", act, R * std::max(1, cfg_.intermediate_size), &s.act));
    FROST_TRY(add("fin", act, logit_rows * H, &s.fin));
    FROST_TRY(add("logits", f32, logit_rows * V, &s.logits));
    logits_buf_ = last;
    FROST_TRY(add("gdn_work", f32, backend_->gdn_work_floats(int(Hv), int(R)), &s.gdn_work, true));
    FROST_TRY(add("attn_work", f32,
                  backend_->attn_work_floats(std::max(1, cfg_.num_heads), opts_.max_seq_len, int(R)), &s.attn_work,
                  true));
    FROST_TRY(add("sample_work", f32, backend_->sample_work_floats(int(V)), &s.sample_work));
    FROST_TRY(add("sample_idx", i32, backend_->sample_idx_ints(int(V)), &s.sample_idx, true));
    FROST_TRY(add("out_token", i32, 1, &out_token));
    out_token_buf_ = last;
    s.out_token = out_token.as<int32_t>();
    ops::Tensor tail;
    FROST_TRY(add("tail_cursor", i32, sizeof(kernels::StepCursor) / sizeof(int32_t), &tail));
    s.tail_cursor = reinterpret_cast<kernels::StepCursor*>(tail.data);
    ops::Tensor record;
    FROST_TRY(add("sample_record", i32, sizeof(kernels::SampleRecord) / sizeof(int32_t), &record));
    record_buf_ = last;
    s.sample_record = reinterpret_cast<kernels::SampleRecord*>(record.data);
    FROST_TRY(L.add("staging.record", BufferRole::Scratch, sizeof(kernels::SampleRecord), &record_staging_, -1, 0,
                    FROST_SPACE_HOST_PINNED));
    // Host staging: [ids (R int32) | cursor fields (64 B) | token read-back (4 B)].
    FROST_TRY(L.add("staging", BufferRole::Scratch, sizeof(int32_t) * R + kCursorBytes + sizeof(int32_t),
                    &staging_, -1, 0, FROST_SPACE_HOST_PINNED));
    // The FP8 twin of W8A8 prefill (ScratchViews::fp8_q): as wide as the widest W8A8 GEMM input
    // (ops::w8a8_weight: FP8, or INT4 in 128-wide groups).
    if (opts_.fp8_w8a8_prefill && opts_.fp8_act_fuse && !util::env_is("FROST_FP8_ACT_FUSE", "0")) {
        size_t k_max = 0;
        for (const auto& Lw : weights_.layers)
            for (const ops::Tensor* t : {&Lw.in_proj, &Lw.out_proj, &Lw.gate_up, &Lw.down})
                if (ops::w8a8_weight(*t)) k_max = std::max(k_max, size_t(t->shape[1]));
        if (k_max > 0) {
            // Zeroed once: a GEMM computes every row of its bucket, and the rows past a chunk's
            // count then read finite bytes (zeros or an earlier step's twin), never garbage.
            FROST_TRY(add("fp8_q", ops::DType::U8, R * k_max, &s.fp8_q));
            FROST_TRY(frost_buffer_fill(last, 0, 0, frost_buffer_bytes(last), stream_));
            FROST_TRY(add("fp8_scale", f32, size_t(ops::fp8_act_ld(int64_t(R))) * (k_max / 128), &s.fp8_scale));
            FROST_TRY(frost_buffer_fill(last, 0, 0, frost_buffer_bytes(last), stream_));
        }
    }
    if (cfg_.is_moe()) {  // router outputs and expert scratch, one set for every MoE layer
        const size_t E = cfg_.num_experts, k = cfg_.num_experts_per_tok;
        FROST_TRY(add("moe_probs", f32, R * E, &s.moe_probs));
        FROST_TRY(add("moe_ids", i32, R * k, &s.moe_ids));
        FROST_TRY(add("moe_w", f32, R * k, &s.moe_w));
        FROST_TRY(add("moe_work", f32,
                      backend_->moe_work_floats(int(H), int(E), int(k), cfg_.moe_intermediate_size,
                                                cfg_.shared_expert_intermediate_size, int(R)),
                      &s.moe_work, true));
    }
    if (opts_.trace) {
        auto add_trace = [&](const std::string& name, int layer, int width) -> frost_status {
            TraceEntry t{name, layer, width, nullptr};
            FROST_TRY(L.add("trace." + name + "." + std::to_string(layer), BufferRole::Scratch,
                            sizeof(float) * R * width, &t.buf));
            trace_.push_back(t);
            return FROST_OK;
        };
        FROST_TRY(add_trace("embed", -1, int(H)));
        for (int l = 0; l < cfg_.num_layers; ++l) {
            if (cfg_.is_linear(l))
                FROST_TRY(add_trace("gdn_out", l, cfg_.lin_v_dim()));
            else
                FROST_TRY(add_trace("attn_out", l, cfg_.num_heads * cfg_.head_dim));
            FROST_TRY(add_trace("mixer_residual", l, int(H)));
            if (cfg_.is_moe_layer(l)) FROST_TRY(add_trace("router_probs", l, cfg_.num_experts));
            FROST_TRY(add_trace("layer_out", l, int(H)));
        }
        trace_hook_ = [this](frost_stream* st, const char* name, int layer, const ops::Tensor& src) {
            return trace_copy(st, name, layer, src);
        };
    }
    return FROST_OK;
}

// Debug copy-out of a named activation (habit 7): the rows of the step into its trace buffer.
frost_status Engine::trace_copy(frost_stream* st, const char* name, int layer, const ops::Tensor& src) {
    for (const auto& t : trace_) {
        if (t.name != name || t.layer != layer) continue;
        const uint8_t* p = static_cast<const uint8_t*>(src.data);
        for (const auto& b : scratch_bufs_->list()) {
            const uint8_t* base = static_cast<const uint8_t*>(frost_buffer_ptr(b.buf));
            if (p < base || p >= base + frost_buffer_bytes(b.buf)) continue;
            const size_t bytes = size_t(src.rows()) * size_t(src.shape[1]) * ops::dtype_bits(src.dtype) / 8;
            return frost_buffer_copy(t.buf, 0, b.buf, size_t(p - base), bytes, st);
        }
        return fail(FROST_ERR_STATE, "trace %s: source is not a scratch buffer", name);
    }
    return FROST_OK;
}

// One session: every buffer the state layout declares (names, roles, kinds, dtypes, shapes), the
// views the forward reads, its graph and the host mirrors.
frost_status Engine::alloc_session(int index) {
    auto list = std::make_unique<BufferList>(ctx_);
    qwen35::SessionViews sv;
    const int L = cfg_.num_layers;
    sv.conv.assign(L, ops::Tensor{});
    sv.rec.assign(L, ops::Tensor{});
    sv.k_cache.assign(L, ops::Tensor{});
    sv.v_cache.assign(L, ops::Tensor{});
    // (built with append: GCC 12 warns falsely (-Wrestrict) on "s" + std::to_string(...))
    std::string pre = "s";
    pre.append(std::to_string(index)).append(".");
    frost_buffer* cursor_buf = nullptr;
    for (const qwen35::StateSpec& spec : qwen35::state_layout(cfg_, prec_, opts_.max_seq_len)) {
        frost_buffer* b = nullptr;
        FROST_TRY(list->add(pre + spec.name, spec.role, spec.bytes(), &b, spec.layer, spec.bytes_per_position()));
        NamedBuffer& nb = list->back();
        nb.dtype = spec.dtype;
        nb.kind = spec.kind;
        nb.shape = spec.shape;
        void* p = frost_buffer_ptr(b);
        switch (spec.kind) {
            case StateKind::Cursor:
                sv.cursor = static_cast<StepCursor*>(p);
                cursor_buf = b;
                break;
            case StateKind::Conv: sv.conv[spec.layer] = view_of(p, spec); break;
            case StateKind::Recurrent: sv.rec[spec.layer] = view_of(p, spec); break;
            case StateKind::Kv:
                (spec.name.find("v_cache") != std::string::npos ? sv.v_cache : sv.k_cache)[spec.layer] =
                    view_of(p, spec);
                break;
            case StateKind::None: break;
        }
    }
    if (!cursor_buf) return fail(FROST_ERR_STATE, "engine: the state layout declares no cursor");
    frost_graph* g = nullptr;
    FROST_TRY(frost_graph_create(ctx_, (pre + "steps").c_str(), 0, &g));
    graphs_.push_back(g);
    info_.session_bytes = list->total_bytes();
    sessions_.push_back(std::move(sv));
    cursor_bufs_.push_back(cursor_buf);
    session_bufs_.push_back(std::move(list));
    host_pos_.push_back(0);
    journal_.emplace_back();
    last_token_.push_back(0);
    return FROST_OK;
}

// The session's sampler buffers (kernels/params/sample.h): settings, generated-token counts, the
// seen bits of the state's tokens and the token mask. Role Scratch: no capsule snapshots them.
frost_status Engine::alloc_sampler(int index) {
    auto list = std::make_unique<BufferList>(ctx_);
    const size_t V = size_t(cfg_.vocab_size), W = size_t(kernels::mask_words(cfg_.vocab_size));
    std::string pre = "s";
    pre.append(std::to_string(index)).append(".sampler.");
    frost_buffer* b[4] = {};
    FROST_TRY(list->add(pre + "settings", BufferRole::Scratch, sizeof(kernels::SamplerSettings), &b[kSettingsBuf]));
    FROST_TRY(list->add(pre + "counts", BufferRole::Scratch, sizeof(int32_t) * V, &b[kCountsBuf]));
    FROST_TRY(list->add(pre + "seen", BufferRole::Scratch, sizeof(uint32_t) * W, &b[kSeenBuf]));
    FROST_TRY(list->add(pre + "mask", BufferRole::Scratch, sizeof(uint32_t) * W, &b[kMaskBuf]));
    qwen35::SessionViews& sv = sessions_[size_t(index)];
    sv.sampler = static_cast<kernels::SamplerSettings*>(frost_buffer_ptr(b[kSettingsBuf]));
    sv.counts = static_cast<int32_t*>(frost_buffer_ptr(b[kCountsBuf]));
    sv.seen = static_cast<uint32_t*>(frost_buffer_ptr(b[kSeenBuf]));
    sv.mask = static_cast<uint32_t*>(frost_buffer_ptr(b[kMaskBuf]));
    sampler_bufs_.push_back(std::move(list));
    sampling_.emplace_back();
    last_record_.push_back(kernels::SampleRecord{});
    mask_on_.push_back(0);
    return FROST_OK;
}

frost_status Engine::record(int session, int rows, bool decode, const ops::OpObserver* observer, frost_stream* st,
                            bool dry_run, int64_t context) {
    const ops::Exec ex = exec(st, observer, dry_run, context);
    qwen35::StepSpec step;
    step.rows = rows;
    step.decode = decode;
    step.logits_all = opts_.logits_all;
    step.rope_inv_freq_bf16 = opts_.rope_inv_freq_bf16;
    step.fp8_w8a8_prefill = opts_.fp8_w8a8_prefill;
    step.fp8_w8a8_decode = opts_.fp8_w8a8_decode;
    step.fp8_twin_only = fp8_twin_only();
    step.tail = prefill_tail();
    return qwen35::record_step(ex, cfg_, weights_, scratch_, sessions_[session], step,
                               opts_.trace && !dry_run ? &trace_hook_ : nullptr);
}

std::string Engine::numerics() const {
    std::string s = std::string("rope_inv_freq=") + (opts_.rope_inv_freq_bf16 ? "bf16" : "f32");
    for (size_t i = 0; i < opts_.leave_out_ops.size(); ++i)  // a timing probe: its outputs are not the model's
        s += (i == 0 ? ";leave_out=" : "|") + opts_.leave_out_ops[i];
    if (opts_.backend == FROST_BACKEND_CUDA && opts_.chunk_invariant) s += ";chunk_invariant";
    if (opts_.backend == FROST_BACKEND_CUDA && !prefill_tail()) s += ";prefill_tail=off";
    if (opts_.backend != FROST_BACKEND_CUDA || !quantized_checkpoint_)
        return s;  // the CPU oracle dequantizes every weight; a bf16 checkpoint has no quantized path
    using Split = qwen35::Precision::InProjSplit;
    const Split sp = prec_.gdn_in_proj_split;
    s += std::string(";weights=") + (prec_.keep_quantized ? "kept" : "dequantized");
    s += std::string(";gdn_in_proj=") + (sp == Split::Auto ? "auto" : sp == Split::Always ? "always" : "never");
    s += std::string(";fp8_prefill=") + (opts_.fp8_w8a8_prefill ? "w8a8" : "exact");
    s += std::string(";fp8_decode=") + (opts_.fp8_w8a8_decode ? "w8a8" : "exact");
    return s;
}

bool Engine::prefill_tail() const {
    static const bool env_off = util::env_is("FROST_PREFILL_TAIL", "0");
    return opts_.prefill_tail && !env_off;
}

bool Engine::fp8_twin_only() const {
    static const bool env_off = util::env_is("FROST_FP8_TWIN_ONLY", "0");
    return opts_.fp8_twin_only && !env_off;
}

frost_status Engine::check_leave_out() {
    if (opts_.leave_out_ops.empty()) return FROST_OK;
    std::vector<LabelCost> dec, pre;  // every op label of a decode step and of a prefill step
    FROST_TRY(step_label_costs(1, true, 0, &dec));
    FROST_TRY(step_label_costs(kGdnChunk, false, 0, &pre));
    dec.insert(dec.end(), pre.begin(), pre.end());
    for (const std::string& part : opts_.leave_out_ops) {
        for (const LabelCost& l : dec)
            if ((l.kind == ops::OpKind::Cursor || l.kind == ops::OpKind::TailRow) &&
                ops::label_matches(l.label.c_str(), part))
                return fail(FROST_ERR_INVALID_ARG,
                            "engine: leave_out_ops \"%s\" matches \"%s\", a cursor op: it writes a position and token "
                            "count that later ops address memory by, so it cannot be left out",
                            part.c_str(), l.label.c_str());
        if (std::any_of(dec.begin(), dec.end(), [&part](const LabelCost& l) { return ops::label_matches(l.label.c_str(), part); }))
            continue;
        std::vector<std::string> names;
        std::string all;
        for (const LabelCost& l : dec) {
            if (std::find(names.begin(), names.end(), l.label) != names.end()) continue;
            names.push_back(l.label);
            all += (all.empty() ? "" : ", ") + l.label;
        }
        return fail(FROST_ERR_INVALID_ARG, "engine: leave_out_ops \"%s\" matches no op of a step (ops: %s)",
                    part.c_str(), all.c_str());
    }
    return FROST_OK;
}

frost_status Engine::step_label_costs(int rows, bool decode, int64_t pos, std::vector<LabelCost>* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "step_label_costs: out is null");
    out->clear();
    const ops::OpObserver by_label = [out](const ops::OpRecord& r) {
        const std::string label = r.label ? r.label : "";
        auto it = std::find_if(out->begin(), out->end(), [&label](const LabelCost& l) { return l.label == label; });
        if (it == out->end()) it = out->insert(out->end(), LabelCost{label, 0, {}, r.kind});
        it->ops += 1;
        it->cost.add(r.cost);
    };
    const int64_t context = decode ? pos + 1 : pos + (rows + 1) / 2;  // as step_cost
    return record(0, rows, decode, &by_label, stream_, true, std::max<int64_t>(1, context));
}

frost_status Engine::step_cost(int rows, bool decode, int64_t pos, ops::OpCost* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "step_cost: out is null");
    *out = ops::OpCost{};
    const ops::OpObserver sum = [out](const ops::OpRecord& r) { out->add(r.cost); };
    // Keys per attention row: the causal average over the step's rows.
    const int64_t context = decode ? pos + 1 : pos + (rows + 1) / 2;
    return record(0, rows, decode, &sum, stream_, true, std::max<int64_t>(1, context));
}

frost_status Engine::prefill_cost(int64_t n, ops::OpCost* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "prefill_cost: out is null");
    ops::OpCost total;
    for (int64_t pos = 0; pos < n;) {
        const int64_t take = std::min<int64_t>(opts_.prefill_chunk - pos % opts_.prefill_chunk, n - pos);
        const int bucket = int((take + kGdnChunk - 1) / kGdnChunk * kGdnChunk);
        ops::OpCost c;
        FROST_TRY(step_cost(bucket, false, pos, &c));
        total.add(c);
        pos += take;
    }
    *out = total;
    return FROST_OK;
}

frost_shape_key step_key(bool decode, int rows) {
    return (static_cast<frost_shape_key>(decode ? 1 : 0) << 32) | static_cast<uint32_t>(rows);
}

// Every step graph is captured here, at load, never on a request's path: per session one graph
// per prefill bucket (64, 128, ..., C_p) and ONE decode graph that serves every position.
frost_status Engine::capture_session(int index) {
    struct Job {
        Engine* e;
        int session, rows;
        bool decode;
    };
    auto fn = [](void* user, frost_stream* st) -> frost_status {
        const Job* j = static_cast<const Job*>(user);
        return j->e->record(j->session, j->rows, j->decode, nullptr, st);
    };
    frost_graph* g = graphs_[index];
    for (int rows = kGdnChunk; rows <= opts_.prefill_chunk; rows += kGdnChunk) {
        Job j{this, index, rows, false};
        FROST_TRY(with_context(frost_graph_capture(g, step_key(false, rows), stream_, fn, &j),
                               "engine: capture of prefill bucket " + std::to_string(rows)));
    }
    Job j{this, index, 1, true};
    return with_context(frost_graph_capture(g, step_key(true, 1), stream_, fn, &j),
                        "engine: capture of the decode graph");
}

frost_status Engine::record_ops(int session, int rows, bool decode, const ops::OpObserver& observer) {
    FROST_TRY(check_session(session));
    FROST_TRY(check_no_slices(session, "record_ops"));
    if (decode ? rows != 1 : (rows <= 0 || rows % kGdnChunk || rows > opts_.prefill_chunk))
        return fail(FROST_ERR_INVALID_ARG, "record_ops: rows %d is not a %s bucket", rows, decode ? "decode" : "prefill");
    // A prefill step of a full bucket; the cursor's position is put back afterwards, so the replays
    // run at the step's position (and the host mirrors stay true); the state buffers keep the
    // step's writes. A prefill record leaves n_tokens = rows in the cursor: the replays of the ops
    // that read their row count from the device then process the whole bucket, as the recorded
    // step did (with the cursor put back whole they processed the context prefill's last chunk).
    StepCursor c0{};
    FROST_TRY(read_cursor(session, &c0));
    StepCursor c = c0;
    if (!decode) {
        // Distinct token ids (a fixed odd-multiplier hash over the vocabulary): a bucket of one
        // repeated id routes every MoE row to the same experts, which no real prompt does.
        c.n_tokens = rows;
        int32_t* st = static_cast<int32_t*>(frost_buffer_ptr(staging_));
        for (int i = 0; i < rows; ++i)
            st[i] = static_cast<int32_t>((uint64_t(i) * 2654435761u + 12345u) % uint64_t(cfg_.vocab_size));
        FROST_TRY(frost_buffer_copy(scratch_ids_buf_, 0, staging_, 0, sizeof(int32_t) * size_t(rows), stream_));
    }
    FROST_TRY(write_cursor_field(session, 0, &c, sizeof c));
    const int64_t pos = host_pos_[session];  // costs at the step's context (as step_cost)
    FROST_TRY(record(session, rows, decode, &observer, stream_, false, decode ? pos + 1 : pos + (rows + 1) / 2));
    FROST_TRY(frost_stream_sync(stream_));
    StepCursor back = c0;
    if (!decode) back.n_tokens = rows;
    FROST_TRY(write_cursor_field(session, 0, &back, sizeof back));
    return frost_stream_sync(stream_);
}

frost_status Engine::check_session(int session) const {
    if (session < 0 || session >= sessions())
        return fail(FROST_ERR_INVALID_ARG, "engine: session %d out of range [0, %d)", session, sessions());
    return FROST_OK;
}

frost_status Engine::write_cursor_field(int session, size_t offset, const void* src, size_t bytes) {
    uint8_t* st = static_cast<uint8_t*>(frost_buffer_ptr(staging_));
    const size_t area = sizeof(int32_t) * opts_.prefill_chunk;
    std::memcpy(st + area + offset, src, bytes);
    return frost_buffer_copy(cursor_bufs_[session], offset, staging_, area + offset, bytes, stream_);
}

frost_status Engine::reset(int session, const SamplingConfig& sampling) {
    FROST_TRY(check_session(session));
    FROST_TRY(frost_stream_sync(stream_));
    for (const auto& b : session_bufs_[session]->list())
        FROST_TRY(frost_buffer_fill(b.buf, 0, 0, frost_buffer_bytes(b.buf), stream_));
    for (const auto& b : sampler_bufs_[session]->list())  // settings off, no mask, nothing seen
        FROST_TRY(frost_buffer_fill(b.buf, 0, 0, frost_buffer_bytes(b.buf), stream_));
    FROST_TRY(frost_stream_sync(stream_));
    drop_slices(session);
    last_record_[session] = kernels::SampleRecord{};
    mask_on_[session] = 0;
    host_pos_[session] = 0;
    journal_[session].clear();
    last_token_[session] = 0;
    return set_sampling(session, sampling);
}

frost_status Engine::set_sampling(int session, const SamplingConfig& sc) {
    FROST_TRY(check_session(session));
    if (sc.top_k < 0 || !(sc.top_p > 0.0f && sc.top_p <= 1.0f))
        return fail(FROST_ERR_INVALID_ARG, "sampling: top_k must be >= 0 and top_p in (0, 1], got %d, %g",
                    sc.top_k, static_cast<double>(sc.top_p));
    kernels::SamplerSettings ss{};
    FROST_TRY(sampler_settings(sc, &ss));
    FROST_TRY(frost_stream_sync(stream_));
    // The mask flag is the caller's (set_token_mask): it survives a change of sampling.
    ss.mask_on = mask_on_[session];
    FROST_TRY(write_sampler(session, ss));
    // A new request: nothing generated yet.
    frost_buffer* counts = sampler_bufs_[session]->list()[kCountsBuf].buf;
    FROST_TRY(frost_buffer_fill(counts, 0, 0, frost_buffer_bytes(counts), stream_));
    sampling_[session] = sc;
    StepCursor c{};
    c.sample_mode = sc.temperature > 0.0f ? kernels::kSampleRandom : kernels::kSampleGreedy;
    c.rng_seed = sc.seed;
    c.rng_counter = 0;
    c.temperature = sc.temperature;
    c.top_k = sc.top_k;
    c.top_p = sc.top_p;
    FROST_TRY(frost_stream_sync(stream_));
    FROST_TRY(write_cursor_field(session, kSamplingOffset,
                                 reinterpret_cast<const uint8_t*>(&c) + kSamplingOffset, kSamplingBytes));
    return frost_stream_sync(stream_);
}

// Validates the processing part of `sc` and writes it as the device settings (mask_on left 0).
frost_status Engine::sampler_settings(const SamplingConfig& sc, kernels::SamplerSettings* out) const {
    if (!(sc.min_p >= 0.0f && sc.min_p <= 1.0f))
        return fail(FROST_ERR_INVALID_ARG, "sampling: min_p must be in [0, 1], got %g", double(sc.min_p));
    if (!(sc.repetition_penalty > 0.0f) || !std::isfinite(sc.repetition_penalty))
        return fail(FROST_ERR_INVALID_ARG, "sampling: repetition_penalty must be > 0, got %g",
                    double(sc.repetition_penalty));
    if (!std::isfinite(sc.presence_penalty) || !std::isfinite(sc.frequency_penalty))
        return fail(FROST_ERR_INVALID_ARG, "sampling: presence_penalty / frequency_penalty must be finite");
    if (sc.top_logprobs < -1 || sc.top_logprobs > kernels::kMaxTopLogprobs)
        return fail(FROST_ERR_INVALID_ARG, "sampling: top_logprobs must be in [-1, %d], got %d",
                    kernels::kMaxTopLogprobs, sc.top_logprobs);
    // logit_bias: ids in the vocabulary, finite values; a repeated id sums its entries.
    kernels::SamplerSettings ss{};
    for (const auto& [id, v] : sc.logit_bias) {
        if (id < 0 || id >= cfg_.vocab_size || !std::isfinite(v))
            return fail(FROST_ERR_INVALID_ARG, "sampling: logit_bias entry %d -> %g (ids in [0, %d), finite values)",
                        id, double(v), cfg_.vocab_size);
        int32_t at = 0;
        while (at < ss.n_bias && ss.bias_ids[at] != id) ++at;
        if (at == ss.n_bias) {
            if (ss.n_bias == kernels::kMaxLogitBias)
                return fail(FROST_ERR_INVALID_ARG, "sampling: logit_bias has more than %d distinct ids",
                            kernels::kMaxLogitBias);
            ss.bias_ids[ss.n_bias++] = id;
        }
        ss.bias_values[at] += v;
    }
    ss.presence_penalty = sc.presence_penalty;
    ss.frequency_penalty = sc.frequency_penalty;
    ss.repetition_penalty = sc.repetition_penalty;
    ss.min_p = sc.min_p;
    ss.logprobs = sc.top_logprobs + 1;
    *out = ss;
    return FROST_OK;
}

frost_status Engine::write_sampler(int session, const kernels::SamplerSettings& s) {
    return upload(ctx_, stream_, sampler_bufs_[session]->list()[kSettingsBuf].buf, 0, &s, sizeof s);
}

frost_status Engine::set_token_mask(int session, const uint32_t* bits, size_t words) {
    FROST_TRY(check_session(session));
    const size_t W = size_t(kernels::mask_words(cfg_.vocab_size));
    if (bits && words != W)
        return fail(FROST_ERR_INVALID_ARG, "set_token_mask: %zu words for a vocabulary of %d (needs %zu)", words,
                    cfg_.vocab_size, W);
    FROST_TRY(frost_stream_sync(stream_));
    if (bits) FROST_TRY(upload(ctx_, stream_, sampler_bufs_[session]->list()[kMaskBuf].buf, 0, bits, W * sizeof(uint32_t)));
    const int32_t on = bits ? 1 : 0;
    FROST_TRY(upload(ctx_, stream_, sampler_bufs_[session]->list()[kSettingsBuf].buf,
                     offsetof(kernels::SamplerSettings, mask_on), &on, sizeof on));
    mask_on_[session] = on;
    return FROST_OK;
}

frost_status Engine::last_sample(int session, kernels::SampleRecord* out) const {
    FROST_TRY(check_session(session));
    if (!out) return fail(FROST_ERR_INVALID_ARG, "last_sample: out is null");
    *out = last_record_[session];
    return FROST_OK;
}

// The seen bits of the session's journal (after a restore adopted new ids).
frost_status Engine::write_seen(int session) {
    std::vector<uint32_t> bits(size_t(kernels::mask_words(cfg_.vocab_size)), 0u);
    for (int32_t id : journal_[session])
        if (id >= 0 && id < cfg_.vocab_size) bits[size_t(id) >> 5] |= 1u << (id & 31);
    FROST_TRY(frost_stream_sync(stream_));
    return upload(ctx_, stream_, sampler_bufs_[session]->list()[kSeenBuf].buf, 0, bits.data(),
                  bits.size() * sizeof(uint32_t));
}

// After a step (stream synced): the record the step wrote, when the sampling asked for logprobs.
frost_status Engine::read_record(int session) {
    kernels::SampleRecord& r = last_record_[session];
    if (sampling_[session].top_logprobs < 0) {
        r = kernels::SampleRecord{};
        r.token = last_token_[session];
        return FROST_OK;
    }
    std::memcpy(&r, frost_buffer_ptr(record_staging_), sizeof r);
    return FROST_OK;
}

frost_status Engine::run_chunk(int session, const int32_t* ids, int n, bool decode_graph) {
    if (host_pos_[session] + n > opts_.max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "engine: session %d would exceed max_seq_len %d (at %lld + %d)",
                    session, opts_.max_seq_len, static_cast<long long>(host_pos_[session]), n);
    uint8_t* st = static_cast<uint8_t*>(frost_buffer_ptr(staging_));
    frost_shape_key key;
    if (decode_graph) {
        key = step_key(true, 1);
    } else {
        std::memcpy(st, ids, sizeof(int32_t) * n);
        FROST_TRY(frost_buffer_copy(scratch_ids_buf_, 0, staging_, 0, sizeof(int32_t) * n, stream_));
        const int32_t count = n;
        FROST_TRY(write_cursor_field(session, offsetof(StepCursor, n_tokens), &count, sizeof count));
        const int bucket = (n + kGdnChunk - 1) / kGdnChunk * kGdnChunk;
        key = step_key(false, bucket);
        last_rows_ = bucket;
    }
    FROST_TRY(frost_graph_replay(graphs_[session], key, stream_));
    const int32_t consumed = last_token_[session];
    FROST_TRY(collect_token(session));
    host_pos_[session] += n;
    if (decode_graph)
        journal_[session].push_back(consumed);  // the decode step consumed it
    else
        journal_[session].insert(journal_[session].end(), ids, ids + n);
    if (decode_graph) last_rows_ = 1;
    return read_record(session);
}

// After a step's graphs were enqueued: the sampled token (and, when asked, its record) comes back
// in one small copy each, the stream is synced and the host mirror last_token_ follows.
frost_status Engine::collect_token(int session) {
    const size_t token_off = sizeof(int32_t) * opts_.prefill_chunk + kCursorBytes;
    FROST_TRY(frost_buffer_copy(staging_, token_off, out_token_buf_, 0, sizeof(int32_t), stream_));
    if (sampling_[session].top_logprobs >= 0)  // one small copy with the token, never the logits
        FROST_TRY(frost_buffer_copy(record_staging_, 0, record_buf_, 0, sizeof(kernels::SampleRecord), stream_));
    FROST_TRY(frost_stream_sync(stream_));
    std::memcpy(&last_token_[session], static_cast<const uint8_t*>(frost_buffer_ptr(staging_)) + token_off,
                sizeof(int32_t));
    return FROST_OK;
}

frost_status Engine::prefill(int session, const int32_t* ids, size_t n, int32_t* next,
                             std::vector<float>* all_logits) {
    FROST_TRY(check_session(session));
    FROST_TRY(check_no_slices(session, "prefill"));
    if (!ids || n == 0) return fail(FROST_ERR_INVALID_ARG, "prefill: no tokens");
    if (host_pos_[session] + static_cast<int64_t>(n) > opts_.max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "prefill: %zu tokens at position %lld exceed max_seq_len %d", n,
                    static_cast<long long>(host_pos_[session]), opts_.max_seq_len);
    // Every id is checked before any chunk runs, so a bad id anywhere leaves the session untouched.
    for (size_t i = 0; i < n; ++i)
        if (ids[i] < 0 || ids[i] >= cfg_.vocab_size)
            return fail(FROST_ERR_INVALID_ARG, "engine: token id %d at index %zu outside vocabulary [0, %d)",
                        ids[i], i, cfg_.vocab_size);
    if (!(all_logits && opts_.logits_all)) {
        FROST_TRY(prefill_pipelined(session, ids, n));
        if (next) *next = last_token_[session];
        return FROST_OK;
    }
    const int64_t Cp = opts_.prefill_chunk;
    const int V = cfg_.vocab_size;
    size_t done = 0;
    while (done < n) {
        const int64_t pos = host_pos_[session];
        const int64_t boundary = (pos / Cp + 1) * Cp;  // absolute grid from position 0
        const int take = static_cast<int>(std::min<int64_t>(boundary - pos, static_cast<int64_t>(n - done)));
        FROST_TRY(run_chunk(session, ids + done, take, false));
        if (all_logits && opts_.logits_all) {
            const size_t old = all_logits->size();
            all_logits->resize(old + size_t(take) * V);
            FROST_TRY(read_back(ctx_, stream_, logits_buf_, 0, all_logits->data() + old,
                                sizeof(float) * size_t(take) * V));
        }
        done += take;
    }
    if (next) *next = last_token_[session];
    return FROST_OK;
}

// Every chunk of a prompt on the absolute C_p grid, enqueued back to back with ONE host sync at the
// end: each chunk's ids and row count come from their own slot of the pinned prompt staging, so no
// upload waits for the previous chunk's graph (run_chunk syncs per step because its slots are shared).
frost_status Engine::prefill_pipelined(int session, const int32_t* ids, size_t n) {
    FROST_TRY(frost_stream_sync(stream_));  // earlier steps may still read the staging slots
    int32_t* prompt = static_cast<int32_t*>(frost_buffer_ptr(prompt_staging_));
    const size_t counts_off = size_t(opts_.max_seq_len);
    std::memcpy(prompt, ids, sizeof(int32_t) * n);
    const int64_t Cp = opts_.prefill_chunk;
    frost_buffer* cursor = cursor_bufs_[session];
    size_t done = 0, chunk = 0;
    int64_t pos = host_pos_[session];
    while (done < n) {
        const int64_t boundary = (pos / Cp + 1) * Cp;  // absolute grid from position 0
        const int take = static_cast<int>(std::min<int64_t>(boundary - pos, static_cast<int64_t>(n - done)));
        prompt[counts_off + chunk] = take;
        FROST_TRY(frost_buffer_copy(scratch_ids_buf_, 0, prompt_staging_, sizeof(int32_t) * done,
                                    sizeof(int32_t) * take, stream_));
        FROST_TRY(frost_buffer_copy(cursor, offsetof(StepCursor, n_tokens), prompt_staging_,
                                    sizeof(int32_t) * (counts_off + chunk), sizeof(int32_t), stream_));
        const int bucket = (take + kGdnChunk - 1) / kGdnChunk * kGdnChunk;
        FROST_TRY(frost_graph_replay(graphs_[session], step_key(false, bucket), stream_));
        last_rows_ = bucket;
        pos += take;
        done += take;
        ++chunk;
    }
    FROST_TRY(collect_token(session));
    host_pos_[session] = pos;
    journal_[session].insert(journal_[session].end(), ids, ids + n);
    return read_record(session);
}

frost_status Engine::decode(int session, int32_t* next) {
    FROST_TRY(check_session(session));
    FROST_TRY(check_no_slices(session, "decode"));
    FROST_TRY(run_chunk(session, nullptr, 1, true));
    if (next) *next = last_token_[session];
    return FROST_OK;
}

frost_status Engine::feed(int session, int32_t token, int32_t* next) {
    FROST_TRY(check_session(session));
    FROST_TRY(check_no_slices(session, "feed"));
    if (token < 0 || token >= cfg_.vocab_size)
        return fail(FROST_ERR_INVALID_ARG, "feed: token id %d outside vocabulary [0, %d)", token, cfg_.vocab_size);
    FROST_TRY(write_cursor_field(session, offsetof(StepCursor, last_token), &token, sizeof token));
    last_token_[session] = token;
    return decode(session, next);
}

frost_status Engine::last_logits(int session, std::vector<float>* out) {
    FROST_TRY(check_session(session));
    const int V = cfg_.vocab_size;
    out->resize(V);
    size_t row = 0;
    if (opts_.logits_all) {
        StepCursor c{};
        FROST_TRY(read_cursor(session, &c));
        row = static_cast<size_t>(std::max(1, c.n_tokens) - 1);
    }
    return read_back(ctx_, stream_, logits_buf_, row * V * sizeof(float), out->data(), sizeof(float) * V);
}

// Each ids[i] (i < n - 1) is fed through the decode graph with greedy sampling under a mask that
// allows only ids[i + 1]: the step's record then holds the raw logprob of ids[i + 1] (logprobs
// come from the unprocessed row, so the mask does not change them) and the raw top alternatives.
// No extra graph and no logits read-back; one decode step per prompt token.
frost_status Engine::prompt_logprobs(int session, const int32_t* ids, size_t n, int top_n,
                                     std::vector<kernels::SampleRecord>* out) {
    FROST_TRY(check_session(session));
    FROST_TRY(check_no_slices(session, "prompt_logprobs"));
    if (!ids || !out || n == 0) return fail(FROST_ERR_INVALID_ARG, "prompt_logprobs: no tokens or no output");
    if (top_n < 0 || top_n > kernels::kMaxTopLogprobs)
        return fail(FROST_ERR_INVALID_ARG, "prompt_logprobs: top_n must be in [0, %d], got %d", kernels::kMaxTopLogprobs,
                    top_n);
    for (size_t i = 0; i < n; ++i)
        if (ids[i] < 0 || ids[i] >= cfg_.vocab_size)
            return fail(FROST_ERR_INVALID_ARG, "prompt_logprobs: token id %d at index %zu outside vocabulary [0, %d)",
                        ids[i], i, cfg_.vocab_size);
    if (host_pos_[session] + int64_t(n) - 1 > opts_.max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "prompt_logprobs: %zu tokens at position %lld exceed max_seq_len %d", n,
                    static_cast<long long>(host_pos_[session]), opts_.max_seq_len);
    out->clear();
    const SamplingConfig saved = sampling_[session];
    const int32_t saved_mask_on = mask_on_[session];
    std::vector<uint32_t> saved_mask;
    if (saved_mask_on) {
        saved_mask.resize(size_t(kernels::mask_words(cfg_.vocab_size)));
        FROST_TRY(read_back(ctx_, stream_, sampler_bufs_[session]->list()[kMaskBuf].buf, 0, saved_mask.data(),
                            saved_mask.size() * sizeof(uint32_t)));
    }
    SamplingConfig probe;  // greedy, no processing, the wanted alternatives
    probe.top_logprobs = top_n;
    frost_status st = set_sampling(session, probe);
    std::vector<uint32_t> only(size_t(kernels::mask_words(cfg_.vocab_size)), 0u);
    for (size_t i = 0; st == FROST_OK && i + 1 < n; ++i) {
        const int32_t want = ids[i + 1];
        only[size_t(want) >> 5] = 1u << (want & 31);
        st = set_token_mask(session, only.data(), only.size());
        only[size_t(want) >> 5] = 0u;
        if (st == FROST_OK) st = feed(session, ids[i], nullptr);
        if (st == FROST_OK) out->push_back(last_record_[session]);
    }
    // The caller's sampling (counts restart: the fed prompt tokens were not generated) and mask.
    const frost_status s2 = set_sampling(session, saved);
    const frost_status s3 = set_token_mask(session, saved_mask_on ? saved_mask.data() : nullptr, saved_mask.size());
    return st != FROST_OK ? st : (s2 != FROST_OK ? s2 : s3);
}

frost_status Engine::read_cursor(int session, StepCursor* out) {
    FROST_TRY(check_session(session));
    return read_back(ctx_, stream_, cursor_bufs_[session], 0, out, sizeof(StepCursor));
}

int64_t Engine::position(int session) const {
    return session >= 0 && session < sessions() ? host_pos_[session] : -1;
}

const std::vector<int32_t>& Engine::journal(int session) const {
    static const std::vector<int32_t> kNone;
    return session >= 0 && session < sessions() ? journal_[session] : kNone;
}

frost_status Engine::adopt_restored_state(int session, const std::vector<int32_t>& ids) {
    FROST_TRY(check_session(session));
    StepCursor c{};
    FROST_TRY(read_cursor(session, &c));
    if (c.pos < 0 || c.pos > opts_.max_seq_len || static_cast<size_t>(c.pos) != ids.size())
        return fail(FROST_ERR_CORRUPT, "engine: restored cursor position %d does not match %zu journal ids",
                    c.pos, ids.size());
    drop_slices(session);  // the restore overwrote whatever a staged piece had written
    host_pos_[session] = c.pos;
    journal_[session] = ids;
    last_token_[session] = c.last_token;
    // The sampler's buffers are not part of the capsule: the settings come back from the host's
    // copy, nothing is generated yet (counts 0), the seen bits follow the adopted journal.
    kernels::SamplerSettings ss{};
    FROST_TRY(sampler_settings(sampling_[session], &ss));
    ss.mask_on = mask_on_[session];
    FROST_TRY(write_sampler(session, ss));
    frost_buffer* counts = sampler_bufs_[session]->list()[kCountsBuf].buf;
    FROST_TRY(frost_buffer_fill(counts, 0, 0, frost_buffer_bytes(counts), stream_));
    return write_seen(session);
}

frost_status Engine::fork(int src, int dst) {
    FROST_TRY(check_session(src));
    FROST_TRY(check_session(dst));
    if (src == dst) return fail(FROST_ERR_INVALID_ARG, "fork: session %d is both source and target", src);
    FROST_TRY(check_no_slices(src, "fork"));
    drop_slices(dst);  // overwritten below
    const auto& from = session_bufs_[src]->list();
    const auto& to = session_bufs_[dst]->list();
    FROST_TRY(frost_stream_sync(stream_));
    const int64_t pos = host_pos_[src];
    for (size_t i = 0; i < from.size(); ++i)  // one layout: same order, sizes and dtypes
        FROST_TRY(frost_buffer_copy(to[i].buf, 0, from[i].buf, 0, from[i].valid_bytes(pos), stream_));
    const auto& sfrom = sampler_bufs_[src]->list();  // settings, counts, seen bits and mask travel too
    const auto& sto = sampler_bufs_[dst]->list();
    for (size_t i = 0; i < sfrom.size(); ++i)
        FROST_TRY(frost_buffer_copy(sto[i].buf, 0, sfrom[i].buf, 0, frost_buffer_bytes(sfrom[i].buf), stream_));
    FROST_TRY(frost_stream_sync(stream_));
    sampling_[dst] = sampling_[src];
    mask_on_[dst] = mask_on_[src];
    last_record_[dst] = last_record_[src];
    host_pos_[dst] = pos;
    journal_[dst] = journal_[src];
    last_token_[dst] = last_token_[src];
    return FROST_OK;
}

std::vector<NamedBuffer> Engine::state_buffers(int session) const {
    if (session < 0 || session >= sessions()) return {};
    return session_bufs_[session]->list();
}

std::vector<NamedBuffer> Engine::buffers(int session) const {
    std::vector<NamedBuffer> all = state_buffers(session);
    if (session >= 0 && session < sessions())
        for (const auto& b : sampler_bufs_[session]->list()) all.push_back(b);
    for (const auto& b : scratch_bufs_->list()) all.push_back(b);
    for (const auto& b : weight_bufs_->list()) all.push_back(b);
    return all;
}

frost_status Engine::read_trace(const std::string& name, int layer, std::vector<float>* out, int* rows) {
    for (const auto& t : trace_) {
        if (t.name != name || t.layer != layer) continue;
        out->resize(size_t(last_rows_) * t.width);
        if (rows) *rows = last_rows_;
        return read_back(ctx_, stream_, t.buf, 0, out->data(), sizeof(float) * out->size());
    }
    return fail(FROST_ERR_NOT_FOUND, "trace: no activation %s at layer %d (engine built with trace=%d)",
                name.c_str(), layer, opts_.trace ? 1 : 0);
}

uint64_t Engine::weight_bytes() const { return weight_bufs_ ? weight_bufs_->total_bytes() : 0; }

CudaEngineInfo Engine::info() const {
    CudaEngineInfo i = info_;
    i.graphs = 0;
    for (frost_graph* g : graphs_) i.graphs += frost_graph_variant_count(g);
    if (batch_graph_) i.graphs += frost_graph_variant_count(batch_graph_);
    i.captures = capture_count();
    i.gemm_plans = backend_ ? backend_->gemm_plans() : 0;
    return i;
}

CudaEngineInfo cuda_engine_info(const Engine& e) {
    CudaEngineInfo i = e.info();
    return i.active ? i : CudaEngineInfo{};
}

uint64_t Engine::capture_count() const {
    uint64_t n = 0;
    for (frost_graph* g : graphs_) n += frost_graph_capture_count(g);
    if (batch_graph_) n += frost_graph_capture_count(batch_graph_);
    return n;
}

}  // namespace frost::model
