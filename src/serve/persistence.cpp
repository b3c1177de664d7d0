// Capsule-directory persistence (see persistence.h): sidecars, start-up re-indexing with
// quarantine, and the flush on a graceful stop. Every write/fsync/rename/read passes the I/O
// fault gate first so the failure paths are testable.
#include "serve/persistence.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <random>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "model/capsule_file.h"
#include "serve/http_route.h"
#include "serve/ids.h"
#include "util/fs.h"

namespace frost::serve {

namespace {

using nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string capsule_file(const std::string& dir, const std::string& id) {
    return util::join_path(dir, id + kCapsuleFileExt);
}

std::string sidecar_file(const std::string& dir, const std::string& id) {
    return util::join_path(dir, id + kSidecarExt);
}

frost_status fsync_dir(const std::string& dir) {
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "fsync %s: injected I/O error", dir.c_str());
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return fail(FROST_ERR_IO, "fsync %s: cannot open the directory", dir.c_str());
    const int rc = ::fsync(fd);
    ::close(fd);
    return rc == 0 ? FROST_OK : fail(FROST_ERR_IO, "fsync %s failed", dir.c_str());
}

// Temp file in the same directory, write, fsync, rename, fsync the directory: a crash leaves the
// old sidecar or the new one, and at worst a temp file that the next start removes.
frost_status write_atomic(const std::string& dir, const std::string& path, const std::string& data) {
    const std::string tmp = path + model::kCapsuleTempMarker + std::to_string(::getpid());
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "write %s: injected I/O error", tmp.c_str());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return fail(FROST_ERR_IO, "cannot create %s", tmp.c_str());
    // Empty when every step passed, else the first step that failed.
    const std::string err = [&]() -> std::string {
        std::string why;
        const bool written = util::write_full(fd, data.data(), data.size(), &why);
        if (!written) why = "write: " + why;
        else if (frost_fault_hit(FROST_FAULT_IO)) why = "injected I/O error at fsync";
        else if (::fsync(fd) != 0) why = "fsync failed";
        ::close(fd);
        if (!why.empty()) return why;
        if (frost_fault_hit(FROST_FAULT_IO)) return "injected I/O error at rename";
        if (::rename(tmp.c_str(), path.c_str()) != 0) return "rename failed";
        return "";
    }();
    if (!err.empty()) {
        ::unlink(tmp.c_str());
        return fail(FROST_ERR_IO, "write %s: %s", path.c_str(), err.c_str());
    }
    return fsync_dir(dir);
}

// Moves `name` into <dir>/quarantine/ (kept for inspection, never served again).
void quarantine(const std::string& dir, const std::string& name, const std::string& why, ReindexReport* rep) {
    const std::string qdir = util::join_path(dir, kQuarantineDir);
    std::string err;
    const std::string from = util::join_path(dir, name);
    if (!util::make_dirs(qdir, &err) || frost_fault_hit(FROST_FAULT_IO) ||
        ::rename(from.c_str(), util::join_path(qdir, name).c_str()) != 0) {
        // It cannot be kept aside: it must still never be served, so it goes.
        ::unlink(from.c_str());
        rep->notes.push_back("removed " + name + " (quarantine failed): " + why);
    } else {
        rep->notes.push_back("quarantined " + name + ": " + why);
    }
    rep->quarantined++;
}

// One event that re-indexing appends on behalf of a claim.
void add_event(ClaimLog* log, const std::string& id, const char* event, Tier tier, bool pinned, uint64_t bytes,
               const std::string& reason, std::vector<std::string> blocking = {}, bool retained = false) {
    ClaimEvent e;
    e.retained = retained;
    e.claim_id = id;
    e.event = event;
    e.tier = tier;
    e.pinned = pinned;
    e.bytes = bytes;
    e.reason = reason;
    e.blocking = std::move(blocking);
    log->append(std::move(e));
}

void log_gone(ClaimLog* log, const std::string& id, const char* event, const std::string& reason, bool pinned) {
    if (!log || !log->previously_live(id)) return;  // a claim this log never had: nothing to end
    add_event(log, id, event, Tier::Disk, pinned, 0, reason);
}

// Ends a claim the previous run left live whose capsule did not come back, along the claim
// state machine from its last event, so the continued log replays as one valid history.
void end_lost_claim(ClaimLog* log, const std::string& id, const ClaimLog::OpenClaim& c) {
    const std::string why = "lost at restart: not in the capsule dir (memory tier at a crash, or never persisted)";
    auto add = [&](const char* event, std::vector<std::string> blocking = {}, bool retained = false) {
        add_event(log, id, event, c.tier, c.pinned, 0, why, std::move(blocking), retained);
    };
    const std::string& last = c.last_event;
    if (last == claim_event::kAccepted) return add(claim_event::kRefused);
    if (last == claim_event::kRestoreRequired) add(claim_event::kRestorationFailed);
    if (last == claim_event::kRestoreRequired || last == claim_event::kRestorationFailed)
        add(claim_event::kRefused, {id}, last == claim_event::kRestorationFailed && c.retained);
    add(claim_event::kEvicted);
}

