// Generation continued from a capsule file (see capsule_generate.h).
#include "model/capsule_generate.h"

#include <chrono>
#include <memory>

#include "exec/error.h"
#include "model/capsule.h"
#include "model/capsule_file.h"

namespace frost::model {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

frost_status capsule_file_boundary(const std::string& path, int64_t* boundary) {
    if (!boundary) return fail(FROST_ERR_INVALID_ARG, "capsule_file_boundary: boundary is null");
    CapsuleFileReader r;
    FROST_TRY(r.open(path));
    *boundary = r.meta().requested_boundary;
    return FROST_OK;
}

frost_status generate_from_capsule(Engine& e, const std::string& model_dir, int session, const std::string& path,
                                   const GenerateRequest& req, GenerateResult* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "generate_from_capsule: out is null");
    if (req.max_new_tokens < 1) return fail(FROST_ERR_INVALID_ARG, "generate: max_new_tokens must be >= 1");
    std::unique_ptr<CapsuleManager> mgr;
    FROST_TRY(CapsuleManager::for_model_dir(e, model_dir, {}, &mgr));
    out->ids.clear();
    const auto t0 = Clock::now();
    CapsuleId id = 0;
    // Device tier: the file streams through the manager's pinned staging ring into device memory,
    // verified chunk by chunk (no payload-sized pinned buffer); restore is then a D2D copy.
    FROST_TRY(mgr->load(path, CapsuleTier::Device, &id));
    int32_t next = -1;
    // Remainder and suffix in one prefill run (bitwise equal to a cold prefill of the whole prompt);
    // req.sampling replaces the capsule's before that run (its seed starts at the branch point).
    FROST_TRY(mgr->restore_append(id, session, req.prompt.data(), req.prompt.size(), &next, &req.sampling));
    out->ttft_ms = ms_since(t0);
    int steps = 0;
    FROST_TRY(decode_rest(e, session, req, next, out, &steps));
    out->last_logits.clear();
    out->fingerprint.clear();
    if (steps > 0 || !req.prompt.empty()) {  // else no step ran since the restore: no logits exist
        FROST_TRY(e.last_logits(session, &out->last_logits));
        out->fingerprint = logits_fingerprint(out->last_logits);
    }
    return mgr->release(id);
}

}  // namespace frost::model
