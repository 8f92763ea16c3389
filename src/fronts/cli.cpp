#include "fronts/cli.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "embed/version.hpp"
#include "plan/spelling.hpp"
#include "plan/units.hpp"

namespace pysandbox {
namespace {

// An option whose value is parsed as it is read: `parse` turns the text into the value or throws
// std::invalid_argument, which becomes a ValidationError naming the flag.
template <typename Parse>
CLI::Option* parsed_option(CLI::App& command, const std::string& names, const std::string& flag,
                           Parse parse, const std::string& description) {
    return command.add_option_function<std::string>(
        names,
        [flag, parse](const std::string& text) {
            try {
                parse(text);
            } catch (const std::invalid_argument& e) {
                throw CLI::ValidationError(flag, e.what());
            }
        },
        description);
}

// The same for an option given once per value (--allow, --env, --input): each occurrence is one
// value, never the script name after it.
template <typename Parse>
CLI::Option* repeated_option(CLI::App& command, const std::string& flag, Parse parse,
                             const std::string& description) {
    return command
        .add_option_function<std::vector<std::string>>(
            flag,
            [flag, parse](const std::vector<std::string>& texts) {
                for (const auto& text : texts) {
                    try {
                        parse(text);
                    } catch (const std::invalid_argument& e) {
                        throw CLI::ValidationError(flag, e.what());
                    }
                }
            },
            description)
        ->allow_extra_args(false);
}

void add_incident_log_option(CLI::App& command, std::optional<std::string>& path) {
    command
        .add_option("--incident-log", path,
                    "Append one JSON line to host file PATH when something was blocked "
                    "(overrides policy.incident_log)")
        ->type_name("PATH");
}

void add_cache_dir_option(CLI::App& command, std::optional<std::string>& dir) {
    command
        .add_option("--cache-dir", dir,
                    "The package store (default: $PYSANDBOX_CACHE_DIR, else "
                    "$XDG_CACHE_HOME/pysandbox, /var/cache/pysandbox for root)")
        ->type_name("DIR");
}

// --with-env, and the store it and the profile's python.requirements are found in.
void add_packages_option(CLI::App& command, Overrides& o) {
    command
        .add_option("--with-env", o.packages,
                    "Mount package environment ID (`pysandbox env create` made it; a unique "
                    "prefix will do) read-only, its packages importable ahead of the host's; "
                    "in place of the profile's python.requirements")
        ->type_name("ID");
    add_cache_dir_option(command, o.cache_dir);
}

// --net, checked against the one table of network modes.
CLI::Validator net_mode_validator() {
    std::string names;
    for (const auto& [mode, name] : kNetModes)
        names += (names.empty() ? "" : ",") + std::string(name);
    return CLI::Validator(
        [](std::string& text) -> std::string {
            return net_mode_named(text) ? "" : "\"" + text + "\" is not a network mode";
        },
        "{" + names + "}");
}

// --kernel, for the fronts that can run a sandbox on gVisor (run, check, session, batch), and
// doctor.
void add_kernel_option(CLI::App& command, std::optional<KernelChoice>& kernel,
                       const std::string& help =
                           "Which kernel answers the script's system calls: host, or gvisor "
                           "(gVisor's runsc in between; replaces the profile's sandbox.kernel)") {
    std::string names;
    for (const auto& [value, name] : kKernels)
        names += (names.empty() ? "" : ",") + std::string(name);
    command
        .add_option_function<std::string>(
            "--kernel", [&kernel](const std::string& text) { kernel = kernel_named(text); }, help)
        ->type_name("KERNEL")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                return kernel_named(text) ? "" : "\"" + text + "\" is not a kernel";
            },
            "{" + names + "}"));
}

// --timeout means what the command does at it: `timeout` says so, per command.
void add_limit_options(CLI::App& run, Overrides& o, const std::string& timeout) {
    parsed_option(
        run, "--timeout", "--timeout",
        [&o](const std::string& t) { o.wall_time = parse_limit_duration(t); }, timeout)
        ->type_name("DUR");
    parsed_option(
        run, "--cpu-time", "--cpu-time",
        [&o](const std::string& t) { o.cpu_time = parse_limit_duration(t); },
        "CPU time limit, e.g. 10 (seconds), 1m30s")
        ->type_name("DUR");
    parsed_option(
        run, "--memory", "--memory",
        [&o](const std::string& t) { o.memory = parse_limit_size(t, kMinMemory); },
        "Memory limit, e.g. 256MiB, 64mb, 1G (units are powers of 1024)")
        ->type_name("SIZE");
    run.add_option_function<std::int64_t>(
           "--max-procs", [&o](std::int64_t n) { o.max_procs = static_cast<std::uint64_t>(n); },
           "Processes and threads, together")
        ->type_name("N")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}));
    run.add_option_function<std::int64_t>(
           "--cpus", [&o](std::int64_t n) { o.cpus = static_cast<std::uint64_t>(n); },
           "CPUs to run on; also sizes numeric thread pools")
        ->type_name("N")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
    parsed_option(
        run, "--tmp-size", "--tmp-size",
        [&o](const std::string& t) { o.tmp_size = parse_limit_size(t, kMinTmpSize); },
        "Size of the writable /tmp")
        ->type_name("SIZE");
    parsed_option(
        run, "--output-limit", "--output-limit",
        [&o](const std::string& t) { o.output_limit = parse_limit_size(t); },
        "Bytes of stdout+stderr kept")
        ->type_name("SIZE");
}

