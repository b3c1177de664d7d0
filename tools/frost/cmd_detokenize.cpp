// `frost detokenize`: token ids -> text with a tokenizer.json (file or directory).
#include <cstdio>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "command.h"
#include "exec/error.h"
#include "text/tokenizer.h"

namespace {

constexpr const char* kUsage =
    "usage: frost detokenize --tokenizer PATH (--ids CSV | --jsonl F) [--skip-special]\n"
    "  PATH            a tokenizer.json or a directory containing one\n"
    "  --ids           comma- (or space-) separated token ids\n"
    "  --jsonl         one JSON array of ids per line; prints one JSON string per line\n"
    "  --skip-special  drop special tokens (<|im_end|> ...) from the text\n"
    "Prints the text exactly (a newline is added only on a terminal). Ids naming no token are\n"
    "skipped, as the tokenizers package does.";

bool parse_ids(const std::string& csv, std::vector<int32_t>* ids) {
    size_t i = 0;
    while (i < csv.size()) {
        if (csv[i] == ',' || csv[i] == ' ' || csv[i] == '\t' || csv[i] == '\n') { ++i; continue; }
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(csv.c_str() + i, &end, 10);
        if (end == csv.c_str() + i || errno == ERANGE || v < INT32_MIN || v > INT32_MAX) return false;
        ids->push_back(static_cast<int32_t>(v));
        i = static_cast<size_t>(end - csv.c_str());
        if (i < csv.size() && csv[i] != ',' && csv[i] != ' ' && csv[i] != '\t' && csv[i] != '\n') return false;
    }
    return true;
}

int run_jsonl(const frost::text::Tokenizer& tok, const std::string& path, bool skip_special) {
    std::ifstream in(path, std::ios::binary);
    if (!in) { std::fprintf(stderr, "frost detokenize: cannot read %s\n", path.c_str()); return 1; }
    std::string line;
    for (size_t lineno = 1; std::getline(in, line); ++lineno) {
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        std::vector<int32_t> ids;
        bool ok = j.is_array();
        for (const auto& v : j) {
            if (!ok || !v.is_number_integer()) { ok = false; break; }
            ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
        }
        if (!ok) {
            std::fprintf(stderr, "frost detokenize: %s:%zu: not a JSON array of ids\n", path.c_str(), lineno);
            return 1;
        }
        std::printf("%s\n", nlohmann::json(tok.decode(ids, skip_special)).dump().c_str());
    }
    return 0;
}

int run_detokenize(const std::vector<std::string>& args) {
    std::string tok_path, csv, jsonl;
    bool have_ids = false, skip_special = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--skip-special") { skip_special = true; continue; }
        if (i + 1 >= args.size()) { std::fprintf(stderr, "frost detokenize: %s needs a value\n%s\n", a.c_str(), kUsage); return 2; }
        if (a == "--tokenizer") tok_path = args[++i];
        else if (a == "--ids") { csv = args[++i]; have_ids = true; }
        else if (a == "--jsonl") jsonl = args[++i];
        else { std::fprintf(stderr, "frost detokenize: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
    }
    if (tok_path.empty() || have_ids == !jsonl.empty()) { std::fprintf(stderr, "%s\n", kUsage); return 2; }
    std::vector<int32_t> ids;
    if (have_ids && !parse_ids(csv, &ids)) { std::fprintf(stderr, "frost detokenize: --ids must be integers separated by commas\n"); return 2; }
    std::unique_ptr<frost::text::Tokenizer> tok;
    if (frost::text::Tokenizer::load(tok_path, &tok) != FROST_OK) {
        std::fprintf(stderr, "frost detokenize: %s\n", frost::last_error().c_str());
        return 1;
    }
    if (!jsonl.empty()) return run_jsonl(*tok, jsonl, skip_special);
    const std::string text = tok->decode(ids, skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (isatty(fileno(stdout))) std::fputc('\n', stdout);
    return 0;
}

}  // namespace

FROST_COMMAND("detokenize", "decode token ids into text with a tokenizer.json", kUsage, run_detokenize);
