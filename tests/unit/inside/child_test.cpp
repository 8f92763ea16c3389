// The step tables (child.cpp, then init.cpp's interpreter steps) as child_step_name() and
// child_step_births() show them: the order the layers must be set up in, and the steps a job
// forked by a zygote skips because its zygote's sandbox already has what they make.

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "inside/child.hpp"

using namespace pysandbox;

namespace {

constexpr unsigned kCloned = static_cast<unsigned>(Birth::cloned);
constexpr unsigned kForked = static_cast<unsigned>(Birth::forked);

struct Entry {
    std::string name;
    unsigned births;
};

// The child's table, in order.
std::vector<Entry> child_steps() {
    std::vector<Entry> steps;
    for (int i = 0; child_step_births(i) != 0; ++i)
        steps.push_back({child_step_name(i), child_step_births(i)});
    return steps;
}

// The interpreter's table, numbered after the child's in reports.
std::vector<std::string> interpreter_steps() {
    std::vector<std::string> steps;
    const int first = static_cast<int>(child_steps().size());
    for (int i = first; child_step_name(i) != std::string("start the sandbox"); ++i) {
        steps.push_back(child_step_name(i));
        REQUIRE(steps.size() < 100);
    }
    return steps;
}

// The position of `name` in the child's table; fails the test when it is not there.
std::ptrdiff_t at(const std::string& name) {
    const auto steps = child_steps();
    const auto found = std::find_if(steps.begin(), steps.end(),
                                    [&](const Entry& entry) { return entry.name == name; });
    INFO("step: ", name);
    REQUIRE(found != steps.end());
    return found - steps.begin();
}

std::ptrdiff_t in_interpreter(const std::string& name) {
    const auto steps = interpreter_steps();
    const auto found = std::find(steps.begin(), steps.end(), name);
    INFO("interpreter step: ", name);
    REQUIRE(found != steps.end());
    return found - steps.begin();
}

unsigned births_of(const std::string& name) {
    return child_steps()[at(name)].births;
}

// Every step of `later` comes after every step of `earlier`.
void check_order(const std::vector<std::string>& earlier, const std::vector<std::string>& later) {
    for (const std::string& first : earlier)
        for (const std::string& second : later) {
            INFO(first, " before ", second);
            CHECK(at(first) < at(second));
        }
}

const std::vector<std::string> kMounts = {"mount the staging root",
                                          "bind host paths read-only",
                                          "write synthetic files",
                                          "populate /dev",
                                          "mount /dev/shm",
                                          "mount /tmp",
                                          "copy matplotlib's font list",
                                          "copy the input files",
                                          "mount the workdir overlay",
                                          "mount /proc",
                                          "mask /proc"};

}  // namespace

