// Profiles: the shipped default, strict validation with file:line:column and the dotted key,
// extends (tables merge, lists replace), lookup, and `profile show` round trips.

#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/profile.hpp"
#include "sys/errors.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using pysandbox::NetMode;
using pysandbox::Profile;
using pysandbox::ProfileError;
using pysandbox::test::contains;
using pysandbox::test::CurrentDir;
using pysandbox::test::kFixtures;
using pysandbox::test::kShippedProfiles;
using pysandbox::test::message_of;
using pysandbox::test::TempDir;
using pysandbox::test::write_file;

namespace {

using Strings = std::vector<std::string>;
using Dirs = std::vector<fs::path>;
constexpr std::uint64_t kMiB = 1ULL << 20;

// The message of the ProfileError that loading `file` (a path) throws.
std::string load_error(const fs::path& file, const Dirs& dirs = {}) {
    return message_of<ProfileError>([&] { pysandbox::load_profile(file.string(), dirs); });
}

std::string text_error(std::string_view text, const Dirs& dirs = {}) {
    return message_of<ProfileError>(
        [&] { pysandbox::load_profile_text(text, "inline.toml", dirs); });
}

// Every field a profile file can set (name and sources are where it came from, not what it says).
void check_same_settings(const Profile& a, const Profile& b) {
    CHECK(a.description == b.description);
    CHECK(a.limits.wall_time == b.limits.wall_time);
    CHECK(a.limits.cpu_time == b.limits.cpu_time);
    CHECK(a.limits.memory == b.limits.memory);
    CHECK(a.limits.max_procs == b.limits.max_procs);
    CHECK(a.limits.open_files == b.limits.open_files);
    CHECK(a.limits.file_size == b.limits.file_size);
    CHECK(a.limits.tmp_size == b.limits.tmp_size);
    CHECK(a.limits.output_limit == b.limits.output_limit);
    CHECK(a.network.mode == b.network.mode);
    CHECK(a.network.allow.rules() == b.network.allow.rules());
    CHECK(a.ro_paths == b.ro_paths);
    CHECK(a.interpreter == b.interpreter);
    CHECK(a.interpreter_args == b.interpreter_args);
    CHECK(a.env_set == b.env_set);
    CHECK(a.env_pass == b.env_pass);
    // Covers whatever keys are added later (e.g. [seccomp]) without listing them here.
    CHECK(pysandbox::to_toml(a) == pysandbox::to_toml(b));
}

// Sets or unsets one environment variable, restoring it afterwards.
class EnvVar {
  public:
    explicit EnvVar(std::string name) : name_(std::move(name)) {
        if (const char* value = std::getenv(name_.c_str())) saved_ = value;
    }
    ~EnvVar() {
        if (saved_)
            ::setenv(name_.c_str(), saved_->c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }
    EnvVar(const EnvVar&) = delete;
    EnvVar& operator=(const EnvVar&) = delete;
    void set(const char* value) { ::setenv(name_.c_str(), value, 1); }
    void unset() { ::unsetenv(name_.c_str()); }

  private:
    std::string name_;
    std::optional<std::string> saved_;
};

}  // namespace

TEST_SUITE("profile") {
    TEST_CASE("the shipped default profile: 5s, 256MiB, no network, 64MiB /tmp") {
        const Dirs dirs{kShippedProfiles};
        Profile p = pysandbox::load_profile("default", dirs);
        CHECK(p.name == "default");
        CHECK(p.sources == std::vector<fs::path>{kShippedProfiles / "default.toml"});
        CHECK(p.limits.wall_time == 5000ms);
        CHECK(p.limits.cpu_time == 5000ms);
        CHECK(p.limits.memory == 256 * kMiB);
        CHECK(p.network.mode == NetMode::none);
        CHECK(p.network.allow.empty());
        CHECK(p.limits.tmp_size == 64 * kMiB);
        CHECK(p.interpreter == "/usr/bin/python3");
        CHECK(p.interpreter_args == Strings{"-s"});
        CHECK(p.env_pass.empty());
        CHECK(p.env_set.at("HOME") == "/tmp");
        CHECK(p.env_set.at("PYTHONDONTWRITEBYTECODE") == "1");
        CHECK(p.env_set.count("LD_PRELOAD") == 0);
        CHECK(p.env_set.count("PYTHONPATH") == 0);
    }

    TEST_CASE("a profile without extends builds on default; extends = \"\" on nothing") {
        const Dirs dirs{kShippedProfiles};
        const Profile base = pysandbox::load_profile("default", dirs);
        REQUIRE_FALSE(base.ro_paths.empty());
        Profile p =
            pysandbox::load_profile_text("[limits]\nwall_time = \"3s\"\n", "own.toml", dirs);
        CHECK(p.limits.wall_time == 3000ms);
        CHECK(p.limits.memory == base.limits.memory);
        CHECK(p.ro_paths == base.ro_paths);
        CHECK(p.sources == std::vector<fs::path>{"own.toml", kShippedProfiles / "default.toml"});
        Profile bare = pysandbox::load_profile_text("extends = \"\"\n", "bare.toml", dirs);
        CHECK(bare.ro_paths.empty());
        CHECK(bare.sources == std::vector<fs::path>{"bare.toml"});
    }

    TEST_CASE("every shipped profile loads and survives a round trip") {
        const Dirs dirs{kShippedProfiles};
        auto shipped = pysandbox::list_profiles(dirs);
        REQUIRE(shipped.count("default") == 1);
        for (const auto& [name, file] : shipped) {
            CAPTURE(name);
            Profile p = pysandbox::load_profile(name, dirs);
            Profile again = pysandbox::load_profile_text(pysandbox::to_toml(p), "again.toml", {});
            check_same_settings(p, again);
        }
    }

    TEST_CASE("an unknown top-level key: file:line:col, the key, and the known keys") {
        fs::path file = kFixtures / "unknown_top_level.toml";
        std::string message = load_error(file);
        CHECK(message.starts_with(file.string() + ":3:1: colour: unknown key (known: "));
        CHECK(contains(message, "limits"));
        CHECK(contains(message, "extends"));
    }

    TEST_CASE("a misspelt key in [limits] names limits.KEY and the key it most likely meant") {
        fs::path file = kFixtures / "unknown_limits_key.toml";
        CHECK(load_error(file) ==
              file.string() + ":4:3: limits.wal_time: unknown key; did you mean limits.wall_time?");
    }

    TEST_CASE("a wrong type points at the value") {
        fs::path file = kFixtures / "wrong_type.toml";
        CHECK(load_error(file) ==
              file.string() + ":3:10: limits.memory: expected a string, found integer");
    }

    TEST_CASE("a bad unit points at the value and says what would do") {
        fs::path file = kFixtures / "bad_unit.toml";
        CHECK(load_error(file) == file.string() +
                                      ":3:14: limits.cpu_time: invalid duration \"12 parsecs\" "
                                      "(unknown unit \"parsecs\"; expected e.g. 5, 0.5, 250ms, "
                                      "1.5s, 1m30s, 2h)");
    }

    TEST_CASE("a bad network mode lists the modes") {
        fs::path file = kFixtures / "bad_network_mode.toml";
        CHECK(load_error(file) == file.string() +
                                      ":2:8: network.mode: expected one of \"none\", "
                                      "\"loopback\", \"proxy\"; found \"wifi\"");
    }

    TEST_CASE("a TOML syntax error carries toml++'s line and column") {
        fs::path file = kFixtures / "syntax_error.toml";
        std::string message = load_error(file);
        // The text after the position is toml++'s own ("Error while parsing table header: ...").
        CHECK(message.starts_with(file.string() + ":2:8: "));
        CHECK(contains(message, "table header"));
    }

    TEST_CASE("more type and value errors, each naming the dotted key") {
        CHECK(text_error("[limits]\nmax_procs = 0\n") ==
              "inline.toml:2:13: limits.max_procs: must be at least 1");
        CHECK(text_error("[limits]\nmax_procs = \"8\"\n") ==
              "inline.toml:2:13: limits.max_procs: expected an integer, found string");
        CHECK(text_error("[filesystem]\nro = \"/usr\"\n") ==
              "inline.toml:2:6: filesystem.ro: expected an array of strings, found string");
        CHECK(text_error("[filesystem]\nro = [\"/usr\", 3]\n") ==
              "inline.toml:2:6: filesystem.ro: expected a string, found integer");
        CHECK(text_error("extends = 3\n") ==
              "inline.toml:1:11: extends: expected a string, found integer");
        CHECK(
            text_error("[limits.wall_time]\nvalue = \"5s\"\n")
                .starts_with("inline.toml:1:1: limits.wall_time: expected a string, found table"));
        CHECK(text_error("[limits.extra]\nx = 1\n") ==
              "inline.toml:1:9: limits.extra: unknown key ([limits] accepts: artifact_size, "
              "artifacts_total, cpu_time, cpus, file_size, idle_timeout, inotify_instances, "
              "inotify_watches, lifetime, max_procs, "
              "memory, "
              "open_files, "
              "output_limit, pending_signals, tmp_size, wall_time)");
    }

    // Regression: a table-valued key was checked as a whole, so the error pointed at the
    // [env.set] header and named "env.set", not the variable.
    TEST_CASE("a wrong value inside [env.set] names env.set.NAME and points at it") {
        std::string message = text_error("[env.set]\nGOOD = \"1\"\nBAD = 2\n");
        CHECK(message == "inline.toml:3:7: env.set.BAD: expected a string, found integer");
    }

    TEST_CASE("a malformed network.allow entry names network.allow[N] and points at it") {
        CHECK(
            text_error("[network]\nmode = \"proxy\"\nallow = [\"ok.org:443\",\n  \"bad.org\"]\n") ==
            "inline.toml:4:3: network.allow[1]: \"bad.org\": expected HOST:PORT");
        CHECK(text_error("[network]\nallow = [\"*.a.org:99999\"]\n") ==
              "inline.toml:2:10: network.allow[0]: \"*.a.org:99999\": port 99999 is outside "
              "1-65535");
        CHECK(text_error("[network]\nallow = [\"a.org:1\", 2]\n") ==
              "inline.toml:2:9: network.allow: expected a string, found integer");
    }

    // Regression: find_profile's error escaped without the extending file's file:line:col and
    // without "extends".
    TEST_CASE("extends of a profile name that no search dir has") {
        fs::path file = kFixtures / "extends_missing_name.toml";
        std::string message = load_error(file, {kFixtures});
        CHECK(message.starts_with(file.string() + ":2:11: extends: "));
        CHECK(contains(message, "profile \"no-such-profile\" not found"));
    }

    TEST_CASE("limits a Plan cannot use are refused where the profile says them") {
        // Regression: these loaded, and make_plan then blamed "--timeout:" / "--memory:", flags
        // that were never given.
        CHECK(text_error("[limits]\nwall_time = \"0s\"\n") ==
              "inline.toml:2:13: limits.wall_time: must be more than 0");
        CHECK(text_error("[limits]\nmemory = \"1MiB\"\n") ==
              "inline.toml:2:10: limits.memory: at least 16MiB is needed");
    }

    TEST_CASE("extends of a file that does not exist") {
        fs::path file = kFixtures / "extends_missing_file.toml";
        std::string message = load_error(file);
        CHECK(message.starts_with(file.string() + ":2:11: extends: profile file "));
        CHECK(message.ends_with("no-such-profile.toml not found"));
    }

    TEST_CASE("extends of a path the host cannot look at is a profile error, not a crash") {
        // std::filesystem used to throw past the ProfileError handlers: "internal error".
        std::string too_long;
        for (int i = 0; i < 3000; ++i) too_long += "x/";
        std::string message = text_error("extends = \"" + too_long + "p.toml\"\n");
        CHECK(message.starts_with("inline.toml:1:11: extends: profile file "));
        CHECK(message.ends_with(": File name too long"));
    }

    TEST_CASE("non-ASCII outside strings and comments is refused before toml++ parses it") {
        // toml++ 3.3 hit __builtin_unreachable() on these (fuzz/regressions/profile).
        CHECK(text_error("x = 1 \xc3\x9a\n") ==
              "inline.toml:1:7: a non-ASCII character outside a string or a comment");
        CHECK(text_error("\xc3\x9a") ==
              "inline.toml:1:1: a non-ASCII character outside a string or a comment");
        CHECK(text_error("description = \"\"\"x\"\"\"\"\n\xc3\x9a = 1\n") ==
              "inline.toml:2:1: a non-ASCII character outside a string or a comment");
        // A quote inside a bare token opens no string for toml++, so none for the scanner.
        CHECK(text_error("x =1\"\xef\xbb\xbb\"\n") ==
              "inline.toml:1:6: a non-ASCII character outside a string or a comment");
        // In strings, quoted keys and comments it is fine.
        std::string fine =
            "# caf\xc3\xa9\ndescription = \"\\\"caf\xc3\xa9\" # \xc3\xa9\n"
            "[env.set]\n\"\xc3\x9a\" = '\xc3\x9a'\nB = \"\"\"\n\xc3\x9a\"\"\"\n"
            "[python]\nargs = [\n  # \xc3\xa9\n  \"\xc3\xa9\", '\xc3\x9a']\n";
        CHECK(text_error(fine) == "(no error)");
    }

    TEST_CASE("an extends cycle is found, wherever it is entered") {
        const Dirs dirs{kFixtures / "cycle"};
        // a -> b -> a: the error is at b's extends, which closes the cycle.
        std::string from_a = load_error(kFixtures / "cycle" / "a.toml", dirs);
        CHECK(contains(from_a, "b.toml:2:11: extends: \"./a.toml\" makes a cycle"));
        std::string by_name = message_of<ProfileError>([&] { pysandbox::load_profile("a", dirs); });
        CHECK(contains(by_name, "b.toml:2:11: extends: \"./a.toml\" makes a cycle"));
        // b -> a -> b: now a closes it.
        std::string from_b = load_error(kFixtures / "cycle" / "b.toml", dirs);
        CHECK(contains(from_b, "a.toml:1:11: extends: \"./b.toml\" makes a cycle"));
        // A profile that extends itself by name.
        TempDir dir;
        write_file(dir / "self.toml", "extends = \"self\"\n");
        std::string self =
            message_of<ProfileError>([&] { pysandbox::load_profile("self", Dirs{dir.path()}); });
        CHECK(self == (dir / "self.toml").string() + ":1:11: extends: \"self\" makes a cycle");
    }

    TEST_CASE("extends: tables merge key by key, lists replace, env.set merges") {
        const Dirs dirs{kFixtures / "chain"};
        Profile p = pysandbox::load_profile("child", dirs);
        CHECK(p.name == "child");
        CHECK(p.sources == std::vector<fs::path>{kFixtures / "chain" / "child.toml",
                                                 kFixtures / "chain" / "parent.toml"});
        CHECK(p.limits.memory == 512 * kMiB);  // the child's
        CHECK(p.limits.wall_time == 7000ms);   // inherited
        CHECK(p.limits.max_procs == 4);        // inherited
        CHECK(p.limits.cpu_time == 5000ms);    // neither sets it: the built-in default
        CHECK(p.ro_paths == Strings{"/opt"});  // replaced, not appended
        CHECK(p.interpreter_args == Strings{"-s", "-E"});
        CHECK(p.description == "parent");
        CHECK(p.env_set == std::map<std::string, std::string>{
                               {"A", "from parent"}, {"B", "from child"}, {"C", "from child"}});
    }

    TEST_CASE("extends with '/' is relative to the extending file, not the current directory") {
        TempDir elsewhere;
        CurrentDir cd(elsewhere.path());
        Profile p = pysandbox::load_profile((kFixtures / "chain" / "grandchild.toml").string(),
                                            Dirs{kFixtures / "chain"});
        CHECK(p.description == "grandchild");
        CHECK(p.limits.max_procs == 9);
        CHECK(p.limits.memory == 512 * kMiB);
        CHECK(p.limits.wall_time == 7000ms);
        CHECK(p.ro_paths == Strings{"/opt"});
        CHECK(p.sources.size() == 3);
    }

    TEST_CASE("a file never sees the keys of the files it extends when validated") {
        // The parent's error is reported in the parent, even when the child is what was asked.
        TempDir dir;
        write_file(dir / "broken.toml", "[limits]\nmemory = \"lots\"\n");
        write_file(dir / "fine.toml", "extends = \"broken\"\n");
        std::string message =
            message_of<ProfileError>([&] { pysandbox::load_profile("fine", Dirs{dir.path()}); });
        CHECK(message.starts_with((dir / "broken.toml").string() + ":2:10: limits.memory: "));
    }

    TEST_CASE("lookup: a bare name is searched in the dirs in order, first wins") {
        TempDir first, second;
        write_file(first / "both.toml", "description = \"first\"\n");
        write_file(second / "both.toml", "description = \"second\"\n");
        write_file(second / "only2.toml", "description = \"only in second\"\n");
        const Dirs dirs{first.path(), second.path()};

        CHECK(pysandbox::find_profile("both", dirs) == first / "both.toml");
        CHECK(pysandbox::load_profile("both", dirs).description == "first");
        CHECK(pysandbox::load_profile("both", Dirs{second.path(), first.path()}).description ==
              "second");
        CHECK(pysandbox::find_profile("only2", dirs) == second / "only2.toml");
        CHECK(pysandbox::load_profile("only2", dirs).description == "only in second");

        auto listed = pysandbox::list_profiles(dirs);
        CHECK(listed.size() == 2);
        CHECK(listed.at("both") == first / "both.toml");
        CHECK(listed.at("only2") == second / "only2.toml");

        CHECK(message_of<ProfileError>([&] { pysandbox::find_profile("nope", dirs); }) ==
              "profile \"nope\" not found (looked in " + first.path().string() + ", " +
                  second.path().string() + "; a path with '/' names a file)");
        // A typo gets the nearest name; a name far from all gets none.
        CHECK(message_of<ProfileError>([&] {
                  pysandbox::find_profile("bith", dirs);
              }).ends_with("; did you mean \"both\"?"));
        CHECK(message_of<ProfileError>([&] {
                  pysandbox::find_profile("only", dirs);
              }).ends_with("; did you mean \"only2\"?"));
        CHECK(message_of<ProfileError>([&] {
                  pysandbox::find_profile("bo", dirs);
              }).ends_with("names a file)"));
    }

    TEST_CASE("lookup: a bare name is never found in the current directory") {
        TempDir here, dirs_dir;
        write_file(here / "local.toml", "description = \"from the current directory\"\n");
        CurrentDir cd(here.path());
        CHECK_THROWS_AS(pysandbox::load_profile("local", Dirs{dirs_dir.path()}), ProfileError);
        CHECK_THROWS_AS(pysandbox::load_profile("local", Dirs{}), ProfileError);
        // A path is a path: ./local.toml is the file in the current directory.
        CHECK(pysandbox::load_profile("./local.toml", Dirs{}).description ==
              "from the current directory");
    }

    TEST_CASE(
        "lookup: the default search dirs are absolute, whatever XDG_CONFIG_HOME and HOME say") {
        EnvVar xdg("XDG_CONFIG_HOME"), home("HOME");
        xdg.set("/xdg");
        home.set("/home/someone");
        Dirs dirs = pysandbox::profile_search_dirs();
        REQUIRE(dirs.size() >= 2);
        CHECK(dirs[0] == "/xdg/pysandbox/profiles");
        CHECK(dirs[1] == "/etc/pysandbox/profiles");

        xdg.unset();
        CHECK(pysandbox::profile_search_dirs()[0] == "/home/someone/.config/pysandbox/profiles");

        // Relative values would make the lookup depend on the current directory: ignored.
        for (const char* relative : {".", "", "config"}) {
            xdg.set(relative);
            home.set(relative);
            for (const fs::path& dir : pysandbox::profile_search_dirs()) {
                CAPTURE(dir);
                CHECK(dir.is_absolute());
            }
            CHECK(pysandbox::profile_search_dirs()[0] == "/etc/pysandbox/profiles");
        }
    }

    TEST_CASE("lookup: a reference with '/' is a file, whatever the search dirs hold") {
        TempDir dirs_dir, other;
        write_file(dirs_dir / "p.toml", "description = \"search dir\"\n");
        write_file(other / "p.toml", "description = \"the file\"\n");
        write_file(other / "no-suffix", "description = \"any name\"\n");
        const Dirs dirs{dirs_dir.path()};
        CHECK(pysandbox::load_profile((other / "p.toml").string(), dirs).description == "the file");
        CHECK(pysandbox::load_profile((other / "no-suffix").string(), dirs).description ==
              "any name");
        CHECK(message_of<ProfileError>([&] {
                  pysandbox::load_profile((other / "missing.toml").string(), dirs);
              }) == "profile file " + (other / "missing.toml").string() + " not found");
        CHECK(message_of<ProfileError>([&] {
                  pysandbox::load_profile(other.path().string() + "/", dirs);
              }) == other.path().string() + "/: is a directory");
    }

    TEST_CASE("lookup: names that could escape the search dirs are refused") {
        TempDir dir;
        write_file(dir / ".hidden.toml", "");
        const Dirs dirs{dir.path()};
        CHECK(message_of<ProfileError>([&] { pysandbox::find_profile("", dirs); }) ==
              "invalid profile name \"\"");
        CHECK(message_of<ProfileError>([&] { pysandbox::find_profile(".hidden", dirs); }) ==
              "invalid profile name \".hidden\"");
        CHECK(message_of<ProfileError>([&] { pysandbox::find_profile("..", dirs); }) ==
              "invalid profile name \"..\"");
    }

    TEST_CASE("to_toml round-trips every field") {
        Profile p = pysandbox::load_profile_text(R"(
description = "every key, with values a formatter could get wrong"
[limits]
wall_time = "1500ms"
cpu_time = "2m"
memory = "1.5GiB"
max_procs = 3
open_files = 99
file_size = "1000"
tmp_size = "4KiB"
output_limit = "3MiB"
[network]
mode = "loopback"
allow = ["example.com:443", "[::1]:80"]
[filesystem]
ro = ["/usr", "/opt/with space", "/bin"]
[python]
interpreter = "/opt/py/bin/python3.12"
args = ["-s", "-X", "utf8"]
[env]
pass = ["TERM", "LANG"]
[env.set]
"WITH.DOT" = "x"
QUOTES = "say \"hi\"\\n"
UNICODE = "Grüße ✓"
EMPTY = ""
)",
                                                 "full.toml", {});
        CHECK(p.limits.memory == 1536 * kMiB);
        CHECK(p.limits.file_size == 1000);
        CHECK(p.env_set.at("WITH.DOT") == "x");
        CHECK(p.env_set.at("QUOTES") == "say \"hi\"\\n");

        std::string text = pysandbox::to_toml(p);
        Profile again = pysandbox::load_profile_text(text, "again.toml", {});
        check_same_settings(p, again);
        CHECK(again.name == "again");
        CHECK(again.sources == std::vector<fs::path>{"again.toml"});
    }