void add_network_options(CLI::App& run, Overrides& o) {
    run.add_option_function<std::string>(
           "--net", [&o](const std::string& text) { o.net = net_mode_named(text); },
           "Network: none, loopback (lo inside only) or proxy (HTTP/CONNECT proxy to the allowed "
           "HOST:PORTs only)")
        ->type_name("MODE")
        ->check(net_mode_validator());
    repeated_option(
        run, "--allow",
        [&o](const std::string& text) {
            try {
                o.allow.push_back(proxy::parse_allow_rule(text));
            } catch (const std::invalid_argument& e) {
                throw std::invalid_argument("\"" + text + "\": " + e.what());
            }
        },
        "Let the proxy reach HOST:PORT (*.DOMAIN:PORT for subdomains, [IPV6]:PORT); "
        "repeatable, added to the profile's network.allow; implies --net proxy")
        ->type_name("HOST:PORT");
}

void add_session_limit_options(CLI::App& session, Overrides& o) {
    parsed_option(
        session, "--idle-timeout", "--idle-timeout",
        [&o](const std::string& t) { o.idle_timeout = parse_limit_duration(t); },
        "End the session when no request came for DUR (limits.idle_timeout)")
        ->type_name("DUR");
    parsed_option(
        session, "--lifetime", "--lifetime",
        [&o](const std::string& t) { o.lifetime = parse_limit_duration(t); },
        "End the session DUR after it started (limits.lifetime)")
        ->type_name("DUR");
}

// --env and --input: what goes into the sandbox.
void add_input_options(CLI::App& run, Overrides& o) {
    repeated_option(
        run, "--env",
        [&o](const std::string& text) {
            check_env_spec(text);
            o.env.push_back(text);
        },
        "Set NAME=VALUE inside, or pass NAME from the host")
        ->type_name("NAME[=VALUE]");
    repeated_option(
        run, "--input",
        [&o](const std::string& text) { o.inputs.push_back(parse_input_spec(text)); },
        "Make host FILE readable as /tmp/work/NAME (default: its basename); "
        "repeatable")
        ->type_name("FILE[=NAME]");
    add_packages_option(run, o);
}

void add_file_options(CLI::App& run, Overrides& o) {
    add_input_options(run, o);
    CLI::Option* output_dir =
        run.add_option("--output-dir", o.output_dir,
                       "Copy the run's artifacts (new or modified files under /tmp/work) into host "
                       "DIR, which must be empty or absent (it is then made)")
            ->type_name("DIR");
    run.add_option_function<std::string>(
           "--output-runs",
           [&o](const std::string& dir) {
               o.output_dir = dir;
               o.output_runs = true;
           },
           "Reuse host DIR across runs: each run's artifacts go into a new DIR/run-N (N one "
           "more than the highest there), never into anything that exists")
        ->type_name("DIR")
        ->excludes(output_dir);
    run.add_option("--workdir", o.workdir,
                   "Show the host DIR as /tmp/work and write the script's changes back to it after "
                   "the run, as plain files; it must be writable by the uid the script runs as "
                   "(65534 when root runs pysandbox)")
        ->type_name("DIR");
    add_incident_log_option(run, o.incident_log);
}

void check_allow_needs_proxy(const Overrides& o) {
    if (!o.allow.empty() && o.net && *o.net != NetMode::proxy)
        throw CLI::ValidationError("--allow",
                                   "needs --net proxy (the allowlist is the proxy's), not --net " +
                                       std::string(to_string(*o.net)));
}

// run --with, --requirements, and where pip finds them: an environment built (or found in the
// store) for this run, as `uv run --with` does; the script's inline metadata joins them.
void add_run_package_options(CLI::App& run, EnvInvocation& p) {
    run.add_option("--with", p.specs,
                   "Install PKG (a requirement, as pip takes it) for this run, with the script's "
                   "inline metadata (PEP 723), into an environment made once and reused "
                   "(repeatable)")
        ->type_name("PKG")
        ->allow_extra_args(false);
    run.add_option("--requirements", p.requirement_files,
                   "Install the requirements FILE for this run, as --with does (repeatable)")
        ->type_name("FILE")
        ->allow_extra_args(false);
    run.add_option("--find-links", p.find_links,
                   "Where --with, --requirements and inline metadata install from: a local "
                   "wheelhouse DIR; without --index-url, no index (repeatable)")
        ->type_name("DIR")
        ->allow_extra_args(false);
    run.add_option("--index-url", p.index_url,
                   "Where they install from: a package index (PEP 503/691), the only destination "
                   "of the install (default: https://pypi.org/simple)")
        ->type_name("URL");
}

