#pragma once
// The command line, defined once with CLI11: parsing, --help, the man page's option list and the
// shell completions all come from build_cli(). Values are parsed into the core's types as they are
// read (a Request, plan.hpp's input): a bad value is a CLI::ValidationError naming the flag.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "plan/request.hpp"

namespace pysandbox {

enum class Command {
    none,
    run,
    check,
    session,
    mcp,
    batch,
    kernel,
    kernel_install,
    profile_list,
    profile_show,
    doctor,
    env_create,
    env_list,
    env_show,
    env_rm,
    env_prune,
};

// `pysandbox env create|list|show|rm|prune` (fronts/env.hpp).
struct EnvInvocation {
    std::vector<std::string> specs;              // PKG requirement specifiers
    std::vector<std::string> requirement_files;  // -r FILE
    std::string script;                          // --script FILE: its PEP 723 dependencies
    std::vector<std::string> find_links;         // wheelhouse directories
    std::string index_url;                       // "": pypi.org's, unless only --find-links
    bool allow_build = false;                    // sdists may be built (inside, too)
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
    std::uint64_t max_size = 1ULL << 30;  // of what pip may write
    std::optional<std::string> cache_dir;
    std::vector<std::string> ids;                         // show, rm
    std::optional<std::chrono::milliseconds> older_than;  // prune
    std::optional<std::uint64_t> keep_size;               // prune --max-size
    bool json = false;
    bool verify = false;  // show --verify
    int verbose = 0;
};

// `pysandbox run`.
struct RunInvocation {
    std::string profile = "default";
    Request request;
    // As typed, until the run command's callback turns them into request.program.
    std::optional<std::string> code;  // -c CODE
    std::string script;               // path, or "-" for stdin; empty with -c
    bool fail_on_truncation = false;  // exit 1, not 0, when the output limit cut the output
    // --with, --requirements and their sources (--find-links, --index-url): the packages the
    // run installs (fronts/env.hpp, run_packages), with the script's inline metadata.
    EnvInvocation packages;
};

// `pysandbox check`.
struct CheckInvocation {
    std::string profile = "default";
    std::string script;
    std::optional<std::string> incident_log;
    std::optional<KernelChoice> kernel;  // --kernel
    bool json = false;
};

// `pysandbox session`.
struct SessionInvocation {
    std::string profile = "default";
    Overrides overrides;
    bool ndjson = false;   // NDJSON even when stdin is a terminal
    std::size_t pool = 0;  // sandboxes kept started for after a lost state
    int verbose = 0;
};

// `pysandbox kernel` and `pysandbox kernel install`.
struct KernelInvocation {
    std::string profile = "default";
    std::string connection_file;  // -f: the client's, with the ports and the signing key
    Overrides overrides;
    int verbose = 0;
    // install: where the kernelspec goes (--user, --sys-prefix, --prefix DIR; default --user)
    bool user = false;
    bool sys_prefix = false;
    std::string prefix;
    std::string name = "pysandbox";
};

// `pysandbox mcp`.
struct McpInvocation {
    std::vector<std::string> profiles;  // offered; the first is the default ("default" if none)
    std::size_t pool = 1;               // warm sandboxes kept per profile
    std::size_t max_sessions = 16;      // live sessions at once
    std::size_t max_calls = 0;          // calls running at once; 0: one per CPU
    std::string http;                   // [ADDR:]PORT: Streamable HTTP there; empty: stdio
    std::string http_token_file;        // the bearer token clients must send over HTTP
    std::vector<std::string> http_allow_origins;  // Origins let in besides loopback's own
    std::size_t http_max_clients = 16;            // HTTP client sessions at once
    std::size_t http_max_client_requests = 8;     // one HTTP client's requests in flight
    std::size_t max_client_sessions = 4;          // one HTTP client's MCP sessions
    Overrides overrides;
    int verbose = 0;
};

// `pysandbox batch`.
struct BatchInvocation {
    std::vector<std::string> profiles;  // those a job may name; the first is the default
    std::size_t jobs = 0;               // at once; 0: one per CPU
    bool keep_order = false;            // results in the input's order, not as jobs finish
    bool fork = false;                  // experimental: jobs forked by a zygote (zygote.hpp)
    bool fail_on_error = false;         // exit 1 when a job's status is not ok
    bool quiet = false;                 // no progress and no summary on stderr
    std::string junit;                  // a JUnit XML report to write; "": none
    std::string jobs_file;              // "-": stdin
    Overrides overrides;
    int verbose = 0;
};

struct Invocation {
    Command command = Command::none;
    bool doctor_json = false;
    std::optional<KernelChoice> doctor_kernel;  // doctor --kernel
    RunInvocation run;
    CheckInvocation check;
    SessionInvocation session;
    McpInvocation mcp;
    KernelInvocation kernel;
    BatchInvocation batch;
    EnvInvocation env;
    std::string profile_name;  // `profile show NAME`
};

// The CLI11 app bound to `out`: every command, or only the one named `only`. Call parse() on it,
// then read `out.command`.
std::unique_ptr<CLI::App> build_cli(Invocation& out, std::string_view only = {});

// argv split at the first "--": CLI11 parses the head, the tail goes verbatim to the script.
struct SplitArgs {
    std::vector<std::string> head;  // without argv[0], reversed as CLI11's parse(vector) wants
    std::vector<std::string> script_args;
};
SplitArgs split_at_double_dash(int argc, const char* const* argv);

// One parse of one command line: the app, and what it filled.
class CommandLine {
  public:
    // Throws CLI::ParseError: --help and --version (exit code 0) and every bad command line.
    void parse(int argc, const char* const* argv);
    const Invocation& invocation() const { return invocation_; }
    Invocation& invocation() { return invocation_; }
    // After parse(), also one that threw: prints help and version (CLI::App::exit).
    CLI::App& app() { return *app_; }
    // Whether the command line named the command and it parsed.
    bool parsed(std::string_view command) const;
    // Whether --json was given to run or check: also known when the rest of the line was bad.
    bool json_requested() const;

  private:
    const CLI::App* command(std::string_view name) const;

    Invocation invocation_;
    std::unique_ptr<CLI::App> app_;
};

// Parses argv into an Invocation. Throws CLI::ParseError (help, version and errors alike).
Invocation parse_command_line(int argc, const char* const* argv);

}  // namespace pysandbox
