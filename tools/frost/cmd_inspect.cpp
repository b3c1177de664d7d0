// `frost inspect MODEL_DIR [--json]`: validate a model folder and describe it — parsed config,
// unsupported features, tensor inventory, tying, total / active parameters, fingerprint. Non-zero exit on any failure.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "exec/error.h"
#include "model/config.h"
#include "model/fingerprint.h"
#include "model/quant/dequant.h"
#include "model/qwen35/weight_table.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "util/bf16.h"
#include "util/fs.h"

namespace {

using nlohmann::json;
namespace fm = frost::model;

constexpr const char* kUsage =
    "usage: frost inspect MODEL_DIR [--json] [--modules] [--dump-tensor NAME --out FILE]\n"
    "Validates config.json and every safetensors file (header, offsets, sizes), binds the weights to\n"
    "the config, and prints the config, unsupported features, tensor inventory, tying, the\n"
    "quantization format (per module with --modules; always in --json) and the deployment\n"
    "fingerprint. Exit 1 with the reason on any validation failure.\n"
    "--dump-tensor writes tensor NAME as Frost reads it (a quantized `<module>.weight` dequantized)\n"
    "to FILE as float32 little-endian, row-major; its shape is printed.";

namespace fq = frost::model::quant;

// Tensor `name` as fp32: a quantized linear's weight dequantized exactly as weight binding does,
// any other tensor converted from its stored float dtype.
frost_status tensor_f32(const fm::Checkpoint& ck, const fq::QuantPlan& plan, const std::string& name,
                        std::vector<float>* out, std::vector<int64_t>* shape) {
    if (const fq::QuantModule* q = plan.find_weight(name)) {
        out->resize(size_t(q->out * q->in));
        *shape = {q->out, q->in};
        return fq::dequantize_module(*q, out->data());
    }
    const fm::CheckpointTensor* t = ck.find(name);
    if (!t) return frost::fail(FROST_ERR_NOT_FOUND, "no tensor '%s' in the checkpoint", name.c_str());
    *shape = t->shape;
    int64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    out->resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        switch (t->dtype) {
            case fm::DType::F32: (*out)[i] = static_cast<const float*>(t->data)[i]; break;
            case fm::DType::BF16: (*out)[i] = frost::util::bf16_to_f32(static_cast<const uint16_t*>(t->data)[i]); break;
            case fm::DType::F16: (*out)[i] = fq::f16_to_f32(static_cast<const uint16_t*>(t->data)[i]); break;
            default:
                return frost::fail(FROST_ERR_UNSUPPORTED, "tensor '%s' is %s, not a float tensor Frost reads directly",
                            name.c_str(), fm::dtype_name(t->dtype));
        }
    }
    return FROST_OK;
}

json quant_json(const fq::QuantPlan& plan) {
    json mods = json::object(), plain = json::object();
    for (const auto& [m, q] : plan.modules)
        mods[m] = {{"format", fq::scheme_name(q.args.scheme)}, {"layout", q.args.describe()}, {"group", q.group},
                   {"shape", {q.out, q.in}}, {"stored_bytes", q.stored_bytes}};
    for (const auto& [m, p] : plan.plain) plain[m] = {{"format", "bf16"}, {"reason", p.reason}};
    return {{"method", plan.config.summary()}, {"quantized_modules", mods}, {"unquantized_linears", plain}};
}

// What the CUDA engine holds of the GEMM weights, from the weight table under its precision
// (qwen35::matrix_placements; nothing is allocated): matrices kept quantized (their stored bytes),
// quantized ones it dequantizes to bf16 and why, and the bf16 rest.
json cuda_weights_json(const fm::ModelWeights& w) {
    fm::qwen35::Precision p = fm::qwen35::precision_for(frost::ops::DType::BF16);
    p.keep_quantized = true;
    uint64_t kept = 0, kept_bytes = 0, deq = 0, deq_bytes = 0, dense = 0, dense_bytes = 0;
    std::map<std::string, int> why;
    for (const auto& m : fm::qwen35::matrix_placements(w.config, w, p)) {
        if (m.kept) {
            ++kept;
            kept_bytes += m.stored_bytes;
        } else if (m.stored_quantized) {
            ++deq;
            deq_bytes += m.dense_bytes;
            why[m.why]++;
        } else {
            ++dense;
            dense_bytes += m.dense_bytes;
        }
    }
    return {{"matrices_kept_quantized", kept}, {"kept_bytes", kept_bytes}, {"matrices_dequantized", deq},
            {"dequantized_bytes", deq_bytes}, {"dequantized_because", why}, {"matrices_bf16", dense},
            {"bf16_bytes", dense_bytes}, {"gemm_weight_bytes", kept_bytes + deq_bytes + dense_bytes}};
}

