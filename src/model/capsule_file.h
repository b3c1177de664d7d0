// The capsule file format (design/capsules.md "Capsule file format"), crash-safe writing and
// fail-closed reading. Layout, all integers little-endian:
//   [0, 8)    magic "FROSTCAP"
//   [8, 12)   u32 format version (kCapsuleFormatVersion)
//   [12, 16)  u32 flags (0)
//   [16, 24)  u64 header length H (bytes of JSON metadata)
//   [24, 24+H)        JSON metadata (capsule_meta_to_json)
//   [24+H, 32+H)      u64 trailer: XXH64 of bytes [0, 24+H) (the header checksum)
//   zero padding up to the payload start S = round_up(32 + H, 4096)
//   [S, S + payload_bytes)  buffers, each at S + part.offset (4 KiB aligned), zero gaps between
// The file ends exactly at S + payload_bytes; any other size is refused as corrupt.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "model/capsule.h"

namespace frost::model {

constexpr char kCapsuleMagic[8] = {'F', 'R', 'O', 'S', 'T', 'C', 'A', 'P'};
constexpr uint32_t kCapsuleFormatVersion = 1;
constexpr size_t kCapsuleFixedHeaderBytes = 24;
constexpr size_t kCapsuleTrailerBytes = 8;
constexpr uint64_t kCapsuleMaxHeaderBytes = uint64_t(256) << 20;  // sanity bound on H
constexpr const char* kCapsuleTempMarker = ".frost-tmp.";      // in temp file names

nlohmann::json capsule_meta_to_json(const CapsuleMeta& meta);
// Parses and checks the metadata's internal consistency (types, boundary vs ids, alignment, the
// prefix digest, part offsets inside the payload and not overlapping). FROST_ERR_CORRUPT on any
// problem, FROST_ERR_INCOMPATIBLE for a wrong format name.
frost_status capsule_meta_from_json(const nlohmann::json& j, CapsuleMeta* out);

// Writes meta + payload ([meta.payload_bytes] host bytes) to `path`: temp file in the same
// directory, write, fsync, rename, fsync the directory. Every write/fsync/rename calls
// frost_fault_hit(FROST_FAULT_IO) first. On failure the temp file is removed and any previous file
// at `path` is intact (a failed directory fsync after the rename is reported, the new file complete).
frost_status capsule_file_write(const std::string& path, const CapsuleMeta& meta, const void* payload);

// A ring of host-pinned staging slots for pipelined payload reads, with one event per slot that
// marks when the slot's last copy out has completed (so a pread never overwrites bytes a DMA is
// still reading). Owned by a CapsuleManager and kept between restores: pinning is slow (the
// driver maps and zeroes every page), so it is paid once, not per restore.
struct CapsuleStaging {
    std::vector<frost_buffer*> slots;  // host-pinned, [chunk_bytes] each
    std::vector<frost_event*> done;    // done[i]: the last copy out of slots[i] has completed
    size_t chunk_bytes = 0;

    CapsuleStaging() = default;
    ~CapsuleStaging() { release(); }
    CapsuleStaging(const CapsuleStaging&) = delete;
    CapsuleStaging& operator=(const CapsuleStaging&) = delete;

    bool empty() const { return slots.empty(); }
    // All or nothing: on failure nothing stays allocated. chunk_bytes >= kCapsulePageBytes, slots >= 2.
    frost_status alloc(frost_ctx* ctx, size_t chunk_bytes, int n_slots);
    void release();  // frees every slot and event (after the ctx has drained their copies)
};

// Reads a capsule file in two steps over one open descriptor: open() validates the fixed header,
// the trailer checksum, the metadata and the file size; read_payload() then reads the payload with
// large parallel preads into a pinned buffer and verifies every checksum and the zero gaps.
// read_payload_into() is the pipelined form used by restore (see there).
class CapsuleFileReader {
public:
    CapsuleFileReader() = default;
    ~CapsuleFileReader();
    CapsuleFileReader(const CapsuleFileReader&) = delete;
    CapsuleFileReader& operator=(const CapsuleFileReader&) = delete;

    frost_status open(const std::string& path);
    const CapsuleMeta& meta() const { return meta_; }
    uint64_t file_bytes() const { return file_bytes_; }
    // Allocates a host-pinned buffer on ctx (via frost_buffer_alloc) and fills it; on any failure
    // the buffer is freed and *out untouched.
    frost_status read_payload(frost_ctx* ctx, frost_buffer** out);
    // Pipelined read of the payload into dst[0, payload_bytes) (any space; a device buffer for
    // restore): reader threads pread chunk k into staging slot k % slots (large sequential reads,
    // waiting on the slot's event first) while this thread verifies chunk k on the staging copy
    // (per-buffer XXH64, streamed across chunks in order, and the zero gaps) and then enqueues its
    // copy slot -> dst on `stream`. Hashing chunk k overlaps the pread of k+1.. and the DMA of
    // k-1, so the read rate, not the hash or the copy, sets the time. Returns after the stream has
    // drained every copy and every check passed. On failure dst holds partial bytes and must not be
    // used (the caller keeps live state untouched); every pread passes frost_fault_hit(FROST_FAULT_IO).
    // dst may be null: verify the payload only (import of a file onto the disk tier).
    frost_status read_payload_into(frost_buffer* dst, CapsuleStaging& staging, frost_stream* stream);

private:
    std::string path_;
    int fd_ = -1;
    uint64_t file_bytes_ = 0;
    uint64_t payload_start_ = 0;
    CapsuleMeta meta_;
};

// Checksums every part of a host payload into meta->parts[i].checksum and sets checksums_valid.
void capsule_compute_checksums(CapsuleMeta* meta, const uint8_t* payload);
// First part whose checksum does not match the payload, or -1.
int capsule_verify_checksums(const CapsuleMeta& meta, const uint8_t* payload);

// Removes leftover temp files (from a crash mid-write) in `dir`; returns how many were removed.
size_t capsule_remove_temp_files(const std::string& dir);

size_t capsule_payload_start(uint64_t header_bytes);  // S for a header of H bytes

}  // namespace frost::model
