// Nesting depth of a JSON text in one linear pass (no recursion, brackets inside strings ignored):
// the guard every recursive walk of user-supplied JSON runs first, in serve's request intake and in
// the chat template's re-serialiser of tool-call arguments.
#pragma once
#include <cstddef>
#include <string_view>

namespace frost::text {

// Deepest object/array nesting of `text`; stops counting (returns a value > limit) as soon as
// `limit` is exceeded.
size_t json_nesting_depth(std::string_view text, size_t limit);

}  // namespace frost::text
