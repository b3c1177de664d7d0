// Storage for the subcommand registry (function-local static: safe across translation units).
#include "command.h"

#include <algorithm>

namespace frost::cli {

static std::vector<Command>& registry() {
    static std::vector<Command> r;
    return r;
}

bool register_command(const Command& c) {
    auto& r = registry();
    r.push_back(c);
    std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) {
        return std::string(a.name) < std::string(b.name);
    });
    return true;
}

const std::vector<Command>& commands() { return registry(); }

const Command* find_command(const std::string& name) {
    for (const auto& c : registry())
        if (name == c.name) return &c;
    return nullptr;
}

}  // namespace frost::cli
