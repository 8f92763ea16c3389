// The cgroup v2 path, against a directory tree that imitates a cgroupfs: this host has no cgroup v2
// controllers, so the kernel's side (populating a new directory, enforcing) cannot run here.

#include <doctest/doctest.h>

#include <fcntl.h>

#include <fstream>
#include <sstream>
#include <variant>

#include "sys/cgroup.hpp"
#include "test_support.hpp"

namespace cgroup = pysandbox::cgroup;
using pysandbox::test::TempDir;
using pysandbox::test::write_file;

namespace {

constexpr const char* kSelf = "0::/user.slice/user-1000.slice/app.slice/agent.scope\n";

// A delegated cgroup as systemd hands one out: controllers available and enabled for children.
std::filesystem::path fake_delegation(const TempDir& root, std::string_view subtree) {
    auto dir = root / "user.slice/user-1000.slice/app.slice/agent.scope";
    write_file(dir / "cgroup.controllers", "cpuset cpu io memory pids\n");
    write_file(dir / "cgroup.subtree_control", subtree);
    return dir;
}

std::string read(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("the caller's own cgroup is used when memory and pids are enabled below it") {
    TempDir root;
    auto dir = fake_delegation(root, "cpu memory pids\n");
    auto found = cgroup::find_delegation(root.path(), std::string("1:name=systemd:/x\n") + kSelf);
    REQUIRE(std::holds_alternative<cgroup::Delegation>(found));
    CHECK(std::get<cgroup::Delegation>(found).dir == dir);
    CHECK(std::get<cgroup::Delegation>(found).cpu);
}

TEST_CASE("no delegation: each reason is told") {
    TempDir root;
    auto reason = [&](std::string_view self) {
        auto found = cgroup::find_delegation(root.path(), self);
        REQUIRE(std::holds_alternative<cgroup::Unavailable>(found));
        return std::get<cgroup::Unavailable>(found);
    };
    CHECK(reason("4:memory:/user.slice\n").find("cgroup v1") != std::string::npos);
    fake_delegation(root, "memory\n");
    CHECK(reason(kSelf).find("pids controller is not enabled for child cgroups") !=
          std::string::npos);
    write_file(root / "user.slice/user-1000.slice/app.slice/agent.scope/cgroup.controllers",
               "cpu pids\n");
    CHECK(reason(kSelf).find("memory controller is not delegated") != std::string::npos);
}

TEST_CASE("without cpu enabled, cpu.max is not written") {
    TempDir root;
    fake_delegation(root, "memory pids\n");
    auto found = cgroup::find_delegation(root.path(), kSelf);
    REQUIRE(std::holds_alternative<cgroup::Delegation>(found));
    CHECK_FALSE(std::get<cgroup::Delegation>(found).cpu);
}

TEST_CASE("limits are written into the run's cgroup") {
    TempDir run;
    // The kernel creates these files in a new cgroup; memory.swap.max exists only with swap.
    for (const char* file : {"memory.max", "pids.max", "cpu.max"}) write_file(run / file, "max\n");
    pysandbox::sys::UniqueFd dir(::open(run.path().c_str(), O_RDONLY | O_DIRECTORY));
    std::string failed;
    REQUIRE(cgroup::write_limits(dir.get(), {256ULL << 20, 65, 2}, true, failed) == 0);
    CHECK(read(run / "memory.max") == "268435456");
    CHECK(read(run / "pids.max") == "65");
    CHECK(read(run / "cpu.max") == "200000 100000");

    std::filesystem::remove(run / "pids.max");
    CHECK(cgroup::write_limits(dir.get(), {1, 1, 1}, false, failed) == -ENOENT);
    CHECK(failed == "pids.max");
}

TEST_CASE("an out-of-memory kill is read from memory.events") {
    TempDir run;
    pysandbox::sys::UniqueFd dir(::open(run.path().c_str(), O_RDONLY | O_DIRECTORY));
    CHECK(cgroup::read_oom_kills(dir.get()) == 0);
    write_file(run / "memory.events",
               "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n");
    CHECK(cgroup::read_oom_kills(dir.get()) == 1);
}

TEST_CASE("a run's cgroup is created under the delegation and removed afterwards") {
    TempDir root;
    auto parent = fake_delegation(root, "memory pids\n");
    // A plain directory does not populate itself: creating the cgroup fails on memory.max, names
    // the file, and leaves nothing behind.
    std::string message;
    try {
        cgroup::RunCgroup run({parent, false}, {64 << 20, 8, 1});
    } catch (const pysandbox::SysError& e) {
        message = e.what();
    }
    CHECK(message.find("memory.max") != std::string::npos);
    int children = 0;
    for (const auto& entry : std::filesystem::directory_iterator(parent))
        children += entry.is_directory();
    CHECK(children == 0);
}

TEST_CASE("PYSANDBOX_CGROUP_ROOT moves the cgroupfs root") {
    ::setenv("PYSANDBOX_CGROUP_ROOT", "/fake/cgroupfs", 1);
    CHECK(cgroup::cgroupfs_root() == "/fake/cgroupfs");
    ::unsetenv("PYSANDBOX_CGROUP_ROOT");
    CHECK(cgroup::cgroupfs_root() == "/sys/fs/cgroup");
}
