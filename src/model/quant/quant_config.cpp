// quantization_config parsing. Field names and meanings follow transformers' FineGrainedFP8Config
// (quant_method "fp8") and compressed-tensors' QuantizationConfig / QuantizationArgs; unknown
// keys are refused so a feature we do not implement is never silently ignored.
#include "model/quant/quant_config.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "util/fs.h"

namespace frost::model::quant {
namespace {

using nlohmann::json;

constexpr int kNvfp4Group = 16;

struct Problems {
    std::vector<std::string> list;
    void add(const std::string& s) { list.push_back(s); }
};

std::string dump(const json& v) { return v.dump(); }

// Checks that every key of `obj` is in `known`.
void check_keys(const json& obj, const std::set<std::string>& known, const std::string& where, Problems* p) {
    for (auto it = obj.begin(); it != obj.end(); ++it)
        if (!known.count(it.key())) p->add(where + "." + it.key() + ": unknown field (value " + dump(*it) + ")");
}

bool null_or_empty(const json* v) { return !v || v->is_null() || (v->is_object() && v->empty()); }

const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}

// Reads an optional list of strings (null -> empty).
void string_list(const json& obj, const char* key, const std::string& where, std::vector<std::string>* out, Problems* p) {
    const json* v = field(obj, key);
    if (!v || v->is_null()) return;
    if (!v->is_array()) {
        p->add(where + "." + key + ": must be a list of strings, got " + dump(*v));
        return;
    }
    for (const auto& e : *v) {
        if (e.is_string()) out->push_back(e.get<std::string>());
        else p->add(where + "." + key + ": entry " + dump(e) + " is not a string");
    }
}

void parse_fp8(const json& q, const std::string& w, QuantConfig* c, Problems* p) {
    check_keys(q, {"quant_method", "fmt", "activation_scheme", "weight_block_size", "modules_to_not_convert",
                   "modules_to_convert", "scale_fmt", "dequantize", "expert_dtype"},
               w, p);
    c->fp8.scheme = Scheme::Fp8Block;
    c->fp8.format = "fp8";
    if (const json* f = field(q, "fmt"); f && !(f->is_string() && *f == "e4m3"))
        p->add(w + ".fmt: only \"e4m3\" is supported, got " + dump(*f));
    if (const json* a = field(q, "activation_scheme"); a && !(a->is_string() && *a == "dynamic"))
        p->add(w + ".activation_scheme: only \"dynamic\" is supported, got " + dump(*a));
    if (const json* s = field(q, "scale_fmt"); s && !s->is_null() && !(s->is_string() && (*s == "float" || *s == "ue8m0")))
        p->add(w + ".scale_fmt: expected \"float\" or \"ue8m0\", got " + dump(*s));
    if (const json* m = field(q, "modules_to_convert"); m && !m->is_null())
        p->add(w + ".modules_to_convert: an explicit conversion list is not supported (got " + dump(*m) + ")");
    if (const json* d = field(q, "dequantize"); d && !d->is_boolean()) p->add(w + ".dequantize: must be a boolean");
    // Which dtype transformers gives MoE experts; a module's dtype on disk is what the plan reads.
    if (const json* x = field(q, "expert_dtype"); x && !x->is_string()) p->add(w + ".expert_dtype: must be a string");
    const json* b = field(q, "weight_block_size");
    if (!b || !b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer() ||
        (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0 || (*b)[0].get<int64_t>() > 65536 ||
        (*b)[1].get<int64_t>() > 65536) {
        p->add(w + ".weight_block_size: must be [rows, cols] of positive integers (per-tensor FP8 is not supported), got " +
               (b ? dump(*b) : std::string("nothing")));
    } else {
        c->fp8.block_rows = (*b)[0].get<int>();
        c->fp8.block_cols = (*b)[1].get<int>();
    }
    string_list(q, "modules_to_not_convert", w, &c->modules_to_not_convert, p);
}

// GPTQ and AWQ configs carry many informational keys that vary by tool and version (damp_percent,
// true_sequential, model_name_or_path, quantizer, meta, ...). Unlike the formats above, only the
// keys that change how the bytes are read are checked; the rest cannot change the weights.
void native_bits_and_group(const json& q, const std::string& w, NativeInt4* n, Problems* p) {
    const json* b = field(q, "bits");
    if (!b || !b->is_number_integer() || b->get<int64_t>() != 4)
        p->add(w + ".bits: only 4-bit weights are supported, got " + (b ? dump(*b) : std::string("nothing")));
    const json* g = field(q, "group_size");
    if (!g || !g->is_number_integer() || (g->get<int64_t>() != -1 && g->get<int64_t>() <= 0) || g->get<int64_t>() > 65536) {
        p->add(w + ".group_size: must be -1 (one group per row) or a positive integer, got " +
               (g ? dump(*g) : std::string("nothing")));
        return;
    }
    n->group_size = g->get<int>();
}

void parse_gptq(const json& q, const std::string& w, QuantConfig* c, Problems* p) {
    NativeInt4& n = c->native;
    native_bits_and_group(q, w, &n, p);
    auto flag = [&](const char* key, bool dflt) {
        const json* f = field(q, key);
        if (f && !f->is_boolean()) p->add(w + "." + key + ": must be a boolean, got " + dump(*f));
        return f && f->is_boolean() ? f->get<bool>() : dflt;
    };
    n.desc_act = flag("desc_act", false);
    flag("sym", true);  // the zero points are read from qzeros either way
    // The on-disk format: "checkpoint_format" (AutoGPTQ) or "format" (GPTQModel); absent = v1.
    std::string fmt;
    for (const char* key : {"checkpoint_format", "format"}) {
        const json* f = field(q, key);
        if (!f || f->is_null()) continue;
        if (!f->is_string() || (*f != "gptq" && *f != "gptq_v2"))
            p->add(w + "." + key + ": only \"gptq\" and \"gptq_v2\" packing are supported, got " + dump(*f));
        else if (!fmt.empty() && fmt != f->get<std::string>())
            p->add(w + "." + key + ": " + dump(*f) + " contradicts checkpoint_format \"" + fmt + "\"");
        else
            fmt = f->get<std::string>();
    }
    if (fmt.empty()) fmt = "gptq";
    n.format = fmt;
    n.zero_plus_one = fmt == "gptq";
    if (const json* d = field(q, "pack_dtype"); d && !d->is_null() && !(d->is_string() && (*d == "int32" || *d == "torch.int32")))
        p->add(w + ".pack_dtype: only int32 packing is supported, got " + dump(*d));
    if (const json* d = field(q, "dynamic"); !null_or_empty(d))
        p->add(w + ".dynamic: per-module overrides are not supported (got " + dump(*d) + ")");
    if (const json* m = field(q, "bits_per_module"); !null_or_empty(m))
        p->add(w + ".bits_per_module: mixed bit widths are not supported");
}

void parse_awq(const json& q, const std::string& w, QuantConfig* c, Problems* p) {
    NativeInt4& n = c->native;
    native_bits_and_group(q, w, &n, p);
    n.format = "awq";
    n.zero_plus_one = false;
    n.desc_act = false;
    const json* v = field(q, "version");
    std::string ver = v && v->is_string() ? v->get<std::string>() : std::string("gemm");
    std::transform(ver.begin(), ver.end(), ver.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (ver != "gemm") p->add(w + ".version: only the \"gemm\" packing is supported, got " + (v ? dump(*v) : ver));
    if (const json* z = field(q, "zero_point"); z && !(z->is_boolean() && z->get<bool>()))
        p->add(w + ".zero_point: only checkpoints with zero points (true) are supported, got " + dump(*z));
    string_list(q, "modules_to_not_convert", w, &c->modules_to_not_convert, p);
}

// Validates an activation QuantizationArgs object only for shape: Frost keeps activations in
// bf16/fp32, so their scheme changes nothing but which extra tensors the checkpoint holds.
bool activation_static(const json* a) {
    if (!a || a->is_null() || !a->is_object()) return false;
    const json* d = field(*a, "dynamic");
    return d && d->is_boolean() && !d->get<bool>();
}

void parse_weights(const json& wj, const std::string& fmt, const json* acts, const std::string& w, WeightArgs* out,
                   Problems* p) {
    check_keys(wj, {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic",
                    "actorder", "scale_dtype", "zp_dtype", "observer", "observer_kwargs"},
               w, p);
    auto num = [&](const char* k) -> int64_t {
        const json* v = field(wj, k);
        return v && v->is_number_integer() ? v->get<int64_t>() : -1;
    };
    auto str = [&](const char* k) -> std::string {
        const json* v = field(wj, k);
        return v && v->is_string() ? v->get<std::string>() : std::string();
    };
    const int64_t bits = num("num_bits"), group = num("group_size");
    const std::string type = str("type"), strategy = str("strategy");
    const json* sym = field(wj, "symmetric");
    out->symmetric = !sym || !sym->is_boolean() || sym->get<bool>();
    if (const json* d = field(wj, "dynamic"); d && !(d->is_boolean() && !d->get<bool>()))
        p->add(w + ".dynamic: dynamic weight quantization is not a stored format (got " + dump(*d) + ")");
    out->format = fmt;
    const std::string what = w + ": format \"" + fmt + "\" with num_bits " + std::to_string(bits) + ", type \"" + type +
                             "\", strategy \"" + strategy + "\"";
    if (fmt == "float-quantized" || fmt == "naive-quantized") {
        if (bits != 8 || type != "float") {
            p->add(what + " is not supported (float-quantized needs num_bits 8, type float)");
            return;
        }
        if (!out->symmetric) p->add(w + ".symmetric: FP8 weights must be symmetric");
        if (strategy == "channel") out->scheme = Scheme::Fp8Channel;
        else if (strategy == "tensor") out->scheme = Scheme::Fp8Tensor;
        else if (strategy == "block") {
            out->scheme = Scheme::Fp8Block;
            const json* b = field(wj, "block_structure");
            if (!b || !b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer() ||
                (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0)
                p->add(w + ".block_structure: must be [rows, cols] of positive integers, got " + (b ? dump(*b) : "nothing"));
            else {
                out->block_rows = (*b)[0].get<int>();
                out->block_cols = (*b)[1].get<int>();
            }
        } else {
            p->add(what + ": strategy must be channel, tensor or block");
        }
        out->static_input_scale = activation_static(acts);
    } else if (fmt == "nvfp4-pack-quantized") {
        if (bits != 4 || type != "float" || strategy != "tensor_group" || group != kNvfp4Group)
            p->add(what + ", group_size " + std::to_string(group) +
                   " is not NVFP4 (needs num_bits 4, type float, strategy tensor_group, group_size 16)");
        if (!out->symmetric) p->add(w + ".symmetric: NVFP4 weights must be symmetric");
        out->scheme = Scheme::Nvfp4;
        out->group_size = kNvfp4Group;
        out->input_global_scale = acts && acts->is_object();
    } else if (fmt == "pack-quantized") {
        if (bits != 4 || type != "int" || strategy != "group" || group <= 0)
            p->add(what + ", group_size " + std::to_string(group) +
                   " is not supported (pack-quantized needs num_bits 4, type int, strategy group, group_size > 0)");
        out->scheme = Scheme::Int4;
        out->group_size = int(std::max<int64_t>(group, 0));
        const json* ao = field(wj, "actorder");
        if (ao && ao->is_string()) {
            const std::string a = ao->get<std::string>();
            if (a == "group" || a == "dynamic") out->act_order_group = true;
            else if (a != "weight" && a != "static") p->add(w + ".actorder: unknown value \"" + a + "\"");
        } else if (ao && !ao->is_null() && !ao->is_boolean()) {
            p->add(w + ".actorder: must be null, a boolean or a string, got " + dump(*ao));
        } else if (ao && ao->is_boolean() && ao->get<bool>()) {
            out->act_order_group = true;  // legacy `true` meant group ordering
        }
        if (acts && acts->is_object()) p->add(w + ": pack-quantized with quantized input activations (W4A8) is not supported");
    } else {
        p->add(w + ": format \"" + fmt + "\" is not supported (supported: float-quantized, nvfp4-pack-quantized, pack-quantized)");
    }
}

void parse_compressed(const json& q, const std::string& w, QuantConfig* c, Problems* p) {
    check_keys(q, {"quant_method", "format", "config_groups", "ignore", "quantization_status", "kv_cache_scheme",
                   "sparsity_config", "transform_config", "global_compression_ratio", "version", "provider",
                   // loader switches transformers may serialise beside the format; they change no bytes
                   "run_compressed", "dequantize", "use_optimized_inference"},
               w, p);
    if (const json* f = field(q, "format"); f && f->is_string()) c->format = f->get<std::string>();
    else if (f && !f->is_null()) p->add(w + ".format: must be a string");
    if (const json* s = field(q, "quantization_status"); s && !(s->is_string() && *s == "compressed"))
        p->add(w + ".quantization_status: only \"compressed\" checkpoints are stored quantized, got " + dump(*s));
    if (const json* k = field(q, "kv_cache_scheme"); !null_or_empty(k))
        p->add(w + ".kv_cache_scheme: KV-cache quantization is not supported (got " + dump(*k) + ")");
    if (const json* s = field(q, "sparsity_config"); !null_or_empty(s))
        p->add(w + ".sparsity_config: sparse checkpoints are not supported (got " + dump(*s) + ")");
    if (const json* t = field(q, "transform_config"); !null_or_empty(t))
        p->add(w + ".transform_config: weight transforms are not supported (got " + dump(*t) + ")");
    string_list(q, "ignore", w, &c->ignore, p);
    const json* groups = field(q, "config_groups");
    if (!groups || !groups->is_object() || groups->empty()) {
        p->add(w + ".config_groups: must be a non-empty object");
        return;
    }
    for (auto it = groups->begin(); it != groups->end(); ++it) {  // nlohmann orders keys by name
        const std::string gw = w + ".config_groups." + it.key();
        const json& g = *it;
        if (!g.is_object()) {
            p->add(gw + ": must be an object");
            continue;
        }
        check_keys(g, {"targets", "weights", "input_activations", "output_activations", "format"}, gw, p);
        ConfigGroup cg;
        cg.name = it.key();
        string_list(g, "targets", gw, &cg.targets, p);
        if (cg.targets.empty()) p->add(gw + ".targets: must list at least one target");
        if (const json* o = field(g, "output_activations"); !null_or_empty(o))
            p->add(gw + ".output_activations: output quantization is not supported");
        std::string fmt = c->format;
        if (const json* f = field(g, "format"); f && f->is_string()) fmt = f->get<std::string>();
        if (fmt.empty() || fmt == "mixed-precision")
            p->add(gw + ": no format (the group has none and the top-level format is \"" + c->format + "\")");
        const json* wj = field(g, "weights");
        if (!wj || !wj->is_object()) {
            p->add(gw + ".weights: missing (activation-only quantization is not supported)");
            continue;
        }
        const json* acts = field(g, "input_activations");
        parse_weights(*wj, fmt, acts, gw + ".weights", &cg.weights, p);
        c->groups.push_back(std::move(cg));
    }
}

}  // namespace

const char* scheme_name(Scheme s) {
    switch (s) {
        case Scheme::Fp8Block: return "fp8-block";
        case Scheme::Fp8Channel: return "fp8-channel";
        case Scheme::Fp8Tensor: return "fp8-tensor";
        case Scheme::Nvfp4: return "nvfp4";
        case Scheme::Int4: return "int4";
    }
    return "?";
}

std::string WeightArgs::describe() const {
    std::string d = format + ": ";
    switch (scheme) {
        case Scheme::Fp8Block:
            return d + "fp8 e4m3, scale per " + std::to_string(block_rows) + "x" + std::to_string(block_cols) + " block";
        case Scheme::Fp8Channel: return d + "fp8 e4m3, scale per output channel";
        case Scheme::Fp8Tensor: return d + "fp8 e4m3, one scale per tensor";
        case Scheme::Nvfp4: return d + "fp4 e2m1, group 16, fp8 scales, global scale";
        case Scheme::Int4:
            return d + "int4, group " + std::to_string(group_size) + (symmetric ? ", symmetric" : ", zero points") +
                   (act_order_group ? ", g_idx" : "");
    }
    return d;
}

std::string QuantConfig::summary() const {
    if (method == Method::Fp8)
        return "fp8 (block " + std::to_string(fp8.block_rows) + "x" + std::to_string(fp8.block_cols) + ", e4m3)";
    if (method == Method::CompressedTensors) {
        std::set<std::string> kinds;
        for (const auto& g : groups) kinds.insert(g.weights.describe());
        std::string s = "compressed-tensors";
        for (const auto& k : kinds) s += " [" + k + "]";
        return s;
    }
    if (method == Method::Gptq || method == Method::Awq)
        return native.format + " (int4, group " + std::to_string(native.group_size) +
               (native.desc_act ? ", act-order" : "") + ")";
    return "none";
}

frost_status parse_quant_config(const std::string& text, const std::string& source, QuantConfig* out) {
    *out = QuantConfig{};
    json root;
    try {
        root = json::parse(text);
    } catch (const std::exception& e) {
        return fail(FROST_ERR_CORRUPT, "%s: not valid JSON: %s", source.c_str(), e.what());
    }
    if (!root.is_object()) return fail(FROST_ERR_CORRUPT, "%s: not a JSON object", source.c_str());
    const json* q = field(root, "quantization_config");
    if (!q || q->is_null()) return FROST_OK;
    const std::string w = "quantization_config";
    if (!q->is_object()) return fail(FROST_ERR_CORRUPT, "%s: %s must be an object", source.c_str(), w.c_str());
    const json* m = field(*q, "quant_method");
    const std::string method = m && m->is_string() ? m->get<std::string>() : std::string();
    Problems p;
    QuantConfig c;
    if (method == "fp8") {
        c.method = Method::Fp8;
        parse_fp8(*q, w, &c, &p);
    } else if (method == "compressed-tensors") {
        c.method = Method::CompressedTensors;
        parse_compressed(*q, w, &c, &p);
    } else if (method == "gptq") {
        c.method = Method::Gptq;
        parse_gptq(*q, w, &c, &p);
    } else if (method == "awq") {
        c.method = Method::Awq;
        parse_awq(*q, w, &c, &p);
    } else {
        p.add(w + ".quant_method: \"" + method + "\" is not supported (supported: fp8, compressed-tensors, gptq, awq)");
    }
    if (!p.list.empty()) {
        std::string list;
        for (const auto& s : p.list) list += "\n  " + s;
        return fail(FROST_ERR_UNSUPPORTED, "%s: quantization_config has %zu problem(s):%s", source.c_str(), p.list.size(),
                    list.c_str());
    }
    *out = std::move(c);
    return FROST_OK;
}

frost_status load_quant_config(const std::string& model_dir, QuantConfig* out) {
    const std::string path = util::join_path(model_dir, "config.json");
    std::string text, err;
    if (!util::read_file(path, &text, &err)) return fail(FROST_ERR_IO, "%s", err.c_str());
    return parse_quant_config(text, path, out);
}

}  // namespace frost::model::quant
