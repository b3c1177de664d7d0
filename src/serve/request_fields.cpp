// Request field reading (see request_fields.h).
#include "serve/request_fields.h"

namespace frost::serve {

std::string str_of(const nlohmann::json& o, const char* key, const std::string& dflt) {
    if (!o.is_object()) return dflt;
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : dflt;
}

bool reject(ApiError* err, const std::string& param, const std::string& msg) {
    *err = invalid_field(param, msg);
    return false;
}

bool only_known_fields(const nlohmann::json& body, std::initializer_list<const char*> known, ApiError* err,
                       const std::string& api_note) {
    std::string unknown, first;
    for (auto it = body.begin(); it != body.end(); ++it) {
        bool ok = false;
        for (const char* k : known) ok = ok || it.key() == k;
        if (ok) continue;
        if (first.empty()) first = it.key();
        unknown += (unknown.empty() ? "'" : ", '") + it.key() + "'";
    }
    if (unknown.empty()) return true;
    return reject(err, first, "unknown field(s) " + unknown + (api_note.empty() ? "" : ": " + api_note));
}

}  // namespace frost::serve
