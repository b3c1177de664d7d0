// `frost` entry point: global flags (--version, help) and dispatch to registered subcommands.
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "frost/exec.h"

namespace {

void print_help() {
    std::printf("frost %s: latency-first inference runtime for hybrid LLMs and robot policies\n\n",
                FROST_VERSION);
    std::printf("usage: frost <command> [options]\n       frost help <command>\n\ncommands:\n");
    for (const auto& c : frost::cli::commands()) std::printf("  %-12s %s\n", c.name, c.summary);
    std::printf("  %-12s %s\n", "help", "show this list, or a command's usage");
    std::printf("\nglobal: --version prints the version and the compiled backends\n");
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        print_help();
        return 2;
    }
    const std::string& first = args[0];
    if (first == "--version" || first == "version") {
        std::printf("frost %s (exec ABI %u; backends: cpu%s)\n", FROST_VERSION,
                    frost_exec_abi_version(),
                    frost_backend_available(FROST_BACKEND_CUDA) ? ", cuda" : "");
        return 0;
    }
    if (first == "help" || first == "--help" || first == "-h") {
        if (args.size() > 1) {
            const auto* c = frost::cli::find_command(args[1]);
            if (!c) {
                std::fprintf(stderr, "frost: unknown command '%s' (see `frost help`)\n", args[1].c_str());
                return 2;
            }
            std::printf("%s\n", c->usage);
            return 0;
        }
        print_help();
        return 0;
    }
    const auto* c = frost::cli::find_command(first);
    if (!c) {
        std::fprintf(stderr, "frost: unknown command '%s' (see `frost help`)\n", first.c_str());
        return 2;
    }
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const auto& a : rest)
        if (a == "--help" || a == "-h") {
            std::printf("%s\n", c->usage);
            return 0;
        }
    return c->fn(rest);
}
