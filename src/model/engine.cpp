// Engine lifetime and the host side of a step: static buffer allocation per role, graph capture
// at load, and prefill / decode as "write ids (and the chunk count) -> replay -> read one id".
#include "model/engine.h"

#include <algorithm>
#include <cstring>

#include "exec/error.h"
#include "kernels/params/moe.h"

namespace frost::model {
namespace {

using kernels::StepCursor;

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

}  // namespace

Engine::~Engine() {
    if (stream_) frost_stream_sync(stream_);
    for (frost_graph* g : graphs_) frost_graph_destroy(g);
    graphs_.clear();
    session_bufs_.clear();
    scratch_bufs_.reset();
    weight_bufs_.reset();
    if (stream_) frost_stream_destroy(stream_);
    if (ctx_) frost_ctx_destroy(ctx_);
}

frost_status Engine::create(const std::string& model_dir, const EngineOptions& opts,
                            std::unique_ptr<Engine>* out) {
    ModelWeights w;
    FROST_TRY(load_weights(model_dir, &w));
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

frost_status Engine::init(const ModelWeights& w, const EngineOptions& opts) {
    cfg_ = w.config;
    opts_ = opts;
    const auto unsupported = cfg_.unsupported_features();
    for (const auto& f : unsupported)
        if (f.find("MTP") == std::string::npos)  // an unused MTP head does not change the LM
            return fail(FROST_ERR_UNSUPPORTED, "engine: the dense fp32 engine does not execute %s",
                        f.c_str());
    if (opts.prefill_chunk <= 0 || opts.prefill_chunk % kGdnChunk)
        return fail(FROST_ERR_INVALID_ARG, "engine: prefill_chunk must be a positive multiple of %d, got %d",
                    kGdnChunk, opts.prefill_chunk);
    if (opts.max_seq_len <= 0 || opts.sessions <= 0)
        return fail(FROST_ERR_INVALID_ARG, "engine: max_seq_len (%d) and sessions (%d) must be > 0",
                    opts.max_seq_len, opts.sessions);
    const bool any_dense_mlp = cfg_.num_moe_layers() < cfg_.num_layers;
    if ((any_dense_mlp && cfg_.intermediate_size <= 0) || cfg_.rotary_dim <= 0 || cfg_.num_layers <= 0 ||
        static_cast<int>(w.layers.size()) != cfg_.num_layers)
        return fail(FROST_ERR_INVALID_ARG, "engine: config lacks a dense MLP width, rotary dim or layers");
    // MoE runs on the CPU reference path only until the CUDA MoE kernels are wired in.
    if (cfg_.is_moe() && opts.backend == FROST_BACKEND_CUDA)
        return fail(FROST_ERR_UNSUPPORTED,
                    "engine: MoE experts (%d, top-%d) run on the CPU backend only; the CUDA engine has no MoE "
                    "kernels wired in yet (use --backend cpu)",
                    cfg_.num_experts, cfg_.num_experts_per_tok);
    FROST_TRY(frost_ctx_create(opts.backend, opts.device, &ctx_));
    FROST_TRY(frost_stream_create(ctx_, 0, &stream_));
    if (opts.backend == FROST_BACKEND_CUDA) {
        FROST_TRY(CudaBuild::init(*this, w));  // engine_cuda.cpp
        return alloc_prompt_staging();
    }
    FROST_TRY(alloc_weights(w));
    FROST_TRY(alloc_scratch());
    for (int i = 0; i < opts.sessions; ++i) FROST_TRY(alloc_session(i));
    for (int i = 0; i < opts.sessions; ++i) {
        FROST_TRY(capture_session(i));
        FROST_TRY(reset(i));
    }
    return alloc_prompt_staging();
}

frost_status Engine::alloc_prompt_staging() {
    const size_t chunks = size_t(opts_.max_seq_len) / kGdnChunk + 2;  // a partial first chunk adds one
    return scratch_bufs_->add("staging.prompt", BufferRole::Scratch,
                              sizeof(int32_t) * (size_t(opts_.max_seq_len) + chunks), &prompt_staging_, -1, 0,
                              FROST_SPACE_HOST_PINNED);
}

frost_status Engine::alloc_scratch() {
    scratch_bufs_ = std::make_unique<BufferList>(ctx_);
    BufferList& L = *scratch_bufs_;
    const int R = opts_.prefill_chunk, H = cfg_.hidden_size, V = cfg_.vocab_size;
    int proj = 2 * cfg_.intermediate_size, core = 1;
    if (cfg_.num_linear_layers() > 0) {
        proj = std::max(proj, cfg_.conv_dim() + cfg_.lin_v_dim() + 2 * cfg_.lin_num_v_heads);
        core = std::max(core, cfg_.lin_v_dim());
    }
    if (cfg_.num_full_layers() > 0) {
        proj = std::max(proj, 2 * cfg_.num_heads * cfg_.head_dim + 2 * cfg_.num_kv_heads * cfg_.head_dim);
        core = std::max(core, cfg_.num_heads * cfg_.head_dim);
    }
    ScratchPtrs& s = scratch_;
    s.proj_width = proj;
    s.core_width = core;
    s.logit_rows = opts_.logits_all ? R : 1;
    const size_t F4 = sizeof(float);
    frost_buffer* b = nullptr;
    auto fl = [&](const char* name, size_t n, float** p) -> frost_status {
        FROST_TRY(L.add(std::string("scratch.") + name, BufferRole::Scratch, n * F4, &b));
        *p = static_cast<float*>(frost_buffer_ptr(b));
        return FROST_OK;
    };
    FROST_TRY(L.add("scratch.ids", BufferRole::Scratch, sizeof(int32_t) * R, &scratch_ids_buf_));
    s.ids = static_cast<int32_t*>(frost_buffer_ptr(scratch_ids_buf_));
    FROST_TRY(fl("x", size_t(R) * H, &s.x));
    FROST_TRY(fl("xn", size_t(R) * H, &s.xn));
    FROST_TRY(fl("proj", size_t(R) * proj, &s.proj));
    FROST_TRY(fl("conv_out", size_t(R) * std::max(1, cfg_.conv_dim()), &s.conv_out));
    FROST_TRY(fl("beta", size_t(R) * std::max(1, cfg_.lin_num_v_heads), &s.beta));
    FROST_TRY(fl("g", size_t(R) * std::max(1, cfg_.lin_num_v_heads), &s.g));
    FROST_TRY(fl("core", size_t(R) * core, &s.core));
    FROST_TRY(fl("core2", size_t(R) * std::max(1, cfg_.lin_v_dim()), &s.core2));
    FROST_TRY(fl("act", size_t(R) * std::max(1, cfg_.intermediate_size), &s.act));
    FROST_TRY(fl("fin", size_t(s.logit_rows) * H, &s.fin));
    FROST_TRY(fl("logits", size_t(s.logit_rows) * V, &s.logits));
    logits_buf_ = b;
    FROST_TRY(fl("sample_work", size_t(2) * V, &s.sample_work));
    FROST_TRY(L.add("scratch.sample_idx", BufferRole::Scratch, sizeof(int32_t) * V, &b));
    s.sample_idx = static_cast<int32_t*>(frost_buffer_ptr(b));
    FROST_TRY(L.add("scratch.out_token", BufferRole::Scratch, sizeof(int32_t), &out_token_buf_));
    s.out_token = static_cast<int32_t*>(frost_buffer_ptr(out_token_buf_));
    // Host staging: [ids (R int32) | cursor fields (64 B) | token read-back (4 B)].
    FROST_TRY(L.add("staging", BufferRole::Scratch, sizeof(int32_t) * R + kCursorBytes + sizeof(int32_t),
                    &staging_, -1, 0, FROST_SPACE_HOST_PINNED));
    if (cfg_.is_moe()) FROST_TRY(alloc_moe_scratch());
    if (opts_.trace) {
        auto add_trace = [&](const std::string& name, int layer, int width) -> frost_status {
            TraceEntry t{name, layer, width, nullptr};
            FROST_TRY(L.add("trace." + name + "." + std::to_string(layer), BufferRole::Scratch,
                            F4 * size_t(R) * width, &t.buf));
            trace_.push_back(t);
            return FROST_OK;
        };
        FROST_TRY(add_trace("embed", -1, H));
        for (int l = 0; l < cfg_.num_layers; ++l) {
            if (cfg_.is_linear(l))
                FROST_TRY(add_trace("gdn_out", l, cfg_.lin_v_dim()));
            else
                FROST_TRY(add_trace("attn_out", l, cfg_.num_heads * cfg_.head_dim));
            FROST_TRY(add_trace("mixer_residual", l, H));
            if (cfg_.is_moe_layer(l)) FROST_TRY(add_trace("router_probs", l, cfg_.num_experts));
            FROST_TRY(add_trace("layer_out", l, H));
        }
    }
    return FROST_OK;
}

// Router outputs and per-row expert scratch of the MoE op (one set, reused by every MoE layer).
frost_status Engine::alloc_moe_scratch() {
    BufferList& L = *scratch_bufs_;
    const size_t R = size_t(opts_.prefill_chunk), E = size_t(cfg_.num_experts), k = size_t(cfg_.num_experts_per_tok);
    const size_t work = size_t(kernels::moe_work_floats(cfg_.hidden_size, cfg_.moe_intermediate_size,
                                                        cfg_.shared_expert_intermediate_size));
    frost_buffer* b = nullptr;
    FROST_TRY(L.add("scratch.moe_probs", BufferRole::Scratch, sizeof(float) * R * E, &b));
    scratch_.moe_probs = static_cast<float*>(frost_buffer_ptr(b));
    FROST_TRY(L.add("scratch.moe_ids", BufferRole::Scratch, sizeof(int32_t) * R * k, &b));
    scratch_.moe_ids = static_cast<int32_t*>(frost_buffer_ptr(b));
    FROST_TRY(L.add("scratch.moe_w", BufferRole::Scratch, sizeof(float) * R * k, &b));
    scratch_.moe_w = static_cast<float*>(frost_buffer_ptr(b));
    FROST_TRY(L.add("scratch.moe_work", BufferRole::Scratch, sizeof(float) * R * work, &b));
    scratch_.moe_work = static_cast<float*>(frost_buffer_ptr(b));
    return FROST_OK;
}

frost_status Engine::alloc_session(int index) {
    auto list = std::make_unique<BufferList>(ctx_);
    SessionPtrs sp{};
    // (built with append: GCC 12 warns falsely (-Wrestrict) on "s" + std::to_string(...))
    std::string pre = "s";
    pre.append(std::to_string(index)).append(".");
    FROST_TRY(list->add(pre + "cursor", BufferRole::Cursor, kCursorBytes, &sp.cursor_buf));
    sp.cursor = static_cast<StepCursor*>(frost_buffer_ptr(sp.cursor_buf));
    const int L = cfg_.num_layers;
    sp.conv_state.assign(L, nullptr);
    sp.rec_state.assign(L, nullptr);
    sp.k_cache.assign(L, nullptr);
    sp.v_cache.assign(L, nullptr);
    frost_buffer* b = nullptr;
    for (int l = 0; l < L; ++l) {
        const std::string lp = pre + "layer" + std::to_string(l) + ".";
        if (cfg_.is_linear(l)) {
            const size_t conv = size_t(cfg_.conv_dim()) * (cfg_.conv_kernel - 1) * sizeof(float);
            FROST_TRY(list->add(lp + "conv_state", BufferRole::State, conv, &b, l));
            sp.conv_state[l] = static_cast<float*>(frost_buffer_ptr(b));
            const size_t rec = size_t(cfg_.lin_num_v_heads) * cfg_.lin_k_head_dim *
                               cfg_.lin_v_head_dim * sizeof(float);
            FROST_TRY(list->add(lp + "recurrent_state", BufferRole::State, rec, &b, l));
            sp.rec_state[l] = static_cast<float*>(frost_buffer_ptr(b));
        } else {
            const size_t per_pos = size_t(cfg_.num_kv_heads) * cfg_.head_dim * sizeof(float);
            const size_t bytes = per_pos * opts_.max_seq_len;
            FROST_TRY(list->add(lp + "k_cache", BufferRole::State, bytes, &b, l, per_pos));
            sp.k_cache[l] = static_cast<float*>(frost_buffer_ptr(b));
            FROST_TRY(list->add(lp + "v_cache", BufferRole::State, bytes, &b, l, per_pos));
            sp.v_cache[l] = static_cast<float*>(frost_buffer_ptr(b));
        }
    }
    frost_graph* g = nullptr;
    FROST_TRY(frost_graph_create(ctx_, (pre + "steps").c_str(), 0, &g));
    graphs_.push_back(g);
    sessions_.push_back(std::move(sp));
    session_bufs_.push_back(std::move(list));
    host_pos_.push_back(0);
    journal_.emplace_back();
    last_token_.push_back(0);
    return FROST_OK;
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
    return frost_buffer_copy(sessions_[session].cursor_buf, offset, staging_, area + offset, bytes, stream_);
}

frost_status Engine::reset(int session, const SamplingConfig& sampling) {
    FROST_TRY(check_session(session));
    FROST_TRY(frost_stream_sync(stream_));
    for (const auto& b : session_bufs_[session]->list())
        FROST_TRY(frost_buffer_fill(b.buf, 0, 0, frost_buffer_bytes(b.buf), stream_));
    FROST_TRY(frost_stream_sync(stream_));
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

frost_status Engine::run_chunk(int session, const int32_t* ids, int n, bool decode_graph) {
    if (host_pos_[session] + n > opts_.max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "engine: session %d would exceed max_seq_len %d (at %lld + %d)",
                    session, opts_.max_seq_len, static_cast<long long>(host_pos_[session]), n);
    uint8_t* st = static_cast<uint8_t*>(frost_buffer_ptr(staging_));
    const size_t token_off = sizeof(int32_t) * opts_.prefill_chunk + kCursorBytes;
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
    FROST_TRY(frost_buffer_copy(staging_, token_off, out_token_buf_, 0, sizeof(int32_t), stream_));
    FROST_TRY(frost_stream_sync(stream_));
    host_pos_[session] += n;
    if (decode_graph)
        journal_[session].push_back(last_token_[session]);  // the decode step consumed it
    else
        journal_[session].insert(journal_[session].end(), ids, ids + n);
    std::memcpy(&last_token_[session], st + token_off, sizeof(int32_t));
    if (decode_graph) last_rows_ = 1;
    return FROST_OK;
}

frost_status Engine::prefill(int session, const int32_t* ids, size_t n, int32_t* next,
                             std::vector<float>* all_logits) {
    FROST_TRY(check_session(session));
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
        if (next) std::memcpy(next, static_cast<uint8_t*>(frost_buffer_ptr(staging_)) +
                                        sizeof(int32_t) * opts_.prefill_chunk + kCursorBytes, sizeof(int32_t));
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
    if (next) std::memcpy(next, static_cast<uint8_t*>(frost_buffer_ptr(staging_)) +
                                    sizeof(int32_t) * opts_.prefill_chunk + kCursorBytes, sizeof(int32_t));
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
    frost_buffer* cursor = sessions_[session].cursor_buf;
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
    uint8_t* st = static_cast<uint8_t*>(frost_buffer_ptr(staging_));
    const size_t token_off = sizeof(int32_t) * opts_.prefill_chunk + kCursorBytes;
    FROST_TRY(frost_buffer_copy(staging_, token_off, out_token_buf_, 0, sizeof(int32_t), stream_));
    FROST_TRY(frost_stream_sync(stream_));
    host_pos_[session] = pos;
    journal_[session].insert(journal_[session].end(), ids, ids + n);
    std::memcpy(&last_token_[session], st + token_off, sizeof(int32_t));
    return FROST_OK;
}

frost_status Engine::decode(int session, int32_t* next) {
    FROST_TRY(check_session(session));
    FROST_TRY(run_chunk(session, nullptr, 1, true));
    if (next) std::memcpy(next, static_cast<uint8_t*>(frost_buffer_ptr(staging_)) +
                                    sizeof(int32_t) * opts_.prefill_chunk + kCursorBytes, sizeof(int32_t));
    return FROST_OK;
}

frost_status Engine::feed(int session, int32_t token, int32_t* next) {
    FROST_TRY(check_session(session));
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

frost_status Engine::read_cursor(int session, StepCursor* out) {
    FROST_TRY(check_session(session));
    return read_back(ctx_, stream_, sessions_[session].cursor_buf, 0, out, sizeof(StepCursor));
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
    host_pos_[session] = c.pos;
    journal_[session] = ids;
    last_token_[session] = c.last_token;
    return FROST_OK;
}

std::vector<NamedBuffer> Engine::state_buffers(int session) const {
    if (session < 0 || session >= sessions()) return {};
    return session_bufs_[session]->list();
}

std::vector<NamedBuffer> Engine::buffers(int session) const {
    std::vector<NamedBuffer> all = state_buffers(session);
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

uint64_t Engine::capture_count() const {
    uint64_t n = 0;
    for (frost_graph* g : graphs_) n += frost_graph_capture_count(g);
    return n;
}

}  // namespace frost::model
