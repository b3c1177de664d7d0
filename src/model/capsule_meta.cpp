// Capsule metadata <-> JSON, its consistency checks, the prefix digest and the byte accounting.
// Parsing is defensive: a capsule file is untrusted input, so every field is type- and
// range-checked and nlohmann exceptions never leave this file.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <new>

#include "exec/error.h"
#include "model/capsule_file.h"
#include "ops/tensor.h"
#include "util/sha256.h"

namespace frost::model {
namespace {

constexpr const char* kFormatName = "frost-capsule";

std::string hex64(uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016" PRIx64, v);
    return b;
}

bool parse_hex64(const std::string& s, uint64_t* out) {
    if (s.size() != 16) return false;
    uint64_t v = 0;
    for (char c : s) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return false;
        v = (v << 4) | uint64_t(d);
    }
    *out = v;
    return true;
}

bool part_kind_from_name(const std::string& s, CapsulePartKind* out) {
    for (int k = 0; k <= int(CapsulePartKind::Other); ++k)
        if (s == capsule_part_kind_name(CapsulePartKind(k))) {
            *out = CapsulePartKind(k);
            return true;
        }
    return false;
}

bool role_from_name(const std::string& s, BufferRole* out) {
    for (BufferRole r : {BufferRole::State, BufferRole::Cursor})
        if (s == buffer_role_name(r)) {
            *out = r;
            return true;
        }
    return false;
}

nlohmann::json deployment_to_json(const Deployment& d) {
    return {{"model_digest", d.model_digest}, {"dtype", d.dtype},     {"engine_abi", d.engine_abi},
            {"alignment", d.alignment},       {"max_seq_len", d.max_seq_len}, {"backend", d.backend},
            {"layout_digest", d.layout_digest}, {"numerics", d.numerics}};
}

void deployment_from_json(const nlohmann::json& j, Deployment* d) {
    d->model_digest = j.at("model_digest").get<std::string>();
    d->dtype = j.at("dtype").get<std::string>();
    d->engine_abi = j.at("engine_abi").get<uint32_t>();
    d->alignment = j.at("alignment").get<int>();
    d->max_seq_len = j.at("max_seq_len").get<int>();
    d->backend = j.at("backend").get<std::string>();
    d->layout_digest = j.at("layout_digest").get<std::string>();
    d->numerics = j.value("numerics", std::string());  // absent before the field existed
}

// Overflow-safe "a + b <= limit".
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

frost_status check_meta(const CapsuleMeta& m) {
    const auto corrupt = [](const char* what) { return fail(FROST_ERR_CORRUPT, "capsule metadata: %s", what); };
    if (m.alignment <= 0) return corrupt("alignment must be positive");
    if (m.stored_boundary < 0 || m.stored_boundary % m.alignment)
        return corrupt("stored boundary is not a multiple of the alignment unit");
    if (m.requested_boundary < m.stored_boundary || m.requested_boundary - m.stored_boundary >= m.alignment)
        return corrupt("requested boundary is not within one alignment unit above the stored one");
    if (int64_t(m.ids.size()) != m.stored_boundary) return corrupt("token id count differs from the stored boundary");
    if (int64_t(m.remainder.size()) != m.requested_boundary - m.stored_boundary)
        return corrupt("remainder id count differs from requested - stored boundary");
    for (int32_t t : m.ids)
        if (t < 0) return corrupt("negative token id");
    for (int32_t t : m.remainder)
        if (t < 0) return corrupt("negative token id in the remainder");
    std::vector<int32_t> all = m.ids;
    all.insert(all.end(), m.remainder.begin(), m.remainder.end());
    if (capsule_prefix_digest(all) != m.prefix_digest) return corrupt("prefix digest does not match the token ids");
    uint64_t end = 0;
    for (const auto& p : m.parts) {
        if (p.offset % kCapsulePageBytes) return corrupt("a buffer offset is not 4 KiB aligned");
        if (p.offset < end) return corrupt("buffers overlap or are out of order");
        if (!fits(p.offset, p.bytes, m.payload_bytes)) return corrupt("a buffer lies outside the payload");
        const uint64_t P = uint64_t(m.stored_boundary);
        if (p.bytes_per_position > 0 && (P == 0 ? p.bytes != 0 : (p.bytes % P || p.bytes / P != p.bytes_per_position)))
            return corrupt("a KV buffer's length is not bytes_per_position * stored boundary");
        end = p.offset + p.bytes;
    }
    return FROST_OK;
}

}  // namespace

const char* capsule_part_kind_name(CapsulePartKind k) {
    switch (k) {
        case CapsulePartKind::Cursor: return "cursor";
        case CapsulePartKind::Kv: return "kv";
        case CapsulePartKind::Recurrent: return "recurrent";
        case CapsulePartKind::Conv: return "conv";
        default: return "other";
    }
}

