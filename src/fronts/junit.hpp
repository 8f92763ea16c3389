#pragma once
// `pysandbox batch --junit FILE`: a JUnit XML report, one testcase a job, for CI systems
// (Jenkins, GitLab) that read testsuites/testsuite/testcase with failure and error elements.
// The report is written as jobs finish, into a new file beside FILE that replaces FILE only at
// the end (rename: FILE, even a symlink, is replaced and never followed); the counts in its
// opening elements are filled in last. Job output is hostile: every byte that XML 1.0 cannot
// carry is escaped or replaced, and each stream is cut to a bound.

#include <chrono>
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "sys/unique_fd.hpp"

namespace pysandbox {

class JunitReport {
  public:
    // Creates the new file beside `path` (its directory must exist and be writable). Throws
    // UsageError naming `path` and the reason.
    JunitReport(std::string path, std::string suite_name);
    ~JunitReport();  // a report never finished is removed: FILE is left as it was
    JunitReport(const JunitReport&) = delete;
    JunitReport& operator=(const JunitReport&) = delete;

    // One job's testcase from its result (run or bad_request) and its line in the input.
    void add(std::size_t line, const nlohmann::ordered_json& result);

    // Closes the elements, writes the counts and puts the report in place of FILE. Throws
    // std::system_error when it cannot.
    void finish(std::chrono::duration<double> elapsed);

  private:
    void write(const std::string& text);

    std::string path_;
    std::string temporary_;
    std::string suite_name_;
    sys::UniqueFd fd_;
    std::size_t tests_ = 0;
    std::size_t failures_ = 0;
    std::size_t errors_ = 0;
    double seconds_ = 0;  // the jobs' own wall-clock times
    bool finished_ = false;
};

// Text fit for XML 1.0 character data or an attribute value: markup escaped (&, <, >, ", '),
// tab, newline and carriage return as character references in attributes, bytes that are not
// well-formed UTF-8 as U+FFFD, and characters XML 1.0 forbids (other C0 controls, U+FFFE,
// U+FFFF) as the visible text \xNN or \uFFFE.
std::string xml_text(std::string_view text, bool attribute);

}  // namespace pysandbox
