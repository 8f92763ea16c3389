#pragma once
// Small helpers shared by the unit tests: scratch directories, files, the current directory, and
// the message of an expected exception.

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pysandbox::test {

inline const std::filesystem::path kFixtures = PYSANDBOX_TEST_FIXTURES;
inline const std::filesystem::path kShippedProfiles = PYSANDBOX_SOURCE_PROFILES;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
  public:
    TempDir() : TempDir(std::filesystem::temp_directory_path()) {}
    // Under `base`: plan tests need host paths outside /tmp, which a profile may not bind.
    explicit TempDir(const std::filesystem::path& base) {
        std::string pattern = (base / "pysandbox-unit-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

inline std::filesystem::path write_file(const std::filesystem::path& path,
                                        std::string_view content) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + path.string());
    return path;
}

// Changes the current directory for the lifetime of the object.
class CurrentDir {
  public:
    explicit CurrentDir(const std::filesystem::path& dir)
        : saved_(std::filesystem::current_path()) {
        std::filesystem::current_path(dir);
    }
    ~CurrentDir() {
        std::error_code ec;
        std::filesystem::current_path(saved_, ec);
    }
    CurrentDir(const CurrentDir&) = delete;
    CurrentDir& operator=(const CurrentDir&) = delete;

  private:
    std::filesystem::path saved_;
};

// The what() of the E that f() throws, or "(no error)" / "(other exception: ...)".
template <typename E, typename F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("(other exception: ") + e.what() + ")";
    }
    return "(no error)";
}

inline bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

}  // namespace pysandbox::test
