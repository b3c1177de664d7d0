// libFuzzer target for the binary capsule file reader (reliability case T17: CapsuleFileReader,
// what `frost serve` re-indexes from its capsule folder at start and `frost capsule load` reads).
// A capsule file is guarded by an XXH64 of its header and one per buffer, so mutated files almost
// all stop at the first checksum. Structure-aware, the first input byte picks a mode:
//   - 'R' (raw): the rest is the file as it is.
//   - otherwise (structured): [u16 JSON length][JSON metadata][payload bytes]. The target builds a
//     well-formed envelope around them (magic, version, header length, the header checksum, zero
//     padding to the page boundary); when the JSON is an object whose "buffers" carry an "offset"
//     and a "length" inside the payload it sets each buffer's checksum to the payload's, so the
//     fuzzer reaches the metadata checks, the size check and the payload checks behind them.
// Every read must end in a status; an accepted file must satisfy the format's own equations.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "model/capsule_file.h"
#include "util/hash64.h"

namespace {

constexpr size_t kMaxPayload = size_t(1) << 20;  // structured mode: the payload a header may claim

void put_u32(std::string* s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s->push_back(char((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string* s, uint64_t v) {
    for (int i = 0; i < 8; ++i) s->push_back(char((v >> (8 * i)) & 0xFF));
}

std::string hex64(uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

// The capsule file around `meta_text` and `payload` (structured mode).
std::string build_file(std::string meta_text, const std::string& payload) {
    using namespace frost::model;
    nlohmann::json j = nlohmann::json::parse(meta_text, nullptr, false);
    if (j.is_object() && j.contains("buffers") && j["buffers"].is_array()) {
        for (auto& b : j["buffers"]) {
            if (!b.is_object() || !b.contains("offset") || !b.contains("length")) continue;
            if (!b["offset"].is_number_unsigned() || !b["length"].is_number_unsigned()) continue;
            const uint64_t off = b["offset"].get<uint64_t>(), len = b["length"].get<uint64_t>();
            if (off <= payload.size() && len <= payload.size() - off)
                b["checksum"] = hex64(frost::util::hash64(payload.data() + off, size_t(len)));
        }
        meta_text = j.dump();
    }
    std::string f(kCapsuleMagic, sizeof kCapsuleMagic);
    put_u32(&f, kCapsuleFormatVersion);
    put_u32(&f, 0);
    put_u64(&f, meta_text.size());
    f += meta_text;
    put_u64(&f, frost::util::hash64(f.data(), f.size()));
    f.resize(capsule_payload_start(meta_text.size()), '\0');
    return f + payload;
}

struct Env {
    frost_ctx* ctx = nullptr;
    frost_stream* stream = nullptr;
    frost::model::CapsuleStaging staging;
    std::string path;
    Env() {
        if (frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx) != FROST_OK || frost_stream_create(ctx, 0, &stream) != FROST_OK ||
            staging.alloc(ctx, frost::model::kCapsulePageBytes * 4, 2) != FROST_OK)
            std::abort();
        char tmpl[] = "/tmp/frost-fuzz-capsule-XXXXXX";
        const int fd = ::mkstemp(tmpl);
        if (fd < 0) std::abort();
        ::close(fd);
        path = tmpl;
    }
    ~Env() { ::unlink(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace frost::model;
    static Env env;
    if (size == 0) return 0;
    std::string file;
    if (data[0] == 'R') {
        file.assign(reinterpret_cast<const char*>(data + 1), size - 1);
    } else {
        if (size < 3) return 0;
        const size_t n = std::min<size_t>(size - 3, size_t(data[1]) | (size_t(data[2]) << 8));
        const std::string meta(reinterpret_cast<const char*>(data + 3), n);
        std::string payload(reinterpret_cast<const char*>(data + 3 + n), size - 3 - n);
        // A header may claim a payload larger than the input: zeros past the input's bytes, so
        // the size check passes and the buffers behind it are read.
        nlohmann::json j = nlohmann::json::parse(meta, nullptr, false);
        if (j.is_object() && j.contains("payload_bytes") && j["payload_bytes"].is_number_unsigned()) {
            const uint64_t want = j["payload_bytes"].get<uint64_t>();
            if (want <= kMaxPayload && want > payload.size()) payload.resize(size_t(want), '\0');
        }
        file = build_file(meta, payload);
    }
    FILE* f = std::fopen(env.path.c_str(), "wb");
    if (!f || std::fwrite(file.data(), 1, file.size(), f) != file.size() || std::fclose(f) != 0) std::abort();
    CapsuleFileReader r;
    if (r.open(env.path) != FROST_OK) return 0;
    // Accepted: the header's own equations hold.
    const CapsuleMeta& m = r.meta();
    if (r.file_bytes() != file.size()) std::abort();
    if (r.file_bytes() < m.payload_bytes) std::abort();
    for (const auto& p : m.parts)
        if (p.offset > m.payload_bytes || p.bytes > m.payload_bytes - p.offset) std::abort();
    // The payload is verified (checksums, zero gaps) into no destination.
    (void)r.read_payload_into(nullptr, env.staging, env.stream);
    return 0;
}
