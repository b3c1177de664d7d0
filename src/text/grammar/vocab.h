// The TokenMasker of a loaded tokenizer: every id's decoded bytes; special tokens and holes are
// never text (end ids are allowed only when the grammar accepts).
#pragma once
#include <memory>
#include <vector>

#include "text/grammar/token_mask.h"
#include "text/tokenizer.h"

namespace frost::text::grammar {

std::shared_ptr<const TokenMasker> make_token_masker(const Tokenizer& tok, std::vector<int32_t> end_ids,
                                                     int32_t vocab_size);

}  // namespace frost::text::grammar
