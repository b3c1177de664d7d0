// Helpers shared by the engine commands (generate, eval, demo): --backend parsing, --prompt-ids
// as CSV or @FILE, the ChatML user turn, and opening the tokenizer beside a model when present.
#pragma once
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/generate.h"
#include "text/tokenizer.h"

namespace frost::cli {

inline bool parse_backend(const std::string& s, frost_backend* out) {
    if (s == "cpu") { *out = FROST_BACKEND_CPU; return true; }
    if (s == "cuda") { *out = FROST_BACKEND_CUDA; return true; }
    return false;
}

// --fp8-prefill / --fp8-decode: "w8a8" (FP8 tensor cores, activations quantized per 128-group;
// prefill also takes INT4 weights in 128-groups, W4A8) or "exact" (bf16 activations times the
// quantized weights; the default). EngineOptions::
// fp8_w8a8_prefill / fp8_w8a8_decode.
inline bool parse_fp8_mode(const std::string& s, bool* w8a8) {
    if (s == "w8a8") { *w8a8 = true; return true; }
    if (s == "exact") { *w8a8 = false; return true; }
    return false;
}

// "1,2,3" or "@path" (a file holding such a list).
inline bool read_prompt_ids(const std::string& arg, std::vector<int32_t>* ids, std::string* err) {
    std::string text = arg;
    if (!arg.empty() && arg[0] == '@') {
        std::ifstream in(arg.substr(1), std::ios::binary);
        if (!in) { *err = "cannot read " + arg.substr(1); return false; }
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (!frost::model::parse_id_list(text, ids)) { *err = "--prompt-ids wants comma-separated ids"; return false; }
    return true;
}

// ChatML single user turn with the assistant generation prompt (spec model-qwen35.md §7).
inline std::string chatml_user_turn(const std::string& content) {
    return "<|im_start|>user\n" + content + "<|im_end|>\n<|im_start|>assistant\n";
}

// Loads DIR/tokenizer.json when it exists; returns null (no error) otherwise.
inline std::unique_ptr<frost::text::Tokenizer> tokenizer_beside(const std::string& dir) {
    std::ifstream probe(dir + "/tokenizer.json");
    if (!probe) return nullptr;
    std::unique_ptr<frost::text::Tokenizer> tok;
    if (frost::text::Tokenizer::load(dir, &tok) != FROST_OK) return nullptr;
    return tok;
}

}  // namespace frost::cli
