#include "fronts/junit.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "report/encoding.hpp"
#include "sys/errors.hpp"

namespace pysandbox {
namespace {

using ordered_json = nlohmann::ordered_json;

// Each stream of a job, and a failure's text, at most this much in the report.
constexpr std::size_t kOutputBound = 64 * 1024;
constexpr std::size_t kMessageBound = 4 * 1024;
// Room for the counts in the opening elements, filled in by finish() (spaces until then).
constexpr std::size_t kCountsRoom = 160;

// `text` cut to `bound` bytes at a whole character, saying how much was left out.
std::string bounded(std::string_view text, std::size_t bound) {
    if (text.size() <= bound) return std::string(text);
    const std::string_view kept = text.substr(0, encoding::whole_characters(text.substr(0, bound)));
    return std::string(kept) + "\n[pysandbox: " + std::to_string(text.size() - kept.size()) +
           " more bytes not shown]";
}

// A stream of the result as text: base64 (not UTF-8) decoded, its bytes made fit by xml_text.
std::string stream_of(const ordered_json& result, const char* name) {
    const auto it = result.find(name);
    if (it == result.end() || !it->is_string()) return {};
    std::string text = it->get<std::string>();
    const auto encodings = result.find("encoding");
    if (encodings != result.end() && encodings->is_object() &&
        encodings->value(name, std::string()) == "base64")
        text = encoding::decode_base64(text).value_or(std::string());
    return text;
}

std::string testcase_name(std::size_t line, const ordered_json& result) {
    const auto id = result.find("id");
    if (id == result.end() || id->is_null()) return "line " + std::to_string(line);
    if (id->is_string()) return id->get<std::string>();
    return id->dump();
}

// What the failure says in one line: pysandbox's message, else the exception's summary.
std::string failure_message(const ordered_json& result, const std::string& status) {
    const auto message = result.find("message");
    if (message != result.end() && message->is_string()) return message->get<std::string>();
    const auto exception = result.find("exception");
    if (exception != result.end() && exception->is_object()) {
        const auto summary = exception->find("summary");
        if (summary != exception->end() && summary->is_string()) return summary->get<std::string>();
    }
    return "status " + status;
}

std::string traceback_of(const ordered_json& result) {
    const auto exception = result.find("exception");
    if (exception == result.end() || !exception->is_object()) return {};
    const auto traceback = exception->find("traceback");
    return traceback != exception->end() && traceback->is_string() ? traceback->get<std::string>()
                                                                   : std::string();
}

void append_escaped_byte(std::string& out, unsigned char byte) {
    char text[8];
    std::snprintf(text, sizeof text, "\\x%02X", static_cast<unsigned>(byte));
    out += text;
}

}  // namespace

std::string xml_text(std::string_view text, bool attribute) {
    std::string out;
    out.reserve(text.size());
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const auto* end = p + text.size();
    while (p < end) {
        const unsigned char c = *p;
        if (c >= 0x80) {
            const int length = encoding::utf8_sequence(p, end);
            if (length <= 0) {  // not UTF-8: the replacement character, one per bad byte run
                out += "\xEF\xBF\xBD";
                p += length < 0 ? -length : 1;
                continue;
            }
            // U+FFFE and U+FFFF are well-formed UTF-8 that XML 1.0 forbids.
            if (length == 3 && p[0] == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF)) {
                out += p[2] == 0xBE ? "\\uFFFE" : "\\uFFFF";
            } else {
                out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(length));
            }
            p += length;
            continue;
        }
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;  // `]]>` never appears as it is
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            case '\t': out += attribute ? "&#9;" : "\t"; break;
            case '\n': out += attribute ? "&#10;" : "\n"; break;
            case '\r': out += "&#13;"; break;  // kept: a parser would turn a bare CR into LF
            default:
                if (c < 0x20 || c == 0x7F) {
                    append_escaped_byte(out, c);  // no XML 1.0 document may hold these
                } else {
                    out += static_cast<char>(c);
                }
        }
        ++p;
    }
    return out;
}

JunitReport::JunitReport(std::string path, std::string suite_name)
    : path_(std::move(path)), suite_name_(std::move(suite_name)) {
    if (path_.empty() || path_.back() == '/')
        throw UsageError("--junit " + path_ + ": a file name is needed");
    // A new file of our own (O_EXCL: never a name someone else made, nor a symlink's target).
    std::string name = path_ + ".XXXXXX";
    const int fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0)
        throw UsageError("--junit " + path_ +
                         ": cannot create a file beside it: " + std::strerror(errno));
    fd_.reset(fd);
    temporary_ = name;
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd, 0666 & ~mask) != 0) {
        const int err = errno;
        ::unlink(temporary_.c_str());
        throw UsageError("--junit " + path_ + ": " + std::strerror(err));
    }
    write("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites" +
          std::string(kCountsRoom, ' ') + ">\n  <testsuite" + std::string(kCountsRoom, ' ') +
          ">\n");
}

