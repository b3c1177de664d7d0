// `frost bench <kind> ...`: dispatch to the benchmark kinds registered in bench_registry.h.
#include <cstdio>
#include <string>

#include "bench_registry.h"
#include "command.h"

namespace frost::cli {

// Function-local static: registration runs during static initialisation of other files.
static std::vector<BenchKind>& registry() {
    static std::vector<BenchKind> kinds;
    return kinds;
}

bool register_bench_kind(const BenchKind& k) {
    registry().push_back(k);
    return true;
}

const std::vector<BenchKind>& bench_kinds() { return registry(); }

}  // namespace frost::cli

namespace {

constexpr const char* kUsage =
    "usage: frost bench <kind> [args...]\n"
    "Runs one benchmark; each prints its result next to a baseline measured in the same run.\n"
    "`frost bench` alone lists the kinds.";

int run_bench(const std::vector<std::string>& args) {
    const auto& kinds = frost::cli::bench_kinds();
    if (!args.empty())
        for (const auto& k : kinds)
            if (args[0] == k.name) return k.fn(std::vector<std::string>(args.begin() + 1, args.end()));
    if (!args.empty()) std::fprintf(stderr, "frost bench: unknown kind '%s'\n", args[0].c_str());
    std::fprintf(stderr, "%s\nkinds:\n", kUsage);
    for (const auto& k : kinds) std::fprintf(stderr, "  %-10s %s\n", k.name, k.summary);
    return 2;
}

}  // namespace

FROST_COMMAND("bench", "run a benchmark kind (frost bench to list them)", kUsage, run_bench);