CapsuleBytes CapsuleMeta::bytes() const {
    CapsuleBytes b;
    for (const auto& p : parts) {
        switch (p.kind) {
            case CapsulePartKind::Cursor: b.cursor += p.bytes; break;
            case CapsulePartKind::Kv: b.kv += p.bytes; break;
            case CapsulePartKind::Recurrent: b.recurrent += p.bytes; break;
            case CapsulePartKind::Conv: b.conv += p.bytes; break;
            default: b.other += p.bytes; break;
        }
    }
    return b;
}

std::string capsule_prefix_digest(const std::vector<int32_t>& ids) {
    util::Sha256 h;
    const std::string salt = kCapsulePrefixSalt;
    h.update(salt.data(), salt.size());
    for (int32_t id : ids) {
        const uint32_t u = static_cast<uint32_t>(id);
        const uint8_t le[4] = {uint8_t(u), uint8_t(u >> 8), uint8_t(u >> 16), uint8_t(u >> 24)};
        h.update(le, sizeof le);
    }
    const auto d = h.finish();
    return util::to_hex(d.data(), d.size());
}

nlohmann::json capsule_meta_to_json(const CapsuleMeta& m) {
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& p : m.parts)
        parts.push_back({{"name", p.name},
                         {"role", buffer_role_name(p.role)},
                         {"kind", capsule_part_kind_name(p.kind)},
                         {"layer", p.layer},
                         {"dtype", p.dtype},
                         {"shape", p.shape},
                         {"bytes_per_position", p.bytes_per_position},
                         {"offset", p.offset},
                         {"length", p.bytes},
                         {"checksum", hex64(p.checksum)}});
    return {{"format", kFormatName},
            {"version", kCapsuleFormatVersion},
            {"deployment", deployment_to_json(m.deployment)},
            {"requested_boundary", m.requested_boundary},
            {"stored_boundary", m.stored_boundary},
            {"alignment", m.alignment},
            {"ids", m.ids},
            {"remainder", m.remainder},
            {"prefix_digest", m.prefix_digest},
            {"prefix_salt", kCapsulePrefixSalt},
            {"created_unix_ms", m.created_unix_ms},
            {"checksum_algorithm", "xxh64"},
            {"payload_bytes", m.payload_bytes},
            {"buffers", parts}};
}

frost_status capsule_meta_from_json(const nlohmann::json& j, CapsuleMeta* out) {
    CapsuleMeta m;
    try {
        if (!j.is_object()) return fail(FROST_ERR_CORRUPT, "capsule metadata is not a JSON object");
        if (j.at("format").get<std::string>() != kFormatName)
            return fail(FROST_ERR_INCOMPATIBLE, "capsule metadata: format is not %s", kFormatName);
        deployment_from_json(j.at("deployment"), &m.deployment);
        m.requested_boundary = j.at("requested_boundary").get<int64_t>();
        m.stored_boundary = j.at("stored_boundary").get<int64_t>();
        m.alignment = j.at("alignment").get<int>();
        m.ids = j.at("ids").get<std::vector<int32_t>>();
        m.remainder = j.at("remainder").get<std::vector<int32_t>>();
        m.prefix_digest = j.at("prefix_digest").get<std::string>();
        m.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
        m.payload_bytes = j.at("payload_bytes").get<uint64_t>();
        for (const auto& b : j.at("buffers")) {
            CapsulePart p;
            p.name = b.at("name").get<std::string>();
            if (!role_from_name(b.at("role").get<std::string>(), &p.role))
                return fail(FROST_ERR_CORRUPT, "capsule metadata: buffer %s has an unknown role", p.name.c_str());
            if (!part_kind_from_name(b.at("kind").get<std::string>(), &p.kind))
                return fail(FROST_ERR_CORRUPT, "capsule metadata: buffer %s has an unknown kind", p.name.c_str());
            p.layer = b.at("layer").get<int>();
            p.dtype = b.at("dtype").get<std::string>();
            ops::DType dt;
            if (!ops::dtype_from_name(p.dtype.c_str(), &dt))
                return fail(FROST_ERR_CORRUPT, "capsule metadata: buffer %s has an unknown dtype %s", p.name.c_str(),
                            p.dtype.c_str());
            p.shape = b.at("shape").get<std::vector<int64_t>>();
            p.bytes_per_position = b.at("bytes_per_position").get<uint64_t>();
            p.offset = b.at("offset").get<uint64_t>();
            p.bytes = b.at("length").get<uint64_t>();
            if (!parse_hex64(b.at("checksum").get<std::string>(), &p.checksum))
                return fail(FROST_ERR_CORRUPT, "capsule metadata: buffer %s has a malformed checksum", p.name.c_str());
            m.parts.push_back(std::move(p));
        }
    } catch (const std::bad_alloc&) {
        // Not the file's fault: a capsule must not be taken for corrupt (and quarantined)
        // because the heap refused while it was read.
        return fail(FROST_ERR_OUT_OF_MEMORY, "capsule metadata: out of host memory while reading it");
    } catch (const std::exception& e) {
        return fail(FROST_ERR_CORRUPT, "capsule metadata: missing or mistyped field (%s)", e.what());
    }
    m.checksums_valid = true;
    FROST_TRY(check_meta(m));
    *out = std::move(m);
    return FROST_OK;
}

}  // namespace frost::model
