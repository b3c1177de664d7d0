// The byte-level pushdown automaton (see machine.h).
#include "text/grammar/machine.h"

#include <algorithm>

namespace frost::text::grammar {

size_t Machine::NodeHash::operator()(const Node& n) const {
    uint64_t h = (uint64_t(n.rule) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(n.alt) << 20) ^ (uint64_t(n.pos) << 40);
    h ^= uint64_t(n.parent) * 0xC2B2AE3D27D4EB4Full;
    return size_t(h ^ (h >> 29));
}

size_t Machine::VecHash::operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return size_t(h);
}

Machine::Machine(Grammar g) : g_(std::move(g)) {
    nodes_.push_back(Node{0, 0, 0, 0, 0});  // node 0: the empty stack (accepted)
    frontiers_.emplace_back();              // frontier 0: dead
    frontier_ids_[{}] = kDead;
    // The root's alternatives, each returning to the empty stack.
    std::vector<uint32_t> s;
    for (uint32_t a = 0; a < g_.rules[g_.root].alts.size(); ++a) closure(node(g_.root, a, 0, 0), &s);
    start_ = intern(std::move(s));
}

uint32_t Machine::node(uint32_t rule, uint32_t alt, uint32_t pos, uint32_t parent) {
    Node n{rule, alt, pos, parent, parent == 0 ? 1u : nodes_[parent].depth + 1};
    auto it = node_ids_.find(n);
    if (it != node_ids_.end()) return it->second;
    const uint32_t id = uint32_t(nodes_.size());
    nodes_.push_back(n);
    node_ids_.emplace(n, id);
    return id;
}

void Machine::closure(uint32_t start, std::vector<uint32_t>* out) {
    // Worklist over nodes; a per-call stamp marks the ones already expanded.
    if (++stamp_ == 0) {
        std::fill(seen_stamp_.begin(), seen_stamp_.end(), 0);
        stamp_ = 1;
    }
    work_.clear();
    work_.push_back(start);
    while (!work_.empty()) {
        const uint32_t n = work_.back();
        work_.pop_back();
        if (seen_stamp_.size() <= n) seen_stamp_.resize(nodes_.size() * 2 + 16, 0);
        if (seen_stamp_[n] == stamp_) continue;
        seen_stamp_[n] = stamp_;
        if (n == 0) {
            out->push_back(0);
            continue;
        }
        const Node f = nodes_[n];
        const auto& alt = g_.rules[f.rule].alts[f.alt];
        if (f.pos == alt.size()) {  // rule done: continue in the caller
            work_.push_back(f.parent);
            continue;
        }
        const Elem e = alt[f.pos];
        if (!e.is_ref) {
            out->push_back(n);
            continue;
        }
        if (f.depth >= kMaxDepth) continue;  // too deep: this branch is dropped
        // Tail call: a reference in last position returns straight to the caller's caller, so
        // right recursion (every x*, x+) keeps the stack flat instead of growing per item.
        const uint32_t ret = f.pos + 1 == alt.size() ? f.parent : node(f.rule, f.alt, f.pos + 1, f.parent);
        const auto& alts = g_.rules[e.id].alts;
        for (uint32_t a = 0; a < alts.size(); ++a) work_.push_back(node(e.id, a, 0, ret));
    }
}

uint32_t Machine::intern(std::vector<uint32_t> stacks) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    if (stacks.size() > kMaxStacks) stacks.clear();  // too ambiguous: refused
    auto it = frontier_ids_.find(stacks);
    if (it != frontier_ids_.end()) return it->second;
    const uint32_t id = uint32_t(frontiers_.size());
    Frontier f;
    f.accept = !stacks.empty() && stacks[0] == 0;
    f.stacks = stacks;
    frontiers_.push_back(std::move(f));
    frontier_ids_.emplace(std::move(stacks), id);
    return id;
}

uint32_t Machine::step(uint32_t frontier, uint8_t byte) {
    if (frontier == kDead) return kDead;
    if (frontiers_[frontier].next) {
        const uint32_t t = (*frontiers_[frontier].next)[byte];
        if (t != kUnknown) return t;
    }
    std::vector<uint32_t> out;
    // Copy: closure() may grow frontiers_ (no: only nodes_), but keep the loop independent of it.
    const std::vector<uint32_t> stacks = frontiers_[frontier].stacks;
    for (uint32_t n : stacks) {
        if (n == 0) continue;
        const Node f = nodes_[n];
        const Elem e = g_.rules[f.rule].alts[f.alt][f.pos];
        if (!byteset_has(g_.sets[e.id], byte)) continue;
        closure(node(f.rule, f.alt, f.pos + 1, f.parent), &out);
    }
    const uint32_t t = intern(std::move(out));
    Frontier& fr = frontiers_[frontier];
    if (!fr.next && memo_tables_ < kMaxMemoFrontiers) {
        fr.next = std::make_unique<std::array<uint32_t, 256>>();
        fr.next->fill(kUnknown);
        ++memo_tables_;
    }
    if (fr.next) (*fr.next)[byte] = t;
    return t;
}

const std::vector<uint32_t>& Machine::store_mask(uint32_t frontier, std::vector<uint32_t> bits) {
    if (masks_.size() >= kMaxMasks) {
        for (uint32_t f : mask_owner_) frontiers_[f].mask = -1;
        masks_.clear();
        mask_owner_.clear();
    }
    frontiers_[frontier].mask = int32_t(masks_.size());
    masks_.push_back(std::move(bits));
    mask_owner_.push_back(frontier);
    return masks_.back();
}

uint32_t Machine::walk(uint32_t frontier, const char* s, size_t n) {
    for (size_t i = 0; i < n && frontier != kDead; ++i) frontier = step(frontier, static_cast<uint8_t>(s[i]));
    return frontier;
}

}  // namespace frost::text::grammar
