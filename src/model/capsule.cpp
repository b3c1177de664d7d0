// CapsuleManager: the capsule verbs over one engine. The buffer set comes from
// Engine::state_buffers (role State + Cursor), so completeness follows the engine's declaration.
// Every verb validates first and touches live buffers last; copies run on the engine's stream.
#include "model/capsule.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "exec/error.h"
#include "model/capsule_file.h"
#include "model/fingerprint.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace frost::model {
namespace {

// "s3.layer1.k_cache" -> "layer1.k_cache": capsules are independent of the session slot.
std::string strip_session(const std::string& name) {
    const size_t dot = name.find('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

// Kind, dtype and shape of a part come from the state layout the engine allocated by
// (NamedBuffer fields), never from the buffer's name.
CapsulePartKind kind_of(const NamedBuffer& b) {
    switch (b.kind) {
        case StateKind::Cursor: return CapsulePartKind::Cursor;
        case StateKind::Kv: return CapsulePartKind::Kv;
        case StateKind::Recurrent: return CapsulePartKind::Recurrent;
        case StateKind::Conv: return CapsulePartKind::Conv;
        case StateKind::None: break;
    }
    return CapsulePartKind::Other;
}

// The declared shape, a KV buffer's positions cut to the stored boundary P.
std::vector<int64_t> shape_of(const NamedBuffer& b, int64_t P) {
    std::vector<int64_t> s = b.shape;
    if (b.kind == StateKind::Kv && !s.empty()) s[0] = P;
    if (s.empty()) s.push_back(int64_t(b.buf ? frost_buffer_bytes(b.buf) : 0));
    return s;
}

// Sets the bytes between and after the parts of a host payload to zero.
void zero_gaps(const CapsuleMeta& m, uint8_t* payload) {
    size_t at = 0;
    for (const auto& p : m.parts) {
        if (p.offset > at) std::memset(payload + at, 0, p.offset - at);
        at = p.offset + p.bytes;
    }
    if (m.payload_bytes > at) std::memset(payload + at, 0, m.payload_bytes - at);
}

size_t round_page(size_t n) { return (n + kCapsulePageBytes - 1) / kCapsulePageBytes * kCapsulePageBytes; }

int64_t now_unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Host pointer of a buffer's bytes, or null when they live in GPU memory.
const uint8_t* host_view(const frost_buffer* b) {
    const bool gpu = frost_buffer_space(b) == FROST_SPACE_DEVICE && frost_ctx_backend(frost_buffer_ctx(b)) != FROST_BACKEND_CPU;
    return gpu ? nullptr : static_cast<const uint8_t*>(frost_buffer_ptr(b));
}

}  // namespace

struct CapsuleManager::Stored {
    CapsuleTier tier = CapsuleTier::Device;
    CapsuleMeta meta;
    frost_buffer* storage = nullptr;  // [payload_bytes]: device (Device tier) or pinned (Host tier)
    std::string path;                 // Disk tier: the file
    bool owns_file = false;           // the manager wrote the file and deletes it on release
    bool layout_checked = false;      // check_layout passed once (meta and engine layout are fixed)
};

const char* capsule_tier_name(CapsuleTier t) {
    switch (t) {
        case CapsuleTier::Device: return "device";
        case CapsuleTier::Host: return "host";
        default: return "disk";
    }
}

bool parse_capsule_tier(const std::string& s, CapsuleTier* out) {
    for (CapsuleTier t : {CapsuleTier::Device, CapsuleTier::Host, CapsuleTier::Disk})
        if (s == capsule_tier_name(t)) {
            *out = t;
            return true;
        }
    return false;
}

Deployment deployment_of(const Engine& e, const std::string& model_digest) {
    Deployment d;
    d.model_digest = model_digest;
    d.dtype = ops::dtype_name(e.backend().act_dtype());
    d.engine_abi = kCapsuleEngineAbi;
    d.alignment = kCapsuleAlignment;
    d.max_seq_len = e.options().max_seq_len;
    d.backend = e.options().backend == FROST_BACKEND_CUDA ? "cuda" : "cpu";
    // Per buffer: name, role, and its size law (bytes per position for KV, fixed bytes otherwise),
    // so max_seq_len does not enter the digest.
    std::string table;
    for (const auto& b : e.state_buffers(0)) {
        const size_t fixed = b.bytes_per_position ? 0 : frost_buffer_bytes(b.buf);
        table += strip_session(b.name) + "|" + buffer_role_name(b.role) + "|" + std::to_string(b.bytes_per_position) +
                 "|" + std::to_string(fixed) + "|" + ops::dtype_name(b.dtype) + "\n";
    }
    d.layout_digest = util::sha256_hex(table.data(), table.size());
    d.numerics = e.numerics();
    return d;
}

std::string deployment_mismatch(const Deployment& cap, const Deployment& run) {
    auto diff = [](const char* f, const std::string& a, const std::string& b) {
        return std::string(f) + " differs (capsule " + a + ", running " + b + ")";
    };
    if (cap.model_digest != run.model_digest) return diff("model digest", cap.model_digest, run.model_digest);
    if (cap.dtype != run.dtype) return diff("dtype", cap.dtype, run.dtype);
    if (cap.engine_abi == 1 && run.engine_abi != 1)
        return diff("engine ABI", "1", std::to_string(run.engine_abi)) +
               ": ABI 1 capsules record every state part as f32, also the bf16 KV and conv state of CUDA "
               "engines, so their metadata cannot be trusted; re-create the capsule from its token ids";
    if (cap.engine_abi != run.engine_abi)
        return diff("engine ABI", std::to_string(cap.engine_abi), std::to_string(run.engine_abi));
    if (cap.alignment != run.alignment)
        return diff("alignment unit", std::to_string(cap.alignment), std::to_string(run.alignment));
    if (cap.backend != run.backend) return diff("backend", cap.backend, run.backend);
    if (cap.layout_digest != run.layout_digest) return diff("state layout", cap.layout_digest, run.layout_digest);
    if (!cap.numerics.empty() && cap.numerics != run.numerics) return diff("numerics", cap.numerics, run.numerics);
    return {};
}

CapsuleManager::CapsuleManager(Engine& engine, const std::string& model_digest, const CapsuleManagerOptions& opts)
    : engine_(engine), opts_(opts), deployment_(deployment_of(engine, model_digest)),
      staging_(std::make_unique<CapsuleStaging>()) {
    if (!opts_.disk_dir.empty()) capsule_remove_temp_files(opts_.disk_dir);
}

CapsuleManager::~CapsuleManager() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : capsules_) free_storage(*kv.second);
    capsules_.clear();
    staging_->release();
}