const char* family_name(fm::Family f) {
    switch (f) {
        case fm::Family::Qwen35: return "qwen3.5";
        case fm::Family::Qwen35Moe: return "qwen3.5-moe";
        case fm::Family::Qwen3Next: return "qwen3-next";
    }
    return "?";
}

json config_json(const fm::ModelConfig& c) {
    std::string kinds;
    for (auto k : c.layer_types) kinds += k == fm::LayerKind::Linear ? 'L' : 'F';
    return {{"family", family_name(c.family)}, {"model_type", c.model_type}, {"architecture", c.architecture},
            {"multimodal_wrapper", c.multimodal_wrapper}, {"weight_prefix", c.weight_prefix},
            {"hidden_size", c.hidden_size}, {"num_layers", c.num_layers}, {"layer_kinds", kinds},
            {"linear_layers", c.num_linear_layers()}, {"full_layers", c.num_full_layers()},
            {"vocab_size", c.vocab_size}, {"intermediate_size", c.intermediate_size},
            {"num_heads", c.num_heads}, {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
            {"rotary_dim", c.rotary_dim}, {"rope_theta", c.rope_theta},
            {"lin_num_k_heads", c.lin_num_k_heads}, {"lin_num_v_heads", c.lin_num_v_heads},
            {"lin_k_head_dim", c.lin_k_head_dim}, {"lin_v_head_dim", c.lin_v_head_dim},
            {"conv_kernel", c.conv_kernel}, {"rms_norm_eps", c.rms_norm_eps},
            {"max_position_embeddings", c.max_position_embeddings}, {"eos_token_ids", c.eos_token_ids},
            {"num_experts", c.num_experts}, {"num_experts_per_tok", c.num_experts_per_tok},
            {"moe_intermediate_size", c.moe_intermediate_size},
            {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
            {"norm_topk_prob", c.norm_topk_prob}, {"moe_layers", c.num_moe_layers()},
            {"mtp_num_layers", c.mtp_num_layers}};
}

int fail_with(bool as_json, const std::string& stage) {
    std::string msg = frost_last_error();
    if (as_json) std::printf("%s\n", json({{"ok", false}, {"stage", stage}, {"error", msg}}).dump(2).c_str());
    std::fprintf(stderr, "frost inspect: %s failed: %s\n", stage.c_str(), msg.c_str());
    return 1;
}

int run_inspect(const std::vector<std::string>& args) {
    std::string dir, dump_name, dump_out;
    bool as_json = false, modules = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json") as_json = true;
        else if (a == "--modules") modules = true;
        else if ((a == "--dump-tensor" || a == "--out") && i + 1 < args.size()) (a == "--out" ? dump_out : dump_name) = args[++i];
        else if (dir.empty() && a.rfind("--", 0) != 0) dir = a;
        else {
            std::fprintf(stderr, "frost inspect: unexpected argument %s\n%s\n", a.c_str(), kUsage);
            return 2;
        }
    }
    if (dir.empty() || dump_name.empty() != dump_out.empty()) {
        std::fprintf(stderr, "%s\n", kUsage);
        return 2;
    }
    fm::ModelConfig cfg;
    if (fm::load_config(dir, &cfg) != FROST_OK) return fail_with(as_json, "config");
    std::shared_ptr<fm::Checkpoint> ck;
    if (fm::Checkpoint::open_dir(dir, &ck) != FROST_OK) return fail_with(as_json, "safetensors");
    fq::QuantConfig qc;
    if (fq::load_quant_config(dir, &qc) != FROST_OK) return fail_with(as_json, "quantization_config");

    std::map<std::string, uint64_t> dtype_count, dtype_bytes;
    uint64_t skipped = 0, mtp = 0;
    for (const auto& t : ck->tensors()) {
        dtype_count[fm::dtype_name(t.dtype)]++;
        dtype_bytes[fm::dtype_name(t.dtype)] += t.bytes;
        if (t.name.rfind("model.visual.", 0) == 0) ++skipped;
        if (t.name.rfind("mtp.", 0) == 0) ++mtp;
    }
    const auto unsupported = cfg.unsupported_features();
    // Quantized linears bind as stored (no dequantization: inspecting a 27B FP8 checkpoint must not
    // allocate its fp32 weights); --dump-tensor decodes the one tensor asked for.
    fm::ModelWeights w;
    fm::WeightLoadOptions lo;
    lo.keep_quantized = true;
    lo.dequant_dtype = fm::DType::BF16;  // what still dequantizes (Qwen3-Next's regrouped projections)
    frost_status bind = fm::bind_weights(cfg, ck, qc, &w, lo);
    std::string bind_error = bind == FROST_OK ? "" : frost_last_error();
    if (bind == FROST_OK && !dump_name.empty()) {
        std::vector<float> values;
        std::vector<int64_t> shape;
        std::string err;
        if (tensor_f32(*ck, *w.quant, dump_name, &values, &shape) != FROST_OK) return fail_with(as_json, "dump-tensor");
        if (!frost::util::write_file(dump_out, std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)), &err)) {
            std::fprintf(stderr, "frost inspect: %s\n", err.c_str());
            return 1;
        }
        std::printf("%s\n", json({{"tensor", dump_name}, {"shape", shape}, {"dtype", "F32"}, {"out", dump_out}}).dump().c_str());
        return 0;
    }
    fm::FingerprintResult fp;
    if (fm::model_fingerprint(dir, &fp, !as_json) != FROST_OK) return fail_with(as_json, "fingerprint");

    json inv = {{"files", ck->file_count()}, {"tensors", ck->tensors().size()}, {"bytes", ck->data_bytes()},
                {"visual_tensors_skipped", skipped}, {"mtp_tensors", mtp}, {"dtypes", json::object()}};
    for (const auto& [d, n] : dtype_count) inv["dtypes"][d] = {{"count", n}, {"bytes", dtype_bytes[d]}};
    if (as_json) {
        json out = {{"ok", bind == FROST_OK}, {"model_dir", dir}, {"config", config_json(cfg)},
                    {"unsupported_features", unsupported}, {"inventory", inv},
                    {"fingerprint", fp.hex}, {"fingerprint_cached", fp.cached}};
        if (bind == FROST_OK) {
            out["tied_embeddings"] = w.tied;
            out["bound_bytes"] = w.total_bytes();
            out["quantization"] = quant_json(*w.quant);
            const fm::ParamCounts pc = fm::count_params(w);
            out["params"] = {{"total", pc.total}, {"active", pc.active}};
            out["cuda_weights"] = cuda_weights_json(w);
        } else {
            out["error"] = bind_error;
        }
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("model      %s\n", dir.c_str());
        std::printf("family     %s (%s, %s%s)\n", family_name(cfg.family), cfg.model_type.c_str(), cfg.architecture.c_str(),
                    cfg.multimodal_wrapper ? ", multimodal wrapper" : "");
        std::printf("layers     %d (%d linear + %d full), H=%d, F=%d, vocab=%d\n", cfg.num_layers, cfg.num_linear_layers(),
                    cfg.num_full_layers(), cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
        std::printf("attention  Hq=%d Hkv=%d d=%d rotary=%d theta=%g\n", cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
                    cfg.rotary_dim, cfg.rope_theta);
        std::printf("deltanet   Hk=%d Hv=%d dk=%d dv=%d K=%d\n", cfg.lin_num_k_heads, cfg.lin_num_v_heads,
                    cfg.lin_k_head_dim, cfg.lin_v_head_dim, cfg.conv_kernel);
        std::string eos;
        for (auto e : cfg.eos_token_ids) eos.append(eos.empty() ? "" : ",").append(std::to_string(e));
        std::printf("eos        %s\n", eos.empty() ? "(none)" : eos.c_str());
        std::printf("tensors    %zu in %zu file(s), %.3f GB", ck->tensors().size(), ck->file_count(), double(ck->data_bytes()) / 1e9);
        for (const auto& [d, n] : dtype_count) std::printf(", %s x%llu", d.c_str(), (unsigned long long)n);
        std::printf("\n");
        if (skipped) std::printf("skipped    %llu model.visual.* tensors\n", (unsigned long long)skipped);
        if (mtp) std::printf("mtp        %llu mtp.* tensors kept\n", (unsigned long long)mtp);
        for (const auto& f : unsupported) std::printf("unsupported %s\n", f.c_str());
        if (cfg.is_moe())
            std::printf("moe        %d of %d layers, %d experts top-%d (%s), expert FFN %d, shared %d\n",
                        cfg.num_moe_layers(), cfg.num_layers, cfg.num_experts, cfg.num_experts_per_tok,
                        cfg.norm_topk_prob ? "renormalised" : "not renormalised", cfg.moe_intermediate_size,
                        cfg.shared_expert_intermediate_size);
        if (bind == FROST_OK) {
            std::printf("embeddings %s\n", w.tied ? "tied (no lm_head.weight)" : "untied (lm_head.weight present)");
            const fm::ParamCounts pc = fm::count_params(w);
            std::printf("params     %.6g B total, %.6g B active per token (%llu / %llu)\n", double(pc.total) / 1e9,
                        double(pc.active) / 1e9, (unsigned long long)pc.total, (unsigned long long)pc.active);
        }
        if (bind == FROST_OK) {
            const json cw = cuda_weights_json(w);
            auto gb = [&](const char* k) { return double(cw[k].get<uint64_t>()) / 1e9; };
            std::printf("cuda       %.3f GB of GEMM weights on the device: %d kept quantized (%.3f GB), %d bf16 (%.3f GB)",
                        gb("gemm_weight_bytes"), cw["matrices_kept_quantized"].get<int>(), gb("kept_bytes"),
                        cw["matrices_bf16"].get<int>(), gb("bf16_bytes"));
            if (cw["matrices_dequantized"].get<int>() > 0) {
                std::printf(", %d dequantized to bf16 (%.3f GB:", cw["matrices_dequantized"].get<int>(), gb("dequantized_bytes"));
                for (const auto& [reason, n] : cw["dequantized_because"].items())
                    std::printf(" %s x%d;", reason.c_str(), n.get<int>());
                std::printf(")");
            }
            std::printf("\n");
        }
        if (bind == FROST_OK && qc.quantized()) {
            std::map<std::string, int> per_format;
            for (const auto& [m, q] : w.quant->modules) per_format[q.args.describe()]++;
            std::printf("quant      %s\n", qc.summary().c_str());
            for (const auto& [f, n] : per_format) std::printf("           %d linears %s\n", n, f.c_str());
            std::printf("           %zu linears bf16\n", w.quant->plain.size());
            if (modules) {
                for (const auto& [m, q] : w.quant->modules)
                    std::printf("  %-60s %s\n", m.c_str(), fq::scheme_name(q.args.scheme));
                for (const auto& [m, p] : w.quant->plain) std::printf("  %-60s bf16 (%s)\n", m.c_str(), p.reason.c_str());
            }
        }
        std::printf("fingerprint %s%s\n", fp.hex.c_str(), fp.from_cache ? " (cached)" : "");
    }
    if (bind != FROST_OK) {
        std::fprintf(stderr, "frost inspect: weights do not bind: %s\n", bind_error.c_str());
        return 1;
    }
    return 0;
}

}  // namespace

FROST_COMMAND("inspect", "validate a model folder; print config, tensor inventory, fingerprint", kUsage, run_inspect);
