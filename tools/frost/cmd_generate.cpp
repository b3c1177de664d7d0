// `frost generate`: prompt (text or ids) -> generated ids/text on the CPU (or CUDA) engine, with
// TTFT, ms/token and a fingerprint of the last logits.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine_args.h"
#include "exec/error.h"
#include "model/capsule_generate.h"
#include "model/engine.h"
#include "model/engine_cuda.h"
#include "model/config.h"
#include "model/generate.h"
#include "serve/model_backend.h"

namespace {

constexpr const char* kUsage =
    "usage: frost generate --model DIR [--backend cpu|cuda] (--prompt TEXT | --prompt-ids IDS)\n"
    "         [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--chat] [--json]\n"
    "         [--fp8-prefill w8a8|exact] [--fp8-decode w8a8|exact] [--chunk-invariant]\n"
    "  --chunk-invariant (CUDA): numerics whose bits do not depend on how a prompt is cut into\n"
    "  prefill chunks (a capsule's restore + append equals the cold prefill bit for bit).\n"
    "  --fp8-prefill w8a8 (CUDA; FP8 checkpoints, blocks of 128 or per-channel, and INT4 in groups\n"
    "  of 128 as W4A8): prefill GEMMs, FP8 MoE experts included, on FP8 tensor cores with\n"
    "  activations quantized per 128-group; exact (default): dequantized bf16 weights (an FP8 MoE\n"
    "  prefill is ~2x faster with w8a8).\n"
    "  --fp8-decode w8a8 (CUDA, FP8 checkpoints): decode GEMVs the same way (any FP8 layout);\n"
    "  exact (default): bf16 activations times the FP8 weights.\n"
    "  IDS: comma-separated token ids, or @FILE holding them. --temperature 0 (default) is greedy.\n"
    "  --chat renders --prompt as one user message with the model's chat template, exactly as\n"
    "  `frost serve` renders it (the same renderer; the template's default thinking). --json prints one object: ids, text (with a\n"
    "  tokenizer), ttft_ms, ms_per_token, fingerprint (FNV-1a 64 of the last logits).\n"
    "       frost generate --model DIR --capsule FILE [--prompt-ids SUFFIX | --prompt TEXT] [options above]\n"
    "  restores the capsule file (validated against DIR), appends the suffix if given, and continues.";

int run_generate(const std::vector<std::string>& args) {
    using namespace frost;
    std::string model, prompt, prompt_ids, backend = "cpu", capsule, fp8_prefill = "exact", fp8_decode = "exact";
    bool have_prompt = false, chat = false, as_json = false, chunk_invariant = false;
    model::GenerateRequest req;
    req.max_new_tokens = 32;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (a == "--chat") { chat = true; continue; }
            if (a == "--json") { as_json = true; continue; }
            if (a == "--chunk-invariant") { chunk_invariant = true; continue; }
            if (a == "--help" || a == "-h") { std::printf("%s\n", kUsage); return 0; }
            if (i + 1 >= args.size()) { std::fprintf(stderr, "frost generate: %s needs a value\n%s\n", a.c_str(), kUsage); return 2; }
            const std::string& v = args[++i];
            if (a == "--model") model = v;
            else if (a == "--backend") backend = v;
            else if (a == "--prompt") { prompt = v; have_prompt = true; }
            else if (a == "--prompt-ids") prompt_ids = v;
            else if (a == "--capsule") capsule = v;
            else if (a == "--fp8-prefill") fp8_prefill = v;
            else if (a == "--fp8-decode") fp8_decode = v;
            else if (a == "--max-new-tokens" || a == "--temperature" || a == "--top-k" || a == "--top-p" ||
                     a == "--seed") {
                // Whole-string numbers only ("12abc" is refused), each error naming its flag.
                size_t used = 0;
                bool ok = true;
                try {
                    if (a == "--max-new-tokens") { req.max_new_tokens = std::stoi(v, &used); ok = req.max_new_tokens > 0; }
                    else if (a == "--temperature") { req.sampling.temperature = std::stof(v, &used); ok = req.sampling.temperature >= 0; }
                    else if (a == "--top-k") { req.sampling.top_k = std::stoi(v, &used); ok = req.sampling.top_k >= 0; }
                    else if (a == "--top-p") { req.sampling.top_p = std::stof(v, &used); ok = req.sampling.top_p > 0 && req.sampling.top_p <= 1; }
                    else { ok = !v.empty() && v[0] != '-'; req.sampling.seed = std::stoull(v, &used); }
                } catch (const std::exception&) {
                    ok = false;
                }
                if (!ok || used != v.size()) {
                    std::fprintf(stderr, "frost generate: bad value for %s: '%s'\n%s\n", a.c_str(), v.c_str(), kUsage);
                    return 2;
                }
            }
            else { std::fprintf(stderr, "frost generate: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr, "frost generate: bad argument\n%s\n", kUsage);
        return 2;
    }
    const bool prompt_given = have_prompt || !prompt_ids.empty();
    const char* why = model.empty() ? "--model is required"
                      : (have_prompt && !prompt_ids.empty()) ? "give --prompt or --prompt-ids, not both"
                      : (capsule.empty() && !prompt_given) ? "--prompt or --prompt-ids is required (or --capsule)"
                                                           : nullptr;
    if (why) {
        std::fprintf(stderr, "frost generate: %s\n%s\n", why, kUsage);
        return 2;
    }
    {
        std::ifstream cfg(model + "/config.json");
        if (!cfg) {
            std::fprintf(stderr, "frost generate: --model %s: no config.json there (not a model folder)\n", model.c_str());
            return 1;
        }
    }
    model::EngineOptions opts;
    opts.chunk_invariant = chunk_invariant;
    if (!cli::parse_backend(backend, &opts.backend)) { std::fprintf(stderr, "frost generate: --backend must be cpu or cuda\n"); return 2; }
    if (!cli::parse_fp8_mode(fp8_prefill, &opts.fp8_w8a8_prefill)) {
        std::fprintf(stderr, "frost generate: --fp8-prefill must be w8a8 or exact, got '%s'\n", fp8_prefill.c_str());
        return 2;
    }
    if (!cli::parse_fp8_mode(fp8_decode, &opts.fp8_w8a8_decode)) {
        std::fprintf(stderr, "frost generate: --fp8-decode must be w8a8 or exact, got '%s'\n", fp8_decode.c_str());
        return 2;
    }
    auto tok = cli::tokenizer_beside(model);
    if (have_prompt) {
        if (!tok) { std::fprintf(stderr, "frost generate: %s has no tokenizer.json; use --prompt-ids\n", model.c_str()); return 1; }
        std::string text = prompt;
        if (chat) {
            // The server's renderer (serve::ModelText): same template, same defaults.
            model::ModelConfig mc;
            std::unique_ptr<serve::ModelText> mt;
            if (model::load_config(model, &mc) != FROST_OK || serve::ModelText::load(model, mc.eos_token_ids, &mt) != FROST_OK) {
                std::fprintf(stderr, "frost generate: --chat: %s\n", frost_last_error());
                return 1;
            }
            serve::ChatRender r;
            r.messages = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
            if (mt->render_chat(r, &text) != FROST_OK) {
                std::fprintf(stderr, "frost generate: --chat: %s\n", frost_last_error());
                return 1;
            }
        }
        req.prompt = tok->encode(text);
    } else if (!prompt_ids.empty()) {
        std::string err;
        if (!cli::read_prompt_ids(prompt_ids, &req.prompt, &err)) { std::fprintf(stderr, "frost generate: %s\n", err.c_str()); return 2; }
    }
    int64_t capsule_tokens = 0;  // --capsule: the capsule's boundary P comes before the suffix
    if (!capsule.empty() && model::capsule_file_boundary(capsule, &capsule_tokens) != FROST_OK) {
        std::fprintf(stderr, "frost generate: %s\n", frost_last_error());
        return 1;
    }
    opts.max_seq_len = static_cast<int>(capsule_tokens + static_cast<int64_t>(req.prompt.size())) + req.max_new_tokens + 1;
    std::unique_ptr<model::Engine> e;
    if (model::Engine::create(model, opts, &e) != FROST_OK) {
        std::fprintf(stderr, "frost generate: %s\n", frost_last_error());
        return 1;
    }
    model::GenerateResult res;
    const frost_status gs = capsule.empty() ? model::generate(*e, 0, req, &res)
                                            : model::generate_from_capsule(*e, model, 0, capsule, req, &res);
    if (gs != FROST_OK) {
        std::fprintf(stderr, "frost generate: %s\n", frost_last_error());
        return 1;
    }
    const std::string text = tok ? tok->decode(res.ids) : std::string();
    if (as_json) {
        nlohmann::json j;
        j["ids"] = res.ids;
        if (tok) j["text"] = text;
        j["prompt_tokens"] = req.prompt.size();
        if (!capsule.empty()) j["capsule_tokens"] = capsule_tokens;
        j["ttft_ms"] = res.ttft_ms;
        j["ms_per_token"] = res.ms_per_token;
        j["fingerprint"] = res.fingerprint;
        j["backend"] = backend;
        const model::CudaEngineInfo ci = model::cuda_engine_info(*e);
        if (ci.active) {  // load-time facts of the CUDA engine: graphs are never captured later
            j["graphs"] = ci.graphs;
            j["capture_ms"] = ci.capture_ms;
            j["weights_upload_ms"] = ci.weights_ms;
            j["gemm_plans"] = ci.gemm_plans;
            j["weight_bytes"] = ci.weight_bytes;
            j["quantized_matrices"] = ci.quantized_matrices;
        }
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        if (tok) std::printf("%s\n", text.c_str());
        else {
            for (size_t i = 0; i < res.ids.size(); ++i) std::printf("%s%d", i ? "," : "", res.ids[i]);
            std::printf("\n");
        }
        std::printf("fingerprint %s  ttft %.2f ms  %.2f ms/token\n", res.fingerprint.c_str(), res.ttft_ms,
                    res.ms_per_token);
        const model::CudaEngineInfo ci = model::cuda_engine_info(*e);
        if (ci.active) {
            std::printf("cuda engine: %zu graphs captured at load in %.1f ms (%zu GEMM plans), weights uploaded in %.1f ms\n",
                        ci.graphs, ci.capture_ms, ci.gemm_plans, ci.weights_ms);
            std::printf("cuda engine: %.3f GB of weights on the device, %d matrices kept quantized (%d dequantized at load)\n",
                        double(ci.weight_bytes) / 1e9, ci.quantized_matrices, ci.dequantized_matrices);
        }
    }
    return 0;
}

}  // namespace

FROST_COMMAND("generate", "generate tokens from a prompt with the hybrid LM engine", kUsage, run_generate);
