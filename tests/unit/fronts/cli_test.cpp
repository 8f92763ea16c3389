// The command line as typed: what ends up in the Invocation, and what is refused.

#include <doctest/doctest.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "fronts/cli.hpp"

using namespace std::chrono_literals;
using pysandbox::Command;
using pysandbox::Invocation;
using pysandbox::NetMode;
using pysandbox::Program;

namespace {

// argv with "pysandbox" as argv[0], as main() receives it.
struct Argv {
    explicit Argv(std::initializer_list<const char*> args) : storage(args.begin(), args.end()) {
        pointers.push_back("pysandbox");
        for (const auto& arg : storage) pointers.push_back(arg.c_str());
        pointers.push_back(nullptr);
    }
    int argc() const { return static_cast<int>(pointers.size()) - 1; }
    const char* const* argv() const { return pointers.data(); }

    std::vector<std::string> storage;
    std::vector<const char*> pointers;
};

Invocation parse(std::initializer_list<const char*> args) {
    Argv a(args);
    return pysandbox::parse_command_line(a.argc(), a.argv());
}

// The message of the CLI::ParseError that parsing throws.
std::string parse_error(std::initializer_list<const char*> args) {
    try {
        parse(args);
    } catch (const CLI::ParseError& e) {
        return e.what();
    }
    return "(no error)";
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_SUITE("cli") {
    TEST_CASE("split_at_double_dash: the tail goes to the script, the head reversed for CLI11") {
        Argv a({"run", "script.py", "--", "a", "--b", "--", "-c"});
        pysandbox::SplitArgs split = pysandbox::split_at_double_dash(a.argc(), a.argv());
        CHECK(split.head == Strings{"script.py", "run"});
        CHECK(split.script_args == Strings{"a", "--b", "--", "-c"});
    }

    TEST_CASE("split_at_double_dash without -- or with nothing after it") {
        Argv plain({"run", "-c", "x"});
        pysandbox::SplitArgs split = pysandbox::split_at_double_dash(plain.argc(), plain.argv());
        CHECK(split.head == Strings{"x", "-c", "run"});
        CHECK(split.script_args.empty());

        Argv trailing({"run", "s.py", "--"});
        split = pysandbox::split_at_double_dash(trailing.argc(), trailing.argv());
        CHECK(split.head == Strings{"s.py", "run"});
        CHECK(split.script_args.empty());

        Argv none({});
        split = pysandbox::split_at_double_dash(none.argc(), none.argv());
        CHECK(split.head.empty());
        CHECK(split.script_args.empty());
    }

    TEST_CASE("run SCRIPT -- ARGS passes the arguments verbatim, flags included") {
        Invocation inv = parse({"run", "script.py", "--", "a", "--b"});
        CHECK(inv.command == Command::run);
        const Program& program = inv.run.request.program;
        CHECK(program.kind == Program::Kind::script_file);
        CHECK(program.text == "script.py");
        CHECK(program.args == Strings{"a", "--b"});
        CHECK(inv.run.profile == "default");
        CHECK_FALSE(inv.run.request.overrides.wall_time.has_value());
        CHECK(inv.run.request.verbose == 0);
        CHECK_FALSE(inv.run.request.capture_output);
    }

    TEST_CASE("run -c CODE") {
        Invocation inv = parse({"run", "-c", "print(1)", "--", "x"});
        CHECK(inv.command == Command::run);
        const Program& program = inv.run.request.program;
        CHECK(program.kind == Program::Kind::code);
        CHECK(program.text == "print(1)");
        CHECK(program.args == Strings{"x"});
    }

    TEST_CASE("run - reads the program from stdin") {
        Invocation inv = parse({"run", "-"});
        CHECK(inv.command == Command::run);
        CHECK(inv.run.request.program.kind == Program::Kind::stdin_program);
        CHECK(inv.run.request.program.args.empty());
    }

    TEST_CASE("--timeout and -p are taken in either order") {
        for (const Invocation& inv :
             {parse({"run", "--timeout", "2s", "-p", "x.toml", "s.py"}),
              parse({"run", "-p", "x.toml", "--timeout", "2s", "s.py"}),
              parse({"run", "s.py", "-p", "x.toml", "--timeout", "2s"}),
              parse({"run", "--profile", "x.toml", "--timeout=2s", "s.py"})}) {
            CHECK(inv.command == Command::run);
            CHECK(inv.run.profile == "x.toml");
            CHECK(inv.run.request.overrides.wall_time == std::optional(2000ms));
            CHECK(inv.run.request.program.text == "s.py");
        }
    }

    TEST_CASE("limit flags are parsed into numbers as they are read") {
        Invocation inv = parse({"run", "--cpu-time", "3s", "--memory", "1G", "--max-procs", "8",
                                "--tmp-size", "8MiB", "--output-limit", "1MiB", "--allow",
                                "a.org:443", "--net", "proxy", "-v", "--json", "s.py"});
        const pysandbox::Overrides& o = inv.run.request.overrides;
        CHECK(o.cpu_time == std::optional(3000ms));
        CHECK(o.memory == std::optional<std::uint64_t>(1ULL << 30));
        CHECK(o.max_procs == std::optional<std::uint64_t>(8));
        CHECK(o.tmp_size == std::optional<std::uint64_t>(8ULL << 20));
        CHECK(o.output_limit == std::optional<std::uint64_t>(1ULL << 20));
        CHECK(o.net == std::optional(NetMode::proxy));
        REQUIRE(o.allow.size() == 1);
        CHECK(o.allow[0].to_string() == "a.org:443");
        CHECK(inv.run.request.verbose == 1);
        CHECK(inv.run.request.capture_output);
        CHECK(inv.run.request.program.text == "s.py");
    }

    TEST_CASE("--input FILE[=NAME] is split as it is read") {
        Invocation inv = parse({"run", "--input", "/x/data.csv", "--input", "a=b.txt", "s.py"});
        const auto& inputs = inv.run.request.overrides.inputs;
        REQUIRE(inputs.size() == 2);
        CHECK(inputs[0].source == "/x/data.csv");
        CHECK(inputs[0].name == "data.csv");
        CHECK(inputs[1].source == "a");
        CHECK(inputs[1].name == "b.txt");
        CHECK(parse_error({"run", "--input", "a=../b", "s.py"}).starts_with("--input: "));
    }

    // CLI11 keeps allow_extra_args on for a vector option, even after expected(1): without
    // allow_extra_args(false), `--env B script.py` takes script.py as a second --env value.
    TEST_CASE("--env accumulates and does not swallow the script") {
        Invocation inv = parse({"run", "--env", "A=1", "--env", "B", "script.py"});
        CHECK(inv.run.request.overrides.env == Strings{"A=1", "B"});
        CHECK(inv.run.request.program.text == "script.py");
        CHECK(inv.run.request.program.args.empty());

        Invocation before = parse({"run", "script.py", "--env", "A=1", "--env", "B"});
        CHECK(before.run.request.overrides.env == Strings{"A=1", "B"});
        CHECK(before.run.request.program.text == "script.py");
    }

    TEST_CASE("an unknown flag is a ParseError that names the flag") {
        CHECK_THROWS_AS(parse({"run", "--bogus", "s.py"}), CLI::ParseError);
        CHECK(parse_error({"run", "--bogus", "s.py"}).find("--bogus") != std::string::npos);
        CHECK(parse_error({"run", "--no-such-flag=3", "s.py"}).find("--no-such-flag") !=
              std::string::npos);
    }

    TEST_CASE("a misspelt option names only itself and what it most likely meant") {
        CHECK(parse_error({"run", "--timout", "1s", "examples/hello.py"}) ==
              "unknown option --timout; did you mean --timeout?");
        CHECK(parse_error({"run", "examples/hello.py", "--jsno"}) ==
              "unknown option --jsno; did you mean --json?");
        CHECK(parse_error({"session", "--idle-timout=5"}) ==
              "unknown option --idle-timout; did you mean --idle-timeout?");
        CHECK(parse_error({"batch", "--job", "2", "jobs.jsonl"}) ==
              "unknown option --job; did you mean --jobs?");
        CHECK(parse_error({"run", "--frobnicate", "s.py"}) == "unknown option --frobnicate");
    }

    TEST_CASE("a misspelt command is named with the command it most likely meant") {
        CHECK(parse_error({"rnu", "s.py"}) == "unknown command rnu; did you mean run?");
        CHECK(parse_error({"sesion"}) == "unknown command sesion; did you mean session?");
        CHECK(parse_error({"profile", "shwo", "strict"}) ==
              "unknown command profile shwo; did you mean show?");
        CHECK(parse_error({"profile", "lsit"}) ==
              "unknown command profile lsit; did you mean list?");
        CHECK(parse_error({"frobnicate"}) ==
              "unknown command frobnicate (commands: run, check, session, mcp, batch, kernel, "
              "profile, doctor, env)");
    }

    TEST_CASE("bad values and missing commands are ParseErrors") {
        CHECK(parse_error({"run", "--net", "wifi", "s.py"}).find("wifi") != std::string::npos);
        CHECK(parse_error({"run", "--max-procs", "many", "s.py"}).find("many") !=
              std::string::npos);
        CHECK_THROWS_AS(parse({"run", "--timeout"}), CLI::ParseError);
        CHECK_THROWS_AS(parse({}), CLI::ParseError);
        CHECK_THROWS_AS(parse({"frobnicate"}), CLI::ParseError);
        CHECK(parse_error({"frobnicate"}).find("frobnicate") != std::string::npos);
        CHECK_THROWS_AS(parse({"profile"}), CLI::ParseError);
        CHECK_THROWS_AS(parse({"profile", "show"}), CLI::ParseError);
        CHECK_THROWS_AS(parse({"run", "a.py", "b.py"}), CLI::ParseError);
    }

    TEST_CASE("--help, --version and nothing at all are ParseErrors with exit code 0") {
        for (auto args :
             {std::initializer_list<const char*>{}, std::initializer_list<const char*>{"--help"},
              std::initializer_list<const char*>{"--version"},
              std::initializer_list<const char*>{"run", "--help"}}) {
            try {
                parse(args);
                FAIL("no exception");
            } catch (const CLI::ParseError& e) {
                CHECK(e.get_exit_code() == 0);
            }
        }
    }

    TEST_CASE("profile show NAME") {
        Invocation inv = parse({"profile", "show", "strict"});
        CHECK(inv.command == Command::profile_show);
        CHECK(inv.profile_name == "strict");
    }

    TEST_CASE("profile list") {
        Invocation inv = parse({"profile", "list"});
        CHECK(inv.command == Command::profile_list);
        CHECK(inv.profile_name.empty());
    }
}