// After the run command's options: the program, and the combinations no single flag can check.
void finish_run(RunInvocation& run) {
    Program& program = run.request.program;
    if (run.code) {
        if (!run.script.empty())
            throw CLI::ValidationError("-c", "cannot be combined with SCRIPT (\"" + run.script +
                                                 "\"); put script arguments after --");
        program.kind = Program::Kind::code;
        program.text = *run.code;
    } else if (run.script == "-") {
        program.kind = Program::Kind::stdin_program;
    } else if (!run.script.empty()) {
        program.kind = Program::Kind::script_file;
        program.text = run.script;
    } else {
        throw CLI::ValidationError("run", "a SCRIPT, -c CODE or - (program on stdin) is required");
    }
    check_allow_needs_proxy(run.request.overrides);
    const EnvInvocation& packages = run.packages;
    if (run.request.overrides.packages &&
        (!packages.specs.empty() || !packages.requirement_files.empty()))
        throw CLI::ValidationError("--with-env",
                                   "cannot be combined with --with or --requirements (a run "
                                   "mounts one environment; `pysandbox env create` makes one of "
                                   "everything)");
}

void add_run_command(CLI::App& app, Invocation& out) {
    CLI::App* run = app.add_subcommand("run", "Run a Python script inside the sandbox");
    RunInvocation& r = out.run;
    run->add_option("-p,--profile", r.profile, "Profile name, or a path containing '/'")
        ->type_name("PROFILE");
    add_limit_options(*run, r.request.overrides,
                      "Wall-clock limit, e.g. 5 (seconds), 0.5, 250ms, 1m30s (exit 124)");
    add_network_options(*run, r.request.overrides);
    add_kernel_option(*run, r.request.overrides.kernel);
    add_file_options(*run, r.request.overrides);
    add_run_package_options(*run, r.packages);
    run->add_option("-c", r.code, "Run CODE instead of a script file")->type_name("CODE");
    run->add_flag("--json", r.request.capture_output,
                  "Print one JSON result (schema pysandbox.result/v1) with the output inside");
    run->add_flag("--fail-on-truncation", r.fail_on_truncation,
                  "Exit 1 instead of 0 when the output limit cut stdout or stderr (so that "
                  "a make recipe writing stdout to a file fails rather than keep a cut file)");
    run->add_flag("-v,--verbose", r.request.verbose, "Say what the sandbox does, step by step");
    run->add_flag("--trace-syscalls", r.request.trace_syscalls,
                  "List the system calls the script made and what the profile does with each "
                  "(slower: every call is checked by pysandbox)");
    run->add_option("script", r.script, "The script; '-' reads the program from stdin")
        ->type_name("SCRIPT");
    run->callback([&out] {
        out.command = Command::run;
        finish_run(out.run);
    });
    run->footer("Arguments after -- are passed to the script as sys.argv[1:].");
}

void add_check_command(CLI::App& app, Invocation& out) {
    CLI::App* check = app.add_subcommand(
        "check", "Report the script's denied imports and calls (Python's ast, run in the sandbox)");
    CheckInvocation& c = out.check;
    check->add_option("-p,--profile", c.profile, "Profile whose [policy] applies")
        ->type_name("PROFILE");
    check->add_flag("--json", c.json, "Print one JSON object (schema pysandbox.check/v1)");
    add_kernel_option(*check, c.kernel);
    add_incident_log_option(*check, c.incident_log);
    check->add_option("script", c.script, "The script to analyse")->required()->type_name("SCRIPT");
    check->callback([&out] { out.command = Command::check; });
    check->footer("Exit status: 0 clean, 1 findings (a syntax error is one), 125 error.");
}

