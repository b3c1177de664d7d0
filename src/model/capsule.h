// Execution-state capsules (design/capsules.md): a session's `state` + `cursor` buffers at a
// committed token boundary, frozen as bytes on a tier (device, pinned host, disk file) and
// restored, forked or rolled back by memory copy into live sessions, never by recomputing the prefix.
// CapsuleManager is the mechanism for one engine: the verbs, tier moves and validation. Placement
// policy (budgets, LRU, pins, TTLs) belongs to the serving layer's store, not here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/buffers.h"
#include "model/engine.h"

namespace frost::model {

// Version of the state semantics a capsule depends on (buffer set, cursor layout, kernels' state
// format). Bump it whenever the engine's state buffers change meaning: old capsules are refused.
// 2: every part records its true dtype from the state layout (ABI 1 wrote "f32" for all parts,
// wrong for the bf16 KV / conv state of CUDA engines): ABI 1 capsules are refused, saying so.
constexpr uint32_t kCapsuleEngineAbi = 2;
// The alignment unit A this build guarantees: restore at a multiple of A + append is bitwise equal
// to a cold prefill (tests/model/test_capsule_alignment.cpp proves it for A = kGdnChunk).
constexpr int kCapsuleAlignment = kGdnChunk;
// Each buffer's bytes start on this boundary in the storage and in the file (O_DIRECT-able reads).
constexpr size_t kCapsulePageBytes = 4096;

enum class CapsuleTier : uint8_t { Device = 0, Host = 1, Disk = 2 };
const char* capsule_tier_name(CapsuleTier t);  // "device", "host", "disk"
bool parse_capsule_tier(const std::string& s, CapsuleTier* out);

// Everything a capsule must match to be restored into a running engine (its fingerprint).
struct Deployment {
    std::string model_digest;   // model_fingerprint(): SHA-256 over config.json + weight files
    std::string dtype;          // the engine's activation dtype ("f32" CPU, "bf16" CUDA)
    uint32_t engine_abi = 0;    // kCapsuleEngineAbi
    int alignment = 0;          // A
    int max_seq_len = 0;        // recorded; KV is stored per position, so any engine whose
                                // max_seq_len holds the capsule's boundary can take it
    std::string backend;        // "cpu" | "cuda"
    std::string layout_digest;  // SHA-256 over the state buffer table (names, roles, sizes)
    // Engine::numerics(): the options that change the state's bits for the same weights (RoPE
    // frequencies; on CUDA with a quantized checkpoint: weights kept or dequantized, the GDN
    // in_proj binding, W8A8 prefill / decode). Restore + append equals a cold prefill only under
    // the same numerics. Empty in capsules written before the field: matched as before.
    std::string numerics;
};
// The deployment of a running engine. `model_digest` is model_fingerprint() of its folder (or
// any stable identity of the weights for engines built from memory).
Deployment deployment_of(const Engine& e, const std::string& model_digest);
// Empty when a capsule of deployment `cap` may be restored into `running`; else names the first
// mismatching field with both values.
std::string deployment_mismatch(const Deployment& cap, const Deployment& running);

enum class CapsulePartKind : uint8_t { Cursor = 0, Kv = 1, Recurrent = 2, Conv = 3, Other = 4 };
const char* capsule_part_kind_name(CapsulePartKind k);

// One state buffer inside a capsule, restricted to its valid range at the stored boundary.
struct CapsulePart {
    std::string name;               // without the session prefix: "cursor", "layer3.k_cache"
    BufferRole role = BufferRole::State;
    CapsulePartKind kind = CapsulePartKind::Other;
    int layer = -1;
    std::string dtype;              // the state layout's dtype: "f32", "bf16", or "u8" (the cursor record)
    std::vector<int64_t> shape;     // e.g. KV [P, Hkv, d]; recurrent [Hv, dk, dv]; conv [C, K-1]
    size_t bytes_per_position = 0;  // > 0 for KV caches
    size_t offset = 0;              // from the payload start; a multiple of kCapsulePageBytes
    size_t bytes = 0;               // valid bytes at the stored boundary
    uint64_t checksum = 0;          // XXH64 (util/hash64.h) of the bytes
};

struct CapsuleBytes {
    uint64_t cursor = 0, kv = 0, recurrent = 0, conv = 0, other = 0;
    uint64_t total() const { return cursor + kv + recurrent + conv + other; }
};

// Metadata: what the header of a capsule file holds, and what introspection reports.
struct CapsuleMeta {
    int64_t requested_boundary = 0;  // P the caller asked for
    int64_t stored_boundary = 0;     // Pa = floor(P / A) * A: where the state was frozen
    int alignment = 0;               // A
    std::vector<int32_t> ids;        // token ids [0, Pa)
    std::vector<int32_t> remainder;  // token ids [Pa, P): re-prefilled by every restore
    std::string prefix_digest;       // capsule_prefix_digest(ids ++ remainder)
    Deployment deployment;
    int64_t created_unix_ms = 0;
    std::vector<CapsulePart> parts;
    size_t payload_bytes = 0;        // storage size: parts at 4 KiB-aligned offsets
    bool checksums_valid = false;    // false only for a device-tier capsule on a GPU backend
                                     // (computed when its bytes reach the host)
    CapsuleBytes bytes() const;
};

// SHA-256 hex over kCapsulePrefixSalt followed by the ids as int32 little-endian.
constexpr const char* kCapsulePrefixSalt = "frost-capsule-prefix-v1";
std::string capsule_prefix_digest(const std::vector<int32_t>& ids);

using CapsuleId = uint64_t;  // 0 is never a valid id

// Introspection snapshot of one capsule.
struct CapsuleInfo {
    CapsuleId id = 0;
    CapsuleTier tier = CapsuleTier::Device;
    std::string path;  // disk tier: the file
    CapsuleMeta meta;
};

// Disk-tier restores stream the file through a ring of pinned staging slots (see
// CapsuleFileReader::read_payload_into); these size it.
constexpr size_t kCapsuleDiskChunkBytes = size_t(16) << 20;  // one pread / one H2D copy
constexpr int kCapsuleDiskStagingSlots = 4;                  // chunks in flight (read, hash, DMA)

struct CapsuleManagerOptions {
    std::string disk_dir;  // where disk-tier capsules go (snapshot/move to Disk without a path);
                           // leftover temp files there are removed when the manager starts
    size_t disk_chunk_bytes = kCapsuleDiskChunkBytes;  // >= kCapsulePageBytes; any size (tests use odd ones)
    int disk_staging_slots = kCapsuleDiskStagingSlots;  // >= 2
};

struct CapsuleStaging;     // capsule_file.h
class CapsuleFileReader;   // capsule_file.h

class CapsuleManager {
public:
    // `model_digest`: see Deployment. The engine must outlive the manager.
    CapsuleManager(Engine& engine, const std::string& model_digest, const CapsuleManagerOptions& opts = {});
    ~CapsuleManager();  // releases every capsule (owned disk files included)
    CapsuleManager(const CapsuleManager&) = delete;
    CapsuleManager& operator=(const CapsuleManager&) = delete;