// A restore that failed closed for good (restoration_failed without `retained`): the claim is
// ending, its capsule is to be removed. A retained one (the heap refused, T33) keeps it.
bool failed_for_good(const ClaimLog& log, const std::string& id) {
    const auto live = log.previously_live_claims();
    const auto it = live.find(id);
    return it != live.end() && it->second.last_event == claim_event::kRestorationFailed && !it->second.retained;
}

// Brings the claim of a capsule adopted at start to "live on disk" in the log, as its files say it
// is: the crash came between the files' last write and the event that would have followed
// (materialized, offloaded, restored), a policy change reached the sidecar or the log but not
// both, or the log lost its record (a power cut takes its unsynced tail).
void settle_adopted_claim(ClaimLog* log, const std::string& id, uint64_t bytes, bool pinned) {
    const auto live = log->previously_live_claims();
    const auto it = live.find(id);
    auto add = [&](const char* event, const std::string& why) {
        add_event(log, id, event, Tier::Disk, pinned, bytes, why);
    };
    const std::string interrupted = "at start: its files were whole; the crash came before this event";
    if (it == live.end()) {
        const std::string why = "adopted at start: the claim log had no record of it (a lost tail)";
        add(claim_event::kAccepted, why);
        add(claim_event::kMaterialized, why);
        return;
    }
    const std::string& last = it->second.last_event;
    if (last == claim_event::kAccepted) add(claim_event::kMaterialized, interrupted);
    else if (last == claim_event::kDemoted) add(claim_event::kOffloaded, interrupted);
    else if (last == claim_event::kRestoreRequired) add(claim_event::kRestored, "at start: the restore in flight ended with the process; the capsule is live on disk");
    else if (last == claim_event::kRestorationFailed && it->second.retained)
        add_event(log, id, claim_event::kRefused, Tier::Disk, pinned, bytes,
                  "at start: the refusal of a restore the heap refused (the capsule is kept)", {id}, true);
    if (it->second.pinned != pinned)
        add(pinned ? claim_event::kPinned : claim_event::kUnpinned, "at start: the sidecar's policy (the change in flight at the crash)");
}

}  // namespace

size_t count_temp_files(const std::string& dir) {
    std::vector<std::string> names;
    std::string err;
    if (!util::list_dir(dir, &names, &err)) return 0;
    size_t n = 0;
    for (const auto& name : names) n += name.find(model::kCapsuleTempMarker) != std::string::npos;
    return n;
}

double wall_clock_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

std::string hmac_sha256_hex(const std::string& key, const std::string& msg) {
    std::string k = key;
    if (k.size() > util::Sha256::kBlockBytes) {
        const Digest d = sha256(k.data(), k.size());
        k.assign(reinterpret_cast<const char*>(d.data()), d.size());
    }
    k.resize(util::Sha256::kBlockBytes, '\0');
    std::string ipad = k, opad = k;
    for (size_t i = 0; i < k.size(); ++i) {
        ipad[i] = char(ipad[i] ^ 0x36);
        opad[i] = char(opad[i] ^ 0x5c);
    }
    util::Sha256 inner;
    inner.update(ipad.data(), ipad.size());
    inner.update(msg.data(), msg.size());
    const Digest ih = inner.finish();
    util::Sha256 outer;
    outer.update(opad.data(), opad.size());
    outer.update(ih.data(), ih.size());
    const Digest oh = outer.finish();
    return util::to_hex(oh.data(), oh.size());
}

// What the mac covers: every field but the mac (key-sorted compact JSON), then the owner's key.
std::string sidecar_mac(const json& fields_without_mac, const std::string& owner_key, const SidecarAuth& auth) {
    return hmac_sha256_hex(auth.secret, fields_without_mac.dump() + "\n" + owner_key);
}

}  // namespace