void add_session_command(CLI::App& app, Invocation& out) {
    CLI::App* session = app.add_subcommand(
        "session",
        "Keep one sandboxed interpreter across cells: NDJSON requests on stdin, one result line "
        "each on stdout; a small REPL when stdin is a terminal");
    SessionInvocation& s = out.session;
    session->add_option("-p,--profile", s.profile, "Profile name, or a path containing '/'")
        ->type_name("PROFILE");
    add_limit_options(*session, s.overrides,
                      "Longest a cell may run, and its default, e.g. 5 (seconds), 1m30s; a cell "
                      "past it is interrupted and has status timeout (see SESSIONS)");
    add_session_limit_options(*session, s.overrides);
    add_network_options(*session, s.overrides);
    add_kernel_option(*session, s.overrides.kernel);
    add_input_options(*session, s.overrides);
    session
        ->add_option("--output-dir", s.overrides.output_dir,
                     "Copy what each cell changed under /tmp/work into host DIR/cell-N; DIR must "
                     "be empty or absent (it is then made)")
        ->type_name("DIR");
    add_incident_log_option(*session, s.overrides.incident_log);
    session
        ->add_option("--pool", s.pool,
                     "Keep N more sandboxes started, so that the cell after a lost state runs "
                     "in a warm one (0: it starts a new one)")
        ->type_name("N")
        ->check(CLI::Range(std::size_t{0}, std::size_t{16}));
    session->add_flag("--ndjson", s.ndjson, "Speak NDJSON even when stdin is a terminal");
    session->add_flag("-v,--verbose", s.verbose, "Say what the sandbox does, step by step");
    session->callback([&out] {
        out.command = Command::session;
        check_allow_needs_proxy(out.session.overrides);
    });
    session->footer(
        "Request: {\"id\": any, \"code\": \"...\", \"timeout\": \"2s\", \"files\": "
        "[{\"name\", \"text\"|\"base64\"}]}; --timeout is the longest a cell may run. "
        "See SESSIONS in pysandbox(1).");
}

// A count of at least 1 and at most 1024.
void add_count_option(CLI::App& command, const std::string& name, std::size_t& count,
                      const std::string& description) {
    command.add_option(name, count, description)
        ->type_name("N")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
}

void add_mcp_command(CLI::App& app, Invocation& out) {
    CLI::App* mcp = app.add_subcommand(
        "mcp",
        "Serve the Model Context Protocol on stdio (or Streamable HTTP: --http): tools "
        "run_python, start_session and end_session, each call in its own sandbox or session, "
        "from warm sandboxes");
    McpInvocation& m = out.mcp;
    mcp->add_option("-p,--profile", m.profiles,
                    "A profile clients may choose (repeatable; the first is the default; "
                    "default: default). Clients get no other")
        ->type_name("PROFILE");
    mcp->add_option("--pool", m.pool,
                    "Sandboxes kept started ahead of need, per profile; each serves one call or "
                    "session, then a new one starts (0: none)")
        ->type_name("N")
        ->check(CLI::Range(std::size_t{0}, std::size_t{64}));
    add_count_option(*mcp, "--max-sessions", m.max_sessions, "Sessions alive at once");
    add_count_option(*mcp, "--max-calls", m.max_calls,
                     "Calls running at once; more wait their turn (default: one per CPU)");
    mcp->add_option("--http", m.http,
                    "Serve Streamable HTTP at http://[ADDR:]PORT/mcp instead of stdio (ADDR: "
                    "127.0.0.1 unless given; PORT 0: a free one, said on stderr)")
        ->type_name("[ADDR:]PORT");
    mcp->add_option("--http-token-file", m.http_token_file,
                    "HTTP clients must send this file's first line as \"Authorization: Bearer "
                    "TOKEN\" (else $PYSANDBOX_MCP_TOKEN's); required beyond loopback")
        ->type_name("FILE");
    mcp->add_option("--http-allow-origin", m.http_allow_origins,
                    "A browser Origin let in besides this host's loopback at the server's port "
                    "(repeatable); any other gets 403")
        ->type_name("ORIGIN");
    add_count_option(*mcp, "--http-max-clients", m.http_max_clients,
                     "HTTP client sessions (Mcp-Session-Id) at once; more get 503");
    add_count_option(*mcp, "--http-max-client-requests", m.http_max_client_requests,
                     "Requests one HTTP client may have in flight (more get 429); also the "
                     "most messages in one JSON-RPC batch, on stdio as well");
    add_count_option(*mcp, "--max-client-sessions", m.max_client_sessions,
                     "Sessions one HTTP client may keep alive at once (within --max-sessions)");
    add_limit_options(*mcp, m.overrides,
                      "Longest a call may run, and its default, e.g. 30 (seconds), 2m; a call "
                      "past it has status timeout");
    add_session_limit_options(*mcp, m.overrides);
    add_network_options(*mcp, m.overrides);
    add_input_options(*mcp, m.overrides);
    mcp->add_option("--output-dir", m.overrides.output_dir,
                    "Keep the files each call made in host DIR (linked from results); DIR must "
                    "be empty or absent. Default: a private directory removed at exit")
        ->type_name("DIR");
    add_incident_log_option(*mcp, m.overrides.incident_log);
    mcp->add_flag("-v,--verbose", m.verbose, "Say on stderr what the server does");
    mcp->callback([&out] {
        out.command = Command::mcp;
        check_allow_needs_proxy(out.mcp.overrides);
        if (out.mcp.profiles.empty()) out.mcp.profiles.push_back("default");
    });
    mcp->footer(
        "Configure an MCP client with command \"pysandbox\" and args [\"mcp\"]. "
        "See MCP SERVER in pysandbox(1).");
}