void CapsuleManager::trim_staging() {
    std::lock_guard<std::mutex> lock(mu_);
    staging_->release();
}

bool CapsuleManager::has_staging() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !staging_->empty();
}

frost_status CapsuleManager::for_model_dir(Engine& engine, const std::string& model_dir,
                                           const CapsuleManagerOptions& opts, std::unique_ptr<CapsuleManager>* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "CapsuleManager::for_model_dir: out is null");
    FingerprintResult fp;
    FROST_TRY(model_fingerprint(model_dir, &fp));
    *out = std::make_unique<CapsuleManager>(engine, fp.hex, opts);
    return FROST_OK;
}

void CapsuleManager::free_storage(Stored& c) {
    if (c.storage) frost_buffer_free(c.storage);
    c.storage = nullptr;
    if (c.owns_file && !c.path.empty()) ::unlink(c.path.c_str());
    c.owns_file = false;
}

std::string CapsuleManager::default_path(CapsuleId id) const {
    return util::join_path(opts_.disk_dir, "capsule-" + std::to_string(::getpid()) + "-" + std::to_string(id) + ".frostcap");
}

frost_status CapsuleManager::lookup(CapsuleId id, Stored** out) {
    auto it = capsules_.find(id);
    if (it == capsules_.end()) return fail(FROST_ERR_NOT_FOUND, "capsule %llu: unknown (never created or released)",
                                           static_cast<unsigned long long>(id));
    *out = it->second.get();
    return FROST_OK;
}

