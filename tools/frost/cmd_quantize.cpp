// `frost quantize`: a bf16 checkpoint rewritten in a published quantized format
// (model/quant/quantize_checkpoint.h).
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "model/quant/quant_writer.h"
#include "model/quant/quantize_checkpoint.h"

namespace {

namespace fq = frost::model::quant;

constexpr const char* kUsage =
    "usage: frost quantize --model DIR --out DIR --quant fp8|fp8-dynamic|nvfp4|int4|int4-asym [--shard-gb G]\n"
    "                      [--threads N]\n"
    "Rewrites a bf16 (or fp16 / fp32) checkpoint in a published quantized format, with the layouts, config and\n"
    "ignore lists the tools write: fp8 = Qwen's FP8 (block-128 scales, as transformers' FineGrainedFP8);\n"
    "fp8-dynamic, nvfp4, int4, int4-asym = llm-compressor's compressed-tensors FP8_DYNAMIC, NVFP4A16, W4A16\n"
    "(group 128) and W4A16 asymmetric. Every linear is quantized with round-to-nearest absmax scales (INT4 /\n"
    "NVFP4: those whose input width is whole groups of 128 / 16), except what the published recipes keep in\n"
    "bf16 (LM head, vision tower,\n"
    "GDN gate projections, MoE router and shared-expert gate) and the MTP head; other tensors and files are\n"
    "copied unchanged. GPTQ / AWQ (calibrated) checkpoints come from their own tools; Frost loads them too.\n"
    "--out must be a new or empty folder. The result is checked: it opens and binds as written.";

int run_quantize(const std::vector<std::string>& args) {
    fq::QuantizeOptions opt;
    opt.progress = true;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (a == "--help" || a == "-h") {
                std::printf("%s\n", kUsage);
                return 0;
            }
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "frost quantize: %s needs a value\n%s\n", a.c_str(), kUsage);
                return 2;
            }
            const std::string& v = args[++i];
            if (a == "--model") opt.model_dir = v;
            else if (a == "--out") opt.out_dir = v;
            else if (a == "--quant") opt.format = v;
            else if (a == "--shard-gb") opt.shard_bytes = uint64_t(std::stod(v) * 1e9);
            else if (a == "--threads") {
                const int n = std::stoi(v);
                if (n < 1 || n > 256) {
                    std::fprintf(stderr, "frost quantize: --threads must be 1..256\n");
                    return 2;
                }
                opt.threads = unsigned(n);
            }
            else {
                std::fprintf(stderr, "frost quantize: unknown option %s\n%s\n", a.c_str(), kUsage);
                return 2;
            }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr, "frost quantize: bad number\n%s\n", kUsage);
        return 2;
    }
    if (opt.model_dir.empty() || opt.out_dir.empty() || opt.format.empty()) {
        std::fprintf(stderr, "frost quantize: --model, --out and --quant are required\n%s\n", kUsage);
        return 2;
    }
    if (opt.shard_bytes == 0) {
        std::fprintf(stderr, "frost quantize: --shard-gb must be positive\n");
        return 2;
    }
    fq::QuantizeSummary s;
    if (fq::quantize_checkpoint(opt, &s) != FROST_OK) {
        std::fprintf(stderr, "frost quantize: %s\n", frost_last_error());
        return 1;
    }
    std::printf("wrote %s (%s): %zu linears quantized, %zu kept as stored; %zu -> %zu tensors, %.3f -> %.3f GB in %zu "
                "file(s); %zu other file(s) copied\n",
                opt.out_dir.c_str(), opt.format.c_str(), s.quantized, s.kept, s.tensors_in, s.tensors_out,
                double(s.bytes_in) / 1e9, double(s.bytes_out) / 1e9, s.shards, s.files_copied);
    return 0;
}

}  // namespace

FROST_COMMAND("quantize", "rewrite a bf16 checkpoint in a published quantized format (FP8, NVFP4, INT4)", kUsage,
              run_quantize);
