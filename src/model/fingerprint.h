// Deployment fingerprint: SHA-256 over config.json and every weight file of a model folder, so a
// capsule can prove it belongs to these exact weights. Hashing tens of GB takes minutes, so the
// result is cached in the user's cache folder (never in the model folder, which may be read-only or
// shared), one file per model folder, keyed by the folder's real path and each file's size and mtime.
#pragma once
#include <string>

#include "frost/exec.h"

namespace frost::model {

// The cache folder: $FROST_CACHE_DIR, else $XDG_CACHE_HOME/frost, else $HOME/.cache/frost.
std::string user_cache_dir();
// The cache file of one model folder: <user_cache_dir()>/fingerprints/<sha256(realpath)[:32]>.json.
std::string fingerprint_cache_path(const std::string& model_dir);

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
// little-endian, then its bytes. A cache that is unreadable, stale or malformed is recomputed; when
// the cache folder cannot be written the digest is still returned, uncached. Nothing is ever
// written into model_dir.
frost_status model_fingerprint(const std::string& model_dir, FingerprintResult* out, bool show_progress = false);

}  // namespace frost::model
