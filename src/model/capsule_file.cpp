// Capsule files: crash-safe write (temp + write + fsync + rename + directory fsync) and
// fail-closed read (fixed header, trailer checksum, metadata, exact file size, then the payload
// with per-buffer checksums and zero gaps), all before any caller touches a live buffer. The
// restore path reads the payload pipelined through a small pinned staging ring (read_payload_into).
#include "model/capsule_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/error.h"
#include "util/fs.h"
#include "util/hash64.h"

namespace frost::model {
namespace {

constexpr size_t kWriteChunkBytes = size_t(8) << 20;  // one write() call
constexpr size_t kReadChunkBytes = size_t(8) << 20;   // one pread() job
constexpr int kReadThreads = 4;                       // preads in flight
constexpr int kPipelineReaders = 2;                   // pread threads of read_payload_into

bool all_zero(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (p[i]) return false;
    return true;
}

void put_u32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::string dir_of(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

// Each gated file operation: the fault gate first, then the call.
frost_status io_gate(const char* op, const std::string& path) {
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "capsule file %s: %s failed (injected)", path.c_str(), op);
    return FROST_OK;
}

frost_status gated_write(int fd, const void* src, size_t bytes, const std::string& path) {
    const uint8_t* p = static_cast<const uint8_t*>(src);
    while (bytes > 0) {
        const size_t n = std::min(bytes, kWriteChunkBytes);
        FROST_TRY(io_gate("write", path));
        std::string err;
        if (!util::write_full(fd, p, n, &err)) return fail(FROST_ERR_IO, "capsule file %s: %s", path.c_str(), err.c_str());
        p += n;
        bytes -= n;
    }
    return FROST_OK;
}

frost_status gated_read(int fd, void* dst, size_t bytes, uint64_t off, const std::string& path) {
    FROST_TRY(io_gate("read", path));
    std::string err;
    if (!util::pread_full(fd, dst, bytes, off, &err)) return fail(FROST_ERR_IO, "capsule file %s: %s", path.c_str(), err.c_str());
    return FROST_OK;
}

frost_status write_all(int fd, const std::string& path, const std::string& header, const CapsuleMeta& meta,
                       const uint8_t* payload) {
    const size_t H = header.size();
    const size_t S = capsule_payload_start(H);
    std::vector<uint8_t> head(S, 0);
    std::memcpy(head.data(), kCapsuleMagic, sizeof kCapsuleMagic);
    put_u32(head.data() + 8, kCapsuleFormatVersion);
    put_u32(head.data() + 12, 0);
    put_u64(head.data() + 16, H);
    std::memcpy(head.data() + kCapsuleFixedHeaderBytes, header.data(), H);
    put_u64(head.data() + kCapsuleFixedHeaderBytes + H, util::hash64(head.data(), kCapsuleFixedHeaderBytes + H));
    FROST_TRY(gated_write(fd, head.data(), head.size(), path));
    FROST_TRY(gated_write(fd, payload, meta.payload_bytes, path));
    FROST_TRY(io_gate("fsync", path));
    if (::fsync(fd) != 0) return fail(FROST_ERR_IO, "capsule file %s: fsync failed: %s", path.c_str(), std::strerror(errno));
    return FROST_OK;
}

std::atomic<uint64_t> g_temp_seq{0};

}  // namespace

size_t capsule_payload_start(uint64_t header_bytes) {
    const uint64_t end = kCapsuleFixedHeaderBytes + header_bytes + kCapsuleTrailerBytes;
    return size_t((end + kCapsulePageBytes - 1) / kCapsulePageBytes * kCapsulePageBytes);
}

void capsule_compute_checksums(CapsuleMeta* meta, const uint8_t* payload) {
    for (auto& p : meta->parts) p.checksum = util::hash64(payload + p.offset, p.bytes);
    meta->checksums_valid = true;
}

int capsule_verify_checksums(const CapsuleMeta& meta, const uint8_t* payload) {
    for (size_t i = 0; i < meta.parts.size(); ++i)
        if (util::hash64(payload + meta.parts[i].offset, meta.parts[i].bytes) != meta.parts[i].checksum) return int(i);
    return -1;
}

frost_status capsule_file_write(const std::string& path, const CapsuleMeta& meta, const void* payload) {
    if (path.empty() || (!payload && meta.payload_bytes))
        return fail(FROST_ERR_INVALID_ARG, "capsule_file_write: empty path or null payload");
    if (!meta.checksums_valid) return fail(FROST_ERR_INVALID_ARG, "capsule_file_write: checksums not computed");
    const std::string header = capsule_meta_to_json(meta).dump();
    const std::string tmp = path + kCapsuleTempMarker + std::to_string(::getpid()) + "." +
                            std::to_string(g_temp_seq.fetch_add(1));
    FROST_TRY(io_gate("open", tmp));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fail(FROST_ERR_IO, "capsule file %s: cannot create: %s", tmp.c_str(), std::strerror(errno));
    frost_status s = write_all(fd, tmp, header, meta, static_cast<const uint8_t*>(payload));
    if (::close(fd) != 0 && s == FROST_OK)
        s = fail(FROST_ERR_IO, "capsule file %s: close failed: %s", tmp.c_str(), std::strerror(errno));
    if (s == FROST_OK) s = io_gate("rename", path);
    if (s == FROST_OK && ::rename(tmp.c_str(), path.c_str()) != 0)
        s = fail(FROST_ERR_IO, "capsule file %s: rename failed: %s", path.c_str(), std::strerror(errno));
    if (s != FROST_OK) {
        ::unlink(tmp.c_str());  // cleanup is never fault-gated: a failed write leaves no temp file
        return s;
    }
    const std::string dir = dir_of(path);
    FROST_TRY(io_gate("directory fsync", dir));
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return fail(FROST_ERR_IO, "capsule dir %s: cannot open for fsync: %s", dir.c_str(), std::strerror(errno));
    const int rc = ::fsync(dfd);
    ::close(dfd);
    if (rc != 0) return fail(FROST_ERR_IO, "capsule dir %s: fsync failed: %s", dir.c_str(), std::strerror(errno));
    return FROST_OK;
}

size_t capsule_remove_temp_files(const std::string& dir) {
    std::vector<std::string> names;
    std::string err;
    if (!util::list_dir(dir, &names, &err)) return 0;
    size_t removed = 0;
    for (const auto& n : names)
        if (n.find(kCapsuleTempMarker) != std::string::npos && ::unlink(util::join_path(dir, n).c_str()) == 0)
            ++removed;
    return removed;
}

CapsuleFileReader::~CapsuleFileReader() {
    if (fd_ >= 0) ::close(fd_);
}

frost_status CapsuleFileReader::open(const std::string& path) {
    if (fd_ >= 0) return fail(FROST_ERR_STATE, "CapsuleFileReader: already open");
    path_ = path;
    FROST_TRY(io_gate("open", path));
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
        const bool missing = errno == ENOENT;
        return fail(missing ? FROST_ERR_NOT_FOUND : FROST_ERR_IO, "capsule file %s: cannot open: %s", path.c_str(),
                    std::strerror(errno));
    }
    struct stat st{};
    if (::fstat(fd_, &st) != 0) return fail(FROST_ERR_IO, "capsule file %s: stat failed", path.c_str());
    file_bytes_ = uint64_t(st.st_size);
    if (file_bytes_ < kCapsuleFixedHeaderBytes + kCapsuleTrailerBytes)
        return fail(FROST_ERR_CORRUPT, "capsule file %s: %llu bytes is too short for a capsule header", path.c_str(),
                    static_cast<unsigned long long>(file_bytes_));
    uint8_t fixed[kCapsuleFixedHeaderBytes];
    FROST_TRY(gated_read(fd_, fixed, sizeof fixed, 0, path));
    if (std::memcmp(fixed, kCapsuleMagic, sizeof kCapsuleMagic) != 0)
        return fail(FROST_ERR_CORRUPT, "capsule file %s: bad magic (not a frost capsule)", path.c_str());
    const uint32_t version = get_u32(fixed + 8);
    if (version != kCapsuleFormatVersion)
        return fail(FROST_ERR_INCOMPATIBLE, "capsule file %s: format version %u, this build reads version %u",
                    path.c_str(), version, kCapsuleFormatVersion);
    if (get_u32(fixed + 12) != 0) return fail(FROST_ERR_CORRUPT, "capsule file %s: unknown header flags", path.c_str());
    const uint64_t H = get_u64(fixed + 16);
    if (H == 0 || H > kCapsuleMaxHeaderBytes || H > file_bytes_ - kCapsuleFixedHeaderBytes - kCapsuleTrailerBytes)
        return fail(FROST_ERR_CORRUPT, "capsule file %s: header length %llu does not fit the file (%llu bytes)",
                    path.c_str(), static_cast<unsigned long long>(H), static_cast<unsigned long long>(file_bytes_));
    std::vector<uint8_t> head(kCapsuleFixedHeaderBytes + H + kCapsuleTrailerBytes);
    std::memcpy(head.data(), fixed, sizeof fixed);
    FROST_TRY(gated_read(fd_, head.data() + sizeof fixed, head.size() - sizeof fixed, sizeof fixed, path));
    const uint64_t want = get_u64(head.data() + kCapsuleFixedHeaderBytes + H);
    if (util::hash64(head.data(), kCapsuleFixedHeaderBytes + H) != want)
        return fail(FROST_ERR_CORRUPT, "capsule file %s: header checksum mismatch", path.c_str());
    nlohmann::json j = nlohmann::json::parse(head.begin() + kCapsuleFixedHeaderBytes,
                                             head.begin() + kCapsuleFixedHeaderBytes + H, nullptr, false);
    if (j.is_discarded()) return fail(FROST_ERR_CORRUPT, "capsule file %s: header is not valid JSON", path.c_str());
    frost_status s = capsule_meta_from_json(j, &meta_);
    if (s != FROST_OK) return add_context(s, "capsule file " + path);
    payload_start_ = capsule_payload_start(H);
    if (payload_start_ > file_bytes_ || file_bytes_ - payload_start_ != meta_.payload_bytes)
        return fail(FROST_ERR_CORRUPT, "capsule file %s: %llu bytes, the header describes %llu (truncated or extended)",
                    path.c_str(), static_cast<unsigned long long>(file_bytes_),
                    static_cast<unsigned long long>(payload_start_ + meta_.payload_bytes));
    // The padding after the trailer must be zero: every byte of a file is covered by a check.
    const size_t pad_from = head.size();
    std::vector<uint8_t> pad(payload_start_ - pad_from);
    if (!pad.empty()) FROST_TRY(gated_read(fd_, pad.data(), pad.size(), pad_from, path));
    for (uint8_t b : pad)
        if (b) return fail(FROST_ERR_CORRUPT, "capsule file %s: non-zero padding after the header", path.c_str());
    return FROST_OK;
}

