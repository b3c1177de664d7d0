// Safetensors parsing and the memory-mapped Checkpoint. Format: u64 little-endian N, N bytes of
// JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the
// data region. We accept only files whose tensors tile the data region exactly.
#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "util/fs.h"

namespace frost::model {
namespace {

constexpr size_t kLengthPrefixBytes = 8;
constexpr int kMaxHeaderDepth = 3;  // root object -> tensor object -> shape/offset array
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

struct DTypeName {
    DType t;
    const char* name;
    size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::F32, "F32", 4},   {DType::BF16, "BF16", 2}, {DType::F16, "F16", 2},
    {DType::F64, "F64", 8},   {DType::I64, "I64", 8},   {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},     {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Parses JSON while recording the first duplicate key of any object and the maximum depth.
// nlohmann's DOM keeps the last of two equal keys silently, so this is done in the callback.
struct StrictJson {
    nlohmann::json value;
    std::string duplicate_key;
    bool too_deep = false;
    std::string parse_error;
};

// Maximum bracket nesting of the text, skipping string contents. Run before parsing so a header of
// 10^8 '[' is refused in one pass instead of being built into a DOM.
int max_nesting(const char* p, const char* end) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (; p < end; ++p) {
        if (in_string) {
            if (*p == '\\') ++p;
            else if (*p == '"') in_string = false;
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == '[' || *p == '{') {
            deepest = std::max(deepest, ++depth);
        } else if (*p == ']' || *p == '}') {
            --depth;
        }
    }
    return deepest;
}

bool parse_strict_json(const char* begin, const char* end, StrictJson* out) {
    if (max_nesting(begin, end) > kMaxHeaderDepth) {
        out->too_deep = true;
        out->parse_error = "nesting deeper than " + std::to_string(kMaxHeaderDepth) + " levels";
        return false;
    }
    std::vector<std::set<std::string>> keys_stack;
    auto cb = [&](int /*depth*/, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (ev == E::object_start) keys_stack.emplace_back();
        else if (ev == E::object_end && !keys_stack.empty()) keys_stack.pop_back();
        else if (ev == E::key && !keys_stack.empty()) {
            const std::string& k = parsed.get_ref<const std::string&>();
            if (!keys_stack.back().insert(k).second && out->duplicate_key.empty()) out->duplicate_key = k;
        }
        return true;
    };
    try {
        out->value = nlohmann::json::parse(begin, end, cb, /*allow_exceptions=*/true);
    } catch (const std::exception& e) {
        out->parse_error = e.what();
        return false;
    }
    return true;
}

frost_status corrupt(const std::string& source, const std::string& what) {
    return fail(FROST_ERR_CORRUPT, "%s: %s", source.c_str(), what.c_str());
}

frost_status parse_entry(const std::string& source, const std::string& name, const nlohmann::json& v,
                         SafetensorsEntry* e) {
    const std::string where = "tensor '" + name + "': ";
    if (!v.is_object()) return corrupt(source, where + "entry is not an object");
    for (auto it = v.begin(); it != v.end(); ++it)
        if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
            return corrupt(source, where + "unknown field '" + it.key() + "'");
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) return corrupt(source, where + "missing string 'dtype'");
    if (!parse_dtype(dt->get<std::string>(), &e->dtype))
        return corrupt(source, where + "unknown dtype '" + dt->get<std::string>() +
                                   "' (known: F32 BF16 F16 F64 I64 I32 I16 I8 U8 BOOL F8_E4M3 F8_E5M2)");
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) return corrupt(source, where + "missing array 'shape'");
    uint64_t numel = 1;
    for (const auto& d : *sh) {
        if (!d.is_number_unsigned())
            return corrupt(source, where + "shape entries must be non-negative integers");
        uint64_t dim = d.get<uint64_t>();
        if (dim > uint64_t(INT64_MAX) || mul_overflows(numel, dim, &numel))
            return corrupt(source, where + "shape product overflows 64 bits");
        e->shape.push_back(int64_t(dim));
    }
    uint64_t bytes = 0;
    if (mul_overflows(numel, dtype_size(e->dtype), &bytes))
        return corrupt(source, where + "byte size (numel x dtype size) overflows 64 bits");
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
        return corrupt(source, where + "'data_offsets' must be [begin, end] non-negative integers");
    e->begin = (*off)[0].get<uint64_t>();
    e->end = (*off)[1].get<uint64_t>();
    if (e->end < e->begin)
        return corrupt(source, where + "data_offsets end " + std::to_string(e->end) + " < begin " +
                                   std::to_string(e->begin));
    if (e->end - e->begin != bytes)
        return corrupt(source, where + "data_offsets span " + std::to_string(e->end - e->begin) +
                                   " bytes but shape x dtype needs " + std::to_string(bytes));
    return FROST_OK;
}

}  // namespace

