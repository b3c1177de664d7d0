// Batched decode over live sessions (architecture.md "Batched decode"): the session pointer
// table written once at load, one captured graph per batch size, and the host side of a batched
// step ("write the member slots -> replay -> read B token ids"). Every member keeps its own
// static state buffers, so capsules, fork and rollback do not change; which sessions take part
// is data (the slot vector), so membership changes never recapture.
#include <algorithm>
#include <cstring>
#include <vector>

#include "exec/error.h"
#include "model/engine.h"

namespace frost::model {
namespace {

constexpr int kMaxBatch = qwen35::kMaxBatch;
// Captured batch sizes; a step of B rows runs at the smallest size >= B with padding rows.
constexpr int kBatchSizes[] = {2, 4, 8};

}  // namespace

frost_shape_key batch_key(int B) { return (static_cast<frost_shape_key>(2) << 32) | static_cast<uint32_t>(B); }

// The table: per session one row of slot_stride pointers (cursor, then conv / recurrent / K / V
// per layer), uploaded once; plus the step's inputs (slots), gathered cursors and sampled tokens.
frost_status Engine::alloc_batch() {
    batch_bufs_ = std::make_unique<BufferList>(ctx_);
    BufferList& L = *batch_bufs_;
    const int S = sessions(), stride = qwen35::slot_stride(cfg_);
    std::vector<void*> table(size_t(S) * size_t(stride), nullptr);
    for (int i = 0; i < S; ++i) {
        void** row = table.data() + size_t(i) * size_t(stride);
        const qwen35::SessionViews& sv = sessions_[size_t(i)];
        row[qwen35::slot_column(0, StateKind::Cursor)] = sv.cursor;
        for (int l = 0; l < cfg_.num_layers; ++l) {
            row[qwen35::slot_column(l, StateKind::Conv)] = sv.conv[size_t(l)].data;
            row[qwen35::slot_column(l, StateKind::Recurrent)] = sv.rec[size_t(l)].data;
            row[qwen35::slot_column(l, StateKind::Kv)] = sv.k_cache[size_t(l)].data;
            row[qwen35::slot_column(l, StateKind::Kv) + 1] = sv.v_cache[size_t(l)].data;
        }
    }
    const size_t table_bytes = sizeof(void*) * table.size();
    frost_buffer* cursors = nullptr;
    FROST_TRY(L.add("batch.table", BufferRole::Scratch, table_bytes, &batch_table_buf_));
    FROST_TRY(L.add("batch.slots", BufferRole::Scratch, sizeof(int32_t) * kMaxBatch, &batch_slots_buf_));
    FROST_TRY(L.add("batch.cursors", BufferRole::Scratch, sizeof(kernels::StepCursor) * kMaxBatch, &cursors));
    FROST_TRY(L.add("batch.out_tokens", BufferRole::Scratch, sizeof(int32_t) * kMaxBatch, &batch_out_buf_));
    FROST_TRY(L.add("batch.staging", BufferRole::Scratch, sizeof(int32_t) * 2 * kMaxBatch, &batch_staging_, -1, 0,
                    FROST_SPACE_HOST_PINNED));
    // The table goes up once, through a wrapped host copy (synchronous).
    frost_buffer* h = nullptr;
    FROST_TRY(frost_buffer_wrap(ctx_, "batch.table.upload", table.data(), table_bytes, FROST_SPACE_HOST, &h));
    frost_status st = frost_buffer_copy(batch_table_buf_, 0, h, 0, table_bytes, stream_);
    if (st == FROST_OK) st = frost_stream_sync(stream_);
    frost_buffer_free(h);
    FROST_TRY(st);
    qwen35::BatchViews& b = scratch_.batch;
    b.table = static_cast<void* const*>(frost_buffer_ptr(batch_table_buf_));
    b.sessions = S;
    b.slots = static_cast<int32_t*>(frost_buffer_ptr(batch_slots_buf_));
    b.cursors = static_cast<kernels::StepCursor*>(frost_buffer_ptr(cursors));
    b.out_tokens = static_cast<int32_t*>(frost_buffer_ptr(batch_out_buf_));
    return FROST_OK;
}

frost_status Engine::record_batch(int B, const ops::OpObserver* observer, frost_stream* st, bool dry_run,
                                  int64_t context) {
    const ops::Exec ex = exec(st, observer, dry_run, context);
    qwen35::StepSpec step;
    step.rows = B;
    step.decode = true;
    step.logits_all = false;
    step.rope_inv_freq_bf16 = opts_.rope_inv_freq_bf16;
    step.fp8_w8a8_decode = opts_.fp8_w8a8_decode;
    step.batch = B;
    // Session 0's views are only the shape template: every op reads its members' buffers
    // through the table. No trace: the trace buffers hold one session's rows.
    return qwen35::record_step(ex, cfg_, weights_, scratch_, sessions_[0], step, nullptr);
}

// One graph, one variant per batch size, captured at load. CUDA only with
// EngineOptions::cuda_batched_decode: dense or MoE (op_moe runs a batched step's rows through its
// per-row decode kernels), bf16 or kept-quantized weights (the quantized tensor-core GEMV takes up
// to 8 rows, each with its solo bits; shapes only the SIMT kernel takes launch once per member).
frost_status Engine::capture_batch() {
    batch_sizes_.clear();
    if (sessions() < 2) return FROST_OK;
    if (backend_->kind() == FROST_BACKEND_CUDA && !opts_.cuda_batched_decode)
        return FROST_OK;
    FROST_TRY(frost_graph_create(ctx_, "batch.decode", 0, &batch_graph_));
    struct Job {
        Engine* e;
        int B;
    };
    auto fn = [](void* user, frost_stream* st) -> frost_status {
        const Job* j = static_cast<const Job*>(user);
        return j->e->record_batch(j->B, nullptr, st, false, 0);
    };
    for (int B : kBatchSizes) {
        if (B / 2 >= sessions()) break;  // a size is useful when more than B/2 sessions exist
        Job j{this, B};
        const frost_status s = frost_graph_capture(batch_graph_, batch_key(B), stream_, fn, &j);
        if (s != FROST_OK) return add_context(s, "engine: capture of the batched decode graph B=" + std::to_string(B));
        batch_sizes_.push_back(B);
    }
    return FROST_OK;
}

frost_status Engine::record_batch_ops(int B, const ops::OpObserver& observer) {
    if (std::find(batch_sizes_.begin(), batch_sizes_.end(), B) == batch_sizes_.end())
        return fail(FROST_ERR_INVALID_ARG, "record_batch_ops: B %d is not a captured batch size", B);
    if (last_rows_ != B)
        return fail(FROST_ERR_STATE, "record_batch_ops: run decode_batch with %d members first (last step had %d rows)",
                    B, last_rows_);
    int64_t pos = 0;
    for (int64_t p : host_pos_) pos = std::max(pos, p);
    FROST_TRY(record_batch(B, &observer, stream_, false, pos + 1));
    return frost_stream_sync(stream_);
}

frost_status Engine::batch_step_cost(int B, int64_t pos, ops::OpCost* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "batch_step_cost: out is null");
    if (B < 1 || B > kMaxBatch)
        return fail(FROST_ERR_INVALID_ARG, "batch_step_cost: B %d outside [1, %d]", B, kMaxBatch);
    if (B == 1) return step_cost(1, true, pos, out);
    *out = ops::OpCost{};
    const ops::OpObserver sum = [out](const ops::OpRecord& r) { out->add(r.cost); };
    return record_batch(B, &sum, stream_, true, std::max<int64_t>(1, pos + 1));
}

