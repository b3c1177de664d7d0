// Shared helpers for the text gtests (see text_test_util.h).
#include "text_test_util.h"

#include <memory>
#include <vector>

#include "text/unicode.h"

namespace frost::text::testing {

std::string qwen3_tokenizer_dir() { return std::string(FROST_FIXTURES_DIR) + "/tokenizer-qwen3"; }

const Tokenizer* qwen3_tokenizer() {
    static const std::unique_ptr<Tokenizer> tok = [] {
        std::unique_ptr<Tokenizer> t;
        if (Tokenizer::load(qwen3_tokenizer_dir(), &t) != FROST_OK) t.reset();
        return t;
    }();
    return tok.get();
}

std::string random_text(std::mt19937_64& rng, size_t max_chars) {
    static const std::vector<std::vector<uint32_t>> pools = {
        {'a', 'b', 'e', 'l', 's', 't', 'A', 'Z', '\'', ' ', ' ', '.', ',', '!', '\n', '\r', '\t', '0', '7'},
        {0xE9, 0xC5, 0x301, 0x308, 0x327, 0x1100, 0x1161, 0x11A8, 0xAC00},
        {0x4F60, 0x597D, 0x3042, 0x30AB, 0xD55C},
        {0x1F600, 0x200D, 0x1F469, 0x1F3FD, 0xFE0F, 0x1F1FA},
        {0xA0, 0x3000, 0x2028, 0x85, 0x660, 0xFF11, 0x17F},
    };
    static const char* const specials[] = {"<|im_start|>", "<|im_end|>", "<think>", "</tool_call>"};
    std::uniform_int_distribution<size_t> len(0, max_chars);
    std::string out;
    const size_t n = len(rng);
    for (size_t i = 0; i < n; ++i) {
        const auto r = rng() % 100;
        if (r < 3) {
            out += specials[rng() % 4];
        } else if (r < 8) {
            uint32_t cp = static_cast<uint32_t>(rng() % 0x10FFFF);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            utf8_append(out, cp);
        } else {
            const auto& pool = pools[rng() % pools.size()];
            utf8_append(out, pool[rng() % pool.size()]);
        }
    }
    return out;
}

}  // namespace frost::text::testing
