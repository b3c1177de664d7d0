// Rewrites a checkpoint in a published quantized format (quantize_checkpoint.h). Tensors are read
// through the validated, memory-mapped reader and written shard by shard (shard_writer.h: a
// header, then each output tensor at its offset from several threads, a quantized module's parts
// by the thread that quantized it). Files appear under their final names only when complete (a
// ".partial" file is renamed), and config.json is written last, so a folder interrupted halfway
// never looks like a checkpoint.
#include "model/quant/quantize_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "model/quant/dequant.h"
#include "model/quant/quant_config.h"
#include "model/quant/quant_plan.h"
#include "model/quant/quant_writer.h"
#include "model/safetensors.h"
#include "model/shard_writer.h"
#include "util/bf16.h"
#include "util/fs.h"
#include "util/progress.h"

namespace frost::model::quant {
namespace {

using nlohmann::json;

constexpr uint64_t kCopyChunk = uint64_t(64) << 20;
constexpr unsigned kMaxThreads = 8;

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// How a linear module is written, and why it is not quantized when it is not.
enum class Fate { Quantize, KeepRecipe, KeepMtp, KeepShape, KeepDtype };

// Whether `t` is a linear weight (the quantization plan's rule: a 2-D weight that is not an
// embedding or a norm) and, if so, its module name.
bool linear_module(const CheckpointTensor& t, std::string* module) {
    if (t.shape.size() != 2 || !ends_with(t.name, ".weight")) return false;
    *module = t.name.substr(0, t.name.size() - std::string(".weight").size());
    const size_t dot = module->rfind('.');
    const std::string leaf = dot == std::string::npos ? *module : module->substr(dot + 1);
    return leaf != "embed_tokens" && !ends_with(leaf, "norm");
}

// The input widths a format writes as the tools do: INT4 in whole groups of 128 and NVFP4 in whole
// groups of 16 (compressed-tensors' packers want whole groups); FP8 takes any width (Qwen's
// format covers a partial last block, the per-channel one has no blocks).
int64_t width_multiple(WriteFormat f) {
    switch (f) {
        case WriteFormat::Int4:
        case WriteFormat::Int4Asym: return 128;
        case WriteFormat::Nvfp4: return 16;
        default: return 1;
    }
}

Fate fate_of(const std::string& module, const CheckpointTensor& t, WriteFormat f) {
    if (module == "lm_head" || ends_with(module, ".lm_head") || starts_with(module, "model.visual.") ||
        module.find(".visual.") != std::string::npos || recipe_keeps_bf16(module))
        return Fate::KeepRecipe;
    if (starts_with(module, "mtp.")) return Fate::KeepMtp;
    if (t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F32) return Fate::KeepDtype;
    if (t.shape[1] % width_multiple(f) != 0 || t.shape[0] < 1 || t.shape[1] < 1) return Fate::KeepShape;
    return Fate::Quantize;
}

// One output tensor: a copy of an input tensor, or part `part` of a quantized module.
struct OutTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    uint64_t bytes = 0;
    const CheckpointTensor* src = nullptr;  // the input tensor (copied, or the module's weight)
    int part = -1;                          // >= 0: part of quantize_linear's output
    uint64_t unit_bytes = 0;                // bytes of the unit it starts (a module's parts together); 0 inside one
    size_t shard = 0;
    uint64_t begin = 0;
};

// The weight as fp32 (row-major [out, in]).
std::vector<float> weight_f32(const CheckpointTensor& t) {
    const size_t n = size_t(t.shape[0] * t.shape[1]);
    std::vector<float> w(n);
    if (t.dtype == DType::F32) {
        std::memcpy(w.data(), t.data, n * sizeof(float));
    } else {
        const auto* h = static_cast<const uint16_t*>(t.data);
        for (size_t i = 0; i < n; ++i) w[i] = t.dtype == DType::BF16 ? util::bf16_to_f32(h[i]) : f16_to_f32(h[i]);
    }
    return w;
}

// One shard: every output tensor's header entry, then the units (a copied tensor, or every part of
// a quantized module, written by the unit that quantized it) in parallel.
frost_status write_shard(const std::string& path, const std::vector<const OutTensor*>& ts, WriteFormat f, unsigned threads,
                         util::Progress* bar) {
    ShardJob job;
    for (const auto* t : ts) job.entries.push_back({t->name, t->dtype, t->shape, t->begin, t->bytes});
    job.units = ts.size();
    job.threads = threads;
    job.fill = [&](size_t i, const ShardPut& put) {
        const OutTensor& t = *ts[i];
        if (t.part > 0) return;  // written with its module's part 0
        if (t.part == 0) {
            const std::vector<float> w = weight_f32(*t.src);
            const std::vector<std::string> blobs = quantize_linear(f, w.data(), t.src->shape[0], t.src->shape[1]);
            for (size_t j = i; j < ts.size() && ts[j]->src == t.src && ts[j]->part >= 0; ++j)
                if (!put(blobs[size_t(ts[j]->part)].data(), ts[j]->bytes, ts[j]->begin)) return;
            return;
        }
        const auto* src = static_cast<const uint8_t*>(t.src->data);
        for (uint64_t off = 0; off < t.bytes; off += kCopyChunk)
            if (!put(src + off, size_t(std::min(kCopyChunk, t.bytes - off)), t.begin + off)) return;
    };
    return write_shard_file(path, job, bar);
}

frost_status write_text(const std::string& dir, const std::string& name, const std::string& text) {
    std::string err;
    const std::string path = util::join_path(dir, name), tmp = path + ".partial";
    if (frost_fault_hit(FROST_FAULT_IO)) err = "injected I/O fault";
    else if (!util::write_file(tmp, text, &err)) err = err.empty() ? "write failed" : err;
    else if (frost_fault_hit(FROST_FAULT_IO)) err = "injected I/O fault (rename)";
    else if (rename(tmp.c_str(), path.c_str()) != 0) err = "rename failed";
    else return FROST_OK;
    unlink(tmp.c_str());
    return fail(FROST_ERR_IO, "cannot write %s: %s", path.c_str(), err.c_str());
}

// The source's quant_method, or "" for an unquantized checkpoint (top level or a wrapper's text_config).
std::string existing_quant_method(const json& config) {
    for (const json* c : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
        if (!c || !c->is_object() || !c->contains("quantization_config")) continue;
        const json& q = (*c)["quantization_config"];
        return q.is_object() && q.contains("quant_method") && q["quant_method"].is_string() ? q["quant_method"].get<std::string>()
                                                                                             : "unknown";
    }
    return "";
}

// Opens the written folder as a loader would and builds its quantization plan: every module
// written quantized must bind as such, every kept linear as listed.
frost_status verify(const std::string& out_dir, size_t quantized) {
    std::shared_ptr<Checkpoint> ck;
    FROST_TRY(Checkpoint::open_dir(out_dir, &ck));
    QuantConfig qc;
    FROST_TRY(load_quant_config(out_dir, &qc));
    QuantPlan plan;
    FROST_TRY(build_quant_plan(qc, *ck, &plan));
    if (plan.modules.size() != quantized)
        return fail(FROST_ERR_CORRUPT, "%s: the written checkpoint's plan has %zu quantized modules, %zu were written",
                    out_dir.c_str(), plan.modules.size(), quantized);
    return FROST_OK;
}

}  // namespace

