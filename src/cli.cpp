#include "cli.hpp"

#include <algorithm>

#include "version.hpp"

namespace pysandbox {
namespace {

void add_incident_log_option(CLI::App& command, std::optional<std::string>& path) {
    command
        .add_option("--incident-log", path,
                    "Append one JSON line to host file PATH when something was blocked "
                    "(overrides policy.incident_log)")
        ->type_name("PATH");
}

void add_run_command(CLI::App& app, Invocation& out) {
    CLI::App* run = app.add_subcommand("run", "Run a Python script inside the sandbox");
    RunOptions& o = out.run;
    run->add_option("-p,--profile", o.profile, "Profile name, or a path containing '/'")
        ->type_name("PROFILE");
    run->add_option("--timeout", o.timeout, "Wall-clock limit, e.g. 5s, 250ms, 2m (exit 124)")
        ->type_name("DUR");
    run->add_option("--cpu-time", o.cpu_time, "CPU time limit, e.g. 10s")->type_name("DUR");
    run->add_option("--memory", o.memory, "Memory limit, e.g. 256MiB, 1G")->type_name("SIZE");
    run->add_option("--max-procs", o.max_procs, "Processes and threads, together")
        ->type_name("N")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}));
    run->add_option("--cpus", o.cpus, "CPUs to run on; also sizes numeric thread pools")
        ->type_name("N")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
    run->add_option("--tmp-size", o.tmp_size, "Size of the writable /tmp")->type_name("SIZE");
    run->add_option("--output-limit", o.output_limit, "Bytes of stdout+stderr kept")
        ->type_name("SIZE");
    run->add_option("--net", o.net,
                    "Network: none, loopback (lo inside only) or proxy (HTTP/CONNECT proxy to "
                    "the allowed HOST:PORTs only)")
        ->type_name("MODE")
        ->check(CLI::IsMember({"none", "loopback", "proxy"}));
    run->add_option("--allow", o.allow,
                    "Let the proxy reach HOST:PORT (*.DOMAIN:PORT for subdomains, [IPV6]:PORT); "
                    "repeatable, added to the profile's network.allow; implies --net proxy")
        ->type_name("HOST:PORT")
        ->allow_extra_args(false);
    run->add_option("--env", o.env, "Set NAME=VALUE inside, or pass NAME from the host")
        ->type_name("NAME[=VALUE]")
        ->allow_extra_args(false);
    run->add_option("--input", o.inputs,
                    "Make host FILE readable as /tmp/work/NAME (default: its basename); "
                    "repeatable")
        ->type_name("FILE[=NAME]")
        ->allow_extra_args(false);
    run->add_option("--output-dir", o.output_dir,
                    "Copy the run's artifacts (new or modified files under /tmp/work) into the "
                    "existing host DIR; existing files are never overwritten")
        ->type_name("DIR");
    run->add_option("--workdir", o.workdir,
                    "Bind the host DIR read-write as /tmp/work, so runs can hand files on; it "
                    "must be writable by the uid the script runs as (65534 when root runs "
                    "pysandbox)")
        ->type_name("DIR");
    add_incident_log_option(*run, o.incident_log);
    run->add_option("-c", o.code, "Run CODE instead of a script file")->type_name("CODE");
    run->add_flag("--json", o.json,
                  "Print one JSON result (schema pysandbox.result/v1) with the output inside");
    run->add_flag("-v,--verbose", o.verbose, "Say what the sandbox does, step by step");
    run->add_option("script", o.script, "The script; '-' reads the program from stdin")
        ->type_name("SCRIPT");
    run->callback([&out] { out.command = Command::run; });
    run->footer("Arguments after -- are passed to the script as sys.argv[1:].");
}

void add_check_command(CLI::App& app, Invocation& out) {
    CLI::App* check = app.add_subcommand(
        "check", "Report the script's denied imports and calls (Python's ast, run in the sandbox)");
    CheckOptions& o = out.check;
    check->add_option("-p,--profile", o.profile, "Profile whose [policy] applies")
        ->type_name("PROFILE");
    check->add_flag("--json", o.json, "Print one JSON object (schema pysandbox.check/v1)");
    add_incident_log_option(*check, o.incident_log);
    check->add_option("script", o.script, "The script to analyse")
        ->required()
        ->type_name("SCRIPT");
    check->callback([&out] { out.command = Command::check; });
    check->footer("Exit status: 0 clean, 1 findings (a syntax error is one), 125 error.");
}

void add_profile_command(CLI::App& app, Invocation& out) {
    CLI::App* profile = app.add_subcommand("profile", "List or show profiles");
    profile->require_subcommand(1);
    CLI::App* list = profile->add_subcommand("list", "List the profiles that can be named");
    list->callback([&out] { out.command = Command::profile_list; });
    CLI::App* show = profile->add_subcommand("show", "Print a profile, fully resolved, as TOML");
    show->add_option("name", out.profile.name, "Profile name or path")
        ->required()
        ->type_name("PROFILE");
    show->callback([&out] { out.command = Command::profile_show; });
}

}  // namespace

std::unique_ptr<CLI::App> build_cli(Invocation& out) {
    auto app = std::make_unique<CLI::App>(
        "Run untrusted Python in a locked-down Linux sandbox", "pysandbox");
    app->set_version_flag("--version", std::string("pysandbox ") + kVersion);
    app->require_subcommand(1);
    add_run_command(*app, out);
    add_check_command(*app, out);
    add_profile_command(*app, out);
    CLI::App* doctor = app->add_subcommand("doctor", "Check what this host allows, and how to fix what it does not");
    doctor->add_flag("--json", out.doctor_json, "Print the checks as one JSON object");
    doctor->callback([&out] { out.command = Command::doctor; });
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

void check_command_name(CLI::App& app, const SplitArgs& split) {
    if (split.head.empty() || split.head.back().starts_with('-')) return;
    const std::string& name = split.head.back();
    std::string known;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        if (sub->get_name() == name) return;
        known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    throw CLI::ValidationError("unknown command \"" + name + "\" (commands: " + known + ")");
}

Invocation parse_command_line(int argc, const char* const* argv) {
    Invocation invocation;
    auto app = build_cli(invocation);
    SplitArgs split = split_at_double_dash(argc, argv);
    check_command_name(*app, split);
    app->parse(split.head);
    invocation.run.args = std::move(split.script_args);
    return invocation;
}

}  // namespace pysandbox