frost_status Engine::decode_batch(const int* members, int B, int32_t* next) {
    if (!members || !next || B < 1)
        return fail(FROST_ERR_INVALID_ARG, "decode_batch: needs B >= 1 sessions and a token array, got B=%d", B);
    for (int i = 0; i < B; ++i) {
        FROST_TRY(check_session(members[i]));
        FROST_TRY(check_no_slices(members[i], "decode_batch"));
        for (int j = 0; j < i; ++j)
            if (members[j] == members[i])
                return fail(FROST_ERR_INVALID_ARG, "decode_batch: session %d appears twice", members[i]);
        if (host_pos_[size_t(members[i])] + 1 > opts_.max_seq_len)
            return fail(FROST_ERR_OUT_OF_RANGE, "decode_batch: session %d would exceed max_seq_len %d", members[i],
                        opts_.max_seq_len);
    }
    // A member whose sampler processes its row (penalties, min_p, logit_bias), masks it or
    // records logprobs steps alone: the batched step samples each member from its cursor's
    // settings only (its per-session sampler buffers are not in the slot table).
    std::vector<int> plain, at;
    for (int i = 0; i < B; ++i) {
        const int m = members[i];
        if (sampling_[size_t(m)].processing() || sampling_[size_t(m)].top_logprobs >= 0 || mask_on_[size_t(m)]) {
            FROST_TRY(decode(m, next + i));
        } else {
            plain.push_back(m);
            at.push_back(i);
        }
    }
    // Groups of at most kMaxBatch; a group of one (or an engine without batched graphs) steps alone.
    const int P = int(plain.size());
    std::vector<int32_t> out(size_t(P), -1);
    for (int done = 0; done < P;) {
        const int n = std::min(P - done, batch_sizes_.empty() ? 1 : batch_sizes_.back());
        if (n == 1)
            FROST_TRY(decode(plain[size_t(done)], out.data() + done));
        else
            FROST_TRY(run_batch(plain.data() + done, n, out.data() + done));
        done += n;
    }
    for (int i = 0; i < P; ++i) next[at[size_t(i)]] = out[size_t(i)];
    return FROST_OK;
}

// Writes the member slots (padding rows -1) of the smallest captured size >= n, replays it and
// reads back the n sampled tokens; then the host mirrors advance as decode() advances them.
frost_status Engine::run_batch(const int* members, int n, int32_t* next) {
    int size = 0;
    for (int B : batch_sizes_)
        if (B >= n) {
            size = B;
            break;
        }
    if (size == 0) return fail(FROST_ERR_STATE, "decode_batch: no captured batch size holds %d members", n);
    FROST_TRY(frost_stream_sync(stream_));  // an earlier step may still read the staging slots
    int32_t* st = static_cast<int32_t*>(frost_buffer_ptr(batch_staging_));
    for (int r = 0; r < size; ++r) st[r] = r < n ? members[r] : -1;
    FROST_TRY(frost_buffer_copy(batch_slots_buf_, 0, batch_staging_, 0, sizeof(int32_t) * size_t(size), stream_));
    FROST_TRY(frost_graph_replay(batch_graph_, batch_key(size), stream_));
    FROST_TRY(frost_buffer_copy(batch_staging_, sizeof(int32_t) * kMaxBatch, batch_out_buf_, 0,
                                sizeof(int32_t) * size_t(n), stream_));
    FROST_TRY(frost_stream_sync(stream_));
    for (int r = 0; r < n; ++r) {
        const size_t s = size_t(members[r]);
        host_pos_[s] += 1;
        journal_[s].push_back(last_token_[s]);  // the step consumed it
        last_token_[s] = st[kMaxBatch + r];
        next[r] = last_token_[s];
    }
    last_rows_ = size;
    return FROST_OK;
}

}  // namespace frost::model
