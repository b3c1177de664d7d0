// `frost demo`: runs the hybrid LM engine on a built-in default that needs no download: a tiny
// synthetic Qwen3.5 checkpoint made on first use under .frost/demo-model (with the real tokenizer
// from .frost/tokenizer/ when scripts/fetch_tokenizer.sh has put it there), prints what it did,
// then shows the capsule signature (demo_signature.h). Random weights: the text is gibberish; the
// point is the pipeline, its exactness and its numbers.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "demo_signature.h"
#include "engine_args.h"
#include "exec/error.h"
#include "model/capsule.h"
#include "model/engine.h"
#include "model/generate.h"
#include "model/synth.h"

namespace {

constexpr const char* kUsage =
    "usage: frost demo [--dir D] [--max-new-tokens N] [--prompt TEXT] [--prefix-tokens P]\n"
    "  D defaults to .frost (demo model in D/demo-model, tokenizer looked up in D/tokenizer,\n"
    "  disk-tier capsules in D/capsules). P: shared prefix of the capsule part, rounded down to a\n"
    "  multiple of 64 (default 2048; 0 skips the capsule part).";
constexpr const char* kDefaultPrompt = "Freeze the state, restore it by memory copy.";
constexpr int kDemoIdsFallback[] = {9707, 11, 1879, 0, 42, 7, 1001, 256};
constexpr int kDefaultPrefixTokens = 2048;  // keeps the whole demo well under 20 s on 2 CPU cores

int run_demo(const std::vector<std::string>& args) {
    namespace fs = std::filesystem;
    using namespace frost;
    std::string dir = ".frost", prompt = kDefaultPrompt;
    int max_new = 16, prefix_tokens = kDefaultPrefixTokens;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (a == "--help" || a == "-h") { std::printf("%s\n", kUsage); return 0; }
            if (i + 1 >= args.size()) { std::fprintf(stderr, "frost demo: %s needs a value\n%s\n", a.c_str(), kUsage); return 2; }
            const std::string& v = args[++i];
            if (a == "--dir") dir = v;
            else if (a == "--max-new-tokens") max_new = std::stoi(v);
            else if (a == "--prompt") prompt = v;
            else if (a == "--prefix-tokens") prefix_tokens = std::stoi(v);
            else { std::fprintf(stderr, "frost demo: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
        }
    } catch (const std::exception&) {
        std::fprintf(stderr, "frost demo: bad numeric value\n");
        return 2;
    }
    const std::string model_dir = dir + "/demo-model", tok_dir = dir + "/tokenizer";
    std::error_code ec;
    const bool have_tok_src = fs::exists(tok_dir + "/tokenizer.json", ec);
    if (!fs::exists(model_dir + "/config.json", ec)) {
        model::SynthOptions so;
        so.out_dir = model_dir;
        so.preset = "tiny";
        so.seed = 1;
        if (have_tok_src) so.tokenizer_dir = tok_dir;
        std::printf("creating a tiny synthetic Qwen3.5 checkpoint in %s%s\n", model_dir.c_str(),
                    have_tok_src ? " (with the real Qwen tokenizer)" : "");
        if (model::synth_checkpoint(so) != FROST_OK) {
            std::fprintf(stderr, "frost demo: %s\n", frost_last_error());
            return 1;
        }
    }
    auto tok = cli::tokenizer_beside(model_dir);
    model::GenerateRequest req;
    req.max_new_tokens = max_new;
    if (tok) {
        req.prompt = tok->encode(cli::chatml_user_turn(prompt));
    } else {
        std::printf("no tokenizer (run scripts/fetch_tokenizer.sh to get one): using built-in token ids\n");
        req.prompt.assign(std::begin(kDemoIdsFallback), std::end(kDemoIdsFallback));
    }
    prefix_tokens = std::max(0, prefix_tokens) / model::kCapsuleAlignment * model::kCapsuleAlignment;
    model::EngineOptions opts;
    opts.max_seq_len = static_cast<int>(req.prompt.size()) + max_new + 1;
    if (prefix_tokens > 0) {
        // The tokenizer's ids are folded into the checkpoint's vocab (mod) below; that is no larger.
        opts.sessions = cli::demo::kSignatureSessions;
        opts.max_seq_len = std::max(opts.max_seq_len, cli::demo::signature_seq_len(prefix_tokens, tok.get(), INT32_MAX));
    }
    std::unique_ptr<model::Engine> e;
    if (model::Engine::create(model_dir, opts, &e) != FROST_OK) {
        std::fprintf(stderr, "frost demo: %s\n", frost_last_error());
        return 1;
    }
    for (int32_t& t : req.prompt) t %= e->config().vocab_size;
    model::GenerateResult res;
    if (model::generate(*e, 0, req, &res) != FROST_OK) {
        std::fprintf(stderr, "frost demo: %s\n", frost_last_error());
        return 1;
    }
    const auto& c = e->config();
    std::printf("model     %s: %d layers (%d Gated DeltaNet + %d attention), hidden %d, vocab %d, %.1f MB fp32\n",
                model_dir.c_str(), c.num_layers, c.num_linear_layers(), c.num_full_layers(), c.hidden_size,
                c.vocab_size, e->weight_bytes() / 1e6);
    if (tok) std::printf("prompt    %s (%zu tokens, ChatML user turn)\n", prompt.c_str(), req.prompt.size());
    std::printf("prompt ids ");
    for (size_t i = 0; i < req.prompt.size(); ++i) std::printf("%s%d", i ? "," : "", req.prompt[i]);
    std::printf("\ngenerated ids ");
    for (size_t i = 0; i < res.ids.size(); ++i) std::printf("%s%d", i ? "," : "", res.ids[i]);
    std::printf("\n");
    if (tok) std::printf("generated text %s\n", tok->decode(res.ids).c_str());
    std::printf("greedy, cpu backend: TTFT %.2f ms, %.3f ms/token, logits fingerprint %s\n", res.ttft_ms,
                res.ms_per_token, res.fingerprint.c_str());
    std::printf("(random weights: the text is meaningless)\n");
    if (prefix_tokens == 0) return 0;
    const std::string cap_dir = dir + "/capsules";
    fs::create_directories(cap_dir, ec);
    std::unique_ptr<model::CapsuleManager> mgr;
    if (model::CapsuleManager::for_model_dir(*e, model_dir, {cap_dir}, &mgr) != FROST_OK) {
        std::fprintf(stderr, "frost demo: %s\n", frost_last_error());
        return 1;
    }
    return cli::demo::show_signature(*e, *mgr, tok.get(), prefix_tokens);
}

}  // namespace

FROST_COMMAND("demo", "run the engine on a built-in tiny synthetic model (no download)", kUsage, run_demo);
