#pragma once
// What a front door asks the core for, in the core's own terms: the program to run and the
// overrides on top of the profile. The command line, a session request, an MCP call and a batch
// line all fill this same Request; the plan (plan.hpp) never knows which front it came from.
//
// Values arrive here already parsed and checked (units, ranges, names); what is still unchecked is
// what only the host can say (does the file exist, is the directory writable): the plan does that.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/profile.hpp"
#include "proxy/allowlist.hpp"

namespace pysandbox {

// A host file made readable inside as /tmp/work/NAME.
struct InputSpec {
    std::string source;  // host path, as given
    std::string name;    // one plain path component
};

// Settings that replace the profile's for one run. Empty: the profile's value stands.
struct Overrides {
    std::optional<std::chrono::milliseconds> wall_time;
    std::optional<std::chrono::milliseconds> cpu_time;
    std::optional<std::uint64_t> memory;
    std::optional<std::uint64_t> tmp_size;
    std::optional<std::uint64_t> output_limit;
    std::optional<std::uint64_t> max_procs;
    std::optional<std::uint64_t> cpus;
    std::optional<NetMode> net;
    std::optional<KernelChoice> kernel;   // --kernel: replaces sandbox.kernel
    std::vector<proxy::AllowRule> allow;  // added to network.allow; the mode becomes "proxy"
    std::vector<std::string> env;         // "NAME=VALUE" sets NAME, "NAME" passes the host's
    std::vector<InputSpec> inputs;
    std::optional<std::string> workdir;  // host directory seen as /tmp/work
    // The workdir stays the caller's: it need not be writable by the uid the script runs as, and
    // what the run wrote comes back owned by the caller. The script then writes only new entries
    // at the top of /tmp/work (the overlay's upper layer: a directory from the host below stays
    // read-only to it). `env create` builds so, as root, without a host directory 65534 could
    // write (fronts/env.cpp).
    bool workdir_stays_callers = false;
    std::optional<std::string> output_dir;  // host directory the artifacts are copied to
    bool output_runs = false;  // --output-runs: output_dir is reused, each run in a new run-N
    std::optional<std::string> incident_log;                // replaces policy.incident_log
    std::optional<std::chrono::milliseconds> idle_timeout;  // a session's
    std::optional<std::chrono::milliseconds> lifetime;      // a session's
    bool no_preload = false;  // the driver starts without the profile's [python] preload
    // A package environment (env_store.hpp) mounted read-only at kPackagesDir: its ID or a prefix,
    // and the store it is in (none: env_store::store_dir's default).
    std::optional<std::string> packages;
    std::optional<std::string> cache_dir;
};

// The program the interpreter runs.
struct Program {
    enum class Kind {
        script_file,    // `text` is a host path; the file is read now and placed at /sandbox/NAME
        code,           // `text` is the code (python -c)
        stdin_program,  // the program is read from pysandbox's own stdin (python -)
        check,          // `pysandbox check`: the analyzer reads the script at host path `text`
        driver,  // the cell driver (sessions, the server, batch): code arrives later, over the
                 // control channel; `text` and `args` are unused
        zygote,  // a fork server (`batch --fork`, zygote.hpp): imports the preload once, then
                 // forks one sandbox per job inside its own; `text` is the plan of those
                 // (job_spec.hpp), `args` is unused
    };
    Kind kind = Kind::code;
    std::string text;
    std::vector<std::string> args;  // sys.argv[1:]
};

struct Request {
    Program program;
    Overrides overrides;
    bool capture_output = false;  // the output goes into the result instead of through
    // The caller's stdin reaches the script (code, script_file). False: it reads end of file at
    // once, and pysandbox reads nothing of the caller's: an install's pip, whose caller's stdin
    // is owed to the script or the cells that come after it.
    bool pass_stdin = true;
    bool trace_syscalls = false;  // record every system call and what the profile does with it
    // The sandboxes are forked by a zygote (zygote.hpp), not cloned: they have no cgroup of
    // their own yet, so the rlimits bound them.
    bool forked = false;
    int verbose = 0;
};

// A name that can stand alone in a directory: not empty, not "." or "..", no '/' and no NUL.
bool is_plain_name(std::string_view name);

// "FILE" or "FILE=NAME" (NAME defaults to FILE's last component). Throws std::invalid_argument.
InputSpec parse_input_spec(std::string_view spec);

// "NAME=VALUE" or "NAME": the name must be non-empty without white space or '='. Throws
// std::invalid_argument.
void check_env_spec(std::string_view spec);

}  // namespace pysandbox
