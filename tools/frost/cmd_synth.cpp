// `frost synth`: write a synthetic Qwen3.5 / Qwen3.5-MoE / Qwen3-Next checkpoint (see src/model/synth.h).
#include <cstdio>
#include <string>

#include "command.h"
#include "model/synth.h"

namespace {

constexpr const char* kUsage =
    "usage: frost synth --out DIR --preset PRESET [--vocab N] [--seed S] [--tokenizer DIR] [--shard-gb G]\n"
    "                   [--quant fp8|fp8-dynamic|nvfp4|int4|int4-asym] [--decisive-router] [--header-only]\n"
    "                   [--layers N]\n"
    "PRESET: dense tiny, tiny-gpu, 0.8b, 2b, 4b, 9b, 27b; MoE moe-tiny, 35b-a3b (Qwen3.5/3.6-35B-A3B),\n"
    "next-moe-tiny, moe-tiny-gpu, next-moe-tiny-gpu, next-80b-a3b (Qwen3-Next-80B-A3B).\n"
    "Writes a valid checkpoint (Qwen3.5 / Qwen3.5-MoE multimodal-wrapper layout, Qwen3-Next flat layout)\n"
    "with deterministic random bf16 weights, streamed tensor by tensor; sharded with\n"
    "model.safetensors.index.json above --shard-gb (4).\n"
    "--tokenizer copies tokenizer.json/tokenizer_config.json from DIR and sizes the vocab to fit it.\n"
    "--quant writes every projection quantized as the published tools do (fp8: Qwen's block-128 FP8;\n"
    "fp8-dynamic, nvfp4, int4, int4-asym: llm-compressor's compressed-tensors); lm_head stays bf16.\n"
    "--decisive-router (MoE presets; with --quant too): routing set by a per-token sign code in ceil(log2 E)\n"
    "residual channels no layer writes, so every token's top-k gap is large (bf16 routes as fp32).\n"
    "--header-only writes every file and header but leaves the tensor data as holes (sparse files reading as\n"
    "zeros, no disk used): a released shape binds and inspects without writing it; outputs are meaningless.\n"
    "--layers N keeps the preset's first N layers (shapes and layer pattern unchanged): a released shape's\n"
    "per-layer kernels measured without writing the whole checkpoint.";

int run_synth(const std::vector<std::string>& args) {
    frost::model::SynthOptions opt;
    opt.progress = true;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (a == "--decisive-router") {
                opt.decisive_router = true;
                continue;
            }
            if (a == "--header-only") {
                opt.header_only = true;
                continue;
            }
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "frost synth: %s needs a value\n%s\n", a.c_str(), kUsage);
                return 2;
            }
            const std::string& v = args[++i];
            if (a == "--out") opt.out_dir = v;
            else if (a == "--preset") opt.preset = v;
            else if (a == "--vocab") opt.vocab = std::stoi(v);
            else if (a == "--seed") opt.seed = std::stoull(v);
            else if (a == "--tokenizer") opt.tokenizer_dir = v;
            else if (a == "--shard-gb") opt.shard_bytes = uint64_t(std::stod(v) * 1e9);
            else if (a == "--quant") opt.quant = v;
            else if (a == "--layers") opt.layers = std::stoi(v);
            else {
                std::fprintf(stderr, "frost synth: unknown option %s\n%s\n", a.c_str(), kUsage);
                return 2;
            }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr, "frost synth: bad number\n%s\n", kUsage);
        return 2;
    }
    if (opt.out_dir.empty()) {
        std::fprintf(stderr, "frost synth: --out is required\n%s\n", kUsage);
        return 2;
    }
    frost::model::SynthSummary s;
    if (frost::model::synth_checkpoint(opt, &s) != FROST_OK) {
        std::fprintf(stderr, "frost synth: %s\n", frost_last_error());
        return 1;
    }
    std::printf("wrote %s: preset %s%s%s, vocab %d, %zu tensors, %.3f GB in %zu file(s)%s\n", opt.out_dir.c_str(),
                opt.preset.c_str(), opt.quant.empty() ? "" : ", quant ", opt.quant.c_str(), s.vocab, s.tensors,
                double(s.tensor_bytes) / 1e9, s.shards, opt.header_only ? " (header only: data left as holes)" : "");
    return 0;
}

}  // namespace

FROST_COMMAND("synth", "write a synthetic Qwen3.5 checkpoint (deterministic random weights)", kUsage, run_synth);
