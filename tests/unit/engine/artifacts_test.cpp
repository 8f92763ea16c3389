// The artifact walk on a directory built here: what is listed, what is copied, what is refused.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/artifacts.hpp"
#include "sys/sha256.hpp"
#include "sys/unique_fd.hpp"

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
    auto found = artifacts::collect(work_fd, options).files;
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
    options.max_file_size = options.max_total_size = 1 << 20;
    int fd = work.open();
    auto found = artifacts::collect(fd, options).files;
    ::close(fd);
    REQUIRE(found.size() == 2);
    CHECK(found[0].path == "b.txt");
    CHECK(found[0].size == 3);
    CHECK(found[0].sha256 == pysandbox::Sha256::of("bee"));
    CHECK(found[0].media_type == "text/plain");
    CHECK_FALSE(found[0].host_path);
    CHECK(found[1].path == "sub/a.json");
}

TEST_CASE("artifacts: hashing stops at the bounds: per file, in all, and in time") {
    TempDir work;
    write(work.path / "a.txt", std::string(40, 'a'));
    write(work.path / "b.txt", std::string(40, 'b'));
    write(work.path / "c.txt", std::string(200, 'c'));
    write(work.path / "d.txt", std::string(40, 'd'));
    artifacts::Options options;
    options.max_file_size = 100;
    options.max_total_size = 100;
    int fd = work.open();
    auto found = artifacts::collect(fd, options).files;
    REQUIRE(found.size() == 4);
    CHECK(found[0].sha256);           // 40 bytes read
    CHECK(found[1].sha256);           // 80
    CHECK_FALSE(found[2].sha256);     // over the per-file size
    CHECK_FALSE(found[3].sha256);     // 120 would be over the total
    CHECK(found[3].skipped.empty());  // only copies say why they were skipped
    options.max_total_size = 1000;
    options.deadline = std::chrono::steady_clock::now();  // already passed
    for (const auto& artifact : artifacts::collect(fd, options).files) CHECK_FALSE(artifact.sha256);
    ::close(fd);
}

TEST_CASE("artifacts: at most kMaxListed are listed, the rest counted") {
    TempDir work;
    for (std::size_t i = 0; i < artifacts::kMaxListed + 5; ++i)
        write(work.path / ("f" + std::to_string(i)), "");
    artifacts::Options options;
    int fd = work.open();
    auto listing = artifacts::collect(fd, options);
    ::close(fd);
    CHECK(listing.files.size() == artifacts::kMaxListed);
    CHECK(listing.omitted == 5);
}

TEST_CASE("artifacts: a name that is not UTF-8 is listed but never copied") {
    TempDir work, out;
    write(work.path / "\xff\xfe.txt", "x");
    fs::create_directory(work.path / "\xc3(");
    write(work.path / "\xc3(" / "inner.txt", "y");
    write(work.path / "ok.txt", "z");
    auto found = collect_into(work, out);
    REQUIRE(found.size() == 3);
    for (const auto& artifact : found) {
        CAPTURE(artifact.path);
        if (artifact.path == "ok.txt") {
            CHECK(artifact.host_path);
            continue;
        }
        CHECK(artifact.skipped == "invalid_name");
        CHECK_FALSE(artifact.host_path);
    }
    CHECK(std::distance(fs::directory_iterator(out.path), fs::directory_iterator()) == 1);
}

TEST_CASE("artifacts: a directory already in the output directory is not entered") {
    TempDir work, out;
    fs::create_directory(work.path / "sub");
    write(work.path / "sub" / "x.py", "evil");
    fs::create_directory(out.path / "sub");  // made by someone else, after the plan
    auto found = collect_into(work, out);
    REQUIRE(found.size() == 1);
    CHECK(found[0].skipped == "exists");
    CHECK_FALSE(found[0].host_path);
    CHECK(fs::is_empty(out.path / "sub"));
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
    CHECK(found[0].skipped == "exists");  // d: not a directory this walk made
    CHECK(found[1].skipped == "exists");
    CHECK(fs::is_empty(elsewhere.path));
}

TEST_CASE("artifacts: an output directory made as the walk first needs it, and only then") {
    TempDir work, out;
    write(work.path / "small.txt", "before");
    const pysandbox::sys::UniqueFd work_fd(work.open());
    const pysandbox::sys::UniqueFd out_fd(out.open());
    std::vector<pysandbox::sys::UniqueFd> made;
    artifacts::Options options;
    options.output_dir = artifacts::kHostDirLater;
    options.output_dir_path = (out.path / "cell").string();
    options.max_file_size = 100;
    options.max_total_size = 1000;
    options.make_output_dir = [&] {
        made.push_back(artifacts::make_host_dir(out_fd.get(), "cell"));
        return made.back() ? made.back().get() : artifacts::kHostDirMissing;
    };
    const artifacts::Snapshot seen = artifacts::collect(work_fd.get(), options).seen;
    CHECK(made.size() == 1);  // for the file written above
    CHECK(read(out.path / "cell" / "small.txt") == "before");
    fs::remove_all(out.path / "cell");
    // Nothing new since that walk: no directory.
    options.unchanged = &seen;
    CHECK(artifacts::collect(work_fd.get(), options).files.empty());
    CHECK(made.size() == 1);
    CHECK_FALSE(fs::exists(out.path / "cell"));
    // New files: made once, both copied into it.
    write(work.path / "a.txt", "A");
    write(work.path / "b.txt", "B");
    const auto found = artifacts::collect(work_fd.get(), options).files;
    CHECK(made.size() == 2);
    REQUIRE(found.size() == 2);
    CHECK(found[0].host_path == (out.path / "cell" / "a.txt").string());
    CHECK(read(out.path / "cell" / "b.txt") == "B");
}
