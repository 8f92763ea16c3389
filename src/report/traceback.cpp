#include "report/traceback.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

namespace pysandbox {
namespace {

constexpr std::string_view kTracebackHeader = "Traceback (most recent call last):";
constexpr std::string_view kFramePrefix = "  File \"";

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        std::size_t end = text.find('\n');
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(0, end);
        if (line.ends_with('\r')) line.remove_suffix(1);
        lines.push_back(line);
        text.remove_prefix(std::min(end + 1, text.size()));
    }
    return lines;
}

// `  File "/sandbox/x.py", line 4, in <module>` (or without ", in ..." for a SyntaxError).
struct Frame {
    std::string_view file;
    std::optional<long> line;
    std::size_t first = 0;  // index of its "File" line; its source lines follow up to `last`
    std::size_t last = 0;
};

std::optional<Frame> parse_frame_line(std::string_view text) {
    if (!text.starts_with(kFramePrefix)) return std::nullopt;
    text.remove_prefix(kFramePrefix.size());
    std::size_t quote = text.find("\", line ");
    if (quote == std::string_view::npos) return std::nullopt;
    Frame frame;
    frame.file = text.substr(0, quote);
    std::string_view number = text.substr(quote + 8);
    long value = 0;
    auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    // Python numbers lines from 1; the script writes this text and could print any number.
    if (error == std::errc{} && value > 0) frame.line = value;
    std::string_view rest(end, static_cast<std::size_t>(number.data() + number.size() - end));
    if (!rest.empty() && !rest.starts_with(", in ")) return std::nullopt;
    return frame;
}

bool is_source_line(std::string_view line) {
    return line.starts_with("    ");
}

// The frames starting at `at`, each with its source and caret lines; `at` ends past them.
std::vector<Frame> parse_frames(const std::vector<std::string_view>& lines, std::size_t& at) {
    std::vector<Frame> frames;
    while (at < lines.size()) {
        std::optional<Frame> frame = parse_frame_line(lines[at]);
        if (!frame) break;
        frame->first = at++;
        while (at < lines.size() && is_source_line(lines[at])) ++at;
        frame->last = at;
        frames.push_back(*frame);
    }
    return frames;
}

bool is_identifier_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// "module.TypeName: message" or a bare "TypeName".
std::optional<std::pair<std::string_view, std::string_view>> parse_exception_line(
    std::string_view line) {
    std::size_t colon = line.find(": ");
    std::string_view type = colon == std::string_view::npos ? line : line.substr(0, colon);
    if (type.empty() || (type[0] >= '0' && type[0] <= '9') || type.front() == '.' ||
        type.back() == '.')
        return std::nullopt;
    if (!std::ranges::all_of(type, [](char c) { return is_identifier_char(c) || c == '.'; }))
        return std::nullopt;
    std::string_view message = colon == std::string_view::npos ? "" : line.substr(colon + 2);
    return std::pair{type, message};
}

std::string join_lines(const std::vector<std::string_view>& lines, std::size_t from,
                       std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to; ++i) {
        out.append(lines[i]);
        out += '\n';
    }
    return out;
}

std::size_t end_without_blank_lines(const std::vector<std::string_view>& lines) {
    std::size_t end = lines.size();
    while (end > 0 && lines[end - 1].find_first_not_of(" \t") == std::string_view::npos) --end;
    return end;
}

bool is_sandbox_frame(const Frame& frame) {
    return frame.file.starts_with(kSandboxPythonDir) || frame.file == "<frozen runpy>";
}

std::string hint_for(std::string_view type, std::string_view message) {
    auto contains = [&](std::string_view part) { return message.find(part) != message.npos; };
    if (type == "ModuleNotFoundError" || type == "ImportError")
        return "only the standard library, the modules installed on the host's read-only paths "
               "(`pysandbox profile show` lists them) and a package environment's "
               "(run --with PKG, or the script's `# /// script` dependencies; README.md, "
               "Packages) are available";
    if (type == "MemoryError")
        return "the script ran out of its memory limit; process the data in smaller pieces or "
               "raise --memory";
    if (contains("No space left on device"))
        return "/tmp inside the sandbox is full; write less or raise --tmp-size";
    if (contains("Read-only file system") || (type == "PermissionError" && !contains("policy")))
        return "only /tmp (the working directory is /tmp/work) is writable inside the sandbox";
    if (contains("Network is unreachable") || contains("Name or service not known") ||
        contains("Temporary failure in name resolution") || type == "socket.gaierror")
        return "the sandbox has no network unless the profile's network.mode allows it";
    if (contains("Operation not permitted"))
        return "the sandbox policy denied a system call; the run's violations list it";
    if (type == "FileNotFoundError")
        return "the script sees only its working directory /tmp/work and the read-only system "
               "paths; pass data files with --input";
    return {};
}

PythonException make_exception(const std::vector<std::string_view>& lines,
                               const std::vector<Frame>& frames, bool with_header,
                               std::size_t exception_at, std::string_view script_file) {
    const std::size_t end = end_without_blank_lines(lines);
    auto [type, first_message_line] = *parse_exception_line(lines[exception_at]);
    PythonException e;
    e.type = type;
    e.message = first_message_line;
    for (std::size_t i = exception_at + 1; i < end; ++i) (e.message += '\n').append(lines[i]);

    if (with_header) e.traceback = std::string(kTracebackHeader) + "\n";
    for (const Frame& frame : frames) {
        if (is_sandbox_frame(frame)) continue;
        e.traceback += join_lines(lines, frame.first, frame.last);
        if (!script_file.empty() && frame.file == script_file && frame.line) e.line = frame.line;
    }
    e.traceback += join_lines(lines, exception_at, end);

    e.summary =
        e.type + (e.message.empty() ? "" : ": " + e.message.substr(0, e.message.find('\n')));
    if (e.line) e.summary += " (line " + std::to_string(*e.line) + ")";
    e.hint = hint_for(e.type, e.message);
    return e;
}

}  // namespace

std::optional<PythonException> parse_python_exception(std::string_view stderr_text,
                                                      std::string_view script_file) {
    const std::vector<std::string_view> lines = split_lines(stderr_text);
    // The last traceback is the exception that ended the script; chained ones come before it.
    for (std::size_t i = lines.size(); i-- > 0;) {
        if (lines[i] != kTracebackHeader) continue;
        std::size_t at = i + 1;
        std::vector<Frame> frames = parse_frames(lines, at);
        if (frames.empty() || at >= lines.size() || !parse_exception_line(lines[at])) break;
        return make_exception(lines, frames, true, at, script_file);
    }
    // A SyntaxError in the script itself is printed without the header: one frame, no "in".
    for (std::size_t i = lines.size(); i-- > 0;) {
        std::optional<Frame> frame = parse_frame_line(lines[i]);
        if (!frame) continue;
        std::size_t at = i;
        std::vector<Frame> frames = parse_frames(lines, at);
        if (at >= lines.size() || !parse_exception_line(lines[at])) return std::nullopt;
        return make_exception(lines, frames, false, at, script_file);
    }
    return std::nullopt;
}

}  // namespace pysandbox
