// Robot MLP weights from safetensors (see weights_file.h).
#include "robot/weights_file.h"

#include <cstring>
#include <memory>
#include <vector>

#include "exec/error.h"
#include "model/safetensors.h"

namespace frost::robot {

namespace {

frost_status take(const model::Checkpoint& ck, const std::string& path, const std::string& name,
                  std::vector<int64_t> shape, std::vector<float>* out) {
    const model::CheckpointTensor* t = ck.find(name);
    if (!t) return fail(FROST_ERR_INVALID_ARG, "%s: tensor '%s' is missing", path.c_str(), name.c_str());
    if (t->dtype != model::DType::F32)
        return fail(FROST_ERR_INVALID_ARG, "%s: tensor '%s' must be F32, got %s", path.c_str(),
                    name.c_str(), model::dtype_name(t->dtype));
    if (t->shape != shape) {
        std::string want, got;
        for (int64_t d : shape) want += std::to_string(d) + ",";
        for (int64_t d : t->shape) got += std::to_string(d) + ",";
        return fail(FROST_ERR_INVALID_ARG, "%s: tensor '%s' has shape [%s], expected [%s]", path.c_str(),
                    name.c_str(), got.c_str(), want.c_str());
    }
    out->resize(t->bytes / sizeof(float));
    std::memcpy(out->data(), t->data, t->bytes);
    return FROST_OK;
}

}  // namespace

frost_status load_mlp_weights(const std::string& path, const std::string& prefix,
                              const MlpShape& sh, MlpHostWeights* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "load_mlp_weights: null output");
    std::shared_ptr<model::Checkpoint> ck;
    FROST_TRY(model::Checkpoint::open_files({path}, &ck));
    FROST_TRY(ck->check_intact());
    MlpHostWeights w;
    const int64_t in = sh.in, h = sh.hidden, o = sh.out;
    FROST_TRY(take(*ck, path, prefix + ".w1", {h, in}, &w.w1));
    FROST_TRY(take(*ck, path, prefix + ".b1", {h}, &w.b1));
    FROST_TRY(take(*ck, path, prefix + ".g1", {h}, &w.g1));
    FROST_TRY(take(*ck, path, prefix + ".w2", {h, h}, &w.w2));
    FROST_TRY(take(*ck, path, prefix + ".b2", {h}, &w.b2));
    FROST_TRY(take(*ck, path, prefix + ".w3", {o, h}, &w.w3));
    FROST_TRY(take(*ck, path, prefix + ".b3", {o}, &w.b3));
    *out = std::move(w);
    return FROST_OK;
}

}  // namespace frost::robot
