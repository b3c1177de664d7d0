// Deployment fingerprint: SHA-256 over config.json and every weight file of a model folder, so a
// capsule can prove it belongs to these exact weights. Hashing tens of GB takes minutes, so the
// result is cached in MODEL_DIR/.frost-fingerprint.json, keyed by each file's size and mtime.
#pragma once
#include <string>

#include "frost/exec.h"

namespace frost::model {

constexpr const char* kFingerprintCacheName = ".frost-fingerprint.json";

struct FingerprintResult {
    std::string hex;          // 64 lowercase hex digits
    bool from_cache = false;  // true when the cache matched and nothing was hashed
    bool cached = false;      // true when the result is now in the cache file
    // quant::QuantConfig::summary() of config.json ("none" for bf16). The weight format is part of
    // the deployment: a quantized folder's digest ends with "quantization", a NUL and this string
    // after the files (bf16 digests are unchanged).
    std::string quant;
};

// Digest = SHA-256 of, for each file in order (config.json, then the safetensors files sorted by
// name, plus model.safetensors.index.json when present): its name, a NUL, its size as 8 bytes
// little-endian, then its bytes. A cache that is unreadable, stale or malformed is recomputed; a
// folder that is not writable is hashed without caching.
frost_status model_fingerprint(const std::string& model_dir, FingerprintResult* out, bool show_progress = false);

}  // namespace frost::model
