// A front's scratch directory (fronts/scratch_dir.hpp): made private, removed on exit, and
// reaped by the next front only when its owner is gone and it is certainly one.

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <iterator>
#include <optional>
#include <string>

#include <doctest/doctest.h>

#include "fronts/scratch_dir.hpp"
#include "test_support.hpp"

using namespace pysandbox;
namespace fs = std::filesystem;

namespace {

// Sets TMPDIR for the lifetime of the object.
class TmpDirVariable {
  public:
    explicit TmpDirVariable(const fs::path& dir) {
        if (const char* old = std::getenv("TMPDIR")) saved_ = old;
        ::setenv("TMPDIR", dir.c_str(), 1);
    }
    ~TmpDirVariable() {
        if (saved_)
            ::setenv("TMPDIR", saved_->c_str(), 1);
        else
            ::unsetenv("TMPDIR");
    }
    TmpDirVariable(const TmpDirVariable&) = delete;
    TmpDirVariable& operator=(const TmpDirVariable&) = delete;

  private:
    std::optional<std::string> saved_;
};

// A scratch directory as a killed front leaves it: `.owner` there, nobody holding its lock.
fs::path left_behind(const fs::path& parent, const std::string& name) {
    const fs::path dir = parent / name;
    test::write_file(dir / ".owner", "");
    test::write_file(dir / "files" / "call-1" / "out.txt", "artifact");
    return dir;
}

}  // namespace

TEST_CASE("a scratch directory is private, holds files/, and goes when its front does") {
    const test::TempDir parent;
    const TmpDirVariable tmpdir(parent.path());
    fs::path made;
    {
        const ScratchDir scratch("mcp");
        made = fs::path(scratch.files()).parent_path();
        CHECK(made.parent_path() == parent.path());
        CHECK(made.filename().string().starts_with("pysandbox-mcp-"));
        CHECK(fs::is_directory(scratch.files()));
        CHECK(fs::exists(made / ".owner"));
        struct stat st {};
        REQUIRE(::stat(made.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 0700);
        // Alive: another front's start leaves it, and keeps no descriptor of it open (a
        // reaper that did held a live front's `.owner` until it ended, one per front it met).
        const auto open_fds = [] {
            return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
        };
        const auto before = open_fds();
        CHECK(reap_stale_scratch(parent.path(), "mcp") == 0);
        CHECK(open_fds() == before);
        CHECK(fs::exists(made));
    }
    CHECK_FALSE(fs::exists(made));
}

TEST_CASE("a new front reaps what a killed one left, and nothing else") {
    const test::TempDir parent;
    const TmpDirVariable tmpdir(parent.path());
    const fs::path stale = left_behind(parent.path(), "pysandbox-mcp-dead01");
    const fs::path no_owner = parent / "pysandbox-mcp-nolock";
    test::write_file(no_owner / "files" / "keep.txt", "not a scratch directory");
    const fs::path other_front = left_behind(parent.path(), "pysandbox-batch-dead02");
    const fs::path unrelated = left_behind(parent.path(), "unrelated-dead03");
    const fs::path target = left_behind(parent.path(), "target-of-link");
    fs::create_directory_symlink(target, parent / "pysandbox-mcp-link");

    const auto open_fds = [] {
        return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
    };
    const auto before = open_fds();
    const ScratchDir scratch("mcp");
    CHECK(open_fds() == before + 1);  // its own `.owner`; none of the directory it reaped
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(no_owner / "files" / "keep.txt"));
    CHECK(fs::exists(other_front / "files" / "call-1" / "out.txt"));
    CHECK(fs::exists(unrelated / "files" / "call-1" / "out.txt"));
    CHECK(fs::exists(target / "files" / "call-1" / "out.txt"));
    CHECK(fs::is_symlink(parent / "pysandbox-mcp-link"));
    CHECK(fs::is_directory(scratch.files()));
}
