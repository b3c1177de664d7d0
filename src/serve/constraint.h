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

// Forced tool call (the prompt already ends with TextIface::tool_call_prefix): named (`name`
// non-empty): that tool's arguments, then the call's end; "required": one call of any tool
// (`parallel`: then up to 15 more). Qwen3's JSON form (`xml` false): `{"name": ..., "arguments":
// ...}` with the arguments per the tool's `parameters` schema. Qwen3.5/3.6's XML form (`xml`
// true): `<function=NAME>` and one `<parameter=P>` block per property in declared order, typed
// values as their schema's JSON, string values as raw text without '<' (see xml_params). An
// unsupported or invalid schema fails naming `tools[i].function.parameters`.
frost_status compile_tool_call(const nlohmann::json& tools, const std::string& name, bool parallel, bool xml,
                               std::shared_ptr<text::grammar::Machine>* out);

}  // namespace frost::serve
