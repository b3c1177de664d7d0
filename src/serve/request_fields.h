// Reading a client's JSON body field by field, for the request translators (Messages,
// Responses, tokenize): the client's JSON is never trusted to have the type a field should have
// (json::value() would throw), every error names the field, and an unknown field is refused
// rather than silently dropped (the project rule).
#pragma once
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"

namespace frost::serve {

// o[key] when o is an object and that is a string, else `dflt`.
std::string str_of(const nlohmann::json& o, const char* key, const std::string& dflt = "");

// *err = a 400 naming `param`; returns false (so a check reads `return reject(err, ...)`).
bool reject(ApiError* err, const std::string& param, const std::string& msg);

// Every key of `body` is one of `known`; else a 400 naming the first unknown key as the param
// and listing all of them ("unknown field(s) 'a', 'b'"), then ": <api_note>" when given.
bool only_known_fields(const nlohmann::json& body, std::initializer_list<const char*> known, ApiError* err,
                       const std::string& api_note = "");

}  // namespace frost::serve
