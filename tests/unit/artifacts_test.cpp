// The artifact walk on a directory built here: what is listed, what is copied, what is refused.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "artifacts.hpp"
#include "sha256.hpp"

namespace artifacts = pysandbox::artifacts;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "artifacts-XXXXXX").string();
        path = ::mkdtemp(pattern.data());
    }
    ~TempDir() { fs::remove_all(path); }
    int open() const { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }
};

void write(const fs::path& path, const std::string& content) {
    std::ofstream(path, std::ios::binary) << content;
}

std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Walks `work`, copying into `out` with caps of 100 bytes a file and 1000 in all.
std::vector<artifacts::Artifact> collect_into(const TempDir& work, const TempDir& out) {
    artifacts::Options options;
    options.output_dir = out.open();
    options.output_dir_path = out.path.string();
    options.max_file_size = 100;
    options.max_total_size = 1000;
    int work_fd = work.open();
    auto found = artifacts::collect(work_fd, options);
    ::close(work_fd);
    ::close(options.output_dir);
    return found;
}

}  // namespace

TEST_CASE("artifacts: media types by extension") {
    CHECK(artifacts::media_type_for("plot.PNG") == "image/png");
    CHECK(artifacts::media_type_for("data.csv") == "text/csv");
    CHECK(artifacts::media_type_for("report.pdf") == "application/pdf");
    CHECK(artifacts::media_type_for(".png") == "application/octet-stream");
    CHECK(artifacts::media_type_for("blob") == "application/octet-stream");
}

TEST_CASE("artifacts: regular files only, in name order, inputs left out") {
    TempDir work;
    write(work.path / "b.txt", "bee");
    write(work.path / "input.csv", "a,b\n");
    fs::create_directory(work.path / "sub");
    write(work.path / "sub" / "a.json", "{}");
    fs::create_symlink("/etc/passwd", work.path / "link");
    REQUIRE(::mkfifo((work.path / "fifo").c_str(), 0644) == 0);
    artifacts::Options options;
    options.inputs = {"input.csv"};
    int fd = work.open();
    auto found = artifacts::collect(fd, options);
    ::close(fd);
    REQUIRE(found.size() == 2);
    CHECK(found[0].path == "b.txt");
    CHECK(found[0].size == 3);
    CHECK(found[0].sha256 == pysandbox::Sha256::of("bee"));
    CHECK(found[0].media_type == "text/plain");
    CHECK_FALSE(found[0].host_path);
    CHECK(found[1].path == "sub/a.json");
}

TEST_CASE("artifacts: with a start time, only files modified after it") {
    // A --workdir's earlier files are not this run's artifacts, even one written in the same
    // clock tick the run started in (its mtime equals the start).
    TempDir work;
    const std::int64_t start = 1'700'000'000'000'000'000;
    auto touch = [&](const char* name, std::int64_t mtime_ns) {
        write(work.path / name, name);
        const timespec times[2] = {{0, UTIME_OMIT},
                                   {mtime_ns / 1'000'000'000, mtime_ns % 1'000'000'000}};
        REQUIRE(::utimensat(AT_FDCWD, (work.path / name).c_str(), times, 0) == 0);
    };
    touch("before", start - 1);
    touch("at-start", start);
    touch("after", start + 1);
    touch("epoch", 0);
    auto names = [&](const artifacts::Options& options) {
        int fd = work.open();
        std::vector<std::string> listed;
        for (const auto& artifact : artifacts::collect(fd, options))
            listed.push_back(artifact.path);
        ::close(fd);
        return listed;
    };
    artifacts::Options since_start;
    since_start.modified_after_ns = start;
    CHECK(names(since_start) == std::vector<std::string>{"after"});
    // Without one every file counts, whatever its time.
    CHECK(names(artifacts::Options{}) ==
          std::vector<std::string>{"after", "at-start", "before", "epoch"});
}

TEST_CASE("artifacts: copies recreate subdirectories and never overwrite or exceed caps") {
    TempDir work, out;
    write(work.path / "small.txt", "hello");
    write(work.path / "big.bin", std::string(101, 'x'));
    write(work.path / "taken.txt", "new");
    fs::create_directory(work.path / "d");
    write(work.path / "d" / "x.txt", "inner");
    write(out.path / "taken.txt", "old");
    auto found = collect_into(work, out);
    REQUIRE(found.size() == 4);
    CHECK(found[0].path == "big.bin");
    CHECK(found[0].skipped == "too_large");
    CHECK_FALSE(fs::exists(out.path / "big.bin"));
    CHECK(found[1].path == "d/x.txt");
    CHECK(read(out.path / "d" / "x.txt") == "inner");
    CHECK(found[2].host_path == (out.path / "small.txt").string());
    CHECK(read(out.path / "small.txt") == "hello");
    CHECK(found[3].skipped == "exists");
    CHECK(read(out.path / "taken.txt") == "old");
}

TEST_CASE("artifacts: a symlink planted in the output directory is not followed") {
    TempDir work, out, elsewhere;
    fs::create_directory(work.path / "d");
    write(work.path / "d" / "x.txt", "payload");
    write(work.path / "f.txt", "payload");
    fs::create_directory_symlink(elsewhere.path, out.path / "d");
    fs::create_symlink(elsewhere.path / "f.txt", out.path / "f.txt");
    auto found = collect_into(work, out);
    REQUIRE(found.size() == 2);
    CHECK(found[0].skipped == "error");
    CHECK(found[1].skipped == "exists");
    CHECK(fs::is_empty(elsewhere.path));
}
