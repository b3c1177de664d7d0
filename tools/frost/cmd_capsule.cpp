// `frost capsule snapshot|inspect|verify`: create a capsule file from a prompt, print what a file
// holds (boundaries, tokens, bytes per part, fingerprint, checksums), and check that a file can be
// restored into a given model (non-zero exit on any problem).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "engine_args.h"
#include "model/capsule.h"
#include "model/capsule_file.h"
#include "model/engine.h"

namespace {

namespace fm = frost::model;

constexpr const char* kUsage =
    "usage: frost capsule snapshot --model DIR --prompt-ids IDS --out FILE [--backend cpu|cuda] [--json]\n"
    "       frost capsule inspect FILE [--json]\n"
    "       frost capsule verify FILE --model DIR [--backend cpu|cuda] [--json]\n"
    "  snapshot: prefills IDS (comma-separated or @FILE), freezes the state at the aligned boundary\n"
    "            floor(P/64)*64 with the remaining ids in the metadata, and writes FILE crash-safely.\n"
    "  inspect:  prints boundaries, tokens, bytes per part, fingerprint and per-buffer checksums, and\n"
    "            verifies the header checksum, the file size and every payload checksum.\n"
    "  verify:   validates FILE against the model (fingerprint, layout, checksums) and restores it into\n"
    "            a session; exit 0 only if everything holds.";

constexpr int kMinSeq = 64;  // smallest engine built for snapshot/verify

int usage_error(const char* what) {
    std::fprintf(stderr, "frost capsule: %s\n%s\n", what, kUsage);
    return 2;
}

int lib_error(const char* what) {
    std::fprintf(stderr, "frost capsule %s: %s\n", what, frost_last_error());
    return 1;
}

struct Args {
    std::string model, prompt_ids, out, file, backend = "cpu";
    bool json = false;
};

bool parse(const std::vector<std::string>& a, size_t from, Args* o) {
    for (size_t i = from; i < a.size(); ++i) {
        if (a[i] == "--json") { o->json = true; continue; }
        const bool flag = a[i].rfind("--", 0) == 0;
        if (!flag) {
            if (!o->file.empty()) return false;
            o->file = a[i];
            continue;
        }
        if (i + 1 >= a.size()) return false;
        const std::string& v = a[++i];
        if (a[i - 1] == "--model") o->model = v;
        else if (a[i - 1] == "--prompt-ids") o->prompt_ids = v;
        else if (a[i - 1] == "--out") o->out = v;
        else if (a[i - 1] == "--backend") o->backend = v;
        else return false;
    }
    return true;
}

nlohmann::json describe(const fm::CapsuleMeta& m) {
    nlohmann::json j = fm::capsule_meta_to_json(m);
    const fm::CapsuleBytes b = m.bytes();
    j["bytes"] = {{"kv", b.kv}, {"recurrent", b.recurrent}, {"conv", b.conv}, {"cursor", b.cursor},
                  {"other", b.other}, {"total", b.total()}, {"payload", m.payload_bytes}};
    j["tokens"] = m.ids.size() + m.remainder.size();
    return j;
}

void print_text(const fm::CapsuleMeta& m) {
    const fm::CapsuleBytes b = m.bytes();
    std::printf("boundary   requested %lld, stored %lld (alignment %d, %zu remainder ids)\n",
                static_cast<long long>(m.requested_boundary), static_cast<long long>(m.stored_boundary), m.alignment,
                m.remainder.size());
    std::printf("tokens     %zu, prefix digest %s\n", m.ids.size() + m.remainder.size(), m.prefix_digest.c_str());
    std::printf("bytes      kv %llu, recurrent %llu, conv %llu, cursor %llu, total %llu (payload %zu)\n",
                static_cast<unsigned long long>(b.kv), static_cast<unsigned long long>(b.recurrent),
                static_cast<unsigned long long>(b.conv), static_cast<unsigned long long>(b.cursor),
                static_cast<unsigned long long>(b.total()), m.payload_bytes);
    const auto& d = m.deployment;
    std::printf("deployment model %s\n           dtype %s, engine ABI %u, alignment %d, max_seq_len %d, backend %s\n"
                "           layout %s\n",
                d.model_digest.c_str(), d.dtype.c_str(), d.engine_abi, d.alignment, d.max_seq_len, d.backend.c_str(),
                d.layout_digest.c_str());
    std::printf("buffers    %zu\n", m.parts.size());
    for (const auto& p : m.parts)
        std::printf("  %-28s %-9s offset %10zu  bytes %10zu  xxh64 %016llx\n", p.name.c_str(),
                    fm::capsule_part_kind_name(p.kind), p.offset, p.bytes, static_cast<unsigned long long>(p.checksum));
}

bool make_engine(const Args& a, int max_seq, std::unique_ptr<fm::Engine>* e) {
    fm::EngineOptions o;
    if (!frost::cli::parse_backend(a.backend, &o.backend)) return false;
    o.max_seq_len = std::max(max_seq, kMinSeq);
    return fm::Engine::create(a.model, o, e) == FROST_OK;
}

int run_snapshot(const Args& a) {
    if (a.model.empty() || a.prompt_ids.empty() || a.out.empty()) return usage_error("snapshot needs --model, --prompt-ids and --out");
    std::vector<int32_t> ids;
    std::string err;
    if (!frost::cli::read_prompt_ids(a.prompt_ids, &ids, &err)) return usage_error(err.c_str());
    std::unique_ptr<fm::Engine> e;
    if (!make_engine(a, int(ids.size()) + 1, &e)) return lib_error("snapshot");
    std::unique_ptr<fm::CapsuleManager> mgr;
    if (fm::CapsuleManager::for_model_dir(*e, a.model, {}, &mgr) != FROST_OK) return lib_error("snapshot");
    fm::CapsuleId id = 0;
    int32_t next = -1;
    if (mgr->prefill_and_snapshot(0, ids.data(), ids.size(), fm::CapsuleTier::Host, &id, &next) != FROST_OK)
        return lib_error("snapshot");
    if (mgr->save(id, a.out) != FROST_OK) return lib_error("snapshot");
    fm::CapsuleInfo info;
    mgr->info(id, &info);
    if (a.json) {
        nlohmann::json j = describe(info.meta);
        j["file"] = a.out;
        j["next_token"] = next;
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("wrote %s\n", a.out.c_str());
        print_text(info.meta);
        std::printf("next token %d\n", next);
    }
    return 0;
}

int run_inspect(const Args& a) {
    if (a.file.empty()) return usage_error("inspect needs FILE");
    fm::CapsuleFileReader r;
    if (r.open(a.file) != FROST_OK) return lib_error("inspect");
    // Verify the payload too (checksums and zero padding) through a CPU context's pinned memory.
    frost_ctx* ctx = nullptr;
    std::string payload = "ok";
    bool ok = true;
    if (frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx) == FROST_OK) {
        frost_buffer* buf = nullptr;
        if (r.read_payload(ctx, &buf) == FROST_OK) frost_buffer_free(buf);
        else { payload = frost_last_error(); ok = false; }
        frost_ctx_destroy(ctx);
    } else {
        payload = frost_last_error();
        ok = false;
    }
    if (a.json) {
        nlohmann::json j = describe(r.meta());
        j["file"] = a.file;
        j["file_bytes"] = r.file_bytes();
        j["checksums_ok"] = ok;
        if (!ok) j["error"] = payload;
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("file       %s (%llu bytes)\n", a.file.c_str(), static_cast<unsigned long long>(r.file_bytes()));
        print_text(r.meta());
        std::printf("checksums  %s\n", payload.c_str());
    }
    return ok ? 0 : 1;
}

