// WeightStager: double-buffered pinned staging with parallel fills (see weight_stager.h).
#include "model/weight_stager.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "exec/error.h"

namespace frost::model {

void WeightStager::add(const void* src, size_t bytes, frost_buffer* dst, size_t dst_off) {
    if (bytes == 0) return;
    pieces_.push_back({static_cast<const uint8_t*>(src), bytes, dst, dst_off});
    queued_ += bytes;
}

void* WeightStager::add_owned(size_t bytes, frost_buffer* dst, size_t dst_off) {
    owned_.emplace_back(bytes);
    add(owned_.back().data(), bytes, dst, dst_off);
    return owned_.back().data();
}

namespace {

// One staging fill: byte ranges of pieces, packed back to back from offset 0.
struct Span {
    const uint8_t* src;
    size_t bytes;
    frost_buffer* dst;
    size_t dst_off;
    size_t staging_off;
};

// Copies every span of a fill into `staging` on up to `threads` threads, in equal byte slices.
void fill(const std::vector<Span>& spans, size_t total, uint8_t* staging, int threads) {
    const size_t min_slice = size_t(4) << 20;  // below this a thread costs more than it saves
    const int n = static_cast<int>(std::max<size_t>(1, std::min<size_t>(threads, total / min_slice)));
    auto work = [&](int t) {
        const size_t lo = total * t / n, hi = total * (t + 1) / n;
        for (const Span& s : spans) {
            const size_t a = std::max(lo, s.staging_off), b = std::min(hi, s.staging_off + s.bytes);
            if (a < b) std::memcpy(staging + a, s.src + (a - s.staging_off), b - a);
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < n; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
}

}  // namespace

frost_status WeightStager::run(frost_ctx* ctx, frost_stream* stream) {
    const size_t cap = std::max<size_t>(opt_.staging_bytes, 1);
    frost_buffer* staging[2] = {nullptr, nullptr};
    frost_event* done[2] = {nullptr, nullptr};
    bool used[2] = {false, false};
    frost_status s = FROST_OK;
    auto cleanup = [&] {
        if (stream) frost_stream_sync(stream);
        for (int i = 0; i < 2; ++i) {
            frost_event_destroy(done[i]);
            frost_buffer_free(staging[i]);
        }
    };
    const size_t staging_size = std::min(cap, std::max<size_t>(queued_, 1));
    for (int i = 0; i < 2 && s == FROST_OK; ++i) {
        s = frost_buffer_alloc(ctx, i ? "weight_staging_b" : "weight_staging_a", staging_size,
                               FROST_SPACE_HOST_PINNED, &staging[i]);
        if (s == FROST_OK) s = frost_event_create(ctx, &done[i]);
    }
    size_t piece = 0, piece_off = 0;
    int slot = 0;
    while (s == FROST_OK && piece < pieces_.size()) {
        // The copies that read this slot last time must be finished before it is refilled.
        if (used[slot]) s = frost_event_sync(done[slot]);
        if (s != FROST_OK) break;
        std::vector<Span> spans;
        size_t total = 0;
        while (piece < pieces_.size() && total < staging_size) {
            const Piece& p = pieces_[piece];
            const size_t take = std::min(p.bytes - piece_off, staging_size - total);
            spans.push_back({p.src + piece_off, take, p.dst, p.dst_off + piece_off, total});
            total += take;
            piece_off += take;
            if (piece_off == p.bytes) {
                ++piece;
                piece_off = 0;
            }
        }
        uint8_t* base = static_cast<uint8_t*>(frost_buffer_ptr(staging[slot]));
        fill(spans, total, base, opt_.threads);
        for (const Span& sp : spans) {
            s = frost_buffer_copy(sp.dst, sp.dst_off, staging[slot], sp.staging_off, sp.bytes, stream);
            if (s != FROST_OK) break;
        }
        if (s == FROST_OK) s = frost_event_record(done[slot], stream);
        used[slot] = true;
        slot ^= 1;
    }
    if (s == FROST_OK) s = frost_stream_sync(stream);
    const std::string cause = s == FROST_OK ? std::string() : last_error();
    cleanup();
    pieces_.clear();
    owned_.clear();
    queued_ = 0;
    if (s != FROST_OK) return fail(s, "weight upload: %s", cause.c_str());
    return FROST_OK;
}

}  // namespace frost::model