size_t dtype_size(DType t) {
    for (const auto& d : kDTypes)
        if (d.t == t) return d.size;
    return 0;
}

const char* dtype_name(DType t) {
    for (const auto& d : kDTypes)
        if (d.t == t) return d.name;
    return "?";
}

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string o = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) o.push_back(',');
        o.append(std::to_string(shape[i]));
    }
    o.push_back(']');
    return o;
}

bool parse_dtype(const std::string& name, DType* out) {
    for (const auto& d : kDTypes)
        if (name == d.name) {
            *out = d.t;
            return true;
        }
    return false;
}

frost_status parse_safetensors_header(const uint8_t* bytes, size_t size, const std::string& source,
                                      SafetensorsHeader* out) {
    return parse_safetensors_prefix(bytes, size, size, source, out);
}

frost_status parse_safetensors_prefix(const uint8_t* prefix, size_t prefix_size, uint64_t file_size,
                                      const std::string& source, SafetensorsHeader* out) {
    *out = SafetensorsHeader{};
    if (file_size < kLengthPrefixBytes || prefix_size < kLengthPrefixBytes)
        return corrupt(source, "bad length: file of " + std::to_string(file_size) +
                                   " bytes is shorter than the 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
    if (n > kSafetensorsMaxHeader)
        return corrupt(source, "header too large: " + std::to_string(n) + " bytes (limit " +
                                   std::to_string(kSafetensorsMaxHeader) + ")");
    // n <= 1e8, so 8 + n cannot overflow.
    if (kLengthPrefixBytes + n > file_size)
        return corrupt(source, "bad length: header of " + std::to_string(n) +
                                   " bytes runs past the end of the " + std::to_string(file_size) +
                                   "-byte file");
    if (kLengthPrefixBytes + n > prefix_size)
        return fail(FROST_ERR_INVALID_ARG, "%s: header prefix not fully read", source.c_str());
    const char* json_begin = reinterpret_cast<const char*>(prefix + kLengthPrefixBytes);
    const char* json_end = json_begin + n;
    if (n == 0 || json_begin[0] != '{') return corrupt(source, "header JSON does not start with '{'");

    StrictJson js;
    if (!parse_strict_json(json_begin, json_end, &js))
        return corrupt(source, js.too_deep ? "header nests deeper than a safetensors header can"
                                           : "header is not valid JSON/UTF-8: " + js.parse_error);
    if (!js.duplicate_key.empty())
        return corrupt(source, "duplicate key '" + js.duplicate_key + "' in header");
    if (!js.value.is_object()) return corrupt(source, "header is not a JSON object");

    out->header_bytes = n;
    out->data_offset = kLengthPrefixBytes + n;
    const uint64_t data_size = file_size - out->data_offset;
    for (auto it = js.value.begin(); it != js.value.end(); ++it) {
        if (it.key() == kMetadataKey) {
            if (!it->is_object()) return corrupt(source, "__metadata__ is not an object");
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string())
                    return corrupt(source, "__metadata__ value for '" + m.key() + "' is not a string");
                out->metadata[m.key()] = m->get<std::string>();
            }
            continue;
        }
        SafetensorsEntry e;
        e.name = it.key();
        FROST_TRY(parse_entry(source, e.name, *it, &e));
        out->entries.push_back(std::move(e));
    }

    // Tiling: sorted by (begin, end), each tensor must start where the previous ended, the first
    // at 0 and the last end at the end of the file. This rejects overlaps, gaps and trailing bytes
    // (a polyglot file hiding data after the tensors).
    std::vector<const SafetensorsEntry*> order;
    for (const auto& e : out->entries) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t cursor = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const auto* e : order) {
        if (e->end > data_size)
            return corrupt(source, "tensor '" + e->name + "': data_offsets end " +
                                       std::to_string(e->end) + " is past the data region (" +
                                       std::to_string(data_size) + " bytes)");
        if (e->begin < cursor)
            return corrupt(source, "tensor '" + e->name + "': overlaps tensor '" + prev->name +
                                       "' (begins at " + std::to_string(e->begin) + ", previous ends at " +
                                       std::to_string(cursor) + ")");
        if (e->begin > cursor)
            return corrupt(source, "tensor '" + e->name + "': gap of " +
                                       std::to_string(e->begin - cursor) + " bytes before it" +
                                       (prev ? " (after tensor '" + prev->name + "')" : std::string()));
        cursor = e->end;
        prev = e;
    }
    if (cursor != data_size)
        return corrupt(source, std::to_string(data_size - cursor) + " trailing bytes after the last tensor" +
                                   (prev ? " ('" + prev->name + "')" : std::string()));
    return FROST_OK;
}

