// Constrained decoding, part 3: which token ids may come next. TokenMasker holds the
// vocabulary as a byte trie (preorder arrays: a subtree is a contiguous range, so a byte the
// grammar refuses prunes every token below it in one jump) and walks it through a Machine's
// memoized transitions; the mask is then cached per frontier inside the Machine, so a state seen
// before (the inside of a JSON string, say) costs one lookup. End tokens (EOS, <|im_end|>) are
// allowed exactly when the grammar accepts; special tokens are never allowed otherwise.
// Matcher is one generation's cursor (one per choice).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/grammar/machine.h"

namespace frost::text::grammar {

class TokenMasker {
public:
    // token_bytes[id]: the bytes id decodes to; skip[id] != 0: never allowed as text (special
    // tokens, holes); end_ids: allowed when the grammar accepts. vocab_size: the mask's width
    // (the model's, may exceed token_bytes.size(): padding ids are never allowed).
    TokenMasker(const std::vector<std::string>& token_bytes, const std::vector<uint8_t>& skip,
                std::vector<int32_t> end_ids, int32_t vocab_size);

    int32_t vocab_size() const { return vocab_; }
    size_t words() const { return (size_t(vocab_) + 31) / 32; }
    const std::vector<int32_t>& end_ids() const { return end_ids_; }
    size_t trie_nodes() const { return byte_.size(); }
    // The mask for `frontier` (bit i of word i/32 set: id i allowed). The caller holds m.mu().
    const std::vector<uint32_t>& mask(Machine& m, uint32_t frontier) const;
    // Uncached computation (benchmarks, tests).
    std::vector<uint32_t> compute(Machine& m, uint32_t frontier) const;
    const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
    bool is_end(int32_t id) const;
    // May the id appear as text at all (not special, not a hole, inside the vocabulary)?
    bool is_text(int32_t id) const {
        return id >= 0 && size_t(id) < bytes_.size() && id < vocab_ && !bytes_[size_t(id)].empty() &&
               (size_t(id) >= skip_.size() || !skip_[size_t(id)]);
    }

private:
    int32_t vocab_;
    std::vector<int32_t> end_ids_;
    std::vector<std::string> bytes_;  // [vocab] as given
    std::vector<uint8_t> skip_;
    // Trie in preorder: node i has byte_[i], depth_[i] (1 = child of the root), end_[i] (one past
    // its subtree), tokens tok_[tok_begin_[i] .. tok_begin_[i+1]).
    std::vector<uint8_t> byte_;
    std::vector<uint16_t> depth_;
    std::vector<uint32_t> end_;
    std::vector<uint32_t> tok_begin_;
    std::vector<int32_t> tok_;
    size_t max_depth_ = 0;
};

class Matcher {
public:
    Matcher(std::shared_ptr<Machine> m, std::shared_ptr<const TokenMasker> k)
        : m_(std::move(m)), k_(std::move(k)) { reset(); }
    void reset();
    // Advances by a token; false (state unchanged) when the grammar refuses it. End tokens are
    // accepted when the grammar accepts and then finish the matcher.
    bool accept(int32_t id);
    bool accepts() const;      // the output so far is complete
    bool finished() const { return finished_; }
    // The allowed ids for the next token ([words] bits); valid until the next call (a copy:
    // the Machine's cache may be shared with other matchers and evicted).
    const std::vector<uint32_t>& mask();
    uint32_t frontier() const { return f_; }

private:
    std::shared_ptr<Machine> m_;
    std::shared_ptr<const TokenMasker> k_;
    uint32_t f_ = kDead;
    bool finished_ = false;
    std::vector<uint32_t> bits_;
};

}  // namespace frost::text::grammar
