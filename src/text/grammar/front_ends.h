// Constrained decoding front ends: text in, byte-level Grammar (grammar.h) out. Every failure is
// FROST_ERR_INVALID_ARG with last_error() naming the problem (position, keyword or rule), which
// the server returns as a 400.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/grammar/grammar.h"

namespace frost::text::grammar {

// GBNF-like grammar text (llama.cpp's syntax): `name ::= body` rules, start rule `root`;
// "literals" (escapes \n \r \t \\ \" \xHH \uXXXX \UXXXXXXXX), [character classes] (^, ranges,
// the same escapes), `.` (any character), rule names, ( groups ), alternation |, postfix
// * + ? {m} {m,} {m,n}; `#` comments. Matching is on code points encoded as UTF-8.
frost_status parse_gbnf(std::string_view text, Grammar* out);
// The rule list only (json_schema.cpp generates text and reuses this).
frost_status parse_gbnf_rules(std::string_view text, std::vector<RuleDef>* out);

// A regular expression subset, matched against the WHOLE output (anchors implied; a leading ^
// and trailing $ are accepted): literals, escapes (\d \w \s \D \W \S \n \t \r \. ... \uXXXX),
// [classes], `.` (any character but newline), (groups) and (?:groups), |, * + ? {m} {m,} {m,n}
// (lazy forms accepted: same language). Backreferences and lookaround are errors.
frost_status parse_regex(std::string_view pattern, Grammar* out);

// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();
// JSON Schema, the strict subset OpenAI's structured outputs define (json_schema.cpp lists it),
// as GBNF text; an unsupported keyword is an error naming it and its path. Properties are
// generated in the schema's order: pass an ordered_json to keep the declaration order (a plain
// json orders them by name).
frost_status json_schema_gbnf(const nlohmann::ordered_json& schema, std::string* out);
frost_status parse_json_schema(const nlohmann::ordered_json& schema, Grammar* out);
frost_status json_schema_gbnf(const nlohmann::json& schema, std::string* out);
frost_status parse_json_schema(const nlohmann::json& schema, Grammar* out);

// Building blocks for composite grammars (several schemas in one, e.g. forced tool calls): the
// schema's rules with names starting with `prefix` (no base rules; *root_rule names the
// schema's rule), the shared JSON base rules (ws, json-string, json-value, ...) to append once,
// and a GBNF literal matching exactly `bytes`.
frost_status json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix, std::string* rules,
                               std::string* root_rule);
std::string json_base_gbnf();
std::string gbnf_literal(const std::string& bytes);

}  // namespace frost::text::grammar
