#include "plan/env_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

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

sys::UniqueFd open_trusted(int at, const std::string& name, const fs::path& path) {
    const std::string fix =
        "; use a directory only you can write (--cache-dir, " + std::string(kCacheVariable) + ")";
    sys::UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd && (errno == ELOOP || errno == ENOTDIR))
        throw UsageError("the package store's " + path.string() +
                         " is a symbolic link or not a directory" + fix);
    if (!fd) throw SysError("open(" + path.string() + ", O_DIRECTORY|O_NOFOLLOW)", errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw SysError("fstat(" + path.string() + ")", errno);
    if (st.st_uid != ::geteuid() && st.st_uid != 0)
        throw UsageError("the package store's " + path.string() + " belongs to uid " +
                         std::to_string(st.st_uid) + ", who could change what runs" + fix);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777U);
        throw UsageError("the package store's " + path.string() + " is writable by " +
                         ((st.st_mode & S_IWOTH) != 0 ? "every user" : "its group") + " (mode " +
                         mode + "), who could change what runs" + fix);
    }
    return fd;
}

void check_env_trusted(const fs::path& store, const std::string& id) {
    const sys::UniqueFd root = open_trusted(AT_FDCWD, store.string(), store);
    const sys::UniqueFd envs = open_trusted(root.get(), "envs", store / "envs");
    const sys::UniqueFd env = open_trusted(envs.get(), id, env_dir(store, id));
    open_trusted(env.get(), "site", site_dir(store, id));
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

namespace {

// The text's lines without their ends ("\r\n" read as "\n", as Python's text mode reads a
// script), each with whether a newline ended it.
struct Line {
    std::string_view text;
    bool ended;
};
std::vector<Line> split_lines(std::string_view text) {
    std::vector<Line> lines;
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        if (end != std::string_view::npos && line.ends_with('\r')) line.remove_suffix(1);
        lines.push_back({line, end != std::string_view::npos});
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    }
    return lines;
}

// `# /// TYPE`: the TYPE, or empty when the line opens no block.
std::string_view block_type(const Line& line) {
    constexpr std::string_view kOpen = "# /// ";
    if (!line.ended || !line.text.starts_with(kOpen)) return {};
    const std::string_view type = line.text.substr(kOpen.size());
    const bool valid = !type.empty() && std::ranges::all_of(type, [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-';
    });
    return valid ? type : std::string_view{};
}

bool is_comment(std::string_view line) {
    return line == "#" || line.starts_with("# ");
}

struct Block {
    std::size_t open = 0;   // the index of its `# /// TYPE` line
    std::size_t close = 0;  // of its `# ///` line
};

}  // namespace

std::optional<InlineMetadata> inline_metadata(std::string_view text, const std::string& origin) {
    // PEP 723's regex, (?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$,
    // applied as re.finditer applies it, line by line: a block opens at `# /// TYPE`, runs
    // through the comment lines that follow, and closes at the last `# ///` among them (the
    // regex is greedy). Where it differs, it is uv's reading: an empty block is one, and an
    // opened `script` block that never closes is an error (the spec ignores it; a script whose
    // author meant a block is better told).
    const std::vector<Line> lines = split_lines(text);
    // last_close[j]: the last `# ///` line of the run of comment lines from line j on, found in
    // one pass from the end, so that lines of openers that never close cost no rescans (a script
    // of them must not take the host quadratic time before anything is sandboxed).
    std::vector<std::optional<std::size_t>> last_close(lines.size() + 1);
    for (std::size_t j = lines.size(); j-- > 0;) {
        if (!is_comment(lines[j].text)) continue;
        last_close[j] = last_close[j + 1];
        if (!last_close[j] && lines[j].text == "# ///") last_close[j] = j;
    }
    std::vector<Block> scripts;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string_view type = block_type(lines[i]);
        if (type.empty()) continue;
        const std::optional<std::size_t> close = last_close[i + 1];
        if (!close) {
            if (type == "script")
                throw UsageError(origin + ":" + std::to_string(i + 1) +
                                 ": the `# /// script` block (PEP 723) has no closing `# ///` "
                                 "line; every line up to it must start with `#`");
            continue;
        }
        if (type == "script") scripts.push_back({i, *close});
        i = *close;
    }
    if (scripts.empty()) return std::nullopt;
    if (scripts.size() > 1)
        throw UsageError(origin + ":" + std::to_string(scripts[1].open + 1) +
                         ": a second `# /// script` block (PEP 723 allows one)");
    const Block& block = scripts.front();
    std::string toml_text;
    for (std::size_t i = block.open + 1; i < block.close; ++i) {
        toml_text += lines[i].text.substr(lines[i].text.size() > 1 ? 2 : 1);
        toml_text += '\n';
    }
    const auto where = [&](std::size_t line) {
        return origin + ":" + std::to_string(block.open + 1 + line) + ": the `# /// script` block";
    };
    toml::table table;
    try {
        table = toml::parse(toml_text, origin);
    } catch (const toml::parse_error& e) {
        throw UsageError(where(e.source().begin.line) + ": " + std::string(e.description()));
    }
    InlineMetadata metadata;
    if (const toml::node* python = table.get("requires-python")) {
        if (!python->is_string())
            throw UsageError(where(python->source().begin.line) +
                             ": requires-python must be a string");
        metadata.requires_python = python->as_string()->get();
        metadata.requires_python_at = where(python->source().begin.line);
    }
    std::vector<std::string>& deps = metadata.dependencies;
    const toml::node* list = table.get("dependencies");
    if (list == nullptr) return metadata;
    if (!list->is_array())
        throw UsageError(where(list->source().begin.line) +
                         ": dependencies must be an array of strings");
    for (const toml::node& item : *list->as_array()) {
        const auto spec = item.value<std::string>();
        if (!spec || spec->empty() || spec->find_first_of("\r\n") != std::string::npos)
            throw UsageError(where(item.source().begin.line) +
                             ": each dependency must be a one-line string (a requirement as "
                             "pip reads it)");
        deps.push_back(*spec);
    }
    return metadata;
}

std::optional<std::vector<std::string>> inline_dependencies(std::string_view text,
                                                            const std::string& origin) {
    std::optional<InlineMetadata> metadata = inline_metadata(text, origin);
    if (!metadata) return std::nullopt;
    return std::move(metadata->dependencies);
}

}  // namespace pysandbox::env_store