int run_verify(const Args& a) {
    if (a.file.empty() || a.model.empty()) return usage_error("verify needs FILE and --model");
    fm::CapsuleFileReader r;
    if (r.open(a.file) != FROST_OK) return lib_error("verify");
    const int64_t P = r.meta().requested_boundary;
    std::unique_ptr<fm::Engine> e;
    if (!make_engine(a, int(P) + 1, &e)) return lib_error("verify");
    std::unique_ptr<fm::CapsuleManager> mgr;
    if (fm::CapsuleManager::for_model_dir(*e, a.model, {}, &mgr) != FROST_OK) return lib_error("verify");
    fm::CapsuleId id = 0;
    if (mgr->load(a.file, fm::CapsuleTier::Host, &id) != FROST_OK) return lib_error("verify");
    int32_t next = -1;
    if (mgr->restore(id, 0, &next) != FROST_OK) return lib_error("verify");
    std::vector<int32_t> all = r.meta().ids;
    all.insert(all.end(), r.meta().remainder.begin(), r.meta().remainder.end());
    if (e->position(0) != P || e->journal(0) != all) {
        std::fprintf(stderr, "frost capsule verify: restored session does not hold the capsule's %lld tokens\n",
                     static_cast<long long>(P));
        return 1;
    }
    if (a.json) {
        std::printf("%s\n", nlohmann::json{{"file", a.file}, {"ok", true}, {"requested_boundary", P},
                                           {"stored_boundary", r.meta().stored_boundary}, {"next_token", next}}
                                .dump()
                                .c_str());
    } else {
        std::printf("ok: %s restores into %s at position %lld (stored %lld), next token %d\n", a.file.c_str(),
                    a.model.c_str(), static_cast<long long>(P), static_cast<long long>(r.meta().stored_boundary), next);
    }
    return 0;
}

int run_capsule(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::printf("%s\n", kUsage);
        return args.empty() ? 2 : 0;
    }
    Args a;
    if (!parse(args, 1, &a)) return usage_error("bad arguments");
    if (args[0] == "snapshot") return run_snapshot(a);
    if (args[0] == "inspect") return run_inspect(a);
    if (args[0] == "verify") return run_verify(a);
    return usage_error(("unknown subcommand " + args[0]).c_str());
}

}  // namespace

FROST_COMMAND("capsule", "snapshot a prompt into a capsule file, inspect or verify one", kUsage, run_capsule);
