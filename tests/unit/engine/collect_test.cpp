// collect() over what a sandbox hands its supervisor, made here without one: the run's /tmp/work
// is a plain directory (or, with --workdir, the overlay's upper layer), and the Plan holds only
// what collection reads. The proxy's denials and the cgroup's OOM count need a live proxy and a
// delegated cgroup: the integration tests cover them (test_network.py, test_limits.py).

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "engine/collect.hpp"
#include "sys/sha256.hpp"
#include "test_support.hpp"

using namespace pysandbox;
namespace fs = std::filesystem;
using test::TempDir;
using test::write_file;

namespace {

sys::UniqueFd open_dir(const fs::path& path, int flags = O_RDONLY) {
    sys::UniqueFd fd(::open(path.c_str(), flags | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(fd);
    return fd;
}

std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// What the supervisor hands over: the outcome so far and /tmp/work.
Supervised handed_over(const fs::path& work) {
    Supervised supervised;
    supervised.outcome.kind = Outcome::Kind::exited;
    supervised.outcome.warnings.push_back("from the run");
    supervised.work_dir = open_dir(work);
    return supervised;
}

}  // namespace

TEST_SUITE("collect") {
    TEST_CASE("nothing handed over: the outcome passes through, timed") {
        Plan plan;
        Supervised supervised;
        supervised.outcome.kind = Outcome::Kind::timeout;
        supervised.outcome.warnings.push_back("from the run");
        const Outcome outcome = collect(plan, std::move(supervised));
        CHECK(outcome.kind == Outcome::Kind::timeout);
        CHECK(outcome.warnings == std::vector<std::string>{"from the run"});
        CHECK(outcome.files.empty());
        CHECK(outcome.blocked_connections.empty());
        CHECK(outcome.oom_kills == 0);
        CHECK(outcome.collect >= std::chrono::milliseconds(0));
        CHECK(outcome.collect < kCollectBudget);
    }

    TEST_CASE("the work dir's files are listed and hashed, inputs left out, to the plan's bound") {
        TempDir work;
        write_file(work / "small.txt", "abc");
        write_file(work / "big.bin", "0123456789");
        write_file(work / "in.csv", "given");
        Plan plan;
        plan.inputs.push_back(InputFile{"/host/in.csv", "in.csv", sys::UniqueFd()});
        plan.profile.limits.artifact_size = 5;
        const Outcome outcome = collect(plan, handed_over(work.path()));
        CHECK(outcome.kind == Outcome::Kind::exited);
        CHECK(outcome.warnings == std::vector<std::string>{"from the run"});
        REQUIRE(outcome.files.size() == 2);
        CHECK(outcome.files[0].path == "big.bin");
        CHECK(outcome.files[0].size == 10);
        CHECK_FALSE(outcome.files[0].sha256);  // over limits.artifact_size
        CHECK(outcome.files[1].path == "small.txt");
        CHECK(outcome.files[1].sha256 == Sha256::of("abc"));
        CHECK(outcome.files[1].media_type == "text/plain");
        CHECK_FALSE(outcome.files[1].host_path);  // no --output-dir: listed only
        CHECK(outcome.files_omitted == 0);
        // Nothing was copied anywhere, and the work dir is as it was.
        CHECK(read(work / "small.txt") == "abc");
    }

    TEST_CASE("--output-dir that did not exist is made after the run, and the files copied") {
        TempDir work, host;
        write_file(work / "sub" / "result.txt", "42\n");
        Plan plan;
        plan.output_dir = (host / "out").string();
        const Outcome outcome = collect(plan, handed_over(work.path()));
        REQUIRE(outcome.files.size() == 1);
        CHECK(outcome.files[0].path == "sub/result.txt");
        CHECK(outcome.files[0].host_path == (host / "out" / "sub" / "result.txt").string());
        CHECK(read(host / "out" / "sub" / "result.txt") == "42\n");
        CHECK(outcome.warnings == std::vector<std::string>{"from the run"});
    }

    TEST_CASE("--output-dir held open by the plan is the one written, whatever its name now") {
        TempDir work, host;
        write_file(work / "a.txt", "a");
        fs::create_directory(host / "out");
        Plan plan;
        plan.output_dir = (host / "out").string();
        plan.output_dir_fd = open_dir(host / "out");
        fs::rename(host / "out", host / "moved");
        const Outcome outcome = collect(plan, handed_over(work.path()));
        REQUIRE(outcome.files.size() == 1);
        CHECK(outcome.files[0].host_path == (host / "out" / "a.txt").string());
        CHECK(read(host / "moved" / "a.txt") == "a");
        CHECK_FALSE(fs::exists(host / "out"));
    }

    TEST_CASE("--output-dir that cannot be made: a warning, and every artifact skipped") {
        TempDir work, host;
        write_file(work / "a.txt", "a");
        Plan plan;
        plan.output_dir = (host / "missing" / "out").string();
        const Outcome outcome = collect(plan, handed_over(work.path()));
        REQUIRE(outcome.warnings.size() == 2);
        CHECK(outcome.warnings[1] == "--output-dir: cannot create " + *plan.output_dir +
                                         ": No such file or directory; no artifact was copied");
        REQUIRE(outcome.files.size() == 1);
        CHECK(outcome.files[0].skipped == "error");
        CHECK_FALSE(outcome.files[0].host_path);
        CHECK_FALSE(fs::exists(host / "missing"));
    }

    TEST_CASE("--workdir: the upper layer's changes reach the host directory, and are listed") {
        TempDir upper, host;
        write_file(upper / "new.txt", "made in the sandbox");
        write_file(host / "kept.txt", "the caller's");
        Plan plan;
        plan.host_workdir.emplace();
        plan.host_workdir->path = host.path().string();
        plan.host_workdir->fd = open_dir(host.path(), O_PATH);
        const Outcome outcome = collect(plan, handed_over(upper.path()));
        CHECK(read(host / "new.txt") == "made in the sandbox");
        CHECK(read(host / "kept.txt") == "the caller's");
        CHECK(outcome.warnings == std::vector<std::string>{"from the run"});
        REQUIRE(outcome.files.size() == 1);
        CHECK(outcome.files[0].path == "new.txt");
    }
}
