// Constrained decoding, part 2: the byte-level pushdown automaton over a Grammar. A parse stack
// is a chain of frames (rule, alternative, position, return frame); stacks are hash-consed into
// nodes so equal stacks share one id. The matcher state is a FRONTIER: the sorted set of stacks
// whose top frame waits for a byte (plus node 0, the empty stack, when the input may end), like
// an Earley/GLR frontier, so ambiguity never backtracks. Frontiers are interned too and their
// byte transitions memoized, so a state seen before costs one table lookup per byte: the token
// masker (token_mask.h) walks a vocabulary trie through these transitions.
//
// Bounds: a frontier holds at most kMaxStacks stacks and a stack at most kMaxDepth frames;
// beyond them the branch is dropped (the input is treated as not allowed), so memory and time
// stay bounded for any grammar. Not thread-safe: the owner serializes access through mu().
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "text/grammar/grammar.h"

namespace frost::text::grammar {

constexpr size_t kMaxStacks = 1024;
constexpr uint32_t kMaxDepth = 2048;
constexpr uint32_t kDead = 0;  // the empty frontier: nothing can follow

class Machine {
public:
    explicit Machine(Grammar g);

    uint32_t start() const { return start_; }
    // The frontier after `byte` (kDead when the byte is not allowed).
    uint32_t step(uint32_t frontier, uint8_t byte);
    // The frontier after every byte of s (kDead as soon as one is refused).
    uint32_t walk(uint32_t frontier, const char* s, size_t n);
    // The input so far is a complete sentence of the grammar.
    bool accepts(uint32_t frontier) const { return frontiers_[frontier].accept; }
    // Nothing but the end may follow.
    bool only_end(uint32_t frontier) const { return frontiers_[frontier].accept && frontiers_[frontier].stacks.size() == 1; }
    size_t frontier_count() const { return frontiers_.size(); }
    const Grammar& grammar() const { return g_; }
    std::mutex& mu() { return mu_; }

    // The token masker's per-frontier cache (token_mask.h): a cached mask or nullptr; store()
    // keeps at most kMaxMasks (then starts over: a rare, amortised rebuild).
    const std::vector<uint32_t>* cached_mask(uint32_t frontier) const {
        const int32_t i = frontiers_[frontier].mask;
        return i < 0 ? nullptr : &masks_[size_t(i)];
    }
    const std::vector<uint32_t>& store_mask(uint32_t frontier, std::vector<uint32_t> bits);
    static constexpr size_t kMaxMasks = 256;  // 31 KiB each for a 248k vocabulary: 8 MiB

private:
    struct Node {
        uint32_t rule, alt, pos, parent, depth;
        bool operator==(const Node& o) const {
            return rule == o.rule && alt == o.alt && pos == o.pos && parent == o.parent;
        }
    };
    struct NodeHash {
        size_t operator()(const Node& n) const;
    };
    struct VecHash {
        size_t operator()(const std::vector<uint32_t>& v) const;
    };
    struct Frontier {
        std::vector<uint32_t> stacks;  // sorted node ids; node 0 = accepted (empty stack)
        bool accept = false;
        std::unique_ptr<std::array<uint32_t, 256>> next;  // memoized step(); kUnknown = not yet
        int32_t mask = -1;
    };
    static constexpr uint32_t kUnknown = 0xFFFFFFFFu;
    static constexpr size_t kMaxMemoFrontiers = 1 << 13;  // transition tables kept (1 KiB each: 8 MiB)

    uint32_t node(uint32_t rule, uint32_t alt, uint32_t pos, uint32_t parent);
    // Adds to *out every stack reachable from `n` without consuming a byte.
    void closure(uint32_t n, std::vector<uint32_t>* out);
    uint32_t intern(std::vector<uint32_t> stacks);

    Grammar g_;
    std::vector<Node> nodes_;
    std::unordered_map<Node, uint32_t, NodeHash> node_ids_;
    std::vector<Frontier> frontiers_;
    std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> frontier_ids_;
    uint32_t start_ = kDead;
    size_t memo_tables_ = 0;
    std::vector<uint32_t> work_, seen_stamp_;
    uint32_t stamp_ = 0;
    std::vector<std::vector<uint32_t>> masks_;
    std::vector<uint32_t> mask_owner_;  // masks_[i] belongs to frontier mask_owner_[i]
    std::mutex mu_;
};

}  // namespace frost::text::grammar