frost_status CapsuleManager::check_layout(const CapsuleMeta& meta, int session) const {
    const std::string why = deployment_mismatch(meta.deployment, deployment_);
    if (!why.empty()) return fail(FROST_ERR_INCOMPATIBLE, "capsule belongs to another deployment: %s", why.c_str());
    if (meta.requested_boundary > engine_.options().max_seq_len)
        return fail(FROST_ERR_INCOMPATIBLE, "capsule boundary %lld exceeds this engine's max_seq_len %d",
                    static_cast<long long>(meta.requested_boundary), engine_.options().max_seq_len);
    const int vocab = engine_.config().vocab_size;
    for (const auto* v : {&meta.ids, &meta.remainder})
        for (int32_t t : *v)
            if (t < 0 || t >= vocab) return fail(FROST_ERR_CORRUPT, "capsule token id %d outside the vocabulary", t);
    const auto live = engine_.state_buffers(session);
    if (live.size() != meta.parts.size())
        return fail(FROST_ERR_INCOMPATIBLE, "capsule holds %zu buffers, the session has %zu", meta.parts.size(), live.size());
    for (const auto& b : live) {
        const std::string name = strip_session(b.name);
        const CapsulePart* part = nullptr;
        for (const auto& p : meta.parts)
            if (p.name == name) part = &p;
        if (!part) return fail(FROST_ERR_INCOMPATIBLE, "capsule lacks state buffer %s", name.c_str());
        if (part->role != b.role || part->bytes != b.valid_bytes(meta.stored_boundary) ||
            part->bytes_per_position != b.bytes_per_position)
            return fail(FROST_ERR_INCOMPATIBLE, "capsule buffer %s does not match the session's layout", name.c_str());
        if (part->dtype != ops::dtype_name(b.dtype))
            return fail(FROST_ERR_INCOMPATIBLE, "capsule buffer %s holds %s, the session's is %s", name.c_str(),
                        part->dtype.c_str(), ops::dtype_name(b.dtype));
    }
    return FROST_OK;
}

frost_status CapsuleManager::snapshot(int session, CapsuleTier tier, CapsuleId* out, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    if (session < 0 || session >= engine_.sessions())
        return fail(FROST_ERR_INVALID_ARG, "snapshot: session %d out of range [0, %d)", session, engine_.sessions());
    const int64_t P = engine_.position(session);
    if (P % kCapsuleAlignment)
        return fail(FROST_ERR_STATE,
                    "snapshot: session %d is at position %lld, not a multiple of the alignment unit %d; the "
                    "capsule would be stored at %lld (use prefill_and_snapshot)",
                    session, static_cast<long long>(P), kCapsuleAlignment,
                    static_cast<long long>(P / kCapsuleAlignment * kCapsuleAlignment));
    return snapshot_locked(session, P, {}, tier, path, out);
}

frost_status CapsuleManager::prefill_and_snapshot(int session, const int32_t* ids, size_t n, CapsuleTier tier,
                                                  CapsuleId* out, int32_t* next, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    if (session < 0 || session >= engine_.sessions())
        return fail(FROST_ERR_INVALID_ARG, "prefill_and_snapshot: session %d out of range", session);
    if (!ids || n == 0 || !out) return fail(FROST_ERR_INVALID_ARG, "prefill_and_snapshot: no tokens or null out");
    const int64_t p0 = engine_.position(session);
    const int64_t P = p0 + int64_t(n);
    const int64_t Pa = P / kCapsuleAlignment * kCapsuleAlignment;
    if (Pa < p0)
        return fail(FROST_ERR_STATE,
                    "prefill_and_snapshot: aligned boundary %lld lies before the session's position %lld",
                    static_cast<long long>(Pa), static_cast<long long>(p0));
    if (P > engine_.options().max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "prefill_and_snapshot: %lld tokens exceed max_seq_len %d",
                    static_cast<long long>(P), engine_.options().max_seq_len);
    const size_t head = size_t(Pa - p0);
    int32_t tok = -1;
    if (head) FROST_TRY(engine_.prefill(session, ids, head, &tok));
    const std::vector<int32_t> rem(ids + head, ids + n);
    if (next && rem.empty()) *next = tok;  // known now: a caller whose freeze fails still has it
    FROST_TRY(snapshot_locked(session, P, rem, tier, path, out));
    if (!rem.empty()) {
        frost_status s = engine_.prefill(session, rem.data(), rem.size(), &tok);
        if (s != FROST_OK) return s;  // the capsule exists; the caller may release it
    }
    if (next) *next = tok;
    return FROST_OK;
}

