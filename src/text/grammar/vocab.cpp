// make_token_masker (see vocab.h).
#include "text/grammar/vocab.h"

namespace frost::text::grammar {

std::shared_ptr<const TokenMasker> make_token_masker(const Tokenizer& tok, std::vector<int32_t> end_ids,
                                                     int32_t vocab_size) {
    const int32_t n = tok.vocab_size();
    std::vector<std::string> bytes(static_cast<size_t>(n));
    std::vector<uint8_t> skip(size_t(n), 0);
    for (int32_t id = 0; id < n; ++id) {
        if (!tok.has_id(id) || tok.is_special(id)) {
            skip[size_t(id)] = 1;
            continue;
        }
        bytes[size_t(id)] = tok.token_bytes(id);
    }
    return std::make_shared<const TokenMasker>(bytes, skip, std::move(end_ids), vocab_size);
}

}  // namespace frost::text::grammar
