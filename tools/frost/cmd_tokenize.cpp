// `frost tokenize`: text -> token ids with a tokenizer.json (file or directory), for scripts and
// for checking the tokenizer against the Python reference.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "exec/error.h"
#include "text/tokenizer.h"

namespace {

constexpr const char* kUsage =
    "usage: frost tokenize --tokenizer PATH (--text T | --file F | --jsonl F) [--json]\n"
    "  PATH     a tokenizer.json or a directory containing one\n"
    "  --text   the text to encode; --file: a file's whole content (raw bytes)\n"
    "  --jsonl  one JSON string per line; prints one JSON array of ids per line\n"
    "  --json   print the ids as a JSON array (default: comma-separated)\n"
    "Invalid UTF-8 is encoded as if each ill-formed subpart were U+FFFD.";

bool read_file(const std::string& path, std::string* out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return !in.bad();
}

std::string format_ids(const std::vector<int32_t>& ids, bool as_json) {
    std::string s = as_json ? "[" : "";
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) s += as_json ? ", " : ",";
        s += std::to_string(ids[i]);
    }
    if (as_json) s += "]";
    return s;
}

int run_tokenize(const std::vector<std::string>& args) {
    std::string tok_path, text, file, jsonl;
    bool have_text = false, as_json = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        const bool has_value = i + 1 < args.size();
        if (a == "--json") { as_json = true; continue; }
        if (!has_value) { std::fprintf(stderr, "frost tokenize: %s needs a value\n%s\n", a.c_str(), kUsage); return 2; }
        if (a == "--tokenizer") tok_path = args[++i];
        else if (a == "--text") { text = args[++i]; have_text = true; }
        else if (a == "--file") file = args[++i];
        else if (a == "--jsonl") jsonl = args[++i];
        else { std::fprintf(stderr, "frost tokenize: unknown option %s\n%s\n", a.c_str(), kUsage); return 2; }
    }
    const int sources = int(have_text) + int(!file.empty()) + int(!jsonl.empty());
    if (tok_path.empty() || sources != 1) { std::fprintf(stderr, "%s\n", kUsage); return 2; }
    std::unique_ptr<frost::text::Tokenizer> tok;
    if (frost::text::Tokenizer::load(tok_path, &tok) != FROST_OK) {
        std::fprintf(stderr, "frost tokenize: %s\n", frost::last_error().c_str());
        return 1;
    }
    if (!file.empty() && !read_file(file, &text)) {
        std::fprintf(stderr, "frost tokenize: cannot read %s\n", file.c_str());
        return 1;
    }
    if (jsonl.empty()) {
        std::printf("%s\n", format_ids(tok->encode(text), as_json).c_str());
        return 0;
    }
    std::ifstream in(jsonl, std::ios::binary);
    if (!in) { std::fprintf(stderr, "frost tokenize: cannot read %s\n", jsonl.c_str()); return 1; }
    std::string line;
    for (size_t lineno = 1; std::getline(in, line); ++lineno) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_string()) {
            std::fprintf(stderr, "frost tokenize: %s:%zu: not a JSON string\n", jsonl.c_str(), lineno);
            return 1;
        }
        std::printf("%s\n", format_ids(tok->encode(j.get_ref<const std::string&>()), true).c_str());
    }
    return 0;
}

}  // namespace

FROST_COMMAND("tokenize", "encode text into token ids with a tokenizer.json", kUsage, run_tokenize);