frost_status CapsuleManager::snapshot_locked(int session, int64_t requested, const std::vector<int32_t>& remainder,
                                             CapsuleTier tier, const std::string& path, CapsuleId* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "snapshot: out is null");
    if (tier == CapsuleTier::Disk && path.empty() && opts_.disk_dir.empty())
        return fail(FROST_ERR_INVALID_ARG, "snapshot: disk tier needs a path or a manager disk_dir");
    if (engine_.prefill_slices_pending(session))
        return fail(FROST_ERR_STATE, "snapshot: session %d is in the middle of a sliced prefill", session);
    const int64_t Pa = engine_.position(session);
    const auto& journal = engine_.journal(session);
    if (int64_t(journal.size()) != Pa)
        return fail(FROST_ERR_STATE, "snapshot: session %d journal holds %zu ids at position %lld", session,
                    journal.size(), static_cast<long long>(Pa));
    auto c = std::make_unique<Stored>();
    CapsuleMeta& m = c->meta;
    m.requested_boundary = requested;
    m.stored_boundary = Pa;
    m.alignment = kCapsuleAlignment;
    m.ids = journal;
    m.remainder = remainder;
    std::vector<int32_t> all = m.ids;
    all.insert(all.end(), remainder.begin(), remainder.end());
    m.prefix_digest = capsule_prefix_digest(all);
    m.deployment = deployment_;
    m.created_unix_ms = now_unix_ms();
    const auto live = engine_.state_buffers(session);
    size_t at = 0;
    for (const auto& b : live) {
        CapsulePart p;
        p.name = strip_session(b.name);
        p.role = b.role;
        p.kind = kind_of(b);
        p.layer = b.layer;
        p.dtype = ops::dtype_name(b.dtype);
        p.bytes_per_position = b.bytes_per_position;
        p.bytes = b.valid_bytes(Pa);
        p.shape = shape_of(b, Pa);
        p.offset = at;
        at = round_page(at + p.bytes);
        m.parts.push_back(std::move(p));
    }
    m.payload_bytes = at;
    // Device tier: device memory; host and disk: pinned (for disk only while the file is written).
    const frost_space space = tier == CapsuleTier::Device ? FROST_SPACE_DEVICE : FROST_SPACE_HOST_PINNED;
    frost_status s = frost_buffer_alloc(engine_.ctx(), "capsule.storage", std::max<size_t>(at, 1), space, &c->storage);
    if (s != FROST_OK)
        return add_context(s, std::string("snapshot to the ") + capsule_tier_name(tier) + " tier (" +
                                  std::to_string(at) + " bytes)");
    // Every copy back to back on the engine's stream, one sync at the end: the copies are ordered
    // after any work already enqueued on the live buffers, so no sync is needed before them.
    // One batch: on the GPU every device-to-device part moves in a single launch.
    frost_stream* st = engine_.stream();
    std::vector<frost_copy_op> ops;
    ops.reserve(live.size());
    for (size_t i = 0; i < live.size(); ++i)
        ops.push_back({c->storage, m.parts[i].offset, live[i].buf, 0, m.parts[i].bytes});
    s = frost_buffer_copy_batch(ops.data(), ops.size(), st);
    const frost_status sync = frost_stream_sync(st);
    if (s == FROST_OK) s = sync;
    if (s != FROST_OK) {
        free_storage(*c);
        return add_context(s, "snapshot copy");
    }
    // The gaps between parts must be zero wherever the bytes can reach a file (the reader checks
    // them). Host-visible storage is zeroed here on the host; GPU storage keeps undefined gaps
    // (a fill launch per gap would cost more than the copies of small parts) and every host copy
    // of it is zeroed in stage_to_host.
    if (uint8_t* h = const_cast<uint8_t*>(host_view(c->storage))) {
        zero_gaps(m, h);
        capsule_compute_checksums(&m, h);
    }
    c->tier = tier;
    if (tier == CapsuleTier::Disk) {
        c->path = path.empty() ? default_path(next_id_) : path;
        s = capsule_file_write(c->path, m, frost_buffer_ptr(c->storage));
        frost_buffer_free(c->storage);
        c->storage = nullptr;
        if (s != FROST_OK) {
            // A failed final directory fsync leaves a complete file behind; one of our own names
            // would be an orphan (an explicit path keeps whatever the write left, old or new).
            if (path.empty()) ::unlink(c->path.c_str());
            return s;
        }
        c->owns_file = true;
    }
    *out = next_id_++;
    capsules_[*out] = std::move(c);
    return FROST_OK;
}

