// Quantization plan: group every checkpoint tensor by module, decide per linear module whether it
// is quantized (Qwen fp8: a weight_scale_inv is present; compressed-tensors: a config group
// targets it and no ignore entry matches) and check its tensors against the scheme's layout.
#include "model/quant/quant_plan.h"

#include <algorithm>
#include <cstring>
#include <regex>
#include <set>

#include "exec/error.h"
#include "model/safetensors.h"

namespace frost::model::quant {
namespace {

constexpr const char* kVisualPrefix = "model.visual.";
constexpr int kMaxListedProblems = 64;
constexpr int kInt4PerWord = 8;  // eight 4-bit values per int32
constexpr int kFp4PerByte = 2;

// Parameters a quantized linear may carry besides a plain `weight`.
const std::set<std::string> kQuantParams = {"weight_scale_inv", "weight_scale", "weight_packed", "weight_global_scale",
                                            "weight_zero_point", "weight_g_idx", "weight_shape", "input_scale",
                                            "input_global_scale", "input_zero_point"};

using Params = std::map<std::string, const CheckpointTensor*>;

int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

bool ends_with(const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// A module is a linear when it holds a packed weight or a 2-D weight that is not an embedding.
bool is_linear(const std::string& module, const Params& p) {
    if (p.count("weight_packed")) return true;
    auto w = p.find("weight");
    if (w == p.end() || w->second->shape.size() != 2) return false;
    const std::string leaf = module.substr(module.rfind('.') + 1);
    return leaf != "embed_tokens" && !ends_with(leaf, "norm");
}

struct Checker {
    std::vector<std::string> problems;
    std::string current;         // the module being planned ("" for config-level checks)
    std::set<std::string> bad;   // modules with at least one problem
    void add(const std::string& s) {
        problems.push_back(s);
        if (!current.empty()) bad.insert(current);
    }

    // Requires param `name` of module `m` with one of `dtypes` and `shape`; returns it or nullptr.
    const CheckpointTensor* need(const std::string& m, const Params& p, const std::string& name,
                                 std::initializer_list<DType> dtypes, const std::vector<int64_t>& shape) {
        auto it = p.find(name);
        if (it == p.end()) {
            add("missing: " + m + "." + name + " " + shape_string(shape));
            return nullptr;
        }
        const CheckpointTensor* t = it->second;
        bool ok = false;
        std::string names;
        for (DType d : dtypes) {
            ok = ok || t->dtype == d;
            if (!names.empty()) names.append(" or ");
            names.append(dtype_name(d));
        }
        if (!ok) add("wrong dtype: " + t->name + " is " + dtype_name(t->dtype) + ", expected " + names);
        if (t->shape != shape) add("wrong shape: " + t->name + " is " + shape_string(t->shape) + ", expected " + shape_string(shape));
        return ok && t->shape == shape ? t : nullptr;
    }
};

// transformers' modules_to_not_convert: an entry names a module or a dotted part of its path.
bool not_convert_matches(const std::string& entry, const std::string& m) {
    return m == entry || ends_with(m, "." + entry) || m.rfind(entry + ".", 0) == 0 ||
           m.find("." + entry + ".") != std::string::npos;
}

// Integer value i of a 1-D I32 / I64 tensor.
int64_t int_at(const CheckpointTensor& t, size_t i) {
    if (t.dtype == DType::I64) return static_cast<const int64_t*>(t.data)[i];
    return static_cast<const int32_t*>(t.data)[i];
}

void add_tensor(QuantModule* qm, const CheckpointTensor* t) {
    if (!t) return;
    qm->tensors.push_back(t->name);
    qm->stored_bytes += t->bytes;
}

// Qwen fp8: a linear is quantized iff it has weight_scale_inv (w = fp8 x scale_inv per block).
void plan_fp8(const QuantConfig& c, const std::map<std::string, Params>& mods, Checker* ck, QuantPlan* plan) {
    const WeightArgs& a = c.fp8;
    for (const auto& [m, p] : mods) {
        ck->current = m;
        auto w = p.find("weight");
        auto s = p.find("weight_scale_inv");
        const bool f8 = w != p.end() && w->second->dtype == DType::F8_E4M3;
        if (s != p.end() && w == p.end()) {
            ck->add("unexpected: " + s->second->name + " has no weight beside it");
            continue;
        }
        if (!is_linear(m, p)) {
            if (f8 || s != p.end()) ck->add("wrong dtype: " + m + ".weight is stored fp8 but is not a linear weight");
            continue;
        }
        bool listed = false;
        for (const auto& e : c.modules_to_not_convert) listed = listed || not_convert_matches(e, m);
        if (listed) {
            if (f8 || s != p.end())
                ck->add("module " + m + " is in modules_to_not_convert but stored quantized");
            plan->plain[m] = {m, "modules_to_not_convert"};
            continue;
        }
        if (!f8 && s == p.end()) {
            plan->plain[m] = {m, "no weight_scale_inv"};
            continue;
        }
        if (!f8) ck->add("wrong dtype: " + w->second->name + " is " + dtype_name(w->second->dtype) +
                         " but has a weight_scale_inv (expected F8_E4M3)");
        const auto& ws = w->second->shape;
        QuantModule qm;
        qm.module = m;
        qm.args = a;
        qm.out = ws[0];
        qm.in = ws[1];
        // Qwen's releases store the block scales in f32, bf16 (Qwen3-32B-FP8, Qwen3.6-35B-A3B-FP8) or
        // f16 (Qwen3-4B-Instruct-2507-FP8); every reader widens them to f32 exactly (scales_f32).
        const CheckpointTensor* sc = ck->need(m, p, "weight_scale_inv", {DType::F32, DType::BF16, DType::F16},
                                              {cdiv(qm.out, a.block_rows), cdiv(qm.in, a.block_cols)});
        for (const auto& [name, t] : p)
            if (name != "weight" && name != "weight_scale_inv" && kQuantParams.count(name))
                ck->add("unexpected: " + t->name + " (Qwen fp8 stores only weight and weight_scale_inv)");
        if (!f8 || !sc) continue;
        qm.q = w->second;
        qm.scale = sc;
        add_tensor(&qm, qm.q);
        add_tensor(&qm, qm.scale);
        plan->modules[m] = std::move(qm);
    }
}

struct Matcher {
    std::string target;
    bool is_class = false;  // "Linear": every linear module
    bool is_regex = false;
    std::regex re;
};

bool compile(const std::string& t, Matcher* m, Checker* ck, const std::string& where) {
    m->target = t;
    m->is_class = t == "Linear";
    m->is_regex = t.rfind("re:", 0) == 0;
    if (!m->is_regex) return true;
    try {
        m->re = std::regex(t.substr(3), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        ck->add(where + ": bad regex \"" + t + "\": " + e.what());
        return false;
    }
    return true;
}

// 1: exact name, 2: regex, 3: the Linear class; 0: no match (compressed-tensors' precedence).
int match_rank(const Matcher& m, const std::string& module) {
    if (m.is_class) return 3;
    if (m.is_regex) return std::regex_search(module, m.re, std::regex_constants::match_continuous) ? 2 : 0;
    return m.target == module ? 1 : 0;
}

void plan_module_ct(const std::string& m, const Params& p, const ConfigGroup& g, Checker* ck, QuantPlan* plan) {
    const WeightArgs& a = g.weights;
    QuantModule qm;
    qm.module = m;
    qm.group = g.name;
    qm.args = a;
    std::set<std::string> expected;
    auto q_of = [&](const char* name) -> const CheckpointTensor* {
        auto it = p.find(name);
        if (it == p.end()) ck->add(std::string("missing: ") + m + "." + name + " (" + a.describe() + ")");
        return it == p.end() ? nullptr : it->second;
    };
    const std::initializer_list<DType> kScaleDtypes = {DType::BF16, DType::F16, DType::F32};
    bool ok = true;
    switch (a.scheme) {
        case Scheme::Fp8Block:
        case Scheme::Fp8Channel:
        case Scheme::Fp8Tensor: {
            expected = {"weight", "weight_scale", "input_scale"};
            const CheckpointTensor* w = q_of("weight");
            if (!w) return;
            if (w->dtype != DType::F8_E4M3 || w->shape.size() != 2) {
                ck->add("wrong dtype: " + w->name + " is " + dtype_name(w->dtype) + " " + shape_string(w->shape) +
                        ", expected F8_E4M3 [out, in]");
                return;
            }
            qm.out = w->shape[0];
            qm.in = w->shape[1];
            qm.q = w;
            std::vector<int64_t> ss = a.scheme == Scheme::Fp8Channel ? std::vector<int64_t>{qm.out, 1}
                                      : a.scheme == Scheme::Fp8Tensor
                                          ? std::vector<int64_t>{1}
                                          : std::vector<int64_t>{cdiv(qm.out, a.block_rows), cdiv(qm.in, a.block_cols)};
            qm.scale = ck->need(m, p, "weight_scale", kScaleDtypes, ss);
            ok = qm.scale != nullptr;
            if (a.static_input_scale) {
                const CheckpointTensor* is = ck->need(m, p, "input_scale", kScaleDtypes, {1});
                add_tensor(&qm, is);
            } else {
                expected.erase("input_scale");
            }
            break;
        }
        case Scheme::Nvfp4: {
            expected = {"weight_packed", "weight_scale", "weight_global_scale", "input_global_scale"};
            const CheckpointTensor* w = q_of("weight_packed");
            if (!w) return;
            if (w->dtype != DType::U8 || w->shape.size() != 2) {
                ck->add("wrong dtype: " + w->name + " is " + dtype_name(w->dtype) + " " + shape_string(w->shape) +
                        ", expected U8 [out, in/2]");
                return;
            }
            qm.out = w->shape[0];
            qm.in = w->shape[1] * kFp4PerByte;
            qm.q = w;
            qm.scale = ck->need(m, p, "weight_scale", {DType::F8_E4M3}, {qm.out, cdiv(qm.in, a.group_size)});
            qm.global_scale = ck->need(m, p, "weight_global_scale", {DType::F32}, {1});
            ok = qm.scale && qm.global_scale;
            if (a.input_global_scale) {
                if (p.count("input_global_scale"))
                    add_tensor(&qm, ck->need(m, p, "input_global_scale", {DType::F32}, {1}));
            } else {
                expected.erase("input_global_scale");
            }
            break;
        }
        case Scheme::Int4: {
            expected = {"weight_packed", "weight_scale", "weight_shape"};
            if (!a.symmetric) expected.insert("weight_zero_point");
            if (a.act_order_group) expected.insert("weight_g_idx");
            const CheckpointTensor* w = q_of("weight_packed");
            const CheckpointTensor* shape = q_of("weight_shape");
            if (!w || !shape) return;
            if (w->dtype != DType::I32 || w->shape.size() != 2) {
                ck->add("wrong dtype: " + w->name + " is " + dtype_name(w->dtype) + " " + shape_string(w->shape) +
                        ", expected I32 [out, ceil(in/8)]");
                return;
            }
            if ((shape->dtype != DType::I64 && shape->dtype != DType::I32) || shape->shape != std::vector<int64_t>{2}) {
                ck->add("wrong dtype: " + shape->name + " is " + dtype_name(shape->dtype) + " " + shape_string(shape->shape) +
                        ", expected I64 or I32 [2]");
                return;
            }
            qm.out = int_at(*shape, 0);
            qm.in = int_at(*shape, 1);
            if (qm.out != w->shape[0] || qm.in <= 0 || cdiv(qm.in, kInt4PerWord) != w->shape[1]) {
                ck->add("wrong shape: " + shape->name + " says [" + std::to_string(qm.out) + "," + std::to_string(qm.in) +
                        "] but " + w->name + " is " + shape_string(w->shape));
                return;
            }
            qm.q = w;
            add_tensor(&qm, shape);
            const int64_t groups = cdiv(qm.in, a.group_size);
            qm.scale = ck->need(m, p, "weight_scale", kScaleDtypes, {qm.out, groups});
            ok = qm.scale != nullptr;
            if (!a.symmetric) {
                qm.zero_point = ck->need(m, p, "weight_zero_point", {DType::I32}, {cdiv(qm.out, kInt4PerWord), groups});
                ok = ok && qm.zero_point;
            }
            if (a.act_order_group) {
                qm.g_idx = ck->need(m, p, "weight_g_idx", {DType::I32}, {qm.in});
                ok = ok && qm.g_idx;
                if (qm.g_idx) {
                    for (int64_t i = 0; i < qm.in; ++i) {
                        const int64_t gi = int_at(*qm.g_idx, size_t(i));
                        if (gi < 0 || gi >= groups) {
                            ck->add("bad value: " + qm.g_idx->name + "[" + std::to_string(i) + "] = " + std::to_string(gi) +
                                    " is outside [0, " + std::to_string(groups) + ")");
                            ok = false;
                            break;
                        }
                    }
                }
            }
            break;
        }
    }
    for (const auto& [name, t] : p)
        if ((name == "weight" || kQuantParams.count(name)) && !expected.count(name))
            ck->add("unexpected: " + t->name + " (not part of " + a.describe() + ")");
    if (!ok) return;
    add_tensor(&qm, qm.q);
    add_tensor(&qm, qm.scale);
    add_tensor(&qm, qm.global_scale);
    add_tensor(&qm, qm.zero_point);
    add_tensor(&qm, qm.g_idx);
    plan->modules[m] = std::move(qm);
}

// A tensor the plan made (owned by it), for a module's repacked layout.
const CheckpointTensor* derive(QuantPlan* plan, const std::string& name, DType dtype, std::vector<int64_t> shape,
                               std::vector<uint8_t> bytes) {
    plan->derived_bytes.push_back(std::move(bytes));
    CheckpointTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.bytes = plan->derived_bytes.back().size();
    t.data = plan->derived_bytes.back().data();
    t.copied = true;
    plan->derived.push_back(std::move(t));
    return &plan->derived.back();
}

// AutoAWQ's GEMM packing puts column j of a group of eight at nibble kAwqNibble[j] of the word.
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint32_t nibble(uint32_t word, int i) { return (word >> (4 * i)) & 0xFu; }

// GPTQ (qweight [in/8, out], qzeros [groups, out/8], scales [groups, out], g_idx [in]; v1 stores
// zero - 1) and AutoAWQ GEMM (qweight [in, out/8], qzeros [groups, out/8] in its column order,
// scales [groups, out]): a module is quantized when it holds qweight. Each is repacked, without
// changing a value, into the compressed-tensors INT4 layout (w = (q - zero) x scale, q and zero
// unsigned nibbles): weight_packed [out, in/8], weight_scale [out, groups] in the scales' dtype,
// weight_zero_point [out/8, groups] unless every zero is 8 (then symmetric), and g_idx only where
// it is not the plain i / group_size.
void plan_native_int4(const QuantConfig& c, const std::map<std::string, Params>& mods, Checker* ck, QuantPlan* plan) {
    const NativeInt4& n = c.native;
    const bool awq = c.method == Method::Awq;
    for (const auto& [m, p] : mods) {
        ck->current = m;
        bool listed = false;
        for (const auto& e : c.modules_to_not_convert) listed = listed || not_convert_matches(e, m);
        auto qw = p.find("qweight");
        if (qw == p.end()) {
            for (const char* name : {"qzeros", "scales", "g_idx"})
                if (p.count(name)) ck->add("unexpected: " + p.at(name)->name + " has no qweight beside it");
            if (is_linear(m, p))
                plan->plain[m] = {m, listed ? "modules_to_not_convert" : "stored unquantized (no qweight)"};
            continue;
        }
        if (listed) ck->add("module " + m + " is in modules_to_not_convert but stored quantized");
        if (p.count("weight")) ck->add("unexpected: " + p.at("weight")->name + " beside " + qw->second->name);
        const CheckpointTensor* w = qw->second;
        if (w->dtype != DType::I32 || w->shape.size() != 2) {
            ck->add("wrong dtype: " + w->name + " is " + dtype_name(w->dtype) + " " + shape_string(w->shape) +
                    ", expected I32 " + (awq ? "[in, out/8]" : "[in/8, out]"));
            continue;
        }
        const int64_t K = awq ? w->shape[0] : w->shape[0] * kInt4PerWord;
        const int64_t N = awq ? w->shape[1] * kInt4PerWord : w->shape[1];
        if (K % kInt4PerWord != 0 || N % kInt4PerWord != 0 || K <= 0 || N <= 0) {
            ck->add("wrong shape: " + w->name + " is " + shape_string(w->shape) + ": in and out must be multiples of 8");
            continue;
        }
        const int64_t gs = n.group_size > 0 ? n.group_size : K, G = cdiv(K, gs);
        const CheckpointTensor* qz = ck->need(m, p, "qzeros", {DType::I32}, {G, N / kInt4PerWord});
        const CheckpointTensor* sc = ck->need(m, p, "scales", {DType::F16, DType::BF16, DType::F32}, {G, N});
        const CheckpointTensor* gi = nullptr;
        if (p.count("g_idx")) {
            if (awq) ck->add("unexpected: " + p.at("g_idx")->name + " (AWQ has no g_idx)");
            else gi = ck->need(m, p, "g_idx", {DType::I32}, {K});
        } else if (n.desc_act) {
            ck->add("missing: " + m + ".g_idx [" + std::to_string(K) + "] (desc_act: true)");
            continue;
        }
        if (!qz || !sc || (p.count("g_idx") && !awq && !gi)) continue;
        bool plain_groups = true;
        if (gi) {
            bool in_range = true;
            for (int64_t i = 0; i < K; ++i) {
                const int64_t g = int_at(*gi, size_t(i));
                if (g < 0 || g >= G) {
                    ck->add("bad value: " + gi->name + "[" + std::to_string(i) + "] = " + std::to_string(g) +
                            " is outside [0, " + std::to_string(G) + ")");
                    in_range = false;
                    break;
                }
                plain_groups = plain_groups && g == i / gs;
            }
            if (!in_range) continue;
        }
        // Zero points, [G, N], read in the format's column order; GPTQ v1 adds one.
        const uint32_t* zw = static_cast<const uint32_t*>(qz->data);
        std::vector<uint8_t> zero(size_t(G * N));
        bool all_eight = true, wrapped = false;
        for (int64_t g = 0; g < G; ++g)
            for (int64_t o = 0; o < N; ++o) {
                const uint32_t word = zw[g * (N / kInt4PerWord) + o / kInt4PerWord];
                const int z = int(nibble(word, awq ? kAwqNibble[o % kInt4PerWord] : int(o % kInt4PerWord))) +
                              (n.zero_plus_one ? 1 : 0);
                wrapped = wrapped || z > 15;
                all_eight = all_eight && z == 8;
                zero[size_t(g * N + o)] = uint8_t(z);
            }
        if (wrapped) {
            ck->add("bad value: " + qz->name + " holds a zero point of 0, which the GPTQ v1 format stores as 15 (zero - 1 "
                    "wraps); re-export it in the gptq_v2 format");
            continue;
        }
        // weight_packed [N, K/8]: word (o, k) holds inputs 8k .. 8k+7 of row o, input 8k+j at nibble j.
        const int64_t kw = K / kInt4PerWord;
        std::vector<uint8_t> packed(size_t(N * kw) * sizeof(uint32_t));
        uint32_t* dst = reinterpret_cast<uint32_t*>(packed.data());
        const uint32_t* src = static_cast<const uint32_t*>(w->data);
        if (!awq) {  // GPTQ packs the same eight inputs per word: a transpose of the word matrix
            for (int64_t k = 0; k < kw; ++k)
                for (int64_t o = 0; o < N; ++o) dst[o * kw + k] = src[k * N + o];
        } else {
            std::fill(dst, dst + N * kw, 0u);
            for (int64_t i = 0; i < K; ++i)
                for (int64_t o = 0; o < N; ++o) {
                    const uint32_t q = nibble(src[i * (N / kInt4PerWord) + o / kInt4PerWord], kAwqNibble[o % kInt4PerWord]);
                    dst[o * kw + i / kInt4PerWord] |= q << (4 * (i % kInt4PerWord));
                }
        }
        // weight_scale [N, G]: the transpose, element for element in the stored dtype.
        const size_t es = dtype_size(sc->dtype);
        std::vector<uint8_t> scale(size_t(N * G) * es);
        for (int64_t g = 0; g < G; ++g)
            for (int64_t o = 0; o < N; ++o)
                std::memcpy(scale.data() + size_t(o * G + g) * es, static_cast<const uint8_t*>(sc->data) + size_t(g * N + o) * es,
                            es);
        QuantModule qm;
        qm.module = m;
        qm.args.scheme = Scheme::Int4;
        qm.args.format = n.format;
        qm.args.group_size = int(gs);
        qm.args.symmetric = all_eight;
        qm.args.act_order_group = gi && !plain_groups;
        qm.out = N;
        qm.in = K;
        qm.q = derive(plan, m + ".weight_packed", DType::I32, {N, kw}, std::move(packed));
        qm.scale = derive(plan, m + ".weight_scale", sc->dtype, {N, G}, std::move(scale));
        if (!all_eight) {  // weight_zero_point [N/8, G]: word (r, g) holds rows 8r .. 8r+7 of group g
            std::vector<uint8_t> zp(size_t(N / kInt4PerWord * G) * sizeof(uint32_t), 0);
            uint32_t* z32 = reinterpret_cast<uint32_t*>(zp.data());
            for (int64_t o = 0; o < N; ++o)
                for (int64_t g = 0; g < G; ++g)
                    z32[(o / kInt4PerWord) * G + g] |= uint32_t(zero[size_t(g * N + o)]) << (4 * (o % kInt4PerWord));
            qm.zero_point = derive(plan, m + ".weight_zero_point", DType::I32, {N / kInt4PerWord, G}, std::move(zp));
        }
        if (qm.args.act_order_group) qm.g_idx = gi;
        for (const CheckpointTensor* t : {w, qz, sc, gi})
            if (t) add_tensor(&qm, t);
        plan->modules[m] = std::move(qm);
    }
}

void plan_compressed(const QuantConfig& c, const std::map<std::string, Params>& mods, Checker* ck, QuantPlan* plan) {
    std::vector<Matcher> ignore(c.ignore.size());
    for (size_t i = 0; i < c.ignore.size(); ++i) compile(c.ignore[i], &ignore[i], ck, "quantization_config.ignore");
    std::vector<std::vector<Matcher>> targets(c.groups.size());
    for (size_t g = 0; g < c.groups.size(); ++g) {
        targets[g].resize(c.groups[g].targets.size());
        for (size_t i = 0; i < targets[g].size(); ++i)
            compile(c.groups[g].targets[i], &targets[g][i], ck,
                    "quantization_config.config_groups." + c.groups[g].name + ".targets");
    }
    for (const auto& [m, p] : mods) {
        ck->current = m;
        bool quant_tensors = false;
        for (const auto& [name, t] : p)
            quant_tensors = quant_tensors || kQuantParams.count(name) || (name == "weight" && t->dtype == DType::F8_E4M3);
        if (!is_linear(m, p)) {
            if (quant_tensors) ck->add("unexpected: quantized tensors on " + m + ", which is not a linear module");
            continue;
        }
        std::string ignored_by;
        for (const auto& ig : ignore)
            if (ig.is_class || match_rank(ig, m)) ignored_by = ig.target;
        int best = 0;
        std::vector<size_t> best_groups;
        for (size_t g = 0; g < targets.size(); ++g) {
            int rank = 0;
            for (const auto& t : targets[g]) {
                const int r = match_rank(t, m);
                if (r && (!rank || r < rank)) rank = r;
            }
            if (!rank) continue;
            if (!best || rank < best) {
                best = rank;
                best_groups = {g};
            } else if (rank == best) {
                best_groups.push_back(g);
            }
        }
        if (!ignored_by.empty() || best_groups.empty()) {
            const std::string why = !ignored_by.empty() ? "ignored (\"" + ignored_by + "\")" : "not targeted by any config group";
            if (quant_tensors) ck->add("module " + m + " is " + why + " but stored quantized");
            plan->plain[m] = {m, why};
            continue;
        }
        if (best_groups.size() > 1) {
            ck->add("module " + m + " is matched equally by config groups " + c.groups[best_groups[0]].name + " and " +
                    c.groups[best_groups[1]].name);
            continue;
        }
        plan_module_ct(m, p, c.groups[best_groups[0]], ck, plan);
    }
}

}  // namespace

bool target_matches(const std::string& target, const std::string& module_name) {
    Matcher m;
    Checker ck;
    if (!compile(target, &m, &ck, "target")) return false;
    return !m.is_class && match_rank(m, module_name) != 0;
}

const QuantModule* QuantPlan::find_weight(const std::string& weight_name) const {
    constexpr const char* kSuffix = ".weight";
    if (!ends_with(weight_name, kSuffix)) return nullptr;
    auto it = modules.find(weight_name.substr(0, weight_name.size() - 7));
    return it == modules.end() ? nullptr : &it->second;
}

frost_status build_quant_plan(const QuantConfig& config, const Checkpoint& ck, QuantPlan* out) {
    std::vector<std::string> pr;
    FROST_TRY(build_quant_plan(config, ck, out, &pr));
    if (!pr.empty()) {
        std::string list;
        for (size_t i = 0; i < pr.size() && i < size_t(kMaxListedProblems); ++i) list += "\n  " + pr[i];
        if (pr.size() > size_t(kMaxListedProblems))
            list += "\n  ... and " + std::to_string(pr.size() - kMaxListedProblems) + " more";
        return fail(FROST_ERR_INCOMPATIBLE, "quantized checkpoint (%s) does not match its quantization_config (%zu problems):%s",
                    config.summary().c_str(), pr.size(), list.c_str());
    }
    return FROST_OK;
}

const std::vector<std::string>* QuantPlan::find_invalid(const std::string& tensor_name) const {
    const size_t dot = tensor_name.rfind('.');
    if (dot == std::string::npos) return nullptr;
    auto it = invalid.find(tensor_name.substr(0, dot));
    return it == invalid.end() ? nullptr : &it->second;
}

frost_status build_quant_plan(const QuantConfig& config, const Checkpoint& ck, QuantPlan* out,
                              std::vector<std::string>* problems) {
    QuantPlan plan;
    plan.config = config;
    if (!config.quantized()) {
        *out = std::move(plan);
        return FROST_OK;
    }
    std::map<std::string, Params> mods;
    for (const auto& t : ck.tensors()) {
        if (t.name.rfind(kVisualPrefix, 0) == 0) continue;  // the vision tower is never bound
        const size_t dot = t.name.rfind('.');
        if (dot == std::string::npos) continue;
        mods[t.name.substr(0, dot)][t.name.substr(dot + 1)] = &t;
    }
    Checker checker;
    if (config.method == Method::Fp8) plan_fp8(config, mods, &checker, &plan);
    else if (config.method == Method::Gptq || config.method == Method::Awq) plan_native_int4(config, mods, &checker, &plan);
    else plan_compressed(config, mods, &checker, &plan);
    // A module with a problem is neither quantized nor plain: binding skips its tensors (already
    // reported here) instead of reporting them a second time as wrong-dtype or unexpected.
    for (const auto& m : checker.bad) {
        plan.modules.erase(m);
        plan.plain.erase(m);
        auto& names = plan.invalid[m];
        for (const auto& [param, t] : mods[m]) names.push_back(t->name);
    }
    problems->insert(problems->end(), checker.problems.begin(), checker.problems.end());
    *out = std::move(plan);
    return FROST_OK;
}

}  // namespace frost::model::quant
