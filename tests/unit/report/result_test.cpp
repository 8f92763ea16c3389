// Which status an outcome gets, in the documented order of precedence.

#include <doctest/doctest.h>

#include <signal.h>

#include "report/result.hpp"

using pysandbox::classify;
using pysandbox::Outcome;
using pysandbox::Plan;
using pysandbox::PythonException;
using pysandbox::Status;
using Kind = pysandbox::Outcome::Kind;

namespace {

Outcome make(Kind kind, int code_or_signal = 0) {
    Outcome o;
    o.kind = kind;
    (kind == Kind::exited ? o.exit_code : o.signal) = code_or_signal;
    return o;
}

PythonException exception_of(std::string type) {
    PythonException e;
    e.type = std::move(type);
    return e;
}

// An outcome with the kernel's measures of what the script used.
Outcome used(Outcome o, std::int64_t cpu_ms, std::int64_t max_rss_kib) {
    o.cpu_ms = cpu_ms;
    o.max_rss_kib = max_rss_kib;
    return o;
}

}  // namespace

TEST_CASE("statuses, one per kind of ending") {
    const Plan plan;  // 5 s of CPU, 256 MiB
    CHECK(classify(plan, make(Kind::exited, 0), {}) == Status::ok);
    CHECK(classify(plan, make(Kind::exited, 3), {}) == Status::error);
    CHECK(classify(plan, make(Kind::exited, 1), exception_of("KeyError")) == Status::exception);
    CHECK(classify(plan, used(make(Kind::exited, 1), 100, 200 * 1024),
                   exception_of("MemoryError")) == Status::memory_limit);
    CHECK(classify(plan, make(Kind::timeout), {}) == Status::timeout);
    CHECK(classify(plan, used(make(Kind::signaled, SIGXCPU), 5000, 0), {}) == Status::cpu_limit);
    CHECK(classify(plan, make(Kind::signaled, SIGSEGV), {}) == Status::killed);
    CHECK(classify(plan, make(Kind::interrupted, SIGINT), {}) == Status::killed);
    CHECK(classify(plan, make(Kind::lost), {}) == Status::killed);
    CHECK(classify(plan, make(Kind::policy_violation), {}) == Status::policy_violation);
    CHECK(classify(plan, make(Kind::setup_failed), {}) == Status::sandbox_error);
    CHECK(classify(plan, make(Kind::exec_failed), {}) == Status::sandbox_error);
}

// The script's own SIGXCPU or MemoryError is not the kernel's: the verdict needs the kernel's
// measure (CPU time at least half the limit; peak memory at least half the limit).
TEST_CASE("a limit the script only claims is not a limit") {
    const Plan plan;
    CHECK(classify(plan, used(make(Kind::signaled, SIGXCPU), 15, 0), {}) == Status::killed);
    CHECK(classify(plan, used(make(Kind::signaled, SIGXCPU), 2499, 0), {}) == Status::killed);
    CHECK(classify(plan, used(make(Kind::signaled, SIGXCPU), 2500, 0), {}) == Status::cpu_limit);
    const auto memory_error = exception_of("MemoryError");
    CHECK(classify(plan, used(make(Kind::exited, 1), 10, 10 * 1024), memory_error) ==
          Status::exception);
    CHECK(classify(plan, used(make(Kind::exited, 1), 10, 128 * 1024), memory_error) ==
          Status::memory_limit);
    CHECK(classify(plan, used(make(Kind::signaled, SIGSEGV), 10, 200 * 1024), {}) ==
          Status::memory_limit);
    CHECK(classify(plan, used(make(Kind::signaled, SIGSEGV), 10, 1024), {}) == Status::killed);
}

TEST_CASE("SIGKILL after the CPU limit is the CPU limit's hard stop; before it, just a kill") {
    const Plan plan;  // 5 s of CPU
    Outcome o = make(Kind::signaled, SIGKILL);
    o.cpu_ms = 6000;
    CHECK(classify(plan, o, {}) == Status::cpu_limit);
    o.cpu_ms = 100;
    CHECK(classify(plan, o, {}) == Status::killed);
}

TEST_CASE("the out-of-memory killer, as the cgroup counted it") {
    const Plan plan;
    Outcome o = make(Kind::signaled, SIGKILL);
    o.oom_kills = 1;
    CHECK(classify(plan, o, {}) == Status::memory_limit);
}

TEST_CASE("cut output: reported unless something more telling happened") {
    const Plan plan;
    Outcome o = make(Kind::exited, 0);
    o.stdout_omitted = 10;
    CHECK(classify(plan, o, {}) == Status::output_limit);
    o.exit_code = 1;
    CHECK(classify(plan, o, exception_of("KeyError")) == Status::exception);
    Outcome t = make(Kind::timeout);
    t.stderr_omitted = 10;
    CHECK(classify(plan, t, {}) == Status::timeout);
}

TEST_CASE("what a person is told a run lost: the exception's hint, files not kept") {
    Plan plan;
    Outcome o = make(Kind::exited, 1);
    PythonException e = exception_of("ModuleNotFoundError");
    e.hint = "only the standard library";
    for (const char* name : {"a.png", "b.txt", "c.csv", "d.txt"})
        o.files.push_back({.path = name,
                           .size = 1,
                           .sha256 = {},
                           .media_type = "",
                           .host_path = {},
                           .skipped = ""});
    CHECK(pysandbox::human_notes(plan, o, e) ==
          std::vector<std::string>{"hint: only the standard library",
                                   "4 files left in /tmp/work were not kept (a.png, b.txt, c.csv "
                                   "and 1 more); add --output-dir DIR to keep them"});
    plan.output_dir = "/out";
    for (auto& file : o.files) file.host_path = "/out/" + file.path;
    o.files[1].host_path.reset();
    o.files[1].skipped = "too_large";
    CHECK(pysandbox::human_notes(plan, o, {}) ==
          std::vector<std::string>{"1 file not copied to /out (b.txt (too_large)); the result's "
                                   "\"files\" (--json) says why"});
    plan.output_runs = true;
    plan.output_dir = "/runs";
    for (auto& file : o.files) file.host_path = "/runs/run-2/" + file.path;
    o.files[1].skipped.clear();
    CHECK(pysandbox::human_notes(plan, o, {}) ==
          std::vector<std::string>{"4 files kept in /runs/run-2"});
}

TEST_CASE("multiprocessing without processes: the hint names the profile that allows them") {
    Plan plan;
    plan.profile.name = "default";
    Outcome o = make(Kind::exited, 1);
    o.stderr_tail =
        "Traceback (most recent call last):\n  File \"x.py\", line 2, in <module>\n"
        "  File \"/usr/lib/python3.11/multiprocessing/synchronize.py\", line 57, in __init__\n"
        "FileNotFoundError: [Errno 2] No such file or directory\n";
    const auto found = pysandbox::find_exception(plan, o);
    REQUIRE(found);
    CHECK(found->hint.find("-p datascience") != std::string::npos);
    plan.profile.seccomp.allow_processes = true;
    CHECK(pysandbox::find_exception(plan, o)->hint.find("datascience") == std::string::npos);
}
