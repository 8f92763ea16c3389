#include "fronts/front_loop.hpp"

#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>

#include "report/json_text.hpp"
#include "sys/errors.hpp"

namespace pysandbox {

void say(std::string_view line, std::string_view who) {
    std::cerr << who << ": " << line << std::endl;
}

bool is_blank(std::string_view line) {
    return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

int open_brackets(std::string_view code) {
    int depth = 0;
    char quote = 0;
    for (std::size_t i = 0; i < code.size(); ++i) {
        const char c = code[i];
        if (quote != 0) {
            if (c == '\\')
                ++i;
            else if (c == quote || c == '\n')
                quote = 0;
        } else if (c == '#') {
            while (i + 1 < code.size() && code[i + 1] != '\n') ++i;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '(' || c == '[' || c == '{') {
            ++depth;
        } else if (c == ')' || c == ']' || c == '}') {
            --depth;
        }
    }
    return depth;
}

FrontLoop::FrontLoop(bool privileged, int input_fd, std::size_t max_line)
    : signals_{sys::kStopSignals}, input_(input_fd, max_line), output_(STDOUT_FILENO) {
    if (privileged) check_sys(::setgroups(0, nullptr), "setgroups(0, {})");
}

void FrontLoop::watch_signals(std::function<void(int sig)> on_signal) {
    poller_.watch(
        [this] {
            return sys::Poller::Interest{signals_.get(), POLLIN};
        },
        [this, on_signal = std::move(on_signal)](short) {
            if (const int sig = signals_.take(); sig != 0) on_signal(sig);
        });
}

void FrontLoop::watch_lines(std::function<bool()> reading) {
    pysandbox::watch_lines(poller_, input_, output_, std::move(reading));
}

void FrontLoop::send(const nlohmann::ordered_json& message) {
    output_.write(dump_line(message) + "\n");
}

void FrontLoop::flush(int poll_ms) {
    while (!output_.flushed()) poller_.poll_once(poll_ms);
}

bool FrontLoop::stop(int exit_code) {
    if (stopping_) return false;
    stopping_ = true;
    exit_code_ = exit_code;
    return true;
}

}  // namespace pysandbox
