#pragma once
// The package environments' store (`pysandbox env`): where it is, and what a run that names an
// environment gets from it. An environment is a directory envs/ID/ holding `site/` (what pip
// installed, mounted read-only at kPackagesDir inside) and `env.json` (what it is and was made
// from); ID is the SHA-256 of the interpreter, the platform and every installed file, so the
// same content is stored once. fronts/env.cpp builds, lists and removes them.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sys/unique_fd.hpp"

namespace pysandbox::env_store {

// The variable that moves the store (the flag --cache-dir overrides it).
inline constexpr std::string_view kCacheVariable = "PYSANDBOX_CACHE_DIR";
// root's, unless moved.
inline constexpr std::string_view kSystemStore = "/var/cache/pysandbox";

// The store: `flag` if given, else $PYSANDBOX_CACHE_DIR, else /var/cache/pysandbox for root and
// $XDG_CACHE_HOME/pysandbox (~/.cache/pysandbox) for everyone else. Throws UsageError when none
// can be named.
std::filesystem::path store_dir(const std::optional<std::string>& flag,
                                const std::vector<std::string>& host_env);

// A directory of the store (`name` beneath `at`; the store itself: AT_FDCWD and its path),
// opened without following a link and trusted only when it is the caller's (or root's) and
// nobody else can write in it: what another user could change is never built in nor run.
// Throws UsageError saying why and what to do.
sys::UniqueFd open_trusted(int at, const std::string& name, const std::filesystem::path& path);

// The environment's directories, the store's to its site/, each open_trusted.
void check_env_trusted(const std::filesystem::path& store, const std::string& id);

// 64 lowercase hex digits.
bool is_full_id(std::string_view id);

// The environment an ID names: the whole ID, or a prefix of at least 8 hex digits that names
// exactly one. Throws UsageError (unknown, ambiguous, malformed) with what to do.
std::string resolve_id(const std::filesystem::path& store, std::string_view id);

// envs/ID, and its site/ directory.
std::filesystem::path env_dir(const std::filesystem::path& store, const std::string& id);
std::filesystem::path site_dir(const std::filesystem::path& store, const std::string& id);

// The environments present (complete ones: env.json in place), by ID.
std::vector<std::string> list_ids(const std::filesystem::path& store);

// PEP 723: what the `# /// script` block of a script's text says; nullopt when it has none.
// Throws UsageError (naming `origin`) when the block is malformed.
struct InlineMetadata {
    std::vector<std::string> dependencies;
    std::string requires_python;     // "" when not given
    std::string requires_python_at;  // "ORIGIN:LINE: the `# /// script` block", for messages
};
std::optional<InlineMetadata> inline_metadata(std::string_view text, const std::string& origin);

// inline_metadata's dependencies alone.
std::optional<std::vector<std::string>> inline_dependencies(std::string_view text,
                                                            const std::string& origin);

}  // namespace pysandbox::env_store