TensorView CheckpointTensor::view() const {
    TensorView v;
    v.name = name;
    v.dtype = dtype;
    v.shape = shape;
    v.data = data;
    v.bytes = bytes;
    return v;
}

const CheckpointTensor* Checkpoint::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> Checkpoint::paths() const {
    std::vector<std::string> p;
    for (const auto& f : files_) p.push_back(f->path());
    return p;
}

uint64_t Checkpoint::data_bytes() const {
    uint64_t s = 0;
    for (const auto& t : tensors_) s += t.bytes;
    return s;
}

frost_status Checkpoint::check_intact() const {
    for (const auto& f : files_) {
        uint64_t now = 0;
        if (!f->still_intact(&now))
            return fail(FROST_ERR_IO, "%s: file changed size after it was opened (%zu -> %llu bytes); "
                        "refusing to read it", f->path().c_str(), f->size(), (unsigned long long)now);
    }
    return FROST_OK;
}

frost_status Checkpoint::add_file(const std::string& path) {
    auto mf = std::make_unique<util::MappedFile>();
    std::string err;
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "%s: injected I/O fault", path.c_str());
    if (!mf->open(path, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    // The header is read with pread, not through the mapping, so a file that shrinks while we
    // parse cannot raise SIGBUS.
    uint8_t len_bytes[kLengthPrefixBytes] = {};
    size_t have = std::min<size_t>(mf->size(), kLengthPrefixBytes);
    if (have && !util::pread_full(mf->fd(), len_bytes, have, 0, &err))
        return fail(FROST_ERR_IO, "%s: %s", path.c_str(), err.c_str());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    std::vector<uint8_t> prefix;
    if (have == kLengthPrefixBytes && n <= kSafetensorsMaxHeader && kLengthPrefixBytes + n <= mf->size()) {
        prefix.resize(kLengthPrefixBytes + n);
        if (!util::pread_full(mf->fd(), prefix.data(), prefix.size(), 0, &err))
            return fail(FROST_ERR_IO, "%s: %s", path.c_str(), err.c_str());
    } else {
        prefix.assign(len_bytes, len_bytes + have);
    }
    SafetensorsHeader h;
    FROST_TRY(parse_safetensors_prefix(prefix.data(), prefix.size(), mf->size(), path, &h));

    const size_t file_index = files_.size();
    for (auto& e : h.entries) {
        if (by_name_.count(e.name))
            return fail(FROST_ERR_CORRUPT, "%s: tensor '%s' also appears in %s", path.c_str(),
                        e.name.c_str(), files_[tensors_[by_name_[e.name]].file]->path().c_str());
        CheckpointTensor t;
        t.name = e.name;
        t.dtype = e.dtype;
        t.shape = e.shape;
        t.file = file_index;
        t.file_offset = h.data_offset + e.begin;
        t.bytes = e.end - e.begin;
        if (t.bytes > 0) {
            const uint8_t* p = mf->data() + t.file_offset;
            if (reinterpret_cast<uintptr_t>(p) % dtype_size(t.dtype) == 0) {
                t.data = p;
            } else {
                // Unaligned in the file (T05): copy once into aligned storage, read with pread.
                auto buf = std::unique_ptr<uint8_t[]>(new (std::nothrow) uint8_t[t.bytes]);
                if (!buf) return fail(FROST_ERR_OUT_OF_MEMORY, "%s: tensor '%s': cannot copy %llu unaligned bytes",
                                      path.c_str(), t.name.c_str(), (unsigned long long)t.bytes);
                if (!util::pread_full(mf->fd(), buf.get(), t.bytes, t.file_offset, &err))
                    return fail(FROST_ERR_IO, "%s: tensor '%s': %s", path.c_str(), t.name.c_str(), err.c_str());
                t.data = buf.get();
                t.copied = true;
                owned_.push_back(std::move(buf));
            }
        }
        by_name_[t.name] = tensors_.size();
        tensors_.push_back(std::move(t));
    }
    metadata_.push_back(std::move(h.metadata));
    files_.push_back(std::move(mf));
    return FROST_OK;
}

frost_status Checkpoint::open_files(const std::vector<std::string>& paths, std::shared_ptr<Checkpoint>* out) {
    auto ck = std::shared_ptr<Checkpoint>(new Checkpoint());
    for (const auto& p : paths) FROST_TRY(ck->add_file(p));
    *out = std::move(ck);
    return FROST_OK;
}

frost_status Checkpoint::open_dir(const std::string& model_dir, std::shared_ptr<Checkpoint>* out) {
    const std::string index_path = util::join_path(model_dir, kIndexName);
    if (!util::file_exists(index_path)) {
        const std::string single = util::join_path(model_dir, kSingleName);
        if (!util::file_exists(single))
            return fail(FROST_ERR_NOT_FOUND, "%s: neither %s nor %s found", model_dir.c_str(), kIndexName, kSingleName);
        return open_files({single}, out);
    }
    std::string text, err;
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "%s: injected I/O fault", index_path.c_str());
    if (!util::read_file(index_path, &text, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    // weight_map: tensor name -> shard file; every shard must hold exactly the tensors mapped to it.
    std::map<std::string, std::string> weight_map;
    std::vector<std::string> shards;
    try {
        StrictJson js;
        if (!parse_strict_json(text.data(), text.data() + text.size(), &js))
            return corrupt(index_path, "not valid JSON: " + js.parse_error);
        if (!js.duplicate_key.empty()) return corrupt(index_path, "duplicate key '" + js.duplicate_key + "'");
        auto wm = js.value.find("weight_map");
        if (!js.value.is_object() || wm == js.value.end() || !wm->is_object())
            return corrupt(index_path, "missing object 'weight_map'");
        for (auto it = wm->begin(); it != wm->end(); ++it) {
            if (!it->is_string()) return corrupt(index_path, "weight_map['" + it.key() + "'] is not a string");
            std::string f = it->get<std::string>();
            if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
                return corrupt(index_path, "weight_map['" + it.key() + "']: shard name '" + f +
                                               "' must be a plain file name in the model folder");
            weight_map[it.key()] = f;
            if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
        }
    } catch (const std::exception& e) {
        return corrupt(index_path, e.what());
    }
    std::sort(shards.begin(), shards.end());
    std::vector<std::string> paths;
    for (const auto& s : shards) paths.push_back(util::join_path(model_dir, s));
    std::shared_ptr<Checkpoint> ck;
    FROST_TRY(open_files(paths, &ck));
    std::string mismatches;
    int count = 0;
    constexpr int kMaxListed = 20;
    auto note = [&](const std::string& m) {
        if (count++ < kMaxListed) mismatches += "\n  " + m;
    };
    for (const auto& [name, shard] : weight_map) {
        const CheckpointTensor* t = ck->find(name);
        if (!t) note("tensor '" + name + "' is mapped to " + shard + " but not found there");
        else if (ck->file(t->file).path() != util::join_path(model_dir, shard))
            note("tensor '" + name + "' is mapped to " + shard + " but stored in " + ck->file(t->file).path());
    }
    for (const auto& t : ck->tensors())
        if (!weight_map.count(t.name)) note("tensor '" + t.name + "' in " + ck->file(t.file).path() + " is not in weight_map");
    if (count > 0)
        return fail(FROST_ERR_CORRUPT, "%s: %d inconsistencies with the shards:%s%s", index_path.c_str(), count,
                    mismatches.c_str(), count > kMaxListed ? "\n  ..." : "");
    *out = std::move(ck);
    return FROST_OK;
}

}  // namespace frost::model