frost_status quantize_checkpoint(const QuantizeOptions& opt, QuantizeSummary* summary) {
    FROST_CHECK_ARG(!opt.model_dir.empty() && !opt.out_dir.empty() && opt.shard_bytes > 0);
    WriteFormat f;
    if (!parse_write_format(opt.format, &f))
        return fail(FROST_ERR_INVALID_ARG, "unknown format '%s' (one of %s)", opt.format.c_str(), write_format_names());
    util::FileStat in_st, out_st;
    if (!util::stat_file(opt.model_dir, &in_st) || !in_st.is_dir)
        return fail(FROST_ERR_NOT_FOUND, "%s is not a model folder", opt.model_dir.c_str());
    if (util::stat_file(opt.out_dir, &out_st)) {
        if (!out_st.is_dir) return fail(FROST_ERR_INVALID_ARG, "%s exists and is not a folder", opt.out_dir.c_str());
        std::vector<std::string> names;
        std::string err;
        if (!util::list_dir(opt.out_dir, &names, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
        for (const auto& n : names)
            if (n == "config.json" || ends_with(n, ".safetensors") || ends_with(n, ".safetensors.index.json"))
                return fail(FROST_ERR_INVALID_ARG, "%s already holds a checkpoint (%s); give an empty or new folder",
                            opt.out_dir.c_str(), n.c_str());
    }

    std::string text, err;
    const std::string config_path = util::join_path(opt.model_dir, "config.json");
    if (!util::read_file(config_path, &text, &err)) return fail(FROST_ERR_NOT_FOUND, "%s", err.c_str());
    json config = json::parse(text, nullptr, false);
    if (!config.is_object()) return fail(FROST_ERR_INVALID_ARG, "%s is not a JSON object", config_path.c_str());
    if (const std::string m = existing_quant_method(config); !m.empty())
        return fail(FROST_ERR_INVALID_ARG, "%s is already quantized (quant_method '%s'); give a bf16 checkpoint",
                    opt.model_dir.c_str(), m.c_str());
    std::shared_ptr<Checkpoint> ck;
    FROST_TRY(Checkpoint::open_dir(opt.model_dir, &ck));
    FROST_TRY(ck->check_intact());

    // The output tensors in the input's order; a module's parts follow its weight's place.
    std::vector<OutTensor> outs;
    std::vector<std::string> extra_ignore;  // kept linears the recipe list does not name
    bool mtp_kept = false;
    size_t quantized = 0, kept = 0;
    for (const CheckpointTensor& t : ck->tensors()) {
        std::string module;
        const bool linear = linear_module(t, &module);
        const Fate fate = linear ? fate_of(module, t, f) : Fate::KeepRecipe;
        if (!linear || fate != Fate::Quantize) {
            if (linear) {
                ++kept;
                if (fate == Fate::KeepMtp) mtp_kept = true;
                if (fate == Fate::KeepShape || fate == Fate::KeepDtype) extra_ignore.push_back(module);
            }
            outs.push_back({t.name, dtype_name(t.dtype), t.shape, t.bytes, &t, -1, t.bytes});
            continue;
        }
        ++quantized;
        const auto layout = quant_layout(f, module, t.shape[0], t.shape[1]);
        uint64_t unit = 0;
        for (const auto& q : layout) unit += q.bytes;
        for (size_t i = 0; i < layout.size(); ++i)
            outs.push_back({layout[i].name, layout[i].dtype, layout[i].shape, layout[i].bytes, &t, int(i), i == 0 ? unit : 0});
    }
    if (quantized == 0)
        return fail(FROST_ERR_INVALID_ARG, "%s has no linear weight to quantize", opt.model_dir.c_str());
    std::vector<std::string> ignore = recipe_ignore_list(f);
    const bool fp8_block = f == WriteFormat::Fp8Block;
    if (mtp_kept) ignore.push_back(fp8_block ? "mtp" : "re:mtp\\..*");
    ignore.insert(ignore.end(), extra_ignore.begin(), extra_ignore.end());

    std::vector<ShardSlot> slots;
    for (const auto& o : outs) slots.push_back({o.bytes, o.unit_bytes});
    uint64_t total = 0;
    const size_t shards = place_in_shards(&slots, opt.shard_bytes, &total);
    for (size_t i = 0; i < outs.size(); ++i) {
        outs[i].shard = slots[i].shard;
        outs[i].begin = slots[i].begin;
    }
    const bool created = !util::file_exists(opt.out_dir);
    if (!util::make_dirs(opt.out_dir, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    // Every file this run writes, so a failure removes them all (and the folder, if it made it):
    // a retry then finds the folder as it was.
    std::vector<std::string> written;
    auto track = [&](const std::string& path) {  // a file that was there before is the user's: not removed
        if (!util::file_exists(path)) written.push_back(path);
        return path;
    };
    size_t copied = 0;
    auto write_all = [&]() -> frost_status {
        const unsigned threads = opt.threads > 0 ? opt.threads : std::max(1u, std::min(kMaxThreads, std::thread::hardware_concurrency()));
        util::Progress bar("quantize " + opt.format, total, opt.progress);
        json weight_map = json::object();
        for (size_t s = 0; s < shards; ++s) {
            std::vector<const OutTensor*> in;
            for (const auto& o : outs)
                if (o.shard == s) {
                    in.push_back(&o);
                    weight_map[o.name] = shard_file_name(s, shards);
                }
            FROST_TRY(write_shard(track(util::join_path(opt.out_dir, shard_file_name(s, shards))), in, f, threads, &bar));
        }
        bar.finish();
        if (shards > 1) {
            track(util::join_path(opt.out_dir, "model.safetensors.index.json"));
            FROST_TRY(write_text(opt.out_dir, "model.safetensors.index.json",
                                 json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n"));
        }
        // Every other file of the source folder (tokenizer, generation and processor configs, chat
        // template, licence), unchanged; sub-folders and hidden files are left out.
        std::vector<std::string> names;
        std::string e;
        if (!util::list_dir(opt.model_dir, &names, &e)) return fail(FROST_ERR_IO, "%s", e.c_str());
        for (const auto& n : names) {
            util::FileStat st;
            const std::string from = util::join_path(opt.model_dir, n);
            if (n.empty() || n[0] == '.' || n == "config.json" || ends_with(n, ".safetensors") ||
                ends_with(n, ".safetensors.index.json") || !util::stat_file(from, &st) || st.is_dir)
                continue;
            std::string data;
            if (!util::read_file(from, &data, &e)) return fail(FROST_ERR_IO, "%s", e.c_str());
            track(util::join_path(opt.out_dir, n));
            FROST_TRY(write_text(opt.out_dir, n, data));
            ++copied;
        }
        // config.json last: until it exists the folder is not a checkpoint.
        config["quantization_config"] = quant_config_json(f, ignore);
        track(util::join_path(opt.out_dir, "config.json"));
        FROST_TRY(write_text(opt.out_dir, "config.json", config.dump(2) + "\n"));
        return verify(opt.out_dir, quantized);
    };
    if (const frost_status st = write_all(); st != FROST_OK) {
        for (const auto& path : written) unlink(path.c_str());  // each was written under a .partial name first
        if (created) rmdir(opt.out_dir.c_str());
        return st;
    }
    if (summary) {
        summary->quantized = quantized;
        summary->kept = kept;
        summary->tensors_in = ck->tensors().size();
        summary->tensors_out = outs.size();
        summary->shards = shards;
        summary->files_copied = copied;
        summary->bytes_in = ck->data_bytes();
        summary->bytes_out = total;
    }
    return FROST_OK;
}

}  // namespace frost::model::quant
