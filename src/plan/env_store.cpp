#include "plan/env_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <sstream>

#include <toml++/toml.h>

#include "sys/errors.hpp"

namespace pysandbox::env_store {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> variable(const std::vector<std::string>& host_env,
                                    std::string_view name) {
    const std::string prefix = std::string(name) + "=";
    for (const std::string& entry : host_env)
        if (entry.starts_with(prefix)) return entry.substr(prefix.size());
    return std::nullopt;
}

bool is_hex(std::string_view text) {
    return std::ranges::all_of(
        text, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

fs::path store_dir(const std::optional<std::string>& flag,
                   const std::vector<std::string>& host_env) {
    auto absolute = [](const std::string& dir, std::string_view from) {
        if (dir.empty() || dir.front() != '/')
            throw UsageError(std::string(from) + ": \"" + dir + "\" must be an absolute path");
        fs::path path = fs::path(dir).lexically_normal();
        return path.has_filename() || path == path.root_path() ? path : path.parent_path();
    };
    if (flag) return absolute(*flag, "--cache-dir");
    if (auto dir = variable(host_env, kCacheVariable); dir && !dir->empty())
        return absolute(*dir, kCacheVariable);
    if (::geteuid() == 0) return fs::path(kSystemStore);
    if (auto xdg = variable(host_env, "XDG_CACHE_HOME"); xdg && xdg->starts_with('/'))
        return fs::path(*xdg) / "pysandbox";
    if (auto home = variable(host_env, "HOME"); home && home->starts_with('/'))
        return fs::path(*home) / ".cache/pysandbox";
    throw UsageError("no place for the package store: set XDG_CACHE_HOME or " +
                     std::string(kCacheVariable) + ", or give --cache-dir DIR");
}

bool is_full_id(std::string_view id) {
    return id.size() == 64 && is_hex(id);
}

fs::path env_dir(const fs::path& store, const std::string& id) {
    return store / "envs" / id;
}

fs::path site_dir(const fs::path& store, const std::string& id) {
    return env_dir(store, id) / "site";
}

std::vector<std::string> list_ids(const fs::path& store) {
    std::vector<std::string> ids;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(store / "envs", ec)) {
        const std::string name = entry.path().filename().string();
        if (is_full_id(name) && fs::is_regular_file(entry.path() / "env.json", ec))
            ids.push_back(name);
    }
    std::ranges::sort(ids);
    return ids;
}

std::string resolve_id(const fs::path& store, std::string_view id) {
    if (id.size() < 8 || id.size() > 64 || !is_hex(id))
        throw UsageError("\"" + std::string(id) +
                         "\" is not an environment ID (8 to 64 hex digits, as `pysandbox env "
                         "list` shows)");
    std::vector<std::string> matches;
    for (const std::string& known : list_ids(store))
        if (known.starts_with(id)) matches.push_back(known);
    if (matches.size() == 1) return matches.front();
    if (matches.empty())
        throw UsageError("no environment " + std::string(id) + " in " + store.string() +
                         " (`pysandbox env list` shows what there is; `pysandbox env create` "
                         "makes one)");
    throw UsageError("environment ID " + std::string(id) + " is ambiguous (" +
                     std::to_string(matches.size()) + " match); give more of it");
}

std::optional<std::vector<std::string>> inline_dependencies(std::string_view text,
                                                            const std::string& origin) {
    std::istringstream lines{std::string(text)};
    std::string line;
    bool inside = false;
    std::string toml;
    while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!inside) {
            inside = line == "# /// script";
            continue;
        }
        if (line == "# ///") {
            try {
                const toml::table table = toml::parse(toml, origin);
                std::vector<std::string> deps;
                if (const toml::array* list = table["dependencies"].as_array())
                    for (const auto& item : *list) {
                        const auto spec = item.value<std::string>();
                        if (!spec) throw UsageError(origin + ": dependencies: not a string");
                        deps.push_back(*spec);
                    }
                return deps;
            } catch (const toml::parse_error& e) {
                throw UsageError(origin +
                                 ": the `# /// script` block: " + std::string(e.description()));
            }
        }
        if (line == "#")
            toml += "\n";
        else if (line.starts_with("# "))
            toml += line.substr(2) + "\n";
        else
            throw UsageError(origin + ": the `# /// script` block ends without `# ///`");
    }
    if (inside) throw UsageError(origin + ": the `# /// script` block ends without `# ///`");
    return std::nullopt;
}

}  // namespace pysandbox::env_store