void add_kernel_command(CLI::App& app, Invocation& out) {
    CLI::App* kernel = app.add_subcommand(
        "kernel",
        "Serve a Jupyter kernel (messaging protocol 5.3, ZeroMQ) whose cells run in one "
        "sandboxed session; `kernel install` writes its kernelspec");
    KernelInvocation& k = out.kernel;
    kernel
        ->add_option("-f,--connection-file", k.connection_file,
                     "The connection file the Jupyter client wrote (ports, key, scheme)")
        ->type_name("FILE");
    kernel->add_option("-p,--profile", k.profile, "Profile name, or a path containing '/'")
        ->type_name("PROFILE");
    add_limit_options(*kernel, k.overrides,
                      "Longest a cell may run, e.g. 5 (seconds), 1m30s; a cell past it is "
                      "interrupted and ends in an error naming the limit");
    add_network_options(*kernel, k.overrides);
    add_input_options(*kernel, k.overrides);
    add_incident_log_option(*kernel, k.overrides.incident_log);
    kernel->add_flag("-v,--verbose", k.verbose, "Say what the kernel and the sandbox do");
    kernel->callback([&out] {
        if (out.command == Command::kernel_install) return;
        out.command = Command::kernel;
        check_allow_needs_proxy(out.kernel.overrides);
        if (out.kernel.connection_file.empty())
            throw CLI::ValidationError("--connection-file",
                                       "pysandbox kernel needs -f CONNECTION_FILE (Jupyter "
                                       "passes it: install the kernelspec with `pysandbox "
                                       "kernel install`)");
    });
    CLI::App* install = kernel->add_subcommand(
        "install", "Write a kernelspec whose argv runs `pysandbox kernel` with this profile");
    install->add_flag("--user", k.user, "Into the user's Jupyter data dir (the default)");
    install->add_flag("--sys-prefix", k.sys_prefix, "Into sys.prefix's share/jupyter (python3's)");
    install->add_option("--prefix", k.prefix, "Into DIR/share/jupyter/kernels")->type_name("DIR");
    install->add_option("--name", k.name, "The kernelspec's name (letters, digits, . _ -)")
        ->type_name("NAME");
    install->add_option("-p,--profile", k.profile, "The profile the kernel runs its cells in")
        ->type_name("PROFILE");
    install->callback([&out] { out.command = Command::kernel_install; });
    kernel->footer(
        "Jupyter starts it through the kernelspec: pysandbox kernel install --user, then pick "
        "\"Python (sandboxed)\". See JUPYTER in pysandbox(1).");
}

void add_batch_command(CLI::App& app, Invocation& out) {
    CLI::App* batch = app.add_subcommand(
        "batch",
        "Run many jobs (JSON lines: code or script, args, stdin, timeout, profile, inputs), N "
        "at a time, each in a sandbox of its own; one result line per job on stdout");
    BatchInvocation& b = out.batch;
    batch
        ->add_option("-p,--profile", b.profiles,
                     "A profile jobs may name (repeatable; the first is the default; default: "
                     "default)")
        ->type_name("PROFILE");
    batch->add_option("-j,--jobs", b.jobs, "Jobs at once (default: one per CPU)")
        ->type_name("N")
        ->check(CLI::Range(std::size_t{1}, std::size_t{256}));
    batch->add_flag("--keep-order", b.keep_order,
                    "Write the results in the input's order (default: as jobs finish)");
    batch->add_flag("--no-preload", b.overrides.no_preload,
                    "Start each sandbox without the profile's python.preload modules: faster "
                    "when jobs do not all use them (each sandbox runs one job)");
    batch->add_flag("--fork", b.fork,
                    "Fork each job's sandbox from a warm one that has imported the profile's "
                    "preload: many times faster; up to 256 jobs share its memory layout, and a "
                    "job has no cgroup of its own (see BATCH in pysandbox(1))");
    add_limit_options(*batch, b.overrides,
                      "Longest a job may run, and its default, e.g. 5 (seconds), 1m30s; a job "
                      "past it has status timeout");
    add_network_options(*batch, b.overrides);
    add_kernel_option(*batch, b.overrides.kernel);
    repeated_option(
        *batch, "--env",
        [&b](const std::string& text) {
            check_env_spec(text);
            b.overrides.env.push_back(text);
        },
        "Set NAME=VALUE inside, or pass NAME from the host")
        ->type_name("NAME[=VALUE]");
    add_packages_option(*batch, b.overrides);
    batch
        ->add_option("--output-dir", b.overrides.output_dir,
                     "Copy the files each job made into host DIR/job-N (N: the job's line); DIR "
                     "must be empty or absent")
        ->type_name("DIR");
    add_incident_log_option(*batch, b.overrides.incident_log);
    batch->add_flag("--fail-on-error", b.fail_on_error,
                    "Exit 1 when any job's status is not ok (default: 0 when every job ran)");
    batch
        ->add_option("--junit", b.junit,
                     "Write a JUnit XML report to FILE, one testcase a job (replaced at the end, "
                     "never followed if a symlink)")
        ->type_name("FILE");
    batch->add_flag("-q,--quiet", b.quiet,
                    "No progress line and no summary on stderr (the results are still written)");
    batch->add_flag("-v,--verbose", b.verbose, "Say on stderr what the batch does");
    batch->add_option("jobs", b.jobs_file, "The jobs, one JSON object a line ('-': stdin)")
        ->required()
        ->type_name("JOBS.jsonl");
    batch->callback([&out] {
        out.command = Command::batch;
        check_allow_needs_proxy(out.batch.overrides);
        if (out.batch.profiles.empty()) out.batch.profiles.push_back("default");
    });
    batch->footer(
        "Exit status: 0 when every job ran (whatever its status; with --fail-on-error, 1 when "
        "a job's status is not ok), 123 when the profile's python.requirements could not be "
        "installed, 125 when a sandbox could not be set up, 128+N after signal N. See BATCH in "
        "pysandbox(1).");
}

