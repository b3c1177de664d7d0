// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (the Qwen2/3/3.5 family):
// NFC normaliser, Split pre-tokenizer (the two Qwen regexes), ByteLevel mapping, ranked merges,
// added/special tokens. Encode and decode agree id-for-id with the `tokenizers` package; see
// tests/text/py/. A loaded Tokenizer is immutable, so one instance may serve many threads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frost/exec.h"
#include "text/pretokenizer.h"

namespace frost::text {

// Limits that keep a hostile tokenizer.json bounded (reliability T08).
constexpr size_t kMaxTokenizerFileBytes = size_t{256} << 20;  // real ones are ~11-13 MB
constexpr int kMaxTokenizerJsonDepth = 64;                    // real ones nest 5 deep
constexpr size_t kMaxTokenBytes = size_t{64} << 10;           // per vocab/added token string
constexpr int32_t kMaxTokenId = (1 << 22) - 1;                // ids index a dense table

struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool special = false;      // dropped by decode(skip_special=true)
    bool lstrip = false;       // the match swallows whitespace on its left
    bool rstrip = false;       // ... and on its right
    bool single_word = false;  // only matches when not inside a word
    bool normalized = false;   // matched after NFC instead of on the raw text
};

class Tokenizer {
public:
    // Loads PATH, a tokenizer.json file or a directory containing one. On failure returns
    // FROST_ERR_IO / FROST_ERR_CORRUPT / FROST_ERR_UNSUPPORTED with frost::last_error() naming the
    // file and the rule, and leaves *out empty.
    static frost_status load(const std::string& path, std::unique_ptr<Tokenizer>* out);
    // Same from the JSON text itself (`origin` names it in error messages).
    static frost_status load_json(std::string_view json_text, const std::string& origin,
                                  std::unique_ptr<Tokenizer>* out);

    // Token ids of `text`. Never fails: invalid UTF-8 is first repaired by replacing each maximal
    // ill-formed subpart with U+FFFD (what Python's bytes.decode("utf-8", "replace") produces, the
    // only way such bytes can reach the Rust tokenizer, which accepts valid UTF-8 only).
    std::vector<int32_t> encode(std::string_view text) const;
    // encode() that stops once the text is known to have more than `max_ids` tokens: true with
    // *ids = encode(text) when it has at most max_ids, false (and *ids a partial prefix) when it
    // has more. What it stops on is a lower bound (a piece of B bytes is at least
    // B / longest-vocab-token tokens), so a prompt far over a context costs a fraction of its
    // full encoding: 4M newlines against a 1k context are refused before any merge.
    bool encode_at_most(std::string_view text, size_t max_ids, std::vector<int32_t>* ids) const;
    // The text of `ids`: the tokens' bytes concatenated, ill-formed UTF-8 replaced by U+FFFD (as
    // tokenizers' ByteLevel decoder does). Ids that name no token are skipped, as tokenizers does
    // (a padded embedding table has ids past the real vocabulary).
    std::string decode(const int32_t* ids, size_t n, bool skip_special_tokens = false) const;
    std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const {
        return decode(ids.data(), ids.size(), skip_special_tokens);
    }

    // Raw bytes one id contributes to decoded text ("" when skipped or unknown).
    const std::string& token_bytes(int32_t id) const;
    bool is_special(int32_t id) const;
    bool has_id(int32_t id) const;
    // Id of a token's exact string (vocab or added), -1 if none.
    int32_t token_to_id(std::string_view token) const;
    // The token string as the vocabulary spells it (byte-level form), "" if none.
    std::string id_to_token(int32_t id) const;
    // One past the largest id (vocab and added tokens).
    int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }
    const std::vector<AddedToken>& added_tokens() const { return added_; }
    SplitPattern split_pattern() const { return pattern_; }

private:
    Tokenizer() = default;
    friend struct TokenizerLoader;

    struct Merge {
        int32_t rank;
        int32_t new_id;
    };
    static uint64_t pair_key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    // Both return false as soon as ids is known to end up longer than `limit` (SIZE_MAX: never).
    bool encode_segment(std::string_view text, bool normalized_pass, std::vector<int32_t>& ids, size_t limit) const;
    bool encode_plain(std::string_view text, std::vector<int32_t>& ids, size_t limit) const;
    // Fewest tokens BPE can make of `bytes` bytes (each token covers at most max_token_bytes_).
    size_t min_tokens(size_t bytes) const { return (bytes + max_token_bytes_ - 1) / max_token_bytes_; }
    void bpe(const std::string& bytes, std::vector<int32_t>& ids) const;

    std::unordered_map<std::string, int32_t> vocab_;  // byte-level token string -> id
    std::unordered_map<uint64_t, Merge> merges_;      // pair_key(left, right) -> merge
    std::vector<std::string> id_to_token_;           // [vocab_size] byte-level form, "" if hole
    std::vector<std::string> id_bytes_;               // [vocab_size] decoded bytes
    std::vector<uint8_t> id_special_;                 // [vocab_size]
    std::vector<uint8_t> id_present_;                 // [vocab_size]
    int32_t byte_to_id_[256] = {};                    // initial BPE symbol of each byte
    std::vector<AddedToken> added_;
    std::vector<std::vector<int32_t>> added_by_first_byte_[2];  // [normalized][byte] -> indices
    size_t max_token_bytes_ = 1;  // the longest vocab token's bytes (set at load)
    bool has_nfc_ = false;
    bool ignore_merges_ = false;
    SplitPattern pattern_ = SplitPattern::kQwen2;
};

// Streaming detokenizer: push ids one at a time and get back only complete UTF-8 text, never
// half a character. The concatenation of every push() and the final flush() equals
// Tokenizer::decode of all the ids.
class DecodeStream {
public:
    explicit DecodeStream(const Tokenizer& tok, bool skip_special_tokens = false)
        : tok_(&tok), skip_special_(skip_special_tokens) {}
    std::string push(int32_t id);
    // Emits what is still held (a truncated character becomes U+FFFD) and resets.
    std::string flush();
    size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer* tok_;
    bool skip_special_;
    std::string pending_;  // at most 3 bytes: the start of a character not yet complete
};

// Maps each byte to the printable character GPT-2's ByteLevel uses for it, and back.
uint32_t byte_level_char(uint8_t b);
// -1 when `cp` is not one of the 256 byte-level characters.
int byte_level_byte(uint32_t cp);

}  // namespace frost::text
