// Session and capsule ids: a closed charset and length so an id can never name a path, carry a
// NUL or smuggle non-ASCII (T14), plus generation of fresh random ids. Ids are scoped per API
// key by the owners of the records (sessions, store); this file only judges the spelling.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace frost::serve {

constexpr size_t kMaxIdBytes = 64;

// [A-Za-z0-9_-], 1..kMaxIdBytes bytes, not starting with '-'. On false, *why says which rule.
bool valid_id(std::string_view id, std::string* why);

// "<prefix>-<24 hex chars from a CSPRNG-seeded generator>", e.g. "sess-3f9a...". `sep` '_'
// gives Anthropic's and OpenAI's own spelling ("msg_...", "resp_...", "fc_...").
std::string new_id(const char* prefix, char sep = '-');

// A fresh sampling seed for a request that named none, in [0, 2^53) so every JSON client reads
// the reported value back exactly (sending it as `seed` repeats the output).
uint64_t fresh_seed();

}  // namespace frost::serve