void add_profile_command(CLI::App& app, Invocation& out) {
    CLI::App* profile = app.add_subcommand("profile", "List or show profiles");
    profile->require_subcommand(1);
    CLI::App* list = profile->add_subcommand("list", "List the profiles that can be named");
    list->callback([&out] { out.command = Command::profile_list; });
    CLI::App* show = profile->add_subcommand("show", "Print a profile, fully resolved, as TOML");
    show->add_option("name", out.profile_name, "Profile name or path")
        ->required()
        ->type_name("PROFILE");
    show->callback([&out] { out.command = Command::profile_show; });
}

void add_doctor_command(CLI::App& app, Invocation& out) {
    CLI::App* doctor = app.add_subcommand(
        "doctor", "Check what this host allows, and how to fix what it does not");
    doctor->add_flag("--json", out.doctor_json,
                     "Print one JSON object: each check, its result and fix, and whether all "
                     "required ones passed");
    add_kernel_option(*doctor, out.doctor_kernel,
                      "The kernel runs will use: with gvisor, gVisor (runsc) is a required check, "
                      "not an optional one");
    doctor->callback([&out] { out.command = Command::doctor; });
}

void add_env_create_command(CLI::App& env, Invocation& out) {
    EnvInvocation& e = out.env;
    CLI::App* create = env.add_subcommand(
        "create", "Install packages with pip inside a sandbox into a new read-only environment");
    create->add_option("packages", e.specs, "Requirement specifiers, as pip takes them")
        ->type_name("PKG");
    create
        ->add_option("-r,--requirement", e.requirement_files,
                     "Install from the requirements FILE (repeatable)")
        ->type_name("FILE")
        ->allow_extra_args(false);
    create
        ->add_option("--script", e.script,
                     "Install the dependencies of SCRIPT's inline metadata (PEP 723: "
                     "# /// script ... dependencies = [...])")
        ->type_name("SCRIPT");
    create
        ->add_option("--find-links", e.find_links,
                     "A local wheelhouse DIR, copied in read-only; without --index-url no index "
                     "is used and the install has no network (repeatable)")
        ->type_name("DIR")
        ->allow_extra_args(false);
    create
        ->add_option("--index-url", e.index_url,
                     "A package index (PEP 503/691); its HOST:PORT is the only destination the "
                     "install's proxy allows (default: https://pypi.org/simple)")
        ->type_name("URL");
    create->add_flag("--allow-build", e.allow_build,
                     "Let pip build sdists (inside the sandbox too); default: wheels only");
    parsed_option(
        *create, "--timeout", "--timeout",
        [&e](const std::string& t) { e.timeout = parse_limit_duration(t); },
        "Wall-clock limit of the install (default 5m)")
        ->type_name("DUR");
    parsed_option(
        *create, "--max-size", "--max-size",
        [&e](const std::string& t) { e.max_size = parse_limit_size(t, 1 << 20); },
        "Most the install may write (default 1GiB)")
        ->type_name("SIZE");
    create->add_flag("--json", e.json, "Print the environment as one JSON object");
    create->add_flag("-v,--verbose", e.verbose, "Say what the install does, and pip's output");
    add_cache_dir_option(*create, e.cache_dir);
    create->callback([&out] {
        if (out.env.specs.empty() && out.env.requirement_files.empty() && out.env.script.empty())
            throw CLI::ValidationError("env create",
                                       "nothing to install: give PKG..., -r FILE or --script "
                                       "SCRIPT");
        out.command = Command::env_create;
    });
    create->footer(
        "Prints the environment's ID; `pysandbox run --with-env ID` uses it. Exit "
        "status: 0, 123 when pip failed (install_error), 125 when the sandbox could "
        "not be set up.");
}