    // Same, with model_digest = model_fingerprint(model_dir) (cached beside the model).
    static frost_status for_model_dir(Engine& engine, const std::string& model_dir,
                                      const CapsuleManagerOptions& opts, std::unique_ptr<CapsuleManager>* out);

    const Deployment& deployment() const { return deployment_; }
    Engine& engine() { return engine_; }

    // Freezes the session at its current position P, which must be a multiple of A (else
    // FROST_ERR_STATE naming floor(P/A)*A: use prefill_and_snapshot). Disk tier: the file is
    // `path` or, when empty, a new file in disk_dir. The session continues unchanged.
    frost_status snapshot(int session, CapsuleTier tier, CapsuleId* out, const std::string& path = "");
    // Prefills ids[0..n) from the session's current position p0 so that P = p0 + n: first up to
    // Pa = floor(P/A)*A, snapshots there (requested P, remainder [Pa, P) in the metadata), then the
    // remainder. Chunk-invariant kernels make this equal to prefill(ids) bitwise. *next (may be
    // null) is the token sampled after P. FROST_ERR_STATE when Pa < p0. When the freeze itself
    // fails (FROST_ERR_OUT_OF_MEMORY: no room on the tier), the session stays at Pa, and *next is
    // already set when Pa == P, so a caller can finish the prefill without a capsule.
    frost_status prefill_and_snapshot(int session, const int32_t* ids, size_t n, CapsuleTier tier,
                                      CapsuleId* out, int32_t* next, const std::string& path = "");
    // Copies the capsule into the session (promoting from disk through pinned memory), adopts its
    // position and journal, and re-prefills the remainder ids. No graph is captured and no prefix
    // token is recomputed. *next (may be null): the token sampled after the requested boundary.
    // On any validation error (unknown id, incompatible, corrupt, out of memory) the live session
    // is untouched. If a copy into the live buffers fails midway the session is reset to empty
    // (fail closed) and the error says so.
    frost_status restore(CapsuleId id, int session, int32_t* next);
    // restore() followed by appending suffix[0..n), with the remainder and the suffix prefilled as
    // ONE run from the stored (aligned) boundary: the chunks then fall where a cold prefill of
    // ids ++ remainder ++ suffix puts them, so the logits are bitwise equal to the cold path even
    // when the requested boundary was not aligned (restore() + a separate prefill splits at P).
    // `sampling` (may be null: keep the capsule's) is applied after the copy, before that prefill.
    frost_status restore_append(CapsuleId id, int session, const int32_t* suffix, size_t n, int32_t* next,
                                const SamplingConfig* sampling = nullptr);
    // restore() that leaves the remainder to the caller: the session stands at the stored
    // (aligned) boundary with the capsule's ids before it, and the caller prefills the remainder
    // with whatever follows it. A caller that cuts its prompt only on the alignment grid then gets
    // a cold prefill's bits (the server does); restore() + a prefill cuts at the requested boundary.
    // *at: the session's position (the stored boundary).
    frost_status restore_stored(CapsuleId id, int session, int64_t* at);
    // restore() into each of `sessions` (distinct); the capsule is validated (and read) once, for
    // all targets, before any is touched. next->at(i) is the token sampled in sessions[i]. A copy
    // failure midway leaves the sessions before it restored and resets the failing one.
    frost_status fork(CapsuleId id, const std::vector<int>& sessions, std::vector<int32_t>* next);
    // restore() of an earlier boundary of the same session: the capsule's tokens must be a
    // prefix of the session's journal (else FROST_ERR_INVALID_ARG, nothing touched).
    frost_status rollback(int session, CapsuleId id, int32_t* next);
    // Drops the capsule: frees its storage and deletes its disk-tier file if the manager wrote it
    // (snapshot or move to Disk; never a file imported by load() or exported by save()).
    // FROST_ERR_NOT_FOUND for an unknown id.
    frost_status release(CapsuleId id);

