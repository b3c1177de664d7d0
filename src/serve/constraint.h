// Constrained decoding in the server: compiles what a request asks for (response_format
// json_object / json_schema, the `grammar` and `regex` extensions, a forced tool call) into a
// shared text::grammar::Machine, cached by its source so an agent resending the same schema
// every turn reuses the compiled automaton and its per-state mask cache. Pure compilation: the
// scheduler runs one text::grammar::Matcher per choice and hands each step's mask to the engine
// (EngineIface::set_token_mask).
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "text/grammar/machine.h"

namespace frost::serve {

enum class ConstraintKind { None, JsonObject, JsonSchema, Grammar, Regex };

// Compiles kind + source (the schema's JSON text for JsonSchema, the grammar or pattern text
// otherwise). FROST_ERR_INVALID_ARG with last_error() naming the problem when it does not
// compile.
frost_status compile_constraint(ConstraintKind kind, const std::string& source,
                                std::shared_ptr<text::grammar::Machine>* out);

// Forced tool call in Qwen3's JSON form (the prompt already ends with `prefix`, see
// TextIface::tool_call_prefix): named (`name` non-empty): the arguments object per that tool's
// `parameters` schema, then the call's end; "required": one call of any tool (`parallel`: then
// up to 15 more), each `{"name": ..., "arguments": ...}` with its own schema. An unsupported or
// invalid schema fails naming `tools[i].function.parameters`.
frost_status compile_tool_call(const nlohmann::json& tools, const std::string& name, bool parallel,
                               std::shared_ptr<text::grammar::Machine>* out);

}  // namespace frost::serve
