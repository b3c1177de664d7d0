// The C ABI of include/frost/frost.h over model::Engine and model::CapsuleManager. Each function
// checks its pointers, converts, and forwards; no C++ exception crosses this boundary.
#include "frost/frost.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "exec/error.h"
#include "model/capsule.h"
#include "model/engine.h"

struct frost_model {
    std::unique_ptr<frost::model::Engine> engine;
    std::unique_ptr<frost::model::CapsuleManager> capsules;
};

namespace {

using frost::fail;
using namespace frost::model;

constexpr int kDefaultMaxSeq = 4096;
constexpr int kDefaultChunk = 0;  // EngineOptions::prefill_chunk: by backend and model

frost_status check(const frost_model* m) {
    if (!m || !m->engine || !m->capsules) return fail(FROST_ERR_INVALID_ARG, "frost: model is NULL");
    return FROST_OK;
}

frost_status to_tier(frost_tier t, CapsuleTier* out) {
    switch (t) {
        case FROST_TIER_DEVICE: *out = CapsuleTier::Device; return FROST_OK;
        case FROST_TIER_HOST: *out = CapsuleTier::Host; return FROST_OK;
        case FROST_TIER_DISK: *out = CapsuleTier::Disk; return FROST_OK;
    }
    return fail(FROST_ERR_INVALID_ARG, "frost: tier must be DEVICE, HOST or DISK, got %d", int(t));
}

SamplingConfig to_sampling(const frost_sampling* s) {
    SamplingConfig c;
    if (!s) return c;
    c.temperature = s->temperature;
    c.top_k = s->top_k;
    c.top_p = s->top_p;
    c.seed = s->seed;
    return c;
}

void copy_hex(char dst[65], const std::string& src) {
    std::memset(dst, 0, 65);
    std::memcpy(dst, src.data(), std::min<size_t>(src.size(), 64));
}

}  // namespace

