// `frost eval`: the logits at every prompt position, float32 little-endian [T, vocab], for
// comparison with a reference (e.g. transformers) outside frost.
#include <cstdio>
#include <fstream>

#include "command.h"
#include "engine_args.h"
#include "exec/error.h"
#include "model/engine.h"

namespace {

constexpr const char* kUsage =
    "usage: frost eval --model DIR --prompt-ids IDS --dump-logits FILE [--backend cpu|cuda]\n"
    "  IDS: comma-separated token ids, or @FILE. FILE receives float32 little-endian [T, vocab].";

int run_eval(const std::vector<std::string>& args) {
    using namespace frost;
    std::string model, prompt_ids, dump, backend = "cpu";
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") { std::printf("%s\n", kUsage); return 0; }
        if (i + 1 >= args.size()) { std::fprintf(stderr, "frost eval: %s needs a value\n%s\n", a.c_str(), kUsage); return 2; }
        const std::string& v = args[++i];
        if (a == "--model") model = v;
        else if (a == "--prompt-ids") prompt_ids = v;
        else if (a == "--dump-logits") dump = v;
        else if (a == "--backend") backend = v;
        else { std::fprintf(stderr, "frost eval: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
    }
    if (model.empty() || prompt_ids.empty() || dump.empty()) { std::fprintf(stderr, "%s\n", kUsage); return 2; }
    model::EngineOptions opts;
    if (!cli::parse_backend(backend, &opts.backend)) { std::fprintf(stderr, "frost eval: --backend must be cpu or cuda\n"); return 2; }
    std::vector<int32_t> ids;
    std::string err;
    if (!cli::read_prompt_ids(prompt_ids, &ids, &err)) { std::fprintf(stderr, "frost eval: %s\n", err.c_str()); return 2; }
    opts.max_seq_len = static_cast<int>(ids.size());
    opts.logits_all = true;
    std::unique_ptr<model::Engine> e;
    std::vector<float> logits;
    if (model::Engine::create(model, opts, &e) != FROST_OK ||
        e->prefill(0, ids.data(), ids.size(), nullptr, &logits) != FROST_OK) {
        std::fprintf(stderr, "frost eval: %s\n", frost_last_error());
        return 1;
    }
    std::ofstream out(dump, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (!out) { std::fprintf(stderr, "frost eval: cannot write %s\n", dump.c_str()); return 1; }
    std::printf("wrote %s: [%zu, %d] float32 LE\n", dump.c_str(), ids.size(), e->config().vocab_size);
    return 0;
}

}  // namespace

FROST_COMMAND("eval", "dump the logits of every prompt position (float32 [T, vocab])", kUsage, run_eval);