JunitReport::~JunitReport() {
    if (!finished_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

void JunitReport::write(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd_.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw SysError("write(" + temporary_ + ")", errno);
        done += static_cast<std::size_t>(n);
    }
}

void JunitReport::add(std::size_t line, const ordered_json& result) {
    const std::string status = result.value("status", std::string("sandbox_error"));
    double seconds = 0;
    if (const auto usage = result.find("usage"); usage != result.end() && usage->is_object())
        seconds = usage->value("wall_ms", 0.0) / 1000;
    ++tests_;
    seconds_ += seconds;
    char time[32];
    std::snprintf(time, sizeof time, "%.3f", seconds);
    std::string text = "    <testcase name=\"" +
                       xml_text(bounded(testcase_name(line, result), kMessageBound), true) +
                       "\" classname=\"" + xml_text(suite_name_, true) + "\" time=\"" + time +
                       "\">\n";
    if (status != "ok") {
        // The job could not run (a bad line, a sandbox not set up): an error; it ran and did not
        // end well (an exception, an exit status, a limit): a failure.
        const bool error = status == "bad_request" || status == "sandbox_error";
        ++(error ? errors_ : failures_);
        const char* element = error ? "error" : "failure";
        text += std::string("      <") + element + " type=\"" + xml_text(status, true) +
                "\" message=\"" +
                xml_text(bounded(failure_message(result, status), kMessageBound), true) + "\">" +
                xml_text(bounded(traceback_of(result), kOutputBound), false) + "</" + element +
                ">\n";
    }
    if (const std::string out = stream_of(result, "stdout"); !out.empty())
        text +=
            "      <system-out>" + xml_text(bounded(out, kOutputBound), false) + "</system-out>\n";
    if (const std::string err = stream_of(result, "stderr"); !err.empty())
        text +=
            "      <system-err>" + xml_text(bounded(err, kOutputBound), false) + "</system-err>\n";
    write(text + "    </testcase>\n");
}

void JunitReport::finish(std::chrono::duration<double> elapsed) {
    write("  </testsuite>\n</testsuites>\n");
    char counts[kCountsRoom + 1];
    const std::string name = xml_text(suite_name_, true);
    // Both opening elements start where the constructor wrote them: past the XML declaration
    // (39 bytes) and "<testsuites" (11), then past that room, ">\n  <testsuite" (14).
    const int suites = std::snprintf(counts, sizeof counts,
                                     " name=\"pysandbox batch\" tests=\"%zu\" failures=\"%zu\" "
                                     "errors=\"%zu\" time=\"%.3f\"",
                                     tests_, failures_, errors_, elapsed.count());
    const off_t suites_at = 39 + 11;
    if (::pwrite(fd_.get(), counts, static_cast<std::size_t>(suites), suites_at) != suites)
        throw SysError("pwrite(" + temporary_ + ")", errno);
    std::snprintf(counts, sizeof counts, "%.3f\"", seconds_);
    const auto attributes = [&](const std::string& suite_name) {
        return " name=\"" + suite_name + "\" tests=\"" + std::to_string(tests_) + "\" failures=\"" +
               std::to_string(failures_) + "\" errors=\"" + std::to_string(errors_) +
               "\" skipped=\"0\" time=\"" + counts;
    };
    std::string suite = attributes(name);
    if (suite.size() > kCountsRoom) suite = attributes("jobs");  // a name too long for the room
    const off_t suite_at = suites_at + static_cast<off_t>(kCountsRoom) + 14;
    if (::pwrite(fd_.get(), suite.data(), suite.size(), suite_at) !=
        static_cast<ssize_t>(suite.size()))
        throw SysError("pwrite(" + temporary_ + ")", errno);
    if (::fsync(fd_.get()) != 0) throw SysError("fsync(" + temporary_ + ")", errno);
    if (::rename(temporary_.c_str(), path_.c_str()) != 0)
        throw SysError("rename(" + temporary_ + " -> " + path_ + ")", errno);
    finished_ = true;
}

}  // namespace pysandbox
