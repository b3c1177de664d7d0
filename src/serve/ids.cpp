// Id spelling rules and generation (see ids.h).
#include "serve/ids.h"

#include <mutex>
#include <random>

namespace frost::serve {

bool valid_id(std::string_view id, std::string* why) {
    if (id.empty()) {
        *why = "id must not be empty";
        return false;
    }
    if (id.size() > kMaxIdBytes) {
        *why = "id is longer than " + std::to_string(kMaxIdBytes) + " bytes";
        return false;
    }
    if (id[0] == '-') {
        *why = "id must not start with '-'";
        return false;
    }
    for (char ch : id) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                        ch == '_' || ch == '-';
        if (!ok) {
            *why = "id may contain only [A-Za-z0-9_-]";
            return false;
        }
    }
    return true;
}

namespace {
// Ids are unguessable so one tenant cannot probe another's; std::random_device is seeded from
// the OS entropy source on Linux.
std::mutex mu;
std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()};
}  // namespace

uint64_t fresh_seed() {
    std::lock_guard<std::mutex> lock(mu);
    return gen() >> 11;
}

std::string new_id(const char* prefix, char sep) {
    static const char* hex = "0123456789abcdef";
    constexpr int kHexChars = 24;
    std::string out = std::string(prefix) + sep;
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < kHexChars; ++i) out.push_back(hex[gen() & 15]);
    return out;
}

}  // namespace frost::serve