frost_status load_sidecar_auth(const std::string& dir, std::map<std::string, std::string> owner_keys,
                               SidecarAuth* out) {
    const std::string path = util::join_path(dir, kSidecarSecretFile);
    std::string text, err;
    if (!util::read_file(path, &text, &err)) {
        std::string raw(32, '\0');
        std::random_device rd;
        for (auto& ch : raw) ch = char(rd() & 0xFF);
        const std::string hex = util::to_hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
        const std::string tmp = path + model::kCapsuleTempMarker + std::to_string(::getpid());
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return fail(FROST_ERR_IO, "cannot create %s", tmp.c_str());
        const bool ok = util::write_full(fd, hex.data(), hex.size(), &err) && ::fsync(fd) == 0;
        ::close(fd);
        // link() fails if another start made the secret meanwhile: then that one is read.
        const bool linked = ok && ::link(tmp.c_str(), path.c_str()) == 0;
        ::unlink(tmp.c_str());
        if (linked) (void)fsync_dir(dir);
        if (!util::read_file(path, &text, &err)) return fail(FROST_ERR_IO, "sidecar secret %s: %s", path.c_str(), err.c_str());
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (text.size() != 64) return fail(FROST_ERR_CORRUPT, "sidecar secret %s: not 64 hex digits", path.c_str());
    out->secret.clear();
    for (size_t i = 0; i < 64; i += 2) {
        const int hi = std::isxdigit(uint8_t(text[i])) ? std::stoi(text.substr(i, 1), nullptr, 16) : -1;
        const int lo = std::isxdigit(uint8_t(text[i + 1])) ? std::stoi(text.substr(i + 1, 1), nullptr, 16) : -1;
        if (hi < 0 || lo < 0) return fail(FROST_ERR_CORRUPT, "sidecar secret %s: not 64 hex digits", path.c_str());
        out->secret.push_back(char(hi * 16 + lo));
    }
    out->owner_keys = std::move(owner_keys);
    return FROST_OK;
}

std::string sidecar_to_json(const SidecarMeta& m, const SidecarAuth* auth) {
    json j = {{"format", kSidecarFormat}, {"id", m.id},         {"owner", m.owner},
              {"pinned", m.pinned},       {"priority", m.priority}, {"ttl_s", m.ttl_s},
              {"expires_unix", m.expires_unix}, {"session_id", m.session_id}, {"token_digest", m.token_digest}};
    if (auth) {
        auto k = auth->owner_keys.find(m.owner);
        j["mac"] = sidecar_mac(j, k == auth->owner_keys.end() ? std::string() : k->second, *auth);
    }
    return j.dump(2) + "\n";
}

frost_status sidecar_from_json(const std::string& text, SidecarMeta* out, const SidecarAuth* auth) {
    json j = json::parse(text, nullptr, false);
    if (!j.is_object()) return fail(FROST_ERR_CORRUPT, "sidecar: not a JSON object");
    if (auth) {
        if (!j.contains("mac") || !j["mac"].is_string())
            return fail(FROST_ERR_CORRUPT, "sidecar: not authenticated (no mac)");
        const std::string mac = j["mac"].get<std::string>();
        j.erase("mac");
        const std::string owner = j.contains("owner") && j["owner"].is_string() ? j["owner"].get<std::string>() : "";
        auto k = auth->owner_keys.find(owner);
        if (k == auth->owner_keys.end())
            return fail(FROST_ERR_CORRUPT, "sidecar: names an unknown key '%s' (not configured on this server)",
                        owner.substr(0, 32).c_str());
        if (!ct_equal(mac, sidecar_mac(j, k->second, *auth)))
            return fail(FROST_ERR_CORRUPT, "sidecar: not authenticated (mac mismatch: edited, or its key changed)");
    }
    auto str = [&](const char* k, std::string* v) {
        if (!j.contains(k) || !j[k].is_string()) return false;
        *v = j[k].get<std::string>();
        return true;
    };
    std::string format, why;
    SidecarMeta m;
    if (!str("format", &format) || format != kSidecarFormat)
        return fail(FROST_ERR_CORRUPT, "sidecar: format is not %s", kSidecarFormat);
    if (!str("id", &m.id) || !valid_id(m.id, &why)) return fail(FROST_ERR_CORRUPT, "sidecar: bad id (%s)", why.c_str());
    if (!str("owner", &m.owner) || m.owner.empty()) return fail(FROST_ERR_CORRUPT, "sidecar: bad owner");
    if (!str("session_id", &m.session_id)) return fail(FROST_ERR_CORRUPT, "sidecar: bad session_id");
    if (!str("token_digest", &m.token_digest)) return fail(FROST_ERR_CORRUPT, "sidecar: bad token_digest");
    if (!j.contains("pinned") || !j["pinned"].is_boolean()) return fail(FROST_ERR_CORRUPT, "sidecar: bad pinned");
    if (!j.contains("priority") || !j["priority"].is_number_integer())
        return fail(FROST_ERR_CORRUPT, "sidecar: bad priority");
    if (!j.contains("ttl_s") || !j["ttl_s"].is_number() || j["ttl_s"].get<double>() < 0)
        return fail(FROST_ERR_CORRUPT, "sidecar: bad ttl_s");
    if (!j.contains("expires_unix") || !j["expires_unix"].is_number() || j["expires_unix"].get<double>() < 0)
        return fail(FROST_ERR_CORRUPT, "sidecar: bad expires_unix");
    m.pinned = j["pinned"].get<bool>();
    const int64_t prio = j["priority"].get<int64_t>();
    if (prio < INT32_MIN || prio > INT32_MAX) return fail(FROST_ERR_CORRUPT, "sidecar: priority out of range");
    m.priority = int(prio);
    m.ttl_s = j["ttl_s"].get<double>();
    m.expires_unix = j["expires_unix"].get<double>();
    *out = std::move(m);
    return FROST_OK;
}

ReindexReport reindex_capsule_dir(const std::string& dir, EngineIface& engine, CapsuleStore& store, ClaimLog* log,
                                  double now_unix, const SidecarAuth* auth) {
    ReindexReport rep;
    std::vector<std::string> names;
    std::string err;
    if (!util::list_dir(dir, &names, &err)) {
        if (!util::make_dirs(dir, &err)) rep.notes.push_back("cannot create " + dir + ": " + err);
        return rep;
    }
    struct Pair {
        bool capsule = false, sidecar = false;
    };
    std::map<std::string, Pair> pairs;  // stem -> which halves exist
    for (const auto& name : names) {
        if (name.find(model::kCapsuleTempMarker) != std::string::npos) {
            ::unlink(util::join_path(dir, name).c_str());
            rep.temp_removed++;
            rep.notes.push_back("removed temp file " + name + " (an interrupted write)");
        } else if (ends_with(name, kCapsuleFileExt)) {
            pairs[name.substr(0, name.size() - std::string(kCapsuleFileExt).size())].capsule = true;
        } else if (ends_with(name, kSidecarExt)) {
            pairs[name.substr(0, name.size() - std::string(kSidecarExt).size())].sidecar = true;
        }
    }
    for (const auto& entry : pairs) {
        // Named, not structured bindings: the lambda below captures them (clang 14 cannot).
        const std::string& stem = entry.first;
        const Pair& p = entry.second;
        const std::string cap_name = stem + kCapsuleFileExt, side_name = stem + kSidecarExt;
        auto quarantine_pair = [&](const std::string& why, const SidecarMeta* m) {
            if (p.capsule) quarantine(dir, cap_name, why, &rep);
            if (p.sidecar) quarantine(dir, side_name, why, &rep);
            if (m) log_gone(log, m->id, claim_event::kEvicted, "quarantined at start: " + why, m->pinned);
        };
        if (!p.sidecar) {
            quarantine_pair("capsule file without a sidecar (owner unknown)", nullptr);
            continue;
        }
        if (!p.capsule) {
            quarantine_pair("sidecar without a capsule file", nullptr);
            continue;
        }
        SidecarMeta m;
        std::string text;
        if (frost_fault_hit(FROST_FAULT_IO) || !util::read_file(sidecar_file(dir, stem), &text, &err)) {
            quarantine_pair("sidecar unreadable", nullptr);
            continue;
        }
        if (sidecar_from_json(text, &m, auth) != FROST_OK) {
            quarantine_pair(last_error(), nullptr);
            continue;
        }
        if (m.id != stem) {
            quarantine_pair("sidecar id '" + m.id + "' does not match the file name", nullptr);
            continue;
        }
        if (m.expires_unix > 0 && m.expires_unix <= now_unix) {
            remove_persisted(dir, m.id);
            rep.expired++;
            rep.notes.push_back("expired " + m.id + " (TTL passed while stopped)");
            log_gone(log, m.id, claim_event::kExpired, "ttl", m.pinned);
            continue;
        }
        if (log && (log->previously_ended(m.id) || failed_for_good(*log, m.id))) {
            // The log ended the claim (or failed it closed) before the crash: finish the removal.
            remove_persisted(dir, m.id);
            rep.removed++;
            rep.notes.push_back("removed " + m.id + ": its claim had ended (a removal in flight at the crash)");
            continue;
        }
        uint64_t handle = 0, bytes = 0;
        std::vector<int32_t> tokens;
        if (engine.import(capsule_file(dir, stem), &handle, &bytes, &tokens) != FROST_OK) {
            quarantine_pair("capsule file rejected: " + last_error(), &m);
            continue;
        }
        if (digest_hex(token_digest(tokens.data(), tokens.size())) != m.token_digest) {
            engine.drop(handle);
            quarantine_pair("capsule tokens do not match the sidecar's digest", &m);
            continue;
        }
        CapsuleRecord rec;
        rec.id = m.id;
        rec.owner = m.owner;
        rec.bytes = bytes;
        rec.tier = Tier::Disk;
        rec.pinned = m.pinned;
        rec.priority = m.priority;
        rec.ttl_s = m.ttl_s;
        rec.tokens = std::move(tokens);
        rec.handle = handle;
        rec.session_id = m.session_id;
        rec.persisted = true;
        const double ttl_left = m.expires_unix > 0 ? m.expires_unix - now_unix : 0;
        const std::pair<std::string, std::string> session{rec.owner, rec.session_id};
        const bool pinned = rec.pinned;
        if (store.adopt(std::move(rec), ttl_left) != FROST_OK) {
            const std::string why = last_error();
            engine.drop(handle);
            remove_persisted(dir, m.id);
            rep.notes.push_back("dropped " + m.id + ": " + why);
            log_gone(log, m.id, claim_event::kEvicted, "no room at start: " + why, m.pinned);
            continue;
        }
        rep.adopted++;
        if (log) settle_adopted_claim(log, m.id, bytes, pinned);
        if (!session.second.empty()) rep.sessions.push_back(session);
    }
    if (log) {
        std::set<std::string> kept;
        for (const CapsuleRecord* r : store.all()) kept.insert(r->id);
        for (const auto& [id, c] : log->previously_live_claims()) {
            if (kept.count(id)) continue;
            end_lost_claim(log, id, c);
            rep.lost++;
        }
    }
    return rep;
}

frost_status write_sidecar(const std::string& dir, const CapsuleRecord& r, double ttl_left_s, double now_unix,
                           const SidecarAuth* auth) {
    SidecarMeta m;
    m.id = r.id;
    m.owner = r.owner;
    m.pinned = r.pinned;
    m.priority = r.priority;
    m.ttl_s = r.ttl_s;
    m.expires_unix = r.expires_at > 0 ? now_unix + ttl_left_s : 0;
    m.session_id = r.session_id;
    m.token_digest = digest_hex(r.digest);
    return write_atomic(dir, sidecar_file(dir, r.id), sidecar_to_json(m, auth));
}

frost_status persist_to_disk(const std::string& dir, EngineIface& engine, CapsuleRecord& rec, double ttl_left_s,
                             double now_unix, const SidecarAuth* auth) {
    std::string why;
    if (!valid_id(rec.id, &why)) return fail(FROST_ERR_INVALID_ARG, "persist: bad capsule id (%s)", why.c_str());
    FROST_TRY(engine.move_to_file(&rec.handle, capsule_file(dir, rec.id)));
    rec.persisted = true;
    // The sidecar is the acknowledgement: without it the next start quarantines the file.
    return write_sidecar(dir, rec, ttl_left_s, now_unix, auth);
}

FlushReport flush_capsule_dir(const std::string& dir, EngineIface& engine, CapsuleStore& store, double now_unix,
                              const SidecarAuth* auth) {
    FlushReport rep;
    std::string err;
    if (!util::make_dirs(dir, &err)) {
        rep.notes.push_back("cannot create " + dir + ": " + err);
        return rep;
    }
    std::vector<std::string> done;
    for (const CapsuleRecord* r : store.all()) {
        frost_status st = FROST_OK;
        if (!r->persisted || !util::file_exists(capsule_file(dir, r->id))) st = engine.persist(r->handle, capsule_file(dir, r->id));
        if (st == FROST_OK) st = write_sidecar(dir, *r, store.ttl_left(*r), now_unix, auth);
        if (st != FROST_OK) {
            // A capsule file without its sidecar would be quarantined at the next start: remove both.
            const std::string why = last_error();
            remove_persisted(dir, r->id);
            rep.failed++;
            rep.notes.push_back("not persisted " + r->id + ": " + why);
            continue;
        }
        rep.written++;
        done.push_back(r->id);
    }
    for (const auto& id : done) store.set_persisted(id, true);
    return rep;
}

void remove_persisted(const std::string& dir, const std::string& id) {
    std::string why;
    if (dir.empty() || !valid_id(id, &why)) return;
    ::unlink(capsule_file(dir, id).c_str());
    ::unlink(sidecar_file(dir, id).c_str());
    // A removal is acknowledged (DELETE answers) after this: a power cut must not bring it back.
    // Not fault-gated, like the unlinks: cleanup runs on the failure paths too.
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)::fsync(fd);
        ::close(fd);
    }
}

}  // namespace frost::serve
