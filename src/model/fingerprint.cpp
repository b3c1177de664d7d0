// Fingerprint computation and its size+mtime keyed cache (written via a temp file and rename).
#include "model/fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <cstdlib>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "model/quant/quant_config.h"
#include "util/fs.h"
#include "util/progress.h"
#include "util/sha256.h"

namespace frost::model {
namespace {

constexpr const char* kCacheFormat = "frost-fingerprint-v2";  // v2: keyed by the folder's real path
constexpr size_t kHashChunkBytes = size_t(8) << 20;

struct FileKey {
    std::string name;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
};

frost_status list_files(const std::string& dir, std::vector<FileKey>* out) {
    std::vector<std::string> names;
    std::string err;
    if (!util::list_dir(dir, &names, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    std::vector<std::string> chosen = {"config.json"};
    for (const auto& n : names) {
        bool weights = n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
        if (weights || n == "model.safetensors.index.json") chosen.push_back(n);
    }
    if (chosen.size() == 1) return fail(FROST_ERR_NOT_FOUND, "%s: no .safetensors files to fingerprint", dir.c_str());
    for (const auto& n : chosen) {
        util::FileStat st;
        if (!util::stat_file(util::join_path(dir, n), &st))
            return fail(FROST_ERR_NOT_FOUND, "%s: missing %s", dir.c_str(), n.c_str());
        out->push_back({n, st.size, st.mtime_ns});
    }
    return FROST_OK;
}

nlohmann::json keys_json(const std::vector<FileKey>& files) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : files) a.push_back({{"name", f.name}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
    return a;
}

// The folder's canonical path (symlinks resolved), so two spellings of one folder share a cache.
std::string real_dir(const std::string& dir) {
    char buf[PATH_MAX];
    return realpath(dir.c_str(), buf) ? std::string(buf) : dir;
}

bool read_cache(const std::string& path, const nlohmann::json& keys, std::string* hex) {
    std::string text, err;
    if (frost_fault_hit(FROST_FAULT_IO) || !util::read_file(path, &text, &err)) return false;
    try {
        auto j = nlohmann::json::parse(text);
        if (j.value("format", "") != kCacheFormat || j["files"] != keys) return false;
        std::string h = j.value("sha256", "");
        if (h.size() != 2 * util::Sha256::kDigestBytes ||
            h.find_first_not_of("0123456789abcdef") != std::string::npos)
            return false;
        *hex = h;
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

// mkdir -p for the cache folder (0700: digests reveal which models a user has).
bool make_dirs(const std::string& dir) {
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = dir.find('/', pos + 1);
        cur = dir.substr(0, pos);
        if (cur.empty()) continue;
        if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return false;
    }
    struct stat st;
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_cache(const std::string& path, const nlohmann::json& keys, const std::string& hex) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || !make_dirs(path.substr(0, slash))) return false;
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    nlohmann::json j = {{"format", kCacheFormat}, {"files", keys}, {"sha256", hex}};
    std::string err;
    if (frost_fault_hit(FROST_FAULT_IO) || !util::write_file(tmp, j.dump(2) + "\n", &err)) {
        unlink(tmp.c_str());
        return false;
    }
    if (frost_fault_hit(FROST_FAULT_IO) || rename(tmp.c_str(), path.c_str()) != 0) {
        unlink(tmp.c_str());
        return false;
    }
    return true;
}

frost_status hash_file(const std::string& path, const FileKey& key, util::Sha256* h, util::Progress* bar) {
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "%s: injected I/O fault", path.c_str());
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(FROST_ERR_IO, "cannot open %s", path.c_str());
    uint8_t size_le[8];
    for (int i = 0; i < 8; ++i) size_le[i] = uint8_t(key.size >> (8 * i));
    h->update(key.name.data(), key.name.size());
    h->update("", 1);
    h->update(size_le, sizeof(size_le));
    std::vector<uint8_t> buf(std::min<uint64_t>(kHashChunkBytes, std::max<uint64_t>(key.size, 1)));
    std::string err;
    for (uint64_t off = 0; off < key.size;) {
        size_t n = size_t(std::min<uint64_t>(buf.size(), key.size - off));
        if (!util::pread_full(fd, buf.data(), n, off, &err)) {
            close(fd);
            return fail(FROST_ERR_IO, "%s: %s", path.c_str(), err.c_str());
        }
        h->update(buf.data(), n);
        off += n;
        bar->add(n);
    }
    close(fd);
    return FROST_OK;
}

}  // namespace

std::string user_cache_dir() {
    const char* v = std::getenv("FROST_CACHE_DIR");
    if (v && *v) return v;
    v = std::getenv("XDG_CACHE_HOME");
    if (v && *v == '/') return util::join_path(v, "frost");
    v = std::getenv("HOME");
    if (v && *v) return util::join_path(util::join_path(v, ".cache"), "frost");
    return "/tmp/frost-cache-" + std::to_string(getuid());
}

std::string fingerprint_cache_path(const std::string& model_dir) {
    const std::string real = real_dir(model_dir);
    const auto d = util::sha256(real.data(), real.size());
    return util::join_path(util::join_path(user_cache_dir(), "fingerprints"), util::to_hex(d.data(), 16) + ".json");
}

frost_status model_fingerprint(const std::string& model_dir, FingerprintResult* out, bool show_progress) {
    FROST_CHECK_ARG(out != nullptr);
    std::vector<FileKey> files;
    FROST_TRY(list_files(model_dir, &files));
    const nlohmann::json keys = {{"dir", real_dir(model_dir)}, {"files", keys_json(files)}};
    const std::string cache_path = fingerprint_cache_path(model_dir);
    FingerprintResult r;
    // A config Frost cannot read counts as unquantized here (its bytes are hashed all the same;
    // loading the folder reports the problem).
    quant::QuantConfig qc;
    if (quant::load_quant_config(model_dir, &qc) != FROST_OK) qc = quant::QuantConfig{};
    r.quant = qc.summary();
    if (read_cache(cache_path, keys, &r.hex)) {
        r.from_cache = r.cached = true;
        *out = r;
        return FROST_OK;
    }
    uint64_t total = 0;
    for (const auto& f : files) total += f.size;
    util::Progress bar("fingerprint", total, show_progress);
    util::Sha256 h;
    for (const auto& f : files) FROST_TRY(hash_file(util::join_path(model_dir, f.name), f, &h, &bar));
    bar.finish();
    if (qc.quantized()) {  // absent for bf16 folders, so their digests stay what they were
        constexpr const char* kQuantRecord = "quantization";
        const std::string rec = std::string(kQuantRecord) + '\0' + r.quant;
        h.update(rec.data(), rec.size());
    }
    auto d = h.finish();
    r.hex = util::to_hex(d.data(), d.size());
    // A file that changed while we hashed must not be cached under its old key.
    std::vector<FileKey> after;
    if (list_files(model_dir, &after) == FROST_OK && keys_json(after) == keys["files"])
        r.cached = write_cache(cache_path, keys, r.hex);
    *out = r;
    return FROST_OK;
}

}  // namespace frost::model
