// ReasoningSplitter (see reasoning_split.h): a three-state machine over a held-back buffer.
#include "serve/reasoning_split.h"

#include <cstring>

namespace frost::serve {

namespace {

// Length of the longest suffix of `s` that is a proper prefix of `tag` (a tag that may still
// complete with the next piece).
size_t partial_tag_suffix(const std::string& s, const char* tag) {
    const size_t n = std::strlen(tag);
    for (size_t k = std::min(n - 1, s.size()); k > 0; --k)
        if (s.compare(s.size() - k, k, tag, k) == 0) return k;
    return 0;
}

size_t leading_newlines(const std::string& s) {
    size_t i = 0;
    while (i < s.size() && (s[i] == '\n' || s[i] == '\r')) ++i;
    return i;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool starts_inside)
    : state_(starts_inside ? State::Inside : State::Start), after_tag_(starts_inside) {}

SplitText ReasoningSplitter::feed(const std::string& text) {
    held_ += text;
    SplitText out;
    run(&out, false);
    return out;
}

SplitText ReasoningSplitter::flush() {
    SplitText out;
    run(&out, true);
    return out;
}

void ReasoningSplitter::run(SplitText* out, bool final) {
    for (;;) {
        if (state_ == State::Start) {
            // Only an opening tag at the very start (after whitespace) begins a reasoning block.
            size_t i = 0;
            while (i < held_.size() && is_space(held_[i])) ++i;
            const std::string rest = held_.substr(i);
            const size_t open_len = std::strlen(kThinkOpen);
            if (rest.compare(0, open_len, kThinkOpen) == 0) {
                held_ = rest.substr(open_len);
                state_ = State::Inside;
                after_tag_ = true;
                continue;
            }
            if (!final && rest.size() < open_len && std::string(kThinkOpen).compare(0, rest.size(), rest) == 0)
                return;  // still undecided (empty, whitespace or a partial "<think>")
            state_ = State::Content;
            continue;
        }
        if (state_ == State::Content) {
            if (after_tag_) {
                const size_t nl = leading_newlines(held_);
                held_.erase(0, nl);
                if (held_.empty() && !final) return;
                after_tag_ = false;
            }
            out->content += held_;
            held_.clear();
            return;
        }
        // Inside a reasoning block.
        if (after_tag_) {
            held_.erase(0, leading_newlines(held_));
            if (held_.empty() && !final) return;
            after_tag_ = false;
        }
        const size_t close = held_.find(kThinkClose);
        if (close != std::string::npos) {
            std::string r = held_.substr(0, close);
            while (!r.empty() && (r.back() == '\n' || r.back() == '\r')) r.pop_back();
            out->reasoning += r;
            held_.erase(0, close + std::strlen(kThinkClose));
            state_ = State::Content;
            after_tag_ = true;
            continue;
        }
        if (final) {
            out->reasoning += held_;
            held_.clear();
            return;
        }
        // Hold a partial "</think>" and the newlines before it (dropped if the tag follows).
        size_t keep = partial_tag_suffix(held_, kThinkClose);
        while (keep < held_.size() && (held_[held_.size() - keep - 1] == '\n' || held_[held_.size() - keep - 1] == '\r'))
            ++keep;
        out->reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
    }
}

bool prompt_opens_thinking(const std::string& prompt_text) {
    size_t end = prompt_text.size();
    while (end > 0 && is_space(prompt_text[end - 1])) --end;
    const size_t n = std::strlen(kThinkOpen);
    return end >= n && prompt_text.compare(end - n, n, kThinkOpen) == 0;
}

}  // namespace frost::serve
