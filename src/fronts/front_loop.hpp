#pragma once
// What the fronts that serve a stream of lines (session, mcp, batch) do alike: the signals that
// end them, root's groups dropped, one poll loop with requests in and results out, the first
// reason to stop and its exit code, the output flushed at the end, and the "pysandbox: " lines on
// stderr. Each front adds its own watchers to the loop and says what a line, a signal and the end
// of input mean to it.

#include <cstddef>
#include <functional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fronts/line_io.hpp"
#include "sys/poller.hpp"
#include "sys/signal_fd.hpp"

namespace pysandbox {

// One line on stderr: "pysandbox: <line>" (`who`: "pysandbox mcp", "pysandbox batch").
void say(std::string_view line, std::string_view who = "pysandbox");

// A line of nothing but spaces, tabs and a carriage return: no request.
bool is_blank(std::string_view line);

// Python brackets opened minus closed in `code`, outside strings and comments (a string ends with
// its line: one over several lines is not followed). A terminal's REPL and a kernel's
// is_complete ask it whether a statement goes on.
int open_brackets(std::string_view code);

class FrontLoop {
  public:
    // Blocks sys::kStopSignals, the signals `run` forwards to its script, before the first sandbox
    // is cloned so that none is lost; each ends the front as watch_signals says. Root's
    // supplementary groups (0 among them) must not follow the sandboxes, and nothing inside can
    // drop them once setgroups is denied: dropped here.
    FrontLoop(bool privileged, int input_fd, std::size_t max_line);
    FrontLoop(const FrontLoop&) = delete;
    FrontLoop& operator=(const FrontLoop&) = delete;

    sys::Poller& poller() { return poller_; }
    LineReader& input() { return input_; }
    LineWriter& output() { return output_; }

    // Adds the watchers, in the poll order of the call: `on_signal` gets each signal taken; the
    // input is read while `reading()` says so; the output written as it can take it.
    void watch_signals(std::function<void(int sig)> on_signal);
    void watch_lines(std::function<bool()> reading);

    // A message, as one line of JSON.
    void send(const nlohmann::ordered_json& message);
    // Polls (at most `poll_ms` a round) until what was sent is written, or the reader is gone.
    void flush(int poll_ms);

    // The first reason to stop wins, with its exit code: false when the front was stopping.
    bool stop(int exit_code);
    bool stopping() const { return stopping_; }
    int exit_code() const { return exit_code_; }

  private:
    sys::SignalFd signals_;
    sys::Poller poller_;
    LineReader input_;
    LineWriter output_;
    bool stopping_ = false;
    int exit_code_ = 0;
};

}  // namespace pysandbox