void add_env_command(CLI::App& app, Invocation& out) {
    CLI::App* env = app.add_subcommand("env", "Create, list, show and remove package environments");
    env->require_subcommand(1);
    add_env_create_command(*env, out);
    EnvInvocation& e = out.env;
    CLI::App* list = env->add_subcommand("list", "List the package environments");
    list->add_flag("--json", e.json, "Print one JSON object per line");
    add_cache_dir_option(*list, e.cache_dir);
    list->callback([&out] { out.command = Command::env_list; });
    CLI::App* show = env->add_subcommand(
        "show", "Show what an environment holds, its size and what it was made from");
    show->add_option("id", e.ids, "Environment ID (or a unique prefix)")
        ->required()
        ->expected(1)
        ->type_name("ID");
    show->add_flag("--json", e.json, "Print the environment as one JSON object");
    show->add_flag("--verify", e.verify,
                   "Hash every file again and check the environment is what its ID says (exit "
                   "1 when not)");
    add_cache_dir_option(*show, e.cache_dir);
    show->callback([&out] { out.command = Command::env_show; });
    CLI::App* rm = env->add_subcommand("rm", "Remove environments");
    rm->add_option("ids", e.ids, "Environment IDs (or unique prefixes)")
        ->required()
        ->type_name("ID");
    add_cache_dir_option(*rm, e.cache_dir);
    rm->callback([&out] { out.command = Command::env_rm; });
    CLI::App* prune = env->add_subcommand(
        "prune", "Remove environments older than DUR, or the oldest beyond a total size");
    parsed_option(
        *prune, "--older-than", "--older-than",
        [&e](const std::string& t) { e.older_than = parse_limit_duration(t); },
        "Remove environments created more than DUR ago (e.g. 168h)")
        ->type_name("DUR");
    parsed_option(
        *prune, "--max-size", "--max-size",
        [&e](const std::string& t) { e.keep_size = parse_limit_size(t); },
        "Remove the oldest environments until all together take at most SIZE")
        ->type_name("SIZE");
    add_cache_dir_option(*prune, e.cache_dir);
    prune->callback([&out] {
        if (!out.env.older_than && !out.env.keep_size)
            throw CLI::ValidationError("env prune", "give --older-than DUR or --max-size SIZE");
        out.command = Command::env_prune;
    });
}

struct CommandSpec {
    std::string_view name;
    void (*add)(CLI::App&, Invocation&);
};

// In the order --help lists them.
constexpr CommandSpec kCommands[] = {
    {"run", add_run_command},         {"check", add_check_command},
    {"session", add_session_command}, {"mcp", add_mcp_command},
    {"batch", add_batch_command},     {"kernel", add_kernel_command},
    {"profile", add_profile_command}, {"doctor", add_doctor_command},
    {"env", add_env_command},
};

bool is_command(std::string_view name) {
    return std::ranges::any_of(kCommands, [name](const CommandSpec& c) { return c.name == name; });
}

// Throws CLI::ParseError naming the word when the first one is not a command.
void check_command_name(const SplitArgs& split) {
    if (split.head.empty() || split.head.back().starts_with('-')) return;
    const std::string& name = split.head.back();
    if (is_command(name)) return;
    std::vector<std::string> names;
    std::string known;
    for (const CommandSpec& command : kCommands) {
        names.emplace_back(command.name);
        known += (known.empty() ? "" : ", ") + std::string(command.name);
    }
    if (const std::optional<std::string> near = spelling::nearest(name, names))
        throw CLI::ValidationError("unknown command " + name + "; did you mean " + *near + "?");
    throw CLI::ValidationError("unknown command " + name + " (commands: " + known + ")");
}

// The command whose options a word was given among: the deepest one the line named.
const CLI::App& innermost_command(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands())
        if (sub->count() > 0) return innermost_command(*sub);
    return app;
}

std::vector<std::string> option_names(const CLI::App& command) {
    std::vector<std::string> names;
    for (const CLI::Option* option : command.get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
        for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    }
    return names;
}