frost_status CapsuleFileReader::read_payload(frost_ctx* ctx, frost_buffer** out) {
    if (fd_ < 0) return fail(FROST_ERR_STATE, "CapsuleFileReader: not open");
    const size_t n = std::max<size_t>(meta_.payload_bytes, 1);
    frost_buffer* buf = nullptr;
    frost_status s = frost_buffer_alloc(ctx, "capsule.file_staging", n, FROST_SPACE_HOST_PINNED, &buf);
    if (s != FROST_OK) return add_context(s, "capsule file " + path_ + ": pinned staging");
    uint8_t* dst = static_cast<uint8_t*>(frost_buffer_ptr(buf));
    // Large reads straight into pinned memory, several in flight; the first error wins.
    const size_t jobs = (meta_.payload_bytes + kReadChunkBytes - 1) / kReadChunkBytes;
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::vector<frost_status> status(jobs, FROST_OK);
    std::vector<std::string> errors(jobs);
    auto worker = [&]() {
        for (size_t k; !failed.load() && (k = next.fetch_add(1)) < jobs;) {
            const size_t off = k * kReadChunkBytes;
            const size_t len = std::min(kReadChunkBytes, meta_.payload_bytes - off);
            status[k] = gated_read(fd_, dst + off, len, payload_start_ + off, path_);
            if (status[k] != FROST_OK) {
                errors[k] = frost_last_error();
                failed = true;
            }
        }
    };
    std::vector<std::thread> pool;
    const int threads = int(std::min<size_t>(kReadThreads, jobs));
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    if (jobs) worker();
    for (auto& t : pool) t.join();
    for (size_t k = 0; k < jobs; ++k)
        if (status[k] != FROST_OK) {
            frost_buffer_free(buf);
            return fail(status[k], "%s", errors[k].c_str());
        }
    // Gaps between buffers must be zero so that every byte of the file is covered by a check.
    size_t at = 0;
    auto zero = [&](size_t from, size_t to) {
        for (size_t i = from; i < to; ++i)
            if (dst[i]) return false;
        return true;
    };
    for (const auto& p : meta_.parts) {
        if (!zero(at, p.offset)) {
            frost_buffer_free(buf);
            return fail(FROST_ERR_CORRUPT, "capsule file %s: non-zero padding before buffer %s", path_.c_str(), p.name.c_str());
        }
        at = p.offset + p.bytes;
    }
    if (!zero(at, meta_.payload_bytes)) {
        frost_buffer_free(buf);
        return fail(FROST_ERR_CORRUPT, "capsule file %s: non-zero padding after the last buffer", path_.c_str());
    }
    const int bad = capsule_verify_checksums(meta_, dst);
    if (bad >= 0) {
        frost_buffer_free(buf);
        return fail(FROST_ERR_CORRUPT, "capsule file %s: checksum mismatch in buffer %s", path_.c_str(),
                    meta_.parts[size_t(bad)].name.c_str());
    }
    *out = buf;
    return FROST_OK;
}

}  // namespace frost::model