    // Promotion / demotion. On failure the capsule stays where it was, intact.
    frost_status move(CapsuleId id, CapsuleTier tier, const std::string& path = "");
    // Writes the capsule file (crash-safe) from any tier; the capsule keeps its tier.
    frost_status save(CapsuleId id, const std::string& path);
    // Validates FILE against this deployment (every length, offset and checksum) and imports it
    // on `tier` (Disk: the capsule refers to the file, which the manager does not own).
    frost_status load(const std::string& path, CapsuleTier tier, CapsuleId* out);

    frost_status info(CapsuleId id, CapsuleInfo* out) const;
    std::vector<CapsuleId> ids() const;
    size_t count() const;
    // Copies the capsule's payload to host memory (out resized to payload_bytes), any tier.
    frost_status read_payload(CapsuleId id, std::vector<uint8_t>* out);
    // Frees the pinned staging ring that disk-tier restores allocate on first use and keep
    // (disk_staging_slots x disk_chunk_bytes). A failed restore never leaves a ring it allocated.
    void trim_staging();
    bool has_staging() const;

private:
    struct Stored;
    frost_status lookup(CapsuleId id, Stored** out);
    frost_status snapshot_locked(int session, int64_t requested, const std::vector<int32_t>& remainder,
                                 CapsuleTier tier, const std::string& path, CapsuleId* out);
    frost_status check_layout(const CapsuleMeta& meta, int session) const;
    frost_status stage_to_host(Stored& c, frost_buffer** host, bool* owned);
    frost_status stage_disk_to_device(Stored& c, int session, frost_buffer** scratch);
    // r.read_payload_into(dst) through staging_, allocating the ring on first use.
    frost_status read_through_staging(CapsuleFileReader& r, frost_buffer* dst);
    frost_status read_file_to_device(CapsuleFileReader& r, frost_buffer** out);
    // with_remainder false: the state at the stored boundary only (restore_stored).
    frost_status restore_into(const CapsuleMeta& meta, frost_buffer* src, int session,
                              const std::vector<int32_t>& suffix, const SamplingConfig* sampling, int32_t* next,
                              bool with_remainder = true);
    frost_status restore_many(Stored& c, const std::vector<int>& sessions, const std::vector<int32_t>& suffix,
                              const SamplingConfig* sampling, std::vector<int32_t>* next, bool with_remainder = true);
    frost_status write_file(const CapsuleMeta& meta, frost_buffer* host, const std::string& path);
    std::string default_path(CapsuleId id) const;
    void free_storage(Stored& c);

    Engine& engine_;
    CapsuleManagerOptions opts_;
    Deployment deployment_;
    mutable std::mutex mu_;  // one verb at a time: a release never races a restore from it
    std::map<CapsuleId, std::unique_ptr<Stored>> capsules_;
    std::unique_ptr<CapsuleStaging> staging_;  // disk-read ring, allocated on first disk restore
    CapsuleId next_id_ = 1;
};

}  // namespace frost::model
