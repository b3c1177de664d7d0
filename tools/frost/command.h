// Subcommand registry for the `frost` CLI. Each cmd_<name>.cpp defines one command with
// FROST_COMMAND; main.cpp looks it up by name. Commands return the process exit code and print
// their own errors (tools are the only place allowed to decide the process's fate).
#pragma once
#include <string>
#include <vector>

namespace frost::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);  // args exclude "frost <name>"

struct Command {
    const char* name;
    const char* summary;  // one line for `frost help`
    const char* usage;    // full usage text for `frost help <name>` and `frost <name> --help`
    CommandFn fn;
};

// Registers at static-initialisation time; returns true so it can initialise a static.
bool register_command(const Command& c);
const std::vector<Command>& commands();
const Command* find_command(const std::string& name);

}  // namespace frost::cli

#define FROST_CMD_CAT2(a, b) a##b
#define FROST_CMD_CAT(a, b) FROST_CMD_CAT2(a, b)
#define FROST_COMMAND(name, summary, usage, fn) \
    static const bool FROST_CMD_CAT(frost_cmd_registered_, __LINE__) = \
        ::frost::cli::register_command(::frost::cli::Command{name, summary, usage, fn})