namespace frost::model {

frost_status CapsuleStaging::alloc(frost_ctx* ctx, size_t chunk, int n_slots) {
    if (!empty()) return fail(FROST_ERR_STATE, "capsule staging: already allocated");
    if (chunk < kCapsulePageBytes || n_slots < 2)
        return fail(FROST_ERR_INVALID_ARG, "capsule staging: chunk %zu must be >= %zu and slots %d >= 2", chunk,
                    kCapsulePageBytes, n_slots);
    chunk_bytes = chunk;
    for (int i = 0; i < n_slots; ++i) {
        frost_buffer* b = nullptr;
        frost_event* ev = nullptr;
        frost_status s = frost_buffer_alloc(ctx, "capsule.read_staging", chunk, FROST_SPACE_HOST_PINNED, &b);
        if (s == FROST_OK) {
            slots.push_back(b);
            s = frost_event_create(ctx, &ev);
        }
        if (s == FROST_OK) done.push_back(ev);
        if (s != FROST_OK) {
            const std::string why = frost_last_error();
            release();
            return fail(s, "capsule read staging (%d x %zu pinned bytes): %s", n_slots, chunk, why.c_str());
        }
    }
    return FROST_OK;
}

void CapsuleStaging::release() {
    for (frost_buffer* b : slots) frost_buffer_free(b);  // syncs the ctx: no copy still reads it
    for (frost_event* e : done) frost_event_destroy(e);
    slots.clear();
    done.clear();
    chunk_bytes = 0;
}

namespace {

// The payload as an ordered cover of segments: each buffer (hashed) and each gap (must be zero).
struct Segment {
    size_t begin = 0, end = 0;
    int part = -1;  // index into meta.parts, -1 for a gap
};

std::vector<Segment> payload_segments(const CapsuleMeta& m) {
    std::vector<Segment> v;
    size_t at = 0;
    for (size_t i = 0; i < m.parts.size(); ++i) {
        const auto& p = m.parts[i];
        if (p.offset > at) v.push_back({at, p.offset, -1});
        v.push_back({p.offset, p.offset + p.bytes, int(i)});
        at = p.offset + p.bytes;
    }
    if (m.payload_bytes > at) v.push_back({at, m.payload_bytes, -1});
    return v;
}

// Verifies the payload chunk by chunk, in order: streams each buffer's bytes into its XXH64 and
// compares when the buffer ends; checks gaps are zero.
class ChunkVerifier {
public:
    ChunkVerifier(const CapsuleMeta& m, const std::string& path) : meta_(m), path_(path), segs_(payload_segments(m)) {}
    // `p` holds payload bytes [begin, end).
    frost_status feed(const uint8_t* p, size_t begin, size_t end) {
        while (seg_ < segs_.size()) {
            const Segment& g = segs_[seg_];
            if (g.begin >= end && g.end > g.begin) break;
            const size_t lo = std::max(g.begin, begin), hi = std::min(g.end, end);
            if (hi > lo) {
                if (g.part >= 0) hash_.update(p + (lo - begin), hi - lo);
                else if (!all_zero(p + (lo - begin), hi - lo)) return gap_error(g);
            }
            if (g.end > end) break;
            if (g.part >= 0) FROST_TRY(finish_part(g.part));
            ++seg_;
        }
        return FROST_OK;
    }
    // Zero-length buffers at the very end (an empty payload) are checked here.
    frost_status finish() { return feed(nullptr, meta_.payload_bytes, meta_.payload_bytes); }

private:
    frost_status finish_part(int i) {
        const auto& part = meta_.parts[size_t(i)];
        const bool ok = hash_.digest() == part.checksum;
        hash_ = util::Hash64();
        if (!ok)
            return fail(FROST_ERR_CORRUPT, "capsule file %s: checksum mismatch in buffer %s", path_.c_str(),
                        part.name.c_str());
        return FROST_OK;
    }
    frost_status gap_error(const Segment& g) const {
        if (g.end == meta_.payload_bytes && g.begin > 0)
            return fail(FROST_ERR_CORRUPT, "capsule file %s: non-zero padding after the last buffer", path_.c_str());
        const size_t next = seg_ + 1 < segs_.size() ? seg_ + 1 : seg_;
        const int part = segs_[next].part;
        return fail(FROST_ERR_CORRUPT, "capsule file %s: non-zero padding before buffer %s", path_.c_str(),
                    part >= 0 ? meta_.parts[size_t(part)].name.c_str() : "?");
    }
    const CapsuleMeta& meta_;
    const std::string& path_;
    std::vector<Segment> segs_;
    size_t seg_ = 0;
    util::Hash64 hash_;
};

}  // namespace

frost_status CapsuleFileReader::read_payload_into(frost_buffer* dst, CapsuleStaging& staging, frost_stream* stream) {
    if (fd_ < 0) return fail(FROST_ERR_STATE, "CapsuleFileReader: not open");
    if (!stream || staging.empty()) return fail(FROST_ERR_INVALID_ARG, "read_payload_into: null stream or staging");
    if (dst && frost_buffer_bytes(dst) < meta_.payload_bytes)
        return fail(FROST_ERR_OUT_OF_RANGE, "read_payload_into: destination holds %zu bytes, the payload %zu",
                    frost_buffer_bytes(dst), meta_.payload_bytes);
    const size_t C = staging.chunk_bytes;
    const size_t slots = staging.slots.size();
    const size_t K = (meta_.payload_bytes + C - 1) / C;
    // A hint only: the kernel may read ahead further for one long sequential scan.
    (void)::posix_fadvise(fd_, off_t(payload_start_), off_t(meta_.payload_bytes), POSIX_FADV_SEQUENTIAL);

    enum : uint8_t { kPending = 0, kRead = 1, kFailed = 2 };
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint8_t> state(K, kPending);
    std::vector<frost_status> status(K, FROST_OK);
    std::vector<std::string> errors(K);
    size_t released = 0;  // chunks [0, released) have their copy out enqueued and event recorded
    bool stop = false;
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    auto reader = [&] {
        for (;;) {
            if (failed) return;
            const size_t k = next.fetch_add(1);
            if (k >= K) return;
            const size_t slot = k % slots;
            frost_status s = FROST_OK;
            if (k >= slots) {  // the slot last held chunk k - slots: wait until its copy is enqueued, then done
                std::unique_lock<std::mutex> lock(mu);
                cv.wait(lock, [&] { return stop || released > k - slots; });
                if (stop) return;
                lock.unlock();
                s = frost_event_sync(staging.done[slot]);
            }
            const size_t off = k * C, len = std::min(C, meta_.payload_bytes - off);
            if (s == FROST_OK)
                s = gated_read(fd_, frost_buffer_ptr(staging.slots[slot]), len, payload_start_ + off, path_);
            std::lock_guard<std::mutex> lock(mu);
            state[k] = s == FROST_OK ? kRead : kFailed;
            if (s != FROST_OK) {
                status[k] = s;
                errors[k] = frost_last_error();
                failed = true;
            }
            cv.notify_all();
            if (s != FROST_OK) return;
        }
    };
    std::vector<std::thread> pool;
    const size_t readers = std::min<size_t>(kPipelineReaders, K);
    frost_status s = FROST_OK;
    try {
        for (size_t t = 0; t < readers; ++t) pool.emplace_back(reader);
    } catch (const std::exception&) {
        s = fail(FROST_ERR_OUT_OF_MEMORY, "capsule file %s: cannot start a reader thread", path_.c_str());
    }
    ChunkVerifier verify(meta_, path_);
    for (size_t k = 0; s == FROST_OK && k < K; ++k) {
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return state[k] != kPending; });
            if (state[k] == kFailed) {
                s = fail(status[k], "%s", errors[k].c_str());
                break;
            }
        }
        const size_t slot = k % slots, off = k * C, len = std::min(C, meta_.payload_bytes - off);
        s = verify.feed(static_cast<const uint8_t*>(frost_buffer_ptr(staging.slots[slot])), off, off + len);
        if (s == FROST_OK && dst) s = frost_buffer_copy(dst, off, staging.slots[slot], 0, len, stream);
        if (s == FROST_OK && dst) s = frost_event_record(staging.done[slot], stream);
        std::lock_guard<std::mutex> lock(mu);
        released = k + 1;
        cv.notify_all();
    }
    {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
        failed = failed || s != FROST_OK;
        cv.notify_all();
    }
    for (auto& t : pool) t.join();
    if (s == FROST_OK) s = verify.finish();
    // Drain the copies out of the staging slots (also on failure: the slots are reused next time
    // and the destination may be freed by the caller right after).
    const frost_status sync = frost_stream_sync(stream);
    return s != FROST_OK ? s : sync;
}

}  // namespace frost::model
