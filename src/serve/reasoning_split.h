// Splits a thinking model's generated text into reasoning and content, as it streams (the
// vLLM/SGLang "reasoning parser" behaviour for Qwen3): text between <think> and </think> is
// reasoning, the rest content. Qwen3.5/3.6 templates open the <think> block in the generation
// prompt, so the output may start INSIDE it with no opening tag (starts_inside); Qwen3 lets the
// model write <think> itself, which is recognised only at the very start (after whitespace).
// Tags may arrive split across tokens: a partial tag is held back until it resolves. Newlines
// right after a tag and right before </think> are dropped (the template's own layout).
#pragma once
#include <string>

namespace frost::serve {

constexpr const char* kThinkOpen = "<think>";
constexpr const char* kThinkClose = "</think>";

struct SplitText {
    std::string reasoning;
    std::string content;
};

class ReasoningSplitter {
public:
    explicit ReasoningSplitter(bool starts_inside);
    // Text that can be emitted now; a possible partial tag (or trailing newlines of reasoning)
    // is held until later text decides it.
    SplitText feed(const std::string& text);
    // End of generation: whatever is held goes out (an unclosed block stays reasoning).
    SplitText flush();
    bool in_reasoning() const { return state_ == State::Inside; }

private:
    enum class State { Start, Inside, Content };
    void run(SplitText* out, bool final);
    State state_;
    bool after_tag_;      // drop newlines that directly follow a tag
    std::string held_;    // undecided text
};

// True when a rendered chat prompt ends inside an open <think> block (the Qwen3.5/3.6
// generation prompt "<|im_start|>assistant\n<think>\n").
bool prompt_opens_thinking(const std::string& prompt_text);

}  // namespace frost::serve