frost_status CapsuleManager::stage_to_host(Stored& c, frost_buffer** host, bool* owned) {
    *owned = false;
    if (c.tier == CapsuleTier::Host) {
        *host = c.storage;
        return FROST_OK;
    }
    if (c.tier == CapsuleTier::Disk) {
        CapsuleFileReader r;
        FROST_TRY(r.open(c.path));
        if (r.meta().prefix_digest != c.meta.prefix_digest || r.meta().payload_bytes != c.meta.payload_bytes)
            return fail(FROST_ERR_CORRUPT, "capsule file %s no longer holds this capsule", c.path.c_str());
        FROST_TRY(check_layout(r.meta(), 0));
        FROST_TRY(r.read_payload(engine_.ctx(), host));
        c.meta.parts = r.meta().parts;  // the file's checksums are authoritative
        c.meta.checksums_valid = true;
        *owned = true;
        return FROST_OK;
    }
    frost_buffer* b = nullptr;
    frost_status s = frost_buffer_alloc(engine_.ctx(), "capsule.host_staging", std::max<size_t>(c.meta.payload_bytes, 1),
                                        FROST_SPACE_HOST_PINNED, &b);
    if (s != FROST_OK) return add_context(s, "capsule staging to the host tier");
    s = frost_buffer_copy(b, 0, c.storage, 0, c.meta.payload_bytes, engine_.stream());
    const frost_status sync = frost_stream_sync(engine_.stream());
    if (s == FROST_OK) s = sync;
    if (s != FROST_OK) {
        frost_buffer_free(b);
        return add_context(s, "capsule copy device -> host");
    }
    uint8_t* h = static_cast<uint8_t*>(frost_buffer_ptr(b));
    zero_gaps(c.meta, h);  // undefined in GPU storage (see snapshot_locked)
    if (!c.meta.checksums_valid) capsule_compute_checksums(&c.meta, h);
    *host = b;
    *owned = true;
    return FROST_OK;
}

// Disk tier: validate the file's header, then stream its payload into a device scratch area of
// payload size, verifying every chunk on its pinned staging copy as it goes (see
// CapsuleFileReader::read_payload_into); only a fully verified scratch is committed into the
// live buffers, by restore_into's D2D copies. The price of this choice: one extra copy of the
// payload at D2D bandwidth (~0.7 ms per GiB on an H100, well under 1% of reading it at a few GB/s)
// and payload_bytes of transient device memory. In exchange an I/O error or a checksum mismatch
// anywhere in the file leaves the live session untouched, which streaming straight into the live
// buffers could not promise, and reading the file twice (verify pass, copy pass) would cost 2x.
frost_status CapsuleManager::stage_disk_to_device(Stored& c, int session, frost_buffer** scratch) {
    CapsuleFileReader r;
    FROST_TRY(r.open(c.path));
    if (r.meta().prefix_digest != c.meta.prefix_digest || r.meta().payload_bytes != c.meta.payload_bytes)
        return fail(FROST_ERR_CORRUPT, "capsule file %s no longer holds this capsule", c.path.c_str());
    FROST_TRY(check_layout(r.meta(), session));
    FROST_TRY(read_file_to_device(r, scratch));
    c.meta.parts = r.meta().parts;  // the file's checksums are authoritative
    c.meta.checksums_valid = true;
    return FROST_OK;
}

frost_status CapsuleManager::read_through_staging(CapsuleFileReader& r, frost_buffer* dst) {
    const bool fresh = staging_->empty();
    if (fresh)
        FROST_TRY(staging_->alloc(engine_.ctx(), std::max(opts_.disk_chunk_bytes, kCapsulePageBytes),
                                  std::max(opts_.disk_staging_slots, 2)));
    const frost_status s = r.read_payload_into(dst, *staging_, engine_.stream());
    if (s != FROST_OK && fresh) staging_->release();  // a failed call leaves no allocation of its own behind
    return s;
}

frost_status CapsuleManager::read_file_to_device(CapsuleFileReader& r, frost_buffer** out) {
    const size_t n = r.meta().payload_bytes;
    frost_buffer* d = nullptr;
    frost_status s = frost_buffer_alloc(engine_.ctx(), "capsule.storage", std::max<size_t>(n, 1), FROST_SPACE_DEVICE, &d);
    if (s != FROST_OK) return add_context(s, "capsule file read into device memory (" + std::to_string(n) + " bytes)");
    s = read_through_staging(r, d);
    if (s != FROST_OK) {
        frost_buffer_free(d);
        return s;
    }
    *out = d;
    return FROST_OK;
}