// `profile shwo`: a word where a command of `command` was due.
void explain_unknown_subcommand(const CLI::App& app, const CLI::App& command) {
    std::vector<std::string> names;
    for (const CLI::App* sub : command.get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    const std::vector<std::string> left = app.remaining(true);
    if (names.empty() || left.empty() || left.front().starts_with('-')) return;
    throw CLI::ValidationError("unknown command " + command.get_name() + " " + left.front() +
                               spelling::did_you_mean(left.front(), names));
}

// CLI11 lists every word it could not place, the script after a misspelt option among them; the
// error names only the option, and the one it most likely meant.
void explain_extras(const CLI::App& app) {
    const CLI::App& command = innermost_command(app);
    explain_unknown_subcommand(app, command);
    for (const std::string& word : app.remaining(true)) {
        if (!word.starts_with('-') || word == "-") continue;
        const std::string option = word.substr(0, word.find('='));
        throw CLI::ValidationError("unknown option " + option +
                                   spelling::did_you_mean(option, option_names(command)));
    }
}

// `pysandbox --timout 1 run examples/hello.py`: an option before the command, where only --help and
// --version belong. The error names the option, the one it likely meant, and where it goes.
void check_options_before_command(const CLI::App& app, const SplitArgs& split) {
    const std::vector<std::string> own = option_names(app);
    std::string option;
    const CLI::App* command = nullptr;
    const std::vector<const CLI::App*> commands =
        app.get_subcommands([](const CLI::App*) { return true; });
    for (std::size_t i = split.head.size(); i-- > 0;) {  // first word to last (head is reversed)
        const std::string& word = split.head[i];
        if (is_command(word)) {
            for (const CLI::App* sub : commands)
                if (sub->get_name() == word) command = sub;
            break;
        }
        const std::string name = word.substr(0, word.find('='));
        if (option.empty() && word.starts_with('-') && word != "-" &&
            std::ranges::find(own, name) == own.end())
            option = name;
    }
    if (option.empty()) return;
    std::vector<std::string> names = own;
    for (const CLI::App* sub : commands)
        if (command == nullptr || sub == command)
            for (std::string& name : option_names(*sub)) names.push_back(std::move(name));
    std::sort(names.begin(), names.end());  // several commands share an option: one name
    names.erase(std::unique(names.begin(), names.end()), names.end());
    if (command == nullptr)
        throw CLI::ValidationError(
            "unknown option " + option + spelling::did_you_mean(option, names) +
            " (a command's options go after it: pysandbox COMMAND " + "[OPTIONS])");
    const std::string& name = command->get_name();
    if (std::ranges::find(names, option) != names.end())
        throw CLI::ValidationError(option + " is an option of " + name +
                                   ": put it after the command (pysandbox " + name + " " + option +
                                   " ...)");
    const std::optional<std::string> near = spelling::nearest(option, names);
    throw CLI::ValidationError(
        "unknown option " + option +
        (near ? "; did you mean " + *near +
                    "? (after the command: "
                    "pysandbox " +
                    name + " " + *near + " ...)"
              : " (a command's options go after it: pysandbox " + name + " [OPTIONS])"));
}

}  // namespace

std::unique_ptr<CLI::App> build_cli(Invocation& out, std::string_view only) {
    auto app = std::make_unique<CLI::App>("Run untrusted Python in a locked-down Linux sandbox",
                                          "pysandbox");
    app->set_version_flag("--version", std::string("pysandbox ") + kVersion);
    app->require_subcommand(1);
    for (const CommandSpec& command : kCommands)
        if (only.empty() || command.name == only) command.add(*app, out);
    return app;
}

SplitArgs split_at_double_dash(int argc, const char* const* argv) {
    SplitArgs split;
    int i = 1;
    for (; i < argc && std::string_view(argv[i]) != "--"; ++i) split.head.emplace_back(argv[i]);
    for (++i; i < argc; ++i) split.script_args.emplace_back(argv[i]);
    std::reverse(split.head.begin(), split.head.end());
    return split;
}

// A line that starts with a command's name needs only that command: the others' options are
// not built (a quarter of a millisecond of every run's start). Anything else (--help, --version,
// nothing at all) gets all of them, so help lists every command; nothing at all is a call for it.
void CommandLine::parse(int argc, const char* const* argv) {
    SplitArgs split = split_at_double_dash(argc, argv);
    const bool named = !split.head.empty() && is_command(split.head.back());
    app_ = build_cli(invocation_, named ? std::string_view(split.head.back()) : "");
    if (split.head.empty() && split.script_args.empty()) throw CLI::CallForHelp();
    check_command_name(split);
    check_options_before_command(*app_, split);
    try {
        app_->parse(split.head);
    } catch (const CLI::ExtrasError&) {
        explain_extras(*app_);
        throw;
    } catch (const CLI::RequiredError&) {
        explain_unknown_subcommand(*app_, innermost_command(*app_));
        throw;
    }
    invocation_.run.request.program.args = std::move(split.script_args);
}

const CLI::App* CommandLine::command(std::string_view name) const {
    if (!app_) return nullptr;
    for (const CLI::App* sub : app_->get_subcommands([](CLI::App*) { return true; }))
        if (sub->get_name() == name) return sub;
    return nullptr;
}

bool CommandLine::parsed(std::string_view name) const {
    const CLI::App* found = command(name);
    return found != nullptr && found->parsed();
}

bool CommandLine::json_requested() const {
    for (const char* name : {"run", "check"})
        if (const CLI::App* found = command(name);
            found != nullptr && found->parsed() && found->get_option("--json")->count() > 0)
            return true;
    return false;
}

Invocation parse_command_line(int argc, const char* const* argv) {
    CommandLine command_line;
    command_line.parse(argc, argv);
    return command_line.invocation();
}

}  // namespace pysandbox