    TEST_CASE("to_toml of a resolved chain is self-contained: it extends nothing") {
        Profile child = pysandbox::load_profile("child", Dirs{kFixtures / "chain"});
        std::string text = pysandbox::to_toml(child);
        CHECK(contains(text, "extends = ''\n"));
        // Read where a default exists, it still builds on nothing but itself.
        Profile again = pysandbox::load_profile_text(text, "again.toml", Dirs{kShippedProfiles});
        check_same_settings(child, again);
        CHECK(again.sources == std::vector<fs::path>{"again.toml"});
    }

    TEST_CASE("to_toml of the built-in defaults loads back to the built-in defaults") {
        Profile defaults;
        Profile again = pysandbox::load_profile_text(pysandbox::to_toml(defaults), "d.toml", {});
        check_same_settings(defaults, again);
    }

    TEST_CASE("the key table documents each key's built-in default, as a profile would write it") {
        std::map<std::string, std::string> defaults;
        for (const auto& key : pysandbox::profile_keys())
            defaults.emplace(std::string(key.path), key.default_value);
        CHECK(defaults.at("limits.wall_time") == "'5s'");
        CHECK(defaults.at("limits.memory") == "'256MiB'");
        CHECK(defaults.at("limits.max_procs") == "64");
        CHECK(defaults.at("network.mode") == "'none'");
        CHECK(defaults.at("seccomp.allow_processes") == "false");
        CHECK(defaults.at("filesystem.ro") == "[]");
        CHECK(defaults.at("env.set") == "{}");
        CHECK(defaults.at("extends").empty());
    }
}
