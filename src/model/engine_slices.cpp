// Sliced prefill (architecture.md "Prefill beside decode"): a prompt piece runs a few layers at a
// time, so the decode steps of other sessions go on between two of its calls instead of waiting
// for a whole chunk. A prefill chunk that cannot share one pass over the weights with a decode
// step (a GEMM's bits depend on its row count; a decode row must keep its solo bits) would cost
// that step a full second pass; cut per layer, a step pays only the layers it carries.
//
// The per-layer graphs are the prefill graphs' own ops (the one forward with a layer range), so
// every kernel sees the same inputs as in prefill(): the only difference is where the residual
// rows live between layers. They live in a per-session buffer (slice_h_), which no other step
// writes; everything else a layer touches is either the session's own state or scratch that is
// dead between layers (x, proj, core, ...). Token ids are read by the embedding only, in the
// first layer's call, right after they were uploaded.
#include <algorithm>
#include <cstring>

#include "exec/error.h"
#include "model/engine.h"

namespace frost::model {

frost_shape_key slice_key(int layer, int rows) {
    return (static_cast<frost_shape_key>(3) << 32) | (static_cast<frost_shape_key>(uint32_t(layer)) << 16) |
           static_cast<uint32_t>(rows);
}

// Buckets 64 .. slice_rows (clamped to C_p; none when trace or logits_all need whole steps).
frost_status Engine::alloc_slices() {
    slices_.assign(size_t(sessions()), SlicedPiece{});
    slice_rows_ = std::min(std::max(0, opts_.slice_rows), opts_.prefill_chunk) / kGdnChunk * kGdnChunk;
    if (opts_.trace || opts_.logits_all) slice_rows_ = 0;
    if (opts_.slice_rows < 0 || opts_.slice_rows % kGdnChunk)
        return fail(FROST_ERR_INVALID_ARG, "engine: slice_rows must be 0 or a multiple of %d, got %d", kGdnChunk,
                    opts_.slice_rows);
    if (slice_rows_ == 0) return FROST_OK;
    const size_t bytes = size_t(slice_rows_) * size_t(cfg_.hidden_size) * ops::dtype_bits(prec_.act) / 8;
    for (int i = 0; i < sessions(); ++i) {
        frost_buffer* b = nullptr;
        FROST_TRY(scratch_bufs_->add("scratch.slice_h." + std::to_string(i), BufferRole::Scratch, bytes, &b));
        slice_h_.push_back(ops::vec(frost_buffer_ptr(b), prec_.act, int64_t(slice_rows_) * cfg_.hidden_size));
    }
    return FROST_OK;
}

// One graph per (layer, bucket) in the session's graph: the prefill forward of that bucket, cut
// to one layer, with the residual rows in the session's slice buffer.
frost_status Engine::capture_slices(int session) {
    struct Job {
        Engine* e;
        int session, rows, layer;
    };
    auto fn = [](void* user, frost_stream* st) -> frost_status {
        const Job* j = static_cast<const Job*>(user);
        Engine& e = *j->e;
        qwen35::ScratchViews s = e.scratch_;
        s.h = e.slice_h_[size_t(j->session)];
        qwen35::StepSpec step;
        step.rows = j->rows;
        step.rope_inv_freq_bf16 = e.opts_.rope_inv_freq_bf16;
        step.fp8_w8a8_prefill = e.opts_.fp8_w8a8_prefill;
        step.fp8_twin_only = e.fp8_twin_only();
        step.layer_begin = j->layer;
        step.layer_end = j->layer + 1;
        const ops::Exec ex = e.exec(st, nullptr, false, 0);
        return qwen35::record_step(ex, e.cfg_, e.weights_, s, e.sessions_[size_t(j->session)], step, nullptr);
    };
    for (int rows = kGdnChunk; rows <= slice_rows_; rows += kGdnChunk)
        for (int l = 0; l < cfg_.num_layers; ++l) {
            Job j{this, session, rows, l};
            const frost_status st = frost_graph_capture(graphs_[size_t(session)], slice_key(l, rows), stream_, fn, &j);
            if (st != FROST_OK)
                return add_context(st, "engine: capture of the sliced prefill, layer " + std::to_string(l) +
                                           " bucket " + std::to_string(rows));
        }
    return FROST_OK;
}

bool Engine::prefill_slices_pending(int session) const {
    return session >= 0 && session < sessions() && slices_[size_t(session)].active;
}

frost_status Engine::check_no_slices(int session, const char* what) const {
    if (prefill_slices_pending(session))
        return fail(FROST_ERR_STATE, "engine: %s: session %d is in the middle of a sliced prefill", what, session);
    return FROST_OK;
}

void Engine::drop_slices(int session) {
    if (session >= 0 && session < sessions()) slices_[size_t(session)] = SlicedPiece{};
}

frost_status Engine::prefill_slices_begin(int session, const int32_t* ids, size_t n) {
    FROST_TRY(check_session(session));
    FROST_TRY(check_no_slices(session, "prefill_slices_begin"));
    if (slice_rows_ == 0) return fail(FROST_ERR_UNSUPPORTED, "engine: sliced prefill is off (slice_rows 0)");
    if (!ids || n == 0 || n > size_t(slice_rows_))
        return fail(FROST_ERR_INVALID_ARG, "prefill_slices_begin: %zu tokens, must be 1 .. %d", n, slice_rows_);
    const int64_t pos = host_pos_[size_t(session)];
    if (pos + int64_t(n) > opts_.max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "prefill_slices_begin: %zu tokens at position %lld exceed max_seq_len %d",
                    n, static_cast<long long>(pos), opts_.max_seq_len);
    for (size_t i = 0; i < n; ++i)
        if (ids[i] < 0 || ids[i] >= cfg_.vocab_size)
            return fail(FROST_ERR_INVALID_ARG, "engine: token id %d at index %zu outside vocabulary [0, %d)", ids[i],
                        i, cfg_.vocab_size);
    SlicedPiece p;
    p.ids.assign(ids, ids + n);
    // The chunks prefill() would run: the absolute C_p grid from position 0.
    const int64_t Cp = opts_.prefill_chunk;
    for (int64_t at = pos, left = int64_t(n); left > 0;) {
        const int64_t take = std::min((at / Cp + 1) * Cp - at, left);
        p.takes.push_back(int(take));
        at += take;
        left -= take;
    }
    p.active = true;
    slices_[size_t(session)] = std::move(p);
    return FROST_OK;
}

frost_status Engine::prefill_slices_run(int session, int layers, bool* done, int32_t* next) {
    FROST_TRY(check_session(session));
    if (!done) return fail(FROST_ERR_INVALID_ARG, "prefill_slices_run: done is null");
    *done = false;
    SlicedPiece& p = slices_[size_t(session)];
    if (!p.active) return fail(FROST_ERR_STATE, "prefill_slices_run: session %d has no staged piece", session);
    if (layers < 1) return fail(FROST_ERR_INVALID_ARG, "prefill_slices_run: layers must be >= 1, got %d", layers);
    const int L = cfg_.num_layers;
    uint8_t* st = static_cast<uint8_t*>(frost_buffer_ptr(staging_));
    frost_status s = FROST_OK;
    for (int left = layers; left > 0 && p.chunk < p.takes.size() && s == FROST_OK; --left) {
        const int take = p.takes[p.chunk];
        const int bucket = (take + kGdnChunk - 1) / kGdnChunk * kGdnChunk;
        if (p.layer == 0) {  // the chunk's ids and row count, read by this call's first layer
            FROST_TRY(frost_stream_sync(stream_));  // the staging slots may still be read
            std::memcpy(st, p.ids.data() + p.done, sizeof(int32_t) * size_t(take));
            FROST_TRY(frost_buffer_copy(scratch_ids_buf_, 0, staging_, 0, sizeof(int32_t) * size_t(take), stream_));
            const int32_t count = take;
            FROST_TRY(write_cursor_field(session, offsetof(kernels::StepCursor, n_tokens), &count, sizeof count));
        }
        s = frost_graph_replay(graphs_[size_t(session)], slice_key(p.layer, bucket), stream_);
        if (s != FROST_OK) break;
        last_rows_ = bucket;
        if (++p.layer < L) continue;
        // The chunk's last layer ran its lm_head, sample and cursor advance: the host mirrors follow.
        host_pos_[size_t(session)] += take;
        journal_[size_t(session)].insert(journal_[size_t(session)].end(), p.ids.begin() + long(p.done),
                                         p.ids.begin() + long(p.done) + take);
        p.done += size_t(take);
        p.layer = 0;
        ++p.chunk;
    }
    if (s != FROST_OK) {
        // A failed replay leaves the piece half applied: the session must be reset or restored.
        p = SlicedPiece{};
        return add_context(s, "prefill_slices_run");
    }
    if (p.chunk < p.takes.size()) return frost_stream_sync(stream_);  // callers time their calls
    FROST_TRY(collect_token(session));
    p = SlicedPiece{};
    *done = true;
    if (next) *next = last_token_[size_t(session)];
    return read_record(session);
}

}  // namespace frost::model