frost_status CapsuleManager::restore_into(const CapsuleMeta& meta, frost_buffer* src, int session,
                                          const std::vector<int32_t>& suffix, const SamplingConfig* sampling,
                                          int32_t* next, bool with_remainder) {
    // Last check before live buffers are touched: the stored cursor must sit at the stored boundary.
    if (const uint8_t* h = host_view(src)) {
        for (const auto& p : meta.parts) {
            if (p.kind != CapsulePartKind::Cursor) continue;
            kernels::StepCursor cur{};
            if (p.bytes != sizeof cur) return fail(FROST_ERR_CORRUPT, "capsule cursor has %zu bytes", p.bytes);
            std::memcpy(&cur, h + p.offset, sizeof cur);
            if (cur.pos != meta.stored_boundary)
                return fail(FROST_ERR_CORRUPT, "capsule cursor position %d differs from its boundary %lld", cur.pos,
                            static_cast<long long>(meta.stored_boundary));
        }
    }
    // Pair each live buffer with its part: by position first (parts are stored in the engine's
    // buffer order), by name otherwise. check_layout proved every pair exists and matches.
    struct Copy {
        frost_buffer* dst;
        const CapsulePart* part;
    };
    const auto live = engine_.state_buffers(session);
    std::vector<Copy> copies;
    copies.reserve(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
        const std::string name = strip_session(live[i].name);
        const CapsulePart* part = i < meta.parts.size() && meta.parts[i].name == name ? &meta.parts[i] : nullptr;
        for (size_t j = 0; !part && j < meta.parts.size(); ++j)
            if (meta.parts[j].name == name) part = &meta.parts[j];
        if (!part) return fail(FROST_ERR_INCOMPATIBLE, "capsule lacks state buffer %s", name.c_str());
        copies.push_back({live[i].buf, part});
    }
    // Largest first: where a backend copies op by op (host tiers), the device gets the long KV
    // copies to run while the small recurrent/conv ones are enqueued behind them.
    std::stable_sort(copies.begin(), copies.end(),
                     [](const Copy& a, const Copy& b) { return a.part->bytes > b.part->bytes; });
    // KV parts hold only rows [0, Pa) (CapsulePart::bytes = valid_bytes(Pa)), so rows >= Pa of a
    // live KV buffer keep whatever they held (another prompt's keys, poison). That is safe: a step
    // at position p writes its own rows [p, p + n) before attention reads them, and attention
    // reads keys [0, kv_len) only, so a stale row is always rewritten before it is read (tested:
    // test_capsule_pipeline StaleKvRowsBeyondTheBoundaryDoNotMatter).
    // All copies go back to back on the engine's stream with no sync before (stream order puts
    // them after any work already enqueued) and none after: adopt_restored_state reads the cursor
    // back through the same stream, which waits for every copy and reports an asynchronous failure.
    // One batch (a single launch for device-to-device parts on the GPU, instead of one copy and
    // one gap per small recurrent/conv buffer); refused as a whole before anything is written.
    frost_stream* st = engine_.stream();
    std::vector<frost_copy_op> ops;
    ops.reserve(copies.size());
    for (const auto& c : copies) ops.push_back({c.dst, 0, src, c.part->offset, c.part->bytes});
    frost_status s = frost_buffer_copy_batch(ops.data(), ops.size(), st);
    if (s == FROST_OK) s = engine_.adopt_restored_state(session, meta.ids);
    if (s != FROST_OK) {
        const std::string why = frost_last_error();
        engine_.reset(session);  // fail closed: never leave a half-restored session behind
        return fail(s, "restore into session %d failed midway (%s); the session was reset to empty", session,
                    why.c_str());
    }
    if (sampling) FROST_TRY(engine_.set_sampling(session, *sampling));
    if ((with_remainder && !meta.remainder.empty()) || !suffix.empty()) {
        std::vector<int32_t> run = with_remainder ? meta.remainder : std::vector<int32_t>{};
        run.insert(run.end(), suffix.begin(), suffix.end());
        return engine_.prefill(session, run.data(), run.size(), next);
    }
    if (next) {
        kernels::StepCursor cur{};
        FROST_TRY(engine_.read_cursor(session, &cur));
        *next = cur.last_token;
    }
    return FROST_OK;
}