extern "C" {

uint32_t frost_api_version(void) { return FROST_API_VERSION; }

void frost_model_options_default(frost_model_options* o) {
    if (!o) return;
    o->backend = FROST_BACKEND_CPU;
    o->device = 0;
    o->max_seq_len = kDefaultMaxSeq;
    o->sessions = 1;
    o->prefill_chunk = kDefaultChunk;
    o->capsule_dir = nullptr;
}

frost_status frost_model_load(const char* model_dir, const frost_model_options* opts, frost_model** out) {
    if (!model_dir || !out) return fail(FROST_ERR_INVALID_ARG, "frost_model_load: model_dir and out must be set");
    frost_model_options d;
    frost_model_options_default(&d);
    if (!opts) opts = &d;
    EngineOptions eo;
    eo.backend = opts->backend;
    eo.device = opts->device;
    eo.max_seq_len = opts->max_seq_len;
    eo.sessions = opts->sessions;
    eo.prefill_chunk = opts->prefill_chunk;
    std::unique_ptr<frost_model> m(new (std::nothrow) frost_model());
    if (!m) return fail(FROST_ERR_OUT_OF_MEMORY, "frost_model_load: out of host memory");
    FROST_TRY(Engine::create(model_dir, eo, &m->engine));
    CapsuleManagerOptions co;
    if (opts->capsule_dir) co.disk_dir = opts->capsule_dir;
    FROST_TRY(CapsuleManager::for_model_dir(*m->engine, model_dir, co, &m->capsules));
    *out = m.release();
    return FROST_OK;
}

void frost_model_free(frost_model* model) {
    if (!model) return;
    model->capsules.reset();  // before the engine: capsule storage lives in its ctx
    model->engine.reset();
    delete model;
}

int frost_model_sessions(const frost_model* m) { return m && m->engine ? m->engine->sessions() : -1; }
int frost_model_vocab_size(const frost_model* m) { return m && m->engine ? m->engine->config().vocab_size : -1; }
int frost_model_max_seq_len(const frost_model* m) { return m && m->engine ? m->engine->options().max_seq_len : -1; }
int frost_model_alignment(const frost_model* m) { return m && m->capsules ? m->capsules->deployment().alignment : -1; }

frost_status frost_model_fingerprint(const frost_model* m, char buf[65]) {
    FROST_TRY(check(m));
    if (!buf) return fail(FROST_ERR_INVALID_ARG, "frost_model_fingerprint: buf is NULL");
    copy_hex(buf, m->capsules->deployment().model_digest);
    return FROST_OK;
}

void frost_sampling_default(frost_sampling* s) {
    if (!s) return;
    s->temperature = 0.0f;
    s->top_k = 0;
    s->top_p = 1.0f;
    s->seed = 0;
}

frost_status frost_session_reset(frost_model* m, int session, const frost_sampling* s) {
    FROST_TRY(check(m));
    return m->engine->reset(session, to_sampling(s));
}

frost_status frost_session_set_sampling(frost_model* m, int session, const frost_sampling* s) {
    FROST_TRY(check(m));
    if (!s) return fail(FROST_ERR_INVALID_ARG, "frost_session_set_sampling: sampling is NULL");
    return m->engine->set_sampling(session, to_sampling(s));
}

frost_status frost_session_prefill(frost_model* m, int session, const int32_t* ids, size_t n, int32_t* next) {
    FROST_TRY(check(m));
    return m->engine->prefill(session, ids, n, next);
}

frost_status frost_session_decode(frost_model* m, int session, int32_t* next) {
    FROST_TRY(check(m));
    return m->engine->decode(session, next);
}

int64_t frost_session_position(const frost_model* m, int session) {
    return m && m->engine ? m->engine->position(session) : -1;
}

frost_status frost_session_logits(frost_model* m, int session, float* out, size_t cap, size_t* n) {
    FROST_TRY(check(m));
    if (!n || (!out && cap)) return fail(FROST_ERR_INVALID_ARG, "frost_session_logits: null output");
    std::vector<float> l;
    FROST_TRY(m->engine->last_logits(session, &l));
    std::copy_n(l.begin(), std::min(cap, l.size()), out);
    *n = l.size();
    return FROST_OK;
}

frost_status frost_session_tokens(const frost_model* m, int session, int32_t* out, size_t cap, size_t* n) {
    FROST_TRY(check(m));
    if (!n || (!out && cap)) return fail(FROST_ERR_INVALID_ARG, "frost_session_tokens: null output");
    if (session < 0 || session >= m->engine->sessions())
        return fail(FROST_ERR_INVALID_ARG, "frost_session_tokens: session %d out of range", session);
    const auto& j = m->engine->journal(session);
    std::copy_n(j.begin(), std::min(cap, j.size()), out);
    *n = j.size();
    return FROST_OK;
}

frost_status frost_capsule_snapshot(frost_model* m, int session, frost_tier tier, frost_capsule_id* out) {
    FROST_TRY(check(m));
    CapsuleTier t = CapsuleTier::Device;
    FROST_TRY(to_tier(tier, &t));
    return m->capsules->snapshot(session, t, out);
}

frost_status frost_capsule_prefill_and_snapshot(frost_model* m, int session, const int32_t* ids, size_t n,
                                                frost_tier tier, frost_capsule_id* out, int32_t* next) {
    FROST_TRY(check(m));
    CapsuleTier t = CapsuleTier::Device;
    FROST_TRY(to_tier(tier, &t));
    return m->capsules->prefill_and_snapshot(session, ids, n, t, out, next);
}

frost_status frost_capsule_restore(frost_model* m, frost_capsule_id id, int session, int32_t* next) {
    FROST_TRY(check(m));
    return m->capsules->restore(id, session, next);
}

frost_status frost_capsule_restore_append(frost_model* m, frost_capsule_id id, int session, const int32_t* suffix,
                                          size_t n, const frost_sampling* sampling, int32_t* next) {
    FROST_TRY(check(m));
    const SamplingConfig sc = to_sampling(sampling);
    return m->capsules->restore_append(id, session, suffix, n, next, sampling ? &sc : nullptr);
}

frost_status frost_capsule_fork(frost_model* m, frost_capsule_id id, const int* sessions, size_t n, int32_t* next) {
    FROST_TRY(check(m));
    if (!sessions || n == 0) return fail(FROST_ERR_INVALID_ARG, "frost_capsule_fork: no sessions");
    std::vector<int32_t> toks;
    FROST_TRY(m->capsules->fork(id, std::vector<int>(sessions, sessions + n), &toks));
    if (next) std::copy(toks.begin(), toks.end(), next);
    return FROST_OK;
}

frost_status frost_capsule_rollback(frost_model* m, int session, frost_capsule_id id, int32_t* next) {
    FROST_TRY(check(m));
    return m->capsules->rollback(session, id, next);
}

frost_status frost_capsule_release(frost_model* m, frost_capsule_id id) {
    FROST_TRY(check(m));
    return m->capsules->release(id);
}

frost_status frost_capsule_move(frost_model* m, frost_capsule_id id, frost_tier tier) {
    FROST_TRY(check(m));
    CapsuleTier t = CapsuleTier::Device;
    FROST_TRY(to_tier(tier, &t));
    return m->capsules->move(id, t);
}

frost_status frost_capsule_save(frost_model* m, frost_capsule_id id, const char* path) {
    FROST_TRY(check(m));
    if (!path) return fail(FROST_ERR_INVALID_ARG, "frost_capsule_save: path is NULL");
    return m->capsules->save(id, path);
}

frost_status frost_capsule_load(frost_model* m, const char* path, frost_tier tier, frost_capsule_id* out) {
    FROST_TRY(check(m));
    if (!path) return fail(FROST_ERR_INVALID_ARG, "frost_capsule_load: path is NULL");
    CapsuleTier t = CapsuleTier::Device;
    FROST_TRY(to_tier(tier, &t));
    return m->capsules->load(path, t, out);
}

frost_status frost_capsule_get_info(const frost_model* m, frost_capsule_id id, frost_capsule_info* out) {
    FROST_TRY(check(m));
    if (!out) return fail(FROST_ERR_INVALID_ARG, "frost_capsule_get_info: out is NULL");
    CapsuleInfo info;
    FROST_TRY(m->capsules->info(id, &info));
    const CapsuleMeta& meta = info.meta;
    const CapsuleBytes b = meta.bytes();
    out->tier = frost_tier(int(info.tier));
    out->requested_boundary = meta.requested_boundary;
    out->stored_boundary = meta.stored_boundary;
    out->alignment = meta.alignment;
    out->n_remainder = meta.remainder.size();
    out->bytes_kv = b.kv;
    out->bytes_recurrent = b.recurrent;
    out->bytes_conv = b.conv;
    out->bytes_cursor = b.cursor;
    out->bytes_total = b.total();
    out->n_buffers = meta.parts.size();
    out->checksums_valid = meta.checksums_valid ? 1 : 0;
    out->created_unix_ms = meta.created_unix_ms;
    copy_hex(out->prefix_digest, meta.prefix_digest);
    copy_hex(out->model_digest, meta.deployment.model_digest);
    return FROST_OK;
}

frost_status frost_capsule_tokens(const frost_model* m, frost_capsule_id id, int32_t* out, size_t cap, size_t* n) {
    FROST_TRY(check(m));
    if (!n || (!out && cap)) return fail(FROST_ERR_INVALID_ARG, "frost_capsule_tokens: null output");
    CapsuleInfo info;
    FROST_TRY(m->capsules->info(id, &info));
    std::vector<int32_t> all = info.meta.ids;
    all.insert(all.end(), info.meta.remainder.begin(), info.meta.remainder.end());
    std::copy_n(all.begin(), std::min(cap, all.size()), out);
    *n = all.size();
    return FROST_OK;
}

frost_status frost_capsule_buffer(const frost_model* m, frost_capsule_id id, size_t i, char* name, size_t name_cap,
                                  uint64_t* bytes, uint64_t* checksum) {
    FROST_TRY(check(m));
    CapsuleInfo info;
    FROST_TRY(m->capsules->info(id, &info));
    if (i >= info.meta.parts.size())
        return fail(FROST_ERR_OUT_OF_RANGE, "frost_capsule_buffer: index %zu, capsule has %zu buffers", i,
                    info.meta.parts.size());
    const CapsulePart& p = info.meta.parts[i];
    if (name && name_cap) {
        const size_t k = std::min(name_cap - 1, p.name.size());
        std::memcpy(name, p.name.data(), k);
        name[k] = '\0';
    }
    if (bytes) *bytes = p.bytes;
    if (checksum) *checksum = p.checksum;
    return FROST_OK;
}

}  // extern "C"
