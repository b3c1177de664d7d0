// Tokenising a chat turn without re-tokenising its unchanged history. An agent resends the whole
// conversation every turn, so the rendered history of turn N starts with turn N-1's; ids are
// reused for that prefix and only the new text is encoded, and only where encoding the two parts
// separately provably equals encoding their concatenation (split_is_safe: the right part starts
// with an added token that cannot interact with what precedes it). Otherwise: a full encode.
// Thread-safe (the I/O threads tokenise); entries are per API key and bounded in bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "serve/engine_iface.h"

namespace frost::serve {

// An added token as the splitting rule needs it (text::AddedToken without the text layer).
struct SplitToken {
    std::string content;
    bool lstrip = false;       // swallows whitespace on its left
    bool single_word = false;  // only matches outside words
    bool normalized = false;   // matched after NFC: not a split point of the raw text
};

// True when encode(left + right) == encode(left) + encode(right) for a tokenizer that splits
// the raw text on `tokens` before anything else (HF `tokenizers` semantics): `right` starts with
// the longest raw-matched token there, which swallows nothing on its left and starts with a
// non-whitespace ASCII byte (so no rstrip before it reaches past the cut), and no added token
// straddles the cut.
bool split_is_safe(std::string_view left, std::string_view right, const std::vector<SplitToken>& tokens);

class TokenCache {
public:
    static constexpr size_t kDefaultBytes = size_t(32) << 20;  // text + ids kept, all keys
    explicit TokenCache(size_t max_bytes = kDefaultBytes) : max_bytes_(max_bytes) {}

    // encode(text), reusing the ids of the longest cached text of `owner` that prefixes it when
    // the cut is safe; remembers (text, ids) for the next turn.
    std::vector<int32_t> encode(const TextIface& t, const std::string& owner, const std::string& text);
    // The same, stopping once the text is known to have more than max_ids tokens (false; *ids
    // unspecified and nothing remembered), as TextIface::encode_at_most does.
    bool encode_at_most(const TextIface& t, const std::string& owner, const std::string& text, size_t max_ids,
                        std::vector<int32_t>* ids);
    size_t hits() const;

private:
    struct Entry {
        std::string owner;
        std::string text;
        std::vector<int32_t> ids;
        size_t bytes() const { return text.size() + ids.size() * sizeof(int32_t); }
    };
    mutable std::mutex mu_;
    std::list<Entry> entries_;  // most recently used first
    size_t bytes_ = 0;
    size_t max_bytes_;
    size_t hits_ = 0;
};

}  // namespace frost::serve