frost_status CapsuleManager::restore_many(Stored& c, const std::vector<int>& sessions,
                                          const std::vector<int32_t>& suffix, const SamplingConfig* sampling,
                                          std::vector<int32_t>* next, bool with_remainder) {
    if (sessions.empty()) return fail(FROST_ERR_INVALID_ARG, "restore: no target session");
    std::set<int> seen;
    for (int s : sessions) {
        if (s < 0 || s >= engine_.sessions())
            return fail(FROST_ERR_INVALID_ARG, "restore: session %d out of range [0, %d)", s, engine_.sessions());
        if (!seen.insert(s).second) return fail(FROST_ERR_INVALID_ARG, "fork: session %d named twice", s);
    }
    if (!c.layout_checked) {  // the metadata and the engine's layout never change: check once
        FROST_TRY(check_layout(c.meta, sessions[0]));
        c.layout_checked = true;
    }
    frost_buffer* src = c.storage;
    frost_buffer* scratch = nullptr;
    if (c.tier == CapsuleTier::Disk) {
        FROST_TRY(stage_disk_to_device(c, sessions[0], &scratch));
        src = scratch;
    }
    std::vector<int32_t> toks(sessions.size(), -1);
    frost_status s = FROST_OK;
    for (size_t i = 0; s == FROST_OK && i < sessions.size(); ++i)
        s = restore_into(c.meta, src, sessions[i], suffix, sampling, &toks[i], with_remainder);
    if (scratch) frost_buffer_free(scratch);
    if (s == FROST_OK && next) *next = toks;
    return s;
}

frost_status CapsuleManager::restore(CapsuleId id, int session, int32_t* next) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    std::vector<int32_t> toks;
    FROST_TRY(restore_many(*c, {session}, {}, nullptr, &toks));
    if (next) *next = toks[0];
    return FROST_OK;
}

frost_status CapsuleManager::restore_stored(CapsuleId id, int session, int64_t* at) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    std::vector<int32_t> toks;
    FROST_TRY(restore_many(*c, {session}, {}, nullptr, &toks, false));
    if (at) *at = engine_.position(session);
    return FROST_OK;
}

frost_status CapsuleManager::restore_append(CapsuleId id, int session, const int32_t* suffix, size_t n,
                                            int32_t* next, const SamplingConfig* sampling) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    if (n && !suffix) return fail(FROST_ERR_INVALID_ARG, "restore_append: suffix is null");
    if (c->meta.requested_boundary + int64_t(n) > engine_.options().max_seq_len)
        return fail(FROST_ERR_OUT_OF_RANGE, "restore_append: %lld + %zu tokens exceed max_seq_len %d",
                    static_cast<long long>(c->meta.requested_boundary), n, engine_.options().max_seq_len);
    std::vector<int32_t> toks;
    FROST_TRY(restore_many(*c, {session}, std::vector<int32_t>(suffix, suffix + n), sampling, &toks));
    if (next) *next = toks[0];
    return FROST_OK;
}

frost_status CapsuleManager::fork(CapsuleId id, const std::vector<int>& sessions, std::vector<int32_t>* next) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    return restore_many(*c, sessions, {}, nullptr, next);
}

frost_status CapsuleManager::rollback(int session, CapsuleId id, int32_t* next) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    if (session < 0 || session >= engine_.sessions())
        return fail(FROST_ERR_INVALID_ARG, "rollback: session %d out of range", session);
    const auto& j = engine_.journal(session);
    const auto& m = c->meta;
    bool prefix = j.size() >= m.ids.size() + m.remainder.size() && std::equal(m.ids.begin(), m.ids.end(), j.begin()) &&
                  std::equal(m.remainder.begin(), m.remainder.end(), j.begin() + m.ids.size());
    if (!prefix)
        return fail(FROST_ERR_INVALID_ARG, "rollback: capsule %llu is not an earlier boundary of session %d",
                    static_cast<unsigned long long>(id), session);
    std::vector<int32_t> toks;
    FROST_TRY(restore_many(*c, {session}, {}, nullptr, &toks));
    if (next) *next = toks[0];
    return FROST_OK;
}

frost_status CapsuleManager::release(CapsuleId id) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    free_storage(*c);
    capsules_.erase(id);
    return FROST_OK;
}

