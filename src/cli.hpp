#pragma once
// The command line, defined once with CLI11: parsing, --help, the man page's option list and the
// shell completions all come from build_cli().

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace pysandbox {

// What `pysandbox run` was asked, unresolved: strings as typed. plan.cpp turns them into numbers
// and paths, naming the flag when a value is wrong.
struct RunOptions {
    std::string profile = "default";
    std::optional<std::string> timeout;
    std::optional<std::string> cpu_time;
    std::optional<std::string> memory;
    std::optional<std::int64_t> max_procs;
    std::optional<std::int64_t> cpus;
    std::optional<std::string> tmp_size;
    std::optional<std::string> output_limit;
    std::optional<std::string> net;
    std::vector<std::string> allow;  // --allow HOST:PORT, repeatable
    std::vector<std::string> env;
    std::vector<std::string> inputs;         // --input FILE[=NAME], repeatable
    std::optional<std::string> output_dir;  // --output-dir DIR
    std::optional<std::string> workdir;     // --workdir DIR: a host directory as /tmp/work
    std::optional<std::string> incident_log;  // --incident-log PATH
    std::optional<std::string> code;  // -c CODE
    std::string script;               // path, or "-" for stdin; empty with -c
    std::vector<std::string> args;    // everything after "--"
    int verbose = 0;
    bool json = false;  // one JSON result on stdout instead of the script's output
};

struct ProfileOptions {
    std::string name;
};

// What `pysandbox check` was asked.
struct CheckOptions {
    std::string profile = "default";
    std::string script;
    std::optional<std::string> incident_log;  // --incident-log PATH
    bool json = false;
};

enum class Command { none, run, check, profile_list, profile_show, doctor };

struct Invocation {
    Command command = Command::none;
    bool doctor_json = false;
    RunOptions run;
    CheckOptions check;
    ProfileOptions profile;
};

// The CLI11 app bound to `out`. Call parse() on it, then read `out.command`.
std::unique_ptr<CLI::App> build_cli(Invocation& out);

// argv split at the first "--": CLI11 parses the head, the tail goes verbatim to the script.
struct SplitArgs {
    std::vector<std::string> head;  // without argv[0], reversed as CLI11's parse(vector) wants
    std::vector<std::string> script_args;
};
SplitArgs split_at_double_dash(int argc, const char* const* argv);

// Throws CLI::ParseError naming the word when the first one is not a command.
void check_command_name(CLI::App& app, const SplitArgs& split);

// Parses argv into an Invocation. Throws CLI::ParseError (help, version and errors alike).
Invocation parse_command_line(int argc, const char* const* argv);

}  // namespace pysandbox
