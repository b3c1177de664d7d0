// The Split pre-tokenizer of Qwen's tokenizer.json, as a hand-written matcher over code points
// for exactly the two regexes Qwen ships (no general regex engine, so nothing can backtrack
// exponentially: every alternative is decided by a bounded look at a greedy run, O(n) overall).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace frost::text {

enum class SplitPattern : uint8_t {
    kQwen2,   // Qwen2 / Qwen3 / Qwen3-Next: [^\r\n\p{L}\p{N}]?\p{L}+ ...
    kQwen35,  // Qwen3.5 / 3.6: letters and marks together, [\p{L}\p{M}]+ ...
};

// The exact regex strings as tokenizer.json spells them.
extern const std::string_view kQwen2SplitRegex;
extern const std::string_view kQwen35SplitRegex;

// Which known pattern `regex` is; false when it is neither (the loader then refuses the file).
bool split_pattern_from_regex(std::string_view regex, SplitPattern* out);

// Splits cps[begin, end) like tokenizers' Split(pattern, behavior=Isolated): every regex match
// and every gap between matches becomes one piece. Appends [first, last) index pairs.
void split_pretokenize(const uint32_t* cps, size_t begin, size_t end, SplitPattern pattern,
                       std::vector<std::pair<size_t, size_t>>& pieces);

}  // namespace frost::text