frost_status CapsuleManager::move(CapsuleId id, CapsuleTier tier, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    if (c->tier == tier) return FROST_OK;
    if (tier == CapsuleTier::Disk && path.empty() && opts_.disk_dir.empty())
        return fail(FROST_ERR_INVALID_ARG, "move: disk tier needs a path or a manager disk_dir");
    if (c->tier == CapsuleTier::Disk && tier == CapsuleTier::Device) {
        // Promotion straight into the device storage through the pipelined, verified read (the
        // serving store promotes this way before a restore): no payload-sized pinned buffer.
        frost_buffer* d = nullptr;
        FROST_TRY(stage_disk_to_device(*c, 0, &d));
        free_storage(*c);
        c->storage = d;
        c->tier = tier;
        c->path.clear();
        return FROST_OK;
    }
    frost_buffer* host = nullptr;
    bool owned = false;
    FROST_TRY(stage_to_host(*c, &host, &owned));
    frost_status s = FROST_OK;
    frost_buffer* keep = nullptr;  // the new storage (null for disk)
    std::string new_path;
    if (tier == CapsuleTier::Disk) {
        new_path = path.empty() ? default_path(id) : path;
        s = capsule_file_write(new_path, c->meta, frost_buffer_ptr(host));
        if (s != FROST_OK && path.empty()) ::unlink(new_path.c_str());
    } else if (tier == CapsuleTier::Host) {
        keep = host;  // the staging buffer (always owned here: the capsule was not on the host) becomes the storage
        owned = false;
    } else {
        s = frost_buffer_alloc(engine_.ctx(), "capsule.storage", std::max<size_t>(c->meta.payload_bytes, 1),
                               FROST_SPACE_DEVICE, &keep);
        if (s != FROST_OK) s = add_context(s, "promotion to the device tier");
        if (s == FROST_OK) s = frost_buffer_copy(keep, 0, host, 0, c->meta.payload_bytes, engine_.stream());
        const frost_status sync = frost_stream_sync(engine_.stream());
        if (s == FROST_OK) s = sync;
        if (s != FROST_OK && keep) {
            frost_buffer_free(keep);
            keep = nullptr;
        }
    }
    if (owned) frost_buffer_free(host);
    if (s != FROST_OK) return s;  // the capsule stays where it was
    free_storage(*c);
    c->storage = keep;
    c->tier = tier;
    c->path = new_path;
    c->owns_file = tier == CapsuleTier::Disk;
    return FROST_OK;
}

frost_status CapsuleManager::save(CapsuleId id, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    frost_buffer* host = nullptr;
    bool owned = false;
    FROST_TRY(stage_to_host(*c, &host, &owned));
    const frost_status s = capsule_file_write(path, c->meta, frost_buffer_ptr(host));
    if (owned) frost_buffer_free(host);
    return s;
}

frost_status CapsuleManager::load(const std::string& path, CapsuleTier tier, CapsuleId* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!out) return fail(FROST_ERR_INVALID_ARG, "load: out is null");
    CapsuleFileReader r;
    FROST_TRY(r.open(path));
    FROST_TRY(check_layout(r.meta(), 0));
    auto c = std::make_unique<Stored>();
    c->meta = r.meta();
    c->tier = tier;
    if (tier == CapsuleTier::Device) {
        FROST_TRY(read_file_to_device(r, &c->storage));
        *out = next_id_++;
        capsules_[*out] = std::move(c);
        return FROST_OK;
    }
    if (tier == CapsuleTier::Host) {
        FROST_TRY(r.read_payload(engine_.ctx(), &c->storage));  // the pinned copy becomes the storage
    } else {
        FROST_TRY(read_through_staging(r, nullptr));  // disk: verify every byte once, keep nothing
        c->path = path;  // not owned: release never deletes an imported file
    }
    *out = next_id_++;
    capsules_[*out] = std::move(c);
    return FROST_OK;
}

frost_status CapsuleManager::info(CapsuleId id, CapsuleInfo* out) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = capsules_.find(id);
    if (it == capsules_.end())
        return fail(FROST_ERR_NOT_FOUND, "capsule %llu: unknown", static_cast<unsigned long long>(id));
    if (!out) return fail(FROST_ERR_INVALID_ARG, "info: out is null");
    out->id = id;
    out->tier = it->second->tier;
    out->path = it->second->path;
    out->meta = it->second->meta;
    return FROST_OK;
}

std::vector<CapsuleId> CapsuleManager::ids() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<CapsuleId> v;
    for (const auto& kv : capsules_) v.push_back(kv.first);
    return v;
}

size_t CapsuleManager::count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return capsules_.size();
}

frost_status CapsuleManager::read_payload(CapsuleId id, std::vector<uint8_t>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    Stored* c = nullptr;
    FROST_TRY(lookup(id, &c));
    frost_buffer* host = nullptr;
    bool owned = false;
    FROST_TRY(stage_to_host(*c, &host, &owned));
    const uint8_t* p = static_cast<const uint8_t*>(frost_buffer_ptr(host));
    out->assign(p, p + c->meta.payload_bytes);
    if (owned) frost_buffer_free(host);
    return FROST_OK;
}

}  // namespace frost::model