TEST_SUITE("step tables") {
    TEST_CASE("the tables are what the tests read: names unique, both tables there") {
        const auto steps = child_steps();
        REQUIRE(steps.size() > 20);
        std::set<std::string> names;
        for (const Entry& step : steps) {
            CAPTURE(step.name);
            CHECK(names.insert(step.name).second);
            CHECK((step.births & ~(kCloned | kForked)) == 0);
        }
        for (const std::string& name : interpreter_steps()) CHECK(names.insert(name).second);
        CHECK(std::string(child_step_name(-1)) == "start the sandbox");
    }

    TEST_CASE("the supervisor's ends are closed first, in both births") {
        const auto steps = child_steps();
        CHECK(steps.front().name == "close the supervisor's ends");
        CHECK(steps.front().births == (kCloned | kForked));
    }

    TEST_CASE("the user namespace's id maps are written before any step needs them") {
        // The zygote's death would leave a job waiting for its maps forever.
        check_order({"die with the zygote"}, {"wait for the id maps"});
        check_order({"wait for the id maps"},
                    {"switch to the sandbox ids", "join a fresh session keyring",
                     "make mounts private", "set the hostname", "configure the network"});
        check_order({"wait for the id maps"}, kMounts);
        // Changing the ids clears the parent-death signal: it is armed after.
        check_order({"switch to the sandbox ids"}, {"die with the supervisor"});
    }

    TEST_CASE("mounts: private first, host files opened before the staging root hides them") {
        std::vector<std::string> mounts = kMounts;
        mounts.push_back("pivot into the new root");
        check_order({"make mounts private"}, mounts);
        check_order({"open the prepared font list", "open the workdir"},
                    {"mount the staging root"});
        check_order({"mount the staging root"},
                    {"bind host paths read-only", "write synthetic files", "populate /dev"});
        check_order({"mount /tmp"}, {"copy matplotlib's font list", "copy the input files",
                                     "mount the workdir overlay"});
        check_order({"copy the input files", "mount the workdir overlay"},
                    {"hand /tmp/work to the supervisor"});
    }

    TEST_CASE("the user's counts are bounded in the fresh /proc, before /proc/sys is read-only") {
        check_order({"mount /proc"}, {"bound the host user's kernel counts"});
        check_order({"bound the host user's kernel counts"}, {"mask /proc"});
        // Writing /proc/sys/user needs CAP_SYS_RESOURCE in the namespace.
        check_order({"bound the host user's kernel counts"}, {"drop capabilities"});
    }

    TEST_CASE("pivot after every mount, then the root is sealed and the work dir entered") {
        check_order(kMounts, {"pivot into the new root"});
        check_order(
            {"pivot into the new root"},
            {"seal the root read-only", "enter the work directory", "restrict access (Landlock)"});
        check_order({"seal the root read-only"}, {"enter the work directory"});
    }

    TEST_CASE("the network: the proxy port after the network, before the fds are closed") {
        check_order({"configure the network"}, {"open the proxy port"});
        check_order({"open the proxy port"}, {"close inherited fds"});
    }

    TEST_CASE("privileges go last: Landlock, then no_new_privs, then the capabilities") {
        const auto steps = child_steps();
        REQUIRE(steps.size() >= 3);
        CHECK(steps[steps.size() - 3].name == "restrict access (Landlock)");
        CHECK(steps[steps.size() - 2].name == "set no_new_privs");
        CHECK(steps[steps.size() - 1].name == "drop capabilities");
    }

    TEST_CASE("the interpreter's table: limits, seccomp, the open-files limit, execve") {
        // Numbered after the child's: every child step, the capabilities dropped included, runs
        // before the interpreter's process loads its filter. Under gVisor, runsc's user
        // namespace comes first (init.cpp): a new user namespace resets the secure bits, so the
        // filter and no_new_privs, which it keeps, are what must hold after it.
        const auto steps = interpreter_steps();
        CHECK(steps == std::vector<std::string>{
                           "start the interpreter's process", "enter runsc's user namespace",
                           "set the script's resource limits", "load the seccomp filter",
                           "limit open files", "execute the interpreter"});
        CHECK(in_interpreter("set the script's resource limits") <
              in_interpreter("load the seccomp filter"));
        // After the listener is sent, which a low open-files limit could refuse.
        CHECK(in_interpreter("load the seccomp filter") < in_interpreter("limit open files"));
        CHECK(steps.back() == "execute the interpreter");
    }

    TEST_CASE("a forked job skips exactly the steps its zygote's sandbox has done") {
        std::set<std::string> cloned_only, forked_only;
        for (const Entry& step : child_steps()) {
            if (step.births == kCloned) cloned_only.insert(step.name);
            if (step.births == kForked) forked_only.insert(step.name);
        }
        CHECK(cloned_only ==
              std::set<std::string>{
                  "blank the caller's command line", "switch to the sandbox ids",
                  "die with the supervisor", "join a fresh session keyring",
                  "open the prepared font list", "open the workdir", "open the package environment",
                  "bind the package environment", "mount gVisor's state directory",
                  "listen for the audit hook and the driver (gVisor)", "mount the staging root",
                  "bind host paths read-only", "write synthetic files", "populate /dev",
                  "pivot into the new root", "seal the root read-only"});
        CHECK(forked_only == std::set<std::string>{"die with the zygote"});
    }

    TEST_CASE("a forked job still builds its own layers and drops its own privileges") {
        for (const char* name : {"close the supervisor's ends",
                                 "wait for the id maps",
                                 "make mounts private",
                                 "mount /dev/shm",
                                 "mount /tmp",
                                 "copy matplotlib's font list",
                                 "copy the input files",
                                 "mount the workdir overlay",
                                 "hand /tmp/work to the supervisor",
                                 "mount /proc",
                                 "bound the host user's kernel counts",
                                 "mask /proc",
                                 "enter the work directory",
                                 "set the hostname",
                                 "configure the network",
                                 "open the proxy port",
                                 "start a new session",
                                 "close inherited fds",
                                 "pin to the allowed CPUs",
                                 "restrict access (Landlock)",
                                 "set no_new_privs",
                                 "drop capabilities"}) {
            CAPTURE(name);
            CHECK(births_of(name) == (kCloned | kForked));
        }
    }
}
