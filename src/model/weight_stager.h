// Bulk host -> device upload of many weight pieces through a PAIR of pinned staging buffers: one
// is filled by parallel memcpys (the sources are usually mmap'd checkpoint pages, so the copies
// also fault the file in on several threads) while the other's async H2D copies run. The CUDA
// engine lays its fused weights out piece by piece and runs the whole plan once, so load time is
// bound by the file read, not by one thread's page faults and pageable copies in series.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "frost/exec.h"

namespace frost::model {

class WeightStager {
public:
    struct Options {
        size_t staging_bytes = size_t(128) << 20;  // size of EACH staging buffer
        int threads = 8;                           // memcpy threads per staging fill
    };

    WeightStager() = default;
    explicit WeightStager(const Options& o) : opt_(o) {}

    // Queues `bytes` from host memory `src` (kept valid until run() returns) to dst[dst_off..).
    void add(const void* src, size_t bytes, frost_buffer* dst, size_t dst_off);
    // Queues a host copy the stager owns (converted data); returns where to write it.
    void* add_owned(size_t bytes, frost_buffer* dst, size_t dst_off);
    // Uploads everything queued on `stream` and waits for it; the queue is empty afterwards.
    frost_status run(frost_ctx* ctx, frost_stream* stream);

    size_t queued_bytes() const { return queued_; }

private:
    struct Piece {
        const uint8_t* src;
        size_t bytes;
        frost_buffer* dst;
        size_t dst_off;
    };
    Options opt_;
    std::vector<Piece> pieces_;
    std::deque<std::vector<uint8_t>> owned_;
    size_t queued_ = 0;
};

}  // namespace frost::model
