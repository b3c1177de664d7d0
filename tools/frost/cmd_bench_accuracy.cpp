// `frost bench accuracy`: how far one checkpoint's logits are from a reference checkpoint of the
// same model (issue 15: a quantized model against its bf16 original). Three passes over one prompt:
//  1. the reference: prompt logits of every position, then greedy decoding of --gen tokens with
//     the logits of every step kept on the host;
//  2. the candidate, teacher-forced: the same prompt, then the reference's tokens fed one by one
//     through its decode graph (Engine::feed), so each step sees the reference's context and its
//     logits compare row for row;
//  3. the candidate free-running: greedy decoding on its own; how many tokens it keeps in step
//     with the reference before the first difference.
// Per row: relative L2 error ||l − r|| / ||r||, whether the greedy token (lowest index of the
// maximum, the sampler's rule) agrees, and the reference's top-1 − top-2 gap, so a disagreement can
// be told from a near-tie flip. The engines run one after the other (one model in memory at a time).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_registry.h"
#include "engine_args.h"
#include "model/config.h"
#include "model/engine.h"

namespace {

namespace fm = frost::model;
using json = nlohmann::ordered_json;

constexpr const char* kUsage =
    "usage: frost bench accuracy --model DIR --reference DIR [--backend cpu|cuda] [--prompt-len N]\n"
    "         [--prompt-ids IDS] [--gen N] [--seed S] [--fp8-prefill w8a8|exact]\n"
    "         [--fp8-decode w8a8|exact] [--json]\n"
    "  Compares DIR's logits with the reference checkpoint's (e.g. a quantized model against its bf16\n"
    "  original) on one prompt: --prompt-ids (comma-separated or @FILE), else --prompt-len random ids\n"
    "  (default 512, from --seed, default 1). Reports the relative L2 error of the logits and greedy\n"
    "  agreement over the prompt's positions, over --gen (default 256) decode steps with the\n"
    "  reference's tokens fed to DIR (teacher-forced), and the tokens DIR generates on its own before it\n"
    "  first differs from the reference. --fp8-prefill / --fp8-decode apply to DIR. --json prints the JSON only.";

constexpr int kSeqSlack = 64;

struct RowStats {
    int rows = 0;
    int agree = 0;
    int nonfinite = 0;           // candidate rows with a NaN / inf (never counted as agreeing)
    double rel_sum = 0, rel_max = 0;
    double flip_gap_max = 0;     // largest reference top-1 - top-2 gap among the disagreeing rows
    std::vector<double> gaps;    // reference top-1 - top-2 gap of every row (median reported)
};

// Greedy token: the lowest index of the maximum (kernels' argmax and the CPU sampler agree on it).
int argmax(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

double top2_gap(const float* x, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; ++i) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return double(a) - double(b);
}

void add_row(RowStats* s, const float* cand, const float* ref, int V) {
    double num = 0, den = 0;
    bool finite = true;
    for (int i = 0; i < V; ++i) {
        const double d = double(cand[i]) - double(ref[i]);
        num += d * d;
        den += double(ref[i]) * double(ref[i]);
        finite = finite && std::isfinite(cand[i]);
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    const double gap = top2_gap(ref, V);
    ++s->rows;
    s->gaps.push_back(gap);
    if (!finite) {
        ++s->nonfinite;
        s->rel_max = INFINITY;
        s->rel_sum = INFINITY;
        return;
    }
    s->rel_sum += rel;
    s->rel_max = std::max(s->rel_max, rel);
    if (argmax(cand, V) == argmax(ref, V)) ++s->agree;
    else s->flip_gap_max = std::max(s->flip_gap_max, gap);
}

json to_json(const RowStats& s) {
    std::vector<double> g = s.gaps;
    std::sort(g.begin(), g.end());
    const auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
    return json{{"rows", s.rows},
                {"rel_l2_mean", num(s.rows ? s.rel_sum / s.rows : 0.0)},
                {"rel_l2_max", num(s.rel_max)},
                {"top1_agree", s.agree},
                {"top1_agree_frac", s.rows ? double(s.agree) / s.rows : 0.0},
                {"nonfinite_rows", s.nonfinite},
                {"ref_top2_gap_median", g.empty() ? 0.0 : g[g.size() / 2]},
                {"flip_ref_gap_max", s.flip_gap_max}};
}

struct Options {
    std::string model, reference, backend = "cpu", prompt_ids;
    int prompt_len = 512, gen = 256;
    unsigned seed = 1;
    bool w8a8 = false, w8a8_decode = false, json_only = false;
};

int fail_msg(const char* what) {
    std::fprintf(stderr, "frost bench accuracy: %s: %s\n", what, frost_last_error());
    return 1;
}

// The reference pass: prompt logits [P, V], greedy tokens t0..t_{gen-1} and the logits each of
// t1.. was picked from ([gen - 1, V]).
struct Reference {
    std::vector<float> prompt_logits, step_logits;
    std::vector<int32_t> tokens;
};

int run_reference(const Options& o, const fm::EngineOptions& eo, const std::vector<int32_t>& prompt, Reference* r,
                  int* vocab) {
    std::unique_ptr<fm::Engine> e;
    if (fm::Engine::create(o.reference, eo, &e) != FROST_OK) return fail_msg("loading --reference");
    *vocab = e->config().vocab_size;
    int32_t t = 0;
    if (e->reset(0) != FROST_OK || e->prefill(0, prompt.data(), prompt.size(), &t, &r->prompt_logits) != FROST_OK)
        return fail_msg("reference prefill");
    r->tokens.push_back(t);
    std::vector<float> row;
    for (int k = 1; k < o.gen; ++k) {
        if (e->decode(0, &t) != FROST_OK || e->last_logits(0, &row) != FROST_OK) return fail_msg("reference decode");
        r->step_logits.insert(r->step_logits.end(), row.begin(), row.end());
        r->tokens.push_back(t);
    }
    return 0;
}

int run(const Options& o) {
    fm::EngineOptions eo;
    if (!frost::cli::parse_backend(o.backend, &eo.backend)) {
        std::fprintf(stderr, "frost bench accuracy: --backend must be cpu or cuda\n");
        return 2;
    }
    std::vector<int32_t> prompt;
    if (!o.prompt_ids.empty()) {
        std::string err;
        if (!frost::cli::read_prompt_ids(o.prompt_ids, &prompt, &err)) {
            std::fprintf(stderr, "frost bench accuracy: %s\n", err.c_str());
            return 2;
        }
    }
    eo.logits_all = true;
    // The random prompt is drawn over the reference's vocabulary (its config.json).
    Reference ref;
    int V = 0;
    if (prompt.empty()) {
        fm::ModelConfig cfg;
        if (fm::load_config(o.reference, &cfg) != FROST_OK) return fail_msg("reading --reference's config");
        std::mt19937 rng(o.seed);
        std::uniform_int_distribution<int32_t> pick(0, cfg.vocab_size - 1);
        prompt.resize(size_t(o.prompt_len));
        for (auto& id : prompt) id = pick(rng);
    }
    eo.max_seq_len = int(prompt.size()) + o.gen + kSeqSlack;
    if (int rc = run_reference(o, eo, prompt, &ref, &V)) return rc;

    fm::EngineOptions co = eo;
    co.fp8_w8a8_prefill = o.w8a8;
    co.fp8_w8a8_decode = o.w8a8_decode;
    std::unique_ptr<fm::Engine> e;
    if (fm::Engine::create(o.model, co, &e) != FROST_OK) return fail_msg("loading --model");
    if (e->config().vocab_size != V) {
        std::fprintf(stderr, "frost bench accuracy: --model has vocab_size %d, --reference %d: not the same model\n",
                     e->config().vocab_size, V);
        return 2;
    }
    const int P = int(prompt.size());
    RowStats prompt_stats, forced_stats;
    std::vector<float> logits, row;
    int32_t t = 0;
    if (e->reset(0) != FROST_OK || e->prefill(0, prompt.data(), prompt.size(), &t, &logits) != FROST_OK)
        return fail_msg("prefill");
    for (int p = 0; p < P; ++p) add_row(&prompt_stats, &logits[size_t(p) * V], &ref.prompt_logits[size_t(p) * V], V);
    // Teacher-forced: feed the reference's token k - 1, compare with the logits it picked token k from.
    for (int k = 1; k < o.gen; ++k) {
        if (e->feed(0, ref.tokens[size_t(k - 1)], &t) != FROST_OK || e->last_logits(0, &row) != FROST_OK)
            return fail_msg("teacher-forced decode");
        add_row(&forced_stats, row.data(), &ref.step_logits[size_t(k - 1) * V], V);
    }
    // Free-running: the candidate's own greedy tokens until the first difference.
    int same = 0;
    if (e->reset(0) != FROST_OK || e->prefill(0, prompt.data(), prompt.size(), &t, nullptr) != FROST_OK)
        return fail_msg("free-running prefill");
    while (same < o.gen && t == ref.tokens[size_t(same)]) {
        ++same;
        if (same < o.gen && e->decode(0, &t) != FROST_OK) return fail_msg("free-running decode");
    }

    const json out{{"model", o.model},
                   {"reference", o.reference},
                   {"backend", o.backend},
                   {"fp8_prefill", o.w8a8 ? "w8a8" : "exact"},
                   {"fp8_decode", o.w8a8_decode ? "w8a8" : "exact"},
                   {"prompt_tokens", P},
                   {"gen", o.gen},
                   {"prompt", to_json(prompt_stats)},
                   {"teacher_forced", to_json(forced_stats)},
                   {"free_running", {{"steps", o.gen}, {"same_prefix", same}}},
                   {"reference_tokens", ref.tokens}};
    if (o.json_only) {
        std::printf("%s\n", out.dump(1).c_str());
        return 0;
    }
    std::printf("accuracy of %s against %s (%s, %d prompt tokens, %d greedy steps)\n", o.model.c_str(),
                o.reference.c_str(), o.backend.c_str(), P, o.gen);
    const auto line = [](const char* what, const json& j) {
        std::printf("  %-28s rel L2 error mean %.4g max %.4g; greedy token agrees %d / %d (%.1f %%); reference top-2 "
                    "gap median %.3g, largest gap at a disagreement %.3g%s\n",
                    what, j["rel_l2_mean"].is_null() ? NAN : j["rel_l2_mean"].get<double>(),
                    j["rel_l2_max"].is_null() ? NAN : j["rel_l2_max"].get<double>(), j["top1_agree"].get<int>(),
                    j["rows"].get<int>(), 100.0 * j["top1_agree_frac"].get<double>(),
                    j["ref_top2_gap_median"].get<double>(), j["flip_ref_gap_max"].get<double>(),
                    j["nonfinite_rows"].get<int>() ? " (NON-FINITE rows)" : "");
    };
    line("prompt positions", out["prompt"]);
    line("decode, teacher-forced", out["teacher_forced"]);
    std::printf("  %-28s the first %d of %d greedy tokens equal the reference's\n", "decode, free-running", same, o.gen);
    return 0;
}

int run_accuracy(const std::vector<std::string>& args) {
    Options o;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            std::printf("%s\n", kUsage);
            return 0;
        }
        if (a == "--json") {
            o.json_only = true;
            continue;
        }
        if (i + 1 >= args.size()) {
            std::fprintf(stderr, "frost bench accuracy: %s needs a value\n%s\n", a.c_str(), kUsage);
            return 2;
        }
        const std::string& v = args[++i];
        try {
            if (a == "--model") o.model = v;
            else if (a == "--reference") o.reference = v;
            else if (a == "--backend") o.backend = v;
            else if (a == "--prompt-ids") o.prompt_ids = v;
            else if (a == "--prompt-len") o.prompt_len = std::stoi(v);
            else if (a == "--gen") o.gen = std::stoi(v);
            else if (a == "--seed") o.seed = unsigned(std::stoul(v));
            else if (a == "--fp8-prefill" || a == "--fp8-decode") {
                if (!frost::cli::parse_fp8_mode(v, a == "--fp8-prefill" ? &o.w8a8 : &o.w8a8_decode)) {
                    std::fprintf(stderr, "frost bench accuracy: %s must be w8a8 or exact\n", a.c_str());
                    return 2;
                }
            } else {
                std::fprintf(stderr, "frost bench accuracy: unknown option %s\n%s\n", a.c_str(), kUsage);
                return 2;
            }
        } catch (...) {
            std::fprintf(stderr, "frost bench accuracy: %s wants a number, got '%s'\n", a.c_str(), v.c_str());
            return 2;
        }
    }
    if (o.model.empty() || o.reference.empty()) {
        std::fprintf(stderr, "frost bench accuracy: --model and --reference are required\n%s\n", kUsage);
        return 2;
    }
    if (o.prompt_ids.empty() && o.prompt_len < 1) {
        std::fprintf(stderr, "frost bench accuracy: --prompt-len must be >= 1, got %d\n", o.prompt_len);
        return 2;
    }
    if (o.gen < 1) {
        std::fprintf(stderr, "frost bench accuracy: --gen must be >= 1, got %d\n", o.gen);
        return 2;
    }
    return run(o);
}

}  // namespace

FROST_BENCH_KIND("accuracy", "a checkpoint's logits and greedy tokens against a reference (quantized vs bf16)",
                 run_accuracy);
