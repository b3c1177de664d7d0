// libFuzzer target for Tokenizer::encode_at_most (the serve layer's context check, T09/T17) with
// the real Qwen3 tokenizer: the first two input bytes are a token bound, the rest is text. The
// bound is a shortcut (it stops once a lower bound on the count passes max_ids), so it is checked
// against the whole encoding: true exactly when encode() gives at most max_ids ids, and then the
// same ids. A wrong lower bound would refuse a prompt that fits, or accept one that does not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

#ifndef FROST_FUZZ_TOKENIZER_DIR
#error "FROST_FUZZ_TOKENIZER_DIR: the folder of the Qwen3 tokenizer.json (set by fuzz/CMakeLists.txt)"
#endif

namespace {

const frost::text::Tokenizer& qwen3() {
    static const std::unique_ptr<frost::text::Tokenizer> tok = [] {
        std::unique_ptr<frost::text::Tokenizer> t;
        if (frost::text::Tokenizer::load(FROST_FUZZ_TOKENIZER_DIR, &t) != FROST_OK || !t) std::abort();
        return t;
    }();
    return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    // Bounds up to 4095 tokens: small enough that -max_len inputs cross them either way.
    const size_t bound = (size_t(data[0]) | size_t(data[1]) << 8) & 0xfff;
    const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
    const frost::text::Tokenizer& tok = qwen3();
    const std::vector<int32_t> full = tok.encode(text);
    std::vector<int32_t> ids = {-1};
    const bool fits = tok.encode_at_most(text, bound, &ids);
    if (fits != (full.size() <= bound)) std::abort();
    if (fits && ids != full) std::abort();
    return 0;
}
